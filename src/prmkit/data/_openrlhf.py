"""OpenRLHF's process reward dataset: one text with a placeholder token after every step, and a label list.

OpenRLHF (``openrlhf/datasets/process_reward_dataset.py``, trained by ``openrlhf.cli.train_prm``)
reads ``record[input_key]`` and ``record[label_key]``; the placeholder token marks where each step's
label goes, and the i-th label belongs to the i-th placeholder. Labels are either reward tokens
(``"+"`` / ``"-"``, hard) or floats (soft targets). Its example script trains on Math-Shepherd with
``--input_key input --label_key value --placeholder_token ки --reward_tokens + -``, which are the
defaults here.
"""

from __future__ import annotations

from typing import Any

from prmkit._fields import Fields
from prmkit.data._answers import extract_answer_is
from prmkit.data._format import Format
from prmkit.data._math_shepherd import parse_tagged, unchanged_tagged
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import NEUTRAL_POLICIES, Problem, Step, StepLabel, Trace, binarize

__all__ = ["OpenRLHFFormat"]

_UNLABELED = ("truncate", "error")


def _at(f: Fields, key: str, i: int, reason: str) -> FormatError:
    """An error located at element ``i`` of the list at ``key`` (``value[2]``)."""
    return FormatError(reason, path=f.path, line=f.line, field=f"{f.where(key)}[{i}]")


