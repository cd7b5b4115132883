r"""PRM800K raw labels (Lightman et al. 2023, "Let's Verify Step by Step", arXiv:2305.20050).

One record is one labelling session of one model-generated solution: per step, the candidate
``completions`` the labeler rated (-1 bad, 0 neutral / okay, +1 good, null not rated), the
``chosen_completion`` the trajectory went on with, or a ``human_completion`` the labeler wrote when
every candidate was bad (phase 1 only). The file layout is described in openai/prm800k's README.

**One trace per record: the trajectory actually followed.** Step ``i`` of the trace is the chosen
completion of ``label.steps[i]``, or its human completion when there is one and nothing was chosen
(when both are set the chosen one is followed, as the README's reconstruction does, and an issue is
reported). The last ``label.steps`` entry may have neither, because the labelling stopped there:

- ``finish_reason == "found_error"`` (phase 2 stops at the first wrong step): the trajectory is the
  pre-generated solution and that step is part of it, so the trace ends with the **first completion
  rated -1** (in phase 2 that is the pre-generated step, completion 0). Its -1 label makes
  ``trace.first_error()`` point at it. ``step.meta["prm800k"]["followed"]`` says which completion
  was taken, while ``chosen_completion`` stays null as in the file.
- otherwise (``give_up``, ``bad_problem``, completions null, nothing rated -1): nothing was followed,
  so the step is **not** a trace step. It is kept verbatim in ``trace.meta["prm800k"]["open_step"]``
  and written back after the last step; :func:`prm800k_alternatives` still expands its rated
  completions. A ``found_error`` record without a -1 there, or a ``solution`` record that ends like
  this, is reported as an issue.

An empty ``label.steps`` is accepted only for ``bad_problem`` (a trace without steps).

**Labels.** A rating becomes a hard :class:`~prmkit.trace.StepLabel` with ``source="human"``,
``labeler`` = the record's labeler id and ``time`` = its timestamp; a null rating gives no label.
Human completions carry a null rating in the data although the README says labelers wrote "their own
+1 step": they stay unlabelled unless ``label_human_steps=True``, which gives them a +1 label marked
``meta={"prm800k": {"implied": "human_completion"}}`` (written back as the null it was). A chosen
completion without a rating is reported as an issue.

**Neutral ratings.** A 0 rating stays 0 in the label. What it means for training is decided later by
:func:`prmkit.trace.binarize`: its default ``neutral="positive"`` is the paper's convention (Lightman
et al. score solutions treating neutral steps as not wrong; OpenR's PRM800K preprocessing does the
same); ``neutral="ignore"`` masks such steps out, ``neutral="negative"`` is the strict reading.

**Where the rest goes.** ``trace.meta["prm800k"]``: ``labeler``, ``timestamp``, ``generation``, the
two quality-control flags, ``total_time``, ``finish_reason``, ``question`` (the question fields that
are not in :class:`~prmkit.trace.Problem`: the phase-2 ``pre_generated_*`` fields, and a
``ground_truth_answer`` / ``ground_truth_solution`` that is null), ``open_step``, ``label_extra`` and
``extra`` (unknown fields, with ``keep_extra=True``). ``step.meta["prm800k"]``: ``completions``
(every alternative with its text, rating and ``flagged``; the followed one without the text and
rating, which live in the step), ``human_completion`` (likewise), ``chosen_completion`` as in the
file, ``followed`` (a completion index or ``"human"``) and ``extra``. The problem is
``Problem(question.problem, answer=ground_truth_answer, solution=ground_truth_solution)``.

The trace's own fields win on export: a step's text and its latest label (-1/0/+1, or null when it
has none; a soft label cannot be written) become the followed completion's text and rating.

``final_answer`` is the text after the last ``# Answer`` heading of the last step (PRM800K marks the
answer that way), and ``outcome`` is ``answers_equal(final_answer, ground_truth_answer)`` when both
exist, else "unknown". Trace ids are ``<file name>:<line>`` (records carry no id).

>>> from prmkit._fields import Fields
>>> rec = {"labeler": "a1", "timestamp": "2022-07-30T23:23:32", "generation": None,
...        "is_quality_control_question": False, "is_initial_screening_question": False,
...        "question": {"problem": "1+1?", "ground_truth_answer": "2"},
...        "label": {"steps": [
...            {"completions": [{"text": "1+1=3", "rating": -1, "flagged": False},
...                             {"text": "1+1=2", "rating": 1, "flagged": False}],
...             "human_completion": None, "chosen_completion": 1},
...            {"completions": [{"text": "# Answer\n\n2", "rating": 0, "flagged": None}],
...             "human_completion": None, "chosen_completion": 0}],
...            "total_time": 900, "finish_reason": "solution"}}
>>> fmt = PRM800KFormat()
>>> [t] = fmt.decode(Fields(rec, path="p.jsonl", line=1))
>>> [s.text for s in t.steps], [lab.value for lab in t.labels()], t.final_answer, t.outcome
(['1+1=2', '# Answer\n\n2'], [1, 0], '2', 'correct')
>>> [a.steps[-1].text for a in prm800k_alternatives(t)]
['1+1=3']
>>> fmt.encode(t) == rec
True
"""

