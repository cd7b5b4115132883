"""The package layout's rules, checked on the source (README, "Layout"):

- no module imports another package's private module (``prmkit.search._common`` from ``eval``) or a
  private name of another package; what a package offers is exported from its ``__init__``. Modules
  of the root package (``prmkit._registry``, ``prmkit._jsonio``, ``prmkit._progress``,
  ``prmkit._fields``, ``prmkit._weights``) are shared infrastructure of every package and may be imported anywhere;
- the subpackages import each other without cycles, and so do the modules inside each package;
  imports inside functions and under ``TYPE_CHECKING`` count;
- the CLI holds no stage logic: a command module imports no stage's internals and no ``_private``
  name.
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
    """``prmkit.eval._probes`` -> ``eval``; a root module (``prmkit.trace``) is its own package."""
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


def test_the_cli_imports_only_public_names():
    bad = []
    for name, path in MODULES.items():
        if _package(name) != "cli":
            continue
        for line, target, names in _imports(name, path):
            if _package(target) in ("cli", ""):
                continue
            if any(p.startswith("_") for p in target.split(".")[1:]) or any(
                    n.startswith("_") for n in names):
                bad.append(f"{path.name}:{line}: from {target} import {', '.join(names)}")
    assert not bad, "the CLI reaches into a stage's internals:\n" + "\n".join(bad)


def test_the_checks_see_a_private_import():
    """The rules are not vacuous: the parser finds this package's known imports."""
    found = {t for _, t, _ in _imports("prmkit.eval._files", MODULES["prmkit.eval._files"])}
    assert "prmkit.scoring" in found and "prmkit.eval._probes" in found
    assert _package("prmkit.eval._probes") == "eval" and _is_package("prmkit.eval")
