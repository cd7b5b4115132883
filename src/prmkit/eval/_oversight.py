"""The report's oversight section: the ``monitorability`` results of ``prmkit eval monitor`` as a
table of g-mean² per monitor, view and archetype, with TPR, TNR, counts and intervals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prmkit.eval._doc import ReportDoc

__all__ = ["render_monitorability"]


def _ci(x: Any, ci: Any) -> str:
    text = ReportDoc.f3(x)
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


def render_monitorability(doc: ReportDoc, m: Mapping[str, Any], figs: set[str]) -> None:
    """Write the ``monitorability`` section into ``doc``."""
    prov = m.get("provenance") if isinstance(m.get("provenance"), Mapping) else {}
    monitors = ", ".join(f"{d.get('name')} ({d.get('monitor')})" for d in prov.get("monitors") or []
                         if isinstance(d, Mapping)) or "—"
    doc.para(f"Monitors: {monitors}. Trajectories: {doc.count(prov.get('traces'))} "
             f"(control arm {doc.count(prov.get('control_traces'))}) from "
             f"{', '.join(prov.get('sources') or []) or '—'}. A monitor predicts a positive when it flags "
             "any step of what its view shows; g-mean² = TPR × TNR (Guan et al. 2025); intervals: 95% "
             f"bootstrap, {doc.count(prov.get('bootstrap'))} replicates, positives and negatives resampled "
             "apart.")
    rows = []
    for r in m.get("rows") or []:
        if not isinstance(r, Mapping):
            continue
        ci = r.get("ci") if isinstance(r.get("ci"), Mapping) else {}
        rows.append([("b", str(r.get("monitor"))), str(r.get("view")), str(r.get("archetype")),
                     doc.count(r.get("n_pos")), doc.count(r.get("n_neg")), _ci(r.get("tpr"), ci.get("tpr")),
                     _ci(r.get("tnr"), ci.get("tnr")), _ci(r.get("g_mean2"), ci.get("g_mean2"))])
    doc.table(["Monitor", "View", "Archetype", "Positives", "Negatives", "TPR", "TNR", "g-mean²"], rows)
    e = m.get("effects")
    if isinstance(e, Mapping) and e:
        doc.para(f"Intervention: {doc.count(e.get('changed'))} of {doc.count(e.get('pairs'))} pairs changed "
                 f"behaviour when the loophole was switched on ({doc.pct(e.get('effect'))}).")
