"""Every command in README.md and in the documentation pages ``docs/*.md``, and every example in a
command's ``--help``, runs as written (issue 15, item 12; issue 44), on small inputs.

**What runs.** Every ```` ```bash ````, ```` ```sh ```` and ```` ```console ```` block of README.md and of
each ``docs/*.md`` page, in that order (in a
console block, the lines after ``$ ``) and every ```` ```python ```` block; and every example line of a
command's help (``Example: prmkit ...``, ``On 2 CPU processes: prmkit ...``). A shell line (a line ending
in a backslash goes on) is one test case; a ``NAME=value`` (or ``NAME="several words"``) line sets ``$NAME`` for
the lines after it (substituted as a shell would split it).
A plain ``prmkit ...`` line runs in this process (``prmkit.cli.main``, ``*`` patterns expanded as a
shell would; ``NAME=value`` words before ``prmkit`` set those variables while it runs, and
``OMP_NUM_THREADS`` torch's thread count, as a fresh process would read them), and so does a plain
``python benchmarks/NAME.py ...`` line (:func:`_run_script`: as its
own ``__main__``, with what it may change put back); anything else runs under bash with this Python's
``bin`` first on ``PATH``. Either way
torch's compiler is off (:data:`NO_COMPILE`), except in the quick start's fresh environment. A Python
block runs as a doctest if it holds ``>>>``, else it is executed. A line's own comment ``# exits N``
gives the exit status it must end with (else 0).

A case's id names its file and line (``README.md:57``, ``docs/label.md:40``). Other blocks
(```` ```text ````, ```` ```toml ````, ...) are not run and take no markers.

**Where.** The lines of one block run in order in one scratch folder, a fresh copy of the
fixture set; the --help examples share one copy, in the order of the command tree. The fixture set
(made once, by prmkit's own commands): ``traces.jsonl`` (24 arith traces with labels by construction,
``prmkit data derive --env arith``: 6 problems, 4 traces each), ``runs/arith.jsonl`` (2 of them), a tiny
PRM in ``runs/prm`` and ``runs/demo/prm`` and a tiny ORM in ``runs/demo/orm`` (``prmkit train --config
tiny``, standing in for the demo's), ``scored.jsonl`` (traces.jsonl scored by the PRM) and
``runs/demo/heldout.jsonl`` (scored by both, as the demo's is), ``logs/2026-11-26T22-05-22_task.json`` (the
hand-written Inspect log of ``tests/fixtures/inspect``), ``runs/tiny-qwen2-prm`` (a random-init
``Qwen2ForTokenClassification`` with a 2-class head and a ChatML tokenizer with ``<extra_0>``, seed 0:
the architecture class and tokenizer convention of Qwen2.5-Math-PRM, hidden size 32), ``symbolic.jsonl`` (traces.jsonl with the
symbolic checker's labels) and ``benchmarks`` (a link to the repository's). ``../shared/data`` is the public data
folder where it is present (lines reading it carry the ``realdata`` marker and skip with a message where
it is absent), with ProcessBench's two JSON files cut to their first 4 erroneous and first 4
error-free samples: scoring them whole takes minutes (at 20 + 20 the docs' ProcessBench lines took 3 minutes,
at 8 + 8 about 2).

**Markers.** HTML comments, not rendered, right before a block (in README.md or a docs page):

- ``<!-- readme-test: skip: REASON -->``: the block is not run; pytest shows the reason;
- ``<!-- readme-test: skip "TEXT": REASON -->``: its lines containing TEXT are not run;
- ``<!-- readme-test: append "TEXT": ARGS -->``: its lines containing TEXT run with ARGS appended, a
  small-size override (an option given twice takes its last value);
- ``<!-- readme-test: replace "OLD": NEW -->``: in its lines (or its Python block) containing OLD, OLD
  is replaced by NEW: a small-size override of what ``append`` cannot reach (a launcher's process
  count, a hub id of many gigabytes -> a tiny local model of the same architecture class, in the
  fixture set); the case's id keeps the line as written, and a failure shows what ran;
- ``<!-- readme-test: background "TEXT": URL -->``: its line containing TEXT (a server) starts in the
  background, and the next line runs once URL answers; the server is stopped (SIGTERM to its process
  group, then SIGKILL) when the block's lines are done. Where URL's port is already taken here, the
  block's lines skip, saying so;
- ``<!-- readme-test: stand-in "TEXT": URL -->``: its lines containing TEXT run while a stand-in
  OpenAI-compatible server (``tests/openai_stand_in.py``: every answer the same short arithmetic
  solution) listens at URL's host and port, started before the first such line and stopped as a
  background server is. It tests the command line and the HTTP client, not a model. Where the port
  is already taken here, those lines skip, saying so;
- ``<!-- readme-test: given "PATH": FILE -->``: before the block's first line, the fixture file FILE is
  copied to PATH: an input that another block makes (blocks do not share folders);
- ``<!-- readme-test: no-fixtures -->``: the block runs in a folder without the fixture files (its
  lines make their own);
- ``<!-- readme-test: repository -->``: the block runs in a fresh copy of the repository's tracked
  files (what a clean clone has, with this checkout's edits), as the quick start's lines are run
  from a clone; each line may take up to 40 minutes (the quick start installs prmkit into a new
  virtual environment and runs the demo: at the ``--quick`` size, through its ``replace "prmkit
  demo": prmkit demo --quick`` marker, since the full demo's time is a benchmark record, not a test);
- ``<!-- readme-test: env NAME=VALUE -->``: its lines run with this environment variable (a relative
  path is inside the scratch folder).

The --help examples take the same ``skip`` / ``append`` / ``env`` controls from :data:`HELP_CONTROLS`. A line
whose input file would be made by a line above it that did not run is skipped, saying so. A marker or control that
matches nothing fails :func:`test_markers_and_controls_match`, so none outlives its line. A new
unmarked line that fails fails the test.
"""

