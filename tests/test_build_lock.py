"""Cache entries are built by one process at a time (:func:`prmkit._durable.build_lock`): a second
process that needs the entry at the same moment waits, says so in one line, and then reads what the
first built instead of building it again; the cache listing never shows the lock files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from prmkit._durable import BUILD_LOCK_SUFFIX, build_lock
from prmkit.policies import cache_entries, clear_cache

# A builder as the cache's are written: check, lock, check again, build (slowly), publish by rename.
BUILDER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from prmkit._durable import build_lock

    target, log, started = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    started.touch()
    if not target.exists():
        with build_lock(target, "a test entry"):
            if not target.exists():
                with open(log, "a") as f:
                    f.write(f"{os.getpid()}\\n")
                time.sleep(1.5)
                tmp = target.with_name(".tmp-" + target.name)
                tmp.write_text("built")
                os.replace(tmp, target)
    print(target.read_text())
""")


def test_two_processes_build_an_entry_once(tmp_path):
    target, log = tmp_path / "gguf" / "entry-0123456789abcdef", tmp_path / "builds.log"
    first = subprocess.Popen([sys.executable, "-c", BUILDER, str(target), str(log), str(tmp_path / "a")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not log.exists():  # the first process holds the lock and is building
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.02)
    second = subprocess.run([sys.executable, "-c", BUILDER, str(target), str(log), str(tmp_path / "b")],
                            capture_output=True, text=True, timeout=60)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, (err, second.stderr)
    assert out.strip() == second.stdout.strip() == "built"
    assert len(log.read_text().split()) == 1  # built once
    assert f"waiting for another process to finish a test entry ({target})" in second.stderr
    assert "waiting" not in err


def test_the_lock_is_released_on_failure_and_the_next_process_builds(tmp_path):
    target = tmp_path / "ct2" / "entry"
    try:
        with build_lock(target, "a test entry"):
            raise OSError("disk full")
    except OSError:
        pass
    argv = [sys.executable, "-c", BUILDER, str(target), str(tmp_path / "log"), str(tmp_path / "s")]
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "built" and "waiting" not in ran.stderr


def test_the_cache_listing_and_clear_leave_lock_files_out(tmp_path):
    entry = tmp_path / "merged" / "SmolLM2-policy-0123456789abcdef"
    with build_lock(entry, "a test entry"):
        entry.mkdir()
        (entry / "config.json").write_text("{}")
    lock = entry.with_name(f".{entry.name}{BUILD_LOCK_SUFFIX}")
    assert lock.exists() and lock.stat().st_size == 0
    assert [e.name for e in cache_entries(root=tmp_path)] == [entry.name]
    assert [e.name for e in clear_cache(root=tmp_path)] == [entry.name]
    assert not entry.exists() and lock.exists()  # another process may hold it: never removed
    assert cache_entries(root=tmp_path) == []


def test_builders_take_the_lock():
    """Each builder of a shared cache entry runs inside build_lock: the GGUF de-quantisation, the
    merged policy, the shipped reward model's merge, the CTranslate2 conversion."""
    import ast

    src = Path(__file__).resolve().parents[1] / "src" / "prmkit"
    wanted = {"policies/_hf.py": {"load_causal_lm", "load_merged"}, "policies/_ct2.py": {"convert_to_ct2"},
              "models/_persistence.py": {"merged_shipped_folder"}}
    for rel, names in wanted.items():
        tree = ast.parse((src / rel).read_text())
        locked = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                  and any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "build_lock"
                          for n in ast.walk(f))}
        assert names <= locked, (rel, names - locked)
