"""Step scores -> one trace score: ``min``, ``last``, ``prod``, ``mean``, ``geo_mean``, ``first_below``.

Every aggregator skips ``None`` step scores (steps a scorer could not score, e.g. cut by
``max_length``) and gives ``None`` for a trace with no scored step. A NaN or infinite step score is
refused with a :class:`~prmkit.errors.PrmkitError` (NaN compares false with everything, so under
``max`` it could win or lose by its position alone). They are registered by name in
:data:`AGGREGATORS`; :func:`get_aggregator` takes a name with optional arguments after a colon:

>>> get_aggregator("min")([0.9, 0.4, None, 0.7])
0.4
>>> get_aggregator("first_below:0.5")([0.9, 0.8, 0.2, 0.9])  # 2 of 4 steps before the first bad one
0.5
>>> get_aggregator("first_below:0.5").spec
'first_below:0.5'
>>> get_aggregator("mean")([None, None]) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit._registry import Registry
from prmkit.errors import PrmkitError

__all__ = ["Aggregator", "AGGREGATORS", "get_aggregator", "register_aggregator", "trace_score",
           "check_finite",
           "agg_min", "agg_last", "agg_prod", "agg_mean", "agg_geo_mean", "agg_first_below"]


@dataclass(frozen=True)
class Aggregator:
    """A named ``(step scores) -> trace score`` function that records its arguments (provenance).

    ``fn`` sees only the scored steps, in order, and never an empty list.
    """

    name: str
    fn: Callable[[list[float]], float] = field(repr=False, compare=False)
    args: tuple[Any, ...] = ()

    def __call__(self, scores: Sequence[float | None]) -> float | None:
        check_finite(scores, f"aggregator {self.name!r}")
        values = [float(s) for s in scores if s is not None]
        return self.fn(values) if values else None

    @property
    def spec(self) -> str:
        """The string :func:`get_aggregator` turns back into this aggregator (``"first_below:0.3"``)."""
        return ":".join([self.name, *(_fmt(a) for a in self.args)])


def check_finite(values: Sequence[float | None], what: str = "scores") -> None:
    """Raise :class:`~prmkit.errors.PrmkitError` naming the first NaN or infinite value (None is
    "unscored" and passes).

    >>> check_finite([0.5, None, float("nan")], "aggregator 'min'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: aggregator 'min': score 2 is nan; NaN and infinite scores are refused ...
    """
    for i, v in enumerate(values):
        if v is not None and not math.isfinite(v):
            raise PrmkitError(f"{what}: score {i} is {v}; NaN and infinite scores are refused "
                              "(a broken scorer or a hand-edited file?)")


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def agg_min() -> Aggregator:
    """The weakest step (the usual PRM reading: a chain is as good as its worst step).

    >>> agg_min()([0.9, 0.3, 0.6])
    0.3
    """
    return Aggregator("min", min)


def agg_last() -> Aggregator:
    """The last scored step (PRMs trained with outcome-like targets put the verdict there).

    >>> agg_last()([0.9, 0.3, 0.6, None])
    0.6
    """
    return Aggregator("last", lambda v: v[-1])


def agg_prod() -> Aggregator:
    """The product: P(every step correct) if the step verdicts were independent.

    >>> agg_prod()([0.5, 0.5, 0.8])
    0.2
    """
    return Aggregator("prod", math.prod)


def agg_mean() -> Aggregator:
    """The arithmetic mean.

    >>> agg_mean()([0.5, 1.0, 0.0])
    0.5
    """
    return Aggregator("mean", lambda v: sum(v) / len(v))


def agg_geo_mean() -> Aggregator:
    """The geometric mean, ``prod ** (1 / n)``: the product without its bias against long traces.

    >>> agg_geo_mean()([0.25, 1.0])
    0.5
    >>> agg_geo_mean()([0.0, 0.9])
    0.0
    """
    def geo(v: list[float]) -> float:
        if min(v) <= 0.0:
            return 0.0
        return math.exp(sum(math.log(x) for x in v) / len(v))  # logs: no underflow on long traces

    return Aggregator("geo_mean", geo)


def agg_first_below(threshold: float = 0.5) -> Aggregator:
    """Index-aware: the fraction of scored steps that come before the first one scored below
    ``threshold`` (1.0 when none is). A trace whose first error comes late ranks above one that
    goes wrong early, whatever the scores after the error are.

    >>> agg_first_below(0.5)([0.9, 0.8, 0.2, 0.9])
    0.5
    >>> agg_first_below(0.5)([0.1, 0.9]), agg_first_below(0.5)([0.6, 0.7])
    (0.0, 1.0)
    >>> agg_first_below("abc")
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: first_below: the threshold is a number in [0, 1], got 'abc'
    """
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise PrmkitError(f"first_below: the threshold is a number in [0, 1], got {threshold!r}") from None
    if not 0.0 <= threshold <= 1.0:
        raise PrmkitError(f"first_below: threshold must lie in [0, 1], got {threshold}")

    def first_below(v: list[float]) -> float:
        bad = next((i for i, x in enumerate(v) if x < threshold), len(v))
        return bad / len(v)

    return Aggregator("first_below", first_below, (threshold,))


#: Aggregator name -> its factory (``"module:attr"``, loaded on first use).
AGGREGATORS = Registry("aggregator", {
    "min": "prmkit.scoring._aggregate:agg_min",
    "last": "prmkit.scoring._aggregate:agg_last",
    "prod": "prmkit.scoring._aggregate:agg_prod",
    "mean": "prmkit.scoring._aggregate:agg_mean",
    "geo_mean": "prmkit.scoring._aggregate:agg_geo_mean",
    "first_below": "prmkit.scoring._aggregate:agg_first_below",
}, group="prmkit.aggregators")


def register_aggregator(name: str, target: str) -> None:
    """Add (or replace) an aggregator: ``target`` is ``"module:attr"`` of a factory returning an
    :class:`Aggregator` (or any ``(step scores) -> float | None`` callable)."""
    AGGREGATORS.register(name, target)


def get_aggregator(spec: str | Aggregator | Callable[[Sequence[float | None]], float | None]
                   ) -> Callable[[Sequence[float | None]], float | None]:
    """An aggregator from ``"name"`` or ``"name:arg,..."`` (``"first_below:0.3"``); an
    :class:`Aggregator` or other callable is returned as it is.

    >>> get_aggregator("prod")([0.5, None, 0.5])
    0.25
    >>> get_aggregator("median")
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: unknown aggregator 'median'; known: first_below, geo_mean, last, mean, min, prod
    """
    if not isinstance(spec, str):
        if not callable(spec):
            raise PrmkitError(f"an aggregator is a name or a callable, got {spec!r}")
        return spec
    name, _, rest = spec.partition(":")
    args = [_parse(a) for a in rest.split(",")] if rest else []
    factory = AGGREGATORS.load(name.strip())
    try:
        return factory(*args)
    except (TypeError, ValueError) as e:  # a plugin's factory given arguments it cannot take
        raise PrmkitError(f"aggregator {spec!r}: {e}") from None


def _parse(text: str) -> Any:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return text


def trace_score(scores: Sequence[float | None],
                aggregate: str | Aggregator | Callable[[Sequence[float | None]], float | None] = "min"
                ) -> float | None:
    """One number for a trace from its step scores, by an aggregator (a name such as ``"min"`` or
    ``"first_below:0.5"``, or a callable); an ORM's one-element list passes through every aggregator
    but ``first_below``.

    >>> trace_score([0.9, 0.4, None, 0.7], "min"), trace_score([], "min") is None
    (0.4, True)
    """
    if not scores:
        return None
    check_finite(list(scores), "step scores")
    value = get_aggregator(aggregate)(list(scores))
    if value is not None:
        check_finite([value], f"aggregate {aggregate if isinstance(aggregate, str) else 'custom'!s}")
    return value
