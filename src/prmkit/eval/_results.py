"""The evaluation's typed results: one :class:`~prmkit._result.Result` dataclass per report section.

A results file (``report.json``, what ``prmkit eval ...`` writes) is one JSON object of sections;
:meth:`EvalResults.from_dict` reads each known section into its class here once, at the boundary, and
the report, the card and the CLI render the typed objects. Every class keeps the keys it does not know
in ``extra`` and writes back exactly the keys it read (see :class:`~prmkit._result.Record`), so
``EvalResults.from_dict(d).to_dict() == d`` for any results dict, and a file written by an earlier or a
later prmkit renders with nothing dropped. A section that is not a JSON object at all (a summary given
as a line of text, a hand-edited file) is kept as an :class:`OtherSection` and shown as it is.

>>> r = EvalResults.from_dict({"bon": {"ns": [1, 4], "methods": {"PRM (min)": {"acc": [0.5, 0.75]}}},
...                            "summary": {"verdict": "PRM wins."}})
>>> r.bon.methods["PRM (min)"].acc[-1], r.summary.verdict
(0.75, 'PRM wins.')
>>> r.to_dict() == {"bon": {"ns": [1, 4], "methods": {"PRM (min)": {"acc": [0.5, 0.75]}}},
...                 "summary": {"verdict": "PRM wins."}}
True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from prmkit._result import Record, Result, record_field, register_result, result_class
from prmkit.errors import FormatError, PrmkitError
from prmkit.search import TtsResult  # section "tts" (prmkit tts), registered where it is defined

__all__ = [
    "EvalResults", "OtherSection", "SummarySection", "Headline", "Rival", "BonSection", "BonLiveSection",
    "MethodCurve", "Comparison", "CheckedSection", "StepMetricsSection", "ScorerSteps", "ScoreBin",
    "ProbesSection", "ProbeOutcome", "PROBE_RESULTS", "probe_result_class", "ProcessBenchSection", "BenchSplit", "ThresholdSweep",
    "PRMBenchSection", "PRMBenchClass", "OutOfRange", "Duplicates", "LabelsSection", "LabelPair",
    "MetaSection", "MonitorabilitySection", "MonitorRow", "MonitorRef", "MonitorabilityProvenance",
    "RateIntervals", "InterventionEffect", "SECTION_NAMES", "section_from_dict", "as_results",
]


def _extra() -> Any:
    return field(default_factory=dict)


def _f3(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}"


def _pct(x: Any) -> str:
    return "n/a" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100 * x:.1f}%"


# -- summary: the verdict ------------------------------------------------------------------------------

@dataclass
class Rival(Record):
    """One rival of the verdict's main method at the largest N: its accuracy, and main minus it (paired
    bootstrap difference and interval) with the call in words."""

    acc: float | None = None
    acc_lo: float | None = None
    acc_hi: float | None = None
    acc_diff: float | None = None
    acc_diff_lo: float | None = None
    acc_diff_hi: float | None = None
    call: str | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class Headline(Record):
    """The verdict's numbers (:func:`~prmkit.eval.bon_verdict`); ``versus``: rival -> :class:`Rival`,
    or None for a rival that was not evaluated."""

    n: int | None = None
    main: str | None = None
    main_acc: float | None = None
    main_acc_lo: float | None = None
    main_acc_hi: float | None = None
    versus: dict[str, Rival | None] | None = record_field(by_name=Rival)
    random_acc: float | None = None
    below_random: list[str] | None = None
    below_n1: list[str] | None = None
    main_n1_acc: float | None = None
    extra: dict[str, Any] = _extra()

    @property
    def is_comparison(self) -> bool:
        """True when it names a main method and its rivals (else it is a free table of numbers)."""
        return self.main is not None and isinstance(self.versus, dict)


@register_result
@dataclass
class SummarySection(Record):
    """Section ``summary``: the verdict in words and its numbers."""

    kind: ClassVar[str] = "summary"
    verdict: str | None = None
    headline: Headline | None = record_field(record=Headline)
    extra: dict[str, Any] = _extra()

    def lines(self) -> list[str]:
        return [self.verdict or "(no verdict)"]


# -- best-of-N -----------------------------------------------------------------------------------------

@dataclass
class MethodCurve(Record):
    """One method's best-of-N accuracy per N, with its 95% bootstrap interval."""

    selector: str | None = None
    key: str | None = None
    aggregate: str | None = None
    acc: list[float | None] | None = None
    lo: list[float | None] | None = None
    hi: list[float | None] | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class Comparison(Record):
    """``a`` minus ``b`` at ``n`` candidates: paired bootstrap difference and 95% interval."""

    a: str | None = None
    b: str | None = None
    n: int | None = None
    diff: float | None = None
    lo: float | None = None
    hi: float | None = None
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class BonSection(Record):
    """Section ``bon``: best-of-N curves per method (:func:`~prmkit.eval.bon_curves`)."""

    kind: ClassVar[str] = "bon"
    ns: list[int] | None = None
    problems: int | None = None
    candidates: int | None = None
    bootstrap: int | None = None
    seed: int | None = None
    unjudged_problems: int | None = None
    methods: dict[str, MethodCurve] | None = record_field(by_name=MethodCurve)
    comparisons: list[Comparison] | None = record_field(records=Comparison)
    extra: dict[str, Any] = _extra()

    def lines(self) -> list[str]:
        ns = list(self.ns or [])
        out = ["method  " + "  ".join(f"N={n}" for n in ns)]
        for name, m in (self.methods or {}).items():
            acc = list(getattr(m, "acc", None) or [])
            out.append(f"{name}  " + "  ".join(_pct(a) for a in acc))
        return out


