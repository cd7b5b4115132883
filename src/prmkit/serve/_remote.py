"""``RemoteScorer``: a PRM served by ``prmkit serve`` on another machine, used like a local one.

``--model http://host:port`` wherever a model is accepted (``prmkit score``, ``search``, ``eval``,
:class:`~prmkit.rl.PRMReward`) makes one. It sends traces to ``POST /v1/score`` in chunks of at most
the server's ``max_traces`` and returns the server's per-step scores (a PRM) or one score per trace
(an ORM), exactly as the model there computes them.

Failures follow the ``openai_compat`` policy's rules: connection refused fails at once (nothing
listens there); timeouts, broken connections, 429 and 5xx (503 when the server's queue is full) are
retried ``max_retries`` times with exponential backoff and jitter, a ``Retry-After`` header winning;
other 4xx are not retried (the same request would fail the same way) and raise with the server's
message. The bearer token is ``token=`` or ``$PRMKIT_SERVE_TOKEN``; it is never written to provenance.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Sequence
from typing import Any

from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.provenance import redact_text, redact_url, secrets_of
from prmkit.serve._batcher import OVER_LIMIT, over_limit
from prmkit.trace import Trace

__all__ = ["RemoteScorer", "RemoteScorerError", "RetryingClient", "remote_url"]

_MAX_RETRY_AFTER = 60.0


class RemoteScorerError(PrmkitError):
    """The scoring server could not be reached or refused the request (the message says which)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def remote_url(path: Any) -> str | None:
    """The URL in a ``--model`` value, or None when it is not one. ``pathlib`` folds ``http://h`` to
    ``http:/h`` (the CLI parses ``--model`` as a path), so one slash is enough.

    >>> remote_url("http://127.0.0.1:8000"), remote_url(__import__("pathlib").Path("https://h:1/")), remote_url("runs/prm")
    ('http://127.0.0.1:8000', 'https://h:1', None)
    """
    if path is None:
        return None
    m = re.match(r"^(https?):/+(.+)$", str(path))
    return f"{m.group(1)}://{m.group(2).rstrip('/')}" if m else None


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise MissingDependencyError("httpx", "serve", "a remote scorer") from None
    return httpx


class RemoteScorer:
    """A :class:`~prmkit.scoring.StepScorer` whose model runs behind ``prmkit serve`` at ``url``.

    ``timeout``: seconds per attempt; ``max_retries``: extra attempts after a timeout, broken
    connection, 429 or 5xx; ``backoff``: first retry delay in seconds (doubling, with jitter);
    ``token``: the server's bearer token (default ``$PRMKIT_SERVE_TOKEN``); ``chunk``: most traces
    per request (default: the server's ``max_traces``). ``kind`` and ``name`` come from the server's
    ``/health`` (read on construction, so a wrong URL fails at once).

    >>> scorer = RemoteScorer("http://127.0.0.1:8000")  # doctest: +SKIP
    >>> scorer.score(traces)  # doctest: +SKIP
    """

    def __init__(self, url: str, *, timeout: float = 60.0, max_retries: int = 4, backoff: float = 0.5,
                 token: str | None = None, chunk: int | None = None, seed: int = 0) -> None:
        self.url = remote_url(url) or str(url).rstrip("/")
        #: What rebuilds this scorer in another process (:meth:`recipe`, pickling): the URL and the
        #: options given. A token given here travels with it; one read from $PRMKIT_SERVE_TOKEN is read
        #: there again.
        self.options: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries, "backoff": backoff,
                                        "chunk": chunk, "seed": seed}
        if token is not None:
            self.options["token"] = token
        token = token if token is not None else os.environ.get("PRMKIT_SERVE_TOKEN") or None
        self._http = RetryingClient(self.url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                                    token=token, seed=seed,
                                    not_found="is `prmkit serve` running there? check the URL",
                                    unauthorized="check the token (--token / $PRMKIT_SERVE_TOKEN)")
        info = self._http.request("GET", "/health")
        self.kind = str(info.get("kind", "prm"))
        self.name = str(info.get("model", "remote"))
        self.chunk = int(chunk or info.get("max_traces") or 256)
        # The server's per-trace limits (absent from an older server's /health): a trace over them is
        # reported unscored here, not sent, so it cannot fail the others of its request with a 413.
        self.max_steps = info.get("max_steps")
        self.max_trace_chars = info.get("max_trace_chars")

    def recipe(self) -> tuple[str, dict[str, Any]]:
        """``(registered scorer name, arguments)`` that make this scorer again:
        ``get_scorer(*recipe[:1], **recipe[1])`` (:class:`~prmkit.rl.PRMReward` pickles it so)."""
        return "remote", {"url": self.url, **self.options}

    def __reduce__(self) -> Any:
        # The HTTP client (its locks, its sockets) cannot be pickled: the URL and options travel, and
        # the copy connects (and reads /health) when it is unpickled.
        return _remote_from_recipe, (self.url, self.options)

    def describe(self) -> dict[str, Any]:
        """Provenance: the server and the model it serves (never the token)."""
        return {"scorer": "remote", "url": self._http.shown_url, "model": self.name, "kind": self.kind}

    def close(self) -> None:
        self._http.close()

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        """Per trace its step scores (PRM) or a one-element list (ORM), as the served model scores them.
        A trace the server could not score raises :class:`RemoteScorerError` with its reason (as a
        local model raises for a trace it cannot encode); :meth:`score_each` returns it instead."""
        out: list[list[float | None]] = []
        for t, (scores, why) in zip(traces, self.score_each(traces), strict=True):
            if scores is None:
                raise RemoteScorerError(f"trace {t.id!r}: {why}")
            out.append(scores)
        return out

    def score_each(self, traces: Sequence[Trace]) -> list[tuple[list[float | None] | None, str | None]]:
        """Per trace ``(scores, None)``, or ``(None, reason)`` for one the server could not score (``no
        steps``, ``too long for the model: ...``, ``rejected by the scorer: ...``; ``over the server's
        limit: ...`` for one over its ``--max-steps`` / ``--max-trace-chars``, not sent), in one request per
        ``chunk`` traces. :class:`~prmkit.rl.PRMReward` uses it, so one over-long completion costs
        its own reward, not a request per completion."""
        over = [over_limit(t, self.max_steps, self.max_trace_chars) for t in traces]
        sent = [t for t, why in zip(traces, over, strict=True) if why is None]
        found = iter(self._score_sent(sent))
        return [(None, OVER_LIMIT + why) if why is not None else next(found) for why in over]

    def _score_sent(self, traces: Sequence[Trace]) -> list[tuple[list[float | None] | None, str | None]]:
        out: list[tuple[list[float | None] | None, str | None]] = []
        for i in range(0, len(traces), self.chunk):
            part = traces[i:i + self.chunk]
            body = {"traces": [{"id": t.id, "problem": t.problem.text, "steps": [s.text for s in t.steps]}
                               for t in part]}
            data = self._http.request("POST", "/v1/score", body)
            results = data.get("results") if isinstance(data, dict) else None
            if not isinstance(results, list) or len(results) != len(part):
                raise RemoteScorerError(f"{self._http.shown_url}/v1/score: expected {len(part)} results, got "
                                        f"{len(results) if isinstance(results, list) else results!r}")
            for r in results:
                if r.get("unscored"):
                    out.append((None, str(r["unscored"])))
                else:
                    out.append((list(r["step_scores"]) if self.kind == "prm" else [r["score"]], None))
        return out


