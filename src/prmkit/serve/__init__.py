"""Serving a PRM over HTTP, and using one served elsewhere.

- :func:`serve` (``prmkit serve``): any checkpoint or registered scorer behind an ASGI app on
  uvicorn: ``POST /get_reward`` (OpenRLHF's remote reward-model protocol), ``POST /v1/score``
  (prmkit's), ``GET /health``, ``GET /metrics`` (Prometheus); :func:`create_app` builds the app.
- :class:`DynamicBatcher`: the traces of concurrent requests share one scorer call (and so the
  prefix cache); a bounded queue answers 503 + Retry-After when full; a request that timed out has
  the rest of its traces dropped.
- :func:`query_trace` / :func:`split_query` / :func:`strip_end_markers`: how an OpenRLHF query becomes
  a trace, in time linear in its length; :func:`problem_from` (the last user turn of a chat-templated
  prompt, shared with :class:`~prmkit.rl.PRMReward`) and :class:`ReasoningSplitter` (``<think>`` tags
  and end markers never a step).
- :class:`RemoteScorer`: a served model as a local scorer (``--model http://host:port``);
  :class:`VLLMScorer` (``--scorer vllm``): a PRM served by vLLM's ``/pooling`` (STEP pooling).
"""

from prmkit.serve._app import ServeConfig, create_app
from prmkit.serve._batcher import DynamicBatcher, QueueFull, ShuttingDown
from prmkit.serve._metrics import Metrics
from prmkit.serve._queries import (
    DEFAULT_END_MARKERS,
    END_MARKERS,
    PROBLEM_FROM,
    THINK,
    ReasoningSplitter,
    end_markers_of,
    problem_from,
    query_trace,
    reasoning_splitter,
    split_query,
    strip_end_markers,
)
from prmkit.serve._remote import RemoteScorer, RemoteScorerError, RetryingClient, remote_url
from prmkit.serve._server import TOKEN_ENV, check_bind, check_port, is_loopback, make_server, serve
from prmkit.serve._vllm import VLLMScorer

__all__ = [
    "serve", "make_server", "create_app", "ServeConfig", "check_bind", "check_port", "is_loopback", "TOKEN_ENV",
    "DynamicBatcher", "QueueFull", "ShuttingDown", "Metrics",
    "query_trace", "split_query", "strip_end_markers", "END_MARKERS", "PROBLEM_FROM", "problem_from",
    "THINK", "DEFAULT_END_MARKERS", "end_markers_of", "ReasoningSplitter", "reasoning_splitter",
    "RemoteScorer", "RemoteScorerError", "RetryingClient", "remote_url", "VLLMScorer",
]
