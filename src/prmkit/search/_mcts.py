"""Monte Carlo tree search over steps, guided by a PRM (``prmkit search --method mcts``).

The tree's nodes are partial solutions (the steps so far; the root has none), its edges one step.
A *simulation*:

1. **Select**: from the root, while the node has children, go to the child with the highest PUCT
   score ``Q(c) + c_puct · P(c) · sqrt(N(node)) / (1 + N(c))``, where ``N`` counts visits, ``Q(c)`` is
   the mean value backed up through ``c`` (before its first visit: its own value, below) and ``P(c)``
   its prior: ``1 / k`` over the ``k`` sampled siblings, or their normalised sequence likelihood when
   the policy reports one (``Completion.meta["logprob"]``, summed over the step's tokens). Ties go to
   the first child in sampling order.
2. **Expand**: a leaf that has not ended (no final answer, not an empty step, fewer than ``max_depth``
   steps) gets ``expansions`` children sampled from the policy in one request (the same request beam
   and DVTS make). All of them are scored in one scorer call: with a
   :class:`~prmkit.scoring.PrefixCachingScorer` the siblings share their parent's cached prefix, so a
   node costs only its new step's tokens.
3. **Evaluate**: a node's value is its path's step scores aggregated by ``aggregate`` (``"last"``
   by default, as the other searches), optionally mixed with a rollout:
   ``(1 - rollout_weight) · prm + rollout_weight · r``, where ``r`` comes from a greedy rollout
   (temperature 0) to the end: 1 or 0 by the outcome when the problem's reference answer can check
   it, else the PRM's aggregate of the rolled-out path. ``rollout_weight`` 0 (default) rolls nothing.
4. **Backup**: the child PUCT picks among the new children (or the ended leaf itself, which costs
   nothing more) is visited, and its value is added to it and every node above it.

The search runs ``simulations`` simulations. The answer (``answer``): ``"visits"`` (default, as
AlphaZero and OpenR) follows the most-visited child from the root (ties: higher mean value, then
sampling order) down to a node with no children; ``"value"`` takes the best-valued ended node of the
whole tree. Either way, when no path has ended, the best-valued open leaf is returned. Candidates
(:attr:`SearchResult.candidates`) are every ended node, or every leaf when none ended.

Compute is counted as for beam and DVTS (:class:`~prmkit.search.ComputeMeter`: generated tokens,
rollouts included, and scored tokens), so methods compare at equal compute. Requests are keyed
``"{problem}/mcts/t0.{i}.{j}…"`` by the path of child indices (rollouts ``…/la{d}``): with a seeded
policy the same seed grows the same tree, whatever the batching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from prmkit.envs import PromptBuilder
from prmkit.errors import PrmkitError
from prmkit.policies import Completion, Policy
from prmkit.provenance import PolicyRef, SearchProvenance
from prmkit.scoring import StepScorer, trace_score
from prmkit.search._common import steps_to_trace
from prmkit.search._search import SearchConfig, SearchResult, _config, _ended, _Path, _Search, _step_text
from prmkit.trace import Problem
from prmkit.trace_queries import is_correct

__all__ = ["mcts", "puct"]

ANSWERS = ("visits", "value")


@dataclass
class _Node:
    path: _Path
    prior: float = 1.0
    value: float = 0.0  # its own evaluation (PRM, mixed with the rollout)
    visits: int = 0
    total: float = 0.0  # values backed up through it
    children: list[_Node] = field(default_factory=list)
    parent: _Node | None = None

    @property
    def q(self) -> float:
        return self.total / self.visits if self.visits else self.value

    def ended(self, max_depth: int) -> bool:
        return self.path.done or len(self.path.steps) >= max_depth


def puct(q: float, prior: float, parent_visits: int, visits: int, c_puct: float) -> float:
    """The PUCT score of a child: ``q + c_puct * prior * sqrt(parent_visits) / (1 + visits)``.

    >>> puct(0.5, 0.25, 4, 1, 2.0)
    1.0
    """
    return q + c_puct * prior * math.sqrt(parent_visits) / (1 + visits)


def _pick(node: _Node, c_puct: float) -> _Node:
    best, best_s = node.children[0], float("-inf")
    for c in node.children:  # strict '>': ties keep sampling order
        s = puct(c.q, c.prior, node.visits, c.visits, c_puct)
        if s > best_s:
            best, best_s = c, s
    return best


def _priors(completions: list[Completion]) -> list[float]:
    lps = [c.meta.get("logprob") for c in completions]
    if not completions or any(not isinstance(lp, (int, float)) for lp in lps):
        return [1.0 / max(1, len(completions))] * len(completions)
    top = max(lps)
    w = [math.exp(lp - top) for lp in lps]
    return [x / sum(w) for x in w]


class _Mcts(_Search):
    def __init__(self, problem: Problem, policy: Policy, scorer: StepScorer, prompts: PromptBuilder,
                 config: SearchConfig, *, simulations: int, expansions: int, c_puct: float,
                 rollout_weight: float) -> None:
        super().__init__(problem, policy, scorer, prompts, config, "mcts", [1], expansions)
        self.simulations = simulations
        self.c_puct = c_puct
        self.rollout_weight = rollout_weight
        self.root = _Node(_Path(0, "t0", []))
        self.nodes: list[_Node] = [self.root]
        self.depth = 0

    def _grow(self, leaf: _Node) -> None:
        """Sample and evaluate the leaf's children (one policy call, one scorer call)."""
        c = self.config
        out = self.meter.generate([self._request(leaf.path.steps, self._key(leaf.path.path))],
                                  self._params(self.expansions))[0]
        kids = []
        for k, comp in enumerate(out):
            step = _step_text(comp)
            steps = leaf.path.steps + [step] if step else list(leaf.path.steps)
            kids.append(_Path(0, f"{leaf.path.path}.{k}", steps, tokens=leaf.path.tokens + comp.num_tokens,
                              done=_ended(step)))
        last = len(leaf.path.steps) + 1 >= c.max_depth
        self._score(kids, 0 if last else c.lookahead)
        values = [0.0 if p.score is None else p.score for p in kids]
        if self.rollout_weight:
            w = self.rollout_weight
            values = [(1 - w) * v + w * r for v, r in zip(values, self._rollouts(kids), strict=True)]
        leaf.children = [_Node(p, prior, v, parent=leaf)
                         for p, prior, v in zip(kids, _priors(out), values, strict=True)]
        self.nodes += leaf.children
        self.depth = max(self.depth, len(leaf.path.steps) + 1)

    def _rollouts(self, kids: list[_Path]) -> list[float]:
        """Each child's rollout value: greedy to the end, judged by its outcome where the problem's
        answer can check it, else by the PRM's aggregate of the rolled-out path."""
        c = self.config
        rolled = self._lookahead(kids, max(0, c.max_depth - min(len(p.steps) for p in kids)))
        rolled = [r[:max(c.max_depth, len(p.steps))] for p, r in zip(kids, rolled, strict=True)]
        out: list[float | None] = []
        for p, steps in zip(kids, rolled, strict=True):
            t = self.trace(_Path(0, f"{p.path}/rollout", steps, done=True))
            ok = is_correct(t)
            out.append(None if ok is None else float(ok))
        unknown = [i for i, v in enumerate(out) if v is None and rolled[i]]
        traces = [steps_to_trace(self.problem, rolled[i], trace_id=f"{self.pid}/{kids[i].path}/rollout")
                  for i in unknown]
        for i, scores in zip(unknown, self.meter.score(traces), strict=True):
            s = trace_score(scores, c.aggregate)
            out[i] = 0.0 if s is None else s
        return [0.0 if v is None else v for v in out]

    def simulate(self) -> None:
        node = self.root
        while node.children:
            node = _pick(node, self.c_puct)
        if not node.ended(self.config.max_depth):
            self._grow(node)
            if node.children:
                node = _pick(node, self.c_puct)
        value = node.value
        while node is not None:
            node.visits += 1
            node.total += value
            node = node.parent

    def run(self) -> tuple[list[_Path], int]:  # type: ignore[override]
        for _ in range(self.simulations):
            self.simulate()
        return [n.path for n in self.candidates()], self.depth

    def candidates(self) -> list[_Node]:
        ended = [n for n in self.nodes if n is not self.root and n.path.done]
        return ended or [n for n in self.nodes if n is not self.root and not n.children]

    def answer(self, how: str) -> _Node:
        cands = self.candidates()
        if how == "visits":
            node = self.root
            while node.children:
                node = max(node.children, key=lambda c: (c.visits, c.q))  # max keeps the first of ties
            if node.path.done:
                return node
        return max(cands, key=lambda n: n.value)


