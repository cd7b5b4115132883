"""``prmkit demo``: the whole pipeline on the embedded default, end to end, ending in a report.

1. problems from the built-in ``arith`` environment (every intermediate quantity known);
2. SmolLM2-135M-Instruct (the tuned default policy) samples N solutions per problem;
3. every step is labelled symbolically (ground truth), and a subset of traces also gets Monte Carlo
   labels (Math-Shepherd, k rollouts per step prefix) so the report shows how well the cheap automatic
   labels agree with the truth;
4. a PRM (step labels) and an ORM (final-answer outcome) are trained on the same traces of the training
   problems, from the same backbone with the same budget;
5. on held-out problems: best-of-N curves (PRM with each aggregator, ORM, majority, weighted, random,
   pass@N) with bootstrap intervals, step metrics, and the failure-mode probes (process collapse,
   verifier gaming, length bias, domain transfer to a second data source); the same PRM with a
   calculator checking its steps' arithmetic, against the PRM alone and the calculator alone; the
   faithfulness probe: some held-out problems asked again with the right answer and a wrong one as
   a hint ("A teacher says the answer is N."), and how the PRM scores traces that follow a wrong
   hint without saying so;
6. the report (Markdown, self-contained HTML, JSON) with the process-supervision card, and a verdict
   that says plainly whether the PRM beat the ORM and majority vote — whatever the result.

Every stage writes its output under the run folder; a rerun with the same settings resumes (sampling and
Monte Carlo rollouts are stored as they finish, training continues from its last checkpoint, finished
stages are skipped). Changed settings are refused unless ``overwrite`` is set.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prmkit._durable import write_text_file
from prmkit.errors import PrmkitError

if TYPE_CHECKING:
    from prmkit.eval import CheckedSection

__all__ = ["DemoConfig", "DEMO_PRESETS", "run_demo"]


@dataclass
class DemoConfig:
    """Sizes of one demo run (see :data:`DEMO_PRESETS`)."""

    train_problems: int = 32          #: 48 before 0.9: a first run on a fresh AVX2 machine took 16 min
    heldout_problems: int = 64
    n: int = 16                      #: samples per problem (best-of-N goes up to this)
    arith_steps: str = "3"           #: operations per problem, N or MIN-MAX
    distractors: int = 0             #: irrelevant quantities per problem
    env_seed: int = 0
    seed: int = 0
    max_new_tokens: int = 80
    #: Policy backend (:func:`~prmkit.policies.default_backend`); recorded so a run with another
    #: backend is not resumed into this one.
    policy: str = field(default_factory=lambda: _default_backend())
    #: The backend's arguments (``prmkit demo -p KEY=VALUE``: ``dtype``, ``model``, ``base_url``, ...).
    policy_args: dict[str, Any] = field(default_factory=dict)
    #: False: the ``torch`` backend's decode loop stays eager unless ``-p compile=...`` says otherwise
    #: (``quick``: its few thousand tokens decode in less time than compiling takes, 9 s with
    #: inductor's cache warm and about 35 s on a fresh machine). True: the backend's own ``auto``.
    compile_decode: bool = True
    mc_traces: int = 8               #: traces that also get Monte Carlo labels
    mc_k: int = 4                    #: rollouts per step prefix
    backbone: str = "minilm"         #: PRM / ORM backbone (a prmkit alias, path or hub id)
    causal: bool = True              #: encoder backbones read only what precedes each position
    max_length: int = 256
    batch_size: int = 16
    lr: float = 1e-4
    epochs: float = 2.0             #: 3.0 before 0.9: the full demo missed 15 minutes on AVX2 CPUs
    max_steps: int = -1
    bootstrap: int = 1000
    gaming_traces: int = 48          #: held-out traces the gaming probe perturbs
    transfer_traces: int = 60        #: derived traces of the second data source
    transfer_data: str | None = None  #: a GSM8K file for the transfer probe (else shifted arith)
    #: The pair the verdict is about: shipped reward models by name (``default``, ``default-orm``) or
    #: checkpoint folders. None: the pair trained in this run gives the verdict. The pair trained in
    #: the run is always trained and evaluated on the same held-out traces (section "bon_live").
    verdict_prm: str | None = "default"
    verdict_orm: str | None = "default-orm"
    score_precision: str = "auto"    #: scoring precision of the verdict pair (auto: bf16 where native)
    #: Also judge the verdict PRM with a calculator checking its steps' written arithmetic (a step
    #: whose equation is wrong scores 0; :class:`~prmkit.scoring.CalculatorScorer`), against majority,
    #: the ORM, the PRM alone and the calculator alone (section "checked"). The verdict stays the PRM's.
    calculator_check: bool = True
    #: Faithfulness probe: the first ``hint_problems`` held-out problems asked once per arm (no hint,
    #: the right answer as a hint, a wrong one; :func:`~prmkit.generate.hinted_problems`), ``hint_n``
    #: samples per arm, scored by the verdict PRM (probe ``faithfulness``). 0: not run.
    hint_problems: int = 16
    hint_n: int = 4

    def to_dict(self) -> dict[str, Any]:
        """As recorded in the run folder's settings: secrets among ``policy_args`` (``api_key``, a
        URL's user info) redacted."""
        from prmkit.provenance import redact_secrets

        d = dataclasses.asdict(self)
        d["policy_args"] = redact_secrets(d["policy_args"])
        return d


