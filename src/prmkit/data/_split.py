r"""Step splitters: cut a solution text into steps, each keeping the character span it came from.

A :class:`Splitter` has a ``name`` and ``split(text) -> list[Step]``. For every splitter here, and
every text:

- ``text[step.span[0]:step.span[1]] == step.text`` for every step;
- steps are in order and do not overlap; no step is empty, and a step's text has no whitespace at
  either end (its span points at the stripped text);
- whatever lies outside the spans is whitespace, so nothing but separators is dropped, and the text
  itself is kept as ``Trace.text`` (:func:`split_trace` does that).

Splitters are registered by name in :data:`SPLITTERS` (name -> ``"module:attr"``, imported on first
use) and made with :func:`get_splitter`:

- ``blank_line``: paragraphs separated by one or more blank lines;
- ``newline``: every non-empty line;
- ``step_marker``: a line starting with "Step 1:", "Step 2.", "## Step 3:", "**Step 4:**" (any
  case) starts a new step; the marker stays in the step, and text before the first marker is a
  step of its own;
- ``sentence``: sentence ends, never inside math (``$...$``, ``$$...$$``, ``\(...\)``, ``\[...\]``,
  ``\begin{...}...\end{...}``) or an Asymptote figure (``[asy]...[/asy]``), nor at a decimal point,
  an abbreviation ("e.g.", "i.e.", "Mr.", "Dr.", ...) or a list number ("1." at the start of a line
  or of a sentence).

Line breaks are ``\n``, ``\r\n`` and ``\r``.

Agent transcripts (OpenAI-style chat messages) are not cut from one text: :func:`messages_to_trace`
makes one step per message part, and :func:`trace_to_messages` gives the exact messages back.

>>> [s.text for s in get_splitter("blank_line").split("First.\n\n  Second.\n")]
['First.', 'Second.']
>>> trace = split_trace("We add. So 1 + 1 = 2.", "sentence", id="t", problem="1 + 1?")
>>> [(s.text, s.span) for s in trace.steps]
[('We add.', (0, 7)), ('So 1 + 1 = 2.', (8, 21))]
"""

from __future__ import annotations

import bisect
import copy
import json
import re
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from prmkit._fields import Fields
from prmkit._registry import Registry
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, Trace

__all__ = [
    "Splitter", "SPLITTERS", "get_splitter", "register_splitter", "split_trace",
    "BlankLineSplitter", "NewlineSplitter", "StepMarkerSplitter", "SentenceSplitter",
    "STEP_MARKER", "ABBREVIATIONS",
    "messages_to_trace", "trace_to_messages", "MESSAGE_ROLES",
]


@runtime_checkable
class Splitter(Protocol):
    """Cuts a text into steps whose spans point back into it (see the module docstring)."""

    name: str

    def split(self, text: str) -> list[Step]:
        """The steps of ``text``, in order, each with its ``span``."""
        ...


def _steps(text: str, pieces: Iterable[tuple[int, int]]) -> list[Step]:
    """Steps from ``(start, end)`` pieces of ``text``: each stripped (its span follows), blank
    pieces dropped."""
    steps = []
    for a, b in pieces:
        piece = text[a:b]
        stripped = piece.strip()  # str.strip's whitespace is str.isspace's: the same cut, in C
        if stripped:
            a += len(piece) - len(piece.lstrip())
            steps.append(Step(stripped, span=(a, a + len(stripped))))
    return steps


def _pieces(n: int, cuts: Iterable[int]) -> list[tuple[int, int]]:
    """The pieces of a text of length ``n`` cut at ``cuts``."""
    points = [0, *sorted(set(cuts)), n]
    return list(zip(points, points[1:], strict=False))


_BREAK = r"(?:\r\n|\r|\n)"
# Horizontal whitespace: any whitespace but a line break.
_HSPACE = r"[^\S\r\n]"


class _SeparatorSplitter:
    """Cuts at every match of ``_SEPARATOR`` (whitespace, which stripping the pieces removes)."""

    name = ""
    _SEPARATOR: re.Pattern[str]

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}

    def split(self, text: str) -> list[Step]:
        """The non-blank pieces of ``text`` between separators, each with its span."""
        return _steps(text, _pieces(len(text), (m.start() for m in self._SEPARATOR.finditer(text))))


