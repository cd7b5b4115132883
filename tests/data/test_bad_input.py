"""Bad input, property-tested over every registered importer.

For each format a small valid record is mutated by hypothesis: a key deleted anywhere, a value
replaced by one of another type, an unknown key added, a list emptied, a string made huge. The
importer must then either raise prmkit's own :class:`FormatError` naming file, line and a field, or
accept the record *losslessly* (``encode(decode(r)) == r``) — never raise anything else and never
return a silently different record. Truncated files and non-UTF-8 bytes are checked at file level.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prmkit._fields import Fields
from prmkit.data import FORMATS, get_format, read
from prmkit.errors import FormatError

Q = "Tom has 3 apples and buys 5 more. How many apples does he have?"

SEEDS: dict[str, dict[str, Any]] = {
    "prmkit": {"id": "t1", "problem": {"text": Q, "answer": "8"},
               "steps": [{"text": "3 + 5 = 8", "labels": [{"value": 1, "source": "human", "kind": "hard"}]},
                         {"text": "The answer is 8", "kind": "final"}],
               "final_answer": "8", "outcome": "correct"},
    "prm800k": {
        "labeler": "ann-1", "timestamp": "2023-01-01T00:00:00", "generation": None,
        "is_quality_control_question": False, "is_initial_screening_question": False,
        "question": {"problem": Q, "ground_truth_answer": "8"},
        "label": {"steps": [
            {"completions": [{"text": "3 + 5 = 8.", "rating": 1, "flagged": False},
                             {"text": "3 + 5 = 9.", "rating": -1, "flagged": False}],
             "human_completion": None, "chosen_completion": 0},
            {"completions": [{"text": "# Answer\n\n8", "rating": 0, "flagged": None}],
             "human_completion": None, "chosen_completion": 0}],
            "total_time": 1234, "finish_reason": "solution"}},
    "processbench": {"id": "gsm8k-x", "generator": "unit", "problem": Q,
                     "steps": ["3 + 5 = 8.", "So 9 apples."], "final_answer_correct": False,
                     "label": 1},
    "prmbench": {"original_question": Q, "modified_question": Q,
                 "original_process": ["3 + 5 = 8.", "He has 8."],
                 "modified_process": ["3 + 5 = 9.", "He has 9."], "modified_steps": [1, 2],
                 "error_steps": [1, 2], "reason": "wrong sum", "idx": "prm_test_p1_x",
                 "question": Q, "classification": "counterfactual"},
    "math_shepherd": {"input": f"{Q} Step 1: 3 + 5 = 8 ки\nStep 2: The answer is: 8 ки",
                      "label": f"{Q} Step 1: 3 + 5 = 8 +\nStep 2: The answer is: 8 +",
                      "task": "GSM8K"},
    "openrlhf": {"input": f"{Q}\nStep 1: 3 + 5 = 8 ки\nStep 2: The answer is 8 ки",
                 "value": ["+", "-"]},
    "trl_stepwise": {"prompt": Q, "completions": ["3 + 5 = 8.", "The answer is 8."],
                     "labels": [True, False]},
    "gsm8k": {"question": Q, "answer": "He has 3 + 5 = <<3+5=8>>8 apples.\n#### 8"},
    "math": {"problem": "What is $3+5$?", "solution": "We add: $3+5=8$. So the answer is $\\boxed{8}$.",
             "answer": "8", "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"},
    "math_aps": {"question": Q, "final_answer": "8", "question_id": 7,
                 "reasoning_steps": [{"solution_prefix": Q + "\n\n3 + 5 = 8.", "mc_value": 1.0},
                                     {"solution_prefix": Q + "\n\n3 + 5 = 8.\nThe answer is 8.",
                                      "mc_value": 0.75}]},
}

#: Formats whose optional keys have defaults (deleting one is not a loss).
OPTIONAL_DEFAULTS = {"prmkit"}
FORMAT_NAMES = [name for name in FORMATS if name in SEEDS]
OTHER_TYPES = st.sampled_from([None, 0, -7, 3.5, True, "", "x", [], [1], {}, {"a": 1}])


def paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``obj`` (dict keys and list indexes)."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            out.extend(paths(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append(prefix + (i,))
            out.extend(paths(v, prefix + (i,)))
    return out


def parent(obj: Any, path: tuple) -> Any:
    for k in path[:-1]:
        obj = obj[k]
    return obj


@st.composite
def mutated(draw, name: str) -> dict[str, Any]:
    rec = copy.deepcopy(SEEDS[name])
    op = draw(st.sampled_from(["delete", "retype", "extra", "empty", "huge"]))
    all_paths = paths(rec)
    if op == "delete":
        path = draw(st.sampled_from([p for p in all_paths if isinstance(parent(rec, p), dict)]))
        del parent(rec, path)[path[-1]]
    elif op == "retype":
        path = draw(st.sampled_from(all_paths))
        parent(rec, path)[path[-1]] = draw(OTHER_TYPES)
    elif op == "extra":
        dicts = [()] + [p for p in all_paths if isinstance(_get(rec, p), dict)]
        path = draw(st.sampled_from(dicts))
        _get(rec, path)["unexpected_" + draw(st.text("abc", min_size=1, max_size=3))] = 1
    elif op == "empty":
        lists = [p for p in all_paths if isinstance(_get(rec, p), list)]
        if lists:
            path = draw(st.sampled_from(lists))
            parent(rec, path)[path[-1]] = []
    else:
        strs = [p for p in all_paths if isinstance(_get(rec, p), str)]
        path = draw(st.sampled_from(strs))
        parent(rec, path)[path[-1]] = _get(rec, path) + "ж" * draw(st.integers(10_000, 300_000))
    return rec


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def check(name: str, rec: dict[str, Any]) -> None:
    fmt = get_format(name)
    original = json.loads(json.dumps(rec))
    try:
        traces = fmt.decode(Fields(rec, path="in.jsonl", line=3))
    except FormatError as e:
        assert (e.path, e.line) == ("in.jsonl", 3)
        assert e.field, f"{name}: error without a field: {e}"
        return
    assert rec == original, f"{name}: decode changed its input"
    assert len(traces) >= 1
    back = json.loads(json.dumps(fmt.encode_record(traces)))
    if name in OPTIONAL_DEFAULTS:
        # prmkit's own format has optional keys with defaults: a record missing one is complete
        # once the default is filled in, so compare the parsed traces instead of the raw dicts.
        assert fmt.decode(Fields(back, path="b", line=1)) == traces
    else:
        assert back == original, f"{name}: accepted but not lossless"


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_seed_is_valid_and_lossless(name):
    traces = get_format(name).decode(Fields(copy.deepcopy(SEEDS[name]), path="s", line=1))
    assert traces and traces[0].steps
    assert json.loads(json.dumps(get_format(name).encode_record(traces))) == SEEDS[name]


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_records_fail_cleanly_or_round_trip(name, data):
    check(name, data.draw(mutated(name)))


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_not_an_object(name):
    for bad in ([], "x", 3, None):
        with pytest.raises(FormatError):
            get_format(name).decode(Fields(bad, path="in.jsonl", line=1))


def _write_records(path, name, n=3):
    fmt = get_format(name)
    recs = [copy.deepcopy(SEEDS[name]) for _ in range(n)]
    if fmt.container == "array":
        path.write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs),
                        encoding="utf-8")
    return recs


@pytest.mark.parametrize("name", FORMAT_NAMES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.01, 0.99))
def test_truncated_file(tmp_path, name, cut):
    p = tmp_path / f"{name}.json"
    recs = _write_records(p, name)
    data = p.read_bytes()
    p.write_bytes(data[: int(len(data) * cut)])
    try:
        got = list(read(p, name))
    except FormatError as e:
        assert e.path == str(p) and e.line is not None
        return
    # A cut exactly at a record boundary leaves whole records, each still lossless.
    fmt = get_format(name)
    assert [json.loads(json.dumps(fmt.encode(t))) for t in got] == recs[: len(got)]  # one trace each


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_non_utf8_bytes_name_the_line(tmp_path, name):
    p = tmp_path / f"{name}.json"
    _write_records(p, name)
    lines = p.read_bytes().split(b"\n")
    lines[1] = lines[1][:5] + b"\xff\xfe" + lines[1][5:]
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(FormatError) as e:
        list(read(p, name))
    assert e.value.line == 2 and "UTF-8" in e.value.reason


def test_skip_invalid_keeps_going_in_jsonl(tmp_path):
    p = tmp_path / "g.jsonl"
    good = json.dumps(SEEDS["gsm8k"])
    p.write_text("\n".join([good, "{oops", json.dumps({"question": 3, "answer": "x"}), good]) + "\n")
    from prmkit.data import ImportReport

    report = ImportReport()
    got = list(read(p, "gsm8k", skip_invalid=True, report=report))
    assert len(got) == 2
    assert [(e.line, e.field) for e in report.skipped] == [(2, None), (3, "question")]
