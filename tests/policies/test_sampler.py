"""The per-row sampler shared by ``hf`` and ``torch``: counter-based noise (splitmix64), an exact
sample of softmax(logits / T) whether the head, the tail bound or the rejection path decides, and rows
that do not depend on each other."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from prmkit.policies._hf import _mix64, _RowSampler  # noqa: E402

MASK = (1 << 64) - 1


def splitmix64_next(state: int) -> tuple[int, int]:
    """Reference splitmix64 in Python integers: (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def test_mix64_is_splitmix64():
    # splitmix64 seeded with 0 starts 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4 (its published outputs).
    state, first = splitmix64_next(0)
    _, second = splitmix64_next(state)
    assert (first, second) == (0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4)
    states = [0x9E3779B97F4A7C15, 2 * 0x9E3779B97F4A7C15 & MASK, 12345, (1 << 64) - 1]
    got = _mix64(torch.tensor([signed(s) for s in states], dtype=torch.int64)).tolist()
    want = []
    for s in states:
        z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        want.append(signed(z ^ (z >> 31)))
    assert got == want and got[0] == signed(first) and got[1] == signed(second)


def frequencies(logits, temperature, rows, rounds, head=None):
    counts = torch.zeros(logits.shape[-1], dtype=torch.float64)
    for k in range(rounds):
        smp = _RowSampler(list(range(k * rows, (k + 1) * rows)), temperature, 1.0)
        if head is not None:
            smp.HEAD = head
        counts += torch.bincount(smp.pick(logits.expand(rows, -1)), minlength=logits.shape[-1])
    return counts / counts.sum()


@pytest.mark.parametrize("head", [16.0, 3.0], ids=["all_head", "tail_bound"])
@pytest.mark.slow
def test_sample_frequencies_are_the_distribution(head):
    """0.4 on one token, 0.3 over 30 tokens, 0.3 over 300: with HEAD 3 most of the mass is in the tail,
    so the bound, the acceptance and the redraw all decide many samples. 20,000 samples: each frequency
    within 4.5 standard errors of its probability."""
    p = torch.tensor([0.4] + [0.01] * 30 + [0.001] * 300, dtype=torch.float64)
    temperature = 0.5
    logits = (p.log() * temperature).float()  # / T gives back log p
    f = frequencies(logits, temperature, rows=4000, rounds=5, head=head)
    n = 20000
    for got, want in [(f[0], 0.4), (f[1:31].sum(), 0.3), (f[31:].sum(), 0.3), (f[1], 0.01), (f[40], 0.001)]:
        assert abs(float(got) - want) < 4.5 * math.sqrt(want * (1 - want) / n), (head, float(got), want)


@pytest.mark.slow
def test_paths_taken():
    """The tail bound wins and the slow path both accepts and redraws on the distribution above."""
    p = torch.tensor([0.4] + [0.01] * 30 + [0.001] * 300, dtype=torch.float64)
    logits = p.log().float()
    calls = {"tail": 0, "redraw": 0}
    smp = _RowSampler(list(range(2000)), 1.0, 1.0)
    smp.HEAD = 3.0
    slow = smp._tail_or_redraw

    def spy(x, temp, best, cut, count, key):
        tok = slow(x, temp, best, cut, count, key)
        calls["tail" if bool(x[tok] <= cut) else "redraw"] += 1
        return tok

    smp._tail_or_redraw = spy
    smp.pick(logits.expand(2000, -1))
    assert calls["tail"] > 100 and calls["redraw"] > 100


def test_a_row_does_not_depend_on_the_others():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 500, generator=gen) * 4
    together = _RowSampler([11, 12, 13, 14, 15, 16], 0.7, 1.0)
    alone = [_RowSampler([s], 0.7, 1.0) for s in (11, 12, 13, 14, 15, 16)]
    for _ in range(5):  # five steps: each step's noise is new, the rows stay in step
        got = together.pick(logits).tolist()
        assert got == [a.pick(logits[i:i + 1]).item() for i, a in enumerate(alone)]
    kept = _RowSampler([11, 12, 13], 0.7, 1.0)
    kept.keep(torch.tensor([0, 2]))
    assert kept.pick(logits[[0, 2]]).tolist() == [
        _RowSampler([11], 0.7, 1.0).pick(logits[:1]).item(), _RowSampler([13], 0.7, 1.0).pick(logits[2:3]).item()]


def test_seeds_and_steps_change_the_noise():
    logits = torch.zeros(1, 1000)  # uniform: every token as likely
    picks = {_RowSampler([s], 1.0, 1.0).pick(logits).item() for s in range(50)}
    assert len(picks) > 40
    smp = _RowSampler([3], 1.0, 1.0)
    assert len({smp.pick(logits).item() for _ in range(50)}) > 40


def test_as_logits_processor_only_the_pick_is_finite():
    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    out = _RowSampler([1, 2, 3], 1.0, 1.0)(None, logits)
    want = _RowSampler([1, 2, 3], 1.0, 1.0).pick(logits)
    assert out.argmax(dim=-1).tolist() == want.tolist()
    assert int(torch.isfinite(out).sum()) == 3


def test_top_p_keeps_the_nucleus():
    # probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps the first two (the mass before the third is 0.8)
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    smp = _RowSampler(list(range(3000)), 1.0, 0.7)
    picks = smp.pick(logits.expand(3000, -1))
    assert set(picks.tolist()) == {0, 1}
    share = float((picks == 0).double().mean())
    assert abs(share - 0.625) < 4.5 * math.sqrt(0.625 * 0.375 / 3000)
