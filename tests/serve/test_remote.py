"""``RemoteScorer``: a model served by ``prmkit serve`` scores exactly as the model does locally, from
Python, from ``--model http://...`` on the command line and through ``PRMReward``; and it retries
(and does not retry) as the ``openai_compat`` policy does."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from prmkit.errors import PrmkitError
from prmkit.serve import RemoteScorer, RemoteScorerError, ServeConfig

httpx = pytest.importorskip("httpx")

OTHER = ["A bag holds 12 pears; 4 are eaten. How many are left?",
         [["12 - 4 = 8.", "The answer is 8."], ["12 + 4 = 16.", "The answer is 16."]]]


@pytest.fixture()
def served(tiny_rm, live_server):
    from prmkit.scoring import PrefixCachingScorer

    return live_server(PrefixCachingScorer(tiny_rm), ServeConfig(max_traces=3))


def test_remote_scores_equal_the_local_model(tiny_rm, make_traces, served):
    traces = make_traces() + make_traces(*OTHER, prefix="o")
    local = tiny_rm.score(traces)
    remote = RemoteScorer(served.url)
    assert (remote.kind, remote.name, remote.chunk) == ("prm", "tiny-prm", 3)
    got = remote.score(traces)  # 6 traces: two requests of at most max_traces=3
    assert len(got) == len(local)
    for g, want in zip(got, local, strict=True):
        assert g == pytest.approx(want, abs=1e-5)
    assert len({round(x, 6) for s in local for x in s}) > 4  # the scores differ: the check means something


def test_model_url_through_load_scorer_and_prmreward(tiny_rm, make_traces, served):
    from prmkit.rl import PRMReward
    from prmkit.scoring import load_scorer

    scorer = load_scorer("model", Path(served.url))  # the CLI's --model is a Path: http:/host
    assert isinstance(scorer, RemoteScorer) and scorer.url == served.url
    reward = PRMReward.from_pretrained(served.url)
    got = reward(prompts=[OTHER[0]], completions=["12 - 4 = 8.\nThe answer is 8."])
    want = min(tiny_rm.score(make_traces(OTHER[0], OTHER[1][:1]))[0])
    assert got == [pytest.approx(want, abs=1e-5)]


def test_prmkit_score_with_a_model_url(tiny_rm, make_traces, served, tmp_path):
    from prmkit.cli import main
    from prmkit.trace import read_traces, write_traces

    traces = make_traces()
    write_traces(traces, tmp_path / "in.jsonl")
    main(["score", "--model", served.url, str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")])
    out = list(read_traces(tmp_path / "out.jsonl"))
    for t, want in zip(out, tiny_rm.score(traces), strict=True):
        assert [s.scores["prm"] for s in t.steps] == pytest.approx(want, abs=1e-5)
    assert "http://" in json.dumps(out[0].to_dict())  # provenance names the server


# -- retries, as openai_compat's ---------------------------------------------------------------------------
HEALTH = {"status": "ok", "model": "m", "kind": "prm", "max_traces": 10}


def mock(monkeypatch, answers):
    """RemoteScorer's httpx.Client answers /health, then ``answers`` (responses or exceptions) in turn."""
    calls = []

    def handler(request):
        if request.url.path == "/health":
            return httpx.Response(200, json=HEALTH)
        calls.append(request)
        a = answers[min(len(calls) - 1, len(answers) - 1)]
        if isinstance(a, Exception):
            raise a
        return a

    monkeypatch.setattr(httpx, "Client", functools.partial(httpx.Client, transport=httpx.MockTransport(handler)))
    return calls


def test_retries_503_with_retry_after_then_succeeds(monkeypatch, make_traces):
    ok = httpx.Response(200, json={"results": [{"id": "c0", "step_scores": [0.1, 0.2], "score": 0.1,
                                                "unscored": None}]})
    busy = httpx.Response(503, json={"error": "busy"}, headers={"Retry-After": "0"})
    calls = mock(monkeypatch, [busy, busy, ok])
    assert RemoteScorer("http://h:1", backoff=0).score(make_traces()[:1]) == [[0.1, 0.2]]
    assert len(calls) == 3


def test_4xx_is_not_retried_and_says_why(monkeypatch, make_traces):
    calls = mock(monkeypatch, [httpx.Response(401, json={"error": "wrong bearer token"})])
    with pytest.raises(RemoteScorerError, match="HTTP 401 .*wrong bearer token.*PRMKIT_SERVE_TOKEN"):
        RemoteScorer("http://h:1", backoff=0).score(make_traces()[:1])
    assert len(calls) == 1


def test_timeouts_are_retried_then_fail(monkeypatch, make_traces):
    calls = mock(monkeypatch, [httpx.ReadTimeout("slow")])
    with pytest.raises(RemoteScorerError, match="after 3 attempt"):
        RemoteScorer("http://h:1", backoff=0, max_retries=2).score(make_traces()[:1])
    assert len(calls) == 3


def test_unscored_trace_raises_its_reason(monkeypatch, make_traces):
    mock(monkeypatch, [httpx.Response(200, json={"results": [{"id": "c0", "step_scores": None, "score": None,
                                                              "unscored": "rejected by the scorer: too long"}]})])
    with pytest.raises(PrmkitError, match="c0.*too long"):
        RemoteScorer("http://h:1").score(make_traces()[:1])


def test_connection_refused_fails_at_once():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteScorerError, match="cannot connect.*prmkit serve"):
        RemoteScorer(f"http://127.0.0.1:{port}", max_retries=5, backoff=10)


def test_a_refusal_that_echoes_the_token_and_url_is_redacted(monkeypatch, make_traces):
    """A server whose error repeats the Authorization header and the URL's user info: neither reaches
    the message (issue 45: secrets from servers' texts)."""
    echo = httpx.Response(401, json={"error": "bad token: Bearer tok-SECRET-1 for http://me:pw-SECRET-2@h:1"})
    mock(monkeypatch, [echo])
    scorer = RemoteScorer("http://me:pw-SECRET-2@h:1", token="tok-SECRET-1", backoff=0)
    with pytest.raises(RemoteScorerError) as e:
        scorer.score(make_traces()[:1])
    assert "SECRET" not in str(e.value) and "HTTP 401" in str(e.value), str(e.value)
    assert "SECRET" not in json.dumps(scorer.describe())
