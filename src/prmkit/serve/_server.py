"""``prmkit serve``: load a scorer and run the app on uvicorn, with graceful shutdown.

On SIGINT / SIGTERM the server stops accepting connections, answers 503 to new requests on open
ones and lets the requests in flight finish for ``shutdown_timeout`` seconds (10 by default); those
still waiting then get 503 + Retry-After, and the process exits without waiting for a scorer call in
progress (it runs on a daemon thread).
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from prmkit._net import is_loopback
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.scoring import StepScorer, get_aggregator
from prmkit.serve._app import ServeConfig, create_app

__all__ = ["serve", "make_server", "check_bind", "check_port", "is_loopback", "TOKEN_ENV"]

#: The environment variable ``prmkit serve`` (and :class:`~prmkit.serve.RemoteScorer`) read the token from.
TOKEN_ENV = "PRMKIT_SERVE_TOKEN"

log = logging.getLogger("prmkit.serve")


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback ``host`` without a token (anyone who can reach it could use it)."""
    if not is_loopback(host) and not token:
        raise PrmkitError(f"refusing to serve on {host} without a token: anyone who can reach it could "
                          f"use it; pass --token or set ${TOKEN_ENV} (or bind 127.0.0.1)")


def check_port(port: int) -> None:
    """Refuse a port no socket can bind (before a model is loaded for it).

    >>> check_port(70000)
    Traceback (most recent call last):
    prmkit.errors.PrmkitError: --port must be between 0 and 65535 (0: any free port), got 70000
    """
    if not 0 <= port <= 65535:
        raise PrmkitError(f"--port must be between 0 and 65535 (0: any free port), got {port}")


def make_server(scorer: StepScorer, config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000,
                log_level: str = "info") -> Any:
    """A ``uvicorn.Server`` serving ``scorer`` whose shutdown marks the app as draining first (new
    requests get 503 while those in flight finish, for ``config.shutdown_timeout`` seconds). Refuses a
    non-loopback ``host`` without a token, and a port out of range."""
    check_bind(host, config.token)
    check_port(port)
    try:
        import uvicorn
    except ImportError:
        raise MissingDependencyError("uvicorn", "serve", "prmkit serve") from None
    app = create_app(scorer, config)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.draining = True
            app.state.batcher.drain(config.shutdown_timeout)
            super().handle_exit(sig, frame)

    # uvicorn cancels what is still running this long after the signal: the batcher's 503s come first,
    # this is the backstop for a request stuck elsewhere (a client sending its body slowly).
    cfg = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                         timeout_graceful_shutdown=math.ceil(config.shutdown_timeout) + 2)
    server = _Server(cfg)
    server.app = app
    return server


def serve(model: str | os.PathLike | None = None, *, scorer: str = "model",
          scorer_options: dict[str, Any] | None = None, host: str = "127.0.0.1", port: int = 8000,
          token: str | None = None, batch_size: int = 8, allow_pickle: bool = False,
          log_level: str = "info", **config: Any) -> None:
    """Serve a PRM / ORM until interrupted: ``model`` is a checkpoint folder or shipped model name (or
    ``scorer`` another registered scorer built from ``scorer_options``); ``token`` defaults to
    ``$PRMKIT_SERVE_TOKEN``; ``config``: :class:`ServeConfig` fields (``aggregate``, ``max_traces``, ...).
    Checks the address and the options before loading the model."""
    from prmkit.scoring import load_scorer

    token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
    check_port(port)
    if batch_size < 1:
        raise PrmkitError(f"--batch-size must be >= 1, got {batch_size}")
    cfg = ServeConfig(token=token, **config)
    get_aggregator(cfg.aggregate)
    check_bind(host, token)
    sc = load_scorer(scorer, model, scorer_options, batch_size=batch_size, allow_pickle=allow_pickle)
    server = make_server(sc, cfg, host=host, port=port, log_level=log_level)
    log.info("serving %s (%s) on http://%s:%d", sc.name, sc.kind, host, port)
    server.run()
