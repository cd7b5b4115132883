"""Evaluation tasks as a registry: a benchmark is an :class:`EvalTask` registered by name in
:data:`EVAL_TASKS`, and ``prmkit eval run TASK... --model M`` runs any set of them into one results
file that ``prmkit report`` renders.

A task declares what it needs and what it gives, so a run can be checked before anything loads:
its data source (:class:`DataSource`: the files it reads, with a default under ``../shared/data`` or
none, then the user gives them with ``--data TASK=PATH``), the options it takes (:class:`TaskOption`,
``-T TASK.KEY=VALUE``), the metric it reports, and the report sections its result fills. Its
``run(ctx)`` gets a :class:`TaskContext` (data, options, the PRM loaded once for the whole run) and
returns a typed result (:class:`prmkit._result.Result`): one section, or an
:class:`~prmkit.eval.EvalResults` of several.

A new benchmark is one file: define the task and call :func:`register_eval_task` (``prmkit eval run
--tasks-from FILE.py`` imports such a file), or declare it as an entry point of the group
``prmkit.eval_tasks`` in another distribution (``name = "my_pkg.tasks:MY_TASK"``). The built-in tasks
(:mod:`prmkit.eval._task_builtins`) wrap the evaluation stage's file-level functions, and the
per-benchmark commands (``prmkit eval processbench`` ...) run the same task objects, so the two paths
cannot drift.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prmkit._durable import write_text_file
from prmkit._registry import Registry
from prmkit._result import Result
from prmkit.errors import PrmkitError
from prmkit.eval._results import EvalResults, MetaSection, OtherSection
from prmkit.scoring import StepScorer

__all__ = ["EvalTask", "DataSource", "TaskOption", "TaskContext", "TaskRun", "EVAL_TASKS", "register_eval_task",
           "get_eval_task", "run_eval_task", "run_eval_tasks", "eval_tasks_file", "load_task_file",
           "describe_eval_task", "list_eval_tasks", "parse_task_args", "parse_data_args", "shared_data_dir"]


def shared_data_dir() -> Path:
    """Where the default data of a task is looked for: ``$PRMKIT_SHARED_DATA``, else ``../shared/data``
    (relative to the working directory, as the docs' commands are)."""
    env = os.environ.get("PRMKIT_SHARED_DATA")
    return Path(env) if env else Path("..") / "shared" / "data"


# -- what a task declares ---------------------------------------------------------------------------

@dataclass(frozen=True)
class DataSource:
    """The files a task reads. ``what``: what they are, for the help and the errors. ``default``:
    paths (``*`` patterns allowed) under :func:`shared_data_dir` used when the user gives none; empty:
    the user must give them (``--data TASK=PATH``). ``many``: the task takes several files (else
    exactly one).

    >>> DataSource("scored traces", many=False).resolve(None, "bon")
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: task 'bon' needs its data (scored traces): give --data bon=PATH
    """

    what: str
    default: tuple[str, ...] = ()
    many: bool = True

    def default_paths(self) -> list[Path]:
        """The default files that exist now (a pattern expanded, in name order)."""
        root = shared_data_dir()
        out: list[Path] = []
        for pattern in self.default:
            out += [Path(p) for p in sorted(glob.glob(str(root / pattern)))]
        return out

    def resolve(self, given: Sequence[str | os.PathLike] | None, task: str) -> list[Path]:
        """The files to read: ``given``, each checked to exist, else the defaults; a
        :class:`PrmkitError` names a missing path and says how to give the data."""
        if given:
            paths = [Path(p) for p in given]
            for p in paths:
                if not p.exists():
                    raise PrmkitError(f"task {task!r}: data file {p}: no such file")
                if p.is_dir():
                    raise PrmkitError(f"task {task!r}: data file {p}: is a folder, not a file")
        elif self.default:
            paths = self.default_paths()
            if not paths:
                where = ", ".join(str(shared_data_dir() / d) for d in self.default)
                raise PrmkitError(f"task {task!r}: its default data {where} is missing; give --data "
                                  f"{task}=PATH ({self.what}) or set PRMKIT_SHARED_DATA to the folder "
                                  "that holds it")
        else:
            raise PrmkitError(f"task {task!r} needs its data ({self.what}): give --data {task}=PATH")
        if not self.many and len(paths) != 1:
            raise PrmkitError(f"task {task!r} reads one file ({self.what}), got {len(paths)}: "
                              + ", ".join(map(str, paths)))
        return paths

    def describe(self, task: str = "TASK") -> str:
        """One line: what the files are and the default, if any."""
        if not self.default:
            return f"{self.what} (give --data {task}=PATH)"
        return f"{self.what}; default {', '.join(str(shared_data_dir() / d) for d in self.default)}"


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class TaskOption:
    """One option of a task: ``name``, its ``type`` (``str``, ``int``, ``float``, ``bool`` or
    ``Path``: a file or folder that must exist), its ``default``, ``help``; ``many``: a list (each
    ``-T`` adds one); ``minimum``: the least number allowed."""

    name: str
    type: type = str
    default: Any = None
    help: str = ""
    many: bool = False
    minimum: float | None = None

    def parse(self, text: str, task: str) -> Any:
        """One value from the command line's text (a :class:`PrmkitError` names the task and option)."""
        where = f"task {task!r} option {self.name!r}"
        if self.type is bool:
            low = text.strip().lower()
            if low not in _TRUE | _FALSE:
                raise PrmkitError(f"{where}: expected true or false, got {text!r}")
            return low in _TRUE
        if self.type in (int, float):
            try:
                return self.check(self.type(text), task)
            except ValueError:
                raise PrmkitError(f"{where}: expected {'an integer' if self.type is int else 'a number'}, "
                                  f"got {text!r}") from None
        if self.type is Path:
            return self.check(Path(text), task)
        return text

    def check(self, value: Any, task: str) -> Any:
        """``value`` (already typed) if allowed; else a :class:`PrmkitError`."""
        where = f"task {task!r} option {self.name!r}"
        if value is None:
            return value
        if self.minimum is not None and isinstance(value, (int, float)) and value < self.minimum:
            raise PrmkitError(f"{where}: must be at least {self.minimum:g}, got {value}")
        if self.type is Path and not Path(value).exists():
            raise PrmkitError(f"{where}: {value}: no such file or folder")
        return value


_PRM_USE = {"required": "scores with the run's PRM (--model / --scorer)",
            "optional": "scores with the run's PRM when one is given (see the task's description)",
            "none": "does not use the run's PRM"}


@dataclass(frozen=True)
class EvalTask:
    """A registered evaluation (see the module docs).

    ``name``: what ``prmkit eval run`` takes. ``description``: one line. ``data``: its
    :class:`DataSource`. ``metric``: what it measures, in words (``"mean F1 over splits"``).
    ``sections``: the report sections its result fills (the first is its main one; the report renders
    each: a section prmkit has no renderer for is shown as a table of its fields). ``run``:
    ``(ctx: TaskContext) -> Result``. ``options``: the :class:`TaskOption` it takes.
    ``prm``: whether it scores with the run's PRM (``--model`` / ``--scorer``): ``"required"``,
    ``"optional"`` (without one it reads the scores the traces carry) or ``"none"``.
    """

    name: str
    description: str
    data: DataSource
    metric: str
    sections: tuple[str, ...]
    run: Callable[[TaskContext], Result]
    options: tuple[TaskOption, ...] = ()
    prm: str = "none"

    def __post_init__(self) -> None:
        if self.prm not in _PRM_USE:
            raise PrmkitError(f"task {self.name!r}: prm must be one of {', '.join(_PRM_USE)}, got {self.prm!r}")
        if isinstance(self.sections, str):
            object.__setattr__(self, "sections", (self.sections,))
        if not self.sections:
            raise PrmkitError(f"task {self.name!r} declares no report section")
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise PrmkitError(f"task {self.name!r} declares an option twice: {', '.join(names)}")

    def option(self, name: str) -> TaskOption:
        """The option ``name`` (a :class:`PrmkitError` lists the task's options)."""
        for o in self.options:
            if o.name == name:
                return o
        known = ", ".join(o.name for o in self.options) or "none"
        raise PrmkitError(f"task {self.name!r} has no option {name!r}; its options: {known}")

    def resolve_options(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every option's value: ``given`` (a text value is parsed; a ``many`` option's is a list,
        empty when not given), the default for the rest."""
        out = {o.name: (list(o.default or ()) if o.many else o.default) for o in self.options}
        for name, value in (given or {}).items():
            opt = self.option(name)
            if opt.many:
                values = [] if value is None else value if isinstance(value, (list, tuple)) else [value]
                out[name] = [opt.parse(v, self.name) if isinstance(v, str) else opt.check(v, self.name)
                             for v in values]
            else:
                out[name] = opt.parse(value, self.name) if isinstance(value, str) else opt.check(value, self.name)
        return out


# -- the context a task runs in ---------------------------------------------------------------------

def _quiet(*_: Any) -> None:
    return None


class _Once:
    """The run's PRM, loaded the first time a task asks for it (a run of tasks that score nothing
    never loads a model)."""

    def __init__(self, source: StepScorer | Callable[[], StepScorer | None] | None) -> None:
        self._source = source
        self._loaded = not callable(source) or isinstance(source, StepScorer)
        self._value = source if self._loaded else None

    def __call__(self) -> StepScorer | None:
        if not self._loaded:
            self._value = self._source()  # type: ignore[operator]
            self._loaded = True
        return self._value


@dataclass
class TaskContext:
    """What a task's ``run`` gets: its ``data`` files, its ``options`` (every declared one, typed,
    defaults filled), the run's PRM (:meth:`prm`), ``progress`` (show progress bars), and two
    outlets: :meth:`say` for the lines a terminal shows and :meth:`unscored` for traces the PRM could
    not score (``skipped`` collects them)."""

    task: EvalTask
    data: list[Path]
    options: dict[str, Any]
    scorer: Callable[[], StepScorer | None] = field(default=lambda: None)
    progress: bool = True
    echo: Callable[[list[str]], None] = _quiet
    warn: Callable[[str], None] = _quiet
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def prm(self) -> StepScorer | None:
        """The run's PRM (``--model`` / ``--scorer``), loaded once for all tasks; None: none was
        given (a task then reads the scores the traces carry, or says what to give)."""
        return self.scorer()

    def say(self, lines: Sequence[str]) -> None:
        """Show ``lines`` (what the task prints on a terminal)."""
        self.echo(list(lines))

    def unscored(self, skipped: Sequence[tuple[str, str]]) -> None:
        """Record the traces the PRM could not score (id, reason), and say how many."""
        self.skipped.extend(skipped)
        if skipped:
            self.warn(f"{len(skipped)} traces could not be scored (first: {skipped[0][0]}: {skipped[0][1]})")


# -- the registry -----------------------------------------------------------------------------------

#: Evaluation tasks by name: built-in ones, then those registered in code or by the entry-point
#: group ``prmkit.eval_tasks`` (an entry point names an :class:`EvalTask`, or a function without
#: arguments that returns one).
EVAL_TASKS = Registry("evaluation task", {
    "processbench": "prmkit.eval._task_builtins:PROCESSBENCH",
    "prmbench": "prmkit.eval._task_builtins:PRMBENCH",
    "bon": "prmkit.eval._task_builtins:BON",
    "probes": "prmkit.eval._task_builtins:PROBES_TASK",
    "monitor": "prmkit.eval._task_builtins:MONITOR",
    "refusals": "prmkit.eval._task_builtins:REFUSALS",
}, group="prmkit.eval_tasks")


def register_eval_task(task: EvalTask) -> EvalTask:
    """Add (or replace) ``task`` under its name; returns it. A user's benchmark in one file::

        from prmkit.eval import DataSource, EvalTask, register_eval_task

        register_eval_task(EvalTask(name="step_count", description="steps per trace",
                                    data=DataSource("traces", many=False), metric="mean steps",
                                    sections=("step_count",), run=my_run))

    (``prmkit eval run step_count --tasks-from that_file.py --data step_count=traces.jsonl``).
    """
    if not isinstance(task, EvalTask):
        raise PrmkitError(f"register_eval_task takes an EvalTask, got {type(task).__name__}")
    EVAL_TASKS.register(task.name, task)
    return task


def get_eval_task(name: str) -> EvalTask:
    """The task registered as ``name``; an unknown name is a :class:`PrmkitError` listing them all."""
    if name not in EVAL_TASKS:
        raise PrmkitError(f"unknown evaluation task {name!r}; registered: {', '.join(EVAL_TASKS)} "
                          "(a task of your own: --tasks-from FILE.py, or an entry point of prmkit.eval_tasks)")
    task = EVAL_TASKS.load(name)
    if not isinstance(task, EvalTask) and callable(task):
        task = task()
    if not isinstance(task, EvalTask):
        raise PrmkitError(f"evaluation task {name!r} is a {type(task).__name__}, not an EvalTask "
                          f"(registered as {EVAL_TASKS[name]!r})")
    if task.name != name:
        raise PrmkitError(f"evaluation task registered as {name!r} calls itself {task.name!r}; "
                          "register it under its own name")
    return task


def load_task_file(path: str | os.PathLike) -> list[str]:
    """Import the Python file ``path`` (it registers tasks with :func:`register_eval_task`); returns
    the names it added. The file runs as code: only a file you trust."""
    p = Path(path)
    if not p.is_file():
        raise PrmkitError(f"{p}: no such file (--tasks-from takes a Python file that calls register_eval_task)")
    if p.suffix != ".py":
        raise PrmkitError(f"{p}: not a Python file (.py)")
    before = set(EVAL_TASKS)
    name = f"prmkit_user_tasks_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise PrmkitError(f"{p}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        spec.loader.exec_module(module)
    except PrmkitError as e:
        sys.modules.pop(name, None)
        raise PrmkitError(f"{p}: {e}") from e
    except (Exception, SystemExit) as e:
        sys.modules.pop(name, None)
        raise PrmkitError(f"{p}: importing it failed: {type(e).__name__}: {e}") from e
    added = [n for n in EVAL_TASKS if n not in before]
    return added


def describe_eval_task(task: EvalTask) -> list[str]:
    """The lines ``prmkit eval run --list`` prints for ``task``."""
    where = EVAL_TASKS.plugin(task.name)
    out = [f"{task.name}: {task.description}" + (f" [{where}]" if where else ""),
           f"  data: {task.data.describe(task.name)}",
           f"  metric: {task.metric}",
           f"  report sections: {', '.join(task.sections)}",
           f"  PRM: {_PRM_USE[task.prm]}"]
    for o in task.options:
        default = "" if o.default in (None, [], ()) else f" (default {o.default})"
        out.append(f"  -T {task.name}.{o.name}=...{' (repeatable)' if o.many else ''}{default}"
                   + (f": {o.help}" if o.help else ""))
    return out


def list_eval_tasks(names: Sequence[str] | None = None) -> list[str]:
    """:func:`describe_eval_task` of ``names`` (default: every registered task); a task that cannot
    be loaded (a plugin that fails to import) is listed with the reason, and the rest still are."""
    out: list[str] = []
    for name in names or list(EVAL_TASKS):
        try:
            out += describe_eval_task(get_eval_task(name))
        except PrmkitError as e:
            if names:  # asked for by name: the error is the answer
                raise
            out.append(f"{name}: cannot be loaded: {e}")
    return out


# -- parsing the command line's pieces --------------------------------------------------------------

def parse_data_args(pairs: Sequence[str]) -> dict[str, list[Path]]:
    """``["processbench=a.json", "processbench=b.json"]`` -> ``{"processbench": [a.json, b.json]}``."""
    out: dict[str, list[Path]] = {}
    for pair in pairs:
        task, sep, path = pair.partition("=")
        if not sep or not task.strip() or not path:
            raise PrmkitError(f"--data expects TASK=PATH, got {pair!r}")
        out.setdefault(task.strip(), []).append(Path(path))
    return out


def parse_task_args(pairs: Sequence[str], tasks: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``-T TASK.KEY=VALUE`` (for one task) or ``-T KEY=VALUE`` (for every chosen task that takes
    KEY) -> task -> key -> text (a list where a key is given again)."""
    out: dict[str, dict[str, Any]] = {t: {} for t in tasks}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PrmkitError(f"-T expects TASK.KEY=VALUE (or KEY=VALUE), got {pair!r}")
        task, dot, name = key.strip().rpartition(".")
        if dot:
            if task not in out:
                raise PrmkitError(f"-T {pair}: task {task!r} is not among the tasks run ({', '.join(tasks)})")
            targets = [task]
        else:
            targets = [t for t in tasks if any(o.name == name for o in get_eval_task(t).options)]
            if not targets:
                raise PrmkitError(f"-T {pair}: none of the tasks run ({', '.join(tasks)}) takes {name!r}")
        for t in targets:
            get_eval_task(t).option(name)  # an unknown option is refused here, naming the task's
            prev = out[t].get(name)
            out[t][name] = value if prev is None else [*(prev if isinstance(prev, list) else [prev]), value]
    return out


