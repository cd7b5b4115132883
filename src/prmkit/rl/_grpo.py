"""``prmkit rl``: group-relative policy optimisation of a causal LM with LoRA, rewarded by the
environment, a PRM, or the symbolic checker, on a CPU. Read it top to bottom: :func:`rl_train`.

Why a loop of our own and not TRL's ``GRPOTrainer``. TRL 1.16's trainer computes one scalar advantage
per completion (``_generate_and_score_completions``) and its loss multiplies that one number into every
token; dense rewards need a different advantage per token, which would mean overriding the scoring
method (about 400 lines that change between releases) and the loss. Its generation goes through
``model.generate`` or vLLM. A loop of about 300 lines on torch + peft does what the issue asks and can
be read whole: sample, reward, advantage, clipped loss, checkpoint.

One step:

1. ``prompts_per_step`` training problems of ``arith`` (indices from ``train_start`` on, held-out
   problems below it), each prompted as ``prmkit generate`` prompts it and sampled ``group_size``
   times by the LoRA policy (:func:`sample_group`: a KV-cached loop that keeps the sampled token ids, so
   log-probabilities are taken on exactly the sampled tokens; sampling is seeded by ``(seed, step)``,
   so a resumed step samples what the uninterrupted run sampled);
2. each completion becomes a trace (:func:`prmkit.generate.completion_to_trace`: steps, final answer,
   outcome, symbolic step labels) and gets its reward components (:data:`REWARD_COMPONENTS`); each
   step's reward sits on the token ending the step (:func:`prmkit.rl.place_step_rewards`'s positions);
3. advantages (:mod:`prmkit.rl._advantages`): the weighted scalar components group-normalised
   (``grpo``) or leave-one-out (``rloo``) and spread over every token, plus the weighted dense
   components by DeepSeekMath's process-supervision rule; the two parts add up;
4. ``inner_steps`` gradient steps of the clipped objective (+ ``kl_coef`` x k3 KL to the reference:
   the same model with the LoRA adapter disabled);
5. the metrics row goes to ``OUT/metrics.jsonl`` (every ``eval_every`` steps with held-out greedy
   pass@1 and step validity measured by the environment and, when the run loaded a scorer, the PRM's
   view of the same traces: :mod:`prmkit.rl._gaming`; the held-out traces go to
   ``OUT/eval/step-N.jsonl``), then the checkpoint (adapter, optimizer,
   step) to ``OUT/checkpoints/step-N`` and ``OUT/checkpoints/latest.json`` (the commit point, renamed
   into place), so a run killed at any moment resumes from its last finished step.

PAV (process advantage): a step's reward is ``Q(prefix + step) - Q(prefix)``, with Q the PRM's score
after each step and, for the empty prefix, the group's mean outcome (a Monte Carlo estimate of
Q(prompt) from the group's own rollouts). Rollouts of a separate prover per step are not implemented.
"""

from __future__ import annotations

import inspect
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prmkit._durable import output_lock, write_bytes_file, write_text_file
from prmkit._progress import progress_bar
from prmkit._result import Record
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.rl._advantages import clipped_token_loss, dense_advantages, group_advantages
from prmkit.rl._config import REWARD_COMPONENTS, RLConfig
from prmkit.rl._dense import place_step_rewards
from prmkit.rl._gaming import held_out_scores

__all__ = ["rl_train", "RLResult", "sample_group", "completion_logprobs", "Group", "score_group"]

#: Config fields a resumed run may change (everything else must match the checkpoint's run).
RESUMABLE_CHANGES = ("steps", "progress", "output_dir")


