"""Scoring in bf16: step scores stay close to fp32's on tiny models of every decoder convention (plain and
prefix-caching), the precision is recorded, and a request the hardware cannot serve falls back to fp32.
The invariant tests (batched = one at a time, cached = plain) run at the fp32 default."""

from __future__ import annotations

import pytest
import torch

from prmkit.errors import PrmkitError
from prmkit.models import RewardModel, _precision, bf16_problem
from prmkit.scoring import PrefixCachingScorer, score_traces

NO_BF16 = bf16_problem(torch.device("cpu"))
DECODERS = ["prmkit", "qwen2.5-math-prm", "skywork-prm", "math-shepherd", "rlhflow"]
#: bfloat16 keeps 8 bits of mantissa: a probability moves by a few 1e-3 on these wide-init models.
BF16_TOL = 0.03


def max_diff(a, b) -> float:
    return max(abs(x - y) for s, t in zip(a, b, strict=True) for x, y in zip(s, t, strict=True))


@pytest.mark.skipif(NO_BF16 is not None, reason=f"no native bf16 here: {NO_BF16}")
@pytest.mark.parametrize("name", DECODERS)
def test_bf16_scores_are_close_to_fp32(name, make_rm, mixed_traces):
    rm = make_rm(name)
    assert rm.precision == "fp32" and rm.precision_used.used == "fp32"  # the default
    fp32 = rm.score(mixed_traces)
    rm.precision = "bf16"
    assert rm.precision_used.used == "bf16"
    bf16 = rm.score(mixed_traces)
    cached = PrefixCachingScorer(rm).score(mixed_traces)
    assert 0 < max_diff(bf16, fp32) < BF16_TOL  # bf16 really ran, and stayed close
    assert max_diff(cached, fp32) < BF16_TOL
    # an explicit fp32 scorer over the bf16 model setting is fp32 again: equal to the plain fp32 scores
    again = PrefixCachingScorer(rm, precision="fp32")
    assert again.describe()["precision"] == "fp32"
    assert max_diff(again.score(mixed_traces), fp32) < 1e-4


def test_precision_is_recorded_and_validated(make_rm, mixed_traces, monkeypatch):
    rm = make_rm("prmkit")
    scored = score_traces(rm, mixed_traces[:2], "min")
    assert scored[0].provenance[-1].args["precision"] == "fp32"
    assert PrefixCachingScorer(rm).describe()["precision"] == "fp32"
    with pytest.raises(PrmkitError, match="precision must be one of auto, fp32, bf16, got 'fp16'"):
        RewardModel(rm.model, rm.tokenizer, precision="fp16")
    monkeypatch.setattr(_precision, "bf16_problem", lambda device: "no bfloat16 on this test CPU")
    rm.precision = "bf16"
    used = rm.precision_used
    assert (used.used, used.note) == ("fp32", "no bfloat16 on this test CPU")
    assert PrefixCachingScorer(rm).describe()["precision"] == "fp32"
