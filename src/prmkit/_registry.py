"""Lazy registries of extension points: a literal name -> ``"module:attr"``, imported on first use.

Formats, splitters, policy backends, labelers, probes, scorers, aggregators and PRM conventions are
each a :class:`Registry`, so a component whose optional dependency is missing only fails when it is
asked for, with an error that names the exact ``pip install``.

Plugins: a registry made with ``group=`` also holds the components that other installed
distributions declare as Python entry points of that group, e.g. in a plugin's ``pyproject.toml``::

    [project.entry-points."prmkit.labelers"]
    oracle = "prmkit_oracle.labeler:OracleLabeler"

An entry point's value is what the registry stores anyway (``"module:attr"``). Entry points are read
the first time the registry is listed or looked up, and a plugin's module is imported only when the
component is used: a plugin that fails to import is a :class:`~prmkit.errors.PrmkitError` naming its
distribution when it is asked for, and never stops the built-ins from being listed or used. A
built-in, or a name registered in code, wins over a plugin of the same name: the plugin is left out
with a warning, so installing a package can never change what a built-in name means.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

from prmkit.errors import PrmkitError

__all__ = ["Registry", "Plugin", "ENTRY_POINT_GROUPS"]

#: The entry-point groups prmkit reads, and the registry each one fills.
ENTRY_POINT_GROUPS = {
    "prmkit.labelers": "prmkit.labelers.LABELERS",
    "prmkit.policies": "prmkit.policies.POLICIES",
    "prmkit.conventions": "prmkit.models.CONVENTIONS",
    "prmkit.probes": "prmkit.eval.PROBES",
    "prmkit.perturbations": "prmkit.eval.PERTURBATIONS",
    "prmkit.eval_tasks": "prmkit.eval.EVAL_TASKS",
    "prmkit.formats": "prmkit.data.FORMATS",
    "prmkit.scorers": "prmkit.scoring.SCORERS",
    "prmkit.aggregators": "prmkit.scoring.AGGREGATORS",
    "prmkit.checkers": "prmkit.scoring.CHECKERS",
    "prmkit.splitters": "prmkit.data.SPLITTERS",
    "prmkit.monitors": "prmkit.monitor.MONITORS",
    "prmkit.organisms": "prmkit.envs.ORGANISMS",
    "prmkit.selectors": "prmkit.search.SELECTORS",
    "prmkit.searches": "prmkit.search.SEARCHES",
    "prmkit.queue_strategies": "prmkit.annotate.STRATEGIES",
}


@dataclass(frozen=True)
class Plugin:
    """Where a registry entry that came from an entry point was declared."""

    group: str
    name: str
    value: str
    distribution: str | None

    def __str__(self) -> str:
        return (f"plugin {self.distribution or '(unknown distribution)'} "
                f"(entry point {self.group}: {self.name} = {self.value})")


@cache
def _installed_entry_points() -> Any:
    """Every installed distribution's entry points, read once per process: one scan (~15 ms),
    where a scan per group would cost that for each registry listed."""
    return metadata.entry_points()


def _entry_points(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The installed entry points of ``group``."""
    try:
        return tuple(_installed_entry_points().select(group=group))
    except Exception as e:  # a broken distribution's metadata must not take the built-ins down
        warnings.warn(f"prmkit plugins of {group} not loaded: reading entry points failed: {e}",
                      stacklevel=2)
        return ()


def _import(target: str) -> Any:
    """The object a ``"module:attr"`` (or ``"module:a.b"``, or ``"module"``) names."""
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module.strip())
    for part in attr.strip().split(".") if attr.strip() else ():
        obj = getattr(obj, part)
    return obj


class Registry(MutableMapping[str, Any]):
    """``name -> "module:attr"`` with lookup, construction, registration and entry-point plugins.

    An entry is a ``"module:attr"`` string, imported on first use, or the object itself.
    ``group``: the entry-point group whose plugins join the registry (None: no plugins).

    >>> r = Registry("splitter", {"newline": "prmkit.data._split:NewlineSplitter"})
    >>> r.create("newline").name
    'newline'
    >>> r.create("commas")
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: unknown splitter 'commas'; known: newline
    """

    def __init__(self, kind: str, entries: dict[str, Any], *, group: str | None = None) -> None:
        if group is not None and group not in ENTRY_POINT_GROUPS:
            raise PrmkitError(f"{kind}: unknown entry-point group {group!r}; one of "
                              f"{', '.join(ENTRY_POINT_GROUPS)}")
        self.kind = kind
        self.group = group
        self._entries: dict[str, Any] = dict(entries)
        self._plugins: dict[str, Plugin] = {}
        self._scanned = group is None

    # -- plugins -----------------------------------------------------------------------------------
    def _scan(self) -> None:
        """Add this group's entry points (once): names already taken stay as they are."""
        if self._scanned:
            return
        self._scanned = True
        for ep in _entry_points(self.group or ""):
            dist = getattr(getattr(ep, "dist", None), "name", None)
            found = Plugin(ep.group, ep.name, ep.value, dist)
            if ep.name in self._entries:
                taken = self._plugins.get(ep.name)
                warnings.warn(f"{found} is ignored: the {self.kind} {ep.name!r} is "
                              + (f"already provided by {taken}" if taken else "built in (or "
                                 "registered in code), which comes first"), stacklevel=3)
                continue
            self._entries[ep.name] = ep.value
            self._plugins[ep.name] = found

    def plugin(self, name: str) -> Plugin | None:
        """The plugin that provides ``name``; None for a built-in (or a name registered in code)."""
        self._scan()
        return self._plugins.get(name)

    # -- the mapping -------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        self._scan()
        return self._entries[name]

    def __setitem__(self, name: str, target: Any) -> None:
        self._entries[name] = target
        self._plugins.pop(name, None)

    def __delitem__(self, name: str) -> None:
        self._scan()
        del self._entries[name]
        self._plugins.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        self._scan()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._scan()
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        self._scan()
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {dict(self)!r}, group={self.group!r})"

    # -- use ---------------------------------------------------------------------------------------
    def register(self, name: str, target: Any) -> None:
        """Add (or replace) ``name``: ``"module:attr"``, or the object itself."""
        if isinstance(target, str) and ":" not in target:
            raise PrmkitError(f"{self.kind} {name!r}: target must be 'module:attr', got {target!r}")
        self[name] = target

    def load(self, name: str) -> Any:
        """The registered object itself (a class or factory), imported now."""
        if name not in self:
            raise PrmkitError(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self))}")
        target = self._entries[name]
        if not isinstance(target, str):
            return target
        plugin = self._plugins.get(name)
        if plugin is None:
            return _import(target)
        try:
            return _import(target)
        except (Exception, SystemExit) as e:  # whatever the plugin's import raises, sys.exit() too
            what = f"it called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}"
            raise PrmkitError(f"{self.kind} {name!r} comes from the {plugin}, which failed to "
                              f"load: {what}") from e

    def create(self, name: str, **kwargs: Any) -> Any:
        """An instance of ``name`` built with ``kwargs`` (a wrong argument is a :class:`PrmkitError`)."""
        factory = self.load(name)
        try:
            return factory(**kwargs)
        except TypeError as e:
            raise PrmkitError(f"{self.kind} {name!r}: {e}") from None