from __future__ import annotations

import contextlib
import doctest
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The files whose blocks run: the README first, then the documentation pages in name order.
DOC_FILES = [README, *sorted((REPO / "docs").glob("*.md"))]

#: The --help examples' controls: a piece of the example -> ("skip", reason), ("append", args) or
#: ("env", "NAME=VALUE").
HELP_CONTROLS: dict[str, tuple[str, str]] = {
    "prmkit demo": ("skip", "the whole pipeline (minutes); the README's quick start runs it at a small size"),
    "data derive ../shared/data/gsm8k/train.jsonl": ("append", "--limit 50"),  # of 7,473 problems
    "data derive --env arith": ("append", "--problems 4"),
    "prmkit generate": ("skip", "docs/generate.md's first line runs this command (SmolLM2, small size)"),
    # fine-tunes SmolLM2-135M with LoRA (about 25 minutes on 2 cores); one step of 2 examples: 5 s
    "prmkit policy sft": ("append", "--examples 2 --batch-size 2"),
    "prmkit label": ("skip", "SmolLM2 rollouts for 24 traces take minutes; docs/label.md's label line "
                             "runs the same command on 2 traces"),
    "prmkit search": ("append", "--problems 1 -n 4 --m 2 --max-depth 2 --step-tokens 16"),
    "--num-processes 2": ("skip", "docs/train.md's training block runs this line"),
    # the fixture set already holds runs/prm (a reader's first run has none): replace it, as asked
    "--config tiny train=[traces.jsonl] output_dir=runs/prm": ("append", "--overwrite"),
    "accelerate launch": ("skip", "docs/train.md's training block runs this line (on 2 CPU processes, with a "
                                  "tiny Qwen2 for the 7B model)"),
    "eval prmbench": ("append", "--limit 8"),
    "prmkit cache clear": ("env", "PRMKIT_CACHE=cache"),  # not the cache the other lines use
    "prmkit serve": ("skip", "docs/serve.md's serving block starts this same command in the background, "
                             "uses it and stops it"),
}

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
_DIRECTIVE = re.compile(r'(skip|append|replace|background|given|stand-in)(?:\s+"([^"]+)")?:\s*(.+)|(no-fixtures|repository)|env (\w+=\S*)')
_ASSIGN = re.compile(r'^([A-Za-z_]\w*)=(?:"([^"$`\\]*)"|(\S*))\s*(#.*)?$')
_EXITS = re.compile(r"#\s*exits (\d+)\b")
_EXAMPLE = re.compile(r"^\s*(?:Example|On [^:]+):\s+((?:prmkit|accelerate|python)\b.*?)\s*$")


