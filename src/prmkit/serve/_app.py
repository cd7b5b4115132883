"""The scoring server as an ASGI app (Starlette): the endpoints, limits, auth and error shapes.

Endpoints:

- ``POST /get_reward``: the OpenRLHF remote reward-model protocol. In: ``{"query": [str], "prompts":
  [str] | null, "labels": [...] | null}`` (how a query becomes a trace: :mod:`prmkit.serve._queries`).
  Out: ``{"rewards": [float], "scores": [float], "step_scores": [[float | null]], "unscored":
  [str | null], "extra_logs": {...}}``. ``rewards`` (and ``scores``, which OpenRLHF reads first when
  present) hold one number per query, always a number, since OpenRLHF makes a tensor of it: a query
  that could not be scored gets ``unscored_reward`` and its reason in ``unscored``: ``no steps``,
  ``too long for the model: ...`` (its prompt alone leaves no room for a step within the model's
  ``max_length``; steps past ``max_length`` are scored in windows or left ``null`` as the model's
  ``long`` says, and the reward aggregates those scored) or ``rejected by the scorer: ...``.
  ``extra_logs`` holds scalars OpenRLHF logs beside the reward (``prm_unscored``, ``prm_too_long``, ...).
- ``POST /v1/score``: prmkit's own. In: ``{"traces": [{"id": str?, "problem": str | {"text": ...},
  "steps": [str | {"text": ...}]}], "aggregate": str?}`` (a prmkit trace record is accepted as it is).
  Out: ``{"model", "kind", "aggregate", "results": [{"id", "step_scores", "score", "unscored"}]}``:
  a PRM's per-step scores (``null`` for a step it could not score) and their aggregate; an ORM's one
  score as ``score`` (``step_scores`` null). A trace not scored at all has ``score`` and
  ``step_scores`` null and its reason (as above) in ``unscored``: this endpoint reports, the client
  decides (:class:`~prmkit.serve.RemoteScorer` raises it, or hands it to ``PRMReward``).
- ``GET /health``: ``{"status": "ok" | "draining", "model", "kind", "max_traces", ...}`` (no auth);
- ``GET /metrics``: Prometheus text (:class:`~prmkit.serve._metrics.Metrics`).

Every error is JSON ``{"error": message}``, never a traceback: 401 (missing or wrong bearer token),
404 / 405 (no such endpoint or method), 413 (body over ``max_body_bytes``, more than ``max_traces``
traces, or on ``/v1/score`` a trace of more than ``max_steps`` steps or ``max_trace_chars`` characters;
the limit and its option are in the message), 422 (malformed or too deeply nested JSON, text that is
not valid Unicode, or a field of the wrong type or value: the message names the field, as
``traces.3.steps.0``), 503 + ``Retry-After`` (queue full, or shutting down), 504 (not scored within
``request_timeout``), 500 (a bug, logged by the server).

No request can hold the server: the body is parsed and turned into traces in a worker thread, in
time linear in its size (:func:`~prmkit.serve.strip_end_markers`), so ``/health`` answers while a
4 MiB body is read; the per-trace caps bound what one trace costs the scorer, and a request that
timed out has the rest of its traces dropped (:class:`~prmkit.serve.DynamicBatcher`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.scoring import StepScorer, get_aggregator
from prmkit.serve._batcher import (
    OVER_LIMIT,
    DynamicBatcher,
    QueueFull,
    Result,
    ShuttingDown,
    over_limit,
    unscored_kind,
)
from prmkit.serve._metrics import Metrics
from prmkit.serve._queries import PROBLEM_FROM, query_trace, reasoning_splitter
from prmkit.trace import Problem, Step, Trace

__all__ = ["ServeConfig", "create_app"]

log = logging.getLogger("prmkit.serve")


@dataclass
class ServeConfig:
    """The server's settings (``prmkit serve`` options: each field's option is its name with dashes,
    ``max_body_bytes`` given in MiB as ``--max-body-mb``).

    - ``aggregate``: step scores -> reward (``min``, ``last``, ``prod``, ``mean``, ...);
    - ``splitter``: how ``/get_reward`` cuts a completion into steps (``newline``);
    - ``token``: the bearer token every request but ``/health`` must carry (None: no auth);
    - ``max_body_bytes`` / ``max_traces``: per-request limits (413 past them);
    - ``max_steps`` / ``max_trace_chars``: per-trace limits, steps and characters of problem and
      steps (``/v1/score``: 413; ``/get_reward``: that query unscored, its reason naming the limit,
      since OpenRLHF retries a failed reward request five times and then raises);
    - ``max_queued_traces``: traces waiting, past which requests get 503 + Retry-After;
    - ``max_batch_traces`` / ``max_wait_ms``: dynamic batching (:class:`DynamicBatcher`);
      ``max_batch_steps``: most steps per scorer call (a bigger batch is scored in several, a
      request that timed out dropped between them);
    - ``request_timeout``: seconds a request may wait for its scores (504 past it; its traces not yet
      scored are dropped);
    - ``shutdown_timeout``: seconds a shutdown waits for the requests in flight (503 past it);
    - ``unscored_reward``: ``/get_reward``'s reward for a query it could not score;
    - ``problem_from``: how ``/get_reward`` reads the problem from a prompt (``last-user``: the last user
      turn of a chat-templated prompt; ``whole``: the prompt as sent; :func:`~prmkit.serve.problem_from`);
    - ``end_markers``: the policy's end tokens to blank in completions, beside the defaults
      (:class:`~prmkit.serve.ReasoningSplitter`).

    A value that would refuse every request (``max_traces=0``, a body limit of 0 bytes, ...) is an
    error here, all of them in one message:

    >>> ServeConfig(max_traces=0, request_timeout=0)
    Traceback (most recent call last):
    prmkit.errors.PrmkitError: --max-traces must be >= 1, got 0; --request-timeout must be > 0 seconds, got 0
    """

    aggregate: str = "min"
    splitter: str = "newline"
    token: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    max_traces: int = 1024
    #: A trace of 1,000 short steps held the scorer 34 s, 2,000 steps 193 s and 20,000 ~15 min
    #: (issue 45): past ``max_length`` the steps are scored in windows, each a pass of its own.
    max_steps: int = 1024
    #: About 16k tokens of a BPE tokenizer (~4 characters a token); the scorer's tokenizer is not
    #: used here, since it is not safe to share with the scoring thread.
    max_trace_chars: int = 65_536
    max_queued_traces: int = 4096
    max_batch_traces: int = 256
    max_batch_steps: int = 4096
    max_wait_ms: float = 5.0
    request_timeout: float = 120.0
    shutdown_timeout: float = 10.0
    unscored_reward: float = 0.0
    problem_from: str = "last-user"
    end_markers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        errors = []
        if self.problem_from not in PROBLEM_FROM:
            errors.append(f"--problem-from must be one of {', '.join(PROBLEM_FROM)}, got {self.problem_from!r}")
        self.end_markers = tuple(self.end_markers)
        for name in ("max_traces", "max_steps", "max_trace_chars", "max_queued_traces", "max_batch_traces",
                     "max_batch_steps"):
            value = getattr(self, name)
            if not value >= 1:
                errors.append(f"{_option(name)} must be >= 1, got {value}")
        if not (math.isfinite(self.max_body_bytes) and self.max_body_bytes >= 1):
            errors.append(f"--max-body-mb must be > 0, got {self.max_body_bytes / 2**20:g}")
        else:
            self.max_body_bytes = int(self.max_body_bytes)
        if not self.request_timeout > 0 or self.request_timeout == math.inf:
            errors.append(f"--request-timeout must be > 0 seconds, got {self.request_timeout:g}")
        for name in ("max_wait_ms", "shutdown_timeout"):
            value = getattr(self, name)
            if not 0 <= value < math.inf:
                errors.append(f"{_option(name)} must be >= 0, got {value:g}")
        if not math.isfinite(self.unscored_reward):
            errors.append(f"--unscored-reward must be a finite number, got {self.unscored_reward:g} "
                          "(JSON has no NaN or infinity; OpenRLHF makes a tensor of the rewards)")
        if errors:
            raise PrmkitError("; ".join(errors))


def _option(name: str) -> str:
    """The ``prmkit serve`` option of a :class:`ServeConfig` field."""
    return "--max-body-mb" if name == "max_body_bytes" else "--" + name.replace("_", "-")


class HTTPFailure(Exception):
    """An error answer: status, message, extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _models() -> Any:
    """The request schemas (pydantic), built on first use so importing prmkit.serve needs no pydantic."""
    from pydantic import BaseModel, ConfigDict, Field

    class GetReward(BaseModel):
        model_config = ConfigDict(extra="allow")
        query: list[str]  # empty: OpenRLHF with several reward URLs sends one of them no query
        prompts: list[str | None] | None = None
        labels: list[Any] | None = None

    class ProblemIn(BaseModel):
        model_config = ConfigDict(extra="allow")
        text: str

    class StepIn(BaseModel):
        model_config = ConfigDict(extra="allow")
        text: str

    class TraceIn(BaseModel):
        model_config = ConfigDict(extra="allow")
        id: str | None = None
        problem: str | ProblemIn
        steps: list[str | StepIn]

    class Score(BaseModel):
        model_config = ConfigDict(extra="forbid")
        traces: list[TraceIn] = Field(min_length=1)
        aggregate: str | None = None

    return GetReward, Score


