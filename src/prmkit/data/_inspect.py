"""Inspect (``inspect_ai``) evaluation logs: one trace per sample and epoch, the agent's turns as steps.

A log is one object: the run's header (``eval``: task, model, eval and run ids) and its ``samples``,
each holding the chat ``messages`` of the run (tool calls as ``{"id", "function", "arguments"}``,
tool results as ``tool`` messages), the ``scores`` by scorer, the ``target`` and the ``epoch``.
``.eval`` logs are zip archives of the same records; they are read with ``inspect_ai`` itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prmkit._fields import Fields
from prmkit._jsonio import iter_json_records
from prmkit.data._format import Format
from prmkit.data._split import messages_to_trace
from prmkit.errors import FormatError, MissingDependencyError, PrmkitError
from prmkit.provenance import GenerateProvenance, PolicyRef
from prmkit.trace import Trace

__all__ = ["InspectFormat"]

_READERS = ("auto", "inspect_ai", "json")
_ROLES = ("system", "user", "assistant", "tool")
_ATTACHMENT = "attachment://"
#: Sample fields never read: the event log, the store and the pools are large and hold no turn
#: that ``messages`` lacks.
_UNREAD = {"events", "events_data", "store", "timelines"}
#: Inspect's letter scores (``inspect_ai.scorer``: CORRECT, INCORRECT, NOANSWER); PARTIAL ("P") and
#: anything else is neither. No answer is not a correct answer.
_LETTERS = {"C": "correct", "I": "incorrect", "N": "incorrect"}
_NO_SAMPLES = "the log holds no samples (written with log_samples=False, or the run logged none)"


def _inspect_ai_available() -> bool:
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        return False
    return True


#: The most text (MiB) one sample's messages may expand to once attachments are resolved.
MAX_SAMPLE_MB = 16.0


class InspectFormat(Format):
    """Inspect eval logs (``.json``, and ``.eval`` with ``inspect_ai`` installed). Reading only.

    Each sample (each epoch of it) becomes one trace, id ``TASK:SAMPLE_ID:EPOCH``, in the shape of
    the ``agent`` environment's chat export, so monitors read both alike: the messages become OpenAI
    chat messages and go through :func:`~prmkit.data.messages_to_trace` — an assistant message's
    text is a ``plan`` step (the first one; later ones ``reasoning``), each tool call a ``tool_call``
    step (the call in ``step.meta["tool_call"]``, its name in ``step.meta["tool"]``), each tool
    result an ``observation`` step (a failed call reads ``error: <message>``), the last assistant
    message a ``final`` step. A model's own reasoning blocks (``ContentReasoning``; the summary when
    the reasoning is redacted) are a ``reasoning`` step before the turn they belong to (the chat
    export gives each its own assistant message: plain chat has no place for it); other non-text
    parts (images, audio, documents) are shown as ``[image]`` and the like. ``step.meta`` gives the
    index of the Inspect message each step came from (``inspect_message``).

    The problem is the sample's input (its user messages when the input is a list), its answer the
    ``target`` when it is one string. The final answer and the outcome come from one scorer's score
    (default: the first of the log's scorers that scored the sample; ``scorer=NAME`` another, a
    sample it left unscored then being an issue): the score's ``answer``, and ``correct`` for the
    value ``C``, ``True`` or 1, ``incorrect`` for ``I``, ``N``, ``False`` or 0, else ``unknown``.
    ``trace.meta["inspect"]`` keeps the run's ids, task, model, sample id, epoch, target, every
    score, the sample's metadata and its error message; a ``generate`` provenance entry names the
    model (backend ``inspect``), task and eval id. Events, the store and attachments are not kept,
    so this format cannot be written back.

    ``max_sample_mb`` (default 16): a sample whose messages expand past it once ``attachment://``
    references are resolved is a located error (skipped with ``--skip-invalid``), not an output
    thousands of times the log's size.

    ``reader``: ``auto`` (``inspect_ai.log`` when it is installed, else the JSON directly),
    ``inspect_ai`` or ``json`` (``.json`` logs only; ``attachment://`` references are resolved from
    the sample's ``attachments``). Malformed input raises :class:`~prmkit.errors.FormatError` naming
    the file and the field inside the sample (``samples[2].messages[3].tool_calls[0].function``).

    >>> log = {"version": 2, "eval": {"task": "shop", "model": "mockllm/model", "eval_id": "e1"},
    ...        "samples": [{"id": 1, "epoch": 1, "input": "Total?", "target": "7",
    ...          "messages": [{"role": "user", "content": "Total?"},
    ...            {"role": "assistant", "content": "Add them.", "tool_calls": [
    ...              {"id": "c1", "function": "calculator", "arguments": {"expr": "3+4"}}]},
    ...            {"role": "tool", "tool_call_id": "c1", "content": "7"},
    ...            {"role": "assistant", "content": "It is 7."}],
    ...          "scores": {"match": {"value": "C", "answer": "7"}}}]}
    >>> f = InspectFormat()
    >>> f.header = log
    >>> [t] = f.decode(Fields(log["samples"][0], line=0))
    >>> [(s.kind, s.text) for s in t.steps]  # doctest: +NORMALIZE_WHITESPACE
    [('plan', 'Add them.'), ('tool_call', 'calculator({"expr": "3+4"})'), ('observation', '7'),
     ('final', 'It is 7.')]
    >>> t.id, t.problem.text, t.problem.answer, t.final_answer, t.outcome
    ('shop:1:1', 'Total?', '7', '7', 'correct')
    """

    name = "inspect"
    container = "log"
    description = "Inspect (inspect_ai) eval logs: one trace per sample and epoch"

    def __init__(self, *, reader: str = "auto", scorer: str | None = None,
                 max_sample_mb: float = MAX_SAMPLE_MB) -> None:
        if reader not in _READERS:
            raise PrmkitError(f"inspect: reader must be one of {', '.join(_READERS)}, got {reader!r}")
        try:
            max_sample_mb = float(max_sample_mb)
        except (TypeError, ValueError):
            max_sample_mb = float("nan")
        if not max_sample_mb > 0:
            raise PrmkitError(f"inspect: max_sample_mb must be a number > 0, got {max_sample_mb!r}")
        options: dict[str, Any] = {"reader": reader}
        if scorer is not None:
            options["scorer"] = scorer
        if max_sample_mb != MAX_SAMPLE_MB:
            options["max_sample_mb"] = max_sample_mb
        super().__init__(**options)
        self.reader, self.scorer, self.max_sample_mb = reader, scorer, max_sample_mb
        #: The log without its samples (set by :meth:`read`): the run every sample belongs to.
        self.header: dict[str, Any] = {}

    @classmethod
    def detect(cls, record: Any) -> bool:
        ev = record.get("eval") if isinstance(record, dict) else None
        return isinstance(ev, dict) and "task" in ev and "model" in ev and "version" in record

    # -- reading ----------------------------------------------------------------------------------------
    def read(self, path: str | os.PathLike, *, skip_invalid: bool = False) -> Iterator[Trace]:
        """Stream one trace per sample of the log at ``path``; the import provenance and every error
        name the sample by its index (``samples[i]``)."""
        where = str(path)
        if not os.path.exists(where):
            raise PrmkitError(f"{where}: no such file")
        use_inspect = self.reader == "inspect_ai" or (self.reader == "auto" and _inspect_ai_available())
        if self.reader == "inspect_ai" and not _inspect_ai_available():
            raise MissingDependencyError("inspect-ai", "inspect",
                                         "reading Inspect logs with reader=inspect_ai")
        if where.endswith(".eval") and not use_inspect:
            if self.reader == "json":
                raise PrmkitError(f"{where}: an .eval log is a zip archive; reader=json reads .json logs "
                                  "only (use reader=auto with inspect_ai installed)")
            raise MissingDependencyError("inspect-ai", "inspect", f"reading {where} (an .eval log; "
                                         ".json logs are read without it)")
        samples = self._inspect_samples(where) if use_inspect else self._json_samples(where)
        yield from self.decode_records(samples, where, skip_invalid=skip_invalid, line_key="sample")

    def _json_samples(self, where: str) -> Iterator[tuple[int, Any]]:
        records = iter_json_records(where)
        try:
            line, log = next(records)
        except StopIteration:
            raise PrmkitError(f"{where}: empty file") from None
        f = Fields(log, path=where, line=line)
        if not self.detect(log):
            raise f.error(None, "not an Inspect log (expected an object with version and eval.task, "
                                "eval.model)")
        samples = f.list("samples", None, nullable=True) or []
        self.header = {k: v for k, v in log.items() if k != "samples"}
        if not samples:
            self.issue(f, "samples", _NO_SAMPLES)
        yield from enumerate(samples)

    def _inspect_samples(self, where: str) -> Iterator[tuple[int, Any]]:
        from inspect_ai.log import read_eval_log, read_eval_log_samples

        # A .json log is parsed whole either way: read it once. An .eval archive streams its samples.
        whole = not where.endswith(".eval")
        try:
            log = read_eval_log(where, header_only=not whole, resolve_attachments=whole)
        except Exception as e:  # inspect_ai's own errors (pydantic, zip, JSON) all mean: not a log
            raise FormatError(f"inspect_ai cannot read this log ({_first_line(e)})", path=where) from e
        self.header = log.model_dump(mode="json", exclude={"samples", "reductions"})
        samples = iter(log.samples or []) if whole else read_eval_log_samples(
            where, all_samples_required=False, resolve_attachments=True, exclude_fields=_UNREAD)
        i = 0
        try:
            for sample in samples:
                yield i, sample.model_dump(mode="json", exclude=_UNREAD | {"attachments"})
                i += 1
        except FormatError:
            raise
        except Exception as e:
            raise FormatError(f"inspect_ai cannot read this sample ({_first_line(e)})", path=where,
                              field=f"samples[{i}]") from e
        if i == 0:
            self.issue(Fields({}, path=where), "samples", _NO_SAMPLES)

    # -- one sample -------------------------------------------------------------------------------------
    def decode(self, f: Fields) -> list[Trace]:
        # ``f.line`` is the sample's index in the log: errors name it as a field, not as a line.
        s = Fields(f.obj, path=f.path, prefix=f"samples[{f.line}]" if f.line is not None else "")
        try:
            return [self._trace(s)]
        except FormatError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise s.error(None, f"cannot read sample ({type(e).__name__}: {e})") from e

    def _trace(self, s: Fields) -> Trace:
        ev = self.header.get("eval") if isinstance(self.header.get("eval"), dict) else {}
        sid = s.get("id", (str, int))
        epoch = s.get("epoch", int, 1)
        attachments = s.get("attachments", dict, {})
        task = ev.get("task") or (Path(s.path).stem if s.path else "inspect")

        chat: list[dict[str, Any]] = []
        origin: list[int] = []  # the Inspect message each chat message came from
        parse_errors: dict[tuple[int, int], str] = {}
        for j, m in enumerate(s.sub_list("messages")):
            for msg in self._chat(m, attachments, parse_errors, len(chat)):
                chat.append(msg)
                origin.append(j)
        size = sum(len(m.get("content") or "") + sum(len(c["function"]["arguments"])
                                                    for c in m.get("tool_calls") or []) for m in chat)
        if size > self.max_sample_mb * 2**20:
            # Inspect stores repeated text once, as an attachment each message refers to: a log of a
            # few KB can expand to gigabytes once every reference is written out in full.
            raise s.error("messages", f"the messages expand to {size / 2**20:.1f} MB with their attachments, "
                                      f"more than max_sample_mb={self.max_sample_mb:g} (raise it with "
                                      f"-o max_sample_mb=N, or skip such samples with --skip-invalid)")
        try:
            trace = messages_to_trace(chat, id=f"{task}:{sid}:{epoch}", source="inspect")
        except FormatError as e:  # every message was checked above; this names the converted one
            raise s.error("messages", f"{e.field}: {e.reason}") from e

        seen_text = False
        for step in trace.steps:
            at = step.meta["message"]
            step.meta["inspect_message"] = origin[at]
            if step.kind == "plan":  # as the agent environment: the first such text plans, later ones reason
                step.kind = "reasoning" if seen_text else "plan"
                seen_text = True
            if step.kind == "tool_call":
                step.meta["tool"] = step.meta["tool_call"]["function"]["name"]
                if (at, step.meta["index"]) in parse_errors:
                    step.meta["parse_error"] = parse_errors[at, step.meta["index"]]
        if not trace.steps:
            self.issue(s, "messages", "no assistant turn: the trace has no steps")

        inp = s.get("input", (str, list))
        if isinstance(inp, str):
            trace.problem.text = _resolve(inp, attachments, s, "input")
        target = s.get("target", (str, list), None)
        trace.problem.answer = target if isinstance(target, str) else None
        trace.problem.id = str(sid)

        scores = s.get("scores", (dict, type(None)), None) or {}
        scorer = self._scorer(s, scores, ev)
        if scorer is not None:
            sc = s.sub("scores").sub(scorer)
            answer = sc.get("answer", (str, int, float, type(None)), None)
            trace.final_answer = None if answer is None else str(answer)
            trace.outcome = _outcome(sc.obj.get("value"))
        error = s.get("error", (dict, str, type(None)), None)
        if isinstance(error, dict):  # kept: the message (the traceback, twice over with ANSI codes, is not)
            error = s.sub("error").str("message")
        if error is not None:
            self.issue(s, "error", f"the sample ended in an error: {(error.splitlines() or [''])[0]}")

        meta = {"eval_id": ev.get("eval_id"), "run_id": ev.get("run_id"), "task": ev.get("task"),
                "task_id": ev.get("task_id"), "model": ev.get("model"), "created": ev.get("created"),
                "sample_id": sid, "epoch": epoch, "uuid": s.obj.get("uuid"), "target": target,
                "scorer": scorer, "scores": {k: _score(v) for k, v in scores.items()} or None,
                "metadata": s.obj.get("metadata") or None, "error": error, "limit": s.obj.get("limit")}
        trace.meta["inspect"] = {k: v for k, v in meta.items() if v is not None}
        packages = ev.get("packages") if isinstance(ev.get("packages"), dict) else {}
        trace.add_provenance(GenerateProvenance(
            "inspect", policy=PolicyRef(backend="inspect", model=ev.get("model")),
            extra={k: v for k, v in {"task": ev.get("task"), "eval_id": ev.get("eval_id"),
                                     "run_id": ev.get("run_id"), "created": ev.get("created"),
                                     "inspect_ai": packages.get("inspect_ai")}.items()
                   if v is not None}))
        return trace

    def _scorer(self, s: Fields, scores: dict[str, Any], ev: dict[str, Any]) -> str | None:
        listed = [x.get("name") for x in ev.get("scorers") or [] if isinstance(x, dict)]
        if self.scorer is not None:
            if self.scorer in scores:
                return self.scorer
            if listed and self.scorer not in listed:  # a typo, not a sample left unscored
                raise s.error("scores", f"no scorer {self.scorer!r} in this log (its scorers: "
                                        f"{', '.join(map(str, listed))})")
            self.issue(s, "scores", f"no score from scorer {self.scorer!r}: outcome unknown")
            return None
        return next((n for n in listed if n in scores), next(iter(scores), None))

    def _chat(self, m: Fields, attachments: dict[str, Any], parse_errors: dict[tuple[int, int], str],
              at: int) -> list[dict[str, Any]]:
        """The OpenAI chat messages of one Inspect message (a reasoning block is one of its own,
        before the turn); ``at`` is the index the first of them will have."""
        role = m.str("role")
        if role not in _ROLES:
            raise m.error("role", f"unknown role {role!r}; known: {', '.join(_ROLES)}")
        text, reasoning = _content(m, attachments)
        if role == "system" or role == "user":
            return [{"role": role, "content": text}]
        if role == "tool":
            error = m.get("error", (dict, type(None)), None)
            if error is not None:
                why = m.sub("error").str("message")
                text = f"{text}\nerror: {why}" if text else f"error: {why}"
            msg: dict[str, Any] = {"role": "tool", "content": text}
            call_id = m.str("tool_call_id", None, nullable=True)
            if call_id is not None:
                msg["tool_call_id"] = call_id
            return [msg]
        out: list[dict[str, Any]] = [{"role": "assistant", "content": r} for r in reasoning]
        msg = {"role": "assistant", "content": text or None}
        calls = m.sub_list("tool_calls", nullable=True) if "tool_calls" in m.obj else None
        if calls:
            msg["tool_calls"] = []
            for k, c in enumerate(calls):
                args = c.get("arguments", (dict, str), {})
                args = _resolve(args, attachments, c, "arguments")
                fn = c.str("function")
                if (err := c.str("parse_error", None, nullable=True)) is not None:
                    parse_errors[at + len(out), k] = err
                msg["tool_calls"].append({
                    "id": c.str("id", None, nullable=True) or f"call_{at + len(out)}_{k}",
                    "type": "function",
                    "function": {"name": fn, "arguments": args if isinstance(args, str)
                                 else json.dumps(args, ensure_ascii=False)}})
        out.append(msg)
        return out


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def _content(m: Fields, attachments: dict[str, Any]) -> tuple[str, list[str]]:
    """The text of a message (its text parts joined by newlines, other parts as ``[type]``) and its
    reasoning blocks."""
    content = m.get("content", (str, list))
    if isinstance(content, str):
        return _resolve(content, attachments, m, "content"), []
    texts: list[str] = []
    reasoning: list[str] = []
    for p in m.sub_list("content"):
        kind = p.str("type")
        if kind == "text":
            texts.append(_resolve(p.str("text"), attachments, p, "text"))
        elif kind == "reasoning":
            text = "" if p.get("redacted", bool, False) else p.str("reasoning", "")
            text = text or p.str("summary", None, nullable=True) or ""
            if text:
                reasoning.append(_resolve(text, attachments, p, "reasoning"))
        else:
            texts.append(f"[{kind}]")
    return "\n".join(texts), reasoning


def _resolve(value: Any, attachments: dict[str, Any], f: Fields, key: str) -> Any:
    """``value`` with every ``attachment://HASH`` string replaced by the sample's attachment."""
    if isinstance(value, str):
        if not value.startswith(_ATTACHMENT):
            return value
        hash_ = value[len(_ATTACHMENT):]
        if not isinstance(attachments.get(hash_), str):
            raise f.error(key, f"refers to attachment {hash_!r}, which the sample's attachments lack")
        return attachments[hash_]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments, f, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, attachments, f, key) for v in value]
    return value


def _score(score: Any) -> Any:
    """A score as kept in ``meta``: without the fields left empty (None, an empty history), so a
    log read by ``inspect_ai`` (which fills them in) and read directly give the same record."""
    if not isinstance(score, dict):
        return score
    return {k: v for k, v in score.items() if v is not None and not (k == "history" and v == [])}


def _outcome(value: Any) -> str:
    if isinstance(value, str):
        return _LETTERS.get(value, "unknown")
    if isinstance(value, bool):
        return "correct" if value else "incorrect"
    if isinstance(value, (int, float)):
        return "correct" if value == 1 else "incorrect" if value == 0 else "unknown"
    return "unknown"
