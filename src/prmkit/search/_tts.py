"""Test-time-compute recipes (``prmkit tts --recipe FILE``): methods × N × aggregators × verifiers over
a problem set, at equal compute, resumable, into one results file the report draws as curves.

A recipe (YAML or JSON; :func:`load_recipe`, :class:`Recipe`) names the problems, the policy, the
verifiers, the budgets N, the methods and the aggregators; every combination is a *cell*
(:class:`TtsCell`). What a budget N means per method (so that the methods spend about as much):

- ``bon``, ``weighted``, ``majority``: N complete samples per problem, then selection (aggregate, then
  select: :func:`~prmkit.search.select`). The samples are shared: the largest N is sampled once per
  problem, and a smaller N uses the first N of them (as search-and-learn subsamples its N=256 run), so
  the three methods and every N see the same samples; ``majority`` uses no verifier;
- ``beam``: ``beam_width × expansions = N`` step samples per round (``expansions`` from the recipe's
  ``beam`` settings, 4 by default, or N when N is smaller);
- ``dvts``: ``n = N`` step samples per round in ``N / m`` subtrees (``m`` from ``dvts``, 4 by default,
  or N when N is smaller);
- ``mcts``: ``N`` simulations of ``expansions`` children each (``mcts`` settings, 4 by default): about
  ``4 N`` step samples, as a best-of-N sample of about 4 steps.

That mapping only makes the spending comparable; what each cell really spent is measured
(:class:`~prmkit.search.ComputeMeter`: tokens generated and tokens scored per problem) and the report
draws accuracy against it. Each (cell, problem) is scored by a verifier whose prefix cache was emptied
first, so a cell's scored tokens are its own and do not depend on what ran before it (a resumed run
counts what an uninterrupted one does).

Resumable: every finished unit of work (a problem's samples, their scores by one verifier, a cell's
answer to one problem) is appended to ``progress.jsonl`` in the output folder as it finishes; a rerun of
the same recipe skips what is there (a changed recipe is refused, ``restart`` starts afresh). The
results file ``tts.json`` (section ``tts``: :class:`TtsResult`) is written when every cell is done;
``prmkit report OUT/tts.json`` renders it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import durable_file, output_lock, write_text_file
from prmkit._jsonio import decode_utf8, iter_json_records, open_text, write_jsonl_line
from prmkit._result import Record, record_field, register_result
from prmkit.errors import FormatError, MissingDependencyError, PrmkitError
from prmkit.policies import Policy, SamplingParams
from prmkit.scoring import AGGREGATORS, StepScorer
from prmkit.search._common import ComputeMeter, finish_trace
from prmkit.search._files import check_search_settings
from prmkit.search._search import SearchConfig, search
from prmkit.search._select import select
from prmkit.trace import Problem, Trace
from prmkit.trace_queries import is_correct, problem_key

__all__ = ["Recipe", "Verifier", "TtsCell", "TtsResult", "TTS_METHODS", "load_recipe", "find_recipe",
           "shipped_recipes", "run_recipe", "tts_file"]

#: Methods a recipe may name: selection over shared samples, then the step-level searches.
TTS_METHODS = ("bon", "weighted", "majority", "beam", "dvts", "mcts")
_SAMPLED = ("bon", "weighted", "majority")
_UNSCORED = ("majority",)
#: Default fan-out per method (the recipe's ``beam`` / ``dvts`` / ``mcts`` settings override it).
_FANOUT = {"beam": ("expansions", 4), "dvts": ("m", 4), "mcts": ("expansions", 4)}
_TOP_KEYS = ("name", "description", "problems", "policy", "verifiers", "budgets", "methods", "aggregators",
             "settings", "beam", "dvts", "mcts", "sample_tokens", "batch_size")
_REQUIRED = ("problems", "budgets", "methods")
_PROBLEM_KEYS = ("env", "data", "data_format", "n", "start", "steps", "ops", "max_operand", "env_seed")
# SearchConfig fields a recipe sets once for every method ("aggregate" comes from ``aggregators``,
# "label" is off: the answers' symbolic labels are not what a sweep measures).
_SETTINGS = tuple(f.name for f in fields(SearchConfig) if f.name not in ("aggregate", "label"))


# -- the recipe -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verifier:
    """A verifier of the recipe by its label: ``scorer`` (a :data:`~prmkit.scoring.SCORERS` name,
    ``model`` by default), ``model`` (a checkpoint folder or a shipped name, ``default``) and the
    scorer's ``options`` (``check: calculator`` puts the calculator check around the PRM)."""

    label: str
    scorer: str = "model"
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        opts = "".join(f" -s {k}={v}" for k, v in self.options.items())
        return (f"--model {self.model}" if self.model else f"--scorer {self.scorer}") + opts


