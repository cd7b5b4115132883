"""Shared fixtures: where the public data lies, and a skip with a clear message where it does not."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The suite starts hundreds of Python processes (every documented command, the CLI and kill tests, the
# quick start's fresh venv, installed with pip's --no-compile). Where PYTHONDONTWRITEBYTECODE is set, as
# some CI images do, each of them compiled prmkit's sources, and in that venv torch's and transformers',
# again: importing torch and transformers there took 10.2 s a process instead of 3.8 s. Bytecode is
# written as Python does by default, so a module is compiled once for the whole run.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Helper modules shared by several test folders (tiny_tokenizers.py): conftests cannot import each other
# under --import-mode=importlib, a plain module on sys.path can.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))


# The suite's hand-derived numbers are fp32 CPU numbers, and a model on a GPU loads in bf16 by default:
# hide CUDA (before torch starts it) unless the GPU checks are asked for: PRMKIT_TEST_CUDA=1 pytest -m cuda
# (tests/train/test_cuda.py compares the GPU paths with the CPU's).
if os.environ.get("PRMKIT_TEST_CUDA") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

# Under pytest-xdist (the README's test command runs `-n auto`), each worker gets its share of the cores,
# and so do the commands it starts: two workers of two threads each on two cores spend their time
# waiting on each other. A value set by hand wins.
if (_workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT")) and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(_workers)))


# Many tests give prmkit a private cache (PRMKIT_CACHE in a temporary folder, so that the models they build
# never reach the user's), and inductor's kernels followed it there: every run compiled the int8 training
# and decode graphs again (the int8 precision test: 42 s instead of 13). Compiled kernels are keyed by the
# graph, the torch version and the CPU, never by a test's models: the whole run keeps them where prmkit
# itself does (the user's $PRMKIT_CACHE/inductor/torch-<version>, or the TORCHINDUCTOR_CACHE_DIR they set);
# tests/policies/test_torch.py unsets the variable where the choice of folder is what it tests.
from prmkit.policies import use_inductor_cache  # noqa: E402

use_inductor_cache()


# The suite's processes hold torch, transformers and their models: millions of long-lived objects that
# CPython's default thresholds make the garbage collector walk again and again. The thresholds the
# prmkit command runs with (prmkit.cli.GC_THRESHOLDS) hold for the whole run.
from prmkit.cli import GC_THRESHOLDS  # noqa: E402

gc.set_threshold(*GC_THRESHOLDS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n N`` (pytest-xdist's ``load``): tests go to whichever worker is free, except the
    documented commands of tests/test_readme.py, whose lines run in order in one folder per block:
    each block goes to one worker whole (``test_readme.xdist_scope``). xdist's own ``loadgroup`` would
    do this with marks, but it does not group on pytest 9.2 (pytest-dev/pytest-xdist#1386)."""
    if config.getvalue("dist") != "load":
        return None
    from test_readme import xdist_scope
    from xdist.scheduler import LoadScopeScheduling

    class DocumentedBlocks(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid) or nodeid

    # Work goes out in the order the workers collected it (pytest_collection_modifyitems: the longest
    # first), not xdist's largest-scope-first, which sends the quick start's one long test last.
    config.option.loadscopereorder = False
    return DocumentedBlocks(config, log)


def _shared_data() -> Path:
    env = os.environ.get("PRMKIT_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or ``$PRMKIT_SHARED_DATA``); tests using it carry the ``realdata`` marker."""
    path = _shared_data()
    if not (path / "INDEX.md").exists():
        pytest.skip(f"realdata: the public data folder {path} is absent "
                    "(set PRMKIT_SHARED_DATA to its location to run this test)")
    return path


@pytest.fixture()
def fixtures() -> Path:
    """Hand-written fixture files committed with the tests."""
    return FIXTURES


@pytest.fixture
def fsync_calls(monkeypatch):
    """What was flushed and renamed, in order: ``("file"|"dir", inode)`` for each ``os.fsync`` and
    ``("replace", inode of src, str(dst))`` for each ``os.replace`` (the durable-write tests watch these:
    a SIGKILL test cannot see a missing fsync)."""
    import stat

    seen: list[tuple] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        st = os.fstat(fd)
        seen.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        real_fsync(fd)

    def replace(src, dst):
        seen.append(("replace", os.stat(src).st_ino, str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def _longest_first(item) -> int:
    """The order of work under pytest-xdist: the quick start's fresh-venv demo (about two minutes,
    the suite's longest test) first, then the documented commands and the other ``slow`` tests, then
    the quick ones, which fill the workers' tails evenly. Sent last, the long test alone ran on one
    worker for its two minutes while the other idled (a run of 9 min 10 s lost 45 s that way)."""
    case = getattr(item, "callspec", None) and item.callspec.params.get("case")
    if getattr(case, "repository", False):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


def pytest_collection_modifyitems(config, items):
    """Every test that reads ../shared/data must carry the ``realdata`` marker (so CI can select or
    deselect real-data tests with ``-m``); a test that forgets it fails at collection. Under
    pytest-xdist, the longest work goes first (:func:`_longest_first`; a stable sort, so a documented
    block's lines keep their order)."""
    missing = [item.nodeid for item in items
               if "shared_data" in getattr(item, "fixturenames", ())
               and item.get_closest_marker("realdata") is None]
    if missing:
        raise pytest.UsageError("tests use shared_data without @pytest.mark.realdata: "
                                + ", ".join(missing))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_longest_first)


@pytest.fixture(autouse=True, scope="session")
def _sigint_as_in_a_terminal():
    """A test run started in the background by a shell without job control (``pytest ... &`` in a
    script, as some CI runners do) starts with SIGINT ignored, and so does every process it starts:
    Python then installs no KeyboardInterrupt handler, and the Ctrl-C tests would see no Ctrl-C. The
    run gets Python's handler back, as in a terminal (its children inherit a handled signal as the
    default, and install their own); in a terminal this changes nothing."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
