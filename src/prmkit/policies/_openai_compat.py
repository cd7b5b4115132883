"""``openai_compat``: a policy served over an OpenAI-compatible HTTP API (vLLM, llama.cpp's server,
Ollama, hosted APIs).

Two modes:

- ``mode="chat"`` posts ``messages`` to ``{base_url}/chat/completions`` and lets the server apply the
  model's chat template. A request's ``prefix`` (the steps written so far) is sent as a final assistant
  message with vLLM's ``continue_final_message: true, add_generation_prompt: false`` so the model
  continues it. **Servers without that extension** (llama-cpp-python's server, Ollama, hosted APIs)
  ignore the two fields and answer the prefix with a *new* assistant turn instead of continuing it.
  Use completions mode for prefixes there.
- ``mode="completions"`` renders the chat prompt client-side (``chat_template="chatml"`` or a Hugging
  Face tokenizer whose ``apply_chat_template`` is used), appends the prefix, and posts the text to
  ``{base_url}/completions``. This is the portable way to continue a prefix. The rendered text is sent
  as is: where a template writes the BOS token as text and the server adds one too (Llama 3 on vLLM),
  pass ``extra_body={"add_special_tokens": False}`` to vLLM.

Sampling. With ``n_per_request=False`` (the default) the ``n`` samples of a request are ``n`` separate
HTTP requests, each with its own seed ``derive_seed(params.seed, request.key, i)``, so a sample does
not depend on the batch it was in, and servers that ignore ``n`` (llama-cpp-python's does) still
return ``n`` samples. ``n_per_request=True`` sends one request with ``n`` (vLLM shares the prompt's
prefill across the samples). Requests run on a bounded thread pool (``max_concurrency``); results come
back in request order.

Errors are :class:`PolicyServerError` subclasses whose message says what to change. Connection refused
fails at once (nothing listens there, and waiting will not change that); timeouts, 429 and 5xx are
retried ``max_retries`` times with exponential backoff and jitter; other 4xx and malformed bodies are
not retried (the same request would fail the same way).

>>> policy = OpenAICompatPolicy("http://127.0.0.1:8000/v1", "HuggingFaceTB/SmolLM2-135M-Instruct",
...                             mode="completions", chat_template="chatml")
>>> policy.describe()["mode"], policy.model_id
('completions', 'HuggingFaceTB/SmolLM2-135M-Instruct')
>>> print(render_chatml([{"role": "user", "content": "3 + 5?"}], "Step 1:"))
<|im_start|>user
3 + 5?<|im_end|>
<|im_start|>assistant
Step 1:
"""

from __future__ import annotations

import concurrent.futures
import errno
import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from prmkit._progress import progress_bar
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.policies._base import Completion, GenerationRequest, SamplingParams, apply_stop, derive_seed
from prmkit.provenance import redact_text, redact_url, secrets_of

__all__ = ["OpenAICompatPolicy", "PolicyServerError", "PolicyConnectionError", "PolicyTimeoutError",
           "PolicyHTTPError", "PolicyResponseError", "render_chatml"]

#: How much of a server's error text goes into an exception message.
_MAX_ERROR_TEXT = 500
#: Upper bound on a server's ``Retry-After`` we are willing to sleep, in seconds.
_MAX_RETRY_AFTER = 60.0
_MODES = ("chat", "completions")


class _Skipped(Exception):
    """A job not sent because an earlier one in the batch failed."""


class PolicyServerError(PrmkitError):
    """The OpenAI-compatible server could not give us completions. ``url`` is the endpoint;
    subclasses say why."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class PolicyConnectionError(PolicyServerError):
    """Nothing answered at the address (connection refused, unknown host, network down)."""


class PolicyTimeoutError(PolicyServerError):
    """The server did not answer within ``timeout`` seconds, on every attempt."""


class PolicyHTTPError(PolicyServerError):
    """The server answered with an HTTP error status. ``status`` is the code, ``server_message`` the
    server's own explanation (truncated)."""

    def __init__(self, message: str, *, url: str, status: int, server_message: str) -> None:
        super().__init__(message, url=url)
        self.status = status
        self.server_message = server_message


class PolicyResponseError(PolicyServerError):
    """The server answered 2xx with a body that is not a usable completion (not JSON, no ``choices``,
    a choice without its text); the message names the missing field."""


