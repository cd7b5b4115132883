"""``prmkit train prm`` trains on the agent environment's step labels (every step kind), and the
checkpoint serves as a PRM monitor. A tiny model built from the ``tiny`` config (seed 0); nothing is
downloaded."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from prmkit.cli import main  # noqa: E402
from prmkit.envs import AgentConfig, agent_file, load_agents  # noqa: E402
from prmkit.monitor import PRMMonitor, evaluate_monitors  # noqa: E402
from prmkit.trace import read_traces  # noqa: E402


def test_train_prm_on_agent_labels_then_monitor(tmp_path, monkeypatch):
    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "agent.jsonl"
    agent_file(data, load_agents(["all"]), tasks=4, config=AgentConfig(lines=1))
    traces = list(read_traces(data))
    n_steps = sum(len(t.steps) for t in traces)
    out = tmp_path / "prm"
    main(["train", "prm", "--config", "tiny", f"train=[{data}]", f"output_dir={out}", "max_steps=2",
          "progress=false", "eval_fraction=0", "max_length=2048"])
    info = json.loads((out / "prmkit_rm.json").read_text())
    # every step of every trajectory (plan, reasoning, tool_call, observation, final) is a label position
    assert info["train_data"]["used"] == len(traces) == 20
    assert info["train_data"]["labelled"] == n_steps
    monitor = PRMMonitor(str(out), threshold=0.5)
    flags = monitor.flags(traces[:3])
    assert len(flags) == 3 and all(0 <= f.step < len(t.steps) for fl, t in zip(flags, traces[:3], strict=True) for f in fl)
    r = evaluate_monitors(traces, [monitor], views=["actions"], archetypes=["outcome"], bootstrap=10)
    assert r.rows[0]["n_pos"] == 8 and r.rows[0]["n_neg"] == 12
