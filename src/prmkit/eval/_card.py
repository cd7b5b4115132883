"""The process-supervision card: which models, labels and tests stand behind a reported result.

A card has a fixed list of fields (:data:`CARD_FIELDS`), filled only from what the run recorded: the
traces' provenance and step labels, the reward-model folders prmkit's trainer wrote, and the result
dicts of the evaluation. A field nothing recorded stays *missing* (``value`` None) and says so when
rendered; it is never left out, so a reader sees what a report cannot vouch for. What provenance
cannot know (the deployment monitor, say) is given as an override and shown with source ``user``.
Provenance is read through its typed entries (:mod:`prmkit.provenance`): fields, not dict keys.

>>> from prmkit.provenance import GenerateProvenance, PolicyRef
>>> from prmkit.trace import Problem, Step, StepLabel, Trace
>>> t = Trace(id="t", problem=Problem("2+2?"), steps=[Step("2+2=4", labels=[StepLabel(1, "judge",
...           labeler="judge", model="qwen-judge")])])
>>> t.add_provenance(GenerateProvenance("hf", policy=PolicyRef("hf", "smollm2-135m")))
>>> card = card_from_provenance([t], overrides={"deployment_monitor": "none"})
>>> card["policy_model"].value, card["automated_judge"].value
('smollm2-135m (hf)', 'qwen-judge')
>>> card["deployment_monitor"].source, card["outcome_reward_model"].value
('user', None)
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._jsonio import decode_utf8
from prmkit._result import register_result
from prmkit.errors import PrmkitError
from prmkit.eval._results import (
    BonSection,
    EvalResults,
    PRMBenchClass,
    PRMBenchSection,
    ProbesSection,
    ProcessBenchSection,
    StepMetricsSection,
    as_results,
)
from prmkit.provenance import (
    GenerateProvenance,
    GuidedProvenance,
    LabelProvenance,
    PolicyRef,
    ScoreProvenance,
    SearchProvenance,
    TrainProvenance,
)
from prmkit.trace import Trace

__all__ = ["CARD_FIELDS", "MISSING_TEXT", "Card", "CardField", "card_from_provenance"]

#: The card's fields in order: ``(key, title)``.
CARD_FIELDS: tuple[tuple[str, str], ...] = (
    ("base_model", "Base model"),
    ("policy_model", "Policy model"),
    ("outcome_reward_model", "Outcome reward model (ORM)"),
    ("process_reward_model", "Process reward model (PRM)"),
    ("automated_judge", "Automated judge"),
    ("human_label_source", "Human label source"),
    ("tool_scaffold", "Tool scaffold"),
    ("deployment_monitor", "Deployment monitor"),
    ("supervised_process", "What process was supervised"),
    ("label_method", "How labels were produced"),
    ("tested_on", "Where the method was tested"),
    ("failed_probes", "Which probes it failed"),
)
_TITLES = dict(CARD_FIELDS)

#: How a missing field reads in a rendered card.
MISSING_TEXT = "**missing** — nothing in the provenance says"

# Known label sources, in words (a user's own source is shown by its name).
_SOURCE_WORDS = {
    "human": "human annotation",
    "symbolic": "symbolic step checker",
    "mc_hard": "Monte Carlo rollouts (hard: any rollout reaches the answer)",
    "mc_soft": "Monte Carlo rollouts (soft: fraction of rollouts reaching the answer)",
    "binary_search": "Monte Carlo binary search for the first error",
    "advantage": "rollout value advantage",
    "judge": "LLM judge",
    "consensus": "consensus of Monte Carlo and judge",
    "outcome": "final-answer outcome copied to steps",
    "synthetic": "synthetic error insertion",
    "automatic": "automatic (unspecified)",
}

# Backbone aliases of prmkit's trainer, spelled out.
_BACKBONES = {
    "smollm2": "SmolLM2-135M-Instruct",
    "minilm": "all-MiniLM-L6-v2",
    "tiny": "tiny test backbone (random init)",
}


@dataclass
class CardField:
    """One line of the card: ``value`` (None: missing) and ``source`` (what filled it)."""

    key: str
    title: str
    value: str | None = None
    source: str | None = None

    @property
    def missing(self) -> bool:
        """True when nothing recorded filled this field."""
        return self.value is None

    def to_dict(self) -> dict[str, Any]:
        """``{"value", "source", "title"}`` (value None: missing)."""
        return {"value": self.value, "source": self.source, "title": self.title}


@register_result
@dataclass
class Card:
    """The process-supervision card: every field of :data:`CARD_FIELDS`, in order, filled or missing.
    The report's section ``card`` (a :class:`~prmkit._result.Result`); keys beside ``fields`` that a
    card file carries are kept in ``extra``.

    >>> c = Card()
    >>> c.set("tool_scaffold", "none", "user")
    >>> c.to_dict()["fields"]["tool_scaffold"]
    {'value': 'none', 'source': 'user', 'title': 'Tool scaffold'}
    >>> len(c.missing)
    11
    """

    fields: dict[str, CardField] = field(default_factory=lambda: {
        k: CardField(k, t) for k, t in CARD_FIELDS})
    extra: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = "card"

    def __getitem__(self, key: str) -> CardField:
        return self.fields[key]

    def set(self, key: str, value: Any, source: str | None) -> None:
        """Fill ``key`` (a :data:`CARD_FIELDS` key; an unknown key is added after them)."""
        self.__dict__.pop("_read_from", None)  # changed: written from its fields from now on
        f = self.fields.setdefault(key, CardField(key, key.replace("_", " ").capitalize()))
        f.value = None if value is None else str(value)
        f.source = source if value is not None else None

    @property
    def missing(self) -> list[str]:
        """Keys of the fields nothing filled."""
        return [k for k, f in self.fields.items() if f.missing]

    def to_dict(self) -> dict[str, Any]:
        """``{"fields": {key: {"value", "source", "title"}}}`` (value None = missing)."""
        read_from = self.__dict__.get("_read_from")
        if read_from is not None:  # read from a dict and not changed since: that dict, as it was
            return copy.deepcopy(read_from)
        return {"fields": {k: f.to_dict() for k, f in self.fields.items()}, **self.extra}

    def lines(self) -> list[str]:
        """``title: value (source)`` per field; a missing one says so."""
        return [f"{title}: {'missing' if value is None else value}" + (f" ({source})" if source else "")
                for title, value, source in self.rows()]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Card:
        """A card from :meth:`to_dict` output; fields it lacks are missing, unknown ones kept (last).

        >>> Card.from_dict(None).missing == [k for k, _ in CARD_FIELDS]
        True
        """
        card = cls(extra={k: v for k, v in (d or {}).items() if k != "fields"})
        for key, f in ((d or {}).get("fields") or {}).items():
            if not isinstance(f, Mapping):
                raise PrmkitError(f"card field {key!r}: expected {{'value', 'source'}}, got {f!r}")
            card.set(key, f.get("value"), f.get("source"))
            if f.get("title") and key not in _TITLES:
                card.fields[key].title = str(f["title"])
        if d is not None:
            card.__dict__["_read_from"] = copy.deepcopy(dict(d))  # written back as it came (to_dict)
        return card

    def rows(self) -> list[tuple[str, str | None, str | None]]:
        """``(title, value, source)`` per field, in order (value None: missing)."""
        return [(f.title, f.value, f.source) for f in self.fields.values()]

    def markdown(self, *, heading: bool = True) -> str:
        """A Markdown table (with a heading); a missing field reads :data:`MISSING_TEXT`.

        >>> print(Card().markdown(heading=False).splitlines()[2])
        | Base model | **missing** — nothing in the provenance says | — |
        """
        lines = ["## Process-supervision card", ""] if heading else []
        lines += ["| Field | Value | Source |", "| --- | --- | --- |"]
        for title, value, source in self.rows():
            shown = MISSING_TEXT if value is None else _md_cell(value)
            lines.append(f"| {_md_cell(title)} | {shown} | {_md_cell(source or '—')} |")
        return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


# -- filling from provenance ---------------------------------------------------------------------------

def _counted(counter: Counter, unit: str) -> str:
    """``"a (3 traces); b (1 trace)"`` — most frequent first, ties by name (stable output)."""
    items = sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return "; ".join(f"{k} ({n} {unit}{'' if n == 1 else 's'})" for k, n in items)


def _model_of(policy: PolicyRef | None) -> str | None:
    """``"model (backend)"`` of a policy recorded in provenance."""
    if policy is None or not policy.model:
        return None
    text = policy.model
    if policy.adapter:  # an absolute path (an installed package's asset, say) shows its name alone
        text += f" + adapter {_shown(policy.adapter, None)}"
    return f"{text} ({policy.backend})" if policy.backend and policy.backend != policy.model else text


@dataclass
class _Seen:
    """What one pass over the traces found, counted so the card can say how much stands behind it."""

    traces: int = 0
    steps: int = 0
    policies: Counter = field(default_factory=Counter)
    imports: Counter = field(default_factory=Counter)
    human_imports: Counter = field(default_factory=Counter)
    human_labelers: set = field(default_factory=set)
    human_steps: int = 0
    judges: dict = field(default_factory=dict)              # judge model -> backend (or None)
    judge_where: set = field(default_factory=set)
    scorers: dict = field(default_factory=lambda: {"prm": Counter(), "orm": Counter()})
    adapters_base: Counter = field(default_factory=Counter)
    label_steps: Counter = field(default_factory=Counter)
    label_labelers: dict = field(default_factory=dict)
    label_models: dict = field(default_factory=dict)
    label_rollouts: dict = field(default_factory=dict)
    kinds: Counter = field(default_factory=Counter)
    tools: Counter = field(default_factory=Counter)
    tool_traces: int = 0
    splitters: Counter = field(default_factory=Counter)
    domains: Counter = field(default_factory=Counter)
    monitors: Counter = field(default_factory=Counter)
    # What filled each field, so a source names only the stages that ran.
    policy_from: set = field(default_factory=set)
    scorer_from: dict = field(default_factory=lambda: {"prm": set(), "orm": set()})
    process_from: set = field(default_factory=set)
    # id -> what was counted for it: one trace met again at a later stage (the demo passes its training
    # traces and then the same traces with Monte Carlo labels added) is one trace, and its labels and
    # provenance count once; only what the later copy adds is counted.
    counted: dict = field(default_factory=dict)
    # The summary an `annotate` provenance entry carries: agreement and cost of the labeling database.
    annotate: dict = field(default_factory=dict)

    def add(self, t: Trace) -> None:
        first = t.id not in self.counted
        counted = self.counted.setdefault(t.id, set())
        if first:
            self.traces += 1
        imported = None
        # Per trace, each value counts once (a trace scored twice by one PRM is one trace).
        mine: dict[str, set] = {k: set() for k in ("policies", "adapters_base", "splitters", "imports",
                                                   "prm", "orm", "monitors")}
        for p in t.provenance:
            e = p.typed
            if isinstance(e, GenerateProvenance):
                mine["policies"].add(_model_of(e.policy) or p.name)
                self.policy_from.add(p.stage)
                if e.policy is not None and e.policy.adapter and e.policy.model:
                    mine["adapters_base"].add(e.policy.model)
                if e.splitter:
                    mine["splitters"].add(e.splitter)
                    self.process_from.add(f"{p.stage} provenance")
            elif isinstance(e, (SearchProvenance, GuidedProvenance)):
                model = _model_of(e.policy)
                if model:
                    mine["policies"].add(f"{model} [{p.stage}]")
                    self.policy_from.add(p.stage)
                # A guided entry does not record its scorer's kind, so it names no PRM / ORM.
                if isinstance(e, SearchProvenance) and e.scorer and e.kind in ("prm", "orm"):
                    mine[e.kind].add(e.scorer)
                    self.scorer_from[e.kind].add(p.stage)
            elif isinstance(e, LabelProvenance):
                judge = e.judge_policy
                if judge is not None and judge.model:
                    self.judges[judge.model] = judge.backend or self.judges.get(judge.model)
                    self.judge_where.add(f"trace provenance: label/{p.name}")
            elif isinstance(e, ScoreProvenance):
                if e.kind in ("prm", "orm"):
                    mine[e.kind].add(e.model or p.name)
                    self.scorer_from[e.kind].add(p.stage)
            elif p.stage == "import":
                imported = p.name
                mine["imports"].add(p.name)
            elif p.stage == "split":
                mine["splitters"].add(p.name)
                self.process_from.add("split provenance")
            elif p.stage == "monitor":
                mine["monitors"].add(p.name)
            elif p.stage == "annotate":  # labels collected with `prmkit annotate` (its database's summary)
                imported = imported or f"prmkit annotate ({(p.args or {}).get('db') or 'database'})"
                self.annotate = dict(p.args or {})
        gen = ((t.meta or {}).get("processbench") or {}).get("generator")
        if gen and not mine["policies"]:
            mine["policies"].add(f"{gen} [processbench generator]")
            self.policy_from.add("trace meta: processbench.generator")
        for key, values in mine.items():
            target = self.scorers[key] if key in ("prm", "orm") else getattr(self, key)
            new = {v for v in values if (key, v) not in counted}
            counted.update((key, v) for v in new)
            target.update(new)
        if not first:
            self._add_labels(t, counted)
            return
        if (t.problem.meta or {}).get("arith"):
            self.domains["arith word problems"] += 1
            self.process_from.add("problem meta")
        elif imported:
            self.domains[f"{imported} problems"] += 1
            self.process_from.add("import provenance")
        has_tool = False
        for s in t.steps:
            self.steps += 1
            self.kinds[s.kind] += 1
            if s.kind == "tool_call":
                has_tool = True
                call = (s.meta or {}).get("tool_call") or {}
                fn = call.get("function") if isinstance(call, Mapping) else None
                name = fn.get("name") if isinstance(fn, Mapping) else None
                self.tools[str(name or "unnamed tool")] += 1
            elif s.kind == "observation":
                has_tool = True
        if self._add_labels(t, counted):
            self.human_imports[imported or (t.source or "unknown dataset")] += 1
        self.tool_traces += has_tool

    def _add_labels(self, t: Trace, counted: set) -> bool:
        """Count the step labels of ``t`` not counted for its id before; whether one is human."""
        human_here = False
        for i, s in enumerate(t.steps):
            for lab in s.labels:
                sig = ("label", i, lab.source, lab.kind, lab.value, lab.labeler)
                if sig in counted:
                    continue
                counted.add(sig)
                src = lab.source
                self.label_steps[src] += 1
                if lab.labeler:
                    self.label_labelers.setdefault(src, Counter())[lab.labeler] += 1
                if lab.model:
                    self.label_models.setdefault(src, Counter())[lab.model] += 1
                if lab.rollouts is not None:
                    self.label_rollouts.setdefault(src, Counter())[lab.rollouts] += 1
                if src == "judge" and lab.model:
                    self.judges.setdefault(lab.model, None)
                    self.judge_where.add("step labels (source judge)")
                if src == "human":
                    self.human_steps += 1
                    human_here = True
                    if lab.labeler:
                        self.human_labelers.add(lab.labeler)
        return human_here


def _fill_from_traces(card: Card, seen: _Seen) -> None:
    n = seen.traces
    where = f"trace provenance ({n} traces)"
    if seen.policies:
        stages = sorted(x for x in seen.policy_from if not x.startswith("trace meta"))
        meta = sorted(x for x in seen.policy_from if x.startswith("trace meta"))
        card.set("policy_model", _plain_or_counted(seen.policies, "trace", n),
                 "; ".join(([f"{where}: {' / '.join(stages)}"] if stages else []) + meta))
    if seen.adapters_base:
        card.set("base_model", f"{_plain_or_counted(seen.adapters_base, 'trace')} (policy base, "
                 "fine-tuned with an adapter)", f"{where}: generate policy.adapter")
    for kind, key in (("prm", "process_reward_model"), ("orm", "outcome_reward_model")):
        if seen.scorers[kind]:
            card.set(key, _plain_or_counted(seen.scorers[kind], "trace", n),
                     f"{where}: {' / '.join(sorted(seen.scorer_from[kind]))} (kind {kind})")
    if seen.judges:
        names = [f"{m} ({b})" if b and b != m else m for m, b in sorted(seen.judges.items())]
        card.set("automated_judge", "; ".join(names), " + ".join(sorted(seen.judge_where)))
    if seen.human_steps:
        datasets = _plain_or_counted(seen.human_imports, "trace")
        who = sorted(seen.human_labelers)
        people = (f", labeler {who[0]}" if len(who) == 1 else f", {len(who)} labelers") if who else ""
        card.set("human_label_source", f"{datasets} — {seen.human_steps} human step labels{people}"
                 + _annotation_cost(seen.annotate),
                 "step labels (source human)" + (" + trace provenance: import" if seen.imports else "")
                 + (" + trace provenance: annotate" if seen.annotate else ""))
    if seen.tool_traces:
        tools = _counted(seen.tools, "call") if seen.tools else "unnamed tools"
        card.set("tool_scaffold", f"tool-using agent trajectories in {seen.tool_traces} of {n} traces; "
                 f"tools: {tools}", "step kinds (tool_call / observation) and step.meta.tool_call")
    elif n and seen.steps:
        card.set("tool_scaffold", f"none (no tool_call or observation step in {n} traces)",
                 "step kinds")
    if seen.monitors:
        card.set("deployment_monitor", _plain_or_counted(seen.monitors, "trace"),
                 f"{where}: monitor")
    if seen.steps:
        kinds = ", ".join(f"{k} {c}" for k, c in sorted(seen.kinds.items(), key=lambda kv: -kv[1]))
        agent = seen.kinds.keys() & {"tool_call", "observation", "plan"}
        what = "agent trajectory steps" if agent else "step-by-step solutions"
        domain = f" to {', '.join(sorted(seen.domains))}" if seen.domains else ""
        split = f"; steps split by {', '.join(sorted(seen.splitters))}" if seen.splitters else ""
        card.set("supervised_process", f"{what}{domain} ({seen.steps} steps in {n} traces: {kinds}){split}",
                 ", ".join(["step kinds", *sorted(seen.process_from)]))
    if seen.label_steps:
        parts = []
        for src, count in sorted(seen.label_steps.items(), key=lambda kv: (-kv[1], kv[0])):
            text = f"{src} — {_SOURCE_WORDS.get(src, 'labels')}: {count} step labels"
            extra = []
            labelers = seen.label_labelers.get(src)
            if labelers and src != "human":
                extra.append("by " + ", ".join(sorted(labelers)))
            models = seen.label_models.get(src)
            if models:
                extra.append("model " + ", ".join(sorted(models)))
            rollouts = seen.label_rollouts.get(src)
            if rollouts and src != "judge":
                lo, hi = min(rollouts), max(rollouts)
                extra.append(f"{lo} rollouts" if lo == hi else f"{lo}–{hi} rollouts")
            if extra:
                text += f" ({'; '.join(extra)})"
            parts.append(text)
        card.set("label_method", "; ".join(parts), "step labels (source, labeler, model, rollouts)")


def _annotation_cost(summary: Mapping[str, Any]) -> str:
    """``; Fleiss' kappa 0.62 over 40 double-labelled steps; 3.1 s per step label (1161 labels/h)`` from
    an ``annotate`` provenance entry's summary (empty when it has none)."""
    out = ""
    if summary.get("agreement") is not None:
        out += (f"; Fleiss' kappa {summary['agreement']:.2f} over {summary.get('double_labelled_steps', 0)} "
                "double-labelled steps")
    if summary.get("seconds_per_label") is not None:
        out += f"; {summary['seconds_per_label']:.1f} s per step label"
        if summary.get("labels_per_hour") is not None:
            out += f" ({summary['labels_per_hour']:.0f} labels/h)"
    return out


