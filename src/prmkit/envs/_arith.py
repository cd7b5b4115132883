"""``arith``: procedurally generated multi-step arithmetic word problems with known intermediates.

Each problem is a short story about one quantity (a person's apples, marbles, coins, ...) changed by
``steps`` operations, with optional distractor sentences about other quantities. The generator knows
every intermediate value, so every step a model writes can be checked symbolically
(:mod:`prmkit.envs._checker`), which gives labels, training, search and evaluation ground truth
without a human.

Problems are a pure function of ``(config, index)``: problem 17 of a seed is the same whether you ask
for 20 problems or 2,000.

>>> env = ArithEnv(ArithConfig(steps=2, seed=3))
>>> p = env.problem(0)
>>> p.answer == str(p.meta["arith"]["values"][-1])
True
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.trace import Problem

__all__ = ["ArithConfig", "ArithEnv", "OPS"]

OPS = ("+", "-", "*", "/")

_NAMES = [("Lena", "she", "her"), ("Omar", "he", "his"), ("Mia", "she", "her"), ("Raj", "he", "his"),
          ("Sofia", "she", "her"), ("Ben", "he", "his"), ("Aiko", "she", "her"), ("Tom", "he", "his"),
          ("Nadia", "she", "her"), ("Leo", "he", "his"), ("Zoe", "she", "her"), ("Sam", "he", "his")]
_ITEMS = ["apples", "marbles", "stickers", "coins", "books", "pencils", "cookies", "stamps", "shells",
          "cards", "beads", "eggs"]
_FRIENDS = ["a friend", "a cousin", "a neighbour", "the teacher", "a classmate"]
_TIMES = {2: "twice", 3: "three times", 4: "four times", 5: "five times"}


@dataclass(frozen=True)
class ArithConfig:
    """Difficulty knobs of :class:`ArithEnv`.

    ``steps``: operations per problem, an int or an inclusive ``(min, max)`` range within 1–6.
    ``max_operand``: largest number in the problem text. ``ops``: operations to draw from.
    ``distractors``: irrelevant quantities mentioned per problem. ``seed``: the problem set.
    """

    steps: int | tuple[int, int] = 3
    max_operand: int = 20
    ops: tuple[str, ...] = ("+", "-", "*")
    distractors: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        lo, hi = self.step_range
        errors = []
        if not 1 <= lo <= hi <= 6:
            errors.append(f"steps must lie within 1–6, got {self.steps!r}")
        if self.max_operand < 5:
            errors.append(f"max_operand must be at least 5, got {self.max_operand}")
        bad = [o for o in self.ops if o not in OPS]
        if bad or not self.ops:
            errors.append(f"ops must be a non-empty subset of {OPS}, got {self.ops!r}")
        if self.distractors < 0:
            errors.append("distractors must be >= 0")
        if errors:
            raise PrmkitError("arith config: " + "; ".join(errors))

    @property
    def step_range(self) -> tuple[int, int]:
        if isinstance(self.steps, int):
            return self.steps, self.steps
        lo, hi = self.steps
        return int(lo), int(hi)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (lists for tuples), as ``problem.meta["arith"]["config"]`` records it."""
        d = asdict(self)
        d["ops"] = list(self.ops)
        if not isinstance(self.steps, int):
            d["steps"] = list(self.steps)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "arith config") -> ArithConfig:
        """The config :meth:`to_dict` wrote (``from_dict(c.to_dict()) == c``); a key it does not know
        or a value of the wrong type is an error naming it.

        >>> c = ArithConfig(steps=(2, 5), ops=("+", "*"), distractors=1)
        >>> ArithConfig.from_dict(c.to_dict()) == c
        True
        """
        if not isinstance(d, Mapping):
            raise PrmkitError(f"{where}: expected an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise PrmkitError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        kw: dict[str, Any] = dict(d)
        steps = kw.get("steps", 3)
        if isinstance(steps, list | tuple) and len(steps) == 2 and all(_is_int(x) for x in steps):
            kw["steps"] = (int(steps[0]), int(steps[1]))
        elif not _is_int(steps):
            raise PrmkitError(f"{where}: field 'steps': expected N or [MIN, MAX], got {steps!r}")
        for name in ("max_operand", "distractors", "seed"):
            if name in kw and not _is_int(kw[name]):
                raise PrmkitError(f"{where}: field {name!r}: expected an integer, got {kw[name]!r}")
        if "ops" in kw:
            ops = kw["ops"]
            if not isinstance(ops, list | tuple) or not all(isinstance(o, str) for o in ops):
                raise PrmkitError(f"{where}: field 'ops': expected a list of operators, got {ops!r}")
            kw["ops"] = tuple(ops)
        try:
            return cls(**kw)
        except PrmkitError as e:
            raise PrmkitError(f"{where}: {str(e).removeprefix('arith config: ')}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class _Op:
    op: str
    operand: int
    before: int
    after: int
    sentence: str
    explain: str
    meta: dict[str, Any] = field(default_factory=dict)


class ArithEnv:
    """A deterministic source of :class:`~prmkit.trace.Problem` with checkable steps.

    ``problem.meta["arith"]`` holds the given numbers (``given``), the value after every operation
    (``values``), each operation, the distractor numbers and the config, so a checker knows which
    quantities exist and which are true.
    """

    name = "arith"

    def __init__(self, config: ArithConfig | None = None, **overrides: Any) -> None:
        self.config = config or ArithConfig(**overrides)

    def problems(self, n: int, start: int = 0) -> list[Problem]:
        """Problems ``start .. start+n-1``."""
        return [self.problem(i) for i in range(start, start + n)]

    def problem(self, index: int) -> Problem:
        """Problem number ``index`` (a pure function of the config and the index)."""
        cfg = self.config
        rng = random.Random(f"arith:{cfg.seed}:{index}")
        name, subj, poss = rng.choice(_NAMES)
        item = rng.choice(_ITEMS)
        lo, hi = cfg.step_range
        n_steps = rng.randint(lo, hi)
        start = rng.randint(3, cfg.max_operand)
        ops: list[_Op] = []
        value = start
        for _ in range(n_steps):
            ops.append(self._operation(rng, value, subj, poss, item))
            value = ops[-1].after
        given = [start] + [o.operand for o in ops]
        sentences = [f"{name} has {start} {item}."] + [o.sentence for o in ops]
        distractor_numbers = []
        for _ in range(cfg.distractors):
            d = rng.randint(2, cfg.max_operand)
            # A distractor must not repeat a number of the story (given or derived): a checker
            # could not tell them apart.
            taken = set(given) | {o.after for o in ops} | set(distractor_numbers)
            while d in taken:
                d = d + 1
            distractor_numbers.append(d)
            other = rng.choice([x for x in _ITEMS if x != item])
            who = rng.choice([n for n in _NAMES if n[0] != name])[0]
            sentences.insert(rng.randint(1, len(sentences)), f"{who} has {d} {other}.")
        question = f"How many {item} does {name} have now?"
        text = " ".join(sentences) + " " + question
        solution_lines = [o.explain for o in ops] + [f"The answer is {value}."]
        meta = {
            "env": "arith", "index": index, "config": cfg.to_dict(), "given": given,
            "distractors": distractor_numbers, "start": start,
            "values": [o.after for o in ops],
            "ops": [{"op": o.op, "operand": o.operand, "before": o.before, "after": o.after}
                    for o in ops],
        }
        return Problem(text=text, answer=str(value), solution="\n".join(solution_lines),
                       id=f"arith-{cfg.seed}-{index}", meta={"arith": meta})

    def _operation(self, rng: random.Random, value: int, subj: str, poss: str, item: str) -> _Op:
        cfg = self.config
        choices = list(cfg.ops)
        # Keep numbers small enough to reason about and divisions exact.
        if value < 3 and "-" in choices and len(choices) > 1:
            choices.remove("-")
        if value > 10 * cfg.max_operand and "*" in choices and len(choices) > 1:
            choices.remove("*")
        divisors = [d for d in range(2, 6) if value % d == 0]
        if "/" in choices and not divisors and len(choices) > 1:
            choices.remove("/")
        op = rng.choice(choices)
        Subj = subj.capitalize()
        if op == "+":
            b = rng.randint(2, cfg.max_operand)
            verb = rng.choice(["buys", "finds", "gets", "receives"])
            return _Op("+", b, value, value + b, f"{Subj} {verb} {b} more {item}.",
                       f"{Subj} {verb} {b} more: {value} + {b} = {value + b}.")
        if op == "-":
            b = rng.randint(1, max(1, min(cfg.max_operand, value - 1)))
            friend = rng.choice(_FRIENDS)
            return _Op("-", b, value, value - b, f"{Subj} gives {b} {item} to {friend}.",
                       f"{Subj} gives away {b}: {value} - {b} = {value - b}.")
        if op == "*":
            b = rng.randint(2, 4 if value > cfg.max_operand else 5)
            return _Op("*", b, value, value * b,
                       f"Then the number of {item} {subj} has becomes {_TIMES[b]} as large.",
                       f"The {item} become {_TIMES[b]} as many: {value} * {b} = {value * b}.")
        if not divisors:
            raise PrmkitError(f"arith: cannot divide {value} exactly with ops {cfg.ops}")
        b = rng.choice(divisors)
        return _Op("/", b, value, value // b,
                   f"{Subj} splits {poss} {item} into {b} equal groups and keeps one group.",
                   f"{Subj} keeps one of {b} equal groups: {value} / {b} = {value // b}.")
