"""Step splitters and agent transcripts: span invariants (property tests) and hand-derived examples."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prmkit.data._split import (
    SPLITTERS,
    STEP_MARKER,
    BlankLineSplitter,
    NewlineSplitter,
    SentenceSplitter,
    Splitter,
    StepMarkerSplitter,
    _find_math,
    get_splitter,
    messages_to_trace,
    register_splitter,
    split_trace,
    trace_to_messages,
)
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, Trace

# -- the invariants every splitter keeps ---------------------------------------------------------------


def check_steps(text: str, steps: list[Step]) -> None:
    """Spans hold their text, are ordered and disjoint; steps are stripped and non-empty; only
    whitespace lies outside the spans."""
    pos = 0
    for s in steps:
        assert s.span is not None
        a, b = s.span
        assert pos <= a < b <= len(text)
        assert text[a:b] == s.text
        assert s.text == s.text.strip()
        assert text[pos:a].strip() == "", f"non-whitespace dropped before {s.span}: {text[pos:a]!r}"
        assert s.kind == "reasoning"
        pos = b
    assert text[pos:].strip() == ""


# Pieces that exercise each splitter's rules, glued by random separators.
PIECES = [
    "word", "The sum is 12.", "x", "3.14", "e.g.", "i.e.", "Mr.", "Dr.", "1.", "2.", "etc.", "...",
    "5!", "Done!", "Why?", "$x = 1. Y$", "$$a. B$$", r"\(p. Q\)", r"\[r. S.\]", "$", "$5", r"\$",
    "Step 1:", "## Step 2.", "**Step 3:**", "step 4", "Step 5 shows", "#### 72",
    "\\begin{align}a. B\\end{align}", "[asy]a. B\n\nc[/asy]", "[asy]",
    '"Hi."', "(see below.)", "\u00e9t\u00e9", "\u2028", "\u00a0",
]
SEPARATORS = [" ", "  ", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\t", " \n \t\n", "\n\n\n", ""]
texts = st.one_of(
    st.text(max_size=80),
    st.lists(st.tuples(st.sampled_from(PIECES) | st.text(max_size=4), st.sampled_from(SEPARATORS)),
             max_size=25).map(lambda parts: "".join(p + sep for p, sep in parts)),
)
LINE_BREAK = re.compile(r"\r\n|\r|\n")


@given(texts)
def test_blank_line_invariants(text):
    steps = BlankLineSplitter().split(text)
    check_steps(text, steps)
    paragraphs = re.split(r"(?:\r\n|\r|\n)(?:[^\S\r\n]*(?:\r\n|\r|\n))+", text)
    assert [s.text for s in steps] == [p.strip() for p in paragraphs if p.strip()]


@given(texts)
def test_newline_invariants(text):
    steps = NewlineSplitter().split(text)
    check_steps(text, steps)
    assert [s.text for s in steps] == [ln.strip() for ln in LINE_BREAK.split(text) if ln.strip()]


@given(texts)
def test_step_marker_invariants(text):
    steps = StepMarkerSplitter().split(text)
    check_steps(text, steps)
    markers = [m.start() for m in re.finditer(STEP_MARKER, text, re.IGNORECASE)]
    before = text[:markers[0]] if markers else text
    assert len(steps) == len(markers) + (1 if before.strip() else 0)
    # Every step after the preamble starts at a marker (the marker stays in the step).
    for s in steps[len(steps) - len(markers):]:
        assert re.match(r"[#*_ \t]*step", s.text, re.IGNORECASE)


@given(texts)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_sentence_invariants(text):
    steps = SentenceSplitter().split(text)
    check_steps(text, steps)
    # No cut inside math: every math span lies inside one step.
    for a, b in _find_math(text):
        assert any(s.span[0] <= a and b <= s.span[1] for s in steps), (a, b)
    newline_steps = SentenceSplitter(newline=True).split(text)
    check_steps(text, newline_steps)


# -- hand-derived examples -----------------------------------------------------------------------------


def texts_of(splitter: Splitter, text: str) -> list[str]:
    steps = splitter.split(text)
    check_steps(text, steps)
    return [s.text for s in steps]


def test_blank_line_examples():
    text = "Step one.\nStill one.\n\n\nStep two.\n \t\nStep three.\n"
    assert texts_of(BlankLineSplitter(), text) == ["Step one.\nStill one.", "Step two.", "Step three."]
    assert [s.span for s in BlankLineSplitter().split(text)] == [(0, 20), (23, 32), (36, 47)]
    assert texts_of(BlankLineSplitter(), "a\r\n\r\nb") == ["a", "b"]
    assert texts_of(BlankLineSplitter(), "  \n\n ") == []
    assert texts_of(BlankLineSplitter(), "") == []


def test_newline_examples():
    assert texts_of(NewlineSplitter(), "  a \n\nb\r\nc\rd\n") == ["a", "b", "c", "d"]
    assert [s.span for s in NewlineSplitter().split("  a \n\nb")] == [(2, 3), (6, 7)]


def test_step_marker_examples():
    text = ("Let me think.\n\nStep 1: Add 2 and 2.\n2 + 2 = 4.\nStep 2. Double it.\n"
            "## Step 3: Check\n**Step 4:** Answer 8.\n  step 5 - note\nStep 6\nIn Step 2 we doubled.")
    assert texts_of(StepMarkerSplitter(), text) == [
        "Let me think.",
        "Step 1: Add 2 and 2.\n2 + 2 = 4.",
        "Step 2. Double it.",
        "## Step 3: Check",
        "**Step 4:** Answer 8.",
        "step 5 - note",
        "Step 6\nIn Step 2 we doubled.",  # a mention mid-line is not a marker
    ]
    # No text before the first marker: no preamble step.
    assert texts_of(StepMarkerSplitter(), "Step 1: a\nStep 2: b") == ["Step 1: a", "Step 2: b"]
    # "Step 3 shows" is a sentence, not a marker; without markers the text is one step.
    assert texts_of(StepMarkerSplitter(), "Step 3 shows it.\nok") == ["Step 3 shows it.\nok"]
    assert texts_of(StepMarkerSplitter(), "**Step 5**: bold") == ["**Step 5**: bold"]


def test_step_marker_custom_pattern():
    splitter = StepMarkerSplitter(pattern=r"^(?=\d+\.)")  # numbered lines
    text = "Intro\n1. a\n2. b"
    assert re.compile(r"^(?=\d+\.)") and texts_of(splitter, text) == ["Intro\n1. a\n2. b"]
    splitter = StepMarkerSplitter(pattern=r"(?m)^(?=\d+\.)")
    assert texts_of(splitter, text) == ["Intro", "1. a", "2. b"]
    assert splitter.options == {"pattern": r"(?m)^(?=\d+\.)"}
    with pytest.raises(PrmkitError, match="invalid pattern"):
        StepMarkerSplitter(pattern="(")


@pytest.mark.parametrize(("text", "expected"), [
    ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
    ("Pi is 3.14. Next.", ["Pi is 3.14.", "Next."]),
    ("Use e.g. this, i.e. that. Then Mr. and Dr. Smith left.",
     ["Use e.g. this, i.e. that.", "Then Mr. and Dr. Smith left."]),
    ("We list:\n1. Add.\n2. Subtract.", ["We list:\n1. Add.", "2. Subtract."]),
    ("So $x = 1. Then y$ holds. Next.", ["So $x = 1. Then y$ holds.", "Next."]),
    ("We have $$a. B$$ and more. End.", ["We have $$a. B$$ and more.", "End."]),
    (r"Here \(p. Q\) holds. End.", [r"Here \(p. Q\) holds.", "End."]),
    (r"So \[x = 5.\] Then y.", [r"So \[x = 5.\]", "Then y."]),   # the display ends the sentence
    (r"So \[x = 5\] and y. End.", [r"So \[x = 5\] and y.", "End."]),
    (r"So \[x = 5.\]Then y.", [r"So \[x = 5.\]", "Then y."]),  # MATH's display, no space after
    ("So $x = 5.$Then y.", ["So $x = 5.$Then y."]),               # inline math needs the space
    ("See [asy]\ndraw(a. B);\n\nlabel(c);\n[/asy] Then. End.",
     ["See [asy]\ndraw(a. B);\n\nlabel(c);\n[/asy] Then.", "End."]),
    ("It costs $5. Then he pays $6. Done.", ["It costs $5.", "Then he pays $6.", "Done."]),
    (r"It costs \$5. Then more.", [r"It costs \$5.", "Then more."]),
    ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
    ("Wait... then 5! = 120. Yes.", ["Wait... then 5! = 120.", "Yes."]),
    ("First para\nsame para.\n\nSecond para", ["First para\nsame para.", "Second para"]),
    ("\\begin{align}\na &= 1. \\\\\nb &= 2.\n\\end{align}\nDone.",
     ["\\begin{align}\na &= 1. \\\\\nb &= 2.\n\\end{align}", "Done."]),
    ("\\begin{align}\na &= 1. \\\\\nb &= 2\n\\end{align}\nso done.",
     ["\\begin{align}\na &= 1. \\\\\nb &= 2\n\\end{align}\nso done."]),
    ("", []),
])
def test_sentence_examples(text, expected):
    assert texts_of(SentenceSplitter(), text) == expected


def test_sentence_options():
    assert texts_of(SentenceSplitter(newline=True), "a\nb $x\ny$. c") == ["a", "b $x\ny$.", "c"]
    custom = SentenceSplitter(abbreviations=["approx."])
    assert texts_of(custom, "It is approx. 5. Mr. X") == ["It is approx. 5.", "Mr.", "X"]
    assert custom.options == {"abbreviations": ["approx."]}


# -- registry and split_trace --------------------------------------------------------------------------


def test_registry_makes_each_splitter_by_name():
    assert set(SPLITTERS) == {"blank_line", "newline", "step_marker", "sentence"}
    for name in SPLITTERS:
        splitter = get_splitter(name)
        assert splitter.name == name
        assert isinstance(splitter, Splitter)


def test_unknown_splitter_lists_the_known_ones():
    with pytest.raises(PrmkitError, match="known: blank_line, newline, sentence, step_marker"):
        get_splitter("paragraph")
    with pytest.raises(PrmkitError, match="splitter 'newline'"):
        get_splitter("newline", width=3)


def test_register_splitter(monkeypatch):
    monkeypatch.setitem(SPLITTERS, "lines", "")
    register_splitter("lines", "prmkit.data._split:NewlineSplitter")
    assert get_splitter("lines").split("a\nb")[1].text == "b"


def test_split_trace_keeps_the_text_and_records_the_split():
    text = "We add.\n\nSo 2 + 2 = 4.\n\n# Answer\n\n4"
    trace = split_trace(text, "blank_line", id="t1", problem=Problem("2+2?", answer="4"),
                        final_answer="4", source="unit")
    assert [s.text for s in trace.steps] == ["We add.", "So 2 + 2 = 4.", "# Answer", "4"]
    assert trace.text == text and trace.final_answer == "4" and trace.source == "unit"
    trace.check_spans()
    assert (trace.provenance[0].stage, trace.provenance[0].name) == ("split", "blank_line")
    assert Trace.from_dict(trace.to_dict()) == trace
    sentences = split_trace(text, get_splitter("sentence", newline=True), id="t2", problem="q")
    assert sentences.provenance[0].args == {"newline": True}
    assert sentences.problem == Problem("q")


# -- agent transcripts ---------------------------------------------------------------------------------


def call(id_: str, name: str, arguments: str) -> dict:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


AGENT = [
    {"role": "system", "content": "You are a careful agent."},
    {"role": "user", "content": "What is 17 * 23?"},
    {"role": "assistant", "content": "I will use the calculator twice.",
     "tool_calls": [call("c1", "calc", '{"e": "17*23"}'), call("c2", "calc", '{"e": "23*17"}')]},
    {"role": "tool", "tool_call_id": "c1", "content": "391"},
    {"role": "tool", "tool_call_id": "c2", "content": "391", "name": "calc"},
    {"role": "assistant", "content": None, "tool_calls": [call("c3", "check", "391")]},
    {"role": "tool", "tool_call_id": "c3", "content": ""},
    {"role": "assistant", "content": "Both agree."},
    {"role": "assistant", "content": "17 * 23 = 391.", "refusal": None},
    {"role": "user", "content": "Thanks!"},
]


def test_messages_to_trace_example():
    trace = messages_to_trace(AGENT, id="a1", source="demo-agent")
    assert trace.problem.text == "What is 17 * 23?"
    assert trace.meta["messages"]["prefix"] == AGENT[:2]
    assert [(s.kind, s.text) for s in trace.steps] == [
        ("plan", "I will use the calculator twice."),
        ("tool_call", 'calc({"e": "17*23"})'),
        ("tool_call", 'calc({"e": "23*17"})'),
        ("observation", "391"),
        ("observation", "391"),
        ("tool_call", "check(391)"),           # no plan step: the content is null
        # message 6: an empty tool result makes no step
        ("reasoning", "Both agree."),
        ("final", "17 * 23 = 391."),
        ("observation", "Thanks!"),            # after the final answer: input the agent received
    ]
    assert all(s.span is None for s in trace.steps)
    assert trace.steps[1].meta == {"message": 2, "role": "assistant", "field": "tool_calls",
                                   "index": 0, "tool_call": AGENT[2]["tool_calls"][0]}
    assert trace.steps[4].meta == {"message": 4, "role": "tool", "field": "content",
                                   "tool_call_id": "c2"}
    assert trace.source == "demo-agent" and trace.text is None
    assert trace_to_messages(trace) == AGENT
    assert trace_to_messages(Trace.from_dict(json.loads(json.dumps(trace.to_dict())))) == AGENT


def test_a_trajectory_ending_in_a_tool_call_has_no_final_step():
    messages = AGENT[:3]
    trace = messages_to_trace(messages, id="a2")
    assert "final" not in [s.kind for s in trace.steps]
    assert trace_to_messages(trace) == messages


def test_prompt_content_parts_are_kept():
    messages = [{"role": "user", "content": [{"type": "text", "text": "Describe "},
                                             {"type": "image_url", "image_url": {"url": "x"}},
                                             {"type": "text", "text": "this."}]},
                {"role": "assistant", "content": "A cat."}]
    trace = messages_to_trace(messages, id="m")
    assert trace.problem.text == "Describe this."
    assert trace_to_messages(trace) == messages


def test_edited_steps_show_in_the_messages():
    trace = messages_to_trace(AGENT, id="a1")
    trace.steps[-2].text = "It is 391."
    assert trace_to_messages(trace)[8]["content"] == "It is 391."


def test_trace_not_made_from_messages_becomes_a_prompt_and_a_reply():
    trace = split_trace("a\n\nb", id="t", problem="q")
    assert trace_to_messages(trace) == [{"role": "user", "content": "q"},
                                        {"role": "assistant", "content": "a\n\nb"}]
    trace.steps[0].kind = "tool_call"
    with pytest.raises(PrmkitError, match="tool_call steps need the messages"):
        trace_to_messages(trace)


@pytest.mark.parametrize(("messages", "field"), [
    ("not a list", "messages"),
    (["hi"], "messages[0]"),
    ([{"content": "x"}], "messages[0].role"),
    ([{"role": 3}], "messages[0].role"),
    ([{"role": "bot", "content": "x"}], "messages[0].role"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text"}]}],
     "messages[1].content"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": {}}],
     "messages[1].tool_calls"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": ["x"]}],
     "messages[1].tool_calls[0]"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"id": "c"}]}],
     "messages[1].tool_calls[0].function"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None},
      {"role": "user", "content": "go"},
      {"role": "assistant", "tool_calls": [call("a", "f", "{}"), {"function": {"arguments": "{}"}}]}],
     "messages[3].tool_calls[1].function.name"),
    ([{"role": "user", "content": "q"},
      {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}],
     "messages[1].tool_calls[0].function.arguments"),
    ([{"role": "user", "content": "q"},
      {"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}}]}],
     "messages[1].tool_calls[0].id"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
      {"role": "tool", "content": "r", "tool_calls": [call("a", "f", "{}")]}],
     "messages[2].tool_calls"),
])
def test_malformed_messages_name_the_field(messages, field):
    with pytest.raises(FormatError) as err:
        messages_to_trace(messages, id="bad")
    assert err.value.field == field


# Random transcripts: every role, null and empty contents, several calls per message, unknown extra
# keys (in messages and in calls), messages after the final answer.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)
extras = st.dictionaries(st.text(min_size=1, max_size=6).filter(
    lambda k: k not in ("role", "content", "tool_calls")), json_values, max_size=2)
contents = st.none() | st.text(max_size=12)
tool_calls = st.builds(
    lambda id_, name, args, extra: {"id": id_, "type": "function",
                                    "function": {"name": name, "arguments": args}, **extra},
    st.text(max_size=4), st.text(min_size=1, max_size=6), st.text(max_size=12) | st.dictionaries(
        st.text(max_size=3), st.integers(), max_size=2), extras)


@st.composite
def message(draw, roles=("system", "developer", "user", "assistant", "tool"), parts=False):
    m = {"role": draw(st.sampled_from(roles))}
    if draw(st.booleans()):
        options = contents
        if parts:
            options = options | st.lists(st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image_url"]), "text": st.text(max_size=5)}),
                max_size=3)
        m["content"] = draw(options)
    if m["role"] == "assistant":
        choice = draw(st.sampled_from(["absent", "null", "empty", "calls"]))
        if choice != "absent":
            m["tool_calls"] = {"null": None, "empty": []}.get(choice) if choice != "calls" else draw(
                st.lists(tool_calls, min_size=1, max_size=3))
    if m["role"] == "tool" and draw(st.booleans()):
        m["tool_call_id"] = draw(st.text(max_size=4))
    m.update(draw(extras))
    return m


transcripts = st.builds(
    lambda prompt, first, rest: prompt + ([first] if first else []) + (rest if first else []),
    st.lists(message(roles=("system", "developer", "user"), parts=True), max_size=3),
    st.none() | message(roles=("assistant",)),
    st.lists(message(), max_size=8),
)


@given(transcripts)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_messages_round_trip_exactly(messages):
    snapshot = json.loads(json.dumps(messages))
    trace = messages_to_trace(messages, id="x")
    assert messages == snapshot  # the input is not modified
    assert trace_to_messages(trace) == messages
    # Through the JSONL interchange format as well.
    assert trace_to_messages(Trace.from_dict(json.loads(json.dumps(trace.to_dict())))) == messages
    kinds = [s.kind for s in trace.steps]
    assert kinds.count("final") <= 1
    assert all(s.span is None for s in trace.steps)