@dataclass(frozen=True)
class Cell:
    """One combination of the sweep. ``aggregate`` and ``verifier`` are None for ``majority``."""

    method: str
    n: int
    aggregate: str | None
    verifier: str | None

    @property
    def key(self) -> str:
        return f"{self.method}/N={self.n}/{self.aggregate or '-'}/{self.verifier or '-'}"


@dataclass(frozen=True)
class Recipe:
    """A test-time-compute sweep (see the module docs and docs/score.md for the file's keys)."""

    name: str
    problems: dict[str, Any]
    budgets: tuple[int, ...]
    methods: tuple[str, ...]
    aggregators: tuple[str, ...] = ("last",)
    verifiers: tuple[Verifier, ...] = ()
    policy: str | None = None
    policy_options: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    method_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    sample_tokens: int = 256
    batch_size: int = 8
    description: str = ""
    path: str | None = None

    @property
    def config(self) -> SearchConfig:
        return SearchConfig(**self.settings, label=False)

    def cells(self) -> list[Cell]:
        """Every cell, method by method, verifier by verifier, aggregator by aggregator, N by N."""
        out = []
        for m in self.methods:
            if m in _UNSCORED:
                out += [Cell(m, n, None, None) for n in self.budgets]
                continue
            for v in self.verifiers:
                for a in self.aggregators:
                    out += [Cell(m, n, a, v.label) for n in self.budgets]
        return out

    def search_options(self, cell: Cell) -> dict[str, Any]:
        """The search's settings of a searched cell at its budget (the module docs' mapping)."""
        own = dict(self.method_settings.get(cell.method, {}))
        key, default = _FANOUT[cell.method]
        fan = min(int(own.pop(key, default)), cell.n)
        if cell.method == "beam":
            opts = {"beam_width": cell.n // fan, "expansions": fan}
        elif cell.method == "dvts":
            opts = {"n": cell.n, "m": fan}
        else:
            opts = {"simulations": cell.n, "expansions": fan}
        return {**opts, **own, **self.settings, "aggregate": cell.aggregate, "label": False}

    def digest(self) -> str:
        """What a resumed run must match: everything that changes a number, but not the name, the path,
        the batch size or how many problems (work is kept per problem, so a run may grow or shrink)."""
        d = asdict(self)
        for k in ("name", "description", "path", "batch_size"):
            d.pop(k)
        d["problems"] = {k: v for k, v in d["problems"].items() if k not in ("n", "start")}
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _recipes_dir() -> Path:
    return Path(str(resources.files("prmkit.search").joinpath("recipes")))


def shipped_recipes() -> dict[str, Path]:
    """The recipes that ship with prmkit, by name (``bon_vs_beam``, ``quick``, ...)."""
    return {p.stem: p for p in sorted(_recipes_dir().glob("*.yaml"))}


def find_recipe(name_or_path: str | os.PathLike) -> Path:
    """A recipe file: a path that exists, else a shipped recipe by name (with or without ``.yaml``)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    shipped = shipped_recipes()
    stem = p.name[:-5] if p.name.endswith(".yaml") else p.name
    if stem in shipped and len(p.parts) == 1:
        return shipped[stem]
    raise PrmkitError(f"{name_or_path}: no such recipe file, and no shipped recipe of that name "
                      f"(shipped: {', '.join(shipped) or 'none'})")


def _key_lines(text: str, path: str, yaml_file: bool) -> tuple[Any, dict[str, int]]:
    """The parsed file and the line of every mapping key and list item, by dotted field
    (``verifiers.prm``, ``methods[2]``); JSON gives no lines (the field alone names the place)."""
    if not yaml_file:
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as e:
            raise FormatError(f"not valid JSON (recipe): {e.msg}", path=path, line=e.lineno) from None
    try:
        import yaml
    except ImportError:
        raise MissingDependencyError("pyyaml", "train", "YAML recipes") from None
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        raise FormatError(f"not valid YAML (recipe): {getattr(e, 'problem', None) or e}", path=path,
                          line=mark.line + 1 if mark is not None else None) from None
    lines: dict[str, int] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = f"{prefix}.{k.value}" if prefix else str(k.value)
                lines[name] = k.start_mark.line + 1
                walk(v, name)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                lines[f"{prefix}[{i}]"] = v.start_mark.line + 1
                walk(v, f"{prefix}[{i}]")

    walk(root, "")
    return data, lines


class _Errors:
    """Every problem found in a recipe, each naming the file, line and field; raised together."""

    def __init__(self, path: str, lines: Mapping[str, int]) -> None:
        self.path, self.lines, self.found = path, lines, []

    def add(self, fld: str, reason: str) -> None:
        line = self.lines.get(fld)
        if line is None:  # a missing key: the line of the nearest enclosing field, if any
            parent = fld.rsplit(".", 1)[0] if "." in fld else fld.split("[", 1)[0]
            line = self.lines.get(parent) if parent != fld else None
        self.found.append(FormatError(reason, path=self.path, line=line, field=fld))

    def raise_if_any(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise FormatError(f"{len(self.found)} problems in the recipe:\n  "
                              + "\n  ".join(str(e) for e in self.found), path=self.path)


def _mapping(d: Any, fld: str, err: _Errors) -> dict[str, Any]:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        err.add(fld, f"must be a mapping of settings, got {type(d).__name__}")
        return {}
    return dict(d)


def _names(d: Any, fld: str, err: _Errors, known: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(d, str):
        d = [d]
    if not isinstance(d, list) or not d:
        err.add(fld, f"must be a non-empty list of {what}s, got {json.dumps(d, default=str)[:60]}")
        return ()
    out = []
    for i, x in enumerate(d):
        if x not in known:
            err.add(f"{fld}[{i}]", f"unknown {what} {x!r}; one of {', '.join(known)}")
        elif x in out:
            err.add(f"{fld}[{i}]", f"{what} {x!r} is listed twice")
        else:
            out.append(x)
    return tuple(out)


def load_recipe(path: str | os.PathLike) -> Recipe:
    """Read and check a recipe (YAML or JSON; a shipped one by name, :func:`find_recipe`). Every
    problem found is reported at once, each naming the file, the line and the field: an unknown key,
    method or aggregator, a missing field, a budget a method cannot split, a setting the method does
    not take."""
    p = find_recipe(path)
    where = str(p)
    data, lines = _key_lines(decode_utf8(p.read_bytes(), where), where,
                             p.suffix.lower() in (".yaml", ".yml"))
    if not isinstance(data, Mapping):
        raise FormatError(f"a recipe is a mapping of settings, got {type(data).__name__}", path=where)
    err = _Errors(where, lines)
    for k in data:
        if k not in _TOP_KEYS:
            err.add(str(k), f"unknown recipe field; the fields are: {', '.join(_TOP_KEYS)}")
    for k in _REQUIRED:
        if k not in data:
            err.add(k, "missing (a recipe needs problems, budgets and methods)")
    problems = _mapping(data.get("problems"), "problems", err)
    for k in problems:
        if k not in _PROBLEM_KEYS:
            err.add(f"problems.{k}", f"unknown problem setting; one of {', '.join(_PROBLEM_KEYS)}")
    if "problems" in data and ("env" in problems) == ("data" in problems):
        err.add("problems", "give exactly one of env (arith) or data (a dataset file)")
    methods = _names(data.get("methods"), "methods", err, TTS_METHODS, "method") if "methods" in data else ()
    aggregators = _names(data.get("aggregators", ["last"]), "aggregators", err, list(AGGREGATORS),
                         "aggregator")
    budgets: list[int] = []
    raw_budgets = data.get("budgets")
    if "budgets" in data:
        if not isinstance(raw_budgets, list) or not raw_budgets:
            err.add("budgets", "must be a non-empty list of positive integers (N)")
        else:
            for i, b in enumerate(raw_budgets):
                if not isinstance(b, int) or isinstance(b, bool) or b < 1:
                    err.add(f"budgets[{i}]", f"must be a positive integer, got {b!r}")
                elif b in budgets:
                    err.add(f"budgets[{i}]", f"N={b} is listed twice")
                else:
                    budgets.append(b)
    verifiers = []
    for label, spec in _mapping(data.get("verifiers"), "verifiers", err).items():
        spec = _mapping(spec, f"verifiers.{label}", err)
        verifiers.append(Verifier(str(label), str(spec.pop("scorer", "model")),
                                  None if spec.get("model") is None else str(spec.pop("model")),
                                  {k: v for k, v in spec.items() if k != "model"}))
    if any(m not in _UNSCORED for m in methods) and not verifiers:
        err.add("verifiers", "missing: the methods " + ", ".join(m for m in methods if m not in _UNSCORED)
                + " need a verifier (verifiers: {prm: {model: default}})")
    settings = _mapping(data.get("settings"), "settings", err)
    for k in settings:
        if k not in _SETTINGS:
            err.add(f"settings.{k}", f"unknown search setting; one of {', '.join(_SETTINGS)} "
                    "(the aggregate comes from aggregators)")
    try:
        SearchConfig(**{k: v for k, v in settings.items() if k in _SETTINGS})
    except (PrmkitError, TypeError) as e:
        err.add("settings", str(e))
    method_settings = {}
    for m in ("beam", "dvts", "mcts"):
        own = _mapping(data.get(m), m, err)
        method_settings[m] = own
        if not own:
            continue
        if m not in methods:
            err.add(m, f"settings of {m}, which methods does not list")
            continue
        budget_keys = {"beam": ("beam_width",), "dvts": ("n",), "mcts": ("simulations",)}[m]
        for k in own:
            if k in budget_keys or k in ("aggregate", "label") or k in _SETTINGS:
                by = "budgets" if k in budget_keys else "aggregators" if k == "aggregate" else "settings"
                err.add(f"{m}.{k}", f"set for the whole sweep (by {by}), not per method")
        try:
            check_search_settings(m, [k for k in own if k not in _SETTINGS])
        except PrmkitError as e:
            err.add(m, str(e))
    for m in ("beam", "dvts"):
        if m in methods:
            key, default = _FANOUT[m]
            fan = method_settings[m].get(key, default)
            if not isinstance(fan, int) or fan < 1:
                err.add(f"{m}.{key}", f"must be a positive integer, got {fan!r}")
                continue
            for i, b in enumerate(budgets):
                if b > fan and b % fan:
                    err.add(f"budgets[{i}]", f"{m} splits N={b} into groups of {key}={fan}: N must be a "
                            f"multiple of {fan} (or at most {fan})")
    for k in ("sample_tokens", "batch_size"):
        v = data.get(k, 1)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            err.add(k, f"must be a positive integer, got {v!r}")
    policy = _mapping(data.get("policy"), "policy", err)
    for k in policy:
        if k not in ("backend", "options"):
            err.add(f"policy.{k}", "unknown policy setting; one of backend, options")
    err.raise_if_any()
    return Recipe(name=str(data.get("name") or p.stem), problems=problems, budgets=tuple(sorted(budgets)),
                  methods=methods, aggregators=aggregators, verifiers=tuple(verifiers),
                  policy=policy.get("backend"), policy_options=dict(policy.get("options") or {}),
                  settings=settings, method_settings={k: v for k, v in method_settings.items() if v},
                  sample_tokens=int(data.get("sample_tokens", 256)), batch_size=int(data.get("batch_size", 8)),
                  description=str(data.get("description") or ""), path=where)


# -- the results ----------------------------------------------------------------------------------------

@dataclass
class TtsCell(Record):
    """One cell's totals over the problems: ``right`` of ``judged`` answers (problems whose answer can
    be checked), tokens generated and scored (all problems together), and the search's settings."""

    method: str | None = None
    n: int | None = None
    aggregate: str | None = None
    verifier: str | None = None
    problems: int | None = None
    judged: int | None = None
    right: int | None = None
    generated_tokens: int | None = None
    scored_tokens: int | None = None
    settings: dict[str, Any] | None = record_field(omit_none=True)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accuracy(self) -> float | None:
        return self.right / self.judged if self.judged and self.right is not None else None

    def per_problem(self, what: str) -> float | None:
        v = getattr(self, what)
        return v / self.problems if self.problems and v is not None else None


