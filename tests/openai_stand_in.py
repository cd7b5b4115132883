"""A stand-in OpenAI-compatible server for the README's ``--policy openai_compat`` lines (tests/test_readme.py).

    python tests/openai_stand_in.py 127.0.0.1 8000

It speaks the part of the protocol prmkit's ``openai_compat`` policy uses, as vLLM and llama.cpp's
server do: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (``n`` choices, ``usage``,
``finish_reason``), ``GET /v1/models`` and ``GET /health``. Every answer is the same short solution
("2 + 3 = 5." then "The answer is 5."), so the lines test the command line, the HTTP client and
what is written, not a model. Standard library only; stops on SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SOLUTION = "2 + 3 = 5.\nThe answer is 5."


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "stand-in", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        except ValueError:
            self._send(400, {"error": {"message": "the body is not JSON"}})
            return
        n = int(body.get("n") or 1)
        if self.path == "/v1/chat/completions":
            choices = [{"index": k, "message": {"role": "assistant", "content": SOLUTION},
                        "finish_reason": "stop"} for k in range(n)]
        elif self.path == "/v1/completions":
            choices = [{"index": k, "text": SOLUTION, "finish_reason": "stop"} for k in range(n)]
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        self._send(200, {"id": "stand-in", "object": "chat.completion", "model": body.get("model", "stand-in"),
                         "choices": choices,
                         "usage": {"prompt_tokens": 32, "completion_tokens": 12 * n, "total_tokens": 32 + 12 * n}})


def main(host: str, port: int) -> None:
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
