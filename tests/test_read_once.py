"""Inputs read once (issue 45, item 5): a command reads an input file more than once (its format, a
count for the progress bar, the records), so a pipe — ``<(cat f.json)``, a FIFO — is refused with one
line naming it, by every command, instead of being read as an empty second file (ProcessBench split
"63" of 0 items, exit 0)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from cli_run import run

from prmkit.data import count_records, detect_format, read
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace, write_traces

FIXTURES = Path(__file__).parent / "fixtures"
REFUSED = "is a pipe, not a regular file (prmkit reads an input more than once); save it to a file first"


class Fifo:
    """A FIFO fed like ``<(cat FILE)``: the first reader gets ``data``, any later one an empty file
    (the writer is gone), so a command that reads twice sees what it sees on a shell's pipe."""

    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data = path, data
        os.mkfifo(path)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    def _feed(self) -> None:
        first = True
        while not self.stop.is_set():
            try:
                with open(self.path, "wb") as f:  # blocks until a reader opens it
                    if first and not self.stop.is_set():
                        f.write(self.data)
                    first = False
            except (BrokenPipeError, OSError):
                pass

    def close(self) -> None:
        self.stop.set()
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # lets a writer blocked in open() go
        os.close(fd)
        self.thread.join(5)


@pytest.fixture()
def fifo(tmp_path):
    made = []

    def make(name: str, data: bytes) -> Path:
        made.append(Fifo(tmp_path / name, data))
        return made[-1].path

    yield make
    for f in made:
        f.close()


def _traces_bytes(tmp_path) -> bytes:
    src = tmp_path / "src.jsonl"
    write_traces([Trace(id=f"t{i}", problem=Problem("2 + 3?", answer="5"),
                        steps=[Step("2 + 3 = 5."), Step("The answer is 5.")]) for i in range(3)], src)
    return src.read_bytes()


def test_data_convert_refuses_a_pipe(tmp_path, fifo, capsys):
    pipe = fifo("63", _traces_bytes(tmp_path))
    code, out, err = run(["data", "convert", pipe, tmp_path / "out.jsonl"], capsys)
    assert (code, err) == (1, f"error: {pipe}: {REFUSED}\n")
    assert not (tmp_path / "out.jsonl").exists()


def test_score_refuses_a_pipe(tmp_path, fifo, capsys):
    pipe = fifo("in.jsonl", _traces_bytes(tmp_path))
    code, out, err = run(["score", pipe, tmp_path / "out.jsonl", "--scorer", "scripted", "-s", "scores={}",
                          "-s", "default=0.5"], capsys)
    assert (code, err) == (1, f"error: {pipe}: {REFUSED}\n")
    assert not (tmp_path / "out.jsonl").exists()


def test_eval_processbench_refuses_a_pipe_instead_of_an_empty_split(tmp_path, fifo, capsys):
    pipe = fifo("63", (FIXTURES / "processbench" / "mini.json").read_bytes())
    code, out, err = run(["eval", "processbench", pipe, "--scorer", "scripted", "-s", "scores={}", "-s", "default=0.9"], capsys)
    assert (code, err) == (1, f"error: {pipe}: {REFUSED}\n")
    assert "63" not in out  # no split of 0 items


def test_every_option_taking_an_input_file_refuses_a_pipe(tmp_path, fifo, capsys):
    good = FIXTURES / "processbench" / "mini.json"
    pipe = fifo("tune.json", good.read_bytes())
    code, out, err = run(["eval", "processbench", good, "--tune-on", pipe, "--scorer", "scripted", "-s", "scores={}",
                          "-s", "default=0.9"], capsys)
    assert (code, err) == (1, f"error: {pipe}: {REFUSED}\n")


def test_the_python_readers_refuse_a_pipe_too(tmp_path, fifo):
    pipe = fifo("in.jsonl", _traces_bytes(tmp_path))
    for call in (lambda: list(read(pipe)), lambda: detect_format(pipe), lambda: count_records(pipe, "prmkit"),
                 lambda: list(read(pipe, "prmkit"))):
        with pytest.raises(PrmkitError) as e:
            call()
        assert str(e.value) == f"{pipe}: {REFUSED}"


def test_a_regular_file_still_reads(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(_traces_bytes(tmp_path))
    assert detect_format(src) == "prmkit" and count_records(src) == 3 and len(list(read(src))) == 3
