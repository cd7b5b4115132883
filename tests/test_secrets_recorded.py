"""Secrets never recorded (issue 45, item 4): a key in a URL's user info (``http://me:KEY@host``), a
key a server echoes back (its 401 message, an echoed Authorization header, an error body) is in no
file prmkit writes and on no line it prints — traces, label stores, monitor evidence, stderr."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cli_run import run

from prmkit.policies import GenerationRequest, SamplingParams
from prmkit.policies._openai_compat import OpenAICompatPolicy, PolicyHTTPError
from prmkit.provenance import REDACTED, redact_text, secrets_of
from prmkit.trace import Problem, Step, Trace, write_traces

URL_KEY = "sk-urlkey-5EC12E7"
API_KEY = "sk-apikey-0f-a-fake"
ECHOES = (URL_KEY, API_KEY, base64.b64encode(f"me:{URL_KEY}".encode()).decode())


class Server:
    """An OpenAI-compatible chat endpoint on 127.0.0.1. ``mode="ok"`` answers every request with a
    short solution; ``"401"`` refuses it with a message that repeats the Authorization header it got
    and the key, as some hosted APIs do."""

    def __init__(self, mode: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                if mode == "401":
                    auth = self.headers.get("authorization", "")
                    key = base64.b64decode(auth.split()[-1]).decode() if auth.startswith("Basic") else auth
                    status, payload = 401, {"error": {"message": f"Incorrect API key provided: {auth} "
                                                                 f"({key}); see https://me:{URL_KEY}@x/"}}
                else:
                    status, payload = 200, {
                        "choices": [{"index": 0, "message": {"role": "assistant",
                                                             "content": "2 + 3 = 5.\nThe answer is 5."},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 4}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://me:{URL_KEY}@127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def ok_server():
    s = Server("ok")
    yield s
    s.close()


@pytest.fixture()
def refusing_server():
    s = Server("401")
    yield s
    s.close()


def _leaks(folder, *texts) -> list[str]:
    blob = b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    blob += "".join(texts).encode()
    return [k for k in ECHOES if k.encode() in blob]


def _traces(path, n=4):
    write_traces([Trace(id=f"t{i}", problem=Problem("2 + 3?", answer="5"),
                        steps=[Step("2 + 3 = 5."), Step("The answer is 5.")]) for i in range(n)], path)


def test_a_url_with_user_info_is_used_but_never_recorded(tmp_path, ok_server, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gen, lab = tmp_path / "gen.jsonl", tmp_path / "lab.jsonl"
    policy = ["--policy", "openai_compat", "-p", f"base_url={ok_server.url}", "-p", "model=m",
              "-p", f"api_key={API_KEY}"]
    code, out, err = run(["generate", "--env", "arith", "-n", 2, "--problems", 2, "-o", gen, *policy], capsys)
    assert code == 0, err
    code, out2, err2 = run(["label", gen, lab, "--method", "mc", "-k", 1, "--workers", 0, "--no-progress",
                            *policy], capsys)
    assert code == 0, err2
    assert (tmp_path / "lab.jsonl.labels.sqlite").exists()
    assert _leaks(tmp_path, out, err, out2, err2) == []
    assert f"http://{REDACTED}@127.0.0.1:{ok_server.port}/v1" in gen.read_text()  # recorded, redacted


def test_a_monitor_judge_refused_with_the_key_echoed_fails_and_keeps_no_copy(tmp_path, refusing_server,
                                                                              capsys):
    inp, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _traces(inp)
    code, out, err = run(["monitor", inp, out_path, "-m", "judge",
                          "--monitor-arg", f"judge.base_url={refusing_server.url}",
                          "--monitor-arg", "judge.model=m", "--monitor-arg", f"judge.api_key={API_KEY}",
                          "--monitor-arg", "judge.max_retries=0"], capsys)
    assert code != 0 and not out_path.exists()  # a judge that cannot answer flags nothing
    assert "could not judge 4 traces" in err and "HTTP 401" in err and "flagged" not in out
    assert _leaks(tmp_path, out, err) == []


def test_a_judge_labeler_refused_or_unreachable_prints_no_key(tmp_path, refusing_server, capsys):
    inp = tmp_path / "in.jsonl"
    _traces(inp, 2)
    for url in (refusing_server.url, f"http://me:{URL_KEY}@127.0.0.1:1/v1"):  # 401 / nothing listens
        out_path = tmp_path / "out.jsonl"
        code, out, err = run(["label", inp, out_path, "--method", "judge", "--workers", 0, "--no-progress",
                              "--judge-policy", "openai_compat", "-j", f"base_url={url}", "-j", "model=m",
                              "-j", f"api_key={API_KEY}", "-j", "max_retries=0"], capsys)
        assert code != 0 and err.startswith("error: ")
        assert _leaks(tmp_path, out, err) == [], err


def test_the_client_redacts_its_secrets_from_what_the_server_sends(refusing_server, ok_server):
    policy = OpenAICompatPolicy(refusing_server.url, "m", api_key=API_KEY, max_retries=0, progress=False)
    assert URL_KEY not in repr(policy) and policy.endpoint.startswith(f"http://{REDACTED}@127.0.0.1:")
    with pytest.raises(PolicyHTTPError) as e:
        policy.generate([GenerationRequest([{"role": "user", "content": "hi"}])], SamplingParams(n=1))
    assert "Incorrect API key provided: Basic" in str(e.value)
    assert [k for k in ECHOES if k in str(e.value) or k in e.value.server_message] == []
    # a completion that repeats the key (a model echoing its prompt, a proxy's banner)
    echo = OpenAICompatPolicy(ok_server.url, "m", api_key=API_KEY, progress=False)
    assert echo.redact(f"key {API_KEY} at http://me:{URL_KEY}@h") == f"key {REDACTED} at http://{REDACTED}@h"


def test_redact_text_covers_every_form_of_a_key():
    secrets = secrets_of({"base_url": f"https://me:{URL_KEY}@api.example/v1", "api_key": API_KEY,
                          "headers": {"X-Key": "hdr-secret-1"}, "model": "m"})
    text = (f"Bearer {API_KEY} / Basic {ECHOES[2]} / {URL_KEY} / hdr-secret-1 / "
            f"https://u:pw-99@other/x / model m")
    assert redact_text(text, secrets) == (f"Bearer {REDACTED} / Basic {REDACTED} / {REDACTED} / {REDACTED} / "
                                          f"https://{REDACTED}@other/x / model m")