@dataclass
class RLResult(Record):
    """What :func:`rl_train` did: where it wrote, from which step it resumed, the last metrics row with
    an evaluation (``final_eval``) and the first one (``first_eval``, before training when it ran)."""

    kind = "rl"
    output_dir: str = ""
    steps: int = 0
    resumed_from: int = 0
    seconds: float = 0.0
    first_eval: dict[str, Any] = field(default_factory=dict)
    final_eval: dict[str, Any] = field(default_factory=dict)
    last: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"rl: {self.steps} steps in {self.output_dir}"
               + (f" (resumed after step {self.resumed_from})" if self.resumed_from else "")
               + f", {self.seconds:.1f} s"]
        rewards = {k: v for k, v in self.last.items() if k.startswith("reward/")}
        if rewards:
            out.append("last step: " + ", ".join(f"{k} {v:.3f}" for k, v in rewards.items())
                       + f", kl {self.last.get('kl', 0):.4f}, length {self.last.get('length', 0):.1f}")
        for name, row in (("before", self.first_eval), ("after", self.final_eval)):
            if row:
                out.append(f"held-out {name} (step {row['step']}): pass@1 {row['eval/pass@1']:.3f} "
                           f"on {row['eval/problems']} problems, step validity {row['eval/step_validity']:.3f}")
        out.append(f"metrics: {Path(self.output_dir) / 'metrics.jsonl'}; adapter: {Path(self.output_dir) / 'adapter'}")
        return out


# -- sampling and log-probabilities ------------------------------------------------------------------

def _eos_ids(lm: Any, tok: Any) -> set[int]:
    ids = {tok.eos_token_id}
    gen = getattr(lm, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None)
    ids |= set(extra if isinstance(extra, list | tuple) else [extra])
    return {i for i in ids if i is not None}