@register_result
@dataclass
class TtsResult(Record):
    """Section ``tts`` of a results file: a recipe's cells (:class:`TtsCell`), the verifiers by label
    (their command-line spelling), the policy, the budgets and the number of problems."""

    kind: ClassVar[str] = "tts"
    recipe: str | None = None
    problems: int | None = None
    budgets: list[int] | None = None
    policy: str | None = None
    verifiers: dict[str, str] | None = None
    cells: list[TtsCell] | None = record_field(records=TtsCell)
    extra: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"{self.recipe}: {self.problems} problems, policy {self.policy}"]
        for c in self.cells or []:
            if not isinstance(c, TtsCell):
                continue
            acc = "n/a" if c.accuracy is None else f"{c.accuracy:.1%} ({c.right}/{c.judged})"
            gen, sc = c.per_problem("generated_tokens"), c.per_problem("scored_tokens")
            who = f"{c.verifier} ({c.aggregate})" if c.verifier else "no verifier"
            out.append(f"  {c.method:<8} N={c.n:<3} {who}: accuracy {acc}; per problem "
                       f"{gen or 0:.0f} tokens generated, {sc or 0:.0f} scored")
        return out


# -- the run --------------------------------------------------------------------------------------------

def _clear_cache(scorer: StepScorer) -> None:
    """Empty a prefix cache (the scorer's, or the base's of a checked scorer): a unit of work then
    counts the tokens it scores itself, whatever ran before it."""
    for s in (scorer, getattr(scorer, "base", None)):
        clear = getattr(s, "clear", None)
        if callable(clear):
            clear()