# -- running ----------------------------------------------------------------------------------------

@dataclass
class TaskRun:
    """One task's run: its ``result`` (what ``run`` returned), the ``sections`` it fills, the
    ``data`` and ``options`` it ran with, the traces its PRM could not score and its seconds."""

    task: EvalTask
    result: Result
    sections: EvalResults
    data: list[Path]
    options: dict[str, Any]
    skipped: list[tuple[str, str]]
    seconds: float


def _sections(task: EvalTask, result: Any) -> EvalResults:
    """``result`` as the sections the task declared; anything else is the task's bug, said plainly."""
    if isinstance(result, EvalResults):
        out = result
    elif isinstance(result, (Result, OtherSection)):
        out = EvalResults()
        out.add(result)
    else:
        raise PrmkitError(f"task {task.name!r}: run returned a {type(result).__name__}, not a result "
                          "(a Result with kind, to_dict, from_dict and lines; or an EvalResults)")
    undeclared = [k for k in out if k not in task.sections]
    if undeclared:
        raise PrmkitError(f"task {task.name!r} returned the section(s) {', '.join(undeclared)}, which it "
                          f"does not declare (its sections: {', '.join(task.sections)})")
    return out


def _plan(names: Sequence[str], data: Mapping[str, Sequence[str | os.PathLike]] | None,
          options: Mapping[str, Mapping[str, Any]] | None
          ) -> list[tuple[EvalTask, list[Path], dict[str, Any]]]:
    """Every task, its data files and options, checked before any runs (a typo costs no model load)."""
    if not names:
        raise PrmkitError(f"no evaluation task given; registered: {', '.join(EVAL_TASKS)}")
    if len(set(names)) != len(names):
        raise PrmkitError(f"a task is given twice: {', '.join(names)}")
    tasks = [get_eval_task(n) for n in names]
    for extra in set(data or {}) - set(names):
        raise PrmkitError(f"--data for {extra!r}, which is not among the tasks run ({', '.join(names)})")
    for extra in set(options or {}) - set(names):
        raise PrmkitError(f"options for {extra!r}, which is not among the tasks run ({', '.join(names)})")
    owner: dict[str, str] = {}
    for t in tasks:
        for s in t.sections:
            if s in owner:
                raise PrmkitError(f"tasks {owner[s]!r} and {t.name!r} both write the report section {s!r}; "
                                  "run them into separate files")
            owner[s] = t.name
    return [(t, t.data.resolve((data or {}).get(t.name), t.name), t.resolve_options((options or {}).get(t.name)))
            for t in tasks]


