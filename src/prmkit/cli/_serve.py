"""``prmkit serve``: a PRM (or ORM, or any registered scorer) behind an HTTP server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from prmkit.cli._data import parse_options
from prmkit.cli._help import check_aggregator, names
from prmkit.cli._options import ScorerOpt
from prmkit.cli._paths import model_folders
from prmkit.models import SHIPPED_MODELS
from prmkit.scoring import AGGREGATORS
from prmkit.serve import ServeConfig

__all__ = ["serve"]


def serve(
    model: Annotated[Path | None, typer.Option(
        "--model", help=f"PRM / ORM checkpoint folder or shipped model name ({names(SHIPPED_MODELS)}).",
        callback=model_folders)] = None,
    scorer: ScorerOpt = "model",
    scorer_arg: Annotated[list[str] | None, typer.Option(
        "--scorer-arg", "-s", help="Scorer argument KEY=VALUE (repeatable).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind (anything but loopback needs a token).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    token: Annotated[str | None, typer.Option(
        help="Bearer token clients must send (default: $PRMKIT_SERVE_TOKEN; prefer the variable: a "
        "command line is visible to other users).")] = None,
    aggregate: Annotated[str, typer.Option(
        help=f"Step scores -> reward: {names(AGGREGATORS)}.", callback=check_aggregator)] = ServeConfig.aggregate,
    splitter: Annotated[str, typer.Option(help="How /get_reward cuts a completion into steps.")] = ServeConfig.splitter,
    batch_size: Annotated[int, typer.Option(help="Sequences per forward pass.")] = 8,
    max_batch_traces: Annotated[int, typer.Option(help="Most traces per scorer call (dynamic batch).")] = ServeConfig.max_batch_traces,
    max_wait_ms: Annotated[float, typer.Option(help="How long a batch waits for more requests.")] = ServeConfig.max_wait_ms,
    max_traces: Annotated[int, typer.Option(help="Most traces in one request (413 past it).")] = ServeConfig.max_traces,
    max_steps: Annotated[int, typer.Option(
        help="Most steps in one trace (/v1/score: 413; /get_reward: that query unscored).")] = ServeConfig.max_steps,
    max_trace_chars: Annotated[int, typer.Option(
        help="Most characters of problem and steps in one trace (as --max-steps).")] = ServeConfig.max_trace_chars,
    max_batch_steps: Annotated[int, typer.Option(
        help="Most steps per scorer call; a timed-out request's traces are dropped between calls.")
    ] = ServeConfig.max_batch_steps,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body in MiB (413 past it).")] = ServeConfig.max_body_bytes / 2**20,
    max_queued_traces: Annotated[int, typer.Option(
        help="Traces waiting before requests get 503 + Retry-After.")] = ServeConfig.max_queued_traces,
    request_timeout: Annotated[float, typer.Option(help="Seconds a request may wait (504 past it).")] = ServeConfig.request_timeout,
    shutdown_timeout: Annotated[float, typer.Option(
        help="Seconds a shutdown waits for requests in flight (503 past it).")] = ServeConfig.shutdown_timeout,
    unscored_reward: Annotated[float, typer.Option(
        help="/get_reward's reward for a query it cannot score (no step, or a prompt too long for "
        "max_length; the reason is in 'unscored').")] = ServeConfig.unscored_reward,
    problem_from: Annotated[str, typer.Option(
        help="How /get_reward reads the problem from a prompt: last-user (the last user turn of a "
        "chat-templated prompt; a plain prompt as it is) or whole (the prompt as sent).")] = ServeConfig.problem_from,
    end_marker: Annotated[list[str] | None, typer.Option(
        "--end-marker", help="A policy end token to blank in completions, beside <|im_end|>, <|eot_id|>, "
        "</s>, DeepSeek's end of sentence, ... (repeatable).")] = None,
    allow_pickle: Annotated[bool, typer.Option(
        "--allow-pickle", help="Load a --model folder whose weights are pickle files only.")] = False,
) -> None:
    """Serve a PRM over HTTP: OpenRLHF's /get_reward, /v1/score, /health, /metrics.

    Example: prmkit serve --model runs/prm --port 8000
    Then: prmkit score --model http://127.0.0.1:8000 traces.jsonl scored.jsonl
    """
    from prmkit.serve import serve as run

    run(model, scorer=scorer, scorer_options=parse_options(scorer_arg), host=host, port=port, token=token,
        batch_size=batch_size, allow_pickle=allow_pickle, aggregate=aggregate, splitter=splitter,
        max_batch_traces=max_batch_traces, max_batch_steps=max_batch_steps, max_wait_ms=max_wait_ms,
        max_traces=max_traces, max_steps=max_steps, max_trace_chars=max_trace_chars,
        max_body_bytes=max_body_mb * 1024 * 1024, max_queued_traces=max_queued_traces,
        request_timeout=request_timeout, shutdown_timeout=shutdown_timeout, unscored_reward=unscored_reward,
        problem_from=problem_from, end_markers=tuple(end_marker or ()))
