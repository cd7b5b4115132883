"""``prmkit cache info | clear``: the model cache (``$PRMKIT_CACHE``, default ``~/.cache/prmkit``)."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer

from prmkit.policies import CACHE_KINDS, CacheEntry, cache_dir, cache_entries, clear_cache

__all__ = ["app"]

app = typer.Typer(help="The model cache: converted and merged models prmkit reuses.", no_args_is_help=True)


def _mb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _where() -> str:
    import os

    how = "PRMKIT_CACHE" if os.environ.get("PRMKIT_CACHE") else "the default; set PRMKIT_CACHE to move it"
    return f"cache: {cache_dir()} ({how})"


def _totals(entries: list[CacheEntry]) -> str:
    kinds = {e.kind for e in entries}
    parts = [f"{k} {_mb(sum(e.size for e in entries if e.kind == k))} ({sum(e.kind == k for e in entries)})"
             for k in [*CACHE_KINDS, "other"] if k in kinds]
    return (f"total {_mb(sum(e.size for e in entries))} in {len(entries)} entries"
            + (f": {', '.join(parts)}" if parts else ""))


@app.command()
def info(
    as_json: Annotated[bool, typer.Option("--json", help="Print the entries as JSON.")] = False,
) -> None:
    """Where the cache is, what each entry is, its size and its key.

    Example: prmkit cache info
    """
    entries = cache_entries()
    if as_json:
        typer.echo(json.dumps({"cache": str(cache_dir()), "entries": [
            {"kind": e.kind, "name": e.name, "path": str(e.path), "bytes": e.size, "key": e.key,
             "modified": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(e.modified)), "note": e.note}
            for e in entries]}, indent=1))
        return
    typer.echo(_where())
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.modified))
        note = f"  ({e.note})" if e.note else ""
        typer.echo(f"  {e.kind:9s} {e.name:56s} {_mb(e.size):>9s}  {when}{note}")
    typer.echo(_totals(entries))
    for kind, what in CACHE_KINDS.items():
        typer.echo(f"  {kind}: {what}")


@app.command()
def clear(
    what: Annotated[list[str] | None, typer.Option(
        "--what", help=f"Which kind to remove (repeatable): {', '.join(CACHE_KINDS)} or all (the "
        "default).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")] = False,
) -> None:
    """Remove cache entries; each is made again when it is next needed.

    Making one again takes about a minute for a ct2 or gguf conversion, less for a shipped model.

    Example: prmkit cache clear --what gguf --yes
    """
    from prmkit.errors import PrmkitError

    kinds = what or ["all"]
    entries = [e for e in cache_entries(kinds) if e.kind != "other"]
    if not entries:
        typer.echo(f"nothing to remove ({', '.join(kinds)}) in {cache_dir()}")
        return
    if not yes:
        prompt = f"remove {len(entries)} entries, {_mb(sum(e.size for e in entries))}, from {cache_dir()}?"
        if not sys.stdin.isatty():
            raise PrmkitError(f"{prompt} Pass --yes to remove them (standard input is not a terminal "
                              "to ask on).")
        if not typer.confirm(prompt):
            typer.echo("nothing removed")
            return
    removed = clear_cache(kinds)
    typer.echo(f"removed {len(removed)} entries, {_mb(sum(e.size for e in removed))}, from {cache_dir()}: "
               + ", ".join(f"{e.kind}/{e.name}" for e in removed))
