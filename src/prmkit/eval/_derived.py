"""Derived traces for the probes: the derivation lives in :mod:`prmkit.data` (``derive_traces``,
``gsm8k_derived_traces``, re-exported here); :func:`arith_derived_traces` runs it over the ``arith``
environment, which ``prmkit.data`` does not import (environments sit above data formats)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prmkit.data import derive_traces, gsm8k_derived_traces, strip_calculations
from prmkit.trace import Trace

__all__ = ["derive_traces", "gsm8k_derived_traces", "arith_derived_traces", "strip_calculations"]


def arith_derived_traces(config: Any = None, n: int = 100, seed: int = 0, *,
                         corrupt_fraction: float = 0.5, pairs: bool = False,
                         counts: dict[str, int] | None = None,
                         error_types: Sequence[str] | None = None) -> list[Trace]:
    """:func:`~prmkit.data.derive_traces` over problems ``0 .. n-1`` of the built-in ``arith``
    environment (``config``: an :class:`~prmkit.envs.ArithConfig`, default settings when None; its
    ``seed`` picks the problems, ``seed`` here the corruptions).

    >>> from prmkit.envs import ArithConfig
    >>> ts = arith_derived_traces(ArithConfig(steps=2), 4, pairs=True)
    >>> [t.meta["derived"]["kind"] for t in ts[:2]], {t.outcome for t in ts[::2]}
    (['correct', 'corrupted'], {'correct'})
    """
    from prmkit.envs import ArithEnv

    return derive_traces(ArithEnv(config).problems(n), seed=seed, corrupt_fraction=corrupt_fraction,
                         pairs=pairs, counts=counts, error_types=error_types)
