"""Help text and choice checks from the registries: the names each one holds when the command line
is built (the built-ins and any installed plugin), so no command lists backend or method names by
hand, and an unknown name is the registry's one-line error before any work starts."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["names", "policy_help", "probe_help", "monitor_help", "organism_help", "check_aggregator",
           "check_probes"]


def names(registry: Iterable[str]) -> str:
    """``"a, b, c"``: the names a registry holds, in its order (reading it loads its plugins)."""
    return ", ".join(registry)


def policy_help(what: str = "Policy") -> str:
    """The help of a ``--policy`` option: the registered backends and the default."""
    from prmkit.policies import POLICIES

    return (f"{what}: a backend ({names(POLICIES)}) or module:attr (default: torch, in the dtype "
            "this CPU or GPU runs fastest, -p dtype=... to choose; else ct2 where ctranslate2 is "
            "installed, else hf).")


def probe_help() -> str:
    """The help of ``prmkit eval probes --probe``: the registered probes (plugins included)."""
    from prmkit.eval import PROBES

    return f"Run only this probe (repeatable): {names(PROBES)}. Default: every one the inputs allow."


def monitor_help(what: str = "A monitor") -> str:
    """The help of a monitor option (``--monitor``, ``--guard``): the registered monitors (plugins
    included) and how one takes its argument."""
    from prmkit.monitor import MONITORS

    return (f"{what}: {names(MONITORS)} (NAME:ARG gives its argument: rule:RULES.yaml, prm:MODEL_DIR, "
            "judge:BACKEND).")


def organism_help() -> str:
    """The help of ``prmkit agent run --organism``: the registered organisms (plugins included)."""
    from prmkit.envs import ORGANISMS

    return f"A model organism: {names(ORGANISMS)}, or all (the built-in ones). Repeatable."


def check_aggregator(value: str) -> str:
    """``--aggregate`` callback: the name (with its arguments) must make an aggregator."""
    from prmkit.scoring import get_aggregator

    get_aggregator(value)
    return value


def check_probes(values: list[str] | None) -> list[str] | None:
    """``--probe`` callback: every name must be a registered probe."""
    from prmkit.eval import PROBES

    for name in values or []:
        PROBES.load(name)
    return values
