"""One shape for what a stage or an evaluation returns: the :class:`Result` protocol.

A result is a typed dataclass with a ``kind`` (its section name in a results file), ``to_dict()``
(plain JSON data), ``from_dict()`` (its exact inverse: ``from_dict(to_dict(x)) == x``) and
``lines()`` (what a terminal shows). Results cross stage boundaries typed: the report, the card and
the CLI render them; a dict appears only where a result is written to or read from JSON.

:class:`Record` gives a dataclass the two conversions from its fields: a field's metadata names a
nested record type (``record=``, ``records=`` for a list, ``by_name=`` for a dict of them) and
whether a None is left out of the dict (``omit_none=True``: the key was optional in the files written
so far); a field made by ``Counter`` reads back as a ``Counter``. Keys a record does not know are
kept in ``extra``, in order, and written back as they came, so a results file written by a newer
prmkit, or a section with a field added by hand, loses nothing on its way through ``prmkit report``. A record read from a dict writes back only the keys the dict had (an
absent key stays absent unless its field is set since; an explicit null stays null): a file read and
written again is the same file.

>>> from dataclasses import dataclass, field
>>> @dataclass
... class Tally(Record):
...     kind = "tally"
...     count: int | None = None
...     extra: dict = field(default_factory=dict)
>>> t = Tally.from_dict({"count": 3, "note": "kept"})
>>> t.count, t.extra, t.to_dict() == {"count": 3, "note": "kept"}
(3, {'note': 'kept'}, True)
>>> isinstance(t, Result), result_class("bon").__name__  # a class made with @register_result
(True, 'BonSection')
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from prmkit.errors import FormatError

__all__ = ["Result", "Record", "register_result", "result_class", "RESULT_KINDS", "record_field"]

R = TypeVar("R", bound="Record")


@runtime_checkable
class Result(Protocol):
    """What every stage and evaluation returns (see the module docs)."""

    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (``from_dict`` reads it back to an equal result)."""
        ...

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        """The result ``to_dict`` gave (a file written by an earlier prmkit included)."""
        ...

    def lines(self) -> list[str]:
        """Lines for a terminal, without markup."""
        ...


#: Result kind -> its class (every class made with :func:`register_result`).
RESULT_KINDS: dict[str, type] = {}


def register_result(cls: type) -> type:
    """A class decorator: ``cls.kind`` reads back as ``cls`` (:func:`result_class`)."""
    RESULT_KINDS[cls.kind] = cls
    return cls


def result_class(kind: str) -> type | None:
    """The class registered for ``kind``, or None."""
    return RESULT_KINDS.get(kind)


def record_field(*, record: type | None = None, records: type | None = None, by_name: type | None = None,
                 omit_none: bool = False, default: Any = None, factory: Any = None) -> Any:
    """A :class:`Record` field: ``record`` a nested record, ``records`` a list and ``by_name`` a dict
    of them (an entry that is not an object is kept as it is); ``omit_none`` leaves a None out of the
    dict."""
    meta = {"record": record, "records": records, "by_name": by_name, "omit_none": omit_none}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _is_default(v: Any, f: dataclasses.Field) -> bool:
    """True when ``v`` is the field's default (of the same type: an array is never "equal" here)."""
    if f.default is not dataclasses.MISSING:
        d = f.default
    elif f.default_factory is not dataclasses.MISSING:
        d = f.default_factory()
    else:
        return False
    return v is d or (type(v) is type(d) and v == d)


def _dump(v: Any) -> Any:
    if isinstance(v, Record):
        return v.to_dict()
    if isinstance(v, dict):
        return {k: _dump(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_dump(x) for x in v]
    return v


def _load(f: dataclasses.Field, v: Any, where: str) -> Any:
    meta = f.metadata
    if f.default_factory is Counter and isinstance(v, Mapping):  # a tally reads back as one
        return Counter(v)
    if meta.get("record") is not None and isinstance(v, Mapping):
        return meta["record"].from_dict(v, where=where)
    if meta.get("records") is not None and isinstance(v, list):
        return [meta["records"].from_dict(x, where=f"{where}[{i}]") if isinstance(x, Mapping) else x
                for i, x in enumerate(v)]
    if meta.get("by_name") is not None and isinstance(v, Mapping):
        return {k: meta["by_name"].from_dict(x, where=f"{where}.{k}") if isinstance(x, Mapping) else x
                for k, x in v.items()}
    return v


class Record:
    """A dataclass mixin: :meth:`to_dict` / :meth:`from_dict` from the fields (see the module docs).
    A subclass is a ``@dataclass`` whose last field is ``extra: dict`` (unknown keys)."""

    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        given = getattr(self, "_given", None)  # the keys of the dict it was read from, if any
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            if v is None and f.metadata.get("omit_none"):
                continue
            if given is not None and f.name not in given and _is_default(v, f):
                continue  # not in the dict it was read from, and not set since
            out[f.name] = _dump(v)
        out.update(getattr(self, "extra", {}))
        return out

    @classmethod
    def from_dict(cls: type[R], d: Mapping[str, Any], *, where: str | None = None) -> R:
        where = where or cls.kind or cls.__name__
        if not isinstance(d, Mapping):
            text = json.dumps(d, default=str)[:60]
            raise FormatError(f"must be an object, got {type(d).__name__} {text}", field=where)
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}  # type: ignore[arg-type]
        kw: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for k, v in d.items():
            f = known.get(k)
            if f is None:
                extra[k] = v
            else:
                kw[k] = _load(f, v, f"{where}.{k}")
        out = cls(**kw, extra=extra)  # type: ignore[call-arg]
        object.__setattr__(out, "_given", frozenset(kw))  # not a field: equality ignores it
        return out

    def has(self, name: str) -> bool:
        """True when ``name`` is among :meth:`to_dict`'s keys (a record read from a dict: the dict
        had it)."""
        return name in self.to_dict()

    def lines(self) -> list[str]:
        """``key: value`` per field that holds something (a subclass says it better)."""
        return [f"{k}: {json.dumps(v, default=str) if isinstance(v, (dict, list)) else v}"
                for k, v in self.to_dict().items() if v is not None]
