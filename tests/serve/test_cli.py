"""``prmkit serve`` parses its options and makes one call into prmkit.serve."""

from __future__ import annotations

import pytest

from prmkit.cli import main


def test_non_loopback_without_token_is_refused_before_loading(capsys, monkeypatch):
    monkeypatch.delenv("PRMKIT_SERVE_TOKEN", raising=False)
    with pytest.raises(SystemExit) as e:
        main(["serve", "--host", "0.0.0.0", "--model", "no/such/folder"])
    assert e.value.code == 1
    assert "refusing to serve on 0.0.0.0 without a token" in capsys.readouterr().err


def test_options_reach_the_server(monkeypatch):
    import prmkit.serve._server as server_mod

    made = {}

    class Fake:
        def run(self):
            made["ran"] = True

    def fake_make_server(scorer, config, **kw):
        made.update(scorer=scorer, config=config, **kw)
        return Fake()

    monkeypatch.setattr(server_mod, "make_server", fake_make_server)
    monkeypatch.setenv("PRMKIT_SERVE_TOKEN", "from-env")
    main(["serve", "--scorer", "scripted", "-s", "scores=[[0.5]]", "--host", "10.0.0.1", "--port", "9001",
          "--aggregate", "last", "--max-traces", "7", "--max-body-mb", "0.5", "--unscored-reward", "-1",
          "--problem-from", "whole", "--end-marker", "<|my_end|>", "--end-marker", "[END]"])
    cfg = made["config"]
    assert (cfg.problem_from, cfg.end_markers) == ("whole", ("<|my_end|>", "[END]"))
    assert made["ran"] and made["host"] == "10.0.0.1" and made["port"] == 9001
    assert (cfg.token, cfg.aggregate, cfg.max_traces, cfg.max_body_bytes, cfg.unscored_reward) == (
        "from-env", "last", 7, 512 * 1024, -1.0)
    assert made["scorer"].name == "scripted"


def test_unknown_problem_rule_is_refused_before_loading(capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve", "--model", "no/such/folder", "--problem-from", "first-user"])
    assert e.value.code == 1
    assert "--problem-from must be one of last-user, whole, got 'first-user'" in capsys.readouterr().err
