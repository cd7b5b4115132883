"""Monitors for agent trajectories and reasoning — rule, PRM and judge, behind one interface — the
file-level ``prmkit monitor`` stage (with a deployment mode that stops an episode before ``submit``),
and the monitorability evaluation (TPR, TNR, g-mean² per view and archetype)."""

from prmkit.monitor._base import MONITORS, VIEWS, Flag, Monitor, flags_in_view, load_monitor, view_of
from prmkit.monitor._eval import (
    ARCHETYPES,
    MonitorabilityResult,
    bootstrap_rates,
    evaluate_monitors,
    outcome_target,
    process_target,
    rates,
)
from prmkit.monitor._judge import JudgeMonitor, JudgeMonitorError
from prmkit.monitor._prm import PRMMonitor
from prmkit.monitor._rule import DEFAULT_RULES, RuleMonitor
from prmkit.monitor._run import (
    MonitorRunReport,
    before_submit,
    load_monitors,
    monitor_file,
    monitor_traces,
    parse_monitor_args,
)

__all__ = ["Flag", "Monitor", "MONITORS", "VIEWS", "view_of", "flags_in_view", "load_monitor",
           "RuleMonitor", "DEFAULT_RULES", "PRMMonitor", "JudgeMonitor", "JudgeMonitorError", "monitor_traces",
           "monitor_file",
           "MonitorRunReport", "before_submit", "load_monitors", "parse_monitor_args", "ARCHETYPES",
           "MonitorabilityResult", "evaluate_monitors", "rates", "bootstrap_rates", "outcome_target",
           "process_target", "monitorability_file"]


def monitorability_file(inp, monitors, *, control=None, views=tuple(VIEWS), archetypes=None,
                        bootstrap=1000, seed=0):
    """:func:`evaluate_monitors` on the traces of file ``inp`` (and the control arm file ``control``)."""
    from prmkit.trace import read_traces

    traces = list(read_traces(inp))
    ctrl = list(read_traces(control)) if control is not None else None
    return evaluate_monitors(traces, monitors, views=views, control=ctrl, archetypes=archetypes,
                             bootstrap=bootstrap, seed=seed)
