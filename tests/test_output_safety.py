"""Nothing lost through names prmkit chose (issue 45, item 1): unique temporary files, one writer per
output, inputs refused when they are the output, one of its side files or a running writer's
temporary file; side files kept unless this run made them or ``--overwrite``; a full disk and SIGTERM
in the user's terms, leaving the old output intact."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import run
from proc_checks import alive

from prmkit import _durable
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace, read_traces, write_traces


def _traces(n: int) -> list[Trace]:
    return [Trace(id=f"t{i}", problem=Problem(f"What is {i} + 1?", answer=str(i + 1)),
                  steps=[Step(f"{i} + 1 = {i + 1}", labels=[StepLabel(1.0, "human")])], final_answer=str(i + 1))
            for i in range(n)]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("src_name, argv", [
    ("x.partial.jsonl", ["data", "convert", "{src}", "{dst}"]),
    ("x.partial.jsonl", ["score", "{src}", "{dst}", "--scorer", "scripted", "-s", "scores={{}}", "-s", "default=0.5"]),
    ("x.partial.jsonl", ["label", "{src}", "{dst}", "--method", "mc", "--policy", "scripted",
                         "-p", 'completions=["The answer is 1."]', "-k", "1", "--workers", "0"]),
    ("x.jsonl.partial", ["monitor", "{src}", "{dst}", "--monitor", "rule"])])
def test_an_input_named_like_an_old_temporary_file_is_kept(tmp_path, capsys, src_name, argv):
    """``prmkit data convert x.partial.jsonl x.jsonl`` (rescuing what a killed run left) used to write
    over its own input: the temporary file had exactly that name (``label`` the same, exit 0; ``score``
    deleted IN; ``monitor`` moved ``OUT.partial`` into OUT)."""
    src, dst = tmp_path / src_name, tmp_path / "x.jsonl"
    write_traces(_traces(5), src)
    before = src.read_bytes()
    code, _, err = run([a.format(src=src, dst=dst) for a in argv], capsys)
    assert code == 0, err
    assert src.read_bytes() == before
    assert [t.id for t in read_traces(dst)] == [f"t{i}" for i in range(5)]
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("cmd", [["data", "convert", "{inp}", "{out}", "--overwrite"],
                                 ["score", "{inp}", "{out}", "--scorer", "scripted", "-s", "scores={{}}", "-s", "default=0.5", "--overwrite"]])
def test_an_input_that_is_the_output_is_refused_and_kept(tmp_path, capsys, cmd):
    inp = tmp_path / "a.jsonl"
    write_traces(_traces(3), inp)
    before = inp.read_bytes()
    link = tmp_path / "b.jsonl"
    link.symlink_to(inp)
    code, _, err = run([a.format(inp=inp, out=link) for a in cmd], capsys)
    assert code == 1 and "the output must not overwrite the input" in err
    assert inp.read_bytes() == before


def test_score_refuses_an_input_that_is_the_outputs_skipped_list(tmp_path, capsys):
    """``score --skip-invalid`` used to delete an input named ``OUT.skipped.jsonl`` as a stale side file."""
    out = tmp_path / "s.jsonl"
    inp = tmp_path / "s.jsonl.skipped.jsonl"
    write_traces(_traces(3), inp)
    before = inp.read_bytes()
    code, _, err = run(["score", inp, out, "--scorer", "scripted", "-s", "scores={}", "-s", "default=0.5", "--skip-invalid"], capsys)
    assert code == 1 and "side file of the output" in err, err
    assert inp.read_bytes() == before and not out.exists()


def test_a_stale_skipped_list_is_kept_without_overwrite_and_removed_with_it(tmp_path, capsys):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces(_traces(2), inp)
    side = tmp_path / "out.jsonl.skipped.jsonl"
    side.write_text('{"user": "file"}\n')
    code, _, err = run(["data", "convert", inp, out, "--skip-invalid"], capsys)
    assert code == 0, err
    assert side.read_text() == '{"user": "file"}\n' and "from an earlier run" in err
    code, _, err = run(["data", "convert", inp, out, "--skip-invalid", "--overwrite"], capsys)
    assert code == 0 and not side.exists()


def test_an_input_that_is_a_running_writers_temporary_file_is_refused(tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    with _durable.durable_file(out) as tmp:
        write_traces(_traces(2), tmp.with_name("copy.jsonl"))
        os.replace(tmp.with_name("copy.jsonl"), tmp)
        code, _, err = run(["data", "convert", tmp, tmp_path / "rescued.jsonl"], capsys)
        assert code == 1 and "temporary file of a prmkit run that is still writing" in err, err
        assert tmp.exists()


def test_a_dead_writers_temporary_file_can_be_rescued(tmp_path, capsys):
    dead = tmp_path / ".o.jsonl.999999999-0123abcd.prmkit-partial"
    write_traces(_traces(2), dead)
    assert _durable.temp_name_owner(dead) is None
    code, _, err = run(["data", "convert", dead, tmp_path / "rescued.jsonl", "--from", "prmkit"], capsys)
    assert code == 0, err
    assert len(list(read_traces(tmp_path / "rescued.jsonl"))) == 2


def test_a_second_writer_of_one_output_is_refused_naming_the_first(tmp_path, capsys):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces(_traces(3), inp)
    write_traces(_traces(1), out)
    before = out.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom prmkit._durable import output_lock\n"
        f"with output_lock({str(out)!r}):\n    print('locked', flush=True)\n    time.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for cmd in (["data", "convert", inp, out, "--overwrite"],
                    ["score", inp, out, "--scorer", "scripted", "-s", "scores={}", "-s", "default=0.5", "--overwrite"]):
            code, _, err = run(cmd, capsys)
            assert code == 1 and "another prmkit run is writing it" in err, err
            assert f"process {holder.pid}" in err
            assert out.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
    code, _, err = run(["data", "convert", inp, out, "--overwrite"], capsys)  # the lock died with it
    assert code == 0, err
    assert _leftovers(tmp_path) == []


def test_two_writers_in_one_process_do_not_share_a_temporary_file(tmp_path):
    out = tmp_path / "o.txt"
    with _durable.durable_file(out, lock=False) as a, _durable.durable_file(out, lock=False) as b:
        assert a != b and a.parent == b.parent == tmp_path
        a.write_text("a")
        b.write_text("b")
    assert out.read_text() == "a"  # the outer block published last
    assert _leftovers(tmp_path) == []


def test_a_failure_leaves_the_old_output_and_no_temporary_file(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text("old\n")
    with pytest.raises(RuntimeError), _durable.durable_file(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert out.read_text() == "old\n" and _leftovers(tmp_path) == []


def test_a_new_file_gets_the_permissions_of_any_new_file(tmp_path):
    out = tmp_path / "o.txt"
    _durable.write_text_file(out, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_full_disk_says_so_and_keeps_the_old_output(tmp_path, capsys, monkeypatch):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces(_traces(3), inp)
    out.write_text("old\n")

    def full(tmp, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))

    monkeypatch.setattr(_durable, "replace_durably", full)
    code, _, err = run(["data", "convert", inp, out, "--overwrite"], capsys)
    assert code == 1
    assert f"no space left on device writing {out} (nothing written; the old OUT is intact)" in err
    assert "prmkit-partial" not in err  # no internal temporary name in the message
    assert out.read_text() == "old\n" and _leftovers(tmp_path) == []


def test_the_lock_is_taken_again_after_a_holder_removed_its_file(tmp_path):
    """A lock file removed by its holder between our open and our lock must not leave two holders."""
    out = tmp_path / "o"
    with _durable.output_lock(out):
        lock = tmp_path / ".o.prmkit-lock"
        assert lock.exists() and f"process {os.getpid()}" in lock.read_text()
        with pytest.raises(_durable.OutputBusyError):
            with _durable.output_lock(out):
                pass
    assert not lock.exists()
    with _durable.output_lock(out):
        pass


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM is POSIX")
def test_sigterm_removes_the_temporary_file_and_keeps_the_old_output(tmp_path):
    """``prmkit score`` is inside its write (a scorer that takes a minute per call) when SIGTERM comes:
    it exits 143 with one line, the old OUT as it was, no temporary file left."""
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces(_traces(2), inp)
    out.write_text("old\n")
    proc = subprocess.Popen([sys.executable, "-m", "prmkit", "score", str(inp), str(out), "--scorer", "scripted",
                             "-s", "scores={}", "-s", "default=0.5", "-s", "delay=60", "--overwrite"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(".prmkit-partial" in n for n in _leftovers(tmp_path)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated"
    assert out.read_text() == "old\n" and _leftovers(tmp_path) == []


def test_check_inputs_passes_unrelated_files_and_stdin(tmp_path):
    _durable.check_inputs(tmp_path / "o", [tmp_path / "i", "-", None], [tmp_path / "side", ":memory:"])
    with pytest.raises(PrmkitError, match="side file"):
        _durable.check_inputs(tmp_path / "o", [tmp_path / "side"], [tmp_path / "side"])


def test_an_error_on_the_temporary_file_names_the_output_not_the_temporary_name(tmp_path):
    out = tmp_path / "o.txt"
    with pytest.raises(PrmkitError) as e, _durable.durable_file(out) as tmp:
        raise PermissionError(13, "Permission denied", str(tmp))
    assert str(e.value) == f"{out}: Permission denied while writing it (nothing written; no OUT was made)"


def test_a_published_staging_folder_is_not_private(tmp_path):
    import tempfile

    import torch
    from safetensors.torch import save_file

    from prmkit._jsonio import publish_folder

    stage = Path(tempfile.mkdtemp(dir=tmp_path, prefix=".tmp-"))
    save_file({"w": torch.zeros(2)}, str(stage / "model.safetensors"))  # safetensors writes 0600
    (stage / "own.txt").write_text("x")
    os.chmod(stage / "own.txt", 0o640)  # a mode someone chose stays
    publish_folder(stage, tmp_path / "model")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "model").stat().st_mode & 0o777 == 0o777 & ~umask
    assert (tmp_path / "model" / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "model" / "own.txt").stat().st_mode & 0o777 == 0o640


@pytest.mark.skipif(os.name != "posix", reason="process ids and SIGKILL are POSIX")
def test_a_command_started_under_a_shell_ends_with_the_process_named_in_prmkit_exit_with(tmp_path):
    """A harness that starts ``prmkit serve`` (or any command) through a shell sets PRMKIT_EXIT_WITH to
    its own id: killed with SIGKILL, it leaves no prmkit process running (issue 45, item 3)."""
    inp, out, pidfile = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "pid"
    write_traces(_traces(2), inp)
    cmd = (f"{sys.executable} -m prmkit score {inp} {out} --scorer scripted -s 'scores={{}}' -s default=0.5 "
           f"-s delay=60 & echo $! > {pidfile}; wait")
    script = tmp_path / "harness.py"
    script.write_text("import os, subprocess, sys, time\n"
                      "env = {**os.environ, 'PRMKIT_EXIT_WITH': str(os.getpid())}\n"
                      f"subprocess.Popen(['bash', '-c', {cmd!r}], env=env)\n"
                      "time.sleep(120)\n")
    harness = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()) or not _leftovers(tmp_path):
            assert time.monotonic() < deadline and harness.poll() is None
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        harness.kill()
        harness.wait()
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), "the prmkit command outlived the harness by 10 s"
    finally:
        if harness.poll() is None:
            harness.kill()