def sample_group(lm: Any, prompt_ids: list[int], n: int, *, max_new_tokens: int, temperature: float,
                 eos: set[int], seed: int) -> list[list[int]]:
    """``n`` completions of one prompt as token ids (each up to and including its first end token).
    ``temperature == 0``: greedy. Seeded by ``seed`` alone, so a row's tokens do not depend on when
    the call is made."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    dev = next(lm.parameters()).device
    base = lm.get_base_model() if hasattr(lm, "get_base_model") else lm
    # transformers 5.2x renamed ``past_key_values`` to ``cache``; use whichever this one takes
    cache_kw = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
    with torch.no_grad():
        out = lm(input_ids=torch.tensor([prompt_ids] * n, device=dev), use_cache=True)
        past, logits = out[cache_kw], out.logits[:, -1, :].float()
        rows: list[list[int]] = [[] for _ in range(n)]
        done = [False] * n
        for _ in range(max_new_tokens):
            if temperature > 0:
                probs = torch.softmax(logits / temperature, dim=-1).cpu()
                picked = torch.multinomial(probs, 1, generator=gen).squeeze(1).tolist()
            else:
                picked = logits.argmax(dim=-1).tolist()
            for r, t in enumerate(picked):
                if not done[r]:
                    rows[r].append(t)
                    done[r] = t in eos
            if all(done):
                break
            out = lm(input_ids=torch.tensor(picked, device=dev).unsqueeze(1), use_cache=True, **{cache_kw: past})
            past, logits = out[cache_kw], out.logits[:, -1, :].float()
    return rows


def completion_logprobs(lm: Any, prompt_ids: list[int], completions: list[list[int]], pad: int,
                        temperature: float = 1.0) -> tuple[Any, Any]:
    """``(logp, mask)``: the log-probability of every completion token under ``lm`` (at the sampling
    ``temperature``), shape ``(completions, longest)``, and 1 where a token is real."""
    import torch

    dev = next(lm.parameters()).device
    width = max(len(c) for c in completions)
    ids = torch.tensor([prompt_ids + c + [pad] * (width - len(c)) for c in completions], device=dev)
    mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions], device=dev)
    attention = torch.cat([torch.ones(len(completions), len(prompt_ids), dtype=mask.dtype, device=dev), mask], 1)
    logits = lm(input_ids=ids, attention_mask=attention).logits[:, len(prompt_ids) - 1:-1, :].float()
    logp = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
    return logp.gather(-1, ids[:, len(prompt_ids):].unsqueeze(-1)).squeeze(-1), mask


# -- rewards -----------------------------------------------------------------------------------------

@dataclass
class Group:
    """One prompt's sampled completions and what they earned: ``tokens[g]`` the sampled ids,
    ``traces[g]`` the trace, ``step_ends[g]`` the token ending each step, ``scalar[c][g]`` and
    ``dense[c][g][i]`` the reward components, ``advantages[g]`` one per token."""

    problem: Any
    prompt_ids: list[int]
    tokens: list[list[int]]
    traces: list[Any] = field(default_factory=list)
    step_ends: list[list[int]] = field(default_factory=list)
    scalar: dict[str, list[float]] = field(default_factory=dict)
    dense: dict[str, list[list[float]]] = field(default_factory=dict)
    advantages: list[list[float]] = field(default_factory=list)
    unscored: int = 0


def _traces(group: Group, tok: Any, splitter: str, tag: str) -> None:
    from prmkit.generate import completion_to_trace
    from prmkit.policies import Completion

    group.traces, group.step_ends = [], []
    for g, ids in enumerate(group.tokens):
        text = tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        trace = completion_to_trace(group.problem, Completion(text, num_tokens=len(ids)),
                                    trace_id=f"{tag}-{g}", source="prmkit rl", splitter=splitter)
        # each step's reward goes on the token covering its last character (place_step_rewards)
        placed = place_step_rewards(text, trace.steps, [0.0] * len(trace.steps), tok, token_ids=ids)
        keep = [i for i, p in enumerate(placed.positions) if p is not None]
        trace.steps = [trace.steps[i] for i in keep]
        group.traces.append(trace)
        group.step_ends.append([placed.positions[i] for i in keep])


def step_valid(step: Any, claimless: str = "invalid") -> bool:
    """The checker accepts ``step`` (its last label is positive), and, unless ``claimless`` is
    ``"valid"``, the step makes a claim the checker could test (its verdict is not ``no_claim``).

    >>> from prmkit.trace import Step, StepLabel
    >>> dots = Step("....", labels=[StepLabel(1, source="symbolic", meta={"verdict": "no_claim"})])
    >>> step_valid(dots), step_valid(dots, "valid")
    (False, True)
    >>> step_valid(Step("2 + 2 = 4", labels=[StepLabel(1, source="symbolic", meta={"verdict": "correct"})]))
    True
    """
    if not step.labels or step.labels[-1].value <= 0:
        return False
    return claimless == "valid" or not _claimless(step)


def _claimless(step: Any) -> bool:
    """The checker's last verdict on ``step`` is ``no_claim``."""
    return bool(step.labels) and (step.labels[-1].meta or {}).get("verdict") == "no_claim"


def score_group(group: Group, cfg: RLConfig, scorer: Any = None) -> None:
    """Fill ``group.scalar`` and ``group.dense`` with every reward component: ``outcome`` and
    ``oracle`` always, ``prm``, ``prm_dense`` and ``pav`` where there is a ``scorer`` (the metrics
    report them all, weighted or not)."""
    from prmkit.scoring import get_aggregator, score_each

    traces = group.traces
    outcome = [1.0 if t.outcome == "correct" else 0.0 for t in traces]
    group.scalar["outcome"] = outcome
    group.dense["oracle"] = [[1.0 if step_valid(s, cfg.claimless) else 0.0 for s in t.steps] for t in traces]
    if scorer is None:
        if cfg.needs_scorer():
            raise PrmkitError("these rewards need a scorer (prm, prm_dense or pav)")
        return
    with_steps = [t for t in traces if t.steps]
    scored = iter(score_each(scorer, with_steps))
    rows: list[list[float | None] | None] = [next(scored)[0] if t.steps else None for t in traces]
    group.unscored = sum(1 for t, r in zip(traces, rows, strict=True) if t.steps and r is None)
    steps = [[0.0 if s is None else float(s) for s in (r or [0.0] * len(t.steps))]
             for t, r in zip(traces, rows, strict=True)]
    agg = get_aggregator(cfg.prm_aggregate)
    group.scalar["prm"] = [float(agg(r) or 0.0) if r else 0.0 for r in rows]
    group.dense["prm_dense"] = steps
    q0 = sum(outcome) / len(outcome)
    group.dense["pav"] = [[s - (row[i - 1] if i else q0) for i, s in enumerate(row)] for row in steps]


