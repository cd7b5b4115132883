"""TRL's "stepwise supervision" dataset type: ``{"prompt", "completions", "labels"}``.

TRL (``docs/source/dataset_formats.md``) stores a solution as a list of step strings with one
boolean per step, ``True`` for a correct step; its PRM trainer joins the steps with a separator and
puts each label on the separator after its step. Only the standard (string) prompt is supported;
a conversational prompt (a list of messages) is rejected with a located error.
"""

from __future__ import annotations

from typing import Any

from prmkit._fields import Fields
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import NEUTRAL_POLICIES, Problem, Step, StepLabel, Trace, binarize

__all__ = ["TRLStepwiseFormat"]

_UNLABELED = ("truncate", "error")


class TRLStepwiseFormat(Format):
    """TRL stepwise-supervision rows.

    Reading: ``prompt`` becomes the problem, each completion a step with a hard label +1
    (``True``) or -1 (``False``). Where the labels came from is not in the data: ``label_source``
    (default ``"human"``) and ``labeler`` say it. ``completions`` and ``labels`` must be non-empty
    and of equal length.

    Writing: labels are :func:`prmkit.trace.binarize` verdicts (``neutral``, ``threshold``). Steps
    with no verdict: ``unlabeled="truncate"`` (default) cuts the completion list after the first
    wrong step, as when only the first error is known (ProcessBench); an unlabelled step before
    any wrong one raises :class:`~prmkit.errors.PrmkitError` naming the trace and step, as does
    any unlabelled step under ``unlabeled="error"``.

    ``keep_extra`` keeps keys beyond the three in ``trace.meta["trl_stepwise"]["extra"]`` (an
    error otherwise) and writes them back.

    >>> from prmkit._fields import Fields
    >>> rec = {"prompt": "9.8 or 9.11?", "completions": ["0.8 > 0.11.", "So 9.11."],
    ...        "labels": [True, False]}
    >>> [t] = TRLStepwiseFormat().decode(Fields(rec))
    >>> [s.label().value for s in t.steps], t.first_error()
    ([1, -1], 1)
    >>> TRLStepwiseFormat().encode(t) == rec
    True
    """

    name = "trl_stepwise"
    description = "TRL stepwise supervision: prompt, completions (steps), boolean labels"

    _KEYS = ("prompt", "completions", "labels")

    def __init__(self, *, label_source: str = "human", labeler: str | None = None,
                 keep_extra: bool = False, neutral: str = "positive", threshold: float = 0.5,
                 unlabeled: str = "truncate") -> None:
        if neutral not in NEUTRAL_POLICIES:
            raise PrmkitError(f"trl_stepwise: neutral must be one of {NEUTRAL_POLICIES}, "
                              f"got {neutral!r}")
        if unlabeled not in _UNLABELED:
            raise PrmkitError(f"trl_stepwise: unlabeled must be one of {_UNLABELED}, "
                              f"got {unlabeled!r}")
        super().__init__(label_source=label_source, labeler=labeler, keep_extra=keep_extra,
                         neutral=neutral, threshold=threshold, unlabeled=unlabeled)
        self.label_source, self.labeler, self.keep_extra = label_source, labeler, keep_extra
        self.neutral, self.threshold, self.unlabeled = neutral, threshold, unlabeled

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and isinstance(record.get("prompt"), str)
                and isinstance(record.get("completions"), list)
                and isinstance(record.get("labels"), list)
                and all(isinstance(x, bool) for x in record["labels"]))

    def decode(self, f: Fields) -> list[Trace]:
        if not self.keep_extra:
            f.only(self._KEYS)
        prompt = f.str("prompt")
        completions = f.typed_list("completions", str)
        labels = f.typed_list("labels", bool)
        if not completions:
            raise f.error("completions", "empty: a solution needs at least one step")
        if len(labels) != len(completions):
            raise f.error("labels", f"{len(labels)} labels for {len(completions)} completions; "
                                    "TRL needs one label per step")
        steps = [Step(c, labels=[StepLabel(1 if ok else -1, source=self.label_source, kind="hard",
                                           labeler=self.labeler)])
                 for c, ok in zip(completions, labels, strict=True)]
        meta = {}
        if self.keep_extra and (extra := f.extra(self._KEYS)):
            meta[self.name] = {"extra": extra}
        return [Trace(id=self.default_id(f), problem=Problem(prompt), steps=steps,
                      source="trl_stepwise", meta=meta)]

    def encode(self, trace: Trace) -> dict[str, Any]:
        if not trace.steps:
            raise PrmkitError(f"trace {trace.id}: TRL stepwise supervision needs at least one step")
        verdicts = [binarize(lab, neutral=self.neutral, threshold=self.threshold)
                    for lab in trace.labels()]
        n = len(verdicts)
        if None in verdicts:
            i = verdicts.index(None)
            wrong = verdicts.index(False) if False in verdicts else None
            if self.unlabeled == "error" or wrong is None or i < wrong:
                raise PrmkitError(
                    f"trace {trace.id}: step {i} has no label (or a neutral one under "
                    f"neutral='ignore') and "
                    + ("unlabeled='error'" if self.unlabeled == "error"
                       else "no step before it is labelled wrong, so the trace cannot be cut"))
            n = wrong + 1
        record: dict[str, Any] = {"prompt": trace.problem.text,
                                  "completions": [s.text for s in trace.steps[:n]],
                                  "labels": verdicts[:n]}
        record.update(trace.meta.get(self.name, {}).get("extra", {}))
        return record