from __future__ import annotations

import copy
import re
from typing import Any

from prmkit._fields import Fields
from prmkit.data._answers import answers_equal
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace

__all__ = ["PRM800KFormat", "prm800k_alternatives", "FINISH_REASONS"]

#: The values of ``label.finish_reason``.
FINISH_REASONS: tuple[str, ...] = ("solution", "found_error", "give_up", "bad_problem")

_NAME = "prm800k"
_NULL = type(None)
_RECORD_KEYS = ("labeler", "timestamp", "generation", "is_quality_control_question",
                "is_initial_screening_question", "question", "label")
_QUESTION_KEYS = ("problem", "ground_truth_solution", "ground_truth_answer", "pre_generated_steps",
                  "pre_generated_answer", "pre_generated_verifier_score")
_LABEL_KEYS = ("steps", "total_time", "finish_reason")
_STEP_KEYS = ("completions", "human_completion", "chosen_completion")
_COMPLETION_KEYS = ("text", "rating", "flagged")
_HUMAN_KEYS = ("text", "rating", "source", "flagged")
# The parts of a completion that live in the Step (text) and its label (rating).
_OWN = ("text", "rating")
_IMPLIED = {"implied": "human_completion"}
_ANSWER_HEADING = re.compile(r"^[ \t]*#[ \t]*Answer[ \t]*$", re.MULTILINE)


def _final_answer(text: str) -> str | None:
    """The text after the last ``# Answer`` heading line, or None."""
    headings = list(_ANSWER_HEADING.finditer(text))
    if not headings:
        return None
    return text[headings[-1].end():].strip() or None


def _outcome(final_answer: str | None, reference: str | None) -> str:
    if final_answer is None or reference is None:
        return "unknown"
    return "correct" if answers_equal(final_answer, reference) else "incorrect"


def _strip_own(completion: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in completion.items() if k not in _OWN}