def group_token_advantages(group: Group, cfg: RLConfig) -> list[list[float]]:
    """Per-token advantages of a scored group: weighted scalar components by the baseline, spread
    over every token, plus weighted dense components by DeepSeekMath's rule (module docs)."""
    lengths = [len(t) for t in group.tokens]
    adv = [[0.0] * n for n in lengths]
    scalar = cfg.scalar_components()
    if scalar:
        total = [sum(cfg.rewards[c] * group.scalar[c][g] for c in scalar) for g in range(len(lengths))]
        for g, a in enumerate(group_advantages(total, cfg.baseline, scale=cfg.scale_rewards)):
            adv[g] = [x + a for x in adv[g]]
    dense = cfg.dense_components()
    if dense:
        steps = [[sum(cfg.rewards[c] * group.dense[c][g][i] for c in dense) for i in range(len(ends))]
                 for g, ends in enumerate(group.step_ends)]
        per_token = dense_advantages(steps, group.step_ends, lengths, scale=cfg.scale_rewards)
        adv = [[a + b for a, b in zip(x, y, strict=True)] for x, y in zip(adv, per_token, strict=True)]
    return adv


# -- checkpoints -------------------------------------------------------------------------------------

def _safetensors_bytes(tensors: dict[str, Any]) -> bytes:
    from safetensors.torch import save as to_bytes

    return to_bytes({k: v.detach().contiguous().cpu() for k, v in tensors.items()})


def _write_adapter(lm: Any, folder: Path) -> None:
    """A plain PEFT adapter folder (safetensors + adapter_config.json), loadable without prmkit."""
    from peft import get_peft_model_state_dict

    write_bytes_file(folder / "adapter_model.safetensors", _safetensors_bytes(get_peft_model_state_dict(lm)))
    conf = lm.peft_config["default"].to_dict()
    write_text_file(folder / "adapter_config.json", json.dumps(conf, indent=2, default=list, sort_keys=True))


def _save_checkpoint(out: Path, step: int, lm: Any, opt: Any, cfg: RLConfig) -> None:
    import torch

    ckpts = out / "checkpoints"
    folder = ckpts / f"step-{step:06d}"
    _write_adapter(lm, folder)
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for pid, state in sd["state"].items():
        for k, v in state.items():
            if torch.is_tensor(v):
                tensors[f"{pid}.{k}"] = v
            else:
                scalars[f"{pid}.{k}"] = v
    write_bytes_file(folder / "optimizer.safetensors", _safetensors_bytes(tensors))
    state = {"step": step, "config": cfg.to_dict(), "param_groups": sd["param_groups"], "scalars": scalars}
    write_text_file(folder / "state.json", json.dumps(state, indent=1))
    # the commit point: until this rename the previous checkpoint is the one a resume reads
    write_text_file(ckpts / "latest.json", json.dumps({"step": step, "folder": folder.name}))
    for old in ckpts.glob("step-*"):
        if old.is_dir() and old.name != folder.name:
            shutil.rmtree(old, ignore_errors=True)


