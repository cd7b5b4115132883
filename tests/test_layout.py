"""The package layout's rules, checked on the source (README, "Layout"):

- no module imports another package's private module (``prmkit.search._common`` from ``eval``) or a
  private name of another package; what a package offers is exported from its ``__init__``. Modules
  of the root package (``prmkit._registry``, ``prmkit._jsonio``, ``prmkit._progress``,
  ``prmkit._fields``, ``prmkit._weights``, ``prmkit._durable``, ``prmkit._procs``) are shared infrastructure of every package and may be imported anywhere;
- the subpackages import each other without cycles, and so do the modules inside each package;
  imports inside functions and under ``TYPE_CHECKING`` count;
- the CLI holds no stage logic: a command module imports no stage's internals and no ``_private``
  name;
- every file is written through ``prmkit._durable.durable_file`` (or into a staging folder published
  whole); the few exceptions are listed with their reasons.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "prmkit"


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(SRC.rglob("*.py")):
        parts = ["prmkit", *f.relative_to(SRC).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names) of every ``from ... import`` in a module, at any depth."""
    parts = name.split(".")
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts if is_pkg else parts[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                full = ".".join(base + (node.module.split(".") if node.module else []))
            elif node.module and node.module.split(".")[0] == "prmkit":
                full = node.module
            else:
                continue
            out.append((node.lineno, full, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "prmkit"]
    return out


def _package(module: str) -> str:
    """``prmkit.eval._bon`` -> ``eval``; a root module (``prmkit.trace``) is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _is_package(module: str) -> bool:
    return MODULES.get(module, Path()).name == "__init__.py"


def test_no_private_imports_across_packages():
    bad = []
    for name, path in MODULES.items():
        own = _package(name)
        for line, target, names in _imports(name, path):
            tparts = target.split(".")
            if len(tparts) <= 1 or _package(target) == own:
                continue
            root_private = len(tparts) == 2 and tparts[1].startswith("_")  # prmkit._registry, ...
            private_module = any(p.startswith("_") for p in tparts[2:]) or (
                len(tparts) == 2 and tparts[1].startswith("_") and _is_package(target))
            private_names = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if (private_module and not root_private) or private_names:
                bad.append(f"{path.relative_to(SRC.parent)}:{line}: from {target} import {', '.join(names)}")
    assert not bad, "imports of another package's private parts:\n" + "\n".join(bad)


def _graph(key) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for _, target, names in _imports(name, path):
            for t in [f"{target}.{n}" for n in names] + [target]:
                if t in MODULES:
                    a, b = key(name), key(t)
                    if a is not None and b is not None and a != b:
                        edges[a].add(b)
                    break
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_packages_import_each_other_without_cycles():
    subpackages = {_package(m) for m in MODULES if _is_package(m) and m != "prmkit"}
    cycles = _cycles(_graph(lambda m: _package(m) if _package(m) in subpackages else None))
    assert not cycles, f"package import cycles: {cycles}"


def test_modules_inside_a_package_import_each_other_without_cycles():
    # A package's __init__ re-exports its modules; the edges that matter are module -> module.
    cycles = _cycles(_graph(lambda m: None if _is_package(m) else m))
    assert not cycles, f"module import cycles: {cycles}"


#: Modules of the root package that every package, the CLI included, may import (the module docs).
_ROOT_MODULES = {m for m in MODULES if m.count(".") == 1 and m.split(".")[1].startswith("_")
                 and not _is_package(m)}


def test_the_cli_imports_only_public_names():
    bad = []
    for name, path in MODULES.items():
        if _package(name) != "cli":
            continue
        for line, target, names in _imports(name, path):
            if _package(target) in ("cli", "") or target in _ROOT_MODULES:  # shared infrastructure
                continue
            if any(p.startswith("_") for p in target.split(".")[1:]) or any(
                    n.startswith("_") for n in names):
                bad.append(f"{path.name}:{line}: from {target} import {', '.join(names)}")
    assert not bad, "the CLI reaches into a stage's internals:\n" + "\n".join(bad)


def test_the_checks_see_a_private_import():
    """The rules are not vacuous: the parser finds this package's known imports."""
    found = {t for _, t, _ in _imports("prmkit.eval._files", MODULES["prmkit.eval._files"])}
    assert "prmkit.scoring" in found and "prmkit.eval.probes._base" in found
    assert _package("prmkit.eval.probes._base") == "eval" and _is_package("prmkit.eval")


# -- writes go through prmkit._durable -------------------------------------------------------------

#: Calls that create or replace a file, by the called name (``open`` and ``open_text`` only with a
#: writing mode).
_NAME_WRITERS = {"save_file", "TraceWriter", "ParquetWriter", "copyfile", "copy2"}
_ATTR_WRITERS = {"write_text", "write_bytes", "save_file", "TraceWriter", "ParquetWriter", "savefig",
                 "save_pretrained", "to_parquet", "to_json", "to_csv"}
_OPENERS = {"open", "open_text", "open_binary", "fdopen", "gzip.open"}
#: Where a write that is not inside ``with durable_file(...)`` is allowed, and why.
_ALLOWED_WRITES = {
    "prmkit._durable": "the helper itself",
    "prmkit._jsonio": "the rename and folder-publishing primitives the helper uses",
    "prmkit.trace:TraceWriter.__init__": "writes the path it is given: durable_file's temporary file, or an "
                                         "output appended to under output_lock (generate's resume file)",
    "prmkit.trace:write_traces": "the path is durable_file's temporary file or appended to under output_lock",
    "prmkit.generate._sampling:_sample_into": "appends to the resume file under output_lock",
    "prmkit.cli:main": "opens /dev/null for a reader that left (a closed pipe)",
    "prmkit.eval._plots:_png": "savefig into memory (a BytesIO), not a file",
    "prmkit.train._trainer:_save_optimizer": "into a checkpoint staging folder (publish_folder)",
    "prmkit.train._trainer:train": "into the run's staging folder (publish_into)",
    "prmkit.train._trainer:_save_checkpoint": "into a checkpoint staging folder (publish_folder)",
    "prmkit.train._trainer:_write_config_yaml": "into a staging folder (its callers publish it)",
    "prmkit.train._policy_sft:sft_policy": "into a staging folder (publish_into)",
    "prmkit.models._persistence:PersistenceMixin.save_pretrained": "into a staging folder (publish_into)",
    "prmkit.models._shipped:export_shipped": "into a staging folder (publish_folder)",
    "prmkit.models._shipped:_cast_tensors": "rewrites a file of export_shipped's staging folder",
    "prmkit.models._persistence:_merge_shipped": "into a staging folder (publish)",
    "prmkit.models._backbones:build_tiny_backbone": "into a staging folder (publish_folder)",
    "prmkit.policies._ct2:_convert": "into a staging folder (publish_folder)",
    "prmkit.policies._ct2:_converter.InMemory.load_model": "into convert_to_ct2's staging folder (its input)",
    "prmkit.policies._hf:_save_cache": "into a staging folder (publish_folder)",
}


def _mode(call: ast.Call) -> str:
    args = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
    if not args:
        return "r"
    # A mode computed at run time may write: counted as writing.
    return args[0].value if isinstance(args[0], ast.Constant) and isinstance(args[0].value, str) else "w"


def _called(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and f.value.id == "gzip" and f.attr == "open":
            return "gzip.open"
        return f.attr
    return f.id if isinstance(f, ast.Name) else ""


def _unguarded_writes(path: Path) -> list[tuple[int, str, str]]:
    """(line, enclosing function, call) of every file write outside ``with durable_file(...)``."""
    out: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, scope: str, guarded: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = f"{scope}.{node.name}" if scope else node.name
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and _called(i.context_expr) in ("durable_file", "output_lock")
                for i in node.items):
            guarded = True
        if isinstance(node, ast.Call) and not guarded:
            name = _called(node)
            f = node.func
            base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if isinstance(f, ast.Name):
                hit = name in _NAME_WRITERS or (name in _OPENERS and any(c in _mode(node) for c in "wax"))
            elif name in ("replace", "rename"):
                hit = base == "os"
            elif name in ("move", "copyfile", "copy2", "copy"):
                hit = base == "shutil"
            elif name == "save":
                hit = base == "torch"
            else:
                hit = name in _ATTR_WRITERS or (name in _OPENERS and any(c in _mode(node) for c in "wax"))
            if hit:
                out.append((node.lineno, scope, name))
        for child in ast.iter_child_nodes(node):
            visit(child, scope, guarded)

    visit(ast.parse(path.read_text()), "", False)
    return out


def test_files_are_written_only_through_the_durable_helper():
    """Every file prmkit writes goes through ``prmkit._durable`` (a unique temporary file renamed on
    success, a lock on the output, inputs checked against it) or into a staging folder that is
    published whole; any other write is listed here with its reason, or it fails this test."""
    bad, used = [], set()
    for name, path in MODULES.items():
        if name in _ALLOWED_WRITES:
            continue
        for line, scope, call in _unguarded_writes(path):
            used.add(f"{name}:{scope}")
            if f"{name}:{scope}" not in _ALLOWED_WRITES:
                bad.append(f"{path.relative_to(SRC)}:{line}: {call}(...) in {scope or 'module'}")
    stale = sorted(k for k in _ALLOWED_WRITES if ":" in k and k not in used)
    assert not stale, f"_ALLOWED_WRITES names functions that write nothing (remove them): {stale}"
    assert not bad, ("files written outside prmkit._durable.durable_file (use it, or add the function to "
                     "_ALLOWED_WRITES with the reason):\n" + "\n".join(bad))


def test_the_write_check_sees_an_unguarded_write(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f(p):\n    p.write_text('x')\n    with durable_file(p) as t:\n"
                   "        open(t, 'w').write('y')\n    open(p, 'a')\n    'a'.replace('a', 'b')\n")
    assert _unguarded_writes(src) == [(2, "f", "write_text"), (5, "f", "open")]


# -- statistics live in prmkit.eval._stats ---------------------------------------------------------

#: Words that, as a part of a function's name (split at ``_``), make it a statistics helper ("ci" and
#: "rank" are left out: the report's formatters of an interval and search's sort key use them).
_STAT_WORDS = {"bootstrap", "auroc", "auc", "roc", "spearman", "pearson", "kendall", "ranks",
               "percentile", "percentiles", "quantile", "quantiles", "interval", "intervals"}
#: Calls that compute a percentile or quantile.
_STAT_CALLS = {"percentile", "nanpercentile", "quantile", "nanquantile", "quantiles"}
#: Statistics-named functions allowed outside ``eval/_stats.py``, and why.
_ALLOWED_STATS = {
    "prmkit.eval._bon:within_problem_auroc": "a best-of-N metric: the mean of _stats.auroc per problem",
    "prmkit.eval.probes._common:_step_auroc": "_stats.auroc over (score, step is valid) pairs",
    "prmkit.eval._processbench:_hit_interval": "a span of the trace's text, not a statistic",
    "prmkit.monitor._eval:bootstrap_rates": "the monitor's public API over _stats' stratified_resamples and "
                                            "percentile_interval (monitor may import prmkit.eval only)",
}


def _stats_helpers(path: Path) -> list[tuple[int, str, str]]:
    """(line, enclosing function, what) of every statistics-named function defined and every
    percentile / quantile computed in a module."""
    out: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = f"{scope}.{node.name}" if scope else node.name
            if not isinstance(node, ast.ClassDef) and _STAT_WORDS & set(node.name.lower().split("_")):
                out.append((node.lineno, scope, f"def {node.name}"))
        if isinstance(node, ast.Call) and _called(node) in _STAT_CALLS:
            out.append((node.lineno, scope, f"{_called(node)}(...)"))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(path.read_text()), "")
    return out


def test_statistics_are_defined_only_in_eval_stats():
    """Bootstrap, AUROC, rank correlations and percentile intervals are written once, in
    ``prmkit/eval/_stats.py`` (issue 46: three bootstraps and two AUROCs had drifted apart); any
    other statistics-named function is listed here with its reason, or it fails this test."""
    bad, used = [], set()
    for name, path in MODULES.items():
        if name == "prmkit.eval._stats":
            continue
        for line, scope, what in _stats_helpers(path):
            used.add(f"{name}:{scope}")
            if f"{name}:{scope}" not in _ALLOWED_STATS or not what.startswith("def "):
                bad.append(f"{path.relative_to(SRC)}:{line}: {what} in {scope or 'module'}")
    stale = sorted(k for k in _ALLOWED_STATS if k not in used)
    assert not stale, f"_ALLOWED_STATS names functions that do not exist (remove them): {stale}"
    assert not bad, ("statistics outside prmkit/eval/_stats.py (use it, or add a thin wrapper to "
                     "_ALLOWED_STATS with the reason):\n" + "\n".join(bad))


def test_the_stats_check_sees_a_helper(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import numpy as np\n\ndef _auroc(p, n):\n    return 0.5\n\ndef mean(x):\n"
                   "    return np.percentile(x, 50)\n\nclass R:\n    def bootstrap_ci(self):\n        pass\n")
    assert _stats_helpers(src) == [(3, "_auroc", "def _auroc"), (7, "mean", "percentile(...)"),
                                   (10, "R.bootstrap_ci", "def bootstrap_ci")]


# -- stage results are typed: no guessing at dicts --------------------------------------------------

#: Where stage results are composed, rendered or printed: the demo, the evaluation (report, card,
#: probes, plots) and the CLI. Outside (de)serialisation, they read typed results (prmkit._result.Result),
#: never a dict checked with ``isinstance(..., Mapping)``.
_RESULT_READERS = ("prmkit.demo", "prmkit.eval", "prmkit.cli")
#: Functions that turn JSON into results and back: the one place a Mapping check belongs.
_SERIALISERS = {"from_dict", "to_dict", "_load"}
#: Other Mapping checks allowed in those modules, and why.
_ALLOWED_MAPPING = {
    "prmkit.eval._report:": "the results file's schema (_MAP, _MAPS): checked when a file is loaded",
    "prmkit.eval._report:check_results": "loading a results file: its sections' JSON types",
    "prmkit.eval._report:load_results": "loading a results file: its meta object",
    "prmkit.eval._report:_jsonable": "writing report.json: any value to plain JSON",
    "prmkit.eval._report:_generic": "a section or field prmkit has no class for, shown as it is",
    "prmkit.eval._report:_is_table_list": "a section or field prmkit has no class for, shown as it is",
    "prmkit.eval._report:_generic_headline": "a headline of another shape than the verdict's, shown as it is",
    "prmkit.eval._doc:_auto": "a value of unknown meaning, formatted as it is",
    "prmkit.eval._results:as_results": "the boundary: a results dict read section by section",
    "prmkit.eval._results:section_from_dict": "the boundary: one section read into its class",
    "prmkit.eval._results:ProcessBenchSection.generator_rows": "a free-form field of a typed section",
    "prmkit.eval._results:ProbeOutcome.skipped_counts": "a probe's own number, not yet typed (issue 46)",
    "prmkit.eval._results:MetaSection.stage_seconds_by_stage": "a free-form field of the meta section",
    "prmkit.eval._card:_Seen.add": "a step's tool_call meta (a trace field, not a result)",
    "prmkit.eval._card:card_from_provenance": "a trace given as its dict",
    "prmkit.eval._processbench:_pool": "traces given by split, not a result",
    "prmkit.eval.probes._transfer:transfer_probe": "label sources given by data source, not a result",
}


def _mapping_checks(path: Path) -> list[tuple[int, str]]:
    """(line, enclosing function) of every ``isinstance(x, Mapping)`` (``Mapping`` or
    ``MutableMapping``, alone or in a tuple, by name or attribute) in a module."""
    out: list[tuple[int, str]] = []

    def is_mapping(e: ast.expr) -> bool:
        name = e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else ""
        return name in ("Mapping", "MutableMapping")

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = f"{scope}.{node.name}" if scope else node.name
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                and len(node.args) == 2):
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(is_mapping(k) for k in kinds):
                out.append((node.lineno, scope))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(path.read_text()), "")
    return out