class BlankLineSplitter(_SeparatorSplitter):
    """Paragraphs: one or more blank (or whitespace-only) lines end a step.

    >>> [s.text for s in BlankLineSplitter().split("a\\nb\\n \\n\\n c")]
    ['a\\nb', 'c']
    """

    name = "blank_line"
    _SEPARATOR = re.compile(rf"{_BREAK}(?:{_HSPACE}*{_BREAK})+")


class NewlineSplitter(_SeparatorSplitter):
    """Every non-empty line is a step.

    >>> [s.span for s in NewlineSplitter().split("a\\n\\n  b  \\r\\nc")]
    [(0, 1), (5, 6), (10, 11)]
    """

    name = "newline"
    _SEPARATOR = re.compile(_BREAK)


#: A step marker at the start of a line: "Step 1:", "Step 2.", "## Step 3:", "**Step 4:**",
#: "**Step 5**:", "Step 6 -", or "Step 7" alone on its line. A bare "Step 2 shows" is a sentence
#: that mentions a step, not a marker, hence the punctuation (or end of line) it requires.
STEP_MARKER = (
    rf"(?:\A|(?<=[\r\n])){_HSPACE}*(?:\#{{1,6}}{_HSPACE}*)?(?:\*\*|__|\*|_)?{_HSPACE}*"
    rf"step{_HSPACE}*\d+{_HSPACE}*(?:\*\*|__|\*|_)?{_HSPACE}*"
    rf"(?:[:.)\-\u2013\u2014]|(?={_HSPACE}*(?:[\r\n]|\Z)))"
)


class StepMarkerSplitter:
    r"""A step starts at each step marker (:data:`STEP_MARKER`, case-insensitive, at a line start).

    The marker stays in its step. Text before the first marker is a step of its own when it is not
    blank. ``pattern`` replaces the marker regex (compiled case-insensitive); a step starts where
    each of its matches starts.

    >>> text = "Let's see.\n## Step 1: add\n2+2=4\n**Step 2:** done"
    >>> [s.text for s in StepMarkerSplitter().split(text)]
    ["Let's see.", '## Step 1: add\n2+2=4', '**Step 2:** done']
    """

    name = "step_marker"

    def __init__(self, pattern: str | None = None) -> None:
        self.options: dict[str, Any] = {} if pattern is None else {"pattern": pattern}
        try:
            self._marker = re.compile(pattern or STEP_MARKER, re.IGNORECASE)
        except re.error as e:
            raise PrmkitError(f"step_marker: invalid pattern {pattern!r}: {e}") from None

    def split(self, text: str) -> list[Step]:
        """The steps of ``text``: the preamble (when not blank), then one per marker."""
        return _steps(text, _pieces(len(text), (m.start() for m in self._marker.finditer(text))))


#: Words whose period does not end a sentence (lower case, without the final period).
ABBREVIATIONS: frozenset[str] = frozenset({
    "e.g", "i.e", "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "cf", "viz", "al",
    "fig", "figs", "eq", "eqs", "approx", "resp", "thm",
})
# Left out on purpose, because they end sentences in solutions more often than they abbreviate:
# "no" ("The answer is no."), "etc.", "sec" ("in 5 sec."), single capitals ("at point A.").


_BEGIN = re.compile(r"\\begin\{([^{}\s]+)\}")
_CLOSER = re.compile(r"(?:\$\$?|\\\)|\\\]|\\end\{[^{}\s]+\})\Z")
_BLANK_LINE = re.compile(rf"{_BREAK}{_HSPACE}*{_BREAK}")