class _Progress:
    """The run's progress file: a header naming the recipe's digest, then one record per finished unit
    (``samples``, ``scores``, ``cell``), appended and flushed as each finishes."""

    def __init__(self, path: Path, digest: str, restart: bool) -> None:
        self.path, self.digest = path, digest
        self.done: dict[tuple[str, ...], dict[str, Any]] = {}
        self.f: Any = None  # the file, opened for appending by the caller (which holds its lock)
        if restart and path.exists():
            path.unlink()
        if path.exists():
            self._read()

    def start(self, f: Any) -> None:
        self.f = f
        if not self.path.stat().st_size:
            self._write({"unit": "recipe", "digest": self.digest})

    def _read(self) -> None:
        errors: list[Any] = []
        rows = list(iter_json_records(self.path, container="jsonl", errors=errors))
        total = sum(1 for _ in open(self.path, "rb"))
        bad = [e for e in errors if e.line != total]
        if bad:
            raise PrmkitError(f"cannot resume: {bad[0]} (rerun with --restart)")
        if rows and rows[0][1].get("digest") not in (None, self.digest):
            raise PrmkitError(f"{self.path} was written by another version of the recipe (its settings "
                              "changed): rerun with --restart, or use another --out")
        for _, obj in rows[1:]:
            self.done[self._key(obj)] = obj
        if errors:  # a torn last line (the write an interruption cut): rewritten without it
            with durable_file(self.path, lock=False) as tmp, open_text(tmp, "w") as f:
                for _, obj in rows:
                    write_jsonl_line(f, obj)

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> tuple[str, ...]:
        return (obj["unit"], obj.get("cell") or obj.get("verifier") or "", obj["problem"])

    def get(self, unit: str, what: str, problem: str) -> dict[str, Any] | None:
        return self.done.get((unit, what, problem))

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._write(obj)
        self.done[self._key(obj)] = obj
        return obj

    def _write(self, obj: dict[str, Any]) -> None:
        write_jsonl_line(self.f, obj)
        self.f.flush()


