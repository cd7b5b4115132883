"""Lazy registries of extension points: a literal name -> ``"module:attr"``, imported on first use.

Formats, splitters and policy backends (and the PRM families, labelers and aggregators to come) are
each a :class:`Registry`, so a component whose optional dependency is missing only fails when it is
asked for, with an error that names the exact ``pip install``.
"""

from __future__ import annotations

import importlib
from typing import Any

from prmkit.errors import PrmkitError

__all__ = ["Registry"]


class Registry(dict[str, str]):
    """``name -> "module:attr"`` with lookup, construction and registration.

    >>> r = Registry("splitter", {"newline": "prmkit.data._split:NewlineSplitter"})
    >>> r.create("newline").name
    'newline'
    >>> r.create("commas")
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: unknown splitter 'commas'; known: newline
    """

    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        super().__init__(entries)
        self.kind = kind

    def register(self, name: str, target: str) -> None:
        """Add (or replace) ``name`` as ``"module:attr"``."""
        if ":" not in target:
            raise PrmkitError(f"{self.kind} {name!r}: target must be 'module:attr', got {target!r}")
        self[name] = target

    def load(self, name: str) -> Any:
        """The registered object itself (a class or factory), imported now."""
        if name not in self:
            raise PrmkitError(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self))}")
        module, _, attr = self[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    def create(self, name: str, **kwargs: Any) -> Any:
        """An instance of ``name`` built with ``kwargs`` (a wrong argument is a :class:`PrmkitError`)."""
        factory = self.load(name)
        try:
            return factory(**kwargs)
        except TypeError as e:
            raise PrmkitError(f"{self.kind} {name!r}: {e}") from None