def _plain_or_counted(counter: Counter, unit: str, total: int | None = None) -> str:
    """One value covering every trace: just it. Otherwise each value with how many traces it covers,
    and how many traces recorded none (so a partial record is not read as the whole story)."""
    covered = sum(counter.values())
    if len(counter) == 1 and (total is None or covered >= total):
        return str(next(iter(counter)))
    text = _counted(counter, unit)
    if total is not None and covered < total:
        text += f"; not recorded for {total - covered} of {total} {unit}s"
    return text


def _read_model_dir(path: str | os.PathLike) -> TrainProvenance:
    """The record of a reward-model folder (``prmkit_rm.json``), with ``train_config`` from
    ``train_config.yaml`` when the JSON lacks it."""
    from prmkit.models import RM_CONFIG

    folder = Path(path)
    cfg_file = folder / RM_CONFIG
    if not cfg_file.is_file():
        raise PrmkitError(f"{folder}: no {RM_CONFIG}, so this is not a reward model prmkit saved; "
                          "describe it with overrides={'process_reward_model': ...} instead")
    try:
        info = json.loads(decode_utf8(cfg_file.read_bytes(), cfg_file))
    except json.JSONDecodeError as e:
        raise PrmkitError(f"{cfg_file}: not valid JSON ({e})") from None
    if not isinstance(info, dict):
        raise PrmkitError(f"{cfg_file}: expected a JSON object")
    if info.get("kind", "prm") not in ("prm", "orm"):  # absent: loaded as a PRM
        raise PrmkitError(f"{cfg_file}: kind must be prm or orm, got {info['kind']!r}")
    yaml_file = folder / "train_config.yaml"
    if not isinstance(info.get("train_config"), dict) and yaml_file.is_file():
        try:
            import yaml

            cfg = yaml.safe_load(yaml_file.read_text(encoding="utf-8"))
            if isinstance(cfg, dict):
                info["train_config"] = cfg
        except Exception:  # no PyYAML, or a damaged file: the JSON alone still names the model
            pass
    return TrainProvenance.from_dict(info)