def mcts(problem: Problem, policy: Policy, scorer: StepScorer, prompts: PromptBuilder | None = None, *,
         simulations: int = 16, expansions: int = 4, c_puct: float = 1.0, rollout_weight: float = 0.0,
         answer: str = "visits", config: SearchConfig | None = None, **settings: Any) -> SearchResult:
    """Monte Carlo tree search over steps with PUCT selection (module docs): ``simulations``
    simulations, each expanding a leaf into ``expansions`` sampled next steps scored by the PRM;
    ``c_puct`` weighs the prior against the mean value; ``rollout_weight`` mixes in a greedy rollout's
    outcome; ``answer``: ``visits`` (most-visited path) or ``value`` (best-valued ended node).
    ``settings`` are :class:`SearchConfig` fields, or pass ``config``."""
    errors = []
    if simulations < 1:
        errors.append(f"simulations must be >= 1, got {simulations}")
    if expansions < 1:
        errors.append(f"expansions must be >= 1, got {expansions}")
    if c_puct < 0:
        errors.append(f"c_puct must be >= 0, got {c_puct}")
    if not 0 <= rollout_weight <= 1:
        errors.append(f"rollout_weight must be in [0, 1], got {rollout_weight}")
    if answer not in ANSWERS:
        errors.append(f"answer must be one of {', '.join(ANSWERS)}, got {answer!r}")
    if errors:
        raise PrmkitError("mcts: " + "; ".join(errors))
    config = config or _config(settings)
    s = _Mcts(problem, policy, scorer, prompts or PromptBuilder(), config, simulations=simulations,
              expansions=expansions, c_puct=c_puct, rollout_weight=rollout_weight)
    _, depth = s.run()
    cands = s.candidates()
    best = s.answer(answer)
    args = {"simulations": simulations, "expansions": expansions, "c_puct": c_puct,
            "rollout_weight": rollout_weight, "answer": answer, **config.to_dict()}
    compute = s.meter.to_dict()
    traces = [s.trace(n.path) for n in cands]
    for t, n in zip(traces, cands, strict=True):
        t.meta["search"].update({"visits": n.visits, "value": n.value, "q": n.q})
    chosen = traces[cands.index(best)]
    entry = SearchProvenance("mcts", policy=PolicyRef.from_dict(s.meter.policy.describe()),
                             scorer=scorer.name, kind=scorer.kind, settings=dict(args), select=answer)
    chosen.meta["search"].update({"compute": compute, "depth": depth, "candidates": len(traces),
                                  "simulations": simulations,
                                  "reason": f"{'most-visited path' if answer == 'visits' else 'best value'}"})
    chosen.add_provenance(entry)
    return SearchResult(problem, "mcts", chosen, traces, compute, depth, entry.to_dict())