@register_result
@dataclass
class BonLiveSection(BonSection):
    """Section ``bon_live``: the demo's second pair (trained in the run) on the same traces."""

    kind: ClassVar[str] = "bon_live"


@register_result
@dataclass
class CheckedSection(Record):
    """Section ``checked``: the verdict PRM with a tool checking its steps
    (:func:`~prmkit.eval.checked_bon_report`): its verdict and best-of-N curves."""

    kind: ClassVar[str] = "checked"
    summary: SummarySection | None = record_field(record=SummarySection)
    bon: BonSection | None = record_field(record=BonSection)
    extra: dict[str, Any] = _extra()

    def lines(self) -> list[str]:
        return (self.summary.lines() if isinstance(self.summary, SummarySection) else []) + (
            self.bon.lines() if isinstance(self.bon, BonSection) else [])


# -- sections keyed by a name (scorer, probe) ------------------------------------------------------------

class _ByName(Record):
    """A section that is a dict of name -> entry (one per scorer, one per probe); an entry that is not
    an object is kept as it is (shown under "Other fields")."""

    entry: ClassVar[type[Record]]

    def to_dict(self) -> dict[str, Any]:
        return {k: v.to_dict() if isinstance(v, Record) else v for k, v in self.entries.items()}  # type: ignore[attr-defined]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> Any:
        where = where or cls.kind
        if not isinstance(d, Mapping):
            raise FormatError(f"must be an object, got {type(d).__name__}", field=where)
        return cls({k: cls.entry.from_dict(v, where=f"{where}.{k}") if isinstance(v, Mapping) else v  # type: ignore[call-arg]
                    for k, v in d.items()})

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)  # type: ignore[attr-defined]

    def named(self) -> dict[str, Any]:
        """The entries that are objects (the section's own type), by name."""
        return {k: v for k, v in self.entries.items() if isinstance(v, self.entry)}  # type: ignore[attr-defined]

    def scalars(self) -> dict[str, Any]:
        """The entries that are not objects, by name."""
        return {k: v for k, v in self.entries.items() if not isinstance(v, self.entry)}  # type: ignore[attr-defined]