def _load_checkpoint(out: Path, lm: Any, opt: Any, cfg: RLConfig) -> int:
    """The step the last checkpoint finished (0: none), its adapter and optimizer loaded."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    latest = out / "checkpoints" / "latest.json"
    if not latest.exists():
        return 0
    folder = out / "checkpoints" / json.loads(latest.read_text())["folder"]
    state = json.loads((folder / "state.json").read_text())
    saved, now = {"claimless": "valid", **state["config"]}, cfg.to_dict()  # runs before claimless: "valid"
    changed = sorted(k for k in now if k not in RESUMABLE_CHANGES and saved.get(k) != now[k])
    if changed:
        raise PrmkitError(f"{out}: holds a run with other settings ({', '.join(changed)} differ); "
                          "resume with its config or choose another output_dir")
    set_peft_model_state_dict(lm, load_file(str(folder / "adapter_model.safetensors")))
    opt_state: dict[int, dict[str, Any]] = {}
    for key, v in load_file(str(folder / "optimizer.safetensors")).items():
        pid, _, name = key.partition(".")
        opt_state.setdefault(int(pid), {})[name] = v
    for key, v in state["scalars"].items():
        pid, _, name = key.partition(".")
        opt_state.setdefault(int(pid), {})[name] = v
    opt.load_state_dict({"state": opt_state, "param_groups": state["param_groups"]})
    return int(state["step"])


# -- evaluation --------------------------------------------------------------------------------------

def evaluate(lm: Any, tok: Any, problems: list[Any], prompts: list[list[int]], cfg: RLConfig,
             eos: set[int], scorer: Any = None, traces_out: list[Any] | None = None) -> dict[str, Any]:
    """Greedy completions of the held-out problems, judged by the environment: ``eval/pass@1`` (final
    answer equals the problem's), ``eval/step_validity`` (share of steps the symbolic checker accepts;
    a step that claims nothing it can test counts as ``cfg.claimless`` says), ``eval/no_claim`` (share
    of steps that claim nothing), ``eval/trace_validity`` (share of completions with every step valid),
    ``eval/length``. With a
    ``scorer``, also what the PRM believes of the same traces: ``eval/prm``, ``eval/prm_step``,
    ``eval/gap``, ``eval/wrong_steps``, ``eval/fooled`` (:mod:`prmkit.rl._gaming`). ``traces_out``
    receives the held-out traces (PRM step scores under ``"prm"``)."""
    lm.eval()
    correct, valid_steps, steps, all_valid, length, no_claim = 0, 0, 0, 0, 0, 0
    held_out = []
    for i, (problem, ids) in enumerate(zip(problems, prompts, strict=True)):
        toks = sample_group(lm, ids, 1, max_new_tokens=cfg.eval_max_new_tokens or cfg.max_new_tokens,
                            temperature=0.0, eos=eos, seed=0)
        group = Group(problem, ids, toks)
        _traces(group, tok, cfg.splitter, f"eval-{i}")
        t = group.traces[0]
        held_out.append(t)
        correct += t.outcome == "correct"
        ok = [step_valid(s, cfg.claimless) for s in t.steps]
        no_claim += sum(_claimless(s) for s in t.steps)
        valid_steps += sum(ok)
        steps += len(ok)
        all_valid += bool(ok) and all(ok)
        length += len(toks[0])
    n = max(1, len(problems))
    out = {"eval/problems": len(problems), "eval/pass@1": correct / n,
           "eval/step_validity": valid_steps / steps if steps else 0.0,
           "eval/no_claim": no_claim / steps if steps else 0.0,
           "eval/trace_validity": all_valid / n, "eval/length": length / n}
    if scorer is not None:
        from prmkit.scoring import score_each

        with_steps = [t for t in held_out if t.steps]
        scored = iter(score_each(scorer, with_steps))
        rows = [next(scored)[0] if t.steps else None for t in held_out]
        out.update(held_out_scores(held_out, rows, cfg.prm_aggregate))
        out["eval/gap"] = out["eval/prm_step"] - out["eval/step_validity"]
    if traces_out is not None:
        traces_out.extend(held_out)
    return out


def _evaluate_and_keep(out: Path, step: int, lm: Any, tok: Any, problems: list[Any], prompts: list[list[int]],
                       cfg: RLConfig, eos: set[int], scorer: Any) -> dict[str, Any]:
    """:func:`evaluate`, its held-out traces written to ``OUT/eval/step-N.jsonl`` (checker labels,
    PRM step scores under ``"prm"`` when there is a scorer)."""
    from prmkit.trace import write_traces

    traces: list[Any] = []
    row = evaluate(lm, tok, problems, prompts, cfg, eos, scorer=scorer, traces_out=traces)
    write_traces(traces, out / "eval" / f"step-{step:06d}.jsonl")
    return row


# -- the loop ----------------------------------------------------------------------------------------

def _load_policy(cfg: RLConfig) -> tuple[Any, Any, Any]:
    """``(policy, lora model, tokenizer)``: the ``hf`` backend's model (adapter merged) with a fresh
    LoRA adapter seeded by ``cfg.seed``."""
    import torch

    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise MissingDependencyError("peft", "hf", "prmkit rl (LoRA)") from None
    from prmkit.policies import get_policy

    policy = get_policy("hf", model=cfg.model, gguf_file=cfg.gguf_file, adapter=cfg.adapter,
                        chat_template=cfg.chat_template, dtype="float32", progress=False)
    torch.manual_seed(cfg.seed)
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                      target_modules=list(cfg.target_modules), task_type="CAUSAL_LM")
    try:
        lm = get_peft_model(policy.model, lora)
    except ValueError as e:  # target modules not found
        raise PrmkitError(f"LoRA: {e} (field 'target_modules')") from None
    return policy, lm, policy.tokenizer


def _prompt_ids(policy: Any, builder: Any, problem: Any) -> list[int]:
    text = policy.render(builder.request(problem))
    return policy.tokenizer(text, add_special_tokens=False)["input_ids"]


def _step_seed(seed: int, step: int, j: int) -> int:
    return (seed * 1_000_003 + step * 7_919 + j) % (2**63 - 1)


def _read_metrics(path: Path, upto: int) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("step", 0) <= upto]


def rl_train(cfg: RLConfig) -> RLResult:
    """Run ``cfg`` (module docs); resumes from ``OUT/checkpoints`` when a run there stopped early."""
    import torch

    from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder

    cfg.validate()
    t0 = time.perf_counter()
    out = Path(cfg.output_dir)
    metrics_path = out / "metrics.jsonl"
    with output_lock(metrics_path):
        policy, lm, tok = _load_policy(cfg)
        scorer = None
        if cfg.needs_scorer():
            from prmkit.scoring import get_scorer

            scorer = get_scorer(cfg.scorer, **cfg.scorer_options)
        env = ArithEnv(ArithConfig.from_dict(cfg.env))
        builder = PromptBuilder("arith", shots=cfg.shots, config=env.config)
        eos = _eos_ids(lm, tok)
        pad = tok.pad_token_id if tok.pad_token_id is not None else next(iter(eos))
        params = [p for p in lm.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=0.0)
        start = _load_checkpoint(out, lm, opt, cfg)
        rows = _read_metrics(metrics_path, start)
        eval_problems = env.problems(cfg.eval_problems)
        eval_prompts = [_prompt_ids(policy, builder, p) for p in eval_problems]
        if start == 0 and eval_problems:
            rows = [{"step": 0, **_evaluate_and_keep(out, 0, lm, tok, eval_problems, eval_prompts, cfg, eos, scorer)}]
            write_text_file(metrics_path, "".join(json.dumps(r) + "\n" for r in rows))
        with progress_bar(cfg.steps - start, "rl steps", enabled=cfg.progress) as advance:
            for step in range(start + 1, cfg.steps + 1):
                row = _one_step(step, lm, tok, policy, builder, env, scorer, opt, params, cfg, eos, pad)
                if step % cfg.eval_every == 0 or step == cfg.steps:
                    row.update(_evaluate_and_keep(out, step, lm, tok, eval_problems, eval_prompts, cfg, eos, scorer)
                               if eval_problems else {})
                row["seconds"] = round(time.perf_counter() - t0, 3)
                rows.append(row)
                # metrics first, then the checkpoint: a kill between them leaves one row the resume drops
                write_text_file(metrics_path, "".join(json.dumps(r) + "\n" for r in rows))
                if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                    _save_checkpoint(out, step, lm, opt, cfg)
                advance(1)
        _write_adapter(lm, out / "adapter")
    evals = [r for r in rows if "eval/pass@1" in r]
    return RLResult(output_dir=str(out), steps=cfg.steps, resumed_from=start,
                    seconds=round(time.perf_counter() - t0, 3), first_eval=evals[0] if evals else {},
                    final_eval=evals[-1] if evals else {}, last=rows[-1] if rows else {})


def _one_step(step: int, lm: Any, tok: Any, policy: Any, builder: Any, env: Any, scorer: Any, opt: Any,
              params: list[Any], cfg: RLConfig, eos: set[int], pad: int) -> dict[str, Any]:
    import torch

    lm.eval()
    groups = []
    for j in range(cfg.prompts_per_step):
        problem = env.problem(cfg.train_start + (step - 1) * cfg.prompts_per_step + j)
        ids = _prompt_ids(policy, builder, problem)
        tokens = sample_group(lm, ids, cfg.group_size, max_new_tokens=cfg.max_new_tokens,
                              temperature=cfg.temperature, eos=eos, seed=_step_seed(cfg.seed, step, j))
        group = Group(problem, ids, tokens)
        _traces(group, tok, cfg.splitter, f"step{step}-{j}")
        score_group(group, cfg, scorer)
        group.advantages = group_token_advantages(group, cfg)
        groups.append(group)
    old: list[Any] = [None] * len(groups)
    ref: list[Any] = [None] * len(groups)
    with torch.no_grad():
        for k, g in enumerate(groups):
            if cfg.inner_steps > 1:
                old[k] = completion_logprobs(lm, g.prompt_ids, g.tokens, pad, cfg.temperature)[0]
            if cfg.kl_coef > 0:
                with lm.disable_adapter():
                    ref[k] = completion_logprobs(lm, g.prompt_ids, g.tokens, pad, cfg.temperature)[0]
    stats = {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0}
    for _ in range(cfg.inner_steps):
        opt.zero_grad()
        for k, g in enumerate(groups):
            logp, mask = completion_logprobs(lm, g.prompt_ids, g.tokens, pad, cfg.temperature)
            adv = torch.tensor([a + [0.0] * (mask.shape[1] - len(a)) for a in g.advantages], device=logp.device)
            loss, s = clipped_token_loss(logp, old[k] if old[k] is not None else logp.detach(), adv, mask,
                                         clip_eps=cfg.clip_eps, ref_logp=ref[k], kl_coef=cfg.kl_coef)
            (loss / len(groups)).backward()
            stats["loss"] += float(loss.detach()) / len(groups) / cfg.inner_steps
            stats["kl"] += s["kl"] / len(groups) / cfg.inner_steps
            stats["clip_frac"] += s["clip_frac"] / len(groups) / cfg.inner_steps
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    return _metrics(step, groups, stats)


def _metrics(step: int, groups: list[Group], stats: dict[str, float]) -> dict[str, Any]:
    row: dict[str, Any] = {"step": step}
    for c, how in REWARD_COMPONENTS.items():
        if how == "scalar":
            vals = [v for g in groups for v in g.scalar.get(c, [])]
        else:
            vals = [v for g in groups for steps in g.dense.get(c, []) for v in steps]
        if any(c in (g.scalar if how == "scalar" else g.dense) for g in groups):
            row[f"reward/{c}"] = sum(vals) / len(vals) if vals else 0.0
    lengths = [len(t) for g in groups for t in g.tokens]
    row["length"] = sum(lengths) / len(lengths)
    row["sampled_tokens"] = sum(lengths)
    row["steps_per_completion"] = sum(len(t.steps) for g in groups for t in g.traces) / len(lengths)
    row["unscored"] = sum(g.unscored for g in groups)
    row.update({k: round(v, 6) for k, v in stats.items()})
    return row
