"""Help text from the registries: the names each one holds when the command line is built (the
built-ins and any installed plugin), so no command lists backend or method names by hand."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["names", "policy_help"]


def names(registry: Iterable[str]) -> str:
    """``"a, b, c"``: the names a registry holds, in its order (reading it loads its plugins)."""
    return ", ".join(registry)


def policy_help(what: str = "Policy") -> str:
    """The help of a ``--policy`` option: the registered backends and the default."""
    from prmkit.policies import POLICIES

    return (f"{what}: a backend ({names(POLICIES)}) or module:attr (default: ct2 where ctranslate2 "
            "is installed, else hf).")