def create_app(scorer: StepScorer, config: ServeConfig | None = None) -> Any:
    """The ASGI app serving ``scorer`` (module docs). ``app.state.batcher`` is the
    :class:`DynamicBatcher`, ``app.state.metrics`` the counters; setting ``app.state.draining`` makes
    every new request but ``/health`` a 503 (what graceful shutdown does)."""
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, Response
        from starlette.routing import Route
    except ImportError:
        raise MissingDependencyError("starlette", "serve", "prmkit serve") from None
    cfg = config or ServeConfig()
    agg_default = get_aggregator(cfg.aggregate)
    GetReward, ScoreIn = _models()
    metrics = Metrics()
    batcher = DynamicBatcher(scorer, max_wait_ms=cfg.max_wait_ms, max_batch_traces=cfg.max_batch_traces,
                             max_batch_steps=cfg.max_batch_steps, max_queued_traces=cfg.max_queued_traces,
                             metrics=metrics)

    @asynccontextmanager
    async def lifespan(app: Any):
        batcher.start()
        yield
        app.state.draining = True
        await batcher.stop(cfg.shutdown_timeout)

    def error(e: HTTPFailure) -> Response:
        return _json({"error": e.message}, e.status, e.headers)

    def endpoint(name: str, handler: Callable, *, auth: bool = True) -> Callable:
        async def run(request: Request) -> Response:
            start = time.perf_counter()
            try:
                if request.app.state.draining and name != "/health":
                    raise HTTPFailure(503, "server shutting down", {"Retry-After": "5"})
                if auth and cfg.token is not None:
                    _check_token(request, cfg.token)
                response = await handler(request)
            except HTTPFailure as e:
                response = error(e)
            except QueueFull as e:
                response = error(HTTPFailure(503, str(e), {"Retry-After": str(e.retry_after)}))
            except ShuttingDown as e:
                response = error(HTTPFailure(503, str(e), {"Retry-After": "5"}))
            except Exception:  # a bug: logged here with its traceback, never sent to the client
                log.exception("%s failed", name)
                response = error(HTTPFailure(500, "internal error (see the server log)"))
            metrics.request(name, response.status_code, time.perf_counter() - start)
            return response
        return run

    async def scored(traces: list[Trace]) -> list[Result]:
        try:
            return await asyncio.wait_for(batcher.score(traces), cfg.request_timeout)
        except asyncio.TimeoutError:
            raise HTTPFailure(504, f"not scored within {cfg.request_timeout:g}s") from None

    def reward_of(result: Result, agg: Callable) -> float | None:
        scores, _ = result
        if scores is None:
            return None
        return agg(scores) if scorer.kind == "prm" else scores[0]

    async def get_reward(request: Request) -> Response:
        body = await _read_body(request, cfg.max_body_bytes)
        # Parsing and splitting are CPU work in proportion to the body: off the event loop.
        req, made = await asyncio.to_thread(_reward_traces, body, GetReward, cfg)
        if not made:  # OpenRLHF splits its batch over several reward URLs; one may get none
            return _json({"rewards": [], "scores": [], "step_scores": [], "unscored": [], "extra_logs": {}})
        found = iter(await scored([t for t, _, why in made if why is None]))
        results: list[Result] = [(None, why) if why is not None else next(found) for _, _, why in made]
        metrics.unscored["over_limit"] += sum(why is not None for _, _, why in made)
        rewards, unscored = [], []
        for r in results:
            value = reward_of(r, agg_default)
            reason = r[1] if value is None and r[1] else ("no step scored" if value is None else None)
            rewards.append(cfg.unscored_reward if value is None else float(value))
            unscored.append(reason)
        n_bad = sum(u is not None for u in unscored)
        if n_bad:
            log.warning("get_reward: %d of %d queries unscored (reward %g): %s", n_bad, len(unscored),
                        cfg.unscored_reward, sorted({u for u in unscored if u}))
        return _json({
            "rewards": rewards, "scores": rewards,
            "step_scores": [r[0] if scorer.kind == "prm" else None for r in results],
            "unscored": unscored,
            "extra_logs": {"prm_unscored": float(n_bad),
                           "prm_too_long": float(sum(unscored_kind(u) == "too_long" for u in unscored if u)),
                           "prm_prompt_not_found": float(sum(not f for _, f, _ in made if req.prompts)),
                           "prm_steps": float(sum(len(t.steps) for t, _, _ in made))},
        })

    async def score(request: Request) -> Response:
        body = await _read_body(request, cfg.max_body_bytes)
        req, traces = await asyncio.to_thread(_score_traces, body, ScoreIn, cfg)
        agg = agg_default
        if req.aggregate is not None:
            try:
                agg = get_aggregator(req.aggregate)
            except PrmkitError as e:
                raise HTTPFailure(422, f"aggregate: {e}") from None
        results = await scored(traces)
        out = []
        for t, r in zip(traces, results, strict=True):
            out.append({"id": t.id, "step_scores": r[0] if scorer.kind == "prm" else None,
                        "score": reward_of(r, agg), "unscored": r[1]})
        return _json({"model": scorer.name, "kind": scorer.kind,
                      "aggregate": req.aggregate or cfg.aggregate, "results": out})

    async def health(request: Request) -> Response:
        return _json({"status": "draining" if request.app.state.draining else "ok",
                      "model": scorer.name, "kind": scorer.kind, "aggregate": cfg.aggregate,
                      "max_traces": cfg.max_traces, "max_body_bytes": cfg.max_body_bytes,
                      "max_steps": cfg.max_steps, "max_trace_chars": cfg.max_trace_chars,
                      "queued_traces": batcher.queued_traces})

    async def metrics_text(request: Request) -> Response:
        return PlainTextResponse(metrics.render(scorer, batcher.queued_traces),
                                 media_type="text/plain; version=0.0.4")

    async def http_error(request: Request, exc: Exception) -> Response:
        # Starlette's own 404 / 405 (no such path or method), as JSON like every other error.
        status = getattr(exc, "status_code", 500)
        message = {404: f"no endpoint {request.url.path} ({ENDPOINTS})",
                   405: f"{request.method} not allowed on {request.url.path} ({ENDPOINTS})"}.get(
            status, str(getattr(exc, "detail", "")) or "error")
        return error(HTTPFailure(status, message, dict(getattr(exc, "headers", None) or {})))

    async def server_error(request: Request, exc: Exception) -> Response:
        return error(HTTPFailure(500, "internal error (see the server log)"))

    routes = [
        Route("/get_reward", endpoint("/get_reward", get_reward), methods=["POST"]),
        Route("/v1/score", endpoint("/v1/score", score), methods=["POST"]),
        Route("/health", endpoint("/health", health, auth=False), methods=["GET"]),
        Route("/metrics", endpoint("/metrics", metrics_text), methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: http_error, Exception: server_error})
    app.state.draining = False
    app.state.batcher = batcher
    app.state.metrics = metrics
    app.state.scorer = scorer
    return app