class PRM800KFormat(Format):
    """PRM800K raw-label records (JSON Lines; the concatenated pretty-printed sample reads too).

    Options: ``keep_extra`` keeps unknown fields (in the ``extra`` entries of the meta, and inside
    the completion dicts) instead of refusing them, and writes them back; ``label_human_steps``
    gives human-written steps the +1 label the README implies (see the module docstring).
    """

    name = _NAME
    description = "PRM800K raw labels (openai/prm800k phase 1/2 JSONL)"

    def __init__(self, *, keep_extra: bool = False, label_human_steps: bool = False) -> None:
        super().__init__(keep_extra=keep_extra, label_human_steps=label_human_steps)
        self.keep_extra = keep_extra
        self.label_human_steps = label_human_steps

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and "labeler" in record
                and isinstance(record.get("question"), dict)
                and isinstance(record.get("label"), dict) and "steps" in record["label"])

    # -- reading ------------------------------------------------------------------------------------
    def _unknown(self, f: Fields, known: tuple[str, ...]) -> dict[str, Any]:
        """Refuse unknown keys, or return them when ``keep_extra``."""
        if self.keep_extra:
            return f.extra(known)
        f.only(known)
        return {}

    @staticmethod
    def _rating(f: Fields) -> int | None:
        rating = f.get("rating", (int, _NULL))
        if rating not in (-1, 0, 1, None):
            raise f.error("rating", f"must be -1, 0, 1 or null, got {rating!r}")
        return rating

    def _completion(self, f: Fields, human: bool) -> dict[str, Any]:
        """Check one completion (or human completion) and return it as read."""
        self._unknown(f, _HUMAN_KEYS if human else _COMPLETION_KEYS)
        f.str("text")
        self._rating(f)
        f.get("flagged", (bool, _NULL), None)
        if human:
            f.str("source", None, nullable=True)
        return f.obj

    def _label(self, value: int, meta: dict[str, Any]) -> StepLabel:
        return StepLabel(value, source="human", labeler=meta["labeler"], time=meta["timestamp"])

    def decode(self, f: Fields) -> list[Trace]:
        extra = self._unknown(f, _RECORD_KEYS)
        meta: dict[str, Any] = {
            "labeler": f.str("labeler", nullable=True),
            "timestamp": f.str("timestamp", nullable=True),
            "generation": f.get("generation", (int, _NULL)),
            "is_quality_control_question": f.get("is_quality_control_question", bool),
            "is_initial_screening_question": f.get("is_initial_screening_question", bool),
        }
        problem = self._question(f.sub("question"), meta)
        lf = f.sub("label")
        label_extra = self._unknown(lf, _LABEL_KEYS)
        meta["total_time"] = lf.get("total_time", (int, _NULL))
        finish = lf.str("finish_reason")
        if finish not in FINISH_REASONS:
            raise lf.error("finish_reason", f"must be one of {', '.join(FINISH_REASONS)}, "
                                            f"got {finish!r}")
        meta["finish_reason"] = finish
        step_fields = lf.sub_list("steps")
        if not step_fields and finish != "bad_problem":
            raise lf.error("steps", f"empty, which only a bad_problem record may be (finish_reason "
                                    f"is {finish!r})")
        steps: list[Step] = []
        for i, sf in enumerate(step_fields):
            step = self._step(sf, last=i == len(step_fields) - 1, finish=finish, meta=meta)
            if step is None:
                meta["open_step"] = copy.deepcopy(sf.obj)
            else:
                steps.append(step)
        if label_extra:
            meta["label_extra"] = label_extra
        if extra:
            meta["extra"] = extra
        final_answer = _final_answer(steps[-1].text) if steps else None
        return [Trace(id=self.default_id(f), problem=problem, steps=steps,
                      final_answer=final_answer, outcome=_outcome(final_answer, problem.answer),
                      source=_NAME, meta={_NAME: meta})]

    def _question(self, qf: Fields, meta: dict[str, Any]) -> Problem:
        self._unknown(qf, _QUESTION_KEYS)
        text = qf.str("problem")
        answer = qf.str("ground_truth_answer", nullable=True)
        solution = qf.str("ground_truth_solution", None, nullable=True)
        qf.typed_list("pre_generated_steps", str, None)
        qf.str("pre_generated_answer", None, nullable=True)
        qf.get("pre_generated_verifier_score", (float, _NULL), None)
        # Everything Problem does not hold, including a null reference (kept so it is written back
        # as null rather than dropped).
        rest = {k: copy.deepcopy(v) for k, v in qf.obj.items()
                if k != "problem" and not (k in ("ground_truth_answer", "ground_truth_solution")
                                           and isinstance(v, str))}
        meta["question"] = rest
        return Problem(text, answer=answer, solution=solution)

    def _step(self, sf: Fields, *, last: bool, finish: str, meta: dict[str, Any]) -> Step | None:
        """The trace step for ``label.steps[i]``, or None for an open last step."""
        step_extra = self._unknown(sf, _STEP_KEYS)
        comp_fields = sf.sub_list("completions", nullable=True)
        completions = [self._completion(c, human=False) for c in comp_fields or []]
        if sf.get("human_completion", (dict, _NULL)) is not None:
            human = self._completion(sf.sub("human_completion"), human=True)
        else:
            human = None
        chosen = sf.get("chosen_completion", (int, _NULL))

        followed: int | str | None
        if chosen is not None:
            if not 0 <= chosen < len(completions):
                raise sf.error("chosen_completion",
                               f"index {chosen} outside the {len(completions)} completions")
            if human is not None:
                self.issue(sf, "human_completion", "set together with chosen_completion; the trace "
                           "follows chosen_completion and keeps the human completion in step meta")
            followed = chosen
        elif human is not None:
            followed = "human"
        elif not last:
            raise sf.error("chosen_completion", "null without a human_completion before the last "
                           "step, so the trajectory cannot be followed past it")
        elif finish == "found_error":
            followed = next((j for j, c in enumerate(completions) if c["rating"] == -1), None)
            if followed is None:
                self.issue(sf, "completions", "finish_reason is found_error but no completion of "
                           "the last step is rated -1; the step is kept as an open step")
                return None
        else:
            if finish == "solution":
                self.issue(sf, "chosen_completion", "finish_reason is solution but the last step "
                           "has neither a chosen nor a human completion; kept as an open step")
            return None

        taken = human if followed == "human" else completions[followed]  # type: ignore[index]
        if followed != "human" and taken["rating"] is None:
            self.issue(sf, f"completions[{followed}].rating",
                       "the followed completion is not rated; the step has no label")
        labels: list[StepLabel] = []
        if taken["rating"] is not None:
            labels.append(self._label(taken["rating"], meta))
        elif followed == "human" and self.label_human_steps:
            lab = self._label(1, meta)
            lab.meta = {_NAME: dict(_IMPLIED)}
            labels.append(lab)

        step_meta: dict[str, Any] = {
            "completions": None if comp_fields is None else [
                _strip_own(c) if j == followed else dict(c) for j, c in enumerate(completions)],
            "human_completion": None if human is None else (
                _strip_own(human) if followed == "human" else dict(human)),
            "chosen_completion": chosen,
            "followed": followed,
        }
        if step_extra:
            step_meta["extra"] = step_extra
        return Step(taken["text"], labels=labels, meta={_NAME: step_meta})

    # -- writing ------------------------------------------------------------------------------------
    @staticmethod
    def _rating_of(trace: Trace, i: int, step: Step) -> int | None:
        lab = step.label()
        if lab is None:
            return None
        if isinstance(lab.meta.get(_NAME), dict) and lab.meta[_NAME] == _IMPLIED:
            return None
        if lab.kind != "hard":
            raise PrmkitError(f"trace {trace.id}: step {i} has a soft label ({lab.source}, "
                              f"{lab.value}); a PRM800K rating is -1, 0 or 1: add a hard label "
                              f"(e.g. from prmkit.trace.binarize) to export it")
        return int(lab.value)

    def _encode_step(self, trace: Trace, i: int, step: Step) -> dict[str, Any]:
        own = {"text": step.text, "rating": self._rating_of(trace, i, step)}
        sm = step.meta.get(_NAME)
        if not isinstance(sm, dict):
            # A step from elsewhere: one completion, chosen.
            return {"completions": [{**own, "flagged": None}], "human_completion": None,
                    "chosen_completion": 0}
        completions = sm.get("completions")
        completions = None if completions is None else [dict(c) for c in completions]
        human = sm.get("human_completion")
        human = None if human is None else dict(human)
        followed = sm.get("followed")
        if followed == "human" and human is not None:
            human = {**own, **human}
        elif isinstance(followed, int) and completions is not None and 0 <= followed < len(completions):
            completions[followed] = {**own, **completions[followed]}
        else:
            raise PrmkitError(f"trace {trace.id}: step {i} meta[{_NAME!r}] names followed="
                              f"{followed!r}, which is not one of its completions")
        out = {"completions": completions, "human_completion": human,
               "chosen_completion": sm.get("chosen_completion")}
        out.update(sm.get("extra", {}))
        return out

    def encode(self, trace: Trace) -> dict[str, Any]:
        m = trace.meta.get(_NAME) or {}
        steps = [self._encode_step(trace, i, s) for i, s in enumerate(trace.steps)]
        if m.get("open_step") is not None:
            steps.append(copy.deepcopy(m["open_step"]))

        qmeta = m.get("question") or {}
        question: dict[str, Any] = {"problem": trace.problem.text}
        if trace.problem.solution is not None:
            question["ground_truth_solution"] = trace.problem.solution
        elif "ground_truth_solution" in qmeta:
            question["ground_truth_solution"] = qmeta["ground_truth_solution"]
        question["ground_truth_answer"] = (trace.problem.answer if trace.problem.answer is not None
                                           else qmeta.get("ground_truth_answer"))
        question.update({k: copy.deepcopy(v) for k, v in qmeta.items() if k not in question})

        # A trace from elsewhere has no record-level meta: take the labeler from its labels and
        # derive the finish reason from its labels and answer.
        first = next((lab for s in trace.steps for lab in s.labels if lab.labeler), None)
        if "finish_reason" in m:
            finish = m["finish_reason"]
        elif any(s.label() is not None and s.label().positive is False for s in trace.steps):
            finish = "found_error"
        else:
            finish = "solution" if trace.final_answer is not None else "give_up"
        label = {"steps": steps, "total_time": m.get("total_time"), "finish_reason": finish}
        label.update(m.get("label_extra", {}))
        rec = {
            "labeler": m["labeler"] if "labeler" in m else (first.labeler if first else None),
            "timestamp": m["timestamp"] if "timestamp" in m else (first.time if first else None),
            "generation": m.get("generation"),
            "is_quality_control_question": m.get("is_quality_control_question", False),
            "is_initial_screening_question": m.get("is_initial_screening_question", False),
            "question": question,
            "label": label,
        }
        rec.update(m.get("extra", {}))
        return rec


