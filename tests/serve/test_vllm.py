"""``VLLMScorer`` against a local stand-in for vLLM's ``/pooling`` with STEP pooling.

The stand-in answers with vLLM's ``PoolingResponse`` shape as read from vLLM's source
(vllm-project/vllm, ``vllm/entrypoints/pooling/pooling/protocol.py`` at commit
01cfbaf63434b3d5ec8a9e492d5111f6efc55e77: ``PoolingResponse{id, object="list", created, model,
data: list[PoolingResponseData{index, object="pooling", data: list[list[float]] | list[float]}],
usage}``; the request is ``PoolingCompletionRequest``: ``model``, ``input: str | list[str] | ...``,
``add_special_tokens``, optional ``task``). Its STEP pooling is vLLM's: the softmax of the head's
logits at every position whose token is the step tag (Qwen2.5-Math-PRM: ``<extra_0>``). The model is a
tiny seeded Qwen2 token classifier; prmkit's own scoring of the same model is the reference.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_tokenizers import SEED, qwen_tokenizer  # noqa: E402

from prmkit.errors import PrmkitError  # noqa: E402
from prmkit.models import RewardModel  # noqa: E402
from prmkit.serve import VLLMScorer  # noqa: E402


@pytest.fixture(scope="module")
def qwen_prm():
    torch.manual_seed(SEED)
    tok = qwen_tokenizer()
    cfg = transformers.Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                   initializer_range=0.3, pad_token_id=tok.pad_token_id, num_labels=2)
    model = transformers.Qwen2ForTokenClassification(cfg)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 0.2)
    return RewardModel(model.eval(), tok, convention="qwen2.5-math-prm", name="tiny-qwen-prm")


def fake_vllm(rm, seen: list, *, drop_last_row: bool = False):
    """A Starlette app speaking vLLM's /pooling with STEP pooling at ``<extra_0>``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    tok = rm.tokenizer
    tag = tok.convert_tokens_to_ids("<extra_0>")

    async def pooling(request: Request):
        body = await request.json()
        seen.append(body)
        inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data, n = [], 0
        for i, text in enumerate(inputs):
            ids = tok(text, add_special_tokens=body.get("add_special_tokens", True))["input_ids"]
            n += len(ids)
            with torch.no_grad():
                probs = torch.softmax(rm.model(torch.tensor([ids])).logits[0].float(), dim=-1)
            rows = [probs[j].tolist() for j, t in enumerate(ids) if t == tag]
            data.append({"index": i, "object": "pooling", "data": rows[:-1] if drop_last_row else rows})
        return JSONResponse({"id": "pool-0", "object": "list", "created": 0, "model": body["model"],
                             "data": data, "usage": {"prompt_tokens": n, "total_tokens": n,
                                                     "completion_tokens": 0, "prompt_tokens_details": None}})

    return Starlette(routes=[Route("/pooling", pooling, methods=["POST"])])


def test_vllm_scores_equal_prmkits(qwen_prm, make_traces, live_app):
    seen: list = []
    url = live_app(fake_vllm(qwen_prm, seen))
    scorer = VLLMScorer(url, "Qwen/Qwen2.5-Math-PRM-7B", tokenizer=qwen_prm.tokenizer, chunk=3)
    traces = make_traces()
    got = scorer.score(traces)
    want = qwen_prm.score(traces)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, abs=1e-5)
    assert len({round(x, 5) for s in want for x in s}) > 3
    assert [len(b["input"]) for b in seen] == [3, 1]  # chunked
    assert seen[0]["model"] == "Qwen/Qwen2.5-Math-PRM-7B" and "<extra_0>" in seen[0]["input"][0]
    assert scorer.describe()["convention"] == "qwen2.5-math-prm"


def test_a_step_count_mismatch_names_the_trace(qwen_prm, make_traces, live_app):
    url = live_app(fake_vllm(qwen_prm, [], drop_last_row=True))
    with pytest.raises(PrmkitError, match=r"trace 'c0': vLLM returned 1 step rows for 2 steps"):
        VLLMScorer(url, "m", tokenizer=qwen_prm.tokenizer).score(make_traces()[:1])


def test_registered_as_vllm():
    from prmkit.scoring import get_scorer

    s = get_scorer("vllm", url="http://gpu:8000", model="m", convention="math-shepherd")
    assert s.label == 0 and s.kind == "prm"  # an LM-token PRM's returned_token_ids list '+' first