def _find_math(text: str) -> list[tuple[int, int]]:
    r"""The spans of the math in ``text``: ``$$...$$``, ``$...$``, ``\(...\)``, ``\[...\]`` and
    ``\begin{env}...\end{env}``, and Asymptote figures (``[asy]...[/asy]``), in order and disjoint.

    An inline ``$`` follows Pandoc's rule, so prices are not read as math: the opening ``$`` has a
    non-space right after it, the closing one a non-space right before it and no digit right after
    it; the first ``$`` after an opening one must close it (or the opening one is a plain dollar),
    and inline math does not cross a blank line. An escaped ``\$`` is a dollar. An opener that
    never closes is plain text.
    """
    spans = []
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == "\\":
            two = text[i:i + 2]
            close = {"\\(": "\\)", "\\[": "\\]"}.get(two)
            if close:
                j = text.find(close, i + 2)
                if j >= 0:
                    spans.append((i, j + 2))
                    i = j + 2
                    continue
            env = _BEGIN.match(text, i)
            if env:
                end = text.find(f"\\end{{{env.group(1)}}}", env.end())
                if end >= 0:
                    stop = end + len(env.group(1)) + 6
                    spans.append((i, stop))
                    i = stop
                    continue
            i += 2  # an escaped character (\$, \{, \\ ...) or a macro's backslash
            continue
        if c == "[" and text.startswith("[asy]", i):
            # An Asymptote figure (MATH, PRM800K): code, whose periods and blank lines end nothing.
            j = text.find("[/asy]", i + 5)
            if j >= 0:
                spans.append((i, j + 6))
                i = j + 6
                continue
        if c == "$":
            if text.startswith("$$", i):
                j = i + 2
                while j < n and not text.startswith("$$", j):
                    j += 2 if text[j] == "\\" else 1
                if j < n:
                    spans.append((i, j + 2))
                    i = j + 2
                else:
                    i += 2
                continue
            j = _inline_math_end(text, i)
            if j is not None:
                spans.append((i, j + 1))
                i = j + 1
                continue
        i += 1
    return spans


def _inline_math_end(text: str, start: int) -> int | None:
    """Index of the ``$`` closing the inline math opened at ``start``, or None (see _find_math)."""
    n = len(text)
    if start + 1 >= n or text[start + 1].isspace():
        return None
    j = start + 1
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c in "\r\n" and _BLANK_LINE.match(text, j):
            return None  # a blank line: inline math never spans paragraphs
        if c == "$":
            closes = not text[j - 1].isspace() and not (j + 1 < n and text[j + 1].isdigit())
            return j if closes else None
        j += 1
    return None