def render_chatml(messages: Sequence[dict[str, Any]], prefix: str = "") -> str:
    """The ChatML prompt (SmolLM2, Qwen and others): each message as
    ``<|im_start|>role\\ncontent<|im_end|>\\n``, then an open assistant turn followed by ``prefix``.

    Unlike a model's own template it adds no default system message; pass one in ``messages`` where the
    model expects it.
    """
    parts = [f"<|im_start|>{m['role']}\n{_content_text(m.get('content'))}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n" + prefix


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of OpenAI's list-of-parts form."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def _httpx():
    try:
        import httpx
    except ImportError:
        raise MissingDependencyError("httpx", "openai", "the openai_compat policy backend") from None
    return httpx


class OpenAICompatPolicy:
    """A model behind an OpenAI-compatible server, as a :class:`~prmkit.policies.Policy`.

    ``base_url``: the API root, usually ending in ``/v1`` (``"http://127.0.0.1:8000/v1"``);
    ``model``: the served model name (also the provenance ``model_id``); ``api_key``: sent as a bearer
    token (default: ``$OPENAI_API_KEY``; never logged or recorded); ``mode``: ``"chat"`` or
    ``"completions"`` (see the module docs for prefixes); ``max_concurrency``: most HTTP requests in
    flight at once; ``timeout``: seconds per attempt; ``max_retries``: extra attempts after a timeout,
    429 or 5xx; ``backoff``: first retry delay in seconds (doubling, with jitter); ``n_per_request``:
    one request with ``n`` instead of ``n`` seeded requests; ``chat_template`` (completions mode):
    ``"chatml"``, a Hugging Face tokenizer path or hub id, or a loaded tokenizer; ``extra_body``:
    merged into every request body (``{"top_k": 20}``, ``{"min_p": 0.05}``); ``progress``: a progress
    bar on a terminal.

    Example, against ``python -m llama_cpp.server --model SmolLM2-135M-Instruct.Q4_1.gguf``:

    >>> policy = OpenAICompatPolicy("http://127.0.0.1:8000/v1", "smollm2", mode="completions",
    ...                             chat_template="chatml")  # doctest: +SKIP
    >>> req = GenerationRequest([{"role": "user", "content": "3 + 5?"}], prefix="Step 1: 3 + 5 =")
    >>> policy.generate([req], SamplingParams(n=2, max_new_tokens=16, stop=("\\n",)))  # doctest: +SKIP
    [[Completion(text=' 8', finish_reason='stop', ...), Completion(...)]]
    """

    name = "openai_compat"
    #: Seeds are sent, but whether the server honours them (and n_per_request's shared sampling) is
    #: up to it: a resumed labeling run is warned that it may differ from an uninterrupted one.
    reproducible = False

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, mode: str = "chat",
                 max_concurrency: int = 8, timeout: float = 60.0, max_retries: int = 4,
                 backoff: float = 0.5, n_per_request: bool = False, chat_template: Any = None,
                 extra_body: dict[str, Any] | None = None, progress: bool = True) -> None:
        errors = []
        if not base_url or not base_url.startswith(("http://", "https://")):
            errors.append(f"base_url must start with http:// or https://, got {redact_url(str(base_url))!r}")
        if not model:
            errors.append("model (the served model name) is required")
        if mode not in _MODES:
            errors.append(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        if max_concurrency < 1:
            errors.append(f"max_concurrency must be >= 1, got {max_concurrency}")
        if timeout <= 0:
            errors.append(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            errors.append(f"max_retries must be >= 0, got {max_retries}")
        if backoff < 0:
            errors.append(f"backoff must be >= 0 seconds, got {backoff}")
        if mode == "completions" and chat_template is None:
            errors.append("mode='completions' renders the prompt client-side: pass chat_template='chatml' "
                          "or a Hugging Face tokenizer path / hub id")
        if mode == "chat" and chat_template is not None:
            errors.append("chat_template only applies to mode='completions' (in chat mode the server "
                          "applies the model's template)")
        if extra_body is not None and not isinstance(extra_body, dict):
            errors.append(f"extra_body must be a dict, got {type(extra_body).__name__}")
        if errors:
            raise PrmkitError("openai_compat policy: " + "; ".join(errors))

        # Requests go to the URL as given (user info included: httpx sends it as basic auth); every
        # URL this object shows (describe, messages, the progress bar) is the redacted one.
        self._request_base = base_url.rstrip("/")
        self.base_url = redact_url(self._request_base)
        self.model = model
        self.model_id = model
        self.mode = mode
        self.max_concurrency = max_concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.n_per_request = n_per_request
        self.extra_body = dict(extra_body or {})
        self.progress = progress
        # Kept private and out of describe()/repr so it cannot end up in traces, logs or reports.
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._secrets = secrets_of({"base_url": self._request_base, "api_key": self._api_key})
        self._render: Callable[[Sequence[dict[str, Any]], str], str] | None = None
        self._template_name: str | None = None
        if mode == "completions":
            self._render, self._template_name = _make_renderer(chat_template)
        # Jitter only needs to spread retries apart; a private generator keeps it from consuming (or
        # depending on) the global `random` state a user may have seeded.
        self._jitter = random.Random()
        self._client: Any = None
        self._client_lock = threading.Lock()

    # -- public API -------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The URL requests are posted to, as shown (a URL's user info redacted)."""
        return f"{self.base_url}/{self._path}"

    @property
    def _path(self) -> str:
        return "chat/completions" if self.mode == "chat" else "completions"

    def redact(self, text: str) -> str:
        """``text`` received from the server (an error body, a completion) without this backend's
        secrets: the api key and the base URL's user info, as sent or echoed (a 401 body often
        repeats the key it refused)."""
        return redact_text(text, self._secrets)

    def describe(self) -> dict[str, Any]:
        """Settings for provenance: backend, base_url, model, mode, concurrency (never the api key)."""
        d = {"backend": self.name, "base_url": self.base_url, "model": self.model, "mode": self.mode,
             "max_concurrency": self.max_concurrency, "n_per_request": self.n_per_request}
        if self._template_name is not None:
            d["chat_template"] = self._template_name
        if self.extra_body:
            d["extra_body"] = dict(self.extra_body)
        return d

    def __repr__(self) -> str:
        return f"OpenAICompatPolicy({', '.join(f'{k}={v!r}' for k, v in self.describe().items())})"

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        """``params.n`` completions for each request, in request order.

        Raises a :class:`PolicyServerError` subclass on the first request that fails for good; the
        requests not yet sent are cancelled.
        """
        if not requests:
            return []
        jobs = self._jobs(requests, params)
        results: dict[tuple[int, int], list[Completion]] = {}
        # Set on the first failure: jobs not yet sent are skipped (a worker would otherwise pick up
        # the next job before this thread sees the error); those in flight end within `timeout`.
        abort = threading.Event()
        error: BaseException | None = None
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(jobs)),
                                                     thread_name_prefix="prmkit-openai")
        with progress_bar(len(jobs), f"sampling ({self.model_id} @ {self.base_url})",
                          enabled=self.progress, tty_only=True) as advance:
            try:
                futures = {pool.submit(self._run_job, body, params, abort): (i, k)
                           for i, k, body in jobs}
                for fut in concurrent.futures.as_completed(futures):
                    try:
                        results[futures[fut]] = fut.result()
                    except _Skipped:
                        continue
                    except BaseException as e:  # the job's own error, raised below in this thread
                        abort.set()
                        error = error or e
                        continue
                    advance(1)
            finally:
                abort.set()
                pool.shutdown(wait=True, cancel_futures=True)
        if error is not None:
            raise error
        out = []
        for i in range(len(requests)):
            if self.n_per_request:
                out.append(results[(i, 0)])
            else:
                out.append([results[(i, k)][0] for k in range(params.n)])
        return out

    def close(self) -> None:
        """Close the HTTP connection pool (a later :meth:`generate` opens a new one)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> OpenAICompatPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------------------

    def _jobs(self, requests: Sequence[GenerationRequest], params: SamplingParams
              ) -> list[tuple[int, int, dict[str, Any]]]:
        """``(request index, sample index, body)`` for every HTTP request to make."""
        jobs = []
        for i, req in enumerate(requests):
            base, key = self._body(req, params)
            samples = [0] if self.n_per_request else range(params.n)
            for k in samples:
                body = dict(base)
                seed = derive_seed(params.seed, key, k)
                if seed is not None:
                    body["seed"] = seed
                if self.n_per_request:
                    body["n"] = params.n
                # Last, so a user can override anything (say a server-specific max_tokens name).
                body.update(self.extra_body)
                jobs.append((i, k, body))
        return jobs

    def _body(self, req: GenerationRequest, params: SamplingParams) -> tuple[dict[str, Any], str]:
        """The request body without seed / n, and the key the seeds derive from."""
        body: dict[str, Any] = {"model": self.model, "max_tokens": params.max_new_tokens,
                                "temperature": params.temperature, "top_p": params.top_p}
        if params.stop:
            body["stop"] = list(params.stop)
        if self.mode == "chat":
            messages = [dict(m) for m in req.messages]
            if req.prefix:
                messages.append({"role": "assistant", "content": req.prefix})
                # vLLM's extension: continue the last assistant message instead of opening a new turn.
                body["continue_final_message"] = True
                body["add_generation_prompt"] = False
            body["messages"] = messages
            if req.tools:
                body["tools"] = req.tools
            fallback_key = json.dumps(req.messages, sort_keys=True, default=str) + req.prefix
        else:
            body["prompt"] = self._render(req.messages, req.prefix)
            fallback_key = body["prompt"]
        # Without a key the request's own content seeds it (as in the hf backend), so identical
        # requests still get identical samples.
        return body, req.key or fallback_key

    def _run_job(self, body: dict[str, Any], params: SamplingParams, abort: threading.Event
                 ) -> list[Completion]:
        if abort.is_set():
            raise _Skipped
        try:
            data = self._post(body)
            expected = params.n if self.n_per_request else 1
            return self._parse(data, params, expected, body)
        except BaseException:
            abort.set()  # here, in the worker, so no other worker starts a job after this one failed
            raise

    def _http(self) -> Any:
        """The shared ``httpx.Client`` (thread-safe), opened on first use."""
        with self._client_lock:
            if self._client is None:
                httpx = _httpx()
                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                self._client = httpx.Client(
                    headers=headers, timeout=httpx.Timeout(self.timeout),
                    limits=httpx.Limits(max_connections=self.max_concurrency,
                                        max_keepalive_connections=self.max_concurrency))
            return self._client

    def _post(self, body: dict[str, Any]) -> Any:
        """POST with bounded retries; returns the decoded JSON body or raises PolicyServerError."""
        httpx = _httpx()
        client = self._http()
        url = self.endpoint  # for messages
        request_url = f"{self._request_base}/{self._path}"
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                resp = client.post(request_url, json=body)
            except httpx.TimeoutException as e:
                if last:
                    raise PolicyTimeoutError(
                        f"no answer from {url} within {self.timeout:g}s ({type(e).__name__}), "
                        f"{attempts} attempt(s) — the server may be overloaded or generating too long: "
                        "raise timeout=, lower max_new_tokens or max_concurrency", url=url) from None
                self._sleep(attempt)
                continue
            except httpx.ConnectError as e:
                raise PolicyConnectionError(self.redact(_connect_message(url, e)), url=url) from None
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
                # The connection broke mid-request (a server restart, a proxy dropping idle
                # keep-alive connections): worth another try.
                if last:
                    raise PolicyServerError(f"connection to {url} broke during the request after "
                                            f"{attempts} attempt(s): {self.redact(str(e))}", url=url) from None
                self._sleep(attempt)
                continue
            except httpx.HTTPError as e:
                raise PolicyServerError(f"request to {url} failed: {type(e).__name__}: {self.redact(str(e))}",
                                        url=url) from None

            status = resp.status_code
            if status < 300:
                try:
                    return resp.json()
                except ValueError:
                    raise PolicyResponseError(
                        f"response from {url} is not JSON (HTTP {status}, content-type "
                        f"{resp.headers.get('content-type', 'none')!r}): {_truncate(self.redact(resp.text), 200)!r} — "
                        "is base_url the API root of an OpenAI-compatible server (usually ending in /v1)?",
                        url=url) from None
            retryable = status == 429 or status >= 500
            if retryable and not last:
                self._sleep(attempt, _retry_after(resp.headers.get("retry-after")))
                continue
            raise _http_error(url, status, self.redact(resp.text), attempt + 1)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _sleep(self, attempt: int, retry_after: float | None = None) -> None:
        """Exponential backoff with jitter (half fixed, half random, so retries from many threads
        spread out without ever retrying at once); a server's Retry-After wins when it is given."""
        if retry_after is not None:
            time.sleep(min(retry_after, _MAX_RETRY_AFTER))
            return
        delay = self.backoff * (2 ** attempt)
        time.sleep(delay * (0.5 + 0.5 * self._jitter.random()))

    # -- responses --------------------------------------------------------------------------------

    def _parse(self, data: Any, params: SamplingParams, expected: int, body: dict[str, Any]
               ) -> list[Completion]:
        url = self.endpoint
        if not isinstance(data, dict) or "choices" not in data:
            keys = self.redact(", ".join(sorted(map(str, data)))) if isinstance(data, dict) else type(data).__name__
            raise PolicyResponseError(f"response from {url} has no 'choices' field (got: {keys}) — "
                                      "not an OpenAI-compatible completion response", url=url)
        choices = data["choices"]
        if not isinstance(choices, list):
            raise PolicyResponseError(f"response from {url}: 'choices' is a {type(choices).__name__}, "
                                      "expected a list", url=url)
        if len(choices) < expected:
            hint = (" — this server ignores 'n'; use n_per_request=False (one seeded request per sample)"
                    if self.n_per_request and len(choices) == 1 else "")
            raise PolicyResponseError(f"response from {url} has {len(choices)} choice(s), expected "
                                      f"{expected}{hint}", url=url)
        # Servers number choices with 'index'; keep that order rather than trusting the list order.
        order = sorted(range(len(choices)), key=lambda j: _index(choices[j], j))[:expected]
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens")
        out = []
        for j in order:
            choice = choices[j]
            text = self.redact(self._choice_text(choice, j, url))
            raw_finish = choice.get("finish_reason")
            # Servers differ on whether a matched stop string is returned; cut it here either way.
            text, stopped = apply_stop(text, params.stop)
            finish = "stop" if stopped or raw_finish != "length" else "length"
            meta: dict[str, Any] = {}
            if "seed" in body:
                meta["seed"] = body["seed"]
            if raw_finish not in ("stop", "length"):
                meta["server_finish_reason"] = self.redact(raw_finish) if isinstance(raw_finish, str) else raw_finish
            calls = choice.get("message", {}).get("tool_calls") if self.mode == "chat" else None
            if isinstance(calls, list) and calls:
                meta["tool_calls"] = _redact_strings(calls, self.redact)
            # usage counts all choices of a response together, so it is per-completion only with one.
            if isinstance(completion_tokens, int) and expected == 1:
                num_tokens = completion_tokens
            else:
                num_tokens = len(text.split())
                meta["approx_tokens"] = True
            if isinstance(prompt_tokens, int):
                n_prompt = prompt_tokens
            else:
                n_prompt = len(self._prompt_text(body).split())
                meta["approx_tokens"] = True
            out.append(Completion(text, finish, num_tokens=num_tokens, prompt_tokens=n_prompt, meta=meta))
        return out

    def _choice_text(self, choice: Any, j: int, url: str) -> str:
        if not isinstance(choice, dict):
            raise PolicyResponseError(f"response from {url}: choices[{j}] is a {type(choice).__name__}, "
                                      "expected an object", url=url)
        if self.mode == "completions":
            text = choice.get("text")
            if not isinstance(text, str):
                raise PolicyResponseError(f"response from {url}: choices[{j}].text is missing (a "
                                          "/completions choice carries its text there)", url=url)
            return text
        message = choice.get("message")
        if not isinstance(message, dict):
            raise PolicyResponseError(f"response from {url}: choices[{j}].message is missing", url=url)
        content = message.get("content")
        if isinstance(content, list):
            content = _content_text(content)
        if content is None and message.get("tool_calls"):  # a tool call without text
            content = ""
        if not isinstance(content, str):
            raise PolicyResponseError(
                f"response from {url}: choices[{j}].message.content is missing "
                f"(message fields: {self.redact(', '.join(sorted(map(str, message)))) or 'none'})", url=url)
        return content

    @staticmethod
    def _prompt_text(body: dict[str, Any]) -> str:
        if "prompt" in body:
            return body["prompt"]
        return " ".join(_content_text(m.get("content")) for m in body.get("messages", []))


