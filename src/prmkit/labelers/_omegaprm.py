"""``omegaprm``: the first error by binary search inside a tree of shared rollouts (after OmegaPRM,
Luo et al. 2024), soft labels per prefix, and the tree in the MATH-APS format.

The tree of a trace is rooted at its problem; the trace is one branch, its prefix ``p`` (first ``p``
steps) a node. Every rollout from a node is a sibling branch, cut into steps one per non-empty line.
Where a rollout from prefix ``p`` writes the trace's next steps again (the same text, surrounding
whitespace aside), its branch runs along the trace's: it *passes through* the deeper nodes, and its
continuation after them is a policy sample from those nodes too. So each node's samples are its own
rollouts plus those that pass through it from above, and that is where rollouts are shared:

- a node some correct rollout passes through is good (its MC > 0) with no rollout of its own, and so
  is every shorter prefix (the paper: all prefixes of a right rollout have MC > 0);
- a node with ``s`` samples from above needs only ``k - s`` rollouts of its own;
- the other traces of the same problem that came earlier in the run are branches from the root
  (``siblings=True``): a right one makes the prefixes it shares with this trace good for free. They
  are fixed when the engine admits the trace (in input order), so a resumed run sees the same ones.

The search is ``binary``'s over the step index with the tree as its memory: ``G`` is the deepest good
node, ``B`` the shortest node > ``G`` decided bad (at least ``k`` samples, none correct; prefix ``n``
when the trace's own answer is wrong). While ``G + 1 < B`` the node ``(G + 1 + B) // 2`` (``search=
"binary"``; ``"descend"``: ``G + 1``) gets the rollouts it lacks; the first error is step ``B - 1``. A node gets rollouts of its own at most once
(afterwards it has ``k`` samples), so the search ends after at most ``n`` rounds, ``ceil(log2 n)``
when nothing is shared; ``max_rollouts`` bounds the rollouts per trace hard, as for ``binary``. A trace
whose own answer is right costs nothing (every step +1), as OmegaPRM searches only wrong solutions.
Given the same ``k`` and seed, rollout ``r`` of prefix ``p`` is the same rollout ``binary`` and ``mc``
make, so the three compare on identical samples.

Labels: ``binary_search`` (hard: +1 before the first error, -1 at it, after it by ``after_error``
as for ``binary``) and ``mc_soft`` (soft: correct / all samples through a node, on every step whose
prefix has samples; the last step of a trace with a readable answer gets 1.0 or 0.0 from it). Each
label's meta holds the node's own and shared sample counts. The tree (every rollout: prefix, index,
how far it runs along the trace, whether it is right, its text) goes into the trace's labeling
summary, from which :func:`omegaprm_records` / :func:`write_omegaprm_tree` write MATH-APS records
that the ``math_aps`` format reads back.

Where this departs from the paper: the paper grows one tree per question from scratch and, with
its Q + U rule (``alpha``, ``beta``, ``c_puct``), picks which wrong rollout anywhere in the tree to
binary-search next, so sibling rollouts get searched and their prefixes labelled too. prmkit labels
given traces, and the label engine rolls out prefixes of the trace only, so the searched branch is
always the trace (the selection rule has one candidate and is not implemented: no ``alpha`` /
``beta`` / ``c_puct``), and sibling branches are leaves: their values are the outcome (1.0 / 0.0),
their inner states unvalued. Branches are matched by step text, not merged by meaning; the trace
itself is not counted as a sample of its own prefixes (it was chosen for being wrong), while sibling
traces are (true of traces sampled from this policy and prompt, not of imported ones:
``siblings=False`` there).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from prmkit._durable import durable_file
from prmkit._jsonio import write_jsonl_line
from prmkit.errors import PrmkitError
from prmkit.labelers._base import RolloutLabeler, setup_rollouts
from prmkit.labelers._binary import AFTER_ERROR
from prmkit.labelers._plan import Need, Plan, PlanResult, Rollout, first_error_values, terminal_success
from prmkit.trace import StepLabel, Trace, read_traces

__all__ = ["OmegaPRMLabeler", "omegaprm_records", "write_omegaprm_tree", "MATH_APS_SEPARATOR", "SEARCHES"]

#: Which undecided prefix the search rolls out next: the middle one, or the shortest.
SEARCHES: tuple[str, ...] = ("binary", "descend")

#: What separates a prefix's steps in the MATH-APS records written here (the public sample's).
MATH_APS_SEPARATOR = "\n\n"


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def run_along(trace: Trace, prefix: int, completion: str) -> int:
    """How many of the trace's steps after ``prefix`` a completion from ``prefix`` writes again,
    line for line (surrounding whitespace aside): it passes through prefixes ``prefix ..
    prefix + run_along``.

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b"), Step("c")])
    >>> run_along(t, 1, "b\\n c \\nd"), run_along(t, 1, "x\\nc"), run_along(t, 0, "a\\nb\\nc")
    (2, 0, 3)
    """
    steps = trace.steps
    j = 0
    for line in _lines(completion):
        if prefix + j >= len(steps) or line != steps[prefix + j].text.strip():
            break
        j += 1
    return j


class OmegaPRMLabeler(RolloutLabeler):
    """First-error and soft labels from a binary search over a tree of shared rollouts: ``k``
    samples per decided prefix (its own rollouts plus those passing through it), at most
    ``max_rollouts`` rollouts per trace (see the module docstring). ``search``: the next prefix to
    roll out is the middle undecided one (``"binary"``) or the shortest (``"descend"``).
    ``siblings``: earlier traces of the same problem in the run are branches of the tree. Other
    arguments as :class:`~prmkit.labelers.BinarySearchLabeler`.

    >>> from prmkit.policies import ScriptedPolicy
    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("1+1+1+1?", answer="4"), steps=[Step("1+1=2"),
    ...           Step("2+1=3"), Step("3+1=4"), Step("The answer is 5.")], final_answer="5")
    >>> report = OmegaPRMLabeler(ScriptedPolicy(["3+1=4\\nThe answer is 4."]), k=2).label([t])

    The search rolls out prefix 2; both rollouts write step 2 again and reach 4, so prefix 3 is
    good without rollouts of its own, and the first error is the last step (``binary``: 4 rollouts).

    >>> t.first_error("binary_search"), report.rollouts
    (3, 2)
    >>> [None if lab is None else lab.value for lab in t.labels("mc_soft")]
    [None, 1.0, 1.0, 0.0]
    """

    name = "omegaprm"
    sources = ("binary_search", "mc_soft")

    def __init__(self, policy: Any, *, k: int = 8, max_rollouts: int = 64,
                 after_error: str = "unlabelled", search: str = "binary", siblings: bool = True,
                 max_new_tokens: int = 128,
                 temperature: float = 0.7, top_p: float = 1.0, seed: int | None = 0,
                 shots: int | None = None, workers: int | None = None,
                 ray_address: str | None = None, answer_method: str = "auto") -> None:
        super().__init__()
        if after_error not in AFTER_ERROR:
            raise PrmkitError(f"after_error must be one of {AFTER_ERROR}, got {after_error!r}")
        if not isinstance(max_rollouts, int) or isinstance(max_rollouts, bool) or max_rollouts < 0:
            raise PrmkitError(f"max_rollouts must be an integer >= 0, got {max_rollouts!r}")
        if search not in SEARCHES:
            raise PrmkitError(f"search must be one of {SEARCHES}, got {search!r}")
        if isinstance(siblings, str) and siblings.lower() in ("true", "false"):
            siblings = siblings.lower() == "true"
        if not isinstance(siblings, bool):
            raise PrmkitError(f"siblings must be true or false, got {siblings!r}")
        self.k = k
        self.max_rollouts = max_rollouts
        self.after_error = after_error
        self.search = search
        self.siblings = siblings
        self._forest: dict[tuple[str, str | None], list[tuple[str, tuple[str, ...], bool | None]]] = {}
        setup_rollouts(self, policy, k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                       top_p=top_p, seed=seed, shots=shots, workers=workers,
                       ray_address=ray_address, answer_method=answer_method,
                       max_rollouts=max_rollouts, after_error=after_error, search=search,
                       siblings=siblings)

    def start(self) -> dict[str, Any]:
        # A run starts: the traces seen so far (the sibling branches) are those of this run only.
        self._forest.clear()
        return super().start()

    def plan(self, trace: Trace) -> Plan:
        # The siblings are fixed now, when the engine admits the trace (traces are admitted in
        # input order), not when the plan first runs: a resumed run sees the same ones.
        family = self._forest.setdefault((trace.problem.text, trace.problem.answer), [])
        earlier = [s for s in family if s[0] != trace.id] if self.siblings else []
        family.append((trace.id, tuple(s.text.strip() for s in trace.steps),
                       terminal_success(trace, method=self.answer_method)))
        return self._search(trace, earlier)

    def _search(self, trace: Trace, siblings: list[tuple[str, tuple[str, ...], bool | None]]) -> Plan:
        n, k = len(trace.steps), self.k
        spent: list[Rollout] = []
        # node (prefix 1..n) -> [own samples, own hits, shared samples, shared hits]
        nodes: dict[int, list[int]] = {}
        branches: list[list[Any]] = []   # [prefix, index, run_along, reached, text] per rollout
        order: list[list[int]] = []      # [prefix, own rollouts, samples, hits], in search order

        def add(p: int, rs: list[Rollout]) -> None:
            spent.extend(rs)
            for r in rs:
                j = run_along(trace, p, r.text)
                branches.append([p, r.index, j, bool(r.reached), r.text])
                for m in range(p, min(p + j, n) + 1):
                    counts = nodes.setdefault(m, [0, 0, 0, 0])
                    at = 0 if m == p else 2
                    counts[at] += 1
                    counts[at + 1] += bool(r.reached)

        def samples(m: int) -> tuple[int, int]:
            c = nodes.get(m, [0, 0, 0, 0])
            return c[0] + c[2], c[1] + c[3]

        def bounds(bad_n: bool) -> tuple[int, int]:
            good = max((m for m in nodes if samples(m)[1] > 0), default=0)
            bad = [m for m in nodes if m > good and samples(m)[1] == 0 and samples(m)[0] >= k]
            if bad_n and good < n:
                bad.append(n)
            return good, min(bad, default=n + 1)

        term = terminal_success(trace, method=self.answer_method)
        mine = tuple(s.text.strip() for s in trace.steps)
        shared_by: list[list[Any]] = []  # [sibling id, steps in common, right], per sibling used
        if term is not None:  # a right trace is not searched: its siblings change nothing
            for sid, steps, right in siblings if term is False else ():
                j = next((i for i, (a, b) in enumerate(zip(mine, steps, strict=False)) if a != b), min(n, len(steps)))
                if right is None or j == 0:
                    continue
                shared_by.append([sid, j, right])
                for m in range(1, j + 1):
                    counts = nodes.setdefault(m, [0, 0, 0, 0])
                    counts[2] += 1
                    counts[3] += right
        stopped = False
        if term is None:  # no answer to read: prefix n is rolled out like any other
            if k > self.max_rollouts:
                stopped = True
            else:
                [rs] = yield [Need("rollout", n, tuple(range(k)))]
                add(n, rs)
                order.append([n, k, *samples(n)])
        good, bad = (n, n + 1) if term else bounds(term is False)
        while not stopped and good + 1 < bad:
            mid = (good + 1 + bad) // 2 if self.search == "binary" else good + 1
            have = samples(mid)[0]
            need = k - have  # > 0: every node strictly between good and bad is undecided
            if len(spent) + need > self.max_rollouts:
                stopped = True
                break
            [rs] = yield [Need("rollout", mid, tuple(range(need)))]
            add(mid, rs)
            order.append([mid, need, *samples(mid)])
            good, bad = bounds(term is False)
            if len(order) > n + 1:  # unreachable: a node gets rollouts of its own at most once
                raise PrmkitError(f"omegaprm search on trace {trace.id} did not terminate")

        counts: Counter[str] = Counter()
        if stopped:
            first: int | None = None
            meta: dict[str, Any] = {"first_error_within": [good, min(bad, n) - 1]}
            counts["budget_exhausted"] += 1
        else:
            first = -1 if good >= n else bad - 1
            meta = {"first_error": first}
        # prefixes whose verdict came from shared rollouts alone (prefix n: only when no answer decides it)
        counts["shared_decisions"] += sum(
            1 for m, c in nodes.items() if c[0] == 0 and (m < n or term is None)
            and (c[3] > 0 or c[2] >= k))
        labels: list[list[StepLabel]] = [[] for _ in range(n)]
        for i, value in enumerate(first_error_values(n, first, known_good=good, after_error=self.after_error)):
            if value is not None:
                labels[i].append(self.make_label(value, "binary_search", rollouts=spent, meta=meta))
        for i in range(n):
            m = i + 1
            own, own_hits, shared, shared_hits = nodes.get(m, [0, 0, 0, 0])
            if own + shared:
                mine = [r for r in spent if r.prefix == m]
                labels[i].append(self.make_label(
                    (own_hits + shared_hits) / (own + shared), "mc_soft", kind="soft", rollouts=mine,
                    count=own + shared,
                    meta={"prefix": m, "own": own, "own_successes": own_hits, "shared": shared,
                          "shared_successes": shared_hits}))
            elif m == n and term is not None:
                labels[i].append(self.make_label(float(term), "mc_soft", kind="soft",
                                                 meta={"prefix": m, "terminal": True}))
        notes: dict[str, Any] = {"k": k, "visited": order, **meta,
                                 "tree": {"terminal": term, "branches": branches, "siblings": shared_by}}
        return PlanResult(labels, counts=counts, notes=notes)


# -- the tree as MATH-APS records ------------------------------------------------------------------

def _prefix(question: str, steps: Iterable[str]) -> str:
    return question + "".join(MATH_APS_SEPARATOR + s for s in steps)


def _entries(trace: Trace) -> list[dict[str, Any]]:
    """The MATH-APS entries of one trace's tree: its prefixes with samples (their MC value), its
    whole text when its answer decides (1.0 / 0.0), and each non-empty rollout as a complete
    branch (1.0 / 0.0)."""
    tree = _tree(trace)
    assert tree is not None  # omegaprm_records checked
    question = trace.problem.text
    steps = [s.text.strip() for s in trace.steps]
    out = []
    for i, step in enumerate(trace.steps):
        lab = next((lab for lab in reversed(step.labels)
                    if lab.labeler == OmegaPRMLabeler.name and lab.source == "mc_soft"), None)
        if lab is not None:
            out.append({"solution_prefix": _prefix(question, steps[:i + 1]), "mc_value": lab.value})
    for p, _index, _along, reached, text in tree["branches"]:
        lines = _lines(text)
        if lines:
            out.append({"solution_prefix": _prefix(question, steps[:p] + lines),
                        "mc_value": 1.0 if reached else 0.0})
    return out


def _tree(trace: Trace) -> dict[str, Any] | None:
    return trace.meta.get("labeling", {}).get(OmegaPRMLabeler.name, {}).get("tree")


def omegaprm_records(traces: Iterable[Trace], *, skipped: list[str] | None = None
                     ) -> list[dict[str, Any]]:
    """MATH-APS records (``question``, ``final_answer``, ``question_id``, ``reasoning_steps``) of the
    omegaprm trees of ``traces``: one record per problem (the traces of one problem are branches of
    one tree), in first-seen order; ``question_id`` is the problem's id when it is an integer, else
    its position among the problems. Steps are joined by :data:`MATH_APS_SEPARATOR`, each stripped
    of surrounding whitespace. A trace omegaprm did not label (no tree: skipped for want of an
    answer, say) is left out, its id appended to ``skipped`` when given, else an error."""
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for t in traces:
        if _tree(t) is None:
            if skipped is None:
                raise PrmkitError(f"trace {t.id}: no omegaprm tree (label it with --method omegaprm first)")
            skipped.append(t.id)
            continue
        if t.problem.answer is None:
            raise PrmkitError(f"trace {t.id}: MATH-APS needs the reference answer (problem.answer)")
        if any(not s.text.strip() for s in t.steps):
            raise PrmkitError(f"trace {t.id}: an empty step cannot be a MATH-APS state")
        key = (t.problem.text, t.problem.answer)
        if key not in records:
            pid = t.problem.id
            qid = int(pid) if pid is not None and pid.lstrip("-").isdigit() else len(records)
            records[key] = {"question": t.problem.text, "final_answer": t.problem.answer,
                            "question_id": qid, "reasoning_steps": []}
        records[key]["reasoning_steps"].extend(_entries(t))
    return [r for r in records.values() if r["reasoning_steps"]]


def write_omegaprm_tree(traces: str | os.PathLike | Sequence[Trace], out: str | os.PathLike
                        ) -> tuple[int, list[str]]:
    """Write the MATH-APS records of the omegaprm trees of ``traces`` (a trace file, or traces) to
    ``out`` (JSONL, atomically). Returns how many records, and the ids of the traces left out for
    having no tree (see :func:`omegaprm_records`). Read them back with
    ``prmkit.data.read(out, "math_aps")``."""
    inputs = [traces] if isinstance(traces, (str, os.PathLike)) else []
    seq = read_traces(traces) if isinstance(traces, (str, os.PathLike)) else traces
    skipped: list[str] = []
    records = omegaprm_records(seq, skipped=skipped)
    with durable_file(out, inputs=inputs) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            write_jsonl_line(f, rec)
    return len(records), skipped
