"""Probes as components: the :class:`Probe` interface, the registry :data:`PROBES` and
:func:`run_probes`, which builds the evaluation report's ``"probes"`` section.

Every probe returns a result whose dict is its part of that section. Each result carries ``failed``
and ``criterion``, the rule behind ``failed`` in words. A probe whose data cannot show the failure (too
few steps of a kind, lengths that hardly vary, no second source) neither passes nor fails: ``failed``
is None, ``measured`` False, and ``criterion`` starts "cannot measure" and says why. Adding a probe is
one file: a class like :class:`~prmkit.eval.CollapseProbe`, registered with :func:`register_probe`
(or the entry-point group ``prmkit.probes``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.eval._doc import ReportDoc
from prmkit.scoring import StepScorer, score_traces
from prmkit.trace import Trace

__all__ = ["Probe", "ProbeContext", "ProbeNotApplicable", "PROBES", "register_probe", "run_probes",
           "probes_read_scores"]


class ProbeNotApplicable(PrmkitError):
    """Raised by :meth:`Probe.run` when the context lacks what the probe needs (no scorer to score
    perturbed traces, no second data source): :func:`run_probes` then leaves the probe out, unless it
    was asked for by name."""


@dataclass
class ProbeContext:
    """What a probe may read.

    ``traces``: labelled traces with step scores under ``key``. ``scorer``: the PRM, for probes that
    score traces of their own (None: they are not applicable). ``label_source``: which step labels of
    ``traces`` to use (None: each step's latest). ``aggregate``: the trace score for length bias.
    ``seed``: for anything drawn at random. ``gaming_traces``: how many traces the gaming probe
    perturbs (None: all it can). ``optimiser_traces``: traces a real optimiser produced against a PRM
    (a trace file's path, or traces), which the gaming probe scores beside its perturbations (None:
    none). ``transfer_sources`` (name -> labelled traces) and ``in_domain``,
    the source the PRM was trained on: see :func:`run_probes`.
    """

    traces: Sequence[Trace]
    scorer: StepScorer | None = None
    key: str = "prm"
    label_source: str | None = None
    aggregate: str = "min"
    seed: int = 0
    gaming_traces: int | None = None
    optimiser_traces: str | os.PathLike | Sequence[Trace] | None = None
    transfer_sources: Mapping[str, Sequence[Trace]] = field(default_factory=dict)
    in_domain: str | None = None


@runtime_checkable
class Probe(Protocol):
    """A failure-mode probe: ``run`` gives its part of the report's ``"probes"`` section, a dict with
    ``failed`` (bool; None with ``measured`` False when its data cannot show the failure) and
    ``criterion`` (the rule, in words) and any numbers; ``headline`` and ``details`` show those
    numbers in the report.

    The report writes each probe's verdict and criterion itself, and shows every field that
    ``details`` does not claim generically, so a probe that renders nothing still loses no number.
    A probe may also define ``figures(result) -> dict[str, bytes | None]`` (PNG bytes by figure name,
    drawn when matplotlib is installed; ``details`` links those in ``figures``), and
    ``reads_scores = False`` when ``run`` never reads the scores stored on ``ctx.traces`` (it scores
    its own copies), so a run of only such probes does not score the whole file first
    (:func:`probes_read_scores`; True when a probe does not say).

    >>> class AlwaysPasses:
    ...     name, title = "always", "a probe that always passes"
    ...     def run(self, ctx):
    ...         return {"failed": False, "criterion": "never fails", "traces": len(ctx.traces)}
    ...     def headline(self, result):
    ...         return f"{result['traces']} traces"
    ...     def details(self, doc, result, figures):
    ...         return []
    >>> isinstance(AlwaysPasses(), Probe)
    True
    """

    #: The name results are stored under (the registry's name).
    name: str
    #: A few words on what it checks, for listings and help text.
    title: str

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        """The probe's result dict; raise :class:`ProbeNotApplicable` when ``ctx`` lacks what it needs."""
        ...

    def headline(self, result: Mapping[str, Any]) -> str:
        """The key number, one short line, for the report's table of probes ("" for none)."""
        ...

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        """Write the result's numbers into ``doc`` (under the probe's heading; ``figures`` holds the
        names of the figures drawn); return the keys of ``result`` shown, so the report does not
        repeat them."""
        ...


#: Probe name -> ``"module:attr"`` of a class (or factory without arguments) whose instances are
#: :class:`Probe` s. :func:`run_probes` runs them, and the report renders their results, in this order.
PROBES = Registry("probe", {
    "collapse": "prmkit.eval.probes._collapse:CollapseProbe",
    "gaming": "prmkit.eval.probes._gaming:GamingProbe",
    "result_check": "prmkit.eval.probes._result_check:ResultCheckProbe",
    "length_bias": "prmkit.eval.probes._length_bias:LengthBiasProbe",
    "transfer": "prmkit.eval.probes._transfer:TransferProbe",
    "faithfulness": "prmkit.eval.probes._faithfulness:FaithfulnessProbe",
}, group="prmkit.probes")


def register_probe(name: str, target: str) -> None:
    """Add (or replace) a probe: ``target`` is ``"module:attr"`` of a class (or factory without
    arguments) whose instances satisfy :class:`Probe`. From then on :func:`run_probes` runs it and
    the report renders its results; a new name comes after the built-in probes. Example:
    ``register_probe("always", "my_probes:AlwaysPasses")``.
    """
    PROBES.register(name, target)


def probes_read_scores(names: Sequence[str] | None) -> bool:
    """Whether any of the probes ``names`` (None: every registered probe) reads the scores stored on
    the traces (a probe says so by ``reads_scores``, True when it does not say)."""
    chosen = list(PROBES) if names is None else [names] if isinstance(names, str) else list(names)
    return any(getattr(PROBES.create(n), "reads_scores", True) for n in chosen if n in PROBES)


def run_probes(scorer: StepScorer | None, traces: Sequence[Trace], *, key: str | None = None,
               score: bool = True, label_source: str | None = None, aggregate: str = "min",
               seed: int = 0, gaming_traces: int | None = None,
               optimiser_traces: str | os.PathLike | Sequence[Trace] | None = None,
               transfer_sources: Mapping[str, Sequence[Trace]] | None = None,
               in_domain: str | None = None, probes: Sequence[str] | None = None) -> dict[str, Any]:
    """The evaluation report's ``"probes"`` section: probe name -> its result dict, in the order of
    :data:`PROBES` (``collapse``, ``gaming``, ``result_check``, ``length_bias``, ``transfer``,
    ``faithfulness``, then registered ones).

    ``traces`` are labelled traces. With ``score`` (default) ``scorer`` scores them first and the
    scores are stored under ``key`` (default: the scorer's kind), the trace score by ``aggregate``;
    else their stored scores are used. ``label_source``: which of their step labels to use (None:
    each step's latest). ``aggregate``: the trace score of the length-bias probe. The gaming probe
    perturbs the first ``gaming_traces`` traces with at least two steps (None: all of them) and
    scores them with ``scorer``; ``seed`` draws its perturbations; ``optimiser_traces`` (a trace
    file or traces a real optimiser produced, step labels from a checker) are scored beside them.

    Transfer: ``transfer_sources`` maps names to labelled traces, each scored here by ``scorer``.
    ``in_domain`` names the source the PRM was trained on: one of ``transfer_sources`` (then every
    source uses its own latest labels), or else the name under which ``traces`` join the
    comparison, with ``label_source``'s labels.

    ``probes``: the names to run (default: every registered probe). A probe that the inputs do not
    allow (gaming without a scorer, transfer without a second source) is left out, or, when named in
    ``probes``, a :class:`ProbeNotApplicable` error.

    >>> from prmkit.search import ScriptedScorer
    >>> from prmkit.trace import Problem, Step, StepLabel
    >>> t = Trace(id="t", problem=Problem("q"), outcome="correct",
    ...           steps=[Step("x = 1.", labels=[StepLabel(1)]), Step("The answer is 1.")])
    >>> section = run_probes(ScriptedScorer({"x = 1.": 0.5, "The answer is 1.": 0.75}), [t])
    >>> list(section), section["length_bias"]["n"]
    (['collapse', 'gaming', 'result_check', 'length_bias'], 1)
    """
    if isinstance(probes, str):
        probes = [probes]
    if probes is not None:
        unknown = [p for p in probes if p not in PROBES]
        if unknown:
            raise PrmkitError(f"unknown probe {', '.join(map(repr, unknown))}; known: {', '.join(PROBES)}")
    key = key or (scorer.kind if scorer is not None else "prm")
    if score:
        if scorer is None:
            raise PrmkitError("run_probes(score=True) needs a scorer; pass score=False to use the "
                              "scores the traces carry")
        score_traces(scorer, traces, key, aggregate=aggregate)
    ctx = ProbeContext(traces=traces, scorer=scorer, key=key, label_source=label_source,
                       aggregate=aggregate, seed=seed, gaming_traces=gaming_traces,
                       optimiser_traces=optimiser_traces, transfer_sources=dict(transfer_sources or {}), in_domain=in_domain)
    out: dict[str, Any] = {}
    for name in list(PROBES):  # read now: probes registered after import run too
        if probes is not None and name not in probes:
            continue
        try:
            out[name] = dict(PROBES.create(name).run(ctx))
        except ProbeNotApplicable:
            if probes is not None:
                raise
    return out