class _Run:
    """One recipe over its problems (a class, so the loaders and the progress file are shared by the
    units of work without closures)."""

    def __init__(self, recipe: Recipe, problems: list[Problem], policy: Policy | None,
                 scorers: Mapping[str, StepScorer] | None, prompts: Any, progress: _Progress,
                 arith_config: Any) -> None:
        self.recipe, self.problems, self.progress = recipe, problems, progress
        self._policy, self._scorers = policy, dict(scorers or {})
        self._prompts, self.arith_config = prompts, arith_config

    @property
    def policy(self) -> Policy:
        if self._policy is None:  # loaded on first need: a finished run re-renders without a model
            from prmkit.policies import load_policy

            r = self.recipe
            self._policy = load_policy(r.policy, r.policy_options, batch_size=r.batch_size)
        return self._policy

    @property
    def prompts(self) -> Any:
        if self._prompts is None:
            from prmkit.envs import PromptBuilder

            self._prompts = PromptBuilder.for_policy(self.policy, config=self.arith_config,
                                                     source=self.recipe.problems.get("data_format"))
        return self._prompts

    def scorer(self, label: str) -> StepScorer:
        if label not in self._scorers:
            from prmkit.scoring import load_scorer

            v = next(v for v in self.recipe.verifiers if v.label == label)
            self._scorers[label] = load_scorer(v.scorer, v.model, dict(v.options),
                                               batch_size=self.recipe.batch_size)
        return self._scorers[label]

    # -- shared samples ----------------------------------------------------------------------------------
    def samples(self, p: Problem, pid: str) -> list[Trace]:
        got = self.progress.get("samples", "", pid)
        if got is None:
            r, c = self.recipe, self.recipe.config
            n = max(r.budgets)
            params = SamplingParams(n=n, max_new_tokens=r.sample_tokens, temperature=c.temperature,
                                    top_p=c.top_p, seed=c.seed)
            comps = self.policy.generate([self.prompts.request(p, key=pid)], params)[0]
            traces = [finish_trace(p, comp.text, trace_id=f"{pid}#{k}", source=self.policy.model_id,
                                   tokens=comp.num_tokens, label=False, meta={"problem_id": pid, "sample": k})
                      for k, comp in enumerate(comps)]
            got = self.progress.add({"unit": "samples", "problem": pid,
                                     "traces": [t.to_dict() for t in traces]})
        return [Trace.from_dict(d, path=str(self.progress.path)) for d in got["traces"]]

    def sample_scores(self, label: str, traces: list[Trace], pid: str) -> dict[str, Any]:
        """The verifier's step scores of the shared samples, scored in nested slices (the first N₁,
        then up to N₂, ...) so the scored tokens at each N are exactly what scoring the first N costs."""
        got = self.progress.get("scores", label, pid)
        if got is None:
            scorer = self.scorer(label)
            _clear_cache(scorer)
            meter = ComputeMeter(self.policy, scorer)
            scores: list[list[float | None]] = []
            spent = {}
            start = 0
            for n in self.recipe.budgets:
                scores += meter.score(traces[start:n])
                spent[str(n)] = meter.scored_tokens
                start = n
            got = self.progress.add({"unit": "scores", "verifier": label, "problem": pid, "scores": scores,
                                     "scored_tokens": spent})
        return got

    def sampled_cell(self, cell: Cell, p: Problem, pid: str) -> dict[str, Any]:
        traces = self.samples(p, pid)[:cell.n]
        scores = None
        spent = 0
        if cell.verifier is not None:
            s = self.sample_scores(cell.verifier, self.samples(p, pid), pid)
            scores, spent = s["scores"][:cell.n], s["scored_tokens"][str(cell.n)]
        sel = select(traces, cell.method, aggregate=cell.aggregate or "min", scores=scores)
        return {"correct": bool(sel.correct), "judged": any(is_correct(t) is not None for t in traces),
                "chosen": sel.index,
                "answer": None if sel.trace is None else sel.trace.final_answer,
                "generated_tokens": sum(int(t.meta["generation"]["num_tokens"]) for t in traces),
                "scored_tokens": spent}

    def searched_cell(self, cell: Cell, p: Problem) -> dict[str, Any]:
        scorer = self.scorer(cell.verifier)  # type: ignore[arg-type]
        _clear_cache(scorer)
        r = search(cell.method, p, self.policy, scorer, self.prompts, **self.recipe.search_options(cell))
        ok = is_correct(r.trace)
        return {"correct": bool(ok), "judged": ok is not None, "answer": r.trace.final_answer,
                "generated_tokens": r.generated_tokens, "scored_tokens": r.scored_tokens}

    def run(self) -> list[dict[str, Any]]:
        records = []
        cells = self.recipe.cells()
        for p in self.problems:
            pid = problem_key(p)
            for cell in cells:
                got = self.progress.get("cell", cell.key, pid)
                if got is None:
                    body = (self.sampled_cell(cell, p, pid) if cell.method in _SAMPLED
                            else self.searched_cell(cell, p))
                    got = self.progress.add({"unit": "cell", "cell": cell.key, "problem": pid, **body})
                records.append(got)
        return records


