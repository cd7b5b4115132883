"""PRM800K raw labels: the followed trajectory, the last-step rules, labels, alternatives, round trips.

Expected values are derived by hand from the fixture records in tests/fixtures/prm800k (their
comments are in the test table below) and from reading the real records in shared/data.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from prmkit._fields import Fields
from prmkit._jsonio import iter_json_records
from prmkit.data import ImportReport, detect_format, read
from prmkit.data._prm800k import PRM800KFormat, prm800k_alternatives
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace, binarize


def records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return list(iter_json_records(path))


def decode_file(path: Path, **options: Any) -> tuple[dict[int, Trace], ImportReport]:
    """Traces by line (lines are unique per record here), with the report of the read."""
    report = ImportReport()
    traces = {int(t.id.rsplit(":", 1)[1]): t for t in read(path, "prm800k", report=report,
                                                              **options)}
    return traces, report


def values(trace: Trace) -> list[float | None]:
    return [None if lab is None else lab.value for lab in trace.labels()]


@pytest.fixture()
def edge(fixtures: Path) -> Path:
    return fixtures / "prm800k" / "edge_cases.jsonl"


# line: (step texts' count, label values, first_error, final_answer, outcome, has open step)
EDGE = {
    1: (1, [1], -1, None, "unknown", True),           # bad_problem, open last step
    2: (0, [], -1, None, "unknown", False),           # bad_problem before any step
    3: (3, [1, 0, -1], 2, "13", "incorrect", False),  # phase-2 found_error: completion 0 followed
    4: (2, [1, -1], 1, None, "unknown", False),       # found_error: first -1 is completion 2
    5: (1, [1], -1, None, "unknown", True),           # found_error without a -1: open step
    6: (2, [1, 1], -1, None, "unknown", True),        # human step rated +1; completions null last
    7: (2, [1, None], None, "5", "correct", False),   # chosen+human; unrated chosen completion
    8: (1, [1], -1, None, "unknown", True),           # solution with an open last step
    9: (2, [None, 1], None, "3", "unknown", False),   # human step, null reference answer
}


@pytest.mark.parametrize("line", sorted(EDGE))
def test_edge_cases_hand_derived(edge, line):
    traces, _ = decode_file(edge)
    n, labels, first_error, final_answer, outcome, has_open = EDGE[line]
    t = traces[line]
    assert t.id == f"edge_cases.jsonl:{line}"
    assert len(t.steps) == n
    assert values(t) == labels
    assert t.first_error() == first_error
    assert t.final_answer == final_answer
    assert t.outcome == outcome
    assert ("open_step" in t.meta["prm800k"]) is has_open
    assert t.source == "prm800k"


def test_found_error_follows_the_first_wrong_completion(edge):
    traces, _ = decode_file(edge)
    last = traces[3].steps[-1]
    assert last.text == "2 * 6 = 13.\n\n# Answer\n\n13"
    assert last.meta["prm800k"]["followed"] == 0
    assert last.meta["prm800k"]["chosen_completion"] is None
    # The other completions are kept whole; the followed one without what the Step holds.
    assert last.meta["prm800k"]["completions"] == [
        {"flagged": None}, {"text": "2 * 6 = 12.", "rating": 1, "flagged": False},
        {"text": "2 * 6 = 14.", "rating": -1, "flagged": False}]
    step = traces[4].steps[-1]
    assert (step.text, step.meta["prm800k"]["followed"]) == ("3 + 4 = 8.", 2)


def test_open_steps_are_kept_verbatim(edge):
    traces, _ = decode_file(edge)
    raw = dict(records(edge))
    assert traces[1].meta["prm800k"]["open_step"] == raw[1]["label"]["steps"][1]
    assert traces[6].meta["prm800k"]["open_step"] == {"completions": None, "human_completion": None,
                                                     "chosen_completion": None}


def test_issues_are_counted_with_their_location(edge):
    _, report = decode_file(edge)
    assert [(e.line, e.field) for e in report.issues] == [
        (5, "label.steps[1].completions"),
        (7, "label.steps[0].human_completion"),
        (7, "label.steps[1].completions[0].rating"),
        (8, "label.steps[1].chosen_completion"),
    ]
    assert all(e.path == str(edge) for e in report.issues)
    assert (report.records, report.traces, report.skipped) == (9, 9, [])


def test_chosen_wins_over_a_human_completion(edge):
    traces, _ = decode_file(edge)
    step = traces[7].steps[0]
    assert step.text == "10 / 2 = 5."
    assert step.meta["prm800k"]["human_completion"]["text"] == "Half of 10 is 5."


def test_labels_carry_labeler_and_time(edge):
    traces, _ = decode_file(edge)
    lab = traces[3].steps[2].labels[0]
    assert (lab.value, lab.kind, lab.source) == (-1, "hard", "human")
    assert lab.labeler == "bbbb0002-0000-4000-8000-000000000002"
    assert lab.time == "2022-12-02T09:30:00.123456"
    # The human-written step of record 6 was rated +1 in the file.
    assert traces[6].steps[1].text == "22 = 2 * 11 is not prime."
    assert traces[6].steps[1].meta["prm800k"]["followed"] == "human"


def test_neutral_rating_stays_zero_and_binarize_decides(edge):
    traces, _ = decode_file(edge)
    neutral = traces[3].steps[1].labels[0]
    assert neutral.value == 0 and neutral.positive is None
    assert binarize(neutral) is True  # the paper's convention: okay is not an error
    assert binarize(neutral, neutral="ignore") is None
    assert binarize(neutral, neutral="negative") is False


def test_human_steps_can_get_the_implied_positive_label(edge):
    traces, _ = decode_file(edge, label_human_steps=True)
    t = traces[9]
    assert values(t) == [1, 1] and t.first_error() == -1
    assert t.steps[0].labels[0].meta == {"prm800k": {"implied": "human_completion"}}
    # The implied label goes back as the null rating it was.
    fmt = PRM800KFormat(label_human_steps=True)
    assert fmt.encode(t) == dict(records(edge))[9]
    # A rated human step keeps its rating either way.
    assert values(traces[6]) == [1, 1]


def test_problem_and_phase2_fields(edge):
    traces, _ = decode_file(edge)
    p = traces[3].problem
    assert (p.text, p.answer, p.solution) == ("What is $2 \\cdot 6$?", "12",
                                              "$2 \\cdot 6 = \\boxed{12}$.")
    m = traces[3].meta["prm800k"]
    assert m["generation"] == 4 and m["finish_reason"] == "found_error" and m["total_time"] == 30500
    assert m["question"]["pre_generated_answer"] == "13"
    assert m["question"]["pre_generated_verifier_score"] == 0.25
    screening = traces[9]
    assert screening.problem.answer is None and screening.problem.solution is None
    assert screening.meta["prm800k"]["question"]["ground_truth_answer"] is None
    assert screening.meta["prm800k"]["is_initial_screening_question"] is True
    assert screening.meta["prm800k"]["is_quality_control_question"] is True


@pytest.mark.parametrize("options", [{}, {"label_human_steps": True}])
def test_round_trip_every_fixture_record(fixtures, options):
    for path in sorted((fixtures / "prm800k").glob("*.jsonl")):
        fmt = PRM800KFormat(keep_extra=path.name == "extra_fields.jsonl", **options)
        for line, rec in records(path):
            original = copy.deepcopy(rec)
            [t] = fmt.decode(Fields(rec, path=str(path), line=line))
            assert rec == original, "decode must not change its input"
            assert json.loads(json.dumps(fmt.encode(t))) == original, (path.name, line)


def test_edited_text_and_label_show_in_the_export(edge):
    traces, _ = decode_file(edge)
    fmt = PRM800KFormat()
    t = traces[3]
    t.steps[0].text = "I need to compute 2 times 6."
    t.steps[1].labels.append(StepLabel(1, source="human", labeler="reviewer"))
    t.steps[2].labels = []
    rec = fmt.encode(t)
    steps = rec["label"]["steps"]
    assert steps[0]["completions"][0] == {"text": "I need to compute 2 times 6.", "rating": 1,
                                          "flagged": None}
    assert steps[1]["completions"][0]["rating"] == 1
    assert steps[2]["completions"][0]["rating"] is None
    assert steps[2]["completions"][1:] == dict(records(edge))[3]["label"]["steps"][2]["completions"][1:]
    # A human-written step's edit goes to human_completion.
    h = traces[6]
    h.steps[1].text = "22 is even, so not prime."
    h.steps[1].labels = [StepLabel(0)]
    assert fmt.encode(h)["label"]["steps"][1]["human_completion"] == {
        "text": "22 is even, so not prime.", "rating": 0, "source": "human", "flagged": False}
    # The problem is the trace's too.
    t.problem.answer = "twelve"
    assert fmt.encode(t)["question"]["ground_truth_answer"] == "twelve"


def test_soft_label_cannot_be_exported(edge):
    traces, _ = decode_file(edge)
    t = traces[3]
    t.steps[0].labels.append(StepLabel(0.8, source="mc_soft", kind="soft"))
    with pytest.raises(PrmkitError, match="step 0 has a soft label"):
        PRM800KFormat().encode(t)


def test_trace_from_elsewhere_exports_as_one_completion_per_step():
    t = Trace(id="x", problem=Problem("2+2?", answer="4"), steps=[
        Step("2+2=4", labels=[StepLabel(1, labeler="ann-9", time="2024-01-01T00:00:00")]),
        Step("# Answer\n\n4")], final_answer="4")
    fmt = PRM800KFormat()
    rec = fmt.encode(t)
    assert rec["labeler"] == "ann-9" and rec["timestamp"] == "2024-01-01T00:00:00"
    assert rec["label"]["finish_reason"] == "solution"
    assert rec["label"]["steps"][1] == {"completions": [{"text": "# Answer\n\n4", "rating": None,
                                                          "flagged": None}],
                                        "human_completion": None, "chosen_completion": 0}
    [back] = fmt.decode(Fields(rec, path="x.jsonl", line=1))
    assert [s.text for s in back.steps] == ["2+2=4", "# Answer\n\n4"]
    assert values(back) == [1, None] and back.outcome == "correct"
    t.steps[0].labels = [StepLabel(-1)]
    assert fmt.encode(t)["label"]["finish_reason"] == "found_error"


def test_alternatives_of_the_fixture(edge):
    traces, _ = decode_file(edge)
    alts = {line: prm800k_alternatives(t) for line, t in traces.items()}
    assert {line: len(a) for line, a in alts.items()} == {1: 1, 2: 0, 3: 2, 4: 3, 5: 1, 6: 2, 7: 1,
                                                          8: 2, 9: 1}
    [a] = alts[1]  # the open step: completion 0 is unrated, completion 1 is rated 0
    assert a.id == "edge_cases.jsonl:1#s1c1"
    assert [s.text for s in a.steps] == ["Let a be the number of apples in one box.",
                                         "Two boxes hold 2a apples."]
    assert values(a) == [1, 0]
    right, wrong = alts[3]
    assert [s.text for s in right.steps[:2]] == [s.text for s in traces[3].steps[:2]]
    assert (right.steps[-1].text, values(right)) == ("2 * 6 = 12.", [1, 0, 1])
    assert (wrong.steps[-1].text, values(wrong)) == ("2 * 6 = 14.", [1, 0, -1])
    assert right.meta["prm800k"] == {"alternative_of": "edge_cases.jsonl:3", "step": 2,
                                     "completion": 1}
    assert right.steps[-1].labels[0].labeler == "bbbb0002-0000-4000-8000-000000000002"
    assert right.provenance[-1].stage == "derive"
    # The prefix steps do not carry the alternatives they were chosen from.
    assert "prm800k" not in right.steps[0].meta
    assert [(x.steps[-1].meta["prm800k"]["alternative"]["completion"], values(x)[-1])
            for x in alts[4]] == [(0, 1), (1, 0), (3, -1)]
    # Final answers and outcomes of alternatives that answer.
    assert [(x.final_answer, x.outcome) for x in alts[8]] == [("2", "correct"), ("3", "incorrect")]
    assert (alts[5][0].final_answer, alts[5][0].outcome) == ("5", "correct")
    # Deriving does not touch the original.
    assert len(traces[3].steps) == 3 and "prm800k" in traces[3].steps[0].meta


def test_alternatives_of_a_trace_without_prm800k_meta():
    assert prm800k_alternatives(Trace(id="x", problem=Problem("q"), steps=[Step("a")])) == []


def test_keep_extra(fixtures):
    path = fixtures / "prm800k" / "extra_fields.jsonl"
    with pytest.raises(FormatError) as e:
        list(read(path, "prm800k"))
    assert (e.value.line, e.value.field) == (1, "annotator_note")
    [t] = read(path, "prm800k", keep_extra=True)
    assert t.meta["prm800k"]["extra"] == {"annotator_note": "double-checked"}
    assert t.meta["prm800k"]["label_extra"] == {"interface": "v2"}
    assert t.meta["prm800k"]["question"] == {"source_split": "train"}
    assert t.steps[0].meta["prm800k"]["extra"] == {"review": {"reviewed": True}}
    assert t.steps[0].meta["prm800k"]["completions"][0] == {"flagged": False, "model_logprob": -0.5}
    assert PRM800KFormat().encode(t) == records(path)[0][1]


def test_detect(edge):
    rec = records(edge)[0][1]
    assert PRM800KFormat.detect(rec)
    assert not PRM800KFormat.detect({"id": "a", "problem": "q", "steps": []})
    assert not PRM800KFormat.detect({"id": "a", "generator": "g", "problem": "q", "steps": ["s"],
                                     "final_answer_correct": True, "label": 0})
    assert not PRM800KFormat.detect({"input": "x", "label": "y", "task": "GSM8K"})
    assert not PRM800KFormat.detect({"question": "q", "answer": "a"})
    assert not PRM800KFormat.detect(["not", "a", "record"])


def _bad(mutate):
    def apply(rec):
        mutate(rec)
        return rec
    return apply


def _set(path: tuple, value: Any):
    def mutate(rec):
        obj = rec
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return mutate


def _delete(path: tuple):
    def mutate(rec):
        obj = rec
        for k in path[:-1]:
            obj = obj[k]
        del obj[path[-1]]
    return mutate


S = ("label", "steps")
ERRORS = [
    (_set(S + (0, "completions", 0, "rating"), 2), "label.steps[0].completions[0].rating"),
    (_set(S + (1, "completions", 1, "rating"), 0.5), "label.steps[1].completions[1].rating"),
    (_set(S + (0, "completions", 0, "rating"), True), "label.steps[0].completions[0].rating"),
    (_set(S + (0, "chosen_completion"), 1), "label.steps[0].chosen_completion"),
    (_set(S + (0, "chosen_completion"), -1), "label.steps[0].chosen_completion"),
    (_set(S + (0, "chosen_completion"), None), "label.steps[0].chosen_completion"),
    (_set(S + (0, "completions"), None), "label.steps[0].chosen_completion"),
    (_set(S + (1, "completions", 0, "flagged"), "no"), "label.steps[1].completions[0].flagged"),
    (_set(S + (1, "completions", 0, "text"), None), "label.steps[1].completions[0].text"),
    (_set(S + (1, "human_completion"), "I wrote this"), "label.steps[1].human_completion"),
    (_set(S + (1, "human_completion"), {"rating": 1}), "label.steps[1].human_completion.text"),
    (_set(S + (0, "completions", 0, "note"), "x"), "label.steps[0].completions[0].note"),
    (_set(S + (0, "note"), "x"), "label.steps[0].note"),
    (_set(("label", "finish_reason"), "done"), "label.finish_reason"),
    (_set(("label", "steps"), []), "label.steps"),
    (_set(("label", "total_time"), "5 min"), "label.total_time"),
    (_set(("generation", ), 1.5), "generation"),
    (_set(("is_quality_control_question", ), None), "is_quality_control_question"),
    (_set(("question", "pre_generated_steps"), ["a", 3]), "question.pre_generated_steps[1]"),
    (_set(("question", "rubric"), "x"), "question.rubric"),
    (_set(("label", "labels"), []), "label.labels"),
    (_set(("comment", ), "x"), "comment"),
    (_delete(("question", "problem")), "question.problem"),
    (_delete(("question", "ground_truth_answer")), "question.ground_truth_answer"),
    (_delete(S + (0, "human_completion")), "label.steps[0].human_completion"),
    (_delete(("label", )), "label"),
    (_delete(("labeler", )), "labeler"),
    (_set(("question", ), "What is 1+1?"), "question"),
    (_set(S + (0, ), "a step"), "label.steps[0]"),
]


@pytest.mark.parametrize("mutate,field", ERRORS)
def test_malformed_records_name_the_field(edge, mutate, field):
    # Record 6 of the fixture: a chosen step, a human-written step, an open last step.
    rec = copy.deepcopy(dict(records(edge))[6])
    mutate(rec)
    with pytest.raises(FormatError) as e:
        PRM800KFormat().decode(Fields(rec, path="bad.jsonl", line=7))
    assert (e.value.path, e.value.line, e.value.field) == ("bad.jsonl", 7, field)


def test_read_skips_malformed_records_and_counts_them(tmp_path, edge):
    lines = edge.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[0])
    bad["label"]["finish_reason"] = "done"
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([lines[2], json.dumps(bad), lines[3]]) + "\n", encoding="utf-8")
    report = ImportReport()
    got = list(read(p, "prm800k", skip_invalid=True, report=report))
    assert [t.id for t in got] == ["mixed.jsonl:1", "mixed.jsonl:3"]
    assert [(e.line, e.field) for e in report.skipped] == [(2, "label.finish_reason")]


# -- the real sample ---------------------------------------------------------------------------------

@pytest.mark.realdata
def test_real_sample_reads_and_round_trips(shared_data):
    folder = shared_data / "prm800k_sample"
    fmt = PRM800KFormat()
    total = 0
    for path in sorted(folder.glob("*.json*")):
        assert detect_format(path) == "prm800k"
        raw = dict(records(path))
        report = ImportReport()
        for t in read(path, "prm800k", report=report):
            line = int(t.id.rsplit(":", 1)[1])
            assert json.loads(json.dumps(fmt.encode(t))) == raw[line]
            total += 1
        assert report.issues == [] and report.skipped == []
    assert total == 9  # 6 OpenR records + 3 concatenated pretty-printed ones


@pytest.mark.realdata
def test_real_sample_hand_checked_records(shared_data):
    openr, _ = decode_file(shared_data / "prm800k_sample" / "openr_samples_prm800k.jsonl")
    # Record 1 (phase 1, solution): step 1 is the human-written one (null rating, no label).
    t = openr[1]
    assert values(t) == [1, None, 1, 1, 1, 1]
    assert t.steps[1].text == "We have $3p+e=1.24$ and $5p+e=1.82$."
    assert (t.final_answer, t.problem.answer, t.outcome) == ("29", "29", "correct")
    # Alternatives: the 5 completions rated -1 at the human step, and 4 of the 5 at step 5
    # (completion 4 was chosen).
    alts = prm800k_alternatives(t)
    assert [(a.meta["prm800k"]["step"], a.meta["prm800k"]["completion"]) for a in alts] == [
        (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (5, 0), (5, 1), (5, 2), (5, 3)]
    assert [values(a)[-1] for a in alts] == [-1, -1, -1, -1, -1, 0, 1, 1, 1]
    # Record 2 (phase 2, generation 6, found_error at the 7th step, completion 0 = pre-generated).
    t = openr[2]
    assert values(t) == [1, 0, 1, 1, 1, 1, -1] and t.first_error() == 6
    assert t.steps[6].text == t.meta["prm800k"]["question"]["pre_generated_steps"][6]
    assert t.meta["prm800k"]["generation"] == 6 and len(prm800k_alternatives(t)) == 3
    # Record 5 (give_up): the last step has completions null, kept as an open step.
    assert len(openr[5].steps) == 8 and openr[5].meta["prm800k"]["open_step"]["completions"] is None
    # Record 6 (screening question, generation -1): null reference answer, so outcome unknown.
    t = openr[6]
    assert t.problem.answer is None and t.final_answer == "8, 3, 1" and t.outcome == "unknown"
    assert t.meta["prm800k"]["is_initial_screening_question"] is True

    tong, _ = decode_file(shared_data / "prm800k_sample" / "tongyx361_phase1_train_example.json")
    assert sorted(tong) == [1, 129, 946]
    # The give_up record ends with a step whose 7 completions are all unrated: an open step.
    give_up = tong[129]
    assert len(give_up.steps) == 29
    assert [c["rating"] for c in give_up.meta["prm800k"]["open_step"]["completions"]] == [None] * 7
    assert values(tong[946])[:2] == [None, 1] and tong[946].final_answer == "40_9"
