"""The report's human-labels section (issue 50, item 3): hand-made numbers rendered exactly, and the
section ``prmkit annotate summary --results`` writes from a labeling database."""

from __future__ import annotations

import json

import pytest

from prmkit.annotate import Store, summary_of
from prmkit.eval import render_markdown
from prmkit.eval._annotation_section import AnnotationSection
from prmkit.trace import Problem, Step, Trace

SECTION = {
    "db": "labels.sqlite", "label_source": "human", "items": 12, "queued": 10, "traces_done": 8,
    "labels": 30, "flagged": 1, "double_labelled_steps": 6, "agreement": 0.6666666, "raw_agreement": 0.8333333,
    "seconds_per_label": 4.25, "labels_per_hour": 847.0588, "trace_hours": 0.05,
    "annotators": [{"name": "ann", "traces_done": 5, "labels": 20, "step_seconds": 80.0, "trace_seconds": 120.0,
                    "flagged": 1},
                   {"name": "bob", "traces_done": 3, "labels": 10, "step_seconds": 47.5, "trace_seconds": 60.0,
                    "flagged": 0}],
    "pairs": [{"a": "ann", "b": "bob", "steps": 6, "kappa": None}],
}

EXPECTED = """## Human labels: agreement and cost

12 traces stored (labeling database labels.sqlite), 10 queued, 8 finished by an annotator; 30 human step labels from 2 annotators; 1 traces flagged as unclear or a bad problem.

| Measure | Value |
| --- | --- |
| Fleiss' kappa (steps rated by two annotators) | 0.667 over 6 steps |
| Raw agreement on those steps | 83.3% |
| Seconds per step label | 4.2 |
| Step labels per hour | 847 |
| Minutes on whole traces | 3.0 |

*Time is what the labeling page measured, from showing a step to its rating (one rating is capped at an hour); kappa is — when no step was rated twice or the raters used one value only.*

| Annotator | Traces finished | Step labels | Seconds on steps | Seconds per label | Flagged |
| --- | --- | --- | --- | --- | --- |
| **ann** | 5 | 20 | 80.0 | 4.0 | 1 |
| **bob** | 3 | 10 | 47.5 | 4.8 | 0 |

| Annotators | Steps both rated | Cohen's kappa |
| --- | --- | --- |
| ann / bob | 6 | — |
"""


def _section_md(md: str) -> str:
    start = md.index("## Human labels")
    end = md.find("\n## ", start + 1)
    return md[start:] if end < 0 else md[start:end + 1]


def test_section_renders_hand_made_numbers_exactly():
    md = render_markdown({"annotation": AnnotationSection.from_dict(SECTION)})
    assert _section_md(md) == EXPECTED


def test_section_reads_back_what_it_writes():
    s = AnnotationSection.from_dict(SECTION)
    assert s.to_dict() == SECTION
    assert (s.annotators[1].name, s.pairs[0].kappa) == ("bob", None)


def test_summary_writes_the_section_the_report_renders(tmp_path):
    """Two annotators rate the same two steps (they differ on one): Fleiss' kappa over 2 steps with
    ratings (1, 1) and (1, 0) is -1/3 (as in test_export), raw agreement 1/2; 4 labels in 10 s."""
    store = Store(tmp_path / "labels.sqlite")
    trace = Trace("t1", Problem("What is 3 + 4?", answer="7", id="A"), [Step("3 + 4 = 7"), Step("The answer is 7.")])
    (item,) = store.add_traces([trace])
    store.set_queue([(item, 2, None)], strategy="file order")
    for name, values, secs in (("ann", (1, 1), (2.0, 3.0)), ("bob", (1, 0), (1.0, 4.0))):
        user, _ = store.add_user(name)
        for step, (v, s) in enumerate(zip(values, secs, strict=True)):
            store.rate(user, item, step, v, seconds=s)
        store.finish(user, item)
    out = tmp_path / "annotation.json"
    summary = summary_of(store.path, results=out)
    data = json.loads(out.read_text())
    assert list(data) == ["annotation"]
    section = AnnotationSection.from_dict(data["annotation"])
    assert (section.db, section.labels, section.double_labelled_steps) == ("labels.sqlite", 4, 2)
    assert section.agreement == pytest.approx(-1 / 3) == summary.agreement
    assert (section.raw_agreement, section.seconds_per_label, section.labels_per_hour) == (0.5, 2.5, 1440.0)
    md = _section_md(render_markdown({"annotation": section}))
    assert "| Fleiss' kappa (steps rated by two annotators) | -0.333 over 2 steps |" in md
    assert "| Step labels per hour | 1440 |" in md
    assert "| ann / bob | 2 | 0.000 |" in md  # Cohen's kappa of (1, 1) against (1, 0)


def test_summary_refuses_to_write_over_its_database(tmp_path):
    from prmkit.errors import PrmkitError

    Store(tmp_path / "labels.sqlite")
    with pytest.raises(PrmkitError):
        summary_of(tmp_path / "labels.sqlite", results=tmp_path / "labels.sqlite")
