"""What a local policy keeps in prmkit's cache between processes: the adapter-merged weights
(``merged/``) and the int8 loop's SmoothQuant ranges (``smoothquant/``). A policy built from the cache
holds the same tensors and samples the same completions as one built from scratch; an entry's key
follows the bytes it was made from."""

from __future__ import annotations

import pytest

from prmkit.policies import SamplingParams, cache_entries, get_policy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from decode_checks import REQS, rows, wide_copy  # noqa: E402

from prmkit.policies._hf import merged_cache_dir  # noqa: E402


@pytest.fixture(scope="module")
def wide_lm(tiny_lm, tmp_path_factory):
    return wide_copy(tiny_lm, tmp_path_factory.mktemp("wide_llama"))


@pytest.fixture(scope="module")
def adapter(wide_lm, tmp_path_factory):
    """A LoRA adapter whose B matrices are not zero (``init_lora_weights=False``): merging it moves
    the weights."""
    torch.manual_seed(3)
    lm = transformers.AutoModelForCausalLM.from_pretrained(wide_lm)
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                          init_lora_weights=False)
    out = tmp_path_factory.mktemp("adapter")
    peft.get_peft_model(lm, cfg).save_pretrained(out)
    return str(out)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _dense(t):
    return t.to_dense() if t.is_mkldnn else t


def _equal(a, b) -> bool:
    """Packed int8 weights are tuples (weights, scales) or oneDNN's prepacked objects."""
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(_dense(a), _dense(b))
    return a is None and b is None


def test_the_merged_policy_is_cached_and_read_back_bit_for_bit(wide_lm, adapter, cache):
    first = get_policy("hf", model=wide_lm, adapter=adapter, progress=False)
    assert first.merged_from_cache is False
    (entry,) = cache_entries(["merged"])
    assert entry.path == merged_cache_dir(wide_lm, None, adapter) and entry.key and entry.size > 0
    second = get_policy("hf", model=wide_lm, adapter=adapter, progress=False)
    assert second.merged_from_cache is True and second.describe() == first.describe()
    assert _same_weights(first.model, second.model)
    # the merge moved the weights: the cache holds the merged model, not the base
    base = get_policy("hf", model=wide_lm, adapter=None, progress=False)
    assert not _same_weights(base.model, second.model) and base.merged_from_cache is False
    sp = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=4)
    assert rows(first.generate(REQS, sp)) == rows(second.generate(REQS, sp))
    assert len(cache_entries(["merged"])) == 1  # nothing cached for the plain model


def test_the_merged_key_follows_the_bytes_dtype_and_version(wide_lm, adapter, cache, tmp_path, monkeypatch):
    import shutil

    key = merged_cache_dir(wide_lm, None, adapter)
    assert key.parent == cache / "merged"
    assert merged_cache_dir(wide_lm, None, adapter, dtype="bfloat16") != key
    other = tmp_path / "other-adapter"
    shutil.copytree(adapter, other)
    same_bytes = merged_cache_dir(wide_lm, None, str(other))
    assert same_bytes.name.rsplit("-", 1)[1] == key.name.rsplit("-", 1)[1]  # keyed by content, not path
    weights = other / "adapter_model.safetensors"
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1
    save_file(tensors, str(weights))
    assert merged_cache_dir(wide_lm, None, str(other)).name.rsplit("-", 1)[1] != key.name.rsplit("-", 1)[1]
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.1" if name == "peft" else real(name))
    assert merged_cache_dir(wide_lm, None, adapter) != key
    # a hub id's bytes are not here to key by: not cached
    assert merged_cache_dir("someone/some-model", None, adapter) is None


def test_int8_ranges_are_cached_and_give_the_same_int8_weights(wide_lm, adapter, cache, monkeypatch):
    from prmkit.policies import _compute

    if not hasattr(torch, "_int_mm"):
        pytest.skip("int8 products need torch._int_mm")

    def build():
        return get_policy("torch", model=wide_lm, adapter=adapter, dtype="int8", int8_kernel="int_mm",
                          compile=False, batch_size=6, progress=False)

    first = build()
    assert first._plan.smoothed and first._plan.ranges_cached is False
    (entry,) = cache_entries(["smoothquant"])
    assert entry.path == first._plan.ranges_path and entry.key
    second = build()
    assert second._plan.ranges_cached is True and second.merged_from_cache is True
    assert _equal(first._plan.layers, second._plan.layers) and _equal(first._plan.norm, second._plan.norm)
    assert _equal(first._plan.lm_head, second._plan.lm_head)
    sp = SamplingParams(n=3, max_new_tokens=10, temperature=1.0, seed=9)
    assert rows(first.generate(REQS, sp)) == rows(second.generate(REQS, sp))
    # a damaged entry costs a calibration pass and is written again, never read
    entry.path.write_bytes(b"not safetensors")
    third = build()
    assert third._plan.ranges_cached is False and rows(third.generate(REQS, sp)) == rows(first.generate(REQS, sp))
    assert build()._plan.ranges_cached is True
    # another thread count (a float sum's order) is another entry
    monkeypatch.setattr(_compute, "_threads", lambda: 7)
    assert build()._plan.ranges_path != first._plan.ranges_path
    assert len(cache_entries(["smoothquant"])) == 2
