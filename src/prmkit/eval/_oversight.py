"""The report's oversight section: the ``monitorability`` results of ``prmkit eval monitor`` as a
table of g-mean² per monitor, view and archetype, with TPR, TNR, counts and intervals."""

from __future__ import annotations

from typing import Any

from prmkit.eval._doc import ReportDoc
from prmkit.eval._results import (
    InterventionEffect,
    MonitorabilityProvenance,
    MonitorabilitySection,
    MonitorRef,
    MonitorRow,
    RateIntervals,
)

__all__ = ["render_monitorability"]


def _ci(x: Any, ci: Any) -> str:
    text = ReportDoc.f3(x)
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


def render_monitorability(doc: ReportDoc, m: MonitorabilitySection, figs: set[str]) -> None:
    """Write the ``monitorability`` section into ``doc``."""
    prov = m.provenance if isinstance(m.provenance, MonitorabilityProvenance) else MonitorabilityProvenance()
    monitors = ", ".join(f"{d.name} ({d.monitor})" for d in prov.monitors or []
                         if isinstance(d, MonitorRef)) or "—"
    doc.para(f"Monitors: {monitors}. Trajectories: {doc.count(prov.traces)} "
             f"(control arm {doc.count(prov.control_traces)}) from "
             f"{', '.join(prov.sources or []) or '—'}. A monitor predicts a positive when it flags "
             "any step of what its view shows; g-mean² = TPR × TNR (Guan et al. 2025); intervals: 95% "
             f"bootstrap, {doc.count(prov.bootstrap)} replicates, positives and negatives resampled "
             "apart.")
    rows = []
    for r in m.rows or []:
        if not isinstance(r, MonitorRow):
            continue
        ci = r.ci if isinstance(r.ci, RateIntervals) else RateIntervals()
        rows.append([("b", str(r.monitor)), str(r.view), str(r.archetype),
                     doc.count(r.n_pos), doc.count(r.n_neg), _ci(r.tpr, ci.tpr),
                     _ci(r.tnr, ci.tnr), _ci(r.g_mean2, ci.g_mean2)])
    doc.table(["Monitor", "View", "Archetype", "Positives", "Negatives", "TPR", "TNR", "g-mean²"], rows)
    e = m.effects
    if isinstance(e, InterventionEffect) and e.to_dict():
        doc.para(f"Intervention: {doc.count(e.changed)} of {doc.count(e.pairs)} pairs changed "
                 f"behaviour when the loophole was switched on ({doc.pct(e.effect)}).")
