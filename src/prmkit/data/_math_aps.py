"""MATH-APS (OpenR; OmegaPRM, Luo et al. 2024): Monte Carlo values of solution prefixes.

A record is ``{"question", "final_answer", "question_id", "reasoning_steps": [{"solution_prefix",
"mc_value"}, ...]}``. Each ``solution_prefix`` is the question followed by a partial solution, and
``mc_value`` the share of rollouts from that prefix that reached ``final_answer``.

The prefixes of one record do not form one chain. They are the states of an OmegaPRM search tree:
in the public sample, entry 0 is the bare question (the root), many entries are complete rollouts
from the root, and a few are intermediate states (prefixes of other entries) with rollouts of their
own; the same state can also appear twice with two estimates. So a record is read as a tree:

- a *state* is a distinct prefix; its parent is the longest other state that is a prefix of it;
- every leaf state gives one trace whose steps are the increments along the path from the root to
  that leaf, each step labelled with the ``mc_value`` of its state (one label per entry, so a state
  listed twice has two labels); a record whose prefixes do form a chain gives exactly one trace;
- an entry equal to the bare question has no step: it is the value of the problem itself and goes
  to ``trace.meta["math_aps"]["root"]``.

A state inside the tree therefore appears in every trace through it, as it does in OpenR's own
tree preprocessing; count labels per entry (``label.meta["math_aps"]["entry"]``) when that matters.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any

from prmkit._fields import Fields
from prmkit.data._answers import extract_boxed
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import NEUTRAL_POLICIES, Problem, Step, StepLabel, Trace, binarize

__all__ = ["MathAPSFormat"]


class MathAPSFormat(Format):
    """MATH-APS / OmegaPRM prefix-value records, read as search trees (see the module docstring).

    Reading: one trace per leaf of the record's prefix tree (``id`` ``<file>:<line>``, with
    ``#k`` appended when the record gives several). ``problem`` is the question with the record's
    ``final_answer`` as its answer; ``trace.text`` is the leaf's whole prefix, and each step's span
    points at its increment with the leading whitespace (kept in ``step.meta["math_aps"]["sep"]``)
    left out. Labels are soft (source ``"mc_soft"``, labeler ``"omegaprm"``), each with the index of
    the entry it came from in ``label.meta["math_aps"]["entry"]``. ``final_answer`` is the leaf's
    last ``\\boxed{}`` (None for a partial solution). Every prefix must start with the question,
    and ``mc_value`` lie in [0, 1].

    Writing: :meth:`write` merges consecutive traces of the same record back into that record
    (:meth:`encode_records`); :meth:`encode` writes the entries one trace holds, which is the whole
    record when the record gave one trace. An entry's prefix is the problem text followed by each
    step's separator and text, so edits show. A step whose labels came from no entry (a trace
    from another format, or a step added later) becomes a new entry from its latest label: soft
    values as they are, hard ones as 1.0 / 0.0 through :func:`prmkit.trace.binarize` (``neutral``),
    unlabelled steps none; its separator is ``separator`` (``"\\n\\n"``). ``question_id`` comes from
    the trace's meta, else ``problem.id`` when it is an integer.

    ``keep_extra`` keeps unknown keys of the record (``trace.meta["math_aps"]["extra"]``) and of its
    entries (the label's ``meta["math_aps"]["extra"]``) and writes them back.

    >>> from prmkit._fields import Fields
    >>> rec = {"question": "1+1?", "final_answer": "2", "question_id": 3, "reasoning_steps": [
    ...     {"solution_prefix": "1+1?", "mc_value": 0.5},
    ...     {"solution_prefix": "1+1?\\n\\nAdd.", "mc_value": 1.0},
    ...     {"solution_prefix": "1+1?\\n\\nAdd.\\n\\n$\\\\boxed{2}$", "mc_value": 1.0}]}
    >>> [t] = MathAPSFormat().decode(Fields(rec))
    >>> [s.text for s in t.steps], [s.label().value for s in t.steps], t.final_answer
    (['Add.', '$\\\\boxed{2}$'], [1.0, 1.0], '2')
    >>> MathAPSFormat().encode(t) == rec
    True
    """

    name = "math_aps"
    description = "MATH-APS / OmegaPRM solution prefixes with Monte Carlo values (a tree per record)"

    _KEYS = ("question", "final_answer", "reasoning_steps", "question_id")
    _ENTRY_KEYS = ("solution_prefix", "mc_value")

    def __init__(self, *, keep_extra: bool = False, neutral: str = "positive",
                 threshold: float = 0.5, separator: str = "\n\n") -> None:
        if neutral not in NEUTRAL_POLICIES:
            raise PrmkitError(f"math_aps: neutral must be one of {NEUTRAL_POLICIES}, got {neutral!r}")
        super().__init__(keep_extra=keep_extra, neutral=neutral, threshold=threshold,
                         separator=separator)
        self.keep_extra, self.neutral, self.threshold = keep_extra, neutral, threshold
        self.separator = separator

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and isinstance(record.get("question"), str)
                and isinstance(record.get("reasoning_steps"), list)
                and "final_answer" in record)

    # -- reading -------------------------------------------------------------------------------------
    def decode(self, f: Fields) -> list[Trace]:
        if not self.keep_extra:
            f.only(self._KEYS)
        question = f.str("question")
        answer = f.str("final_answer")
        qid = f.get("question_id", int)
        entries = f.sub_list("reasoning_steps")
        if not entries:
            raise f.error("reasoning_steps", "empty: no solution prefix to read")
        prefixes, values, extras = [], [], []
        for e in entries:
            if not self.keep_extra:
                e.only(self._ENTRY_KEYS)
            prefix = e.str("solution_prefix")
            value = e.get("mc_value", float)
            if not prefix.startswith(question):
                raise e.error("solution_prefix", "does not start with the record's question")
            if not 0 <= value <= 1:
                raise e.error("mc_value", f"{value!r} is not a probability in [0, 1]")
            prefixes.append(prefix)
            values.append(value)
            extras.append(e.extra(self._ENTRY_KEYS) if self.keep_extra else {})

        def label(i: int) -> StepLabel:
            info: dict[str, Any] = {"entry": i}
            if extras[i]:
                info["extra"] = extras[i]
            return StepLabel(values[i], source="mc_soft", kind="soft", labeler="omegaprm",
                             meta={self.name: info})

        root = [{"entry": i, "mc_value": values[i], **({"extra": extras[i]} if extras[i] else {})}
                for i, p in enumerate(prefixes) if p == question]
        states, entries_of = _states(prefixes, question)
        parent = _parents(states)
        base = self.default_id(f)
        meta: dict[str, Any] = {"question_id": qid, "record": base}
        if root:
            meta["root"] = root
        if self.keep_extra and (extra := f.extra(self._KEYS)):
            meta["extra"] = extra
        inner = set(parent)
        leaves = [s for s in range(len(states)) if s not in inner]
        traces = []
        for k, leaf in enumerate(leaves):
            path = [leaf]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            text = states[leaf]
            steps, start = [], len(question)
            for s in reversed(path):
                end = len(states[s])
                a = start
                while a < end and text[a].isspace():
                    a += 1
                steps.append(Step(text[a:end], span=(a, end), meta={self.name: {"sep": text[start:a]}},
                                  labels=[label(i) for i in entries_of[s]]))
                start = end
            traces.append(Trace(id=base if len(leaves) == 1 else f"{base}#{k}",
                                problem=Problem(question, answer=answer), steps=steps,
                                final_answer=extract_boxed(text[len(question):]), source="math_aps",
                                text=text, meta={self.name: copy.deepcopy(meta)}))
        if not traces:  # only bare-question entries: keep them on a trace with no step
            traces.append(Trace(id=base, problem=Problem(question, answer=answer),
                                source="math_aps", text=question, meta={self.name: meta}))
        return traces

    # -- writing -------------------------------------------------------------------------------------
    def encode(self, trace: Trace) -> dict[str, Any]:
        return self.encode_record([trace])

    def encode_record(self, traces: list[Trace]) -> dict[str, Any]:
        """One record from traces of one record (all of them, for a lossless round trip).

        Entries held by several traces (states inside the tree) must agree; an entry that differs
        between two traces raises :class:`~prmkit.errors.PrmkitError`.
        """
        first = traces[0]
        question, answer = first.problem.text, first.problem.answer
        if answer is None:
            raise PrmkitError(f"trace {first.id}: MATH-APS needs the reference answer "
                              "(problem.answer) for final_answer")
        meta = first.meta.get(self.name, {})
        qid = meta.get("question_id")
        if qid is None:
            pid = first.problem.id
            if pid is None or not pid.lstrip("-").isdigit():
                raise PrmkitError(f"trace {first.id}: MATH-APS needs an integer question_id "
                                  "(trace.meta['math_aps']['question_id'] or problem.id)")
            qid = int(pid)
        for t in traces[1:]:
            if (t.problem.text, t.problem.answer) != (question, answer):
                raise PrmkitError(f"traces {first.id} and {t.id} have different problems; they "
                                  "cannot be one MATH-APS record")
        out: dict[int, dict[str, Any]] = {}
        held_by: dict[int, str] = {}

        def put(i: int, entry: dict[str, Any], trace_id: str) -> None:
            if i in out and out[i] != entry:
                raise PrmkitError(f"entry {i} of record {meta.get('record', first.id)} differs "
                                  f"between traces {held_by[i]} and {trace_id}")
            out[i], held_by[i] = entry, trace_id

        tagged = [lab.meta[self.name]["entry"] for t in traces for s in t.steps for lab in s.labels
                  if self.name in lab.meta]
        tagged += [r["entry"] for t in traces for r in t.meta.get(self.name, {}).get("root", [])]
        new = max(tagged, default=-1) + 1
        for t in traces:
            for r in t.meta.get(self.name, {}).get("root", []):
                put(r["entry"], {"solution_prefix": question, "mc_value": r["mc_value"],
                                 **r.get("extra", {})}, t.id)
            prefix = question
            for s in t.steps:
                prefix += s.meta.get(self.name, {}).get("sep", self.separator) + s.text
                mine = [lab for lab in s.labels if self.name in lab.meta]
                for lab in mine:
                    info = lab.meta[self.name]
                    put(info["entry"], {"solution_prefix": prefix, "mc_value": lab.value,
                                        **info.get("extra", {})}, t.id)
                if not mine and (value := self._value(s.label())) is not None:
                    put(new, {"solution_prefix": prefix, "mc_value": value}, t.id)
                    new += 1
        if not out:
            raise PrmkitError(f"trace {first.id}: no labelled step, so no MATH-APS entry to write")
        record = {"question": question, "final_answer": answer,
                  "reasoning_steps": [out[i] for i in sorted(out)], "question_id": qid}
        record.update(meta.get("extra", {}))
        return record

    def _value(self, label: StepLabel | None) -> float | None:
        """The mc_value written for a label that came from no entry (None: no entry)."""
        if label is None or label.kind == "soft":
            return None if label is None else label.value
        verdict = binarize(label, neutral=self.neutral, threshold=self.threshold)
        return None if verdict is None else float(verdict)

    def group(self, traces: Iterable[Trace]) -> Iterator[list[Trace]]:
        """Consecutive traces of the same record, together (what :meth:`Format.write` writes as one).

        Traces belong to the same record when they carry the same ``meta["math_aps"]["record"]``
        (its ``<file>:<line>``) and problem; traces from elsewhere are a record each.
        """
        group: list[Trace] = []
        key: Any = None
        for t in traces:
            rec = t.meta.get(self.name, {}).get("record")
            k = None if rec is None else (rec, t.problem.text, t.problem.answer)
            if group and (k is None or k != key):
                yield group
                group = []
            group.append(t)
            key = k
        if group:
            yield group

    def encode_records(self, traces: Iterable[Trace]) -> Iterator[dict[str, Any]]:
        """Records from a stream of traces, merging consecutive traces of the same record (see
        :meth:`group`)."""
        for group in self.group(traces):
            yield self.encode_record(group)


def _states(prefixes: list[str], question: str) -> tuple[list[str], list[list[int]]]:
    """The distinct non-root prefixes in first-seen order, and the entries of each."""
    index: dict[str, int] = {}
    states: list[str] = []
    entries_of: list[list[int]] = []
    for i, p in enumerate(prefixes):
        if p == question:
            continue
        if p not in index:
            index[p] = len(states)
            states.append(p)
            entries_of.append([])
        entries_of[index[p]].append(i)
    return states, entries_of


def _parents(states: list[str]) -> list[int | None]:
    """For each state, the longest other state that is a prefix of it (None: hangs off the root).

    States are distinct, so the states that are prefixes of one string are nested and the longest
    is its direct parent. Visiting candidates longest first stops at the first hit.
    """
    by_len = sorted(range(len(states)), key=lambda s: len(states[s]), reverse=True)
    parent: list[int | None] = []
    for text in states:
        found = None
        for t in by_len:
            if len(states[t]) < len(text) and text.startswith(states[t]):
                found = t
                break
        parent.append(found)
    return parent