@dataclass
class Case:
    """One shell line or Python block to run."""

    group: str            # its README block ("README.md:57") or "help"
    where: str            # README.md:LINE or "prmkit data stats --help"
    text: str             # the line as run (variables expanded, ``replace`` applied), or the Python source
    kind: str = "shell"   # shell | python
    skip: str | None = None
    append: str = ""
    background: str | None = None  # a server: the URL that answers once it is up
    stand_in: str | None = None  # a stand-in OpenAI-compatible server's URL, up while it runs
    exits: int = 0
    fixtures: bool = True
    repository: bool = False  # runs in a copy of the repository's tracked files
    env: dict[str, str] = field(default_factory=dict)  # set while it runs
    given: dict[str, str] = field(default_factory=dict)  # PATH -> fixture file, copied in first
    earlier: list[str] = field(default_factory=list)  # the lines above it in its group
    written: str = ""     # the line as written, where ``replace`` changed it

    def __post_init__(self) -> None:
        self.written = self.written or self.text

    @property
    def realdata(self) -> bool:
        return "../shared/data" in self.text

    def id(self) -> str:
        words = self.written.split("\n")[0][:60]
        return f"{self.where} {words}"


def _logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join backslash continuations; drop blank and comment-only lines."""
    out, buf, start = [], "", 0
    for no, line in lines:
        if not buf:
            start = no
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        if buf.strip() and not buf.strip().startswith("#"):
            out.append((start, buf.strip()))
        buf = ""
    return out


def _directives(markers: list[tuple[int, str]], problems: list[str],
                name: str = "README.md") -> list[tuple[str, str | None, str]]:
    out = []
    for no, body in markers:
        m = _DIRECTIVE.fullmatch(body)
        if not m:
            problems.append(f"{name}:{no}: not a readme-test marker: {body!r}")
            continue
        if m.group(4):
            out.append((m.group(4), None, ""))
        elif m.group(5):
            out.append(("env", None, m.group(5)))
        else:
            out.append((m.group(1), m.group(2), m.group(3)))
    return out


def _readme_cases() -> tuple[list[Case], list[str]]:
    """The cases of README.md and of every ``docs/*.md`` page, and the problems found with their markers."""
    cases: list[Case] = []
    problems: list[str] = []
    for path in DOC_FILES:
        more, found = _file_cases(path)
        cases += more
        problems += found
    return cases, problems


def _file_cases(path: Path) -> tuple[list[Case], list[str]]:
    """One file's cases, and the problems found with its markers."""
    name = path.relative_to(REPO).as_posix()
    cases: list[Case] = []
    problems: list[str] = []
    lines = path.read_text().splitlines()
    markers: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        no, line = i + 1, lines[i]
        if m := _MARKER.match(line):
            markers.append((no, m.group(1)))
            i += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if line.strip() and markers:
                problems.append(f"{name}:{markers[0][0]}: a readme-test marker not right before a code block")
                markers = []
            i += 1
            continue
        lang = fence.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = [(k + 1, lines[k]) for k in range(i + 1, j)]
        directives = _directives(markers, problems, name)
        markers = []
        i = j + 1
        group = f"{name}:{no}"
        if lang not in ("bash", "sh", "console", "python"):
            if directives:
                problems.append(f"{group}: readme-test markers on a {lang or 'plain'} block, which is not run")
            continue
        block_skip = next((r for k, t, r in directives if k == "skip" and t is None), None)
        fixtures = not any(k == "no-fixtures" for k, _, _ in directives)
        repository = any(k == "repository" for k, _, _ in directives)
        env = dict(arg.split("=", 1) for k, _, arg in directives if k == "env")
        given = {target: arg for k, target, arg in directives if k == "given"}
        replace = [(target, arg) for k, target, arg in directives if k == "replace"]
        if lang == "python":
            text = "\n".join(ln for _, ln in body)
            case = Case(group, f"{name}:{no + 1}", text, "python", skip=block_skip, fixtures=fixtures,
                        env=env, given=given)
            for old, new in replace:
                if old not in text:
                    problems.append(f"{group}: the marker replace {old!r} matches nothing in its block")
                case.text = case.text.replace(old, new)
            cases.append(case)
            continue
        if lang == "console":
            body = [(k, ln[2:]) for k, ln in body if ln.startswith("$ ")]
        vars_: dict[str, str] = {}
        block_cases = []
        for k, text in _logical_lines(body):
            if (a := _ASSIGN.match(text.strip())):
                vars_[a.group(1)] = a.group(2) if a.group(2) is not None else a.group(3)
                continue
            expanded = re.sub(r"\$\{?([A-Za-z_]\w*)\}?",
                              lambda m, v=vars_: v.get(m.group(1), m.group(0)), text)
            case = Case(group, f"{name}:{k}", expanded, skip=block_skip, fixtures=fixtures, env=env,
                        given=given, repository=repository)
            if (e := _EXITS.search(text)):
                case.exits = int(e.group(1))
            for kind, target, arg in directives:
                if target is not None and target in text:
                    if kind == "skip":
                        case.skip = case.skip or arg
                    elif kind == "append":
                        case.append = arg
                    elif kind == "replace":
                        case.text = case.text.replace(target, arg)
                    elif kind == "background":
                        case.background = arg
                    elif kind == "stand-in":
                        case.stand_in = arg
            block_cases.append(case)
        for kind, target, _ in directives:
            if kind != "given" and target is not None and not any(target in c.written for c in block_cases):
                problems.append(f"{group}: the marker {kind} {target!r} matches no line of its block")
        for n, case in enumerate(block_cases):
            case.earlier = [c.text for c in block_cases[:n]]
        cases += block_cases
    if markers:
        problems.append(f"{name}:{markers[0][0]}: a readme-test marker at the end of the file")
    return cases, problems


def _help_cases() -> tuple[list[Case], list[str]]:
    """The --help examples of every command, in the order of the command tree, and unused controls."""
    import typer

    from prmkit.cli import app

    cases = []

    def walk(cmd, path):
        for line in (cmd.help or "").splitlines():
            if (m := _EXAMPLE.match(line)):
                text = re.sub(r"\s{2,}\(.*\)$", "", m.group(1))  # "  (then open ...)": a remark
                text = text.replace("\\[", "[")  # rich markup's escape: the help shows "["
                cases.append(Case("help", f"{' '.join(path)} --help", text))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), ["prmkit"])
    # The report reads what the eval examples write: it goes last (a stable sort keeps the rest).
    cases.sort(key=lambda c: c.where == "prmkit report --help")
    used = set()
    for case in cases:
        for target, (kind, arg) in HELP_CONTROLS.items():
            if target in case.text:
                used.add(target)
                if kind == "skip":
                    case.skip = case.skip or arg
                elif kind == "env":
                    name, value = arg.split("=", 1)
                    case.env[name] = value
                else:
                    case.append = arg
    problems = [f"HELP_CONTROLS[{t!r}] matches no --help example" for t in HELP_CONTROLS if t not in used]
    for n, case in enumerate(cases):
        case.earlier = [c.text for c in cases[:n]]
    return cases, problems


README_CASES, README_PROBLEMS = _readme_cases()
HELP_CASES, HELP_PROBLEMS = _help_cases()


def test_the_skipped_test_line_is_what_ci_runs():
    """The README's test command is the one line of README.md it does not run here (it would run this
    test): it runs in CI, because ``.ci/run`` runs exactly it. (A docs page may skip a block that
    repeats a README line, saying so.)"""
    skipped = [c for c in README_CASES if c.skip and c.group.startswith("README.md:")]
    assert [c.text for c in skipped] == [_ci_command()], [c.where for c in skipped]


def _ci_command() -> str:
    """The one command ``.ci/run`` runs, leaving out its comments, shell settings and the one ``if ... fi``
    block that installs Debian's chromium for the browser tests (a system package, not prmkit's set-up)."""
    lines, in_block = [], False
    for ln in (REPO / ".ci" / "run").read_text().splitlines():
        if ln.startswith("if ") and "apt-get" in ln:
            in_block = True
        elif in_block:
            in_block = ln.strip() != "fi"
        elif ln.strip() and not ln.startswith(("#", "set ", "cd ")):
            lines.append(ln)
    assert len(lines) == 1, lines
    return lines[0].strip()


def test_markers_and_controls_match():
    assert not README_PROBLEMS + HELP_PROBLEMS, "\n".join(README_PROBLEMS + HELP_PROBLEMS)
    assert len(README_CASES) > 20 and len(HELP_CASES) > 15  # the extraction found them
    # every docs page with a runnable block contributed cases
    assert {c.group.split(":")[0] for c in README_CASES} >= {"README.md", "docs/label.md", "docs/train.md"}


# ---------------------------------------------------------------------------------------------------
# The fixture set and the scratch folders


def _public_data() -> Path | None:
    env = os.environ.get("PRMKIT_SHARED_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if (path / "INDEX.md").exists() else None


def _prmkit(*argv: str) -> None:
    from prmkit.cli import main

    try:
        main(list(argv))
    except SystemExit as e:
        assert not e.code, f"fixture command failed: prmkit {' '.join(argv)}"


#: ProcessBench's samples of each kind (erroneous, error-free) kept per file in the tests' copy
PROCESSBENCH_CUT = 4


def _mirror(data: Path, out: Path) -> None:
    """``out`` as the public data folder: links to its files, ProcessBench's JSON files cut short."""
    for src in data.rglob("*"):
        if src.is_dir():
            continue
        dst = out / src.relative_to(data)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.parent.name == "processbench" and src.suffix == ".json":
            rows = json.loads(src.read_text())
            wrong = [r for r in rows if r.get("label", -1) != -1][:PROCESSBENCH_CUT]
            right = [r for r in rows if r.get("label", -1) == -1][:PROCESSBENCH_CUT]
            dst.write_text(json.dumps(wrong + right))
        else:
            dst.symlink_to(src)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The fixture set (see the module docs): ``ROOT/work`` (where lines run) and ``ROOT/shared/data``."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "work"
    work.mkdir()
    if (data := _public_data()) is not None:
        _mirror(data, root / "shared" / "data")
    old = Path.cwd()
    os.chdir(work)
    try:
        _prmkit("data", "derive", "--env", "arith", "--problems", "6", "--start", "100", "--per-problem", "3",
                "--correct-fraction", "1", "--seed", "0", "traces.jsonl")
        _prmkit("data", "derive", "--env", "arith", "--problems", "1", "--start", "200", "--per-problem", "1",
                "--correct-fraction", "1", "--seed", "0", "runs/arith.jsonl")
        # max_length 2048 (characters, for the tiny backbone): a GSM8K problem and its first step fit, as
        # they do in the demo's PRM (512 tokens).
        _prmkit("train", "prm", "--config", "tiny", "train=[traces.jsonl]", "max_length=2048", "output_dir=runs/prm")
        _prmkit("train", "orm", "--config", "tiny", "train=[traces.jsonl]", "max_length=2048",
                "output_dir=runs/demo/orm")
        shutil.copytree("runs/prm", "runs/demo/prm")
        _prmkit("score", "--model", "runs/prm", "traces.jsonl", "scored.jsonl")
        _prmkit("score", "--model", "runs/demo/orm", "scored.jsonl", "runs/demo/heldout.jsonl")
        # scored.jsonl is what the README's (and the help's) score line writes: an existing OUT is
        # refused without --overwrite, so the line makes it as a reader's run would.
        os.remove("scored.jsonl")
        # The README's Inspect lines read a log by the name inspect_ai gives it: the hand-written one.
        Path("logs").mkdir()
        shutil.copy(REPO / "tests" / "fixtures" / "inspect" / "shop_ledger.json", "logs/2026-11-26T22-05-22_task.json")
        Path("benchmarks").symlink_to(REPO / "benchmarks")  # `python benchmarks/X.py` lines
        _tiny_qwen2_prm(Path("runs/tiny-qwen2-prm"))
        # Arith traces with the checker's labels, for blocks that read real samples (`given` marker).
        _prmkit("label", "--method", "symbolic", "traces.jsonl", "symbolic.jsonl")
    finally:
        os.chdir(old)
    return root


def _tiny_qwen2_prm(path: Path) -> None:
    """A stand-in for Qwen2.5-Math-PRM-7B (see the module docs; the model tests' ``build_tiny``, with
    the published model's 4096 positions), made locally with a fixed seed."""
    import torch
    from tiny_models import build_tiny

    torch.manual_seed(0)
    model, tok = build_tiny("qwen2.5-math-prm", positions=4096)
    model.save_pretrained(path)
    tok.save_pretrained(path)


_FOLDERS: dict[str, Path] = {}


def _folder(case: Case, template: Path, tmp_path_factory) -> Path:
    """The scratch folder of the case's group (made on its first line): the cwd to run in."""
    if case.group not in _FOLDERS and case.repository:
        _FOLDERS[case.group] = _repository_copy(tmp_path_factory.mktemp("clone") / "prmkit")
    if case.group not in _FOLDERS:
        root = tmp_path_factory.mktemp("run")
        shutil.copytree(template, root, symlinks=True, dirs_exist_ok=True)
        if not case.fixtures:
            shutil.rmtree(root / "work")
            (root / "work").mkdir()
        for path, fixture in case.given.items():
            (root / "work" / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(template / "work" / fixture, root / "work" / path)
        _FOLDERS[case.group] = root / "work"
    return _FOLDERS[case.group]


def _repository_copy(dest: Path) -> Path:
    """The repository's tracked files (``git ls-files``: a clean clone's, with this checkout's edits)
    copied to ``dest``; outside a git checkout the case skips, saying so."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files a clean clone would have are unknown")
    files = [f for f in listed.decode().split("\0") if f and (REPO / f).is_file()]
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest / f, follow_symlinks=False)
    return dest


def _plain_tokens(text: str) -> list[str]:
    """A line's words when it needs no shell (no variables, substitutions, pipes or redirections;
    its comment dropped), else []."""
    if "$" in text or "`" in text:
        return []
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split, lex.commenters = True, "#"
    tokens = list(lex)
    return [] if any(t and set(t) <= set("|&;<>()") for t in tokens) else tokens


def _expand(tokens: list[str]) -> list[str]:
    """``*`` / ``?`` patterns expanded in the working folder, as a shell would."""
    return [f for t in tokens for f in ((sorted(glob.glob(t)) if "*" in t or "?" in t else []) or [t])]


_ENV_WORD = re.compile(r"([A-Za-z_]\w*)=(.*)", re.S)


def _argv(text: str) -> tuple[list[str], dict[str, str]] | None:
    """The arguments of a plain ``prmkit`` line (patterns not yet expanded) and the variables its
    leading ``NAME=value`` words set, or None when it needs a shell."""
    tokens = _plain_tokens(text)
    env = {}
    while tokens and (m := _ENV_WORD.fullmatch(tokens[0])):
        env[m.group(1)] = m.group(2)
        tokens = tokens[1:]
    return (tokens[1:], env) if tokens and tokens[0] == "prmkit" else None


@contextlib.contextmanager
def _line_env(env: dict[str, str]):
    """A line's ``NAME=value`` words, for the time it runs in this process: the variables set, and
    torch's thread count from ``OMP_NUM_THREADS`` (a fresh process reads it when torch loads)."""
    from unittest import mock

    import torch

    threads = torch.get_num_threads()
    with mock.patch.dict(os.environ, env):
        if "OMP_NUM_THREADS" in env:
            torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def _script_argv(text: str) -> list[str] | None:
    """``[script, args...]`` of a plain ``python benchmarks/NAME.py ...`` line, or None."""
    tokens = _plain_tokens(text)
    if len(tokens) < 2 or tokens[0] != "python" or not re.fullmatch(r"benchmarks/\w+\.py", tokens[1]):
        return None
    return tokens[1:]


def _run_script(argv: list[str], cwd: Path, capfd) -> tuple[int, str]:
    """Run a benchmark script in this process, as ``python SCRIPT ARGS`` would in ``cwd`` (its folder
    first on ``sys.path``, ``__name__ == "__main__"``, its record under ``cwd/bench-results``), and
    put back what it may change: the working folder, ``sys.argv`` and ``sys.path``, the environment,
    torch's thread count, the signal handlers, and the benchmark modules it imported (``_record`` notes
    the load average when imported: the next script imports it afresh). A fresh interpreter for each
    such line cost 4-6 s of importing torch and transformers, about a tenth of the suite's CPU time."""
    import builtins
    import gc
    import signal
    import traceback
    import types
    from unittest import mock

    import torch

    script = cwd / argv[0]
    folder = script.resolve().parent
    saved_argv, saved_path, threads = list(sys.argv), list(sys.path), torch.get_num_threads()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    before = set(sys.modules)
    mains = {name: sys.modules.get(name) for name in ("__main__", "__mp_main__")}
    old = Path.cwd()
    os.chdir(cwd)
    sys.argv, sys.path[:0] = [argv[0], *_expand(argv[1:])], [str(script.parent)]
    # The script's module is ``__main__`` and, for the processes a benchmark spawns, ``__mp_main__``
    # too: multiprocessing named this process's original ``__main__`` so when it was first imported,
    # and a spawned child's results name their classes by it.
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__ = str(script), builtins
    code = 0
    try:
        with _no_compile(), mock.patch.dict(os.environ, {"PRMKIT_BENCH_RESULTS": str(cwd / "bench-results")}):
            sys.modules["__main__"] = sys.modules["__mp_main__"] = main
            exec(compile(script.read_bytes(), str(script), "exec"), main.__dict__)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - reported as the subprocess would: a traceback, exit 1
        traceback.print_exc()
        code = 1
    finally:
        for name, module in mains.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        os.chdir(old)
        sys.argv, sys.path[:] = saved_argv, saved_path
        torch.set_num_threads(threads)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for name in set(sys.modules) - before:
            where = getattr(sys.modules[name], "__file__", None) or ""
            if where and Path(where).resolve().parent == folder:
                del sys.modules[name]
        gc.collect()
    out = capfd.readouterr()
    return code, out.out + out.err


def _run_shell(case: Case, cwd: Path, capfd) -> tuple[int, str]:
    text = case.text + (f" {case.append}" if case.append else "")
    if not case.repository and (script := _script_argv(case.text)) is not None:
        return _run_script(script + shlex.split(case.append), cwd, capfd)
    line = _argv(case.text)
    if line is not None:
        from prmkit.cli import main

        argv, line_env = line
        old = Path.cwd()
        os.chdir(cwd)  # before expanding: a pattern names files of the line's folder
        try:
            with _no_compile(), _line_env(line_env):
                main(_expand(argv) + shlex.split(case.append))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            os.chdir(old)
        out = capfd.readouterr()
        return code, out.out + out.err
    # A comment would swallow the appended arguments: they go before it.
    command = text if not case.append else _strip_comment(case.text) + f" {case.append}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           # a `python benchmarks/X.py` line appends its record here, not to the repository's results
           "PRMKIT_BENCH_RESULTS": str(cwd / "bench-results")}
    if not case.repository:
        env.update(NO_COMPILE)
    proc = subprocess.run(["bash", "-e", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=2400 if case.repository else 600)
    return proc.returncode, proc.stdout + proc.stderr


#: Documented lines run with torch's compiler off (``TORCH_COMPILE_DISABLE=1``: the torch policy's
#: decode loop stays eager, see prmkit.policies.TorchPolicy): at these small sizes compiling took longer
#: than the decoding it speeds up (a docs block with a 2 x 16-token sample: 15 s, of which ~9 s were
#: Dynamo tracing). The compiled loop is tested in tests/policies/test_torch.py (a tiny model) and on
#: SmolLM2 by tests/policies/test_default_policy.py; the quick start's line runs without this, but
#: ``demo --quick`` decodes eagerly by its own setting.
NO_COMPILE = {"TORCH_COMPILE_DISABLE": "1"}


@contextlib.contextmanager
def _no_compile():
    """This process's compiler off, and the variable set for the processes it starts (a labeler's
    policy workers are spawned: they read it when they import torch)."""
    from unittest import mock

    import torch._dynamo

    with mock.patch.dict(os.environ, NO_COMPILE), torch._dynamo.config.patch(disable=True):
        yield


def _strip_comment(text: str) -> str:
    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split, lex.commenters = True, "#"
    return shlex.join(list(lex))


_PASSED: dict[str, set[str]] = {}  # group -> the lines that ran and passed in this session


def _check_inputs(case: Case, cwd: Path) -> None:
    """Skip a line whose input file is missing and would have been made by a line above it that did
    not run (marked not to run, realdata without the data, or not selected)."""
    for token in shlex.split(case.text, comments=True)[1:]:
        token = token.split("=", 1)[-1].strip("[]")
        if (token.startswith("-") or not re.search(r"[./]", token) or (cwd / token).exists()
                or glob.glob(str(cwd / token))):
            continue
        for line in case.earlier:
            if line not in _PASSED.get(case.group, set()) and token in shlex.split(line, comments=True):
                pytest.skip(f"its input {token} is made by a line that did not run: {line[:80]}")


def _run(case: Case, template, tmp_path_factory, capfd, request) -> None:
    for group in [g for g in _SERVERS if g != case.group]:  # its block is done
        _stop(_SERVERS.pop(group))
    if case.group in _SERVER_SKIPPED:
        pytest.skip(_SERVER_SKIPPED[case.group])
    _run_case(case, template, tmp_path_factory, capfd, request)
    _PASSED.setdefault(case.group, set()).add(case.text)


_SERVERS: dict[str, subprocess.Popen] = {}  # group -> its background server, while its block runs
_SERVER_SKIPPED: dict[str, str] = {}  # group -> why its server (and so its lines) did not run


@pytest.fixture(scope="module", autouse=True)
def _stop_servers():
    yield
    while _SERVERS:
        _stop(_SERVERS.popitem()[1])


def _stop(proc: subprocess.Popen) -> None:
    import signal

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _start_server(case: Case, cwd: Path, command: str | None = None, ready: str | None = None) -> None:
    """Start the case's line (or ``command``) in the background (its own process group) and wait until
    its URL (or ``ready``) answers."""
    import socket
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    stand_in = command is not None  # only the lines that use it skip when its port is taken
    ready = ready or case.background
    command = command or f"exec {_strip_comment(case.text)} {case.append}".strip()
    url = urlsplit(ready)
    with socket.socket() as sock:
        if sock.connect_ex((url.hostname, url.port or 80)) == 0:
            why = f"port {url.port} is already in use here"
            if not stand_in:
                _SERVER_SKIPPED[case.group] = why
            pytest.skip(why)
    env = {**os.environ, **case.env, "PRMKIT_BENCH_RESULTS": str(cwd / "bench-results"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PRMKIT_EXIT_WITH": str(os.getpid()), **NO_COMPILE}  # a killed test run leaves no server behind
    log = cwd / f".server-{url.port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    _SERVERS[case.group] = proc
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _SERVERS.pop(case.group)
            raise AssertionError(f"{case.where}: `{command}` exited {proc.returncode} before "
                                 f"{ready} answered:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(ready, timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    _stop(_SERVERS.pop(case.group))
    raise AssertionError(f"{case.where}: {ready} did not answer in 120 s:\n{log.read_text()[-3000:]}")


def _run_case(case: Case, template, tmp_path_factory, capfd, request) -> None:
    if case.skip:
        pytest.skip(f"not run: {case.skip}")
    if case.realdata:
        request.getfixturevalue("shared_data")  # skips, saying so, where the public data is absent
    cwd = _folder(case, template, tmp_path_factory)
    monkeypatch = request.getfixturevalue("monkeypatch")
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    if case.kind == "python":
        old = Path.cwd()
        os.chdir(cwd)
        try:
            if ">>>" in case.text:
                test = doctest.DocTestParser().get_doctest(case.text, {}, case.where,
                                                           str(REPO / case.where.rsplit(":", 1)[0]), 0)
                runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
                runner.run(test)
                assert not runner.failures, f"{case.where}: {runner.failures} doctest failures"
            else:
                exec(compile(case.text, case.where, "exec"), {"__name__": "__readme__"})
        finally:
            os.chdir(old)
        return
    _check_inputs(case, cwd)
    if case.background:
        _start_server(case, cwd)
        return
    if case.stand_in and case.group not in _SERVERS:
        from urllib.parse import urlsplit

        url = urlsplit(case.stand_in)
        _start_server(case, cwd, command=shlex.join(["exec", sys.executable, str(REPO / "tests" / "openai_stand_in.py"),
                                                     url.hostname, str(url.port or 80)]),
                      ready=f"{url.scheme}://{url.hostname}:{url.port or 80}/health")
    t0 = time.monotonic()
    code, output = _run_shell(case, cwd, capfd)
    took = time.monotonic() - t0
    tail = "\n".join(output.splitlines()[-30:])
    assert code == case.exits, (f"{case.where}: `{case.text}`"
                                + (f" (with {case.append})" if case.append else "")
                                + f" exited {code}, expected {case.exits}:\n{tail}")
    if case.repository and "prmkit demo --quick" in case.text:
        # The quick start's demo, in its fresh environment, is the suite's one run of the whole
        # pipeline on the embedded default: its report is checked and a rerun must resume.
        from demo_checks import check_quick_demo

        prmkit = cwd / ".venv" / "bin" / "prmkit"
        check_quick_demo(cwd / "runs" / "demo-quick", took, lambda: subprocess.run(
            [str(prmkit), "demo", "--quick"], cwd=cwd, capture_output=True, text=True, timeout=900))


def _scopes(cases: list[Case]) -> dict[str, str]:
    """Under pytest-xdist (``-n``), what one worker runs in order (tests/conftest.py's scheduler): a
    block's lines run in order in one folder, so a block is one scope; the blocks that start a server
    or a stand-in on a fixed port are one scope together, so no two of them run at once; the ``--help``
    examples share one folder, so they are one scope too."""
    ports = {c.group for c in cases if c.background or c.stand_in}
    return {c.where: "readme:servers" if c.group in ports else f"readme:{c.group}" for c in cases}


_SCOPES = _scopes(README_CASES)


def xdist_scope(nodeid: str) -> str | None:
    """The scope of one of this module's cases by its test id (None: not one of them)."""
    if (m := re.search(r"test_readme\.py::test_(readme|help_example)\[(\S+)", nodeid)) is None:
        return None
    return "readme:help" if m.group(1) == "help_example" else _SCOPES.get(m.group(2))


def _params(cases: list[Case]) -> list:
    # Every case runs a documented command end to end (about half of the suite's time): the "slow"
    # tier, which CI runs; the fast tier keeps the extraction and marker checks above.
    return [pytest.param(c, id=c.id(), marks=[pytest.mark.slow]
                         + ([pytest.mark.realdata] if c.realdata else [])
                         # a fresh venv and the whole demo: its own limit, above the suite's per-test one
                         + ([pytest.mark.timeout(2700)] if c.repository else []))
            for c in cases]


@pytest.mark.parametrize("case", _params(README_CASES))
def test_readme(case, template, tmp_path_factory, capfd, request):
    _run(case, template, tmp_path_factory, capfd, request)


@pytest.mark.parametrize("case", _params(HELP_CASES))
def test_help_example(case, template, tmp_path_factory, capfd, request):
    _run(case, template, tmp_path_factory, capfd, request)