@dataclass
class ScoreBin(Record):
    """One bin of the reliability diagram."""

    lo: float | None = None
    hi: float | None = None
    count: int | None = None
    mean_score: float | None = None
    frac_correct: float | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class ScorerSteps(Record):
    """One scorer's step metrics (:class:`~prmkit.eval.StepMetrics`)."""

    n: int | None = None
    positives: int | None = None
    negatives: int | None = None
    auroc: float | None = None
    threshold: float | None = None
    f1_error: float | None = None
    f1_correct: float | None = None
    accuracy: float | None = None
    error_precision: float | None = None
    error_recall: float | None = None
    ece: float | None = None
    brier: float | None = None
    bins: list[ScoreBin] | None = record_field(records=ScoreBin)
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class StepMetricsSection(_ByName):
    """Section ``step_metrics``: scorer name -> :class:`ScorerSteps`."""

    kind: ClassVar[str] = "step_metrics"
    entry: ClassVar[type[Record]] = ScorerSteps
    entries: dict[str, ScorerSteps | Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"step metrics ({k}): AUROC {_f3(v.auroc)}  F1(error) {_f3(v.f1_error)}  "
                f"ECE {_f3(v.ece)}  on {v.n} labelled steps" for k, v in self.named().items()]


@dataclass
class ProbeOutcome(Record):
    """One probe's result: its verdict (``failed`` True / False, None when it cannot decide),
    ``criterion``, and the probe's own numbers in ``extra`` (rendered by the probe)."""

    failed: bool | None = None
    measured: bool | None = None
    criterion: str | None = None
    failed_by: Any = None
    extra: dict[str, Any] = _extra()

    @property
    def numbers(self) -> dict[str, Any]:
        """The result as the probe wrote it (what ``Probe.headline`` / ``Probe.details`` read)."""
        return self.to_dict()

    def skipped_counts(self) -> dict[str, Any] | None:
        """``skipped`` (perturbation -> traces it could not apply to), when the probe gave one."""
        skipped = self.extra.get("skipped")
        return dict(skipped) if isinstance(skipped, Mapping) else None


#: Built-in probe name -> ``"module:attr"`` of the result class its probe returns (a Record whose
#: dict is the probe's entry of the section): :meth:`ProbesSection.result` reads an entry back as it.
PROBE_RESULTS: dict[str, str] = {
    "collapse": "prmkit.eval.probes._collapse:CollapseResult",
    "gaming": "prmkit.eval.probes._gaming:GamingResult",
    "result_check": "prmkit.eval.probes._result_check:ResultCheckResult",
    "length_bias": "prmkit.eval.probes._length_bias:LengthBiasResult",
    "transfer": "prmkit.eval.probes._transfer:TransferResult",
    "faithfulness": "prmkit.eval.probes._faithfulness:FaithfulnessResult",
}


def probe_result_class(name: str) -> type[Record] | None:
    """The result class of the built-in probe ``name`` (:data:`PROBE_RESULTS`), or None (a plugin's
    probe: its entry stays a :class:`ProbeOutcome`)."""
    import importlib

    target = PROBE_RESULTS.get(name)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@register_result
@dataclass
class ProbesSection(_ByName):
    """Section ``probes``: probe name -> :class:`ProbeOutcome` (the verdict and the numbers, as the
    report shows every probe's); :meth:`result` gives an entry typed as its probe's own result
    (:class:`~prmkit.eval.GamingResult`, :class:`~prmkit.eval.LengthBiasResult`, ...).

    >>> s = ProbesSection.from_dict({"length_bias": {"spearman": -0.5, "by_length": [{"steps": 2, "n": 3}]}})
    >>> r = s.result("length_bias")
    >>> type(r).__name__, r.spearman, r.by_length[0].n, s.result("gaming")
    ('LengthBiasResult', -0.5, 3, None)
    """

    kind: ClassVar[str] = "probes"
    entry: ClassVar[type[Record]] = ProbeOutcome
    entries: dict[str, ProbeOutcome | Any] = field(default_factory=dict)

    def result(self, name: str) -> Record | None:
        """Probe ``name``'s entry read as its probe's result class (a :class:`ProbeOutcome` for a
        probe without a known one), or None when the section has no such entry (or it is not an
        object)."""
        entry = self.entries.get(name)
        if not isinstance(entry, ProbeOutcome):
            return None
        cls = probe_result_class(name)
        return entry if cls is None else cls.from_dict(entry.numbers, where=f"probes.{name}")

    def failed(self) -> list[str]:
        """The probes that failed."""
        return [k for k, v in self.named().items() if v.failed is True]

    def lines(self) -> list[str]:
        return [f"{k}: {'FAILED' if v.failed else 'passed' if v.failed is False else 'cannot measure'} — "
                f"{'' if v.criterion is None else v.criterion}" for k, v in self.named().items()]


