"""Secrets: a policy or judge argument named like a credential (``api_key``, ``token``, ``headers``, ...)
reaches the backend but no file, log, report or message — every record of arguments is redacted."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import typer
from labeler_fakes import make_trace
from typer.testing import CliRunner

from prmkit.cli._label import label
from prmkit.labelers import PolicySpec
from prmkit.provenance import REDACTED, redact_secrets
from prmkit.trace import Problem, Provenance, StepLabel, Trace, read_traces, write_traces

KEY = "sk-test-5EC12E7-0f-a-fake-server"
JUDGE_KEY = "hf_judge_T0KEN_never_written"

app = typer.Typer()
app.command(name="label")(label)
app.command(name="unused")(lambda: None)  # two commands: typer keeps "label" as a subcommand


class FakeServer:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that answers every request with the right
    answer (rollouts) or a judgement of every step (judge prompts), and records the auth headers."""

    def __init__(self) -> None:
        self.auth: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                server.auth.append(self.headers.get("authorization", ""))
                text = " ".join(str(m.get("content")) for m in body["messages"])
                answer = ("Step 1: correct\nStep 2: correct\nStep 3: correct" if "Step 1" in text
                          else "The answer is 42.")
                message = {"role": "assistant", "content": answer}
                data = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 5, "completion_tokens": 4}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)


@pytest.fixture()
def server():
    s = FakeServer()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _every_byte_under(folder) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.parametrize("method", ["mc", "consensus"])
def test_a_label_run_with_keys_leaves_no_copy_of_them(tmp_path, server, method, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    work = tmp_path / "run"
    work.mkdir()
    inp, out = work / "in.jsonl", work / "out.jsonl"
    write_traces([make_trace(f"t{i}", ["a", "b", "The answer is 42."]) for i in range(2)], inp)
    policy = ["--policy", "openai_compat", "-p", f"base_url={server.url}", "-p", "model=fake",
              "-p", f"api_key={KEY}", "-p", "max_retries=0"]
    judge = ["--judge-policy", "openai_compat", "-j", f"base_url={server.url}", "-j", "model=judge",
             "-j", f"api_key={JUDGE_KEY}", "-j", "max_retries=0"] if method == "consensus" else []
    result = CliRunner().invoke(app, ["label", str(inp), str(out), "--method", method, "-k", "2",
                                      "--workers", "0", "--no-progress", "--report",
                                      str(work / "report.json"), *policy, *judge],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"Bearer {KEY}" in server.auth  # the key was used ...
    if judge:
        assert f"Bearer {JUDGE_KEY}" in server.auth
    files = sorted(p.name for p in work.iterdir())
    assert files == ["in.jsonl", "out.jsonl", "out.jsonl.labels.sqlite", "report.json"]
    everything = _every_byte_under(work) + result.output.encode()
    assert KEY.encode() not in everything and JUDGE_KEY.encode() not in everything  # ... never kept
    [t, _] = read_traces(out)
    kept = list(_values_of("api_key", t.to_dict()))
    # every step label's args and the provenance name the policy, its key as <redacted>
    assert kept == [REDACTED] * len(kept) and len(kept) >= sum(len(s.labels) for s in t.steps) + 1
    models = set(_values_of("model", t.to_dict()))
    assert "fake" in models  # the other arguments are recorded as before


def _values_of(key, obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                yield v
            yield from _values_of(key, v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _values_of(key, v)


def test_every_record_of_arguments_redacts_by_name():
    args = {"policy": {"name": "x", "kwargs": {"API_KEY": "k1", "hf_token": "k2", "password": "k3",
                                                "headers": {"X-Whatever": "k4"}, "Authorization": "k5",
                                                "client_secret": "k6", "max_new_tokens": 64,
                                                "eos_token": "</s>", "model": "m"}}}
    expected = {"policy": {"name": "x", "kwargs": {
        "API_KEY": REDACTED, "hf_token": REDACTED, "password": REDACTED, "headers": REDACTED,
        "Authorization": REDACTED, "client_secret": REDACTED, "max_new_tokens": 64, "eos_token": "</s>",
        "model": "m"}}}
    assert redact_secrets(args) == expected
    assert StepLabel(1, args=args).args == expected
    assert Provenance("label", "mc", args).args == expected
    t = Trace(id="t", problem=Problem("q"))
    t.add_provenance("generate", "custom", {"policy": {"token": "k7"}})
    assert t.provenance[0].args == {"policy": {"token": REDACTED}}
    assert args["policy"]["kwargs"]["API_KEY"] == "k1"  # the caller's dict is left alone


def test_a_policy_spec_never_shows_its_secrets():
    spec = PolicySpec("openai_compat", {"base_url": "http://h/v1", "model": "m", "api_key": KEY})
    assert KEY not in repr(spec) and KEY not in str(spec.to_dict())
    assert spec.to_dict() == {"name": "openai_compat",
                              "kwargs": {"base_url": "http://h/v1", "model": "m", "api_key": REDACTED}}
    assert spec.kwargs["api_key"] == KEY  # the backend still gets it