# -- helpers ----------------------------------------------------------------------------------------

def _make_renderer(chat_template: Any) -> tuple[Callable[[Sequence[dict[str, Any]], str], str], str]:
    """``(render(messages, prefix) -> prompt, name for provenance)`` for completions mode."""
    if isinstance(chat_template, str) and chat_template.lower() == "chatml":
        return render_chatml, "chatml"
    if isinstance(chat_template, str):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise MissingDependencyError("transformers", "hf",
                                         f"rendering prompts with the chat template of {chat_template}"
                                         ) from None
        try:
            tokenizer = AutoTokenizer.from_pretrained(chat_template)
        except Exception as e:  # hub, file and parse errors all mean "cannot load" to the user
            raise PrmkitError(f"chat_template={chat_template!r}: cannot load a tokenizer from it ({e}); "
                              "pass 'chatml' or a local tokenizer folder") from None
        name = chat_template
    elif hasattr(chat_template, "apply_chat_template"):
        tokenizer = chat_template
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    else:
        raise PrmkitError(f"chat_template must be 'chatml', a tokenizer path / hub id, or a tokenizer; "
                          f"got {type(chat_template).__name__}")
    if not getattr(tokenizer, "chat_template", None):
        raise PrmkitError(f"chat_template={name!r}: the tokenizer has no chat template; pass 'chatml' "
                          "or a tokenizer that has one")

    def render(messages: Sequence[dict[str, Any]], prefix: str) -> str:
        # Sent as rendered. Not stripping a leading BOS: some tokenizers name a real template token
        # as BOS (SmolLM2's GGUF says bos_token = "<|im_start|>"), and whether the server adds one
        # depends on the model's metadata, not on the text.
        prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return prompt + prefix

    return render, name