#: What a 404 / 405 lists.
ENDPOINTS = "endpoints: POST /get_reward, POST /v1/score, GET /health, GET /metrics"


def _json(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    """A JSON response whose rendering cannot fail on text: non-ASCII is escaped (``ensure_ascii``), so
    a lone surrogate that got past :func:`_parse` is ``\\ud800`` in the output, not a 500."""
    from starlette.responses import Response

    body = json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
    return Response(body, status_code=status, headers=headers, media_type="application/json")


#: A JSON escape of a UTF-16 surrogate (``\ud800``-``\udfff``): the body is decoded as strict UTF-8
#: (``json.loads`` of bytes would let encoded surrogates through), so only a body with such an escape
#: can hold a lone surrogate, and only such a body is searched for one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _parse(body: bytes, schema: Any) -> Any:
    """The request ``schema`` read from ``body``; 422 naming what is wrong. Linear in the body."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HTTPFailure(422, f"body: not valid UTF-8 ({e})") from None
    try:
        data = json.loads(text)
    except RecursionError:  # json's parser recurses once per level: ~1,000 levels is its limit
        raise HTTPFailure(422, "body: JSON nested too deeply") from None
    except ValueError as e:
        raise HTTPFailure(422, f"body: not valid JSON ({e})") from None
    if _SURROGATE_ESCAPE.search(text) and (where := _lone_surrogate(data)) is not None:
        raise HTTPFailure(422, f"{where}: not valid Unicode text (a lone surrogate such as \\ud800; "
                               "encode text as UTF-8)")
    from pydantic import ValidationError

    try:
        return schema.model_validate(data)
    except ValidationError as e:
        raise HTTPFailure(422, _validation_message(e)) from None


def _lone_surrogate(data: Any) -> str | None:
    """The path (``traces.0.id``) of the first string or key of ``data`` holding a lone surrogate.
    Iterative, and each path kept as a link to its parent's, so depth costs neither stack nor copies.

    >>> _lone_surrogate({"traces": [{"id": "ok"}, {"id": "\\ud800"}]}), _lone_surrogate({"a": ["b"]})
    ('traces.1.id', None)
    """
    stack: list[tuple[Any, Any]] = [(None, data)]  # (path as (parent path, key) links, value)
    while stack:
        path, x = stack.pop()
        if isinstance(x, str):
            if _SURROGATE.search(x):
                return _path(path)
        elif isinstance(x, dict):
            for k, v in reversed(x.items()):
                if _SURROGATE.search(k):
                    return _path((path, k))
                stack.append(((path, k), v))
        elif isinstance(x, list):
            stack.extend(((path, str(i)), x[i]) for i in range(len(x) - 1, -1, -1))
    return None


def _path(link: Any) -> str:
    parts = []
    while link is not None:
        link, key = link
        parts.append(key.encode("utf-8", "backslashreplace").decode("utf-8"))
    return ".".join(reversed(parts)) or "body"


def _check_count(n: int, field: str, cfg: ServeConfig) -> None:
    if n > cfg.max_traces:
        raise HTTPFailure(413, f"{field}: {n} traces in one request; the limit is {cfg.max_traces} (--max-traces)")


def _reward_traces(body: bytes, schema: Any, cfg: ServeConfig) -> tuple[Any, list[tuple[Trace, bool, str | None]]]:
    """``/get_reward``'s request and per query: its trace, whether its prompt was found, and why it is
    over the server's limits (None: it is not). Run in a worker thread."""
    req = _parse(body, schema)
    _check_count(len(req.query), "query", cfg)
    for name in ("prompts", "labels"):
        given = getattr(req, name)
        if given is not None and len(given) != len(req.query):
            raise HTTPFailure(422, f"{name}: {len(given)} items for {len(req.query)} queries")
    prompts = req.prompts or [None] * len(req.query)
    made = []
    splitter = reasoning_splitter(cfg.splitter, end_markers=cfg.end_markers)
    for i, (p, q) in enumerate(zip(prompts, req.query, strict=True)):
        trace, found = query_trace(p, q, f"q{i}", splitter, problem_rule=cfg.problem_from)
        why = over_limit(trace, cfg.max_steps, cfg.max_trace_chars)
        made.append((trace, found, None if why is None else OVER_LIMIT + why))
    return req, made


def _score_traces(body: bytes, schema: Any, cfg: ServeConfig) -> tuple[Any, list[Trace]]:
    """``/v1/score``'s request and its traces; 413 for one over the server's limits. Run in a worker
    thread."""
    req = _parse(body, schema)
    _check_count(len(req.traces), "traces", cfg)
    traces = []
    for i, t in enumerate(req.traces):
        if len(t.steps) > cfg.max_steps:  # before making a Step of each
            raise HTTPFailure(413, f"traces.{i}: {len(t.steps)} steps; the limit is {cfg.max_steps} steps "
                                   "per trace (--max-steps)")
        trace = Trace(id=t.id if t.id is not None else f"t{i}",
                      problem=Problem(t.problem if isinstance(t.problem, str) else t.problem.text),
                      steps=[Step(s if isinstance(s, str) else s.text) for s in t.steps])
        if (why := over_limit(trace, cfg.max_steps, cfg.max_trace_chars)) is not None:
            raise HTTPFailure(413, f"traces.{i}: {why}")
        traces.append(trace)
    return req, traces


def _check_token(request: Any, token: str) -> None:
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise HTTPFailure(401, "missing bearer token (send Authorization: Bearer TOKEN)",
                          {"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPFailure(401, "wrong bearer token", {"WWW-Authenticate": "Bearer"})


async def _read_body(request: Any, limit: int) -> bytes:
    """The body, refused (413) as soon as it is known to pass ``limit`` bytes: from Content-Length
    before reading anything, else while streaming it."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPFailure(413, f"body of {int(declared)} bytes; the limit is {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPFailure(413, f"body over {limit} bytes; the limit is {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _validation_message(e: Any) -> str:
    """The first few pydantic errors as ``field.path: message``."""
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = len(e.errors()) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