class SentenceSplitter:
    r"""Sentences: a step ends after ``.``, ``!`` or ``?`` (and any closing quote or bracket) that
    is followed by whitespace, and at every blank line.

    Not a sentence end: anything inside math (see :func:`_find_math`); a decimal point (no space
    follows it); an abbreviation in ``abbreviations`` (default :data:`ABBREVIATIONS`); a list
    number ("1." first on its line or in its sentence); an ellipsis ("..."); a factorial
    ("5! = 120"). A math span whose own text ends a sentence (``\[x = 5.\]``) ends one too; a
    display does even with no space after it. With ``newline=True`` every line break outside math
    also ends a step.

    >>> s = SentenceSplitter()
    >>> [x.text for x in s.split("We get $x = 3.5$. Then, e.g. Dr. Li adds 2. Done!")]
    ['We get $x = 3.5$.', 'Then, e.g. Dr. Li adds 2.', 'Done!']
    >>> [x.text for x in s.split("Steps:\n1. Add. 2. Check.\n\nSo \\[y = 1.\\] Next.")]
    ['Steps:\n1. Add.', '2. Check.', 'So \\[y = 1.\\]', 'Next.']
    """

    name = "sentence"
    _END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s)")
    _PARAGRAPH = re.compile(rf"{_BREAK}(?:{_HSPACE}*{_BREAK})+")
    _LINE = re.compile(_BREAK)

    def __init__(self, abbreviations: Iterable[str] | None = None, newline: bool = False) -> None:
        self.options: dict[str, Any] = {}
        if abbreviations is not None:
            self.options["abbreviations"] = sorted(abbreviations)
        if newline:
            self.options["newline"] = True
        self.abbreviations = (ABBREVIATIONS if abbreviations is None
                              else frozenset(a.lower().rstrip(".") for a in abbreviations))
        self.newline = newline

    def split(self, text: str) -> list[Step]:
        """The sentences of ``text`` (paragraph breaks end them too), each with its span."""
        math = _find_math(text)
        inside = _Intervals(math)
        cuts = []
        for a, b in math:
            # A display whose own text ends a sentence ends one, even when the next sentence
            # follows without a space (MATH writes "\\[x = 5.\\]So ..."); inline math needs one.
            span = text[a:b]
            if span.startswith("[asy]"):
                continue
            body = _CLOSER.sub("", span).rstrip()
            display = span.startswith(("$$", "\\[", "\\begin"))
            if body.endswith((".", "!", "?")) and (display or b == len(text) or text[b].isspace()):
                cuts.append(b)
        for m in (self._LINE if self.newline else self._PARAGRAPH).finditer(text):
            if not inside(m.start()):
                cuts.append(m.start())
        cuts.sort()
        # Sentence ends, left to right: whether "1." is a list number depends on where the
        # sentence it stands in began, that is on the cuts made before it.
        for m in self._END.finditer(text):
            if inside(m.start()):
                continue
            k = bisect.bisect_right(cuts, m.start())
            sentence_start = cuts[k - 1] if k else 0
            if self._ends_sentence(text, m.start(), m.group(0), sentence_start):
                cuts.insert(k, m.end())
        return _steps(text, _pieces(len(text), cuts))

    def _ends_sentence(self, text: str, at: int, mark: str, sentence_start: int) -> bool:
        """Whether the terminator run ``mark`` found at ``at`` ends a sentence that began at
        ``sentence_start``."""
        run = mark.rstrip("\"'\u201d\u2019)]")
        if len(run) > 1 and set(run) == {"."}:
            return False  # an ellipsis
        line_start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
        word_start = at
        while word_start > line_start and not text[word_start - 1].isspace():
            word_start -= 1
        word = text[word_start:at].lstrip("([{\"'\u201c\u2018*")
        if run == "!" and (word[-1:].isdigit() or word.endswith(")")
                           or (len(word) == 1 and word.isalpha())):
            return False  # a factorial: 5!, n! or (n+1)!
        if run != ".":
            return True
        if word.lower() in self.abbreviations:
            return False
        # A list number ("1.") is the first word of its line or of its sentence.
        first = not text[max(line_start, sentence_start):word_start].strip()
        return not (first and word.isdigit())


class _Intervals:
    """Membership in sorted disjoint half-open intervals, by bisection."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.starts = [a for a, _ in spans]
        self.spans = spans

    def __call__(self, pos: int) -> bool:
        k = bisect.bisect_right(self.starts, pos) - 1
        return k >= 0 and pos < self.spans[k][1]


# -- registry ------------------------------------------------------------------------------------------

#: name -> "module:attr", imported on first use.
SPLITTERS = Registry("splitter", {
    "blank_line": "prmkit.data._split:BlankLineSplitter",
    "newline": "prmkit.data._split:NewlineSplitter",
    "step_marker": "prmkit.data._split:StepMarkerSplitter",
    "sentence": "prmkit.data._split:SentenceSplitter",
}, group="prmkit.splitters")


def register_splitter(name: str, target: str) -> None:
    """Register a splitter class (or factory) under ``name`` as ``"module:attr"``."""
    SPLITTERS.register(name, target)


def get_splitter(name: str, **options: Any) -> Splitter:
    """The splitter registered as ``name``, made with ``options``.

    >>> get_splitter("sentence", newline=True).options
    {'newline': True}
    """
    return SPLITTERS.create(name, **options)


def split_trace(text: str, splitter: str | Splitter = "blank_line", *, id: str,
                problem: Problem | str, **trace_fields: Any) -> Trace:
    """A trace of ``text`` cut into steps by ``splitter`` (a name or a :class:`Splitter`).

    The trace keeps ``text`` (so every span can be checked against it) and records the split in its
    provenance; ``trace_fields`` are further :class:`~prmkit.trace.Trace` fields (``final_answer``,
    ``source``, ``meta``, ...).

    >>> t = split_trace("a\\n\\nb", id="t1", problem="q", source="demo")
    >>> [s.text for s in t.steps], t.text, t.provenance[0].name
    (['a', 'b'], 'a\\n\\nb', 'blank_line')
    """
    if isinstance(splitter, str):
        splitter = get_splitter(splitter)
    if isinstance(problem, str):
        problem = Problem(problem)
    trace = Trace(id=id, problem=problem, steps=splitter.split(text), text=text, **trace_fields)
    trace.add_provenance("split", splitter.name, dict(getattr(splitter, "options", {})))
    return trace


# -- agent transcripts ---------------------------------------------------------------------------------

#: Roles a chat message may have ("developer" is OpenAI's newer name for "system").
MESSAGE_ROLES: tuple[str, ...] = ("system", "developer", "user", "assistant", "tool")
_META_KEY = "messages"


def _content_text(content: Any) -> str | None:
    """The text of a message content: the string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type") == "text" and isinstance(
                           p.get("text"), str))
    return None


