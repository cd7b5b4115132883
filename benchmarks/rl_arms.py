"""Outcome-only vs dense oracle (symbolic) step rewards vs a trace-level PRM, under ``prmkit rl``, on a
small policy trained from scratch on ``arith``, or on the embedded SmolLM2-135M (``--policy smollm2``).

The policy (``--policy tiny``, the default): a character-level Llama (hidden 128, 4 layers, about 0.8M
parameters) trained here by next-token prediction on reference solutions of ``arith`` problems (1-2
operations, + and -), seeds no evaluation uses, for ``--sft-steps`` steps: it writes the format and makes
real arithmetic mistakes. ``--policy smollm2``: the embedded SmolLM2-135M-Instruct with the shipped arith
SFT adapter merged, at the shipped config's sizes (``src/prmkit/rl/configs/arith-outcome.yaml``: 2
operations up to 20, LoRA r 8 on q and v, learning rate 5e-5, its chat template and prompt).
Then five arms of GRPO, each from that same policy, with ``--seeds`` seeds each, at equal steps, equal
prompts and equal group size (so equal sampled completions; the sampled *tokens* are reported per arm):

- ``outcome``: ``rewards: {outcome: 1}`` (the environment's answer check);
- ``oracle``: ``rewards: {outcome: 1, oracle: 1}`` (plus the symbolic checker's verdict of each step,
  dense, by DeepSeekMath's process-supervision rule);
- ``prm``: ``rewards: {outcome: 1, prm: 1}`` (plus the shipped PRM's min step score, trace level);
- ``prm_dense``: ``rewards: {outcome: 1, prm_dense: 1}`` (plus each step's PRM score on that step's
  tokens, by the same process-supervision rule as ``oracle``);
- ``pav``: ``rewards: {outcome: 1, pav: 1}`` (plus each step's process advantage from the PRM: its score
  after the step minus before it).

Held-out: ``--eval-problems`` problems of seed 0 (indices below the training problems'), greedy, judged
by the environment (pass@1: final answer right; step validity: share of steps the checker accepts).

What counts as dense rewards helping, written before the first run: at the last step, the ``oracle``
arm's pooled held-out pass@1 (seeds x problems) is above ``outcome``'s and the 95% Newcombe interval
of the difference (from the two Wilson intervals) excludes 0. Pooling seeds over the same problems
overstates the sample size (the problems repeat); with 3 x 40 greedy answers per arm only a difference
of about 15 points could show. Anything else is "no detectable difference", not "no effect". The same
rule for ``prm`` against ``outcome``, and for ``prm_dense`` and ``pav`` (arms added after the first
record, the rule written before their first run).

    python benchmarks/rl_arms.py                    # 3 seeds x 5 arms, 30 steps each
    python benchmarks/rl_arms.py --arms outcome oracle --seeds 2 --steps 10   # smaller
    python benchmarks/rl_arms.py --policy smollm2 --arms outcome oracle --seeds 1 --steps 20 --prompts 2 \
        --max-new-tokens 96 --eval-problems 32   # the embedded 135M policy: what 2 CPU cores can afford
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import _record  # notes the load average before the run

ARMS = {"outcome": {"outcome": 1.0}, "oracle": {"outcome": 1.0, "oracle": 1.0}, "prm": {"outcome": 1.0, "prm": 1.0},
        "prm_dense": {"outcome": 1.0, "prm_dense": 1.0}, "pav": {"outcome": 1.0, "pav": 1.0}}
ENV = {"steps": [1, 2], "ops": ["+", "-"], "max_operand": 20}
# No system prompt and no worked examples: the problem, a newline, then the solution.
TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}\n{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}>{% endif %}")
SFT_SEED = 100_000
SMOLLM2_ENV = {"steps": 2, "max_operand": 20}  # src/prmkit/rl/configs/arith-outcome.yaml's


def build_policy(folder: Path, sft_steps: int, batch: int, seed: int = 0) -> dict:
    """Train the small policy from scratch on reference solutions; returns what it cost."""
    import torch
    import transformers as T

    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.models import build_char_tokenizer

    tok = build_char_tokenizer()
    tok.chat_template = TEMPLATE
    torch.manual_seed(seed)
    cfg = T.LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    lm = T.LlamaForCausalLM(cfg)
    env = ArithEnv(ArithConfig.from_dict({**ENV, "seed": SFT_SEED}))
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=sft_steps, pct_start=0.1)
    t0 = time.perf_counter()
    lm.train()
    for step in range(sft_steps):
        rows, masks = [], []
        for p in env.problems(batch, start=step * batch):
            prompt = tok.apply_chat_template([{"role": "user", "content": p.text}], tokenize=False,
                                             add_generation_prompt=True)
            a = tok(prompt, add_special_tokens=False)["input_ids"]
            b = tok(p.solution, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            rows.append(a + b)
            masks.append([0] * len(a) + [1] * len(b))
        width = max(map(len, rows))
        ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
        labels = torch.tensor([[t if m else -100 for t, m in zip(r, mk, strict=True)] + [-100] * (width - len(r))
                               for r, mk in zip(rows, masks, strict=True)])
        attn = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        loss = lm(input_ids=ids, attention_mask=attn, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 50 == 0 or step == sft_steps - 1:
            print(f"sft step {step}: loss {loss.item():.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    lm.save_pretrained(folder)
    tok.save_pretrained(folder)
    return {"sft_steps": sft_steps, "sft_batch": batch, "sft_seconds": round(time.perf_counter() - t0, 1),
            "sft_final_loss": round(loss.item(), 4),
            "parameters": sum(p.numel() for p in lm.parameters())}


def newcombe(k1: int, k2: int, n: int) -> tuple[float, float, float]:
    """Difference p1 - p2 of two proportions over n each, and its 95% Newcombe interval."""
    from prmkit.eval import wilson_interval

    p1, p2 = k1 / n, k2 / n
    l1, u1 = wilson_interval(k1, n)
    l2, u2 = wilson_interval(k2, n)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def run_arm(work: Path, arm: str, seed: int, size: dict, opts: dict) -> tuple[list[dict], float]:
    """One GRPO run of ``arm`` at ``seed`` (resumed if its folder holds a checkpoint); its held-out curve
    (pass@1 and step validity against sampled tokens) and its seconds."""
    import torch

    from prmkit.rl import RLConfig, rl_train

    torch.set_num_threads(opts["threads"] or (1 if opts["policy"] == "tiny" else 2))
    t0 = time.perf_counter()
    cfg = RLConfig(output_dir=str(work / f"{arm}-{seed}"), **size, train_start=1000,
                   eval_problems=opts["eval_problems"], eval_every=opts["eval_every"], steps=opts["steps"],
                   prompts_per_step=opts["prompts"], group_size=4, max_new_tokens=opts["max_new_tokens"],
                   temperature=1.0, lora_r=8, lora_alpha=16, rewards=ARMS[arm], scorer="model",
                   scorer_options={"path": "default"}, seed=seed, progress=False, claimless=opts["claimless"])
    rl_train(cfg)
    rows = [json.loads(line) for line in (work / f"{arm}-{seed}" / "metrics.jsonl").read_text().splitlines()]
    tokens, curve = 0, []
    for r in rows:
        tokens += r.get("sampled_tokens", 0)
        if "eval/pass@1" in r:
            curve.append({"step": r["step"], "sampled_tokens": tokens, "pass@1": r["eval/pass@1"],
                          "step_validity": r["eval/step_validity"]})
    return curve, round(time.perf_counter() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval-problems", type=int, default=40)
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step (x 4 completions)")
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--claimless", default="invalid", choices=["invalid", "valid"],
                    help="what a step that claims nothing counts as in the oracle reward and the step validity "
                         "(RLConfig.claimless); the runs in docs/rl.md were made before the option, as 'valid'")
    ap.add_argument("--sft-batch", type=int, default=16)
    ap.add_argument("--policy", default="tiny", choices=["tiny", "smollm2"],
                    help="tiny: the 0.8M policy trained here; smollm2: the embedded SmolLM2-135M-Instruct with the "
                         "shipped arith SFT adapter merged, at the sizes of src/prmkit/rl/configs/arith-outcome.yaml")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: 1 for tiny, 2 for smollm2)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at once, each in its own process (on 2 cores: --jobs 2 --threads 1)")
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default: 2e-3 for tiny, 5e-5 for smollm2)")
    ap.add_argument("--work", default=None, help="folder for the policy and the runs (default: a temporary one)")
    args = ap.parse_args()

    import torch

    from prmkit.eval import wilson_interval
    # one thread: on the 2 shared cores, 2 threads ran the tiny model's small products 10-20x slower
    # under load (threads waiting on each other), and one thread is what the tests measure too
    tiny = args.policy == "tiny"
    torch.set_num_threads(args.threads or (1 if tiny else 2))
    work = Path(args.work or tempfile.mkdtemp(prefix="rl_arms-"))
    policy = work / "policy"
    cost = {}
    if tiny and not (policy / "config.json").exists():
        cost = build_policy(policy, args.sft_steps, args.sft_batch)
    # the tiny policy: every projection, lr 2e-3; SmolLM2: as the shipped config (q and v, lr 5e-5)
    size = (dict(model=str(policy), adapter=None, chat_template=TEMPLATE, env=dict(ENV), learning_rate=args.lr or 2e-3,
                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
            if tiny else
            dict(model=None, adapter="default", env=dict(SMOLLM2_ENV), learning_rate=args.lr or 5e-5,
                 target_modules=["q_proj", "v_proj"]))
    figures: dict = {**cost, "policy": args.policy, "steps": args.steps, "seeds": args.seeds,
                     "eval_problems": args.eval_problems, "prompts": args.prompts,
                     "max_new_tokens": args.max_new_tokens, "learning_rate": size["learning_rate"]}
    curves: dict = {}
    # seeds outside, so a run stopped early has every arm equally often
    runs = [(seed, arm) for seed in range(args.seeds) for arm in args.arms]
    jobs = [(work, arm, seed, size, vars(args)) for seed, arm in runs]
    if args.jobs > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as ex:
            done = ex.map(run_arm, *zip(*jobs, strict=True))
            done = list(done)
    else:
        done = (run_arm(*job) for job in jobs)
    for (seed, arm), (curve, seconds) in zip(runs, done, strict=True):
        curves[f"{arm}-{seed}"] = curve
        figures[f"seconds/{arm}-{seed}"] = seconds
        print(f"{arm} seed {seed}: " + ", ".join(f"step {c['step']} ({c['sampled_tokens']} tok) pass@1 "
                                                f"{c['pass@1']:.3f} validity {c['step_validity']:.3f}"
                                                for c in curve) + f" [{seconds:.0f} s]", flush=True)
    n = args.eval_problems * args.seeds
    final: dict = {}
    for arm in args.arms:
        last = [curves[f"{arm}-{s}"][-1] for s in range(args.seeds)]
        first = [curves[f"{arm}-{s}"][0] for s in range(args.seeds)]
        k = round(sum(c["pass@1"] for c in last) * args.eval_problems)
        k0 = round(sum(c["pass@1"] for c in first) * args.eval_problems)
        lo, hi = wilson_interval(k, n)
        final[arm] = k
        figures[f"{arm}_pass1_before"] = k0 / n
        figures[f"{arm}_pass1"] = k / n
        figures[f"{arm}_pass1_lo"], figures[f"{arm}_pass1_hi"] = lo, hi
        figures[f"{arm}_step_validity"] = sum(c["step_validity"] for c in last) / len(last)
        figures[f"{arm}_sampled_tokens"] = sum(c["sampled_tokens"] for c in last) / len(last)
        print(f"{arm}: held-out pass@1 {k0 / n:.3f} -> {k / n:.3f} [{lo:.3f}, {hi:.3f}] over {n}, "
              f"step validity {figures[f'{arm}_step_validity']:.3f}, sampled tokens {figures[f'{arm}_sampled_tokens']:.0f}")
    ratio = None
    for arm in args.arms:
        if arm != "outcome" and "outcome" in final:
            d, lo, hi = newcombe(final[arm], final["outcome"], n)
            figures[f"{arm}_minus_outcome"], figures[f"{arm}_minus_outcome_lo"], figures[f"{arm}_minus_outcome_hi"] = d, lo, hi
            verdict = "helps" if lo > 0 else ("hurts" if hi < 0 else "no detectable difference")
            figures[f"{arm}_verdict"] = verdict
            print(f"{arm} - outcome: {d:+.3f} [{lo:+.3f}, {hi:+.3f}]: {verdict}")
    if "oracle" in final and "outcome" in final and final["outcome"]:
        ratio = final["oracle"] / final["outcome"]
        print(f"ratio oracle/outcome held-out pass@1: {ratio:.2f}")
    _record.record("rl_arms", figures, ratio, goal="dense oracle rewards above outcome-only at equal sampled tokens",
                   curves=curves, argv_note=" ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