def run_recipe(recipe: Recipe, out: str | os.PathLike, *, policy: Policy | None = None,
               scorers: Mapping[str, StepScorer] | None = None, restart: bool = False) -> TtsResult:
    """Run every cell of ``recipe`` on its problems, writing ``OUT/progress.jsonl`` as units finish and
    ``OUT/tts.json`` (sections ``tts`` and ``meta``) at the end; returns the ``tts`` section.
    ``policy`` / ``scorers`` (by verifier label) replace the ones the recipe names (tests, a policy
    already loaded). Resumable (module docs); ``restart`` starts afresh."""
    from prmkit.generate import load_problems

    started = time.time()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items, cfg = load_problems(**recipe.problems)
    if not items:
        raise PrmkitError(f"{recipe.path or recipe.name}: the recipe's problems are empty")
    with output_lock(out / "tts.json"):
        progress = _Progress(out / "progress.jsonl", recipe.digest(), restart)
        with open_text(progress.path, "a") as f:  # appended as units finish: the resume state
            progress.start(f)
            run = _Run(recipe, items, policy, scorers, None, progress, cfg)
            records = run.run()
            policy_id = None if run._policy is None else run._policy.model_id
        result = _totals(recipe, records, len(items), policy_id or (policy.model_id if policy else None))
        meta = {"title": f"Test-time compute: {recipe.name}", "seconds": round(time.time() - started, 1),
                "data": {"problems": dict(recipe.problems)},
                "settings": {"recipe": recipe.path, "digest": recipe.digest(), **recipe.settings,
                             "sample_tokens": recipe.sample_tokens}}
        write_text_file(out / "tts.json", json.dumps({"tts": result.to_dict(), "meta": meta}, indent=2,
                                                     sort_keys=True) + "\n")
    return result