# -- benchmarks ------------------------------------------------------------------------------------------

@dataclass
class BenchSplit(Record):
    """ProcessBench numbers of one split (or one generator within it)."""

    error_acc: float | None = None
    correct_acc: float | None = None
    f1: float | None = None
    n_error: int | None = None
    n_correct: int | None = None
    flagged_early: int | None = None
    flagged_late: int | None = None
    not_flagged: int | None = None
    threshold: float | None = None
    threshold_source: str | None = None
    unscored_steps: int | None = None
    unscored_traces: int | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class ThresholdSweep(Record):
    """F1 against the threshold on one split, and the best threshold."""

    tuned_on: str | None = None
    thresholds: list[float] | None = None
    f1: list[float | None] | None = None
    best: float | None = None
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class ProcessBenchSection(Record):
    """Section ``processbench`` (:class:`~prmkit.eval.ProcessBenchResult`)."""

    kind: ClassVar[str] = "processbench"
    key: str | None = None
    threshold: float | None = None
    threshold_source: str | None = None
    splits: dict[str, BenchSplit] | None = record_field(by_name=BenchSplit)
    average_f1: float | None = None
    by_generator: dict[str, dict[str, BenchSplit]] | None = None
    sweep: list[ThresholdSweep] | None = record_field(records=ThresholdSweep)
    extra: dict[str, Any] = _extra()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> ProcessBenchSection:
        out = super().from_dict(d, where=where)
        if isinstance(out.by_generator, Mapping):
            out.by_generator = {
                split: ({g: BenchSplit.from_dict(v) if isinstance(v, Mapping) else v for g, v in gens.items()}
                        if isinstance(gens, Mapping) else gens)
                for split, gens in out.by_generator.items()}
        return out

    def split_rows(self) -> dict[str, BenchSplit]:
        """The splits that are objects, by name."""
        return {k: v for k, v in (self.splits or {}).items() if isinstance(v, BenchSplit)}

    def generator_rows(self) -> list[tuple[str, str, BenchSplit]]:
        """``(split, generator, numbers)`` of ``by_generator``, in order."""
        by_gen = self.by_generator if isinstance(self.by_generator, Mapping) else {}
        return [(split, gen, v) for split, gens in by_gen.items() if isinstance(gens, Mapping)
                for gen, v in gens.items() if isinstance(v, BenchSplit)]


@dataclass
class PRMBenchClass(Record):
    """PRMBench numbers of one class (or overall)."""

    prmscore: float | None = None
    f1_positive: float | None = None
    f1_negative: float | None = None
    n_traces: int | None = None
    n_steps: int | None = None
    n_error_steps: int | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class OutOfRange(Record):
    """PRMBench traces naming an error index beyond their last step, and what was done with them."""

    policy: str | None = None
    traces: int | None = None
    indices: int | None = None
    by_class: dict[str, int] | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class Duplicates(Record):
    """PRMBench samples left out as later copies of one key."""

    traces: int | None = None
    ids: list[str] | None = None
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class PRMBenchSection(Record):
    """Section ``prmbench`` (:class:`~prmkit.eval.PRMBenchResult`)."""

    kind: ClassVar[str] = "prmbench"
    key: str | None = None
    threshold: float | None = None
    classes: dict[str, PRMBenchClass] | None = record_field(by_name=PRMBenchClass)
    overall: PRMBenchClass | None = record_field(record=PRMBenchClass)
    out_of_range: OutOfRange | None = record_field(record=OutOfRange)
    duplicates: Duplicates | None = record_field(record=Duplicates)
    extra: dict[str, Any] = _extra()


# -- labels, meta ----------------------------------------------------------------------------------------

