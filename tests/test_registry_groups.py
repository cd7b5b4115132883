"""The entry-point groups of monitors, organisms, selectors and searches (issue 46, item 4): a plugin
declared in each group joins its registry and is used by name through the public API, as a built-in
is. Entry points are faked in this process, as in ``tests/test_plugins.py``; the module a plugin
names is a real file on ``sys.path``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import prmkit._registry as registry_module
from prmkit._registry import ENTRY_POINT_GROUPS
from prmkit.annotate import STRATEGIES, build_queue
from prmkit.envs import ORGANISMS, get_agent
from prmkit.eval import EVAL_TASKS
from prmkit.monitor import MONITORS, load_monitor
from prmkit.search import SEARCHES, SELECTORS, search, select
from prmkit.trace import Problem, Step, Trace

PLUGIN = '''
from prmkit.monitor import Flag


class WordMonitor:
    name = "word"

    def __init__(self, word="oops"):
        self.word = word

    def flags(self, traces):
        return [[Flag(i, self.name, self.word) for i, s in enumerate(t.steps) if self.word in s.text]
                for t in traces]

    def describe(self):
        return {"word": self.word}


class Idle:
    def __init__(self, seed=0):
        self.seed = seed


def idle_organism(seed=0):
    return Idle(seed)


def last(traces, scores, groups):
    return len(traces) - 1, "the last one"


def echo(problem, policy, scorer, prompts=None, *, width=1):
    return ("echo", problem.text, width)


def longest(traces, **options):
    return [len(t.steps) for t in traces]
'''


@pytest.fixture()
def plugin(monkeypatch, tmp_path):
    """``plugin(registry, name, attr)``: ``name = "prmkit_groups_plugin:attr"`` installed as an entry
    point of the registry's group, read afresh (the registry is restored afterwards)."""
    (tmp_path / "prmkit_groups_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    eps: list[SimpleNamespace] = []
    monkeypatch.setattr(registry_module, "_entry_points",
                        lambda group: tuple(ep for ep in eps if ep.group == group))

    def install(registry, name: str, attr: str) -> None:
        eps.append(SimpleNamespace(name=name, value=f"prmkit_groups_plugin:{attr}", group=registry.group,
                                   dist=SimpleNamespace(name="prmkit-groups-plugin")))
        for field, value in (("_scanned", False), ("_entries", dict(registry._entries)),
                             ("_plugins", dict(registry._plugins))):
            monkeypatch.setattr(registry, field, value)

    return install


@pytest.mark.parametrize("registry, group", [(EVAL_TASKS, "prmkit.eval_tasks"),
                                             (MONITORS, "prmkit.monitors"), (ORGANISMS, "prmkit.organisms"),
                                             (SELECTORS, "prmkit.selectors"), (SEARCHES, "prmkit.searches"),
                                             (STRATEGIES, "prmkit.queue_strategies")])
def test_each_registry_reads_its_group(registry, group):
    assert registry.group == group
    module, _, name = ENTRY_POINT_GROUPS[group].rpartition(".")
    assert getattr(__import__(module, fromlist=[name]), name) is registry


def test_a_monitor_plugin_is_listed_and_loaded_by_name(plugin):
    plugin(MONITORS, "word", "WordMonitor")
    assert list(MONITORS)[-1] == "word" and MONITORS.plugin("word").distribution == "prmkit-groups-plugin"
    monitor = load_monitor("word", {"word": "wrong"})
    trace = Trace(id="t", problem=Problem("?"), steps=[Step("fine"), Step("wrong turn")])
    assert [[(f.step, f.evidence) for f in fs] for fs in monitor.flags([trace])] == [[(1, "wrong")]]
    assert list(MONITORS)[:3] == ["rule", "prm", "judge"]  # the built-ins stay first


def test_an_organism_plugin_is_listed_and_built_by_name(plugin):
    plugin(ORGANISMS, "idle", "idle_organism")
    assert "idle" in list(ORGANISMS) and ORGANISMS.plugin("idle").name == "idle"
    assert get_agent("idle", seed=3).seed == 3


def test_a_selector_plugin_selects_by_name(plugin):
    plugin(SELECTORS, "last", "last")
    traces = [Trace(id=f"t{i}", problem=Problem("1 + 1?", answer="2"), steps=[Step(f"The answer is {i}.")],
                    final_answer=str(i)) for i in range(3)]
    chosen = select(traces, "last")
    assert "last" in list(SELECTORS) and chosen.trace.id == "t2"


def test_a_search_plugin_runs_by_name(plugin):
    plugin(SEARCHES, "echo", "echo")
    assert "echo" in list(SEARCHES)
    assert search("echo", Problem("2 + 2?"), None, None, width=3) == ("echo", "2 + 2?", 3)


def test_a_queue_strategy_plugin_orders_the_queue_by_name(plugin):
    plugin(STRATEGIES, "longest", "longest")
    traces = [Trace(id=f"t{i}", problem=Problem(f"q{i}"), steps=[Step("s")] * n) for i, n in enumerate((1, 3, 2))]
    assert "longest" in list(STRATEGIES) and STRATEGIES.plugin("longest").name == "longest"
    assert [e.index for e in build_queue(traces, "longest")] == [1, 2, 0]
