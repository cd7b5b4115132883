"""Typed, located field access for records read from files.

Every importer reads its input through :class:`Fields`, so that a wrong type, a missing key or an
unexpected key becomes a :class:`~prmkit.errors.FormatError` naming file, line and the dotted field
path (``label.steps[3].rating``) instead of a ``KeyError`` deep inside a loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from prmkit.errors import FormatError

_MISSING = object()

_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list",
               dict: "object", type(None): "null"}


def _describe(types: tuple[type, ...]) -> str:
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def _is(value: Any, types: tuple[type, ...]) -> bool:
    # JSON has no separate bool: refuse True where an integer or a number is asked for.
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def _not_finite(value: Any) -> str | None:
    """``"NaN"`` / ``"inf"`` / ``"-inf"`` for a float that is not a finite number, else None.

    JSON has no NaN or infinity, but Python's reader accepts ``NaN`` and ``Infinity``: such a score
    would win every ``max`` it meets, so numbers are refused at the edge, where the line is known.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return None


class Fields:
    """A JSON object with the place it came from.

    >>> f = Fields({"a": [1, "x"]}, path="f.jsonl", line=2)
    >>> f.list("a")
    [1, 'x']
    >>> f.item("a", 1, int)
    Traceback (most recent call last):
    ...
    prmkit.errors.FormatError: f.jsonl:2: a[1] — expected integer, got string
    """

    __slots__ = ("obj", "path", "line", "prefix")

    def __init__(self, obj: Any, *, path: str | None = None, line: int | None = None,
                 prefix: str = "") -> None:
        self.path, self.line, self.prefix = path, line, prefix
        if not isinstance(obj, dict):
            raise self.error(None, f"expected an object, got {_describe((type(obj),))}")
        self.obj = obj

    # -- errors ------------------------------------------------------------------------------------
    def where(self, key: str | int | None) -> str | None:
        if key is None:
            return self.prefix or None
        if isinstance(key, int):
            return f"{self.prefix}[{key}]"
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str | int | None, reason: str) -> FormatError:
        """A :class:`FormatError` located at ``key`` inside this object."""
        return FormatError(reason, path=self.path, line=self.line, field=self.where(key))

    # -- access ------------------------------------------------------------------------------------
    def get(self, key: str, types: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        """The value at ``key``, checked against ``types``; ``default`` makes the key optional."""
        types = types if isinstance(types, tuple) else (types,)
        if key not in self.obj:
            if default is _MISSING:
                raise self.error(key, "missing")
            return default
        value = self.obj[key]
        if not _is(value, types):
            raise self.error(key, f"expected {_describe(types)}, got {_describe((type(value),))}")
        if (bad := _not_finite(value)) is not None:
            raise self.error(key, f"expected a finite number, got {bad}")
        return value

    def str(self, key: str, default: Any = _MISSING, *, nullable: bool = False) -> Any:
        return self.get(key, (str, type(None)) if nullable else str, default)

    def list(self, key: str, default: Any = _MISSING, *, nullable: bool = False) -> Any:
        return self.get(key, (list, type(None)) if nullable else list, default)

    def item(self, key: str, index: int, types: type | tuple[type, ...]) -> Any:
        """Element ``index`` of the list at ``key``, type-checked."""
        types = types if isinstance(types, tuple) else (types,)
        value = self.obj[key][index]
        if not _is(value, types):
            raise FormatError(f"expected {_describe(types)}, got {_describe((type(value),))}",
                              path=self.path, line=self.line, field=f"{self.where(key)}[{index}]")
        if (bad := _not_finite(value)) is not None:
            raise FormatError(f"expected a finite number, got {bad}", path=self.path, line=self.line,
                              field=f"{self.where(key)}[{index}]")
        return value

    def typed_list(self, key: str, types: type | tuple[type, ...], default: Any = _MISSING, *,
                   nullable: bool = False) -> Any:
        """The list at ``key`` with every element checked against ``types``."""
        value = self.list(key, default, nullable=nullable)
        if isinstance(value, list) and key in self.obj:
            for i in range(len(value)):
                self.item(key, i, types)
        return value

    def sub(self, key: str | int, obj: Any | None = None) -> Fields:
        """The nested object at ``key`` (or ``obj``, located at ``key``) as :class:`Fields`."""
        if obj is None:
            obj = self.get(key, dict) if isinstance(key, str) else self.obj[key]
        return Fields(obj, path=self.path, line=self.line, prefix=self.where(key) or "")

    def sub_list(self, key: str, nullable: bool = False) -> list[Fields] | None:
        """The list of objects at ``key``, each as :class:`Fields` located at ``key[i]``."""
        value = self.list(key, nullable=nullable)
        if value is None:
            return None
        return [Fields(v, path=self.path, line=self.line, prefix=f"{self.where(key)}[{i}]")
                for i, v in enumerate(value)]

    def only(self, allowed: Iterable[str]) -> None:
        """Refuse keys outside ``allowed`` (an unknown field may be a different format or a typo)."""
        extra = sorted(set(self.obj) - set(allowed))
        if extra:
            raise self.error(extra[0], "unexpected field" + (
                f" (also {', '.join(extra[1:])})" if len(extra) > 1 else ""))

    def extra(self, known: Iterable[str]) -> dict[str, Any]:
        """The keys outside ``known``, in input order."""
        known = set(known)
        return {k: v for k, v in self.obj.items() if k not in known}
