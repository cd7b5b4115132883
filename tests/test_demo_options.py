"""``prmkit demo --policy NAME -p KEY=VALUE`` (issue 43): no default can trap a user. The options reach
the demo's config, are recorded in its settings, and a rerun with other ones is refused."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import prmkit.demo as demo
from prmkit.cli import app


def test_policy_and_its_arguments_reach_the_demo(monkeypatch, tmp_path):
    seen = {}

    def fake_run_demo(cfg, out, *, overwrite, command):
        seen["cfg"], seen["command"] = cfg, command
        (tmp_path / "r.json").write_text('{"summary": {"verdict": "v"}}')
        return {"json": tmp_path / "r.json"}

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    r = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path / "d"), "--policy", "hf",
                                 "-p", "dtype=float32", "-p", "batch_size=8"])
    assert r.exit_code == 0, r.output
    cfg = seen["cfg"]
    assert (cfg.policy, cfg.policy_args) == ("hf", {"dtype": "float32", "batch_size": 8})
    assert cfg.n == demo.DEMO_PRESETS["quick"].n  # the preset's sizes are kept
    r = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path / "d"), "-p", "nonsense"])
    assert r.exit_code != 0 and "is not KEY=VALUE" in str(r.exception or r.output)


def test_a_rerun_with_other_policy_arguments_is_refused(tmp_path):
    cfg = demo.DEMO_PRESETS["quick"]
    demo._Stages(tmp_path, cfg, overwrite=False)
    import dataclasses

    other = dataclasses.replace(cfg, policy_args={"dtype": "float32"})
    with pytest.raises(demo.PrmkitError, match="other settings .policy_args"):
        demo._Stages(tmp_path, other, overwrite=False)
    # A folder from before the option existed (no policy_args) resumes with none given.
    settings = tmp_path / "demo_settings.json"
    import json

    d = json.loads(settings.read_text())
    d.pop("policy_args")
    settings.write_text(json.dumps(d))
    demo._Stages(tmp_path, cfg, overwrite=False)


def test_a_secret_among_the_policy_arguments_never_reaches_the_settings(tmp_path):
    import dataclasses

    cfg = dataclasses.replace(demo.DEMO_PRESETS["quick"], policy="openai_compat",
                              policy_args={"api_key": "sk-test-123", "base_url": "http://u:pw@127.0.0.1:1/v1"})
    demo._Stages(tmp_path, cfg, overwrite=False)
    text = (tmp_path / "demo_settings.json").read_text()
    assert "sk-test-123" not in text and "pw@" not in text
    demo._Stages(tmp_path, cfg, overwrite=False)  # and the same run resumes


class _Stop(Exception):
    pass


@pytest.mark.parametrize(("policy", "given", "want"), [
    ("torch", {}, {"compile": False}),                               # quick: the decode loop stays eager
    ("torch", {"compile": "true"}, {"compile": "true"}),             # unless -p compile=... says otherwise
    ("hf", {}, {}),                                                  # other backends get nothing added
])
def test_quick_keeps_the_torch_decode_eager_unless_asked(monkeypatch, tmp_path, policy, given, want):
    import dataclasses

    import prmkit.policies

    seen = {}

    def fake_load_policy(name, args, **kw):
        seen["name"], seen["args"] = name, dict(args)
        raise _Stop

    monkeypatch.setattr(prmkit.policies, "load_policy", fake_load_policy)
    cfg = dataclasses.replace(demo.DEMO_PRESETS["quick"], policy=policy, policy_args=given)
    with pytest.raises(_Stop):
        demo.run_demo(cfg, tmp_path / "d")
    assert seen == {"name": policy, "args": want}
    assert cfg.policy_args == given  # the recorded settings are what was asked
    full = dataclasses.replace(demo.DEMO_PRESETS["full"], policy="torch")
    with pytest.raises(_Stop):
        demo.run_demo(full, tmp_path / "full")
    assert seen["args"] == {}  # the full demo: the backend's own auto
