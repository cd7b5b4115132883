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
413 (body over ``max_body_bytes`` or more than ``max_traces`` traces; the limit is in the message), 422
(malformed JSON, or a field of the wrong type or value: the message names the field, as
``traces.3.steps.0``), 503 + ``Retry-After`` (queue full, or shutting down), 504 (not scored within
``request_timeout``), 500 (a bug, logged by the server).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.scoring import StepScorer, get_aggregator
from prmkit.serve._batcher import DynamicBatcher, QueueFull, Result, unscored_kind
from prmkit.serve._metrics import Metrics
from prmkit.serve._queries import query_trace
from prmkit.trace import Problem, Step, Trace

__all__ = ["ServeConfig", "create_app"]

log = logging.getLogger("prmkit.serve")


@dataclass
class ServeConfig:
    """The server's settings (``prmkit serve`` options).

    - ``aggregate``: step scores -> reward (``min``, ``last``, ``prod``, ``mean``, ...);
    - ``splitter``: how ``/get_reward`` cuts a completion into steps (``newline``);
    - ``token``: the bearer token every request but ``/health`` must carry (None: no auth);
    - ``max_body_bytes`` / ``max_traces``: per-request limits (413 past them);
    - ``max_queued_traces``: traces waiting, past which requests get 503 + Retry-After;
    - ``max_batch_traces`` / ``max_wait_ms``: dynamic batching (:class:`DynamicBatcher`);
    - ``request_timeout``: seconds a request may wait for its scores (504 past it);
    - ``unscored_reward``: ``/get_reward``'s reward for a query it could not score.
    """

    aggregate: str = "min"
    splitter: str = "newline"
    token: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    max_traces: int = 1024
    max_queued_traces: int = 4096
    max_batch_traces: int = 256
    max_wait_ms: float = 5.0
    request_timeout: float = 120.0
    unscored_reward: float = 0.0


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
        query: list[str] = Field(min_length=1)
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
        from starlette.requests import Request
        from starlette.responses import JSONResponse, PlainTextResponse, Response
        from starlette.routing import Route
    except ImportError:
        raise MissingDependencyError("starlette", "serve", "prmkit serve") from None
    cfg = config or ServeConfig()
    agg_default = get_aggregator(cfg.aggregate)
    GetReward, ScoreIn = _models()
    metrics = Metrics()
    batcher = DynamicBatcher(scorer, max_wait_ms=cfg.max_wait_ms, max_batch_traces=cfg.max_batch_traces,
                             max_queued_traces=cfg.max_queued_traces, metrics=metrics)

    @asynccontextmanager
    async def lifespan(app: Any):
        batcher.start()
        yield
        app.state.draining = True
        await batcher.stop()

    def error(e: HTTPFailure) -> Response:
        return JSONResponse({"error": e.message}, status_code=e.status, headers=e.headers)

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
            except Exception:  # a bug: logged here with its traceback, never sent to the client
                log.exception("%s failed", name)
                response = error(HTTPFailure(500, "internal error (see the server log)"))
            metrics.request(name, response.status_code, time.perf_counter() - start)
            return response
        return run

    async def read_json(request: Request, schema: Any) -> Any:
        body = await _read_body(request, cfg.max_body_bytes)
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise HTTPFailure(422, f"body: not valid JSON ({e})") from None
        from pydantic import ValidationError

        try:
            return schema.model_validate(data)
        except ValidationError as e:
            raise HTTPFailure(422, _validation_message(e)) from None

    def check_count(n: int, field: str) -> None:
        if n > cfg.max_traces:
            raise HTTPFailure(413, f"{field}: {n} traces in one request; the limit is {cfg.max_traces}")

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
        req = await read_json(request, GetReward)
        check_count(len(req.query), "query")
        for name in ("prompts", "labels"):
            given = getattr(req, name)
            if given is not None and len(given) != len(req.query):
                raise HTTPFailure(422, f"{name}: {len(given)} items for {len(req.query)} queries")
        prompts = req.prompts or [None] * len(req.query)
        made = [query_trace(p, q, f"q{i}", cfg.splitter) for i, (p, q) in enumerate(zip(prompts, req.query,
                                                                                      strict=True))]
        results = await scored([t for t, _ in made])
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
        return JSONResponse({
            "rewards": rewards, "scores": rewards,
            "step_scores": [r[0] if scorer.kind == "prm" else None for r in results],
            "unscored": unscored,
            "extra_logs": {"prm_unscored": float(n_bad),
                           "prm_too_long": float(sum(unscored_kind(u) == "too_long" for u in unscored if u)),
                           "prm_prompt_not_found": float(sum(not f for _, f in made if req.prompts)),
                           "prm_steps": float(sum(len(t.steps) for t, _ in made))},
        })

    async def score(request: Request) -> Response:
        req = await read_json(request, ScoreIn)
        check_count(len(req.traces), "traces")
        agg = agg_default
        if req.aggregate is not None:
            try:
                agg = get_aggregator(req.aggregate)
            except PrmkitError as e:
                raise HTTPFailure(422, f"aggregate: {e}") from None
        traces = [Trace(id=t.id if t.id is not None else f"t{i}",
                        problem=Problem(t.problem if isinstance(t.problem, str) else t.problem.text),
                        steps=[Step(s if isinstance(s, str) else s.text) for s in t.steps])
                  for i, t in enumerate(req.traces)]
        results = await scored(traces)
        out = []
        for t, r in zip(traces, results, strict=True):
            out.append({"id": t.id, "step_scores": r[0] if scorer.kind == "prm" else None,
                        "score": reward_of(r, agg), "unscored": r[1]})
        return JSONResponse({"model": scorer.name, "kind": scorer.kind,
                             "aggregate": req.aggregate or cfg.aggregate, "results": out})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "draining" if request.app.state.draining else "ok",
                             "model": scorer.name, "kind": scorer.kind, "aggregate": cfg.aggregate,
                             "max_traces": cfg.max_traces, "max_body_bytes": cfg.max_body_bytes,
                             "queued_traces": batcher.queued_traces})

    async def metrics_text(request: Request) -> Response:
        return PlainTextResponse(metrics.render(scorer, batcher.queued_traces),
                                 media_type="text/plain; version=0.0.4")

    routes = [
        Route("/get_reward", endpoint("/get_reward", get_reward), methods=["POST"]),
        Route("/v1/score", endpoint("/v1/score", score), methods=["POST"]),
        Route("/health", endpoint("/health", health, auth=False), methods=["GET"]),
        Route("/metrics", endpoint("/metrics", metrics_text), methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.draining = False
    app.state.batcher = batcher
    app.state.metrics = metrics
    app.state.scorer = scorer
    return app


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