class OpenRLHFFormat(Format):
    """OpenRLHF PRM rows, ``{"input": "... ки ... ки", "value": ["+", "-"]}`` by default.

    Reading: steps are the texts before each placeholder (whitespace, a leading ``Step k:`` marker
    and the placeholder itself are not part of a step). The problem is the text before
    ``Step 1:`` when the solution is written that way (Math-Shepherd style), else the text before the
    last newline that precedes the first placeholder; when neither exists the problem is left empty
    and the import report gets an issue. ``"+"`` / ``"-"`` (``reward_tokens[0]`` / ``[1]``) become
    hard labels +1 / -1 with source ``"mc_hard"``; float labels become soft labels (source
    ``"mc_soft"``) and must lie in [0, 1]. The number of labels must equal the number of
    placeholders. ``label_source`` and ``labeler`` override the labels' provenance.

    Writing: a trace read from this format whose problem and steps are unchanged is written back
    verbatim (labels replaced by the current ones). Any other trace uses the template
    ``problem + "\\n" + "\\n".join(step + " " + placeholder)``. Labels are reward tokens from
    :func:`prmkit.trace.binarize` (``neutral``, ``threshold``), or the soft values themselves when
    every written label is soft (``soft=None``; ``soft=True`` / ``False`` forces one kind, hard
    labels then becoming 1.0 / 0.0). Steps without a verdict: ``unlabeled="truncate"`` cuts the
    trace after its first wrong step (labels after it are often not given, as in ProcessBench);
    an unlabelled step before any wrong one, or ``unlabeled="error"``, raises
    :class:`~prmkit.errors.PrmkitError`.

    Options ``input_key``, ``label_key``, ``placeholder_token``, ``reward_tokens`` mirror OpenRLHF's
    arguments; ``keep_extra`` keeps unknown keys in ``trace.meta["openrlhf"]["extra"]``.

    >>> from prmkit._fields import Fields
    >>> rec = {"input": "1+1?\\n1+1=2 ки\\nSo 2 ки", "value": ["+", "-"]}
    >>> [t] = OpenRLHFFormat().decode(Fields(rec))
    >>> t.problem.text, [s.text for s in t.steps], [s.label().value for s in t.steps]
    ('1+1?', ['1+1=2', 'So 2'], [1, -1])
    >>> OpenRLHFFormat().encode(t) == rec
    True
    """

    name = "openrlhf"
    description = "OpenRLHF process reward dataset: placeholder-tagged input + label list"

    def __init__(self, *, input_key: str = "input", label_key: str = "value",
                 placeholder_token: str = "\u043a\u0438",
                 reward_tokens: tuple[str, str] | list[str] = ("+", "-"),
                 label_source: str | None = None, labeler: str | None = None,
                 keep_extra: bool = False, neutral: str = "positive", threshold: float = 0.5,
                 soft: bool | None = None, unlabeled: str = "truncate") -> None:
        if neutral not in NEUTRAL_POLICIES:
            raise PrmkitError(f"openrlhf: neutral must be one of {NEUTRAL_POLICIES}, got {neutral!r}")
        if unlabeled not in _UNLABELED:
            raise PrmkitError(f"openrlhf: unlabeled must be one of {_UNLABELED}, got {unlabeled!r}")
        if len(reward_tokens) != 2 or reward_tokens[0] == reward_tokens[1]:
            raise PrmkitError("openrlhf: reward_tokens is (positive, negative), two different tokens")
        if not placeholder_token.strip():
            raise PrmkitError("openrlhf: placeholder_token must not be blank")
        if input_key == label_key:
            raise PrmkitError("openrlhf: input_key and label_key must differ")
        super().__init__(input_key=input_key, label_key=label_key,
                         placeholder_token=placeholder_token, reward_tokens=list(reward_tokens),
                         label_source=label_source, labeler=labeler, keep_extra=keep_extra,
                         neutral=neutral, threshold=threshold, soft=soft, unlabeled=unlabeled)
        self.input_key, self.label_key = input_key, label_key
        self.placeholder = placeholder_token
        self.positive, self.negative = reward_tokens
        self.label_source, self.labeler = label_source, labeler
        self.keep_extra, self.neutral, self.threshold = keep_extra, neutral, threshold
        self.soft, self.unlabeled = soft, unlabeled

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and isinstance(record.get("input"), str)
                and isinstance(record.get("value"), list) and "\u043a\u0438" in record["input"])

    # -- reading -------------------------------------------------------------------------------------
    def decode(self, f: Fields) -> list[Trace]:
        keys = (self.input_key, self.label_key)
        if not self.keep_extra:
            f.only(keys)
        text = f.str(self.input_key)
        raw = f.list(self.label_key)
        try:
            parsed = parse_tagged(text, self.placeholder)
        except ValueError as e:
            raise f.error(self.input_key, str(e)) from None
        if len(raw) != len(parsed.tags):
            raise f.error(self.label_key, f"{len(raw)} labels for {len(parsed.tags)} placeholders "
                                          f"({self.placeholder!r}) in {self.input_key}")
        labels = self._labels(f, raw)
        if parsed.problem == (0, 0):
            self.issue(f, self.input_key, "cannot tell the problem from the first step (no "
                                          "'Step 1:' and no newline before the first placeholder); "
                                          "problem text left empty")
        steps = [Step(text[a:b], span=(a, b), labels=[lab])
                 for (a, b), lab in zip(parsed.steps, labels, strict=True)]
        meta: dict[str, Any] = {}
        if parsed.tail:
            meta["tail"] = parsed.tail
        if self.keep_extra and (extra := f.extra(keys)):
            meta["extra"] = extra
        return [Trace(id=self.default_id(f), problem=Problem(text[slice(*parsed.problem)]),
                      steps=steps, final_answer=extract_answer_is(steps[-1].text), source="openrlhf",
                      text=text, meta={self.name: meta} if meta else {})]

    def _labels(self, f: Fields, raw: list[Any]) -> list[StepLabel]:
        if all(isinstance(x, str) for x in raw):
            out = []
            for i, x in enumerate(raw):
                if x not in (self.positive, self.negative):
                    raise _at(f, self.label_key, i, f"{x!r} is not a reward token (expected "
                                                    f"{self.positive!r} or {self.negative!r})")
                out.append(StepLabel(1 if x == self.positive else -1, kind="hard",
                                     source=self.label_source or "mc_hard", labeler=self.labeler))
            return out
        out = []
        for i in range(len(raw)):
            v = f.item(self.label_key, i, float)  # refuses strings mixed with numbers, and bools
            if not 0 <= v <= 1:
                raise _at(f, self.label_key, i, f"{v!r}: a soft label lies in [0, 1]")
            out.append(StepLabel(v, kind="soft", source=self.label_source or "mc_soft",
                                 labeler=self.labeler))
        return out

    # -- writing -------------------------------------------------------------------------------------
    def encode(self, trace: Trace) -> dict[str, Any]:
        steps, verdicts = self._written_steps(trace)
        labels = trace.labels()[:len(steps)]
        soft = self.soft if self.soft is not None else all(
            lab is not None and lab.kind == "soft" for lab in labels)
        if soft:
            values: list[Any] = [lab.value if lab.kind == "soft" else float(v)
                                 for lab, v in zip(labels, verdicts, strict=True)]
        else:
            values = [self.positive if v else self.negative for v in verdicts]
        meta = trace.meta.get(self.name, {})
        parsed = (unchanged_tagged(trace, self.placeholder) if len(steps) == len(trace.steps)
                  else None)
        if parsed is not None:
            text = trace.text or ""
        else:
            body = "\n".join(f"{s.text} {self.placeholder}" for s in steps)
            text = (f"{trace.problem.text}\n{body}" if trace.problem.text else body)
            text += meta.get("tail", "") if len(steps) == len(trace.steps) else ""
        record = {self.input_key: text, self.label_key: values}
        record.update(meta.get("extra", {}))
        return record

    def _written_steps(self, trace: Trace) -> tuple[list[Step], list[bool]]:
        """The steps to write (maybe cut after the first wrong one) and their verdicts."""
        if not trace.steps:
            raise PrmkitError(f"trace {trace.id}: OpenRLHF needs at least one step")
        verdicts = [binarize(lab, neutral=self.neutral, threshold=self.threshold)
                    for lab in trace.labels()]
        if None not in verdicts:
            return trace.steps, verdicts  # type: ignore[return-value]
        i = verdicts.index(None)
        wrong = verdicts.index(False) if False in verdicts else None
        if self.unlabeled == "error" or wrong is None or i < wrong:
            raise PrmkitError(f"trace {trace.id}: step {i} has no label (or a neutral one under "
                              f"neutral='ignore'); OpenRLHF needs a label for every placeholder"
                              + ("" if self.unlabeled == "error" else
                                 " up to the first wrong step"))
        return trace.steps[:wrong + 1], verdicts[:wrong + 1]  # type: ignore[return-value]