def _run(task: EvalTask, paths: list[Path], opts: dict[str, Any], scorer: Callable[[], StepScorer | None],
         progress: bool, echo: Callable[[list[str]], None], warn: Callable[[str], None]) -> TaskRun:
    ctx = TaskContext(task, paths, opts, scorer=scorer, progress=progress, echo=echo, warn=warn)
    start = time.perf_counter()
    result = task.run(ctx)
    return TaskRun(task, result, _sections(task, result), paths, opts, ctx.skipped, time.perf_counter() - start)


def run_eval_task(name: str, data: Sequence[str | os.PathLike] | None = None, *,
                  options: Mapping[str, Any] | None = None,
                  scorer: StepScorer | Callable[[], StepScorer | None] | None = None, progress: bool = True,
                  echo: Callable[[list[str]], None] = _quiet, warn: Callable[[str], None] = _quiet) -> TaskRun:
    """Run the task ``name`` on ``data`` (None: its default) with ``options`` (by name; text is
    parsed) and the PRM ``scorer`` (or a function that loads it). ``echo`` / ``warn`` receive what it
    prints. What ``prmkit eval processbench`` and the other per-benchmark commands call."""
    [(task, paths, opts)] = _plan([name], {name: data} if data else None, {name: options or {}})
    return _run(task, paths, opts, _Once(scorer), progress, echo, warn)