def _prefix_step(step: Step) -> Step:
    """A copy of a followed step for a derived trace, without the alternatives it was chosen from."""
    out = copy.deepcopy(step)
    out.meta.pop(_NAME, None)
    return out


def prm800k_alternatives(trace: Trace) -> list[Trace]:
    """Every rated alternative completion of a PRM800K trace as its own trace.

    Alternative ``j`` at step ``i`` gives the trace ``followed steps[:i] + [completion j]``, its last
    step labelled with that completion's rating (the prefix keeps its labels). Unrated completions
    and the followed one are left out; the completions of an open last step (see the module
    docstring) are all alternatives. This is how PRM800K is usually turned into more training
    examples; the original trace is not included, so use ``[t, *prm800k_alternatives(t)]`` for all.

    Each derived trace has id ``<trace id>#s<i>c<j>``, ``meta["prm800k"] = {"alternative_of": id,
    "step": i, "completion": j}`` and a "derive" provenance entry; its final answer and outcome are
    computed like the importer's. A trace without PRM800K meta has no alternatives.

    >>> from prmkit.trace import Problem
    >>> alt = {"text": "1+1=3", "rating": -1, "flagged": False}
    >>> t = Trace(id="r:1", problem=Problem("1+1?", answer="2"), steps=[Step("1+1=2", meta={
    ...     "prm800k": {"completions": [{"flagged": False}, alt], "human_completion": None,
    ...                 "chosen_completion": 0, "followed": 0}})])
    >>> [(a.id, a.steps[0].text, a.steps[0].labels[0].value) for a in prm800k_alternatives(t)]
    [('r:1#s0c1', '1+1=3', -1)]
    """
    m = trace.meta.get(_NAME) or {}
    labeler, time = m.get("labeler"), m.get("timestamp")
    candidates: list[tuple[int, list[dict[str, Any]] | None, Any]] = []
    for i, step in enumerate(trace.steps):
        sm = step.meta.get(_NAME)
        if isinstance(sm, dict):
            candidates.append((i, sm.get("completions"), sm.get("followed")))
    open_step = m.get("open_step")
    if isinstance(open_step, dict):
        candidates.append((len(trace.steps), open_step.get("completions"), None))

    out: list[Trace] = []
    for i, completions, followed in candidates:
        for j, c in enumerate(completions or []):
            if j == followed or c.get("rating") is None:
                continue
            rest = _strip_own(c)
            last = Step(c["text"], labels=[StepLabel(c["rating"], source="human", labeler=labeler,
                                                     time=time)],
                        meta={_NAME: {"alternative": {"step": i, "completion": j}, **rest}})
            final_answer = _final_answer(c["text"])
            alt = Trace(id=f"{trace.id}#s{i}c{j}", problem=copy.deepcopy(trace.problem),
                        steps=[_prefix_step(s) for s in trace.steps[:i]] + [last],
                        final_answer=final_answer,
                        outcome=_outcome(final_answer, trace.problem.answer), source=trace.source,
                        meta={_NAME: {"alternative_of": trace.id, "step": i, "completion": j}},
                        provenance=copy.deepcopy(trace.provenance))
            alt.add_provenance("derive", "prm800k_alternatives",
                               {"parent": trace.id, "step": i, "completion": j})
            out.append(alt)
    return out