@dataclass
class LabelPair(Record):
    """Agreement of two label sources on the steps both labelled."""

    a: str | None = None
    b: str | None = None
    steps: int | None = None
    agreement: float | None = None
    kappa: float | None = None
    a_wrong: int | None = None
    b_wrong: int | None = None
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class LabelsSection(Record):
    """Section ``labels`` (:func:`~prmkit.eval.label_agreement`)."""

    kind: ClassVar[str] = "labels"
    sources: list[str] | None = None
    traces: int | None = None
    pairs: list[LabelPair] | None = record_field(records=LabelPair)
    first_error_agreement: float | None = None
    first_error_traces: int | None = None
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class MetaSection(Record):
    """Section ``meta``: how the numbers were produced (command, times, data, models, seeds, settings)."""

    kind: ClassVar[str] = "meta"
    title: str | None = None
    command: str | None = None
    created: str | None = None
    seconds: float | None = None
    stage_seconds: Any = None
    data: Any = None
    models: Any = None
    seeds: Any = None
    settings: Any = None
    extra: dict[str, Any] = _extra()

    def stage_seconds_by_stage(self) -> dict[str, Any] | None:
        """``stage_seconds`` when it is stage -> seconds (else None: shown as it is)."""
        return dict(self.stage_seconds) if isinstance(self.stage_seconds, Mapping) else None


@dataclass
class MonitorRef(Record):
    """A monitor the monitorability evaluation ran: its name and kind."""

    name: str | None = None
    monitor: str | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class MonitorabilityProvenance(Record):
    """What the monitorability numbers were computed on."""

    monitors: list[MonitorRef] | None = record_field(records=MonitorRef)
    traces: int | None = None
    control_traces: int | None = None
    sources: list[str] | None = None
    bootstrap: int | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class RateIntervals(Record):
    """95% bootstrap intervals of TPR, TNR and g-mean², each ``[lo, hi]``."""

    tpr: list[float] | None = None
    tnr: list[float] | None = None
    g_mean2: list[float] | None = None
    extra: dict[str, Any] = _extra()


@dataclass
class MonitorRow(Record):
    """One monitor, view and archetype: its rates and counts."""

    monitor: str | None = None
    view: str | None = None
    archetype: str | None = None
    n_pos: int | None = None
    n_neg: int | None = None
    tpr: float | None = None
    tnr: float | None = None
    g_mean2: float | None = None
    ci: RateIntervals | None = record_field(record=RateIntervals)
    extra: dict[str, Any] = _extra()


@dataclass
class InterventionEffect(Record):
    """How many trajectory pairs changed behaviour when the loophole was switched on."""

    changed: int | None = None
    pairs: int | None = None
    effect: float | None = None
    extra: dict[str, Any] = _extra()


@register_result
@dataclass
class MonitorabilitySection(Record):
    """Section ``monitorability`` (``prmkit eval monitor``): g-mean² per monitor, view and archetype."""

    kind: ClassVar[str] = "monitorability"
    provenance: MonitorabilityProvenance | None = record_field(record=MonitorabilityProvenance)
    rows: list[MonitorRow] | None = record_field(records=MonitorRow)
    effects: InterventionEffect | None = record_field(record=InterventionEffect)
    extra: dict[str, Any] = _extra()


@dataclass
class OtherSection:
    """A section prmkit has no class for (or one that is not a JSON object): kept and shown as it is."""

    name: str
    value: Any
    kind: ClassVar[str] = "other"

    def to_dict(self) -> Any:
        return self.value

    @classmethod
    def from_dict(cls, d: Any, *, name: str = "other") -> OtherSection:
        return cls(name, d)

    def lines(self) -> list[str]:
        return [f"{self.name}: {self.value}"]


#: The report's sections that have a class (registered under the section's name as its kind).
SECTION_NAMES = ("summary", "card", "bon", "checked", "bon_live", "step_metrics", "probes", "processbench",
                 "prmbench", "labels", "refusals", "monitorability", "meta", TtsResult.kind, "annotation")