def _run_folder(model_dirs: list[str | os.PathLike]) -> Path | None:
    """The folder the model folders sit in (their common parent): paths in the card are shown
    relative to it, so the card names files of the run, never the user's machine."""
    parents = [str(Path(d).resolve().parent) for d in model_dirs]
    try:
        return Path(os.path.commonpath(parents)) if parents else None
    except ValueError:  # different drives
        return None


def _shown(path: str | os.PathLike, run: Path | None) -> str:
    """``path`` as the card shows it: relative to the run folder when inside it, else its name alone
    (an absolute path would publish the user's folder layout)."""
    p = Path(path)
    if not p.is_absolute() and run is None:
        return p.as_posix()
    full = p.resolve()
    if run is not None:
        try:
            return full.relative_to(run).as_posix()
        except ValueError:
            pass
    return p.name or p.as_posix()


def _fill_from_model_dirs(card: Card, model_dirs: Iterable[str | os.PathLike]) -> None:
    from prmkit.models import RM_CONFIG

    found: dict[str, list[tuple[str, str]]] = {"prm": [], "orm": []}
    bases: list[tuple[str, str]] = []
    dirs = list(model_dirs)
    run = _run_folder(dirs)
    for d in dirs:
        rec = _read_model_dir(d)
        kind = rec.kind or "prm"  # checked by _read_model_dir; absent: loaded as a PRM
        details = [f"at {_shown(d, run)}"]
        if rec.convention_name:
            details.append(f"convention {rec.convention_name}")
        if rec.data:
            details.append("trained on " + ", ".join(_shown(x, run) for x in rec.data))
        if rec.label_source:
            details.append(f"label source {rec.label_source}")
        name = rec.name or _shown(d, run)
        src = f"{_shown(Path(d) / RM_CONFIG, run)}" + (" + train_config" if rec.train_config else "")
        found[kind].append((f"{name} ({'; '.join(details)})", src))
        if rec.base_model:
            spelled = _BACKBONES.get(rec.base_model)
            text = f"{rec.base_model} = {spelled}" if spelled else rec.base_model
            bases.append((f"{text} ({kind.upper()} backbone)", src))
    for kind, key in (("prm", "process_reward_model"), ("orm", "outcome_reward_model")):
        if found[kind]:
            card.set(key, "; ".join(v for v, _ in found[kind]), "; ".join(s for _, s in found[kind]))
    if bases:
        # PRM backbones first: the card is about process supervision.
        bases.sort(key=lambda b: "ORM" in b[0])
        card.set("base_model", "; ".join(dict.fromkeys(v for v, _ in bases)),
                 "; ".join(dict.fromkeys(s for _, s in bases)))