def _totals(recipe: Recipe, records: list[dict[str, Any]], problems: int, policy: str | None) -> TtsResult:
    cells = []
    for cell in recipe.cells():
        rows = [r for r in records if r["cell"] == cell.key]
        settings = recipe.search_options(cell) if cell.method not in _SAMPLED else None
        if settings is not None:
            settings = {k: v for k, v in settings.items() if k not in ("label",)}
        cells.append(TtsCell(method=cell.method, n=cell.n, aggregate=cell.aggregate, verifier=cell.verifier,
                             problems=len(rows), judged=sum(bool(r["judged"]) for r in rows),
                             right=sum(bool(r["correct"]) for r in rows if r["judged"]),
                             generated_tokens=sum(int(r["generated_tokens"]) for r in rows),
                             scored_tokens=sum(int(r["scored_tokens"]) for r in rows), settings=settings))
    return TtsResult(recipe=recipe.name, problems=problems, budgets=list(recipe.budgets), policy=policy,
                     verifiers={v.label: v.describe() for v in recipe.verifiers}, cells=cells)


def tts_file(recipe: str | os.PathLike, out: str | os.PathLike | None = None, *, problems: int | None = None,
             restart: bool = False) -> tuple[TtsResult, Path]:
    """``prmkit tts``: load the recipe (a file, or a shipped recipe by name) and run it into ``out``
    (default ``runs/tts/<name>``); ``problems`` replaces the recipe's number of problems (a first try
    on a few; a later run with more keeps what is done). Returns the result and the results file's
    path."""
    r = load_recipe(recipe)
    if problems is not None:
        if problems < 1:
            raise PrmkitError(f"problems must be at least 1, got {problems}")
        r = replace(r, problems={**r.problems, "n": problems})
    folder = Path(out) if out is not None else Path("runs") / "tts" / r.name
    return run_recipe(r, folder, restart=restart), folder / "tts.json"