def _remote_from_recipe(url: str, options: dict[str, Any]) -> RemoteScorer:
    return RemoteScorer(url, **options)


class RetryingClient:
    """JSON over HTTP with the ``openai_compat`` policy's failure rules (module docs), shared by the
    remote and vLLM scorers. ``not_found`` / ``unauthorized``: hints added to a refused connection and
    to a 401 / 403."""

    def __init__(self, base_url: str, *, timeout: float = 60.0, max_retries: int = 4, backoff: float = 0.5,
                 token: str | None = None, seed: int = 0, not_found: str = "check the URL",
                 unauthorized: str = "check the token") -> None:
        if timeout <= 0:
            raise PrmkitError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise PrmkitError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        #: What messages show: the URL without its user info, and every secret (the token, the URL's
        #: user info) removed from what the server sends back.
        self.shown_url = redact_url(self.base_url)
        self._secrets = secrets_of({"base_url": self.base_url, "token": token})
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.not_found = not_found
        self.unauthorized = unauthorized
        self._jitter = random.Random(seed)
        httpx = _httpx()
        self._client = httpx.Client(headers={"Authorization": f"Bearer {token}"} if token else {},
                                    timeout=httpx.Timeout(self.timeout))

    def close(self) -> None:
        self._client.close()

    def _redact(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One request with bounded retries; the decoded JSON body."""
        httpx = _httpx()
        url, shown = self.base_url + path, self.shown_url + path
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                resp = self._client.request(method, url, json=body)
            except httpx.ConnectError as e:
                raise RemoteScorerError(f"cannot connect to {shown}: {self._redact(str(e))} — "
                                        f"{self.not_found}") from None
            except (httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ReadError,
                    httpx.WriteError) as e:
                if last:
                    raise RemoteScorerError(f"no answer from {shown} after {attempts} attempt(s) "
                                            f"({type(e).__name__}, timeout {self.timeout:g}s): raise "
                                            "timeout= or send fewer traces per call") from None
                self._sleep(attempt)
                continue
            status = resp.status_code
            if status < 300:
                try:
                    return resp.json()
                except ValueError:
                    raise RemoteScorerError(f"{shown}: HTTP {status} but the body is not JSON") from None
            if (status == 429 or status >= 500) and not last:
                self._sleep(attempt, _retry_after(resp.headers.get("retry-after")))
                continue
            try:
                data = resp.json()
                message = (data.get("error") or data.get("message") or resp.text) if isinstance(data, dict) \
                    else resp.text
            except ValueError:
                message = resp.text
            if isinstance(message, dict):
                message = message.get("message") or str(message)
            hint = f" — {self.unauthorized}" if status in (401, 403) else ""
            tries = f" after {attempt + 1} attempts" if attempt else ""
            raise RemoteScorerError(f"HTTP {status} from {shown}{tries}: "
                                    f"{self._redact(str(message))[:300]}{hint}", status=status)
        raise AssertionError("unreachable")  # pragma: no cover

    def _sleep(self, attempt: int, retry_after: float | None = None) -> None:
        """Exponential backoff with jitter; a server's Retry-After wins when it is given."""
        if retry_after is not None:
            time.sleep(min(retry_after, _MAX_RETRY_AFTER))
            return
        delay = self.backoff * (2 ** attempt)
        time.sleep(delay * (0.5 + 0.5 * self._jitter.random()))


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
