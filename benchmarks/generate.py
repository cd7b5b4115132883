"""Generation throughput on the embedded default (SmolLM2-135M-Instruct + arith adapter, this CPU).

    python benchmarks/generate.py                       # hf vs ct2 vs torch at 16 and 64 rows, llama.cpp
    python benchmarks/generate.py --quality 64          # + pass@1 of each backend on 64 arith problems
    python benchmarks/generate.py --skip-llamacpp       # without the llama.cpp engine
    python benchmarks/generate.py --ortgenai int4,int8,fp32   # + ONNX Runtime GenAI at three precisions
    python benchmarks/generate.py --device cuda --backends hf,torch --rows 16,64,128 --model DIR  # a GPU

The same requests (arith problems with the default policy's zero-shot prompt, N samples each, at most
``--max-tokens`` new tokens, temperature 0.7) go to:

1. ``hf`` (transformers ``generate``, float32, per-row seeded sampling: the baseline), ``ct2``
   (CTranslate2, int8) and ``torch`` (prmkit's own decode loop over the transformers weights, bfloat16
   where the CPU computes it natively) at 16 and at 64 rows per batch. Each mode's tokens/s is the
   median over ``--repeats`` runs, the modes alternating so a change in machine load hits all of them.
2. llama.cpp's batched decoding (llama-cpp-python's low-level API over SmolLM2's Q4_1 GGUF, no
   adapter — the adapter does not change the cost of a token): each prompt forwarded once, its KV
   cache copied to its N sequences, then one ``llama_decode`` per step over every live sequence, each
   with its own seeded top-k/temperature sampler. It runs in a child process: a llama.cpp compiled
   natively on a CPU that reports AMX its kernel does not enable dies at its first decode (SIGILL or
   SIGSEGV, seen on this project's machines); it is then run again with its weight repacking for the
   AMX kernels off (the line says so), and where that dies too, build one that runs with
   ``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON
   -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON" pip install --no-deps
   --target DIR llama-cpp-python`` and put DIR first on ``PYTHONPATH``.
3. ``--ortgenai PRECISIONS``: ONNX Runtime GenAI's batched decoding, the third engine the speed issue
   named (needs ``pip install onnxruntime-genai onnx onnx_ir``; not a prmkit dependency). The ``hf``
   policy with its adapter merged is saved in float32 and converted by the package's own model
   builder (``python -m onnxruntime_genai.models.builder -p PRECISION -e cpu``); each batch of rows is
   then one generator (prompts left-padded by its tokenizer, top-k 50, temperature 0.7, one seed per
   call), in a child process.
4. ``--quality P``: pass@1 of each of ``--quality-backends`` on P arith problems (the engine must not
   make the policy worse), with 95% Wilson intervals.

The ratios of the default backend (:func:`prmkit.policies.default_backend` on this machine) to ``hf``
at 16 and at 64 rows are printed last; before them, each repeat's own ratios, which show how much the
machine's state moves them (on the 2-core machine of the README, ×2.3 to ×2.6 at 16 rows in one night).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import statistics
import sys
import time

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder
from prmkit.policies import SamplingParams, default_backend, get_policy


def requests_for(problems: int, policy, start: int = 0):
    cfg = ArithConfig()
    prompts = PromptBuilder.for_policy(policy, config=cfg)
    probs = ArithEnv(cfg).problems(start + problems)[start:]
    return probs, [prompts.request(p, key=p.id) for p in probs]


def timed(policy, requests, params) -> tuple[int, float, list]:
    t0 = time.perf_counter()
    out = policy.generate(requests, params)
    seconds = time.perf_counter() - t0
    return sum(c.num_tokens for row in out for c in row), seconds, out


BACKENDS = ("hf", "ct2", "torch")


def make_policy(spec: str, **kwargs):
    """The backend ``spec`` names: ``NAME`` or ``NAME:DTYPE`` (``torch:int8``, ``hf:bfloat16``;
    CTranslate2's compute type for ``ct2:int8_float32``)."""
    name, _, dtype = spec.partition(":")
    if dtype:
        kwargs["compute_type" if name == "ct2" else "dtype"] = dtype
    return get_policy(name, **kwargs)


def bench_backends(problems: int, n: int, max_tokens: int, repeats: int, backends=BACKENDS,
                   batch_rows=(16, 64), device: str | None = None, model: str | None = None) -> dict[str, float]:
    # --model: a local folder without the arith adapter; --device: each backend's default where None
    where = {**({"model": model, "adapter": None} if model else {}), **({"device": device} if device else {})}
    pols = {name: make_policy(name, progress=False, **where) for name in backends}
    _, reqs = requests_for(problems, next(iter(pols.values())))
    params = SamplingParams(n=n, max_new_tokens=max_tokens, temperature=0.7, seed=0)
    # Warm-up: caches, and torch.compile's graphs where a backend compiles (prmkit's int8 loop for a
    # model of SmolLM2's size: its third step on compiles; one graph for several groups of rows, one
    # for a single group). What the first calls cost is printed, not counted in the rates.
    for name, pol in pols.items():
        t0 = time.perf_counter()
        pol.generate(reqs[:1], SamplingParams(n=2, max_new_tokens=4))
        pol.generate(reqs[:2], SamplingParams(n=2, max_new_tokens=4))
        print(f"{name}: warm-up calls {time.perf_counter() - t0:.1f} s"
              + (" (with compiling)" if pol.describe().get("compiled") else ""), flush=True)
    # Another process on the CPU slows backends unevenly: say how loaded the machine was.
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if any(getattr(p, "device", "cpu") != "cpu" for p in pols.values()):
        import torch

        print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    desc = "; ".join(f"{name}: {pol.model_id} ({pol.describe().get('dtype') or pol.describe().get('compute_type')}"
                     f"{', compiled' if pol.describe().get('compiled') else ''})" for name, pol in pols.items())
    print(f"{problems} problems x {n} samples x <= {max_tokens} new tokens, T 0.7, zero-shot arith prompt; {desc}")
    rates: dict[str, list[float]] = {}
    for r in range(repeats):
        for bs in batch_rows:
            for name, pol in pols.items():
                pol.batch_size = bs
                tokens, seconds, _ = timed(pol, reqs, params)
                rates.setdefault(f"{name}@{bs}", []).append(tokens / seconds)
                print(f"  repeat {r + 1} {name:>5} batch {bs:>2}: {tokens} tokens in {seconds:.1f} s = "
                      f"{tokens / seconds:.1f} tokens/s", flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    for k, v in med.items():
        print(f"{k}: {v:.1f} tokens/s (median of {repeats})")
    # The same repeat's runs are seconds apart: their ratios show how far the machine's state moves
    # the ratio printed last (a median ratio of medians).
    for name in [b for b in backends if b != "hf" and "hf" in backends]:
        for bs in batch_rows:
            each = [a / b for a, b in zip(rates[f"{name}@{bs}"], rates[f"hf@{bs}"], strict=True)]
            print(f"{name}/hf at {bs} rows, repeat by repeat: {', '.join(f'{x:.2f}' for x in each)}")
    return med


def _quiet_logger():
    import llama_cpp as L

    @L.llama_log_callback
    def quiet(level, text, user_data):
        pass

    return quiet


_QUIET = None


def bench_llamacpp(problems: int, n: int, max_tokens: int, rows: int, threads: int = 2,
                   repack: bool = True) -> float:
    """Tokens/s of llama.cpp batched decoding, ``rows`` sequences at a time (see the docstring);
    ``repack=False``: llama.cpp's weight repacking for its AMX kernels ("extra buffer types") off."""
    import llama_cpp as L

    from prmkit.policies import default_policy_model

    global _QUIET
    _QUIET = _QUIET or _quiet_logger()

    folder, gguf = default_policy_model()
    L.llama_log_set(_QUIET, ctypes.c_void_p())  # llama.cpp logs every tensor otherwise
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.use_extra_bufts = repack
    model = L.llama_model_load_from_file(f"{folder}/{gguf}".encode(), mp)
    vocab = L.llama_model_get_vocab(model)
    hf = get_policy("ct2", progress=False)  # only for its tokenizer and prompt rendering
    _, reqs = requests_for(problems, hf)
    prompts = [hf.tokenizer(hf.render(r), add_special_tokens=False)["input_ids"] for r in reqs]
    per_call = max(1, rows // n)
    cp = L.llama_context_default_params()
    cp.n_ctx = per_call * n * (max(map(len, prompts)) + max_tokens + 8)
    cp.n_batch = cp.n_ubatch = max(512, max(map(len, prompts)))
    cp.n_seq_max = per_call * n
    cp.n_threads = cp.n_threads_batch = threads
    cp.kv_unified = True
    ctx = L.llama_init_from_model(model, cp)
    mem = L.llama_get_memory(ctx)
    eos = L.llama_vocab_eos(vocab)
    batch = L.llama_batch_init(max(cp.n_batch, cp.n_seq_max), 0, cp.n_seq_max)
    total_tokens, t0 = 0, time.perf_counter()
    for start in range(0, len(prompts), per_call):
        L.llama_memory_clear(mem, True)
        group = prompts[start:start + per_call]
        samplers, live = [], []  # live: [seq id, position, sampler, last token, generated]
        for g, ids in enumerate(group):
            base = g * n
            batch.n_tokens = len(ids)
            for j, t in enumerate(ids):
                batch.token[j], batch.pos[j], batch.n_seq_id[j] = t, j, 1
                batch.seq_id[j][0] = base
                batch.logits[j] = j == len(ids) - 1
            if L.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed on a prompt")
            # Copy the prompt's cache to N sequences; each samples its first token from the prompt's
            # last logits with its own seeded sampler.
            for k in range(1, n):
                L.llama_memory_seq_cp(mem, base, base + k, -1, -1)
            for k in range(n):
                chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
                L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_k(50))
                L.llama_sampler_chain_add(chain, L.llama_sampler_init_temp(0.7))
                L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(1000 * start + base + k))
                samplers.append(chain)
                tok = L.llama_sampler_sample(chain, ctx, len(ids) - 1)
                total_tokens += 1
                if tok != eos:
                    live.append([base + k, len(ids), chain, tok, 1])
        while live:
            batch.n_tokens = len(live)
            for j, s in enumerate(live):
                batch.token[j], batch.pos[j], batch.n_seq_id[j] = s[3], s[1], 1
                batch.seq_id[j][0] = s[0]
                batch.logits[j] = True
            if L.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            nxt = []
            for j, s in enumerate(live):
                tok = L.llama_sampler_sample(s[2], ctx, j)
                total_tokens += 1
                s[1] += 1
                s[4] += 1
                if tok != eos and s[4] < max_tokens:
                    s[3] = tok
                    nxt.append(s)
            live = nxt
        for chain in samplers:
            L.llama_sampler_free(chain)
    seconds = time.perf_counter() - t0
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)
    rate = total_tokens / seconds
    print(f"llama.cpp batched ({rows} rows, {threads} threads, Q4_1): {total_tokens} tokens in {seconds:.1f} s "
          f"= {rate:.1f} tokens/s", flush=True)
    return rate