_FIELD_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(DemoConfig)
                                   if f.default is not dataclasses.MISSING}
_FIELD_DEFAULTS["policy_args"] = {}  # added later: a run without it ran with none


def _default_backend() -> str:
    from prmkit.policies import default_backend

    return default_backend()


#: ``full`` samples 48 + 64 problems x 16 (1,792 solutions, four times the 12 + 16 of earlier
#: releases) in about 10 minutes on 2 CPU cores, caches warm; ``quick`` 3 minutes (CI runs it);
#: ``verdict`` samples 384 held-out problems x 16 in the shipped pair's own setting (2-5 operations, a
#: distractor), enough for a 95% interval of PRM − majority about ±4.5 points (the number of problems,
#: not of samples, sets its width: about ±14 at ``full``'s 64, ±8 at 128, where the shipped PRM's -5.6
#: points could not be told from 0), at the cost of about 50 minutes on 2 cores (scoring 6,144
#: solutions with four models is most of it); it trains the live pair on 12 problems, as its earlier
#: runs did, so their folders resume. The faithfulness probe asks the first 128 of them.
DEMO_PRESETS: dict[str, DemoConfig] = {
    "full": DemoConfig(),
    "verdict": DemoConfig(train_problems=12, heldout_problems=384, arith_steps="2-5", distractors=1,
                          hint_problems=128, epochs=3.0),
    "quick": DemoConfig(train_problems=6, heldout_problems=6, n=8, mc_traces=4, mc_k=2,
                        max_new_tokens=80, epochs=1.0, max_steps=8, batch_size=8, bootstrap=200,
                        gaming_traces=16, transfer_traces=24, hint_problems=4, hint_n=2, compile_decode=False),
}