def _fill_from_results(card: Card, results: EvalResults) -> None:
    probes = results.probes
    run = probes.named() if isinstance(probes, ProbesSection) else {}
    if isinstance(probes, ProbesSection) and probes.entries:
        failed = [k for k, v in run.items() if v.failed is True]
        unmeasured = [k for k, v in run.items() if v.failed is None and v.measured is False]
        undecided = [k for k, v in run.items() if v.failed is None and k not in unmeasured]
        if failed:
            value = ", ".join(failed) + f" (of {len(run)} probes run)"
        else:
            value = f"none of the {len(run)} probes run"
        if unmeasured:
            value += f"; {', '.join(unmeasured)} could not measure (too little data)"
        if undecided:
            value += f"; no verdict from {', '.join(undecided)}"
        card.set("failed_probes", value, "results: probes (" + ", ".join(run) + ")")
    where, used = [], []
    pb = results.processbench
    if isinstance(pb, ProcessBenchSection) and pb.splits:
        where.append("ProcessBench (" + ", ".join(pb.splits) + ")")
        used.append("processbench")
    prb = results.prmbench
    if isinstance(prb, PRMBenchSection) and prb.classes:
        traces = sum(c.n_traces or 0 for c in prb.classes.values() if isinstance(c, PRMBenchClass))
        where.append(f"PRMBench ({len(prb.classes)} classes, {traces} traces)")
        used.append("prmbench")
    bon = results.bon
    if isinstance(bon, BonSection) and bon.ns:
        on = f" on {bon.problems} problems" if isinstance(bon.problems, int) else ""
        where.append(f"best-of-N{on} (N up to {max(bon.ns)})")
        used.append("bon")
    sm = results.step_metrics
    if isinstance(sm, StepMetricsSection) and sm.entries:
        parts = [f"{k}: {v.n} steps" for k, v in sm.named().items()]
        where.append("step-level metrics (" + ", ".join(parts) + ")")
        used.append("step_metrics")
    transfer = run.get("transfer")
    sources = transfer.extra.get("sources") if transfer is not None else None
    if sources:
        where.append("transfer across " + ", ".join(sources))
        used.append("probes.transfer")
    if where:
        card.set("tested_on", "; ".join(where), "results: " + ", ".join(used))