def run_child(args: argparse.Namespace, flag: str, value: str, prefix: str, *extra: str
              ) -> tuple[int, list[str], str]:
    """This script again in a child process with ``flag value`` (and ``extra``) and the same requests:
    its return code, its stdout lines that start with ``prefix``, and the last line of its stderr."""
    import subprocess

    cmd = [sys.executable, __file__, "--problems", str(args.problems), "-n", str(args.n),
           "--max-tokens", str(args.max_tokens), flag, value, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(prefix)]
    return proc.returncode, lines, (proc.stderr.strip().splitlines() or [""])[-1]


def run_llamacpp(args: argparse.Namespace, rows: int) -> None:
    """:func:`bench_llamacpp` in a child process: a llama.cpp compiled natively on a CPU that reports
    AMX its kernel does not enable dies at its first decode (seen here: SIGILL on one machine, SIGSEGV
    at ``ldtilecfg`` on another), which must not take the other measurements with it. Then it is tried
    once more with the weight repacking for the AMX kernels off, and the line says so."""
    import signal

    died = (-signal.SIGILL, -signal.SIGSEGV)
    code, lines, err = run_child(args, "--llamacpp-rows", str(rows), "llama.cpp")
    note = ""
    if code in died:
        first = signal.Signals(-code).name
        code, lines, err = run_child(args, "--llamacpp-rows", str(rows), "llama.cpp", "--llamacpp-no-repack")
        note = f" (weight repacking off: with it, llama.cpp died of {first} here)"
    if code == 0 and lines:
        print(lines[-1] + note, flush=True)
    elif code in died:
        print(f"llama.cpp batched ({rows} rows): died of {signal.Signals(-code).name} with and without "
              "weight repacking — this llama-cpp-python was compiled for CPU features the machine does not "
              "enable (rebuild with CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON ...')", flush=True)
    else:
        print(f"llama.cpp batched ({rows} rows): failed with code {code}: {err}", flush=True)