def section_from_dict(name: str, value: Any) -> Any:
    """Section ``name`` of a results dict as its typed result (:class:`OtherSection` when prmkit has no
    class for it, or when it is not an object)."""
    cls = result_class(name) if name in SECTION_NAMES else None
    # An empty card is no card (the report says how to build one).
    if cls is None or not isinstance(value, Mapping) or (name == "card" and not value):
        return OtherSection(name, value)
    return cls.from_dict(value)


@register_result
@dataclass
class EvalResults:
    """The sections of one evaluation, by name, in order: what the demo composes, ``prmkit report``
    reads back and the report renders. A known section is also an attribute (``results.bon``: a
    :class:`BonSection`, or None)."""

    kind: ClassVar[str] = "results"
    sections: dict[str, Any] = field(default_factory=dict)

    # The known sections, typed (None when absent; an OtherSection when the file's was not an object).

    @property
    def summary(self) -> SummarySection | OtherSection | None:
        """The section ``summary``, or None."""
        return self.sections.get("summary")

    @property
    def card(self) -> Any:
        """The card (:class:`~prmkit.eval.Card`), or None."""
        return self.sections.get("card")

    @property
    def bon(self) -> BonSection | OtherSection | None:
        """The section ``bon``, or None."""
        return self.sections.get("bon")

    @property
    def checked(self) -> CheckedSection | OtherSection | None:
        """The section ``checked``, or None."""
        return self.sections.get("checked")

    @property
    def bon_live(self) -> BonSection | OtherSection | None:
        """The section ``bon_live``, or None."""
        return self.sections.get("bon_live")

    @property
    def step_metrics(self) -> StepMetricsSection | OtherSection | None:
        """The section ``step_metrics``, or None."""
        return self.sections.get("step_metrics")

    @property
    def probes(self) -> ProbesSection | OtherSection | None:
        """The section ``probes``, or None."""
        return self.sections.get("probes")

    @property
    def processbench(self) -> ProcessBenchSection | OtherSection | None:
        """The section ``processbench``, or None."""
        return self.sections.get("processbench")

    @property
    def prmbench(self) -> PRMBenchSection | OtherSection | None:
        """The section ``prmbench``, or None."""
        return self.sections.get("prmbench")

    @property
    def labels(self) -> LabelsSection | OtherSection | None:
        """The section ``labels``, or None."""
        return self.sections.get("labels")

    @property
    def monitorability(self) -> MonitorabilitySection | OtherSection | None:
        """The section ``monitorability``, or None."""
        return self.sections.get("monitorability")

    @property
    def meta(self) -> MetaSection | OtherSection | None:
        """The section ``meta``, or None."""
        return self.sections.get("meta")

    def __contains__(self, name: str) -> bool:
        return name in self.sections

    def __len__(self) -> int:
        return len(self.sections)

    def __iter__(self) -> Iterator[str]:
        return iter(self.sections)

    def __getitem__(self, name: str) -> Any:
        return self.sections[name]

    def get(self, name: str) -> Any:
        """Section ``name``, or None."""
        return self.sections.get(name)

    def add(self, section: Result | OtherSection, name: str | None = None) -> None:
        """Set a section (under its kind, or ``name``)."""
        self.sections[name or (section.name if isinstance(section, OtherSection) else section.kind)] = section

    def to_dict(self) -> dict[str, Any]:
        return {k: v.to_dict() for k, v in self.sections.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EvalResults:
        return cls({k: section_from_dict(k, v) for k, v in d.items()})

    def lines(self) -> list[str]:
        out: list[str] = []
        for k, v in self.sections.items():
            out += [f"[{k}]", *v.lines()]
        return out


def as_results(results: EvalResults | Mapping[str, Any]) -> EvalResults:
    """``results`` typed: an :class:`EvalResults` as it is, a dict of sections read section by section
    (a section already typed is kept)."""
    if isinstance(results, EvalResults):
        return results
    if not isinstance(results, Mapping):
        raise PrmkitError(f"results must be a dict of sections, got {type(results).__name__}")
    return EvalResults({k: v if isinstance(v, Result) else section_from_dict(k, v) for k, v in results.items()})