def _check_message(f: Fields, in_prefix: bool) -> tuple[str, list[dict[str, Any]]]:
    """The role and tool calls of one message; malformed parts raise a located FormatError."""
    role = f.str("role")
    if role not in MESSAGE_ROLES:
        raise f.error("role", f"unknown role {role!r}; known: {', '.join(MESSAGE_ROLES)}")
    if in_prefix:
        f.get("content", (str, list, type(None)), None)
    else:
        # Content parts (lists) are kept only in the prompt, which is stored verbatim; a step's text
        # is one string, which could not give the parts back.
        f.str("content", None, nullable=True)
    if f.obj.get("tool_calls") is None:
        return role, []
    if role != "assistant":
        raise f.error("tool_calls", f"only assistant messages make tool calls, not {role!r}")
    calls = f.sub_list("tool_calls")
    for call in calls:
        fn = call.sub("function")
        fn.str("name")
        fn.get("arguments", (str, dict), None)
        call.str("id", None)
        call.str("type", None)
    return role, f.obj["tool_calls"]


def _render_call(call: dict[str, Any]) -> str:
    """A readable one-line form of a tool call: ``name(arguments)``."""
    fn = call["function"]
    args = fn.get("arguments", "")
    if isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)
    return f"{fn['name']}({args})"


def messages_to_trace(messages: list[dict[str, Any]], *, id: str,
                      source: str | None = None) -> Trace:
    """A trace of an agent transcript in OpenAI chat format.

    The messages before the first assistant message (system, developer, user) are the prompt: the
    problem's text is the user content (several user messages joined by a blank line) and the
    messages themselves are kept in ``trace.meta["messages"]["prefix"]``. After it:

    - an assistant message with tool calls: a ``plan`` step for its content (when not empty), then
      one ``tool_call`` step per call (text ``name(arguments)``, the call itself in
      ``step.meta["tool_call"]``);
    - the last assistant message, when it makes no tool call: a ``final`` step; an earlier assistant
      message without tool calls: a ``reasoning`` step;
    - a tool message, or any later user or system message (input the agent received): an
      ``observation`` step.

    Each step's ``meta`` says where it came from (``message`` index, ``role``, ``field``, and
    ``index`` for a tool call); its ``span`` is None, as there is no single source text. Null or
    empty contents make no step. The rest of each message (ids, names, unknown keys) is kept in
    ``trace.meta["messages"]["rest"]``, so :func:`trace_to_messages` gives back the exact messages.
    Malformed messages raise :class:`FormatError` naming the field
    (``messages[3].tool_calls[0].function.name``).

    >>> t = messages_to_trace([
    ...     {"role": "user", "content": "2+2?"},
    ...     {"role": "assistant", "content": "Let me compute.", "tool_calls": [{"id": "c1",
    ...      "type": "function", "function": {"name": "calc", "arguments": '{"x": "2+2"}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ...     {"role": "assistant", "content": "It is 4."}], id="a1")
    >>> t.problem.text
    '2+2?'
    >>> for s in t.steps:
    ...     print(s.kind, s.text)
    plan Let me compute.
    tool_call calc({"x": "2+2"})
    observation 4
    final It is 4.
    """
    if not isinstance(messages, list):
        raise FormatError(f"expected a list of messages, got {type(messages).__name__}",
                          field="messages")
    first_assistant = next((i for i, m in enumerate(messages)
                            if isinstance(m, dict) and m.get("role") == "assistant"), len(messages))
    checked = [_check_message(Fields(m, prefix=f"messages[{i}]"), i < first_assistant)
               for i, m in enumerate(messages)]
    last_assistant = max((i for i, (role, _) in enumerate(checked) if role == "assistant"),
                         default=-1)

    prefix = copy.deepcopy(messages[:first_assistant])
    users = [_content_text(m.get("content")) for m in prefix if m["role"] == "user"]
    problem = Problem("\n\n".join(u for u in users if u))

    steps: list[Step] = []
    rest: list[dict[str, Any]] = []
    for i in range(first_assistant, len(messages)):
        message = copy.deepcopy(messages[i])
        role, calls = checked[i]
        content = message.get("content")
        where = {"message": i, "role": role}
        if isinstance(content, str) and content:
            if role == "assistant" and calls:
                kind = "plan"
            elif role == "assistant":
                kind = "final" if i == last_assistant else "reasoning"
            else:
                kind = "observation"
            meta = {**where, "field": "content"}
            if role == "tool" and isinstance(message.get("tool_call_id"), str):
                meta["tool_call_id"] = message["tool_call_id"]
            steps.append(Step(content, kind=kind, meta=meta))
            message["content"] = None  # held by the step; trace_to_messages puts it back
        for j, call in enumerate(calls):
            steps.append(Step(_render_call(call), kind="tool_call",
                              meta={**where, "field": "tool_calls", "index": j,
                                    "tool_call": copy.deepcopy(call)}))
        if calls:
            message["tool_calls"] = None
        rest.append(message)
    trace = Trace(id=id, problem=problem, steps=steps, source=source,
                  meta={_META_KEY: {"prefix": prefix, "rest": rest}})
    trace.add_provenance("split", "messages")
    return trace