def bench_ortgenai(problems: int, n: int, max_tokens: int, precision: str) -> None:
    """Tokens/s of ONNX Runtime GenAI's batched decoding of the same requests at 16, 32 and 64 rows (see
    the docstring): the ``hf`` policy (adapter merged) saved in float32, converted by the package's
    own model builder at ``precision``, then each batch of rows decoded by one generator."""
    import subprocess
    import tempfile

    import onnxruntime_genai as og
    import torch

    threads = torch.get_num_threads()
    pol = get_policy("hf", progress=False, dtype="float32")
    _, reqs = requests_for(problems, pol)
    prompts = [pol.render(r) for r in reqs for _ in range(n)]
    with tempfile.TemporaryDirectory(prefix="prmkit-ortgenai-") as work:
        src, out = os.path.join(work, "hf"), os.path.join(work, precision)
        pol.model.save_pretrained(src)
        pol.tokenizer.save_pretrained(src)
        del pol
        t0 = time.perf_counter()
        built = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out,
                                "-p", precision, "-e", "cpu", "-c", os.path.join(work, "cache")],
                               capture_output=True, text=True)
        if built.returncode != 0:
            print(f"ONNX Runtime GenAI ({precision}): the model builder failed: "
                  f"{built.stderr.strip().splitlines()[-1:]}", flush=True)
            return
        print(f"ONNX Runtime GenAI {og.__version__}: {precision} model built in {time.perf_counter() - t0:.0f} s, "
              f"{threads} threads", flush=True)
        # The builder leaves the thread count to ONNX Runtime, which ran one thread here: give it
        # the threads torch uses.
        cfg_file = os.path.join(out, "genai_config.json")
        with open(cfg_file) as f:
            cfg = json.load(f)
        cfg["model"]["decoder"]["session_options"]["intra_op_num_threads"] = threads
        with open(cfg_file, "w") as f:
            json.dump(cfg, f, indent=4)
        model = og.Model(out)
        tok = og.Tokenizer(model)
        eos = {int(t) for t in tok.eos_token_ids}
        for rows in (16, 32, 64):  # 0.18 refuses more than 32 rows per generator on this model
            total, t0 = 0, time.perf_counter()
            try:
                for call, start in enumerate(range(0, len(prompts), rows)):
                    ids = tok.encode_batch(prompts[start:start + rows]).as_numpy()  # left-padded
                    params = og.GeneratorParams(model)
                    params.set_search_options(do_sample=True, temperature=0.7, top_k=50, random_seed=call,
                                              batch_size=ids.shape[0], max_length=ids.shape[1] + max_tokens)
                    gen = og.Generator(model, params)
                    gen.append_tokens(ids)
                    while not gen.is_done():
                        gen.generate_next_token()
                    for r in range(ids.shape[0]):
                        new = [int(t) for t in gen.get_sequence(r)[ids.shape[1]:]]
                        ends = [i for i, t in enumerate(new) if t in eos]
                        total += ends[0] + 1 if ends else len(new)
            except RuntimeError as e:
                print(f"ONNX Runtime GenAI ({rows} rows, {precision}): refused: {e}", flush=True)
                continue
            seconds = time.perf_counter() - t0
            print(f"ONNX Runtime GenAI batched ({rows} rows, {precision}): {total} tokens in {seconds:.1f} s "
                  f"= {total / seconds:.1f} tokens/s", flush=True)


