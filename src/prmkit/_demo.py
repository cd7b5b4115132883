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
   verifier gaming, length bias, domain transfer to a second data source);
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prmkit.errors import PrmkitError

__all__ = ["DemoConfig", "DEMO_PRESETS", "run_demo"]


@dataclass
class DemoConfig:
    """Sizes of one demo run (see :data:`DEMO_PRESETS`)."""

    train_problems: int = 12
    heldout_problems: int = 16
    n: int = 16                      #: samples per problem (best-of-N goes up to this)
    arith_steps: str = "3"           #: operations per problem, N or MIN-MAX
    env_seed: int = 0
    seed: int = 0
    max_new_tokens: int = 80
    #: Policy backend (ct2 where CTranslate2 is installed, else hf); recorded so a run with another
    #: backend is not resumed into this one.
    policy: str = field(default_factory=lambda: _default_backend())
    mc_traces: int = 8               #: traces that also get Monte Carlo labels
    mc_k: int = 4                    #: rollouts per step prefix
    backbone: str = "minilm"         #: PRM / ORM backbone (a prmkit alias, path or hub id)
    causal: bool = True              #: encoder backbones read only what precedes each position
    max_length: int = 256
    batch_size: int = 16
    lr: float = 1e-4
    epochs: float = 3.0
    max_steps: int = -1
    bootstrap: int = 1000
    gaming_traces: int = 48          #: held-out traces the gaming probe perturbs
    transfer_traces: int = 60        #: derived traces of the second data source
    transfer_data: str | None = None  #: a GSM8K file for the transfer probe (else shifted arith)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _default_backend() -> str:
    from prmkit.policies import default_backend

    return default_backend()


#: ``full`` fits 15 minutes on 2 CPU cores; ``quick`` 3 minutes (CI runs it).
DEMO_PRESETS: dict[str, DemoConfig] = {
    "full": DemoConfig(),
    "quick": DemoConfig(train_problems=6, heldout_problems=6, n=8, mc_traces=4, mc_k=2,
                        max_new_tokens=80, epochs=1.0, max_steps=8, batch_size=8, bootstrap=200,
                        gaming_traces=16, transfer_traces=24),
}

#: The method the verdict is about (chosen before any result is seen: the field's usual PRM reading).
MAIN = "PRM (min)"
RIVALS = ["ORM", "majority"]


