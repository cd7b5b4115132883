"""The per-row seeded Gumbel-max sampler shared by ``hf`` and ``torch``: :meth:`pick` (the decode
loop's path, which transforms only the tokens that can win) gives exactly the token of the full
transform, on peaked, flat, tied, masked and NaN logits, in float32 and bfloat16; the parallel draws
are each row's own ``torch.rand`` values."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from prmkit.policies import _hf  # noqa: E402
from prmkit.policies._hf import _GUMBEL_SPAN, _GumbelSampler  # noqa: E402


def samplers(rows, seed, temperature):
    """Two samplers whose row generators start in the same states."""
    return [_GumbelSampler([torch.Generator().manual_seed(seed * 1000 + i) for i in range(rows)],
                           temperature, 1.0) for _ in range(2)]


def peaked(rows, vocab, seed, dtype=torch.float32):
    """Logits like a trained LM's: a few tokens near the top, the rest far below."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, vocab, generator=g) * 2 - 20
    top = torch.randint(0, vocab, (rows, 5), generator=g)
    x.scatter_(1, top, torch.randn(rows, 5, generator=g) * 3 + 10)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [0.05, 0.7, 1.0, 3.0])
def test_pick_equals_the_full_transform(dtype, temperature):
    for seed in range(6):
        logits = peaked(24, 3001, seed, dtype)
        if seed % 2:  # exact ties at the top, and masked tokens
            logits[:, 7] = logits.max(dim=-1).values
            logits[:, 11] = float("-inf")
        full, fast = samplers(24, seed, temperature)
        for _ in range(4):  # the generators advance alike step after step
            assert torch.equal(fast.pick(logits), full(None, logits).argmax(dim=-1))


def test_pick_transforms_only_the_tokens_that_can_win(monkeypatch):
    seen = []
    perturb = _GumbelSampler._perturb

    def spy(noise, scores):
        seen.append(noise.numel())
        return perturb(noise, scores)

    monkeypatch.setattr(_GumbelSampler, "_perturb", staticmethod(spy))
    logits = peaked(16, 5000, 3)
    full, fast = samplers(16, 3, 0.7)
    picked = fast.pick(logits)
    # Peaked rows: the tokens more than 22 * 0.7 below the best (about 30 logits) are never transformed.
    assert seen == [int((logits >= logits.max(dim=-1, keepdim=True).values - _GUMBEL_SPAN * 0.7 - 0.1).sum())]
    assert seen[0] <= 16 * 5
    seen.clear()
    assert torch.equal(picked, full(None, logits).argmax(dim=-1))
    assert seen == [16 * 5000]


@pytest.mark.parametrize("case", ["flat", "nan"])
def test_pick_falls_back_to_the_full_transform(case):
    """A flat distribution keeps too many tokens to be worth gathering; a NaN row keeps none. Both
    take the full transform over the uniforms already drawn (the generators advance once)."""
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(8, 2000, generator=g) * 0.1
    if case == "nan":
        logits = peaked(8, 2000, 5)
        logits[3, 100] = float("nan")
    full, fast = samplers(8, 5, 1.0)
    for _ in range(2):
        assert torch.equal(fast.pick(logits), full(None, logits).argmax(dim=-1))


def test_the_span_covers_every_noise_a_float32_uniform_gives():
    """``torch.rand`` in float32 gives k / 2**24 for k < 2**24; after the clamp the noise is highest at
    the largest u and lowest at 1e-20: their difference (about 20.5) is within the span."""
    u = torch.tensor([1 - 2.0 ** -24, 0.0])
    g = _GumbelSampler._perturb(u.clone(), torch.zeros(2))
    assert g[0].item() == pytest.approx(16.6355, abs=1e-3)
    assert g[1].item() == pytest.approx(-3.8298, abs=1e-3)
    assert g[0] - g[1] < _GUMBEL_SPAN - 1
    big = torch.rand(10 ** 6, generator=torch.Generator().manual_seed(0))
    assert big.max().item() <= 1 - 2.0 ** -24


def test_parallel_draws_are_each_rows_own_rand(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    assert _hf._noise_workers(64, torch) == 3
    gens = [torch.Generator().manual_seed(i) for i in range(64)]
    noise = _GumbelSampler(gens, 1.0, 1.0)._uniforms((64, 777), torch)
    again = torch.stack([torch.rand(777, generator=torch.Generator().manual_seed(i)) for i in range(64)])
    assert torch.equal(noise, again)
    with pytest.raises(ValueError, match="3 generators for 64 rows"):
        _GumbelSampler(gens[:3], 1.0, 1.0)._uniforms((64, 777), torch)