def _say(msg: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(msg, highlight=False, soft_wrap=True)


class _Stages:
    """Run folder bookkeeping: the settings file, a marker per finished stage, and stage times.

    Times are kept in ``demo_times.json`` as each stage finishes, so the report of a resumed run
    counts every run of the folder: ``seconds()`` is the earlier runs' wall time (each up to its
    last finished stage; an interrupted stage's time is lost with it) plus this run's, and
    ``times`` holds each stage's time from the run that last ran it.
    """

    clock = staticmethod(time.perf_counter)

    def __init__(self, out: Path, cfg: DemoConfig, overwrite: bool) -> None:
        self.out = out
        settings = out / "demo_settings.json"
        want = cfg.to_dict()
        if out.exists() and overwrite:
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        if settings.exists():
            have = json.loads(settings.read_text())
            # A setting added after the run was started is the same setting where the new value is
            # its default (the run's stages ran as the default says).
            have.update({k: v for k, v in want.items() if k not in have and v == _FIELD_DEFAULTS.get(k)})
            if have != want:
                diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
                raise PrmkitError(f"{out} holds a demo run with other settings ({', '.join(diff)}); "
                                  f"use --overwrite to start afresh, or another --out")
        else:
            _write_text(settings, json.dumps(want, indent=2) + "\n")
        self.times_file = out / "demo_times.json"
        saved = json.loads(self.times_file.read_text()) if self.times_file.exists() else {}
        self.times: dict[str, float] = dict(saved.get("stage_seconds", {}))
        self.earlier = float(saved.get("seconds", 0.0))
        self.start = self.clock()

    def seconds(self) -> float:
        """Wall time of every run of this folder so far (see the class docs)."""
        return round(self.earlier + self.clock() - self.start, 1)

    def done(self, name: str) -> bool:
        return (self.out / f".done-{name}").exists()

    def mark(self, name: str) -> None:
        # After the stage's files are on disk (each published durably), so the marker never
        # outlives what it vouches for.
        _write_text(self.out / f".done-{name}", "")

    @contextmanager
    def timed(self, title: str) -> Iterator[None]:
        t0 = self.clock()
        _say(f"[bold]demo[/] {title} …")
        yield
        self.times[title] = round(self.clock() - t0, 1)
        _write_text(self.times_file, json.dumps({"seconds": self.seconds(), "stage_seconds": self.times},
                                                indent=2) + "\n")
        _say(f"[bold]demo[/] {title} done in {self.times[title]:.0f} s")


def _write_text(path: Path, text: str) -> None:
    """A small file of the run folder, written then renamed durably."""
    write_text_file(path, text)


def _write(traces: list, path: Path) -> None:
    """Write then rename (``write_traces`` does): an interrupted run never leaves a half-written
    stage file behind."""
    from prmkit.trace import write_traces

    write_traces(traces, path)


def _read(path: Path) -> list:
    from prmkit.trace import read_traces

    return list(read_traces(path))


def _mc_subset(train: list, size: int) -> list:
    """The traces that also get Monte Carlo labels: alternately one with a symbolic error and one
    without, then the rest in order, ``size`` in all."""
    wrong = [t for t in train if t.first_error("symbolic") not in (-1, None)]
    right = [t for t in train if t.first_error("symbolic") == -1]
    subset = [t for pair in zip(wrong, right, strict=False) for t in pair]
    chosen = {t.id for t in subset}
    return (subset + [t for t in train if t.id not in chosen])[:size]


def run_demo(cfg: DemoConfig, out: str | Path = "runs/demo", *, overwrite: bool = False,
             command: str = "prmkit demo") -> dict[str, Path]:
    """Run the demo into ``out``; returns the report files (``json``, ``md``, ``html``)."""
    import torch

    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.eval import (
        EvalResults,
        LabelsSection,
        MetaSection,
        ProbesSection,
        StepMetricsSection,
        arith_derived_traces,
        bon_report,
        card_from_provenance,
        checked_bon_report,
        gsm8k_derived_traces,
        label_agreement,
        run_probes,
        step_metrics_for,
        write_report,
    )
    from prmkit.generate import generate_file, hinted_problems, parse_steps
    from prmkit.labelers import LabelReport, LabelStore, MCLabeler, label_stream
    from prmkit.models import RewardModel
    from prmkit.policies import SamplingParams, load_policy
    from prmkit.scoring import (
        PrefixCachingScorer,
        add_calculator_scores,
        add_trace_scores,
        score_traces_or_skip,
    )
    from prmkit.train import TrainConfig, train

    if cfg.transfer_data is not None and not Path(cfg.transfer_data).is_file():
        raise PrmkitError(f"{cfg.transfer_data}: no such file (transfer_data)")
    if cfg.transfer_data is not None:  # read it now: a bad file must fail before minutes of sampling
        gsm8k_derived_traces(cfg.transfer_data, limit=cfg.transfer_traces // 2, seed=cfg.seed)
    out = Path(out)
    stages = _Stages(out, cfg, overwrite)
    torch.manual_seed(cfg.seed)
    env_cfg = ArithConfig(steps=parse_steps(cfg.arith_steps), distractors=cfg.distractors, seed=cfg.env_seed)
    problems = ArithEnv(env_cfg).problems(cfg.train_problems + cfg.heldout_problems)
    train_ids = {p.id for p in problems[:cfg.train_problems]}
    samples, mc_file = out / "samples.jsonl", out / "mc_subset.jsonl"
    train_file, heldout_file = out / "train.jsonl", out / "heldout.jsonl"
    hinted_file = out / "hinted.jsonl"
    need_policy = (not stages.done("sample") or (cfg.mc_traces > 0 and not stages.done("mc"))
                   or (cfg.hint_problems > 0 and not stages.done("hints")))
    policy_args = dict(cfg.policy_args)
    if not cfg.compile_decode and cfg.policy == "torch":
        policy_args.setdefault("compile", False)
    policy = load_policy(cfg.policy, policy_args, batch_size=64) if need_policy else None

    # 1-2. The policy samples N solutions per problem; steps are labelled symbolically (resumable:
    # finished problems stay in samples.jsonl).
    if not stages.done("sample"):
        with stages.timed("sample (SmolLM2, symbolic step labels)"):
            params = SamplingParams(n=cfg.n, max_new_tokens=cfg.max_new_tokens, temperature=0.7,
                                    seed=cfg.seed)
            generate_file(samples, problems, policy, params=params, arith_config=env_cfg,
                          problems_per_call=max(1, 128 // cfg.n))
        stages.mark("sample")
    traces = _read(samples)
    train_traces = [t for t in traces if t.problem.id in train_ids]
    heldout = [t for t in traces if t.problem.id not in train_ids]
    _write(train_traces, train_file)

    # 3. Monte Carlo labels (Math-Shepherd) on a subset, to compare with the symbolic ground truth.
    if cfg.mc_traces > 0 and not stages.done("mc"):
        with stages.timed(f"Monte Carlo labels ({cfg.mc_traces} traces, k={cfg.mc_k})"):
            labeler = MCLabeler(policy, k=cfg.mc_k, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed)
            subset = [copy.deepcopy(t) for t in _mc_subset(train_traces, cfg.mc_traces)]
            with LabelStore(out / "mc.labels.sqlite") as store:
                labelled = list(label_stream(labeler, subset, store=store, report=LabelReport(labeler.name)))
            _write(labelled, mc_file)
        stages.mark("mc")

    # 3b. The faithfulness intervention: held-out problems asked again with a hint (resumable too).
    if cfg.hint_problems > 0 and not stages.done("hints"):
        asked = [p for p in problems if p.id not in train_ids][:cfg.hint_problems]
        with stages.timed(f"sample hinted problems ({len(asked)} x 3 arms x {cfg.hint_n}, faithfulness)"):
            params = SamplingParams(n=cfg.hint_n, max_new_tokens=cfg.max_new_tokens, temperature=0.7,
                                    seed=cfg.seed)
            generate_file(hinted_file, hinted_problems(asked, seed=cfg.seed), policy, params=params,
                          arith_config=env_cfg, problems_per_call=max(1, 128 // cfg.hint_n))
        stages.mark("hints")
    hinted = _read(hinted_file) if cfg.hint_problems > 0 else []
    policy = None  # not needed any more: free its memory before training

    # 4. A PRM (step labels) and an ORM (final-answer outcome): same traces, backbone and budget.
    for kind in ("prm", "orm"):
        if not stages.done(kind):
            with stages.timed(f"train {kind.upper()} ({cfg.backbone})"):
                train(TrainConfig(kind=kind, model=cfg.backbone, train=[str(train_file)],
                                  label_source="symbolic" if kind == "prm" else None, outcome="outcome",
                                  max_length=cfg.max_length, batch_size=cfg.batch_size, lr=cfg.lr,
                                  warmup_ratio=0.1, epochs=cfg.epochs, max_steps=cfg.max_steps,
                                  output_dir=str(out / kind), save_every=10, log_every=5, seed=cfg.seed,
                                  causal=cfg.causal),
                      log=lambda *a, **k: None)
            stages.mark(kind)
    live_prm = RewardModel.from_pretrained(str(out / "prm"))
    live_orm = RewardModel.from_pretrained(str(out / "orm"))
    model_dirs = [out / "prm", out / "orm"]
    # The verdict pair: the shipped default PRM / ORM (trained at length on thousands of traces, see
    # the README), else the pair just trained. Scores of the pair trained here go under live_*.
    prm, orm, live_keys = live_prm, live_orm, None
    if cfg.verdict_prm is not None:
        prm = RewardModel.from_pretrained(cfg.verdict_prm, precision=cfg.score_precision)
        orm = (RewardModel.from_pretrained(cfg.verdict_orm, precision=cfg.score_precision)
               if cfg.verdict_orm is not None else None)
        live_keys = ("live_prm", "live_orm")
        model_dirs = [Path(m.folder) for m in (prm, orm) if m is not None and m.folder]

    # 5. Score the held-out traces with each pair (and every aggregator of the PRM's step scores).
    # A decoder's scores come from the prefix-caching scorer: the N samples of a problem share its
    # prompt (and often their first steps), which runs once; the scores are the model's own (within
    # float rounding), at about half the tokens. An encoder is scored as it is.
    prm_scorer, orm_scorer = (None if m is None else PrefixCachingScorer(m, batch_size=16, max_cached_tokens=0)
                              for m in (prm, orm))
    if stages.done("score"):  # resumed after this stage: the scored traces are on disk
        heldout = _read(heldout_file)
        hinted = _read(hinted_file) if cfg.hint_problems > 0 else []
    else:
        with stages.timed("score held-out traces (PRM and ORM)"):
            scorers = [(prm_scorer, "prm"), (orm_scorer, "orm")]
            if live_keys is not None:
                scorers += [(live_prm, live_keys[0]), (live_orm, live_keys[1])]
            # A trace a model cannot read whole (an ORM past its max_length) stays unscored, not fatal.
            for model, key in scorers:
                if model is None:
                    continue
                skipped = score_traces_or_skip(model, heldout, key, aggregate="min", progress=True,
                                               what=f"score held-out traces ({key})")
                if skipped:
                    _say(f"[yellow]{len(skipped)} held-out traces not scored by {key}[/] "
                         f"(first: {skipped[0][0]}: {skipped[0][1]})")
            if hinted:  # by the verdict PRM only: the probe asks how it scores them
                score_traces_or_skip(prm_scorer, hinted, "prm", aggregate="min", progress=True,
                                     what="score hinted traces (prm)")
                _write(hinted, hinted_file)
            add_trace_scores(heldout, "prm", ("last", "prod", "mean", "geo_mean"))
            if cfg.calculator_check:  # from the PRM's stored scores: the model is not run again
                add_calculator_scores(heldout, "prm", aggregate="min")
            _write(heldout, heldout_file)
        stages.mark("score")

    # 6. Best-of-N curves and the verdict, step metrics, the failure-mode probes: typed sections.
    results = EvalResults()
    with stages.timed("evaluate (best-of-N, step metrics, probes)"):
        verdict_bon = bon_report(heldout, bootstrap=cfg.bootstrap, seed=cfg.seed)
        results.add(verdict_bon.bon_section())
        summary = verdict_bon.summary_section()
        if live_keys is not None:  # the pair trained in this run, on the same held-out traces
            p, o = live_keys
            results.add(bon_report(heldout, prm_key=p, orm_key=o, bootstrap=cfg.bootstrap, seed=cfg.seed,
                                   main=f"{p} (min)", rivals=(o, "majority"), extra_comparisons=()
                                   ).bon_section("bon_live"))
        step_metrics = StepMetricsSection({"prm": step_metrics_for(heldout, key="prm", label_source="symbolic"
                                                                   ).section_entry()})
        results.add(step_metrics)
        checked = None
        if cfg.calculator_check:
            checked = checked_bon_report(heldout, bootstrap=cfg.bootstrap, seed=cfg.seed).checked_section()
            results.add(checked)
            step_metrics.entries["prm+calculator"] = step_metrics_for(
                heldout, key="prm+calculator", label_source="symbolic").section_entry()
        if cfg.transfer_data:
            other_name = "gsm8k (derived)"
            other = gsm8k_derived_traces(cfg.transfer_data, limit=cfg.transfer_traces // 2, seed=cfg.seed)
        else:
            other_name = "arith-shifted (derived)"
            shifted = ArithConfig(steps=(4, 5), ops=("+", "-", "*"), max_operand=60, distractors=1,
                                  seed=env_cfg.seed + 1000)
            other = arith_derived_traces(shifted, cfg.transfer_traces // 2, seed=cfg.seed)
        same = arith_derived_traces(env_cfg, cfg.transfer_traces // 2, seed=cfg.seed + 1)
        probes = ProbesSection.from_dict(run_probes(
            prm_scorer, heldout, key="prm", score=False, label_source="symbolic", aggregate="min",
            seed=cfg.seed, gaming_traces=cfg.gaming_traces,
            transfer_sources={"arith (derived)": same, other_name: other}, in_domain="arith (derived)"))
        if hinted:
            probes.entries.update(ProbesSection.from_dict(run_probes(prm_scorer, hinted, key="prm", score=False,
                                                                     probes=["faithfulness"])).entries)
        results.add(probes)
    mc = _read(mc_file) if mc_file.exists() else []
    if mc:
        results.add(LabelsSection.from_dict(label_agreement(mc, "symbolic", "mc_hard")))

    # 7. The verdict in words, the process-supervision card, the report.
    if summary is not None:
        results.add(dataclasses.replace(summary, verdict=_verdict_text(
            summary.verdict or "", cfg, live_keys is not None, len(train_traces), len(heldout),
            probes.failed(), checked)))
    card = card_from_provenance(traces=train_traces + heldout + mc, model_dirs=model_dirs, results=results)
    results.add(card)
    results.add(MetaSection(
        title="prmkit demo — process vs outcome supervision on the embedded default",
        command=command, created=time.strftime("%Y-%m-%d %H:%M:%S"),
        seconds=stages.seconds(), stage_seconds=stages.times,
        data={"env": "arith", "env_config": dataclasses.asdict(env_cfg),
              "train_traces": len(train_traces), "heldout_traces": len(heldout),
              "transfer": cfg.transfer_data or "arith-shifted (derived)"},
        models={"policy": traces[0].source if traces else None,
                "prm": cfg.verdict_prm or str(out / "prm"), "orm": cfg.verdict_orm or str(out / "orm"),
                "backbone": cfg.backbone,
                **({"trained_here": [str(out / "prm"), str(out / "orm")]} if live_keys else {})},
        seeds={"seed": cfg.seed, "env_seed": cfg.env_seed}, settings=cfg.to_dict()))
    return write_report(results, out / "report", title=results.meta.title)


def _verdict_text(bon_verdict: str, cfg: DemoConfig, shipped_pair: bool, train_traces: int, heldout: int,
                  failed_probes: list[str], checked: CheckedSection | None) -> str:
    """The verdict of the best-of-N curves, then who the PRM and ORM are and what they were evaluated
    on, the probes that failed, and (with a calculator check) the checked PRM's numbers in one
    sentence."""
    from prmkit.eval import headline_sentence

    if not shipped_pair:
        who = (f"PRM and ORM: {cfg.backbone} backbone, trained on {train_traces} traces of "
               f"{cfg.train_problems} problems;")
    else:
        who = (f"PRM and ORM: the shipped pair ({cfg.verdict_prm}, {cfg.verdict_orm}); the pair trained "
               f"in this run ({cfg.backbone}, {train_traces} traces of {cfg.train_problems} problems) "
               f"is under 'Best-of-N of the pair trained in this run';")
    parts = [bon_verdict, who, f"evaluated on {heldout} traces of {cfg.heldout_problems} other problems.",
             f"Probes failed: {', '.join(failed_probes) if failed_probes else 'none'}."]
    if checked is not None and checked.summary is not None:
        parts.append(headline_sentence(checked.summary, lead="With a calculator checking the PRM's "
                                       "arithmetic (section 'Best-of-N with a calculator check'),"))
    return " ".join(parts)

