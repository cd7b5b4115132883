"""The serving path on a GPU: the prefix-caching scorer with the model on CUDA scores as the CPU model
does one trace at a time (float32, 1e-4), batched, shared and extended step by step; ``prmkit serve``
over that scorer answers ``/v1/score`` and ``/get_reward`` with the same scores, and in bfloat16
within bfloat16's rounding.

The rest of the suite pins the CPU (tests/conftest.py hides CUDA). These run only where a GPU is present
and asked for: ``PRMKIT_TEST_CUDA=1 pytest -m cuda tests/serve/test_cuda_serve.py``; elsewhere they
skip and say why.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from prmkit.models import RewardModel  # noqa: E402
from prmkit.scoring import PrefixCachingScorer  # noqa: E402
from prmkit.serve import RemoteScorer, ServeConfig  # noqa: E402
from prmkit.trace import Step, Trace  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="no CUDA device visible (run with PRMKIT_TEST_CUDA=1 on a GPU machine)"),
]

OTHER = ("A bag holds 12 pears; 4 are eaten. How many are left?",
         [["12 - 4 = 8.", "The answer is 8."], ["12 + 4 = 16.", "The answer is 16."],
          ["12 - 4 = 8.", "8 is left.", "The answer is 8."]])


def _on(rm: RewardModel, dtype) -> RewardModel:
    """``rm``'s weights copied to the GPU in ``dtype`` (the session's CPU model stays as it is)."""
    return RewardModel(copy.deepcopy(rm.model).to("cuda", dtype), rm.tokenizer, convention="prmkit",
                       name=rm.name)


def _traces(make_traces) -> list[Trace]:
    return make_traces() + make_traces(*OTHER, prefix="o")


def test_prefix_scorer_on_the_gpu_equals_the_cpu_one_at_a_time(tiny_rm, make_traces):
    traces = _traces(make_traces)
    want = [tiny_rm.score([t])[0] for t in traces]
    assert len({round(x, 6) for s in want for x in s}) > 4  # the scores differ: the check means something
    gpu = _on(tiny_rm, torch.float32)
    assert gpu.device.type == "cuda"
    scorer = PrefixCachingScorer(gpu, batch_size=3, min_saved_tokens=2)
    got = scorer.score(traces)
    assert scorer.stats.tokens_reused > 0
    # step by step, as a search asks: each trace with one more step, then the whole set again
    longer = [Trace(t.id + "+", t.problem, [*t.steps, Step("Check: 8 - 5 = 3.")]) for t in traces]
    got_longer = scorer.score(longer)
    want_longer = [tiny_rm.score([t])[0] for t in longer]
    for g, w in zip(got + got_longer, want + want_longer, strict=True):
        assert g == pytest.approx(w, abs=1e-4)
    assert scorer.stats.cache_hits > 0


def test_served_from_the_gpu_float32_and_bfloat16(tiny_rm, make_traces, live_server):
    import httpx

    traces = _traces(make_traces)
    want = tiny_rm.score(traces)
    prompt, steps = OTHER[0], OTHER[1][0]
    local = tiny_rm.score(make_traces(prompt, [steps]))[0]
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
        server = live_server(PrefixCachingScorer(_on(tiny_rm, dtype)), ServeConfig(max_traces=4, aggregate="min"))
        got = RemoteScorer(server.url).score(traces)  # 5 traces: two requests of at most 4
        for g, w in zip(got, want, strict=True):
            assert g == pytest.approx(w, abs=tol)
        # OpenRLHF's protocol: the full text, the prompt as the problem, the min over the lines
        r = httpx.post(server.url + "/get_reward", json={"query": [prompt + "\n".join(steps)],
                                                         "prompts": [prompt]}, timeout=60)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["step_scores"][0] == pytest.approx(local, abs=tol)
        assert body["rewards"] == [pytest.approx(min(local), abs=tol)]