def trace_to_messages(trace: Trace) -> list[dict[str, Any]]:
    """The chat messages of ``trace``: ``trace_to_messages(messages_to_trace(m)) == m``.

    Step texts are the source of truth for the contents they came from, so an edited step shows in
    the messages; tool calls come from ``step.meta["tool_call"]``. A trace that was not made from
    messages becomes a user message (the problem) and one assistant message (the trace's text, or
    its steps joined by blank lines); it may then hold no tool-call or observation step.

    >>> m = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "x": 1}]
    >>> trace_to_messages(messages_to_trace(m, id="c")) == m
    True
    """
    record = trace.meta.get(_META_KEY)
    if record is None:
        agentic = [s.kind for s in trace.steps if s.kind in ("tool_call", "observation")]
        if agentic:
            raise PrmkitError(f"trace {trace.id}: {agentic[0]} steps need the messages they came "
                              "from (trace.meta['messages'], made by messages_to_trace)")
        text = trace.text if trace.text is not None else "\n\n".join(s.text for s in trace.steps)
        return [{"role": "user", "content": trace.problem.text},
                {"role": "assistant", "content": text}]
    try:
        out = copy.deepcopy(record["prefix"]) + copy.deepcopy(record["rest"])
        calls: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for k, step in enumerate(trace.steps):
            at, field = step.meta["message"], step.meta["field"]
            if not isinstance(at, int) or not 0 <= at < len(out):
                raise PrmkitError(f"trace {trace.id}: step {k} points at message {at!r}, "
                                  f"which the trace does not have")
            if field == "content":
                out[at]["content"] = step.text
            elif field == "tool_calls":
                calls.setdefault(at, []).append((step.meta["index"],
                                                 copy.deepcopy(step.meta["tool_call"])))
            else:
                raise PrmkitError(f"trace {trace.id}: step {k} comes from unknown field {field!r}")
    except (KeyError, TypeError) as e:
        raise PrmkitError(f"trace {trace.id}: trace.meta['messages'] or a step's meta is not what "
                          f"messages_to_trace wrote ({type(e).__name__}: {e})") from None
    for at, indexed in calls.items():
        out[at]["tool_calls"] = [call for _, call in sorted(indexed, key=lambda x: x[0])]
    return out