def run_ortgenai(args: argparse.Namespace, precision: str) -> None:
    """:func:`bench_ortgenai` in a child process: ONNX Runtime's spinning thread pool must not share
    the CPU with the measurements after it."""
    code, lines, err = run_child(args, "--ortgenai-child", precision, "ONNX Runtime GenAI")
    for x in lines:
        print(x, flush=True)
    if code != 0:
        print(f"ONNX Runtime GenAI ({precision}): failed with code {code}: {err}", flush=True)


def bench_quality(problems: int, n: int, backends: list[str]) -> None:
    from prmkit.data import answers_equal, extract_answer
    from prmkit.eval import wilson_interval

    for name in backends:
        pol = make_policy(name, progress=False, batch_size=64)
        probs, reqs = requests_for(problems, pol, start=10_000)
        params = SamplingParams(n=n, max_new_tokens=96, temperature=0.7, seed=0)
        tokens, seconds, out = timed(pol, reqs, params)
        right = sum(answers_equal(extract_answer(c.text), p.answer) for p, row in zip(probs, out, strict=True)
                    for c in row)
        total = problems * n
        lo, hi = wilson_interval(right, total)
        print(f"pass@1 {name}: {right}/{total} = {right / total:.1%} [{lo:.1%}, {hi:.1%}] "
              f"({tokens / seconds:.1f} tokens/s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("-n", type=int, default=8, help="samples per problem")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-llamacpp", action="store_true")
    ap.add_argument("--quality", type=int, default=0, metavar="P", help="pass@1 on P arith problems")
    ap.add_argument("--llamacpp-rows", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--llamacpp-no-repack", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ortgenai", default="", metavar="PRECISIONS",
                    help="also ONNX Runtime GenAI at these builder precisions (comma-separated: int4, int8, fp32)")
    ap.add_argument("--ortgenai-child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--quality-n", type=int, default=4, help="samples per problem for --quality")
    ap.add_argument("--quality-backends", default="hf,ct2,torch", help="backends --quality compares")
    ap.add_argument("--skip-speed", action="store_true", help="only --quality")
    ap.add_argument("--backends", default=",".join(BACKENDS), help="backends the speed run compares")
    ap.add_argument("--rows", default="16,64", help="rows per batch the speed run tries (comma-separated)")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: each backend's own default)")
    ap.add_argument("--model", default=None,
                    help="a local transformers folder instead of SmolLM2 + the arith adapter (no adapter)")
    args = ap.parse_args()
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    batch_rows = tuple(int(r) for r in args.rows.split(",") if r.strip())
    command = shlex.join(["python", "benchmarks/generate.py", *sys.argv[1:]])
    if args.llamacpp_rows:  # the child process of run_llamacpp
        bench_llamacpp(args.problems, args.n, args.max_tokens, args.llamacpp_rows,
                       repack=not args.llamacpp_no_repack)
        return
    if args.ortgenai_child:  # the child process of run_ortgenai
        bench_ortgenai(args.problems, args.n, args.max_tokens, args.ortgenai_child)
        return
    med = None if args.skip_speed else bench_backends(args.problems, args.n, args.max_tokens, args.repeats,
                                                      backends, batch_rows, args.device, args.model)
    if med is not None:  # the other engines beside a speed run
        for rows in () if args.skip_llamacpp else (16, 64):
            run_llamacpp(args, rows)
        for precision in [p.strip() for p in args.ortgenai.split(",") if p.strip()]:
            run_ortgenai(args, precision)
    if args.quality:
        bench_quality(args.quality, args.quality_n, args.quality_backends.split(","))
    print(f"reproduce: {command}")
    if med is None:
        return
    if "hf" not in backends:
        return
    for name in backends:
        if name != "hf":
            print(f"{name}/hf: " + ", ".join(f"{med[f'{name}@{bs}'] / med[f'hf@{bs}']:.2f} at {bs} rows"
                                             for bs in batch_rows))
    default = default_backend()
    for bs in batch_rows if default in backends and default != "hf" else ():
        print(f"ratio default ({default})/hf at {bs} rows: {med[f'{default}@{bs}'] / med[f'hf@{bs}']:.2f}")
    ratios = {f"default/hf@{bs}": med[f"{default}@{bs}"] / med[f"hf@{bs}"]
              for bs in batch_rows if default in backends and default != "hf"}
    _record.record("generate", {"tokens_per_s": med, "default_backend": default, **ratios},
                   ratios[f"default/hf@{batch_rows[-1]}"] if ratios else None,
                   goal="the default backend at least ×3 hf's tokens/s at 16 and 64 rows")


if __name__ == "__main__":
    main()