def card_from_provenance(traces: Iterable[Trace | Mapping[str, Any] | str | os.PathLike] = (),
                         model_dirs: Iterable[str | os.PathLike] = (),
                         results: EvalResults | Mapping[str, Any] | None = None,
                         overrides: Mapping[str, Any] | None = None) -> Card:
    """A :class:`Card` filled from what was recorded, and nothing else.

    ``traces``: :class:`~prmkit.trace.Trace` objects, their dicts, or trace files (any format
    :func:`prmkit.data.read` detects; streamed). Their ``provenance`` (generate, label, import, score,
    search, guided, split), step labels and step kinds fill the policy, judge, human label source,
    reward models seen scoring, tool scaffold, supervised process and label method.
    ``model_dirs``: reward-model folders written by prmkit (``prmkit_rm.json``, ``train_config.yaml``)
    fill the PRM / ORM and the base model (their backbone); they win over what the traces say.
    ``results``: the evaluation results, typed or a results dict (``probes`` -> failed probes; ``processbench``, ``prmbench``,
    ``bon``, ``step_metrics``, ``probes.transfer`` -> where it was tested).
    ``overrides``: ``{field: value}`` for what provenance cannot know; shown with source ``user``
    (a value of None marks the field missing again).
    """
    card = Card()
    seen = _Seen()
    for t in traces:
        if isinstance(t, (str, os.PathLike)):
            from prmkit.data import read

            for tr in read(t):
                seen.add(tr)
        elif isinstance(t, Mapping):
            seen.add(Trace.from_dict(t))
        else:
            seen.add(t)
    _fill_from_traces(card, seen)
    _fill_from_model_dirs(card, model_dirs)
    if results:
        _fill_from_results(card, as_results(results))
    for key, value in (overrides or {}).items():
        if key not in _TITLES:
            raise PrmkitError(f"unknown card field {key!r}; the fields are: {', '.join(_TITLES)}")
        card.set(key, value, "user")
    return card
