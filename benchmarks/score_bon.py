"""Best-of-N scoring speed: prmkit's PrefixCachingScorer against the Qwen2.5-Math-PRM model card recipe.

    python benchmarks/score_bon.py                          # 2 arith problems x 16 candidates, SmolLM2 PRM
    python benchmarks/score_bon.py --problems 4 --n 16      # more problems
    python benchmarks/score_bon.py --traces samples.jsonl --problems 3   # sampled traces, n per problem

    # samples.jsonl from the default SmolLM2 arith policy (about 2 minutes on 2 CPU cores):
    OMP_NUM_THREADS=1 prmkit generate --env arith --policy hf -n 16 --problems 3 --steps 3-4 -o samples.jsonl

The speed-up follows the share of tokens candidates have in common: real samples of the tuned policy
repeat their first steps often (and sometimes whole solutions), the scripted candidates less so. On a
CPU the time is close to proportional to the tokens run, so ``tokens run`` explains most of it.

1. PRM: SmolLM2-135M-Instruct with a token-classification head (``RewardModel.from_backbone("smollm2")``),
   float32 on the CPU, in the input convention of Qwen2.5-Math-PRM (``--convention``): ChatML with the
   card's system prompt, the steps in one assistant turn, each followed by ``<extra_0>``. The head is
   untrained; it is drawn at random with a fixed seed (``--head random``) so that the scores differ from
   candidate to candidate and the equality check between the methods means something.
2. Candidates: ``--n`` per problem for ``--problems`` problems of the built-in ``arith`` environment.
   Each is made like a sample: step by step from the reference solution, written in the reference
   wording (probability 0.6) or one of two others, with an arithmetic slip (probability 0.15) that the
   later steps carry on from, ending with "The answer is X.". So candidates share the problem, often
   their first steps, and rarely more. ``--traces`` reads real samples instead.
3. Methods, on the same candidates, each timed once after a warm-up forward pass:
   - ``card``: the model card's recipe: for each candidate, render the conversation, tokenise the full
     text, run the model on it (one forward pass per candidate, no reuse), read the step positions;
   - ``batched``: ``RewardModel.score`` (length-sorted, padded batches of ``--batch-size``, no reuse),
     for reference;
   - ``prmkit``: ``PrefixCachingScorer.score`` on all candidates in one call (shared prefixes once).
   Scores of every method are checked against ``card`` (max abs difference printed).
4. Printed per method: steps scored per second, tokens run, estimated forward FLOPs (2 x non-embedding
   parameters x tokens run + 4 x layers x hidden x causal attention pairs) per second and its share of
   this machine's measured float32 matmul peak (the best of three 2048 x 2048 ``torch.mm`` in this
   process, same threads). Then the command line, and last the speed-up of prmkit over the card recipe.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.envs import ArithConfig, ArithEnv
from prmkit.models import RewardModel
from prmkit.scoring import PrefixCachingScorer
from prmkit.trace import Problem, Step, Trace, read_traces

SYMBOLS = {"+": "+", "-": "-", "*": "*", "/": "/"}


# -- sample-like candidates ---------------------------------------------------------------------------
def apply(op: str, before: int, operand: int) -> int:
    if op == "+":
        return before + operand
    if op == "-":
        return before - operand
    if op == "*":
        return before * operand
    return before // operand if operand else before


def step_text(desc: str, op: str, before: int, operand: int, after: int, style: int) -> str:
    """One operation written in one of three wordings (0 is the reference solution's)."""
    eq = f"{before} {SYMBOLS[op]} {operand} = {after}"
    return [f"{desc}: {eq}.", f"Next, {eq}.", f"{desc}, so {eq}."][style]


def operations(problem: Problem) -> list[tuple[str, str, int]]:
    """``(description, op, operand)`` of every operation, the description from the reference line."""
    lines = (problem.solution or "").splitlines()
    ops = problem.meta["arith"]["ops"]
    return [(line.split(":")[0], o["op"], o["operand"]) for line, o in zip(lines, ops, strict=False)]


def sample_candidate(problem: Problem, rng: random.Random, *, p_ref: float = 0.6,
                     p_slip: float = 0.15) -> list[str]:
    """Steps of one sample-like solution (see the module docstring)."""
    value = problem.meta["arith"]["start"]
    steps = []
    for desc, op, operand in operations(problem):
        after = apply(op, value, operand)
        if rng.random() < p_slip:
            after += rng.choice([-10, -2, -1, 1, 2, 10])
        style = 0 if rng.random() < p_ref else rng.choice([1, 2])
        steps.append(step_text(desc, op, value, operand, after, style))
        value = after
    steps.append(f"The answer is {value}.")
    return steps


def arith_candidates(problems: int, n: int, seed: int) -> list[Trace]:
    env = ArithEnv(ArithConfig(steps=(3, 4), seed=seed))
    rng = random.Random(seed)
    out = []
    for p in env.problems(problems):
        for i in range(n):
            out.append(Trace(id=f"{p.id}-{i}", problem=p,
                             steps=[Step(s) for s in sample_candidate(p, rng)]))
    return out


def file_candidates(path: str, problems: int, n: int) -> list[Trace]:
    by_problem: OrderedDict[str, list[Trace]] = OrderedDict()
    for t in read_traces(path):
        if t.steps:
            by_problem.setdefault(t.problem.text, []).append(t)
    groups = [g[:n] for g in by_problem.values() if len(g) >= 2][:problems]
    return [t for g in groups for t in g]


# -- the PRM and the methods --------------------------------------------------------------------------
def load_prm(convention: str, head: str, seed: int, backbone: str = "smollm2") -> RewardModel:
    """A PRM on ``backbone`` (``tiny``: a quick check of the script, not a benchmark)."""
    import torch

    rm = RewardModel.from_backbone(backbone, convention=convention, device="cpu", dtype="float32")
    if head == "random":
        layer = rm.model.score
        torch.manual_seed(seed)
        with torch.no_grad():
            layer.weight.normal_(0.0, 0.02)
            layer.bias.zero_()
    return rm


def card_recipe(rm: RewardModel, traces: Sequence[Trace]) -> tuple[list[list[float]], int, int]:
    """The Qwen2.5-Math-PRM card: per candidate, tokenise the whole conversation, one forward pass,
    softmax at the step-separator positions. Returns scores, tokens run and attention pairs."""
    import torch

    scores, tokens, pairs = [], 0, 0
    with torch.inference_mode():
        for t in traces:
            text = rm.render(t).text
            ids = rm.tokenizer(text, add_special_tokens=rm.convention.add_special_tokens,
                               return_tensors="pt")["input_ids"]
            positions = rm.encode(t).positions  # where the card's token mask finds <extra_0>
            logits = rm.model(input_ids=ids).logits[0]
            scores.append(torch.softmax(logits[positions].float(), dim=-1)[:, 1].tolist())
            n = ids.shape[1]
            tokens += n
            pairs += n * (n + 1) // 2
    return scores, tokens, pairs


def matmul_peak(size: int = 2048, repeats: int = 3) -> float:
    """Measured float32 matmul FLOP/s: the best of ``repeats`` ``size x size`` products."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * size ** 3 / best


def flop_model(rm: RewardModel) -> tuple[int, int, int]:
    """(non-embedding parameters, layers, attention width) for the FLOP estimate."""
    model = rm.model
    emb = model.get_input_embeddings().weight.numel()
    params = sum(p.numel() for p in model.parameters()) - emb
    cfg = model.config
    width = cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    return params, cfg.num_hidden_layers, width


def max_diff(a: Sequence[Sequence[float | None]], b: Sequence[Sequence[float | None]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)
               if x is not None and y is not None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=2)
    ap.add_argument("--n", type=int, default=16, help="candidates per problem")
    ap.add_argument("--traces", help="a prmkit JSONL of sampled traces (grouped by problem)")
    ap.add_argument("--convention", default="qwen2.5-math-prm")
    ap.add_argument("--head", choices=["random", "zero"], default="random")
    ap.add_argument("--backbone", default="smollm2", help="tiny: check the script in seconds")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--skip-batched", action="store_true", help="do not time RewardModel.score")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on a shared machine, more threads wait on each other)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)

    traces = (file_candidates(args.traces, args.problems, args.n) if args.traces
              else arith_candidates(args.problems, args.n, args.seed))
    rm = load_prm(args.convention, args.head, args.seed, args.backbone)
    n_steps = sum(len(t.steps) for t in traces)
    lengths = [len(rm.encode(t)) for t in traces]
    print(f"PRM: {args.backbone} + {args.head} 2-class head, convention {args.convention}, float32, "
          f"{torch.get_num_threads()} threads")
    print(f"candidates: {len(traces)} ({args.problems} problems x {args.n}), {n_steps} steps, "
          f"{sum(lengths)} tokens (mean {sum(lengths) / len(lengths):.0f} per candidate)")
    with torch.inference_mode():  # warm-up: first-call allocations and kernel selection
        rm.model(input_ids=torch.tensor([rm.encode(traces[0]).input_ids]))
    peak = matmul_peak()
    params, layers, width = flop_model(rm)

    rows: list[tuple[str, float, int, int]] = []
    t0 = time.perf_counter()
    card, card_tokens, card_pairs = card_recipe(rm, traces)
    rows.append(("card", time.perf_counter() - t0, card_tokens, card_pairs))
    results: dict[str, Any] = {"card": card}
    if not args.skip_batched:
        t0 = time.perf_counter()
        results["batched"] = rm.score(traces, batch_size=args.batch_size)
        rows.append(("batched", time.perf_counter() - t0, sum(lengths),
                     sum(n * (n + 1) // 2 for n in lengths)))
    scorer = PrefixCachingScorer(rm, batch_size=args.batch_size)
    t0 = time.perf_counter()
    results["prmkit"] = scorer.score(traces)
    rows.append(("prmkit", time.perf_counter() - t0, scorer.stats.tokens_computed,
                 scorer.stats.attention_pairs))

    print(f"machine float32 matmul peak: {peak / 1e9:.1f} GFLOP/s (2048^3 torch.mm, best of 3)")
    print(f"{'method':<9} {'seconds':>8} {'steps/s':>8} {'tokens run':>10} {'GFLOP/s':>8} {'MFU':>6} "
          f"{'max |diff| vs card':>18}")
    for name, secs, tokens, pairs in rows:
        flops = 2 * params * tokens + 4 * layers * width * pairs
        diff = max_diff(results[name], card)
        print(f"{name:<9} {secs:8.2f} {n_steps / secs:8.2f} {tokens:10d} {flops / secs / 1e9:8.1f} "
              f"{flops / secs / peak:6.1%} {diff:18.2e}")
    flat = [x for r in card for x in r]
    print(f"step scores (card) range from {min(flat):.3f} to {max(flat):.3f}")
    st = scorer.stats
    print(f"prmkit: {st.forward_passes} forward passes, {st.tokens_reused} of {st.tokens_requested} tokens "
          f"reused ({st.tokens_reused / st.tokens_requested:.0%}), {st.padded_tokens} padded tokens")
    ok = max_diff(results["prmkit"], card) <= 1e-4
    print("scores equal to the card recipe within 1e-4:", "yes" if ok else "NO")
    times = {name: secs for name, secs, _, _ in rows}
    if "batched" in times:
        print(f"speed-up of prmkit over batched RewardModel.score: {times['batched'] / times['prmkit']:.2f}x")
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"speed-up of prmkit over the card recipe (steps/s ratio): {times['card'] / times['prmkit']:.2f}x")
    _record.record("score_bon", {"seconds": times, "steps": n_steps, "equal_within_1e-4": ok},
                   times["card"] / times["prmkit"], goal="prefix-caching scorer faster than the card recipe, same scores")


if __name__ == "__main__":
    main()
