"""Errors users can act on.

Every error prmkit raises on purpose derives from :class:`PrmkitError`; the CLI prints these without a
traceback. :class:`FormatError` always names the file, the line (or JSON item) and the field.
"""

from __future__ import annotations

__all__ = ["PrmkitError", "FormatError", "MissingDependencyError"]


class PrmkitError(Exception):
    """Base class of the errors prmkit raises deliberately (printed without a traceback by the CLI)."""


class FormatError(PrmkitError, ValueError):
    """Malformed input: says where (file, line, field) and what is wrong.

    >>> str(FormatError("bad rating", path="a.jsonl", line=3, field="label.steps[1].rating"))
    'a.jsonl:3: label.steps[1].rating — bad rating'
    """

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    @property
    def location(self) -> str:
        """``file:line`` (either part omitted when unknown)."""
        where = self.path or "<input>"
        return f"{where}:{self.line}" if self.line is not None else where

    def __str__(self) -> str:
        field = f" {self.field} —" if self.field else ""
        return f"{self.location}:{field} {self.reason}"

    def __reduce__(self):  # keep the keyword-only fields through pickling (process pools)
        return (_rebuild_format_error, (self.reason, self.path, self.line, self.field))


def _rebuild_format_error(reason, path, line, field):
    return FormatError(reason, path=path, line=line, field=field)


class MissingDependencyError(PrmkitError, ImportError):
    """An optional dependency is missing; the message gives the exact ``pip install`` to run."""

    def __init__(self, package: str, extra: str | None = None, purpose: str = "") -> None:
        target = f'"prmkit[{extra}]"' if extra else package
        why = f" for {purpose}" if purpose else ""
        super().__init__(f"{package} is needed{why}: pip install {target}")
        self.package = package
        self.extra = extra