def _say(msg: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(msg, highlight=False, soft_wrap=True)


class _Stages:
    """Run folder bookkeeping: the settings file, and a marker per finished stage."""

    def __init__(self, out: Path, cfg: DemoConfig, overwrite: bool) -> None:
        self.out = out
        settings = out / "demo_settings.json"
        want = cfg.to_dict()
        if out.exists() and overwrite:
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        if settings.exists():
            have = json.loads(settings.read_text())
            if have != want:
                diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
                raise PrmkitError(f"{out} holds a demo run with other settings ({', '.join(diff)}); "
                                  f"use --overwrite to start afresh, or another --out")
        else:
            settings.write_text(json.dumps(want, indent=2) + "\n")
        self.times: dict[str, float] = {}

    def done(self, name: str) -> bool:
        return (self.out / f".done-{name}").exists()

    def mark(self, name: str) -> None:
        (self.out / f".done-{name}").write_text("")

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        _say(f"[bold]demo[/] {name} …")
        result = fn()
        self.times[name] = round(time.perf_counter() - t0, 1)
        _say(f"[bold]demo[/] {name} done in {self.times[name]:.0f} s")
        return result


def _write(traces: list, path: Path) -> None:
    """Write then rename: an interrupted run never leaves a half-written stage file behind."""
    from prmkit.trace import write_traces

    tmp = path.with_suffix(".tmp")
    write_traces(traces, tmp)
    tmp.replace(path)


def _read(path: Path) -> list:
    from prmkit.trace import read_traces

    return list(read_traces(path))


def run_demo(cfg: DemoConfig, out: str | Path = "runs/demo", *, overwrite: bool = False,
             command: str = "prmkit demo") -> dict[str, Path]:
    """Run the demo into ``out``; returns the report files (``json``, ``md``, ``html``)."""
    import torch

    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.envs._prompts import PromptBuilder
    from prmkit.policies import SamplingParams, get_policy
    from prmkit.policies._sampling import sample_traces

    t_start = time.perf_counter()
    out = Path(out)
    st = _Stages(out, cfg, overwrite)
    torch.manual_seed(cfg.seed)
    lo, _, hi = cfg.arith_steps.partition("-")
    steps = int(lo) if not hi else (int(lo), int(hi))
    env_cfg = ArithConfig(steps=steps, seed=cfg.env_seed)
    problems = ArithEnv(env_cfg).problems(cfg.train_problems + cfg.heldout_problems)
    train_ids = {p.id for p in problems[:cfg.train_problems]}

    # 1-2. Sampling (resumable: finished problems stay in samples.jsonl).
    samples = out / "samples.jsonl"
    policy = None

    def get_pol():
        nonlocal policy
        if policy is None:
            policy = get_policy(cfg.policy, batch_size=64, progress=False)
        return policy

    def sample() -> None:
        pol = get_pol()
        params = SamplingParams(n=cfg.n, max_new_tokens=cfg.max_new_tokens, temperature=0.7,
                                seed=cfg.seed)
        sample_traces(problems, pol, samples, params=params,
                      prompts=PromptBuilder.for_policy(pol, config=env_cfg),
                      problems_per_call=max(1, 128 // cfg.n))

    if not st.done("sample"):
        st.run("sample (SmolLM2, symbolic step labels)", sample)
        st.mark("sample")
    traces = _read(samples)
    train = [t for t in traces if t.problem.id in train_ids]
    heldout = [t for t in traces if t.problem.id not in train_ids]
    train_file, heldout_file = out / "train.jsonl", out / "heldout.jsonl"
    _write(train, train_file)

    # 3. Monte Carlo labels on a subset, and their agreement with the symbolic ground truth.
    mc_file = out / "mc_subset.jsonl"

    def mc_label() -> None:
        from prmkit.labelers import LabelReport, LabelStore, MCLabeler, label_stream

        wrong = [t for t in train if t.first_error("symbolic") not in (-1, None)]
        right = [t for t in train if t.first_error("symbolic") == -1]
        subset = []
        for a, b in zip(wrong, right, strict=False):  # half with a symbolic error, half without
            subset += [a, b]
        chosen = {t.id for t in subset}
        subset = (subset + [t for t in train if t.id not in chosen])[:cfg.mc_traces]
        labeler = MCLabeler(get_pol(), k=cfg.mc_k, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed)
        report = LabelReport(labeler.name)
        with LabelStore(out / "mc.labels.sqlite") as store:
            done = list(label_stream(labeler, [copy.deepcopy(t) for t in subset],
                                     store=store, report=report))
        _write(done, mc_file)

    if cfg.mc_traces > 0 and not st.done("mc"):
        st.run(f"Monte Carlo labels ({cfg.mc_traces} traces, k={cfg.mc_k})", mc_label)
        st.mark("mc")
    policy = None  # the policy is not needed any more: free its memory before training

    # 4. PRM and ORM on the same training traces, same backbone and budget.
    from prmkit.train import TrainConfig
    from prmkit.train import train as train_model

    def fit(kind: str) -> None:
        tc = TrainConfig(kind=kind, model=cfg.backbone, train=[str(train_file)],
                         label_source="symbolic" if kind == "prm" else None,
                         outcome="outcome", max_length=cfg.max_length, batch_size=cfg.batch_size,
                         lr=cfg.lr, warmup_ratio=0.1, epochs=cfg.epochs, max_steps=cfg.max_steps,
                         output_dir=str(out / kind), save_every=10, log_every=5, seed=cfg.seed,
                         causal=cfg.causal)
        train_model(tc, log=lambda *a, **k: None)

    for kind in ("prm", "orm"):
        if not st.done(kind):
            st.run(f"train {kind.upper()} ({cfg.backbone})", lambda kind=kind: fit(kind))
            st.mark(kind)

    # 5. Score the held-out traces with both, then curves, step metrics, probes.
    from prmkit.models import RewardModel
    from prmkit.scoring import score_traces

    prm = RewardModel.from_pretrained(str(out / "prm"))
    orm = RewardModel.from_pretrained(str(out / "orm"))

    def score() -> None:
        from prmkit.scoring import get_aggregator

        score_traces(prm, heldout, "prm", aggregate="min")
        score_traces(orm, heldout, "orm")
        for t in heldout:  # every aggregator's trace score, for the curves and the report
            vals = [s.scores.get("prm") for s in t.steps]
            for agg in ("last", "prod", "mean", "geo_mean"):
                v = get_aggregator(agg)(vals)
                if v is not None:
                    t.meta.setdefault("scores", {})[f"prm:{agg}"] = v
        _write(heldout, heldout_file)

    st.run("score held-out traces (PRM and ORM)", score)
    results = st.run("evaluate (best-of-N, step metrics, probes)",
                     lambda: _evaluate(cfg, heldout, prm, env_cfg, out))
    mc = _read(mc_file) if mc_file.exists() else []
    if mc:
        from prmkit.eval._agreement import label_agreement

        results["labels"] = label_agreement(mc, "symbolic", "mc_hard")

    # 6. Verdict, card, report.
    from prmkit.eval._card import card_from_provenance
    from prmkit.eval._report import write_report
    from prmkit.eval._summary import bon_verdict

    results["summary"] = bon_verdict(results["bon"], MAIN, RIVALS)
    failed = [name for name, p in results["probes"].items() if p.get("failed")]
    results["summary"]["verdict"] += (
        f" PRM and ORM: {cfg.backbone} backbone, trained on {len(train)} traces of "
        f"{cfg.train_problems} problems; evaluated on {len(heldout)} traces of {cfg.heldout_problems} "
        f"other problems. Probes failed: {', '.join(failed) if failed else 'none'}"
        + ".")
    card = card_from_provenance(traces=train + heldout + mc, model_dirs=[out / "prm", out / "orm"],
                                results=results)
    results["card"] = card.to_dict()
    results["meta"] = {
        "title": "prmkit demo — process vs outcome supervision on the embedded default",
        "command": command, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "seconds": round(time.perf_counter() - t_start, 1), "stage_seconds": st.times,
        "data": {"env": "arith", "env_config": dataclasses.asdict(env_cfg),
                 "train_traces": len(train), "heldout_traces": len(heldout),
                 "transfer": cfg.transfer_data or "arith-shifted (derived)"},
        "models": {"policy": traces[0].source if traces else None, "prm": str(out / "prm"),
                   "orm": str(out / "orm"), "backbone": cfg.backbone},
        "seeds": {"seed": cfg.seed, "env_seed": cfg.env_seed}, "settings": cfg.to_dict(),
    }
    paths = write_report(results, out / "report", title=results["meta"]["title"])
    return paths


def _evaluate(cfg: DemoConfig, heldout: list, prm: Any, env_cfg: Any, out: Path) -> dict[str, Any]:
    from prmkit.envs import ArithConfig
    from prmkit.eval._bon import bon_curves, default_methods
    from prmkit.eval._derived import arith_derived_traces, gsm8k_derived_traces
    from prmkit.eval._probes import collapse_probe, gaming_probe, length_bias_probe, transfer_probe
    from prmkit.eval._stepmetrics import step_metrics_for

    results: dict[str, Any] = {}
    methods = default_methods(heldout)
    comparisons = [(MAIN, r) for r in RIVALS] + [("PRM weighted (min)", "majority")]
    names = {m.name for m in methods}
    curves = bon_curves(heldout, methods, bootstrap=cfg.bootstrap, seed=cfg.seed,
                        comparisons=[c for c in comparisons if c[0] in names and c[1] in names])
    results["bon"] = curves.to_dict()
    results["step_metrics"] = {"prm": step_metrics_for(heldout, key="prm", label_source="symbolic"
                                                       ).to_dict()}
    # Probes. Gaming perturbs a fixed, seeded subset of the held-out traces (a scorer call each).
    probes: dict[str, Any] = {}
    probes["collapse"] = collapse_probe(heldout, key="prm", label_source="symbolic").to_dict()
    gaming_set = [t for t in heldout if len(t.steps) >= 2][:cfg.gaming_traces]
    probes["gaming"] = gaming_probe(prm, gaming_set, seed=cfg.seed).to_dict()
    probes["length_bias"] = length_bias_probe(heldout, key="prm", aggregate="min").to_dict()
    if cfg.transfer_data:
        other_name = "gsm8k (derived)"
        other = gsm8k_derived_traces(cfg.transfer_data, limit=cfg.transfer_traces // 2, seed=cfg.seed)
    else:
        other_name = "arith-shifted (derived)"
        shifted = ArithConfig(steps=(4, 5), ops=("+", "-", "*"), max_operand=60, distractors=1,
                              seed=env_cfg.seed + 1000)
        other = arith_derived_traces(shifted, cfg.transfer_traces // 2, seed=cfg.seed)
    same = arith_derived_traces(env_cfg, cfg.transfer_traces // 2, seed=cfg.seed + 1)
    probes["transfer"] = transfer_probe(prm, {"arith (derived)": same, other_name: other},
                                        in_domain="arith (derived)", key="prm").to_dict()
    results["probes"] = probes
    return results
