"""GSM8K: steps, calculator annotations, Socratic sub-questions, answers; round trips of all rows."""

from __future__ import annotations

import json

import pytest

from prmkit._fields import Fields
from prmkit.data import detect_format, get_format, read, write
from prmkit.data._answers import extract_gsm8k
from prmkit.data._gsm8k import GSM8KFormat, parse_calculations
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, Trace


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture()
def sample(fixtures):
    return fixtures / "gsm8k" / "sample.jsonl"


def test_steps_answers_and_calculations(sample):
    t1, t2, t3, t4 = read(sample, "gsm8k")
    assert t1.id == "sample.jsonl:1"
    assert [s.text for s in t1.steps] == [
        "Tom has 3 * 12 = <<3*12=36>>36 apples.",
        "After eating 5, he has 36 - 5 = <<36-5=31>>31 apples left."]
    assert [s.span for s in t1.steps] == [(0, 38), (39, 97)]
    assert t1.steps[0].meta == {"calculations": [{"expr": "3*12", "result": "36", "span": [17, 28]}]}
    assert t1.steps[1].meta == {"calculations": [{"expr": "36-5", "result": "31", "span": [32, 43]}]}
    assert (t1.problem.answer, t1.final_answer, t1.outcome, t1.source) == ("31", "31", "correct", "gsm8k")
    assert all(not s.labels for t in (t1, t2, t3, t4) for s in t.steps)  # reference solutions
    assert t1.first_error() is None

    # A blank line is not a step.
    assert [s.text for s in t2.steps] == [
        "Three pens cost 3 * $2 = $<<3*2=6>>6.", "Two books cost 2 * $8 = $<<2*8=16>>16.",
        "Together they cost $6 + $16 = $<<6+16=22>>22."]
    assert t2.final_answer == "22"

    # Socratic: the sub-question stays in the step and is parsed into meta; spans count it.
    assert t3.steps[0].text.startswith("How many apples does Tom have? ** Tom has")
    assert [s.meta["sub_question"] for s in t3.steps] == [
        "How many apples does Tom have?", "How many apples are left?"]
    assert t3.steps[0].meta["calculations"][0]["span"] == [51, 62]

    # An annotation without "=": the whole content is the expression.
    assert t4.steps[0].meta["calculations"] == [{"expr": "1200/4", "result": None, "span": [9, 19]}]
    for t in (t1, t2, t3, t4):
        t.check_spans()
        for s in t.steps:
            for c in s.meta.get("calculations", []):
                a, b = c["span"]
                assert s.text[a:b].startswith("<<") and s.text[a:b].endswith(">>")


def test_socratic_option(sample):
    recs = records(sample)
    [t] = GSM8KFormat(socratic=False).decode(Fields(recs[2]))
    assert "sub_question" not in t.steps[0].meta
    with pytest.raises(FormatError) as e:
        GSM8KFormat(socratic=True).decode(Fields(recs[0], path="g.jsonl", line=1))
    assert e.value.field == "answer" and "step 0 (line 1 of the answer)" in e.value.reason


def test_round_trip(sample, tmp_path):
    traces = list(read(sample, "gsm8k"))
    assert [GSM8KFormat().encode(t) for t in traces] == records(sample)
    write(traces, tmp_path / "o.jsonl", "gsm8k")
    assert records(tmp_path / "o.jsonl") == records(sample)


def test_edits_show(sample):
    t = list(read(sample, "gsm8k"))[1]
    t.steps[2].text = "Together they cost $6 + $16 = $22."
    t.final_answer = "22 dollars"
    assert GSM8KFormat().encode(t)["answer"] == (
        "Three pens cost 3 * $2 = $<<3*2=6>>6.\nTwo books cost 2 * $8 = $<<2*8=16>>16.\n"
        "Together they cost $6 + $16 = $22.\n#### 22 dollars")
    t = next(read(sample, "gsm8k"))
    t.final_answer = "30"  # only the answer changed
    assert GSM8KFormat().encode(t)["answer"].endswith("apples left.\n#### 30")


def test_foreign_trace_export():
    t = Trace(id="x", problem=Problem("2+2?", answer="4"), steps=[Step("2+2=4")])
    assert GSM8KFormat().encode(t) == {"question": "2+2?", "answer": "2+2=4\n#### 4"}
    t.problem.answer = None
    with pytest.raises(PrmkitError, match="trace x: GSM8K needs a final answer"):
        GSM8KFormat().encode(t)
    with pytest.raises(PrmkitError, match="at least one step"):
        GSM8KFormat().encode(Trace(id="e", problem=Problem("q", answer="1")))


def test_keep_extra():
    rec = {"question": "q", "answer": "a\n#### 1", "split": "train"}
    with pytest.raises(FormatError) as e:
        GSM8KFormat().decode(Fields(rec))
    assert e.value.field == "split"
    [t] = GSM8KFormat(keep_extra=True).decode(Fields(rec))
    assert GSM8KFormat().encode(t) == rec


@pytest.mark.parametrize("rec, field, reason", [
    ({"question": "q", "answer": "a\nb"}, "answer", "the last line must be '#### <answer>'"),
    ({"question": "q", "answer": "#### 5"}, "answer", "no solution steps"),
    ({"question": "q", "answer": "\n\n#### 5"}, "answer", "no solution steps"),
    ({"question": 3, "answer": "a\n#### 5"}, "question", "expected string"),
    ({"question": "q"}, "answer", "missing"),
])
def test_malformed_records(rec, field, reason):
    with pytest.raises(FormatError) as e:
        GSM8KFormat().decode(Fields(rec, path="in.jsonl", line=9))
    assert (e.value.path, e.value.line, e.value.field) == ("in.jsonl", 9, field)
    assert reason in e.value.reason


def test_parse_calculations():
    assert parse_calculations("no annotation") == []
    assert parse_calculations("<<a=b=c>> and <<1+1=2>>") == [
        {"expr": "a=b", "result": "c", "span": [0, 9]},
        {"expr": "1+1", "result": "2", "span": [14, 23]}]
    assert parse_calculations("unclosed <<1+1=2") == []


def test_detect():
    assert GSM8KFormat.detect({"question": "q", "answer": "a\n#### 1"})
    assert not GSM8KFormat.detect({"question": "q", "answer": "a"})
    assert not GSM8KFormat.detect({"question": {"problem": "q"}, "label": {}})  # PRM800K
    assert not GSM8KFormat.detect({"problem": "q", "solution": "s", "level": 1})


def test_bad_option():
    with pytest.raises(PrmkitError):
        get_format("gsm8k", splitter="newline")


@pytest.mark.realdata
@pytest.mark.parametrize("name, n", [("train", 7473), ("test", 1319), ("test_socratic", 1319)])
def test_real_files_round_trip(shared_data, name, n):
    path = shared_data / "gsm8k" / f"{name}.jsonl"
    assert detect_format(path) == "gsm8k"
    fmt = GSM8KFormat()
    count = socratic = calcs = 0
    with path.open(encoding="utf-8") as f:
        for rec, t in zip(map(json.loads, f), read(path, "gsm8k"), strict=True):
            assert fmt.encode(t) == rec
            t.check_spans()
            assert t.final_answer == t.problem.answer == extract_gsm8k(rec["answer"])
            count += 1
            socratic += all("sub_question" in s.meta for s in t.steps)
            calcs += sum(len(s.meta.get("calculations", [])) for s in t.steps)
    assert count == n
    assert socratic == (n if name == "test_socratic" else 0)
    assert calcs > 2 * n