def test_stage_results_are_read_typed_outside_serialisation():
    """The demo, the evaluation and the CLI read stage results as typed objects (issue 46: the report
    read its sections through 44 ``isinstance(..., Mapping)`` guards); a Mapping check is allowed in
    ``from_dict`` / ``to_dict`` or where listed here with its reason, or it fails this test."""
    bad, used = [], set()
    for name, path in MODULES.items():
        if not name.startswith(_RESULT_READERS):
            continue
        for line, scope in _mapping_checks(path):
            used.add(f"{name}:{scope}")
            if scope.rsplit(".", 1)[-1] in _SERIALISERS or f"{name}:{scope}" in _ALLOWED_MAPPING:
                continue
            bad.append(f"{path.relative_to(SRC)}:{line}: isinstance(..., Mapping) in {scope or 'module'}")
    stale = sorted(k for k in _ALLOWED_MAPPING if k not in used)
    assert not stale, f"_ALLOWED_MAPPING names places without a Mapping check (remove them): {stale}"
    assert not bad, ("a stage result read as a dict (give the section a class in prmkit.eval._results, "
                     "or add the place to _ALLOWED_MAPPING with the reason):\n" + "\n".join(bad))


def test_the_mapping_check_sees_a_guess_at_a_dict(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from collections.abc import Mapping\nimport collections.abc as abc\n\n"
                   "def render(r):\n    if isinstance(r.get('bon'), Mapping):\n        pass\n\n"
                   "class S:\n    @classmethod\n    def from_dict(cls, d):\n"
                   "        return isinstance(d, (dict, abc.Mapping))\n\n"
                   "isinstance(1, int)\n")
    assert _mapping_checks(src) == [(5, "render"), (11, "S.from_dict")]