def _redact_strings(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON from a server) with ``redact`` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_strings(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_strings(v, redact) for v in value]
    return value


def _index(choice: Any, default: int) -> int:
    idx = choice.get("index") if isinstance(choice, dict) else None
    return idx if isinstance(idx, int) else default


def _truncate(text: str, limit: int = _MAX_ERROR_TEXT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def _server_message(text: str) -> str:
    """The server's own explanation from an error body: OpenAI/llama.cpp ``{"error": {"message"}}``,
    vLLM ``{"message"}``, FastAPI ``{"detail"}``, else the raw text."""
    try:
        data = json.loads(text)
    except ValueError:
        return _truncate(text)
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return _truncate(str(err["message"]))
        for value in (err, data.get("message"), data.get("detail")):
            if value:
                return _truncate(value if isinstance(value, str) else json.dumps(value))
    return _truncate(text)


def _http_error(url: str, status: int, text: str, attempts: int) -> PolicyHTTPError:
    message = _server_message(text) or "(empty body)"
    if status in (401, 403):
        hint = " — check api_key= or $OPENAI_API_KEY"
    elif status == 404:
        hint = (" — check base_url (it is usually the API root ending in /v1) and that the server "
                "offers this endpoint (some only serve chat: try mode='chat')")
    elif status == 429:
        hint = " — the server is rate limiting: lower max_concurrency or raise max_retries / backoff"
    elif status >= 500:
        hint = " — a server-side failure: see the server's log"
    else:
        hint = ""
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return PolicyHTTPError(f"HTTP {status} from {url}{tries}: {message}{hint}", url=url, status=status,
                           server_message=message)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (the HTTP-date form is ignored)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _connect_message(url: str, e: Exception) -> str:
    refused = "refused" in str(e).lower() or _has_errno(e, errno.ECONNREFUSED)
    if refused:
        return (f"cannot connect to {url}: connection refused — is the server running? start one with, "
                "e.g., `vllm serve MODEL --port 8000` or "
                "`python -m llama_cpp.server --model MODEL.gguf --port 8000`, and check base_url")
    return f"cannot connect to {url}: {e} — check base_url and that the server is reachable"


def _has_errno(e: BaseException | None, code: int) -> bool:
    while e is not None:
        if getattr(e, "errno", None) == code:
            return True
        e = e.__cause__ or e.__context__
    return False
