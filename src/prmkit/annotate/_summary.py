"""Progress, agreement and cost of a labeling database, as a typed result (:class:`AnnotationSummary`).

Agreement is measured on the steps two or more annotators rated (``prmkit annotate queue --overlap``
asks for them): Fleiss' kappa over the steps with exactly two ratings (for two raters it is Scott's pi),
and Cohen's kappa for each pair of annotators over the steps both rated. Cost is the time the page
measured: seconds from showing a step to its rating (``seconds_per_label``, the mean) and labels per
hour of that time; ``trace_hours`` is the time spent on whole traces (reading the problem included).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations

from prmkit.annotate._store import VALUES, Store
from prmkit.eval import AnnotationSection, AnnotatorPair, AnnotatorRow

__all__ = ["AnnotationSummary", "AnnotatorProgress", "PairAgreement", "summarize"]

#: One annotator's work (the report's record of it): traces finished, step labels, seconds, flags.
AnnotatorProgress = AnnotatorRow
#: Cohen's kappa of two annotators over the steps both rated (the report's record of it).
PairAgreement = AnnotatorPair


@dataclass
class AnnotationSummary(AnnotationSection):
    """What a labeling database holds: progress, agreement (kappa) and cost (time per step label).
    The report's ``annotation`` section (:class:`prmkit.eval.AnnotationSection`), with the lines a
    terminal and the admin page show."""

    def lines(self) -> list[str]:
        def num(x: float | None, fmt: str) -> str:
            return "n/a" if x is None else format(x, fmt)

        out = [f"{self.items} traces stored, {self.queued} queued, {self.traces_done} finished by an annotator; "
               f"{self.labels} {self.label_source} step labels, {self.flagged} traces flagged",
               f"agreement: Fleiss' kappa {num(self.agreement, '.3f')} over {self.double_labelled_steps} "
               f"double-labelled steps (raw agreement {num(self.raw_agreement, '.3f')})",
               f"cost: {num(self.seconds_per_label, '.1f')} s per step label, "
               f"{num(self.labels_per_hour, '.0f')} labels per hour; {self.trace_hours * 60:.1f} min on whole traces"]
        out += [f"  {a.name}: {a.traces_done} traces, {a.labels} labels, {a.step_seconds:.0f} s on steps, "
                f"{a.flagged} flagged" for a in self.annotators]
        out += [f"  kappa {p.a} / {p.b}: {num(p.kappa, '.3f')} over {p.steps} steps" for p in self.pairs]
        return out


def summarize(store: Store) -> AnnotationSummary:
    """Progress, agreement and cost of ``store`` (what the admin page shows)."""
    from prmkit.eval import cohen_kappa, fleiss_kappa

    ratings = store.ratings()
    assignments = store.assignments()
    by_step: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    people: dict[str, AnnotatorProgress] = {u.name: AnnotatorProgress(name=u.name) for u in store.users()}
    for r in ratings:
        by_step[(r.item_id, r.step)][r.annotator] = r.value
        p = people[r.annotator]
        p.labels += 1
        p.step_seconds += r.seconds
    for a in assignments:
        p = people[a.annotator]
        p.trace_seconds += a.seconds
        p.traces_done += a.done is not None
        p.flagged += a.flag is not None
    pairs_of_two = [v for v in by_step.values() if len(v) == 2]
    counts = [[list(v.values()).count(c) for c in VALUES] for v in pairs_of_two]
    agree = [len(set(v.values())) == 1 for v in pairs_of_two]
    pairs = []
    for a, b in combinations(sorted(people), 2):
        both = [(v[a], v[b]) for v in by_step.values() if a in v and b in v]
        if both:
            pairs.append(PairAgreement(a=a, b=b, steps=len(both),
                                       kappa=cohen_kappa([x for x, _ in both], [y for _, y in both])))
    seconds = sum(r.seconds for r in ratings)
    return AnnotationSummary(
        items=store.count_items(), queued=len(store.queue()),
        traces_done=len({a.item_id for a in assignments if a.done is not None}),
        labels=len(ratings), flagged=len({a.item_id for a in assignments if a.flag is not None}),
        double_labelled_steps=len(pairs_of_two), agreement=fleiss_kappa(counts) if counts else None,
        raw_agreement=sum(agree) / len(agree) if agree else None,
        seconds_per_label=seconds / len(ratings) if ratings else None,
        labels_per_hour=len(ratings) / seconds * 3600 if seconds > 0 else None,
        trace_hours=sum(a.seconds for a in assignments) / 3600,
        annotators=[people[n] for n in sorted(people)], pairs=pairs)