def run_eval_tasks(names: Sequence[str], *, data: Mapping[str, Sequence[str | os.PathLike]] | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None,
                   scorer: StepScorer | Callable[[], StepScorer | None] | None = None, progress: bool = True,
                   echo: Callable[[list[str]], None] = _quiet, warn: Callable[[str], None] = _quiet
                   ) -> list[TaskRun]:
    """Run the tasks ``names`` in order, each on ``data[name]`` (else its default data) with
    ``options[name]``, sharing one PRM (``scorer``: the scorer, or a function that loads it the first
    time a task asks). Every name, data file and option is checked before the first task runs."""
    once = _Once(scorer)
    plan = _plan(names, data, options)
    out = []
    for task, paths, opts in plan:
        echo([f"== {task.name}: {task.description}"])
        out.append(_run(task, paths, opts, once, progress, echo, warn))
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def eval_tasks_file(names: Sequence[str], out: str | os.PathLike | None = None, *,
                    data: Mapping[str, Sequence[str | os.PathLike]] | None = None,
                    options: Mapping[str, Mapping[str, Any]] | None = None,
                    scorer: StepScorer | Callable[[], StepScorer | None] | None = None,
                    model: str | os.PathLike | None = None, command: str | None = None, progress: bool = True,
                    echo: Callable[[list[str]], None] = _quiet, warn: Callable[[str], None] = _quiet
                    ) -> tuple[EvalResults, list[TaskRun]]:
    """:func:`run_eval_tasks`, then every task's sections in one results file ``out`` (when given;
    written through a temporary file renamed on success, never onto an input) with a ``meta`` section
    saying what produced them (per task: data files, options, metric; the ``model``; the ``command``).
    ``prmkit report out`` renders it. Returns the sections and the runs."""
    runs = run_eval_tasks(names, data=data, options=options, scorer=scorer, progress=progress, echo=echo,
                          warn=warn)
    results = EvalResults()
    for r in runs:
        for name in r.sections:
            results.add(r.sections[name], name)
    meta: dict[str, Any] = {
        "data": {r.task.name: [str(p) for p in r.data] for r in runs},
        "settings": {r.task.name: {k: _jsonable(v) for k, v in r.options.items()} for r in runs},
        "tasks": {r.task.name: {"metric": r.task.metric, "sections": list(r.sections),
                                "seconds": round(r.seconds, 3), "unscored_traces": len(r.skipped)} for r in runs}}
    if command is not None:
        meta["command"] = command
    if model is not None:
        meta["models"] = {"prm": str(model)}
    results.add(MetaSection.from_dict(meta))
    if out is not None:
        inputs = [p for r in runs for p in r.data]
        write_text_file(out, json.dumps(results.to_dict(), indent=2, sort_keys=True) + "\n", lock=True,
                        inputs=inputs)
    return results, runs
