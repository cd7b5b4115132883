"""``vllm``: score traces with a PRM served by vLLM (``POST /pooling``), so 7B PRMs run with vLLM's batching.

vLLM serves a PRM as a pooling model. With STEP pooling it returns, for every position whose token is
the step tag, the head's probabilities there: for Qwen2.5-Math-PRM (a 2-class head at every
``<extra_0>``) ``[P(wrong), P(right)]``; for a Math-Shepherd-style LM PRM served with
``--override-pooler-config '{"pooling_type": "STEP", "step_tag_id": <id of "ки">, "returned_token_ids":
[<id of "+">, <id of "-">]}'`` the softmax over those tokens, ``[P(+), P(-)]``. So:

1. each trace is rendered by its convention (:class:`~prmkit.models.Convention`: the chat template,
   system prompt and step tag the model was trained with), which needs the model's tokenizer where the
   convention uses a chat template (``tokenizer=``, a folder or hub id; default: ``model``);
2. the texts go to ``/pooling`` as ``{"model": model, "input": [text, ...]}`` (plus ``"task"`` when
   ``task=`` is given, e.g. ``"token_classify"`` on vLLM versions that ask for it), ``chunk`` at a time;
3. each answer's ``data`` must hold one row per step; a step's score is ``row[label]`` (``label``:
   1 for a 2-class head, class 1 = right; 0 for ``returned_token_ids`` listed good token first; a
   one-value row is that value). A count that does not match (vLLM cut the input at
   ``max_model_len``, or the tag also occurs in the problem) raises, naming the trace.

The response shape is vLLM's ``PoolingResponse`` (``vllm/entrypoints/pooling/pooling/protocol.py``,
commit 01cfbaf63434b3d5ec8a9e492d5111f6efc55e77): ``{"id", "object": "list", "created", "model",
"data": [{"index": i, "object": "pooling", "data": [[...], ...]}], "usage": {...}}``. Retries, backoff
and timeouts follow the ``openai_compat`` policy (:class:`~prmkit.serve.RetryingClient`);
``api_key`` (default ``$VLLM_API_KEY``) is sent as a bearer token and never written to provenance.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.models import get_convention
from prmkit.serve._remote import RemoteScorerError, RetryingClient
from prmkit.trace import Trace

__all__ = ["VLLMScorer"]


class VLLMScorer:
    """A PRM behind vLLM's ``/pooling`` endpoint as a :class:`~prmkit.scoring.StepScorer` (module docs).

    ``url``: the server root (``http://gpu:8000``); ``model``: the served model's name;
    ``convention``: how traces are rendered (default ``qwen2.5-math-prm``); ``tokenizer``: a tokenizer
    object, or a folder / hub id to load one from (default ``model``; only conventions with a chat
    template need it); ``label``: which entry of a step's row is P(right) (default: 1 for a classifier
    convention, 0 for an LM-token one, whose ``returned_token_ids`` list the good token first).

    >>> VLLMScorer("http://gpu:8000", "Qwen/Qwen2.5-Math-PRM-7B").score(traces)  # doctest: +SKIP
    """

    kind = "prm"

    def __init__(self, url: str, model: str, *, convention: Any = "qwen2.5-math-prm", tokenizer: Any = None,
                 task: str | None = None, label: int | None = None, chunk: int = 64, timeout: float = 120.0,
                 max_retries: int = 4, backoff: float = 0.5, api_key: str | None = None,
                 add_special_tokens: bool | None = None) -> None:
        self.url = str(url).rstrip("/")
        self.model = model
        self.name = model
        self.convention = get_convention(convention)
        self.task = task
        self.label = label if label is not None else (0 if self.convention.head == "lm_token" else 1)
        self.chunk = max(1, int(chunk))
        self.add_special_tokens = (self.convention.add_special_tokens if add_special_tokens is None
                                   else add_special_tokens)
        self._tokenizer = tokenizer
        key = api_key if api_key is not None else os.environ.get("VLLM_API_KEY") or None
        self._http = RetryingClient(self.url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                                    token=key, not_found="is `vllm serve` running there? check the URL",
                                    unauthorized="check api_key= or $VLLM_API_KEY")

    @property
    def tokenizer(self) -> Any:
        """The tokenizer the convention renders with (loaded on first use when given as a name)."""
        if self._tokenizer is None or isinstance(self._tokenizer, str):
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._tokenizer or self.model)
        return self._tokenizer

    def describe(self) -> dict[str, Any]:
        """Provenance: the server, model and convention (never the key)."""
        return {"scorer": "vllm", "url": self.url, "model": self.model, "kind": self.kind,
                "convention": self.convention.name, "label": self.label}

    def render(self, trace: Trace) -> str:
        """The text vLLM scores for ``trace``."""
        tok = self.tokenizer if self.convention.chat is not None else self._tokenizer
        if isinstance(tok, str):
            tok = self.tokenizer
        return self.convention.render(trace.problem.text, [s.text for s in trace.steps], tok).text

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        """P(right) of every step of every trace, as vLLM's STEP pooling reads it."""
        out: list[list[float | None]] = []
        for i in range(0, len(traces), self.chunk):
            part = list(traces[i:i + self.chunk])
            body: dict[str, Any] = {"model": self.model, "input": [self.render(t) for t in part],
                                    "add_special_tokens": self.add_special_tokens}
            if self.task is not None:
                body["task"] = self.task
            data = self._http.request("POST", "/pooling", body)
            rows = data.get("data") if isinstance(data, dict) else None
            if not isinstance(rows, list) or len(rows) != len(part):
                raise RemoteScorerError(f"{self.url}/pooling: expected {len(part)} results, got "
                                        f"{len(rows) if isinstance(rows, list) else type(rows).__name__}")
            for item in sorted(rows, key=lambda r: r.get("index", 0)):
                t = part[item.get("index", 0)]
                out.append(self._step_scores(t, item.get("data")))
        return out

    def _step_scores(self, trace: Trace, rows: Any) -> list[float | None]:
        if not isinstance(rows, list) or len(rows) != len(trace.steps):
            got = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise PrmkitError(f"trace {trace.id!r}: vLLM returned {got} step rows for {len(trace.steps)} "
                              "steps: is the server's pooling STEP with this convention's tag, and does the "
                              "input fit max_model_len?")
        scores: list[float | None] = []
        for row in rows:
            values = row if isinstance(row, list) else [row]
            if len(values) == 1:
                scores.append(float(values[0]))
            elif self.label < len(values):
                scores.append(float(values[self.label]))
            else:
                raise PrmkitError(f"trace {trace.id!r}: a step row has {len(values)} values; label={self.label}")
        return scores
