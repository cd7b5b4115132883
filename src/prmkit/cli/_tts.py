"""``prmkit tts``: run a test-time-compute recipe (methods × N × aggregators × verifiers) into one
results file that ``prmkit report`` draws as accuracy-against-compute curves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.search import shipped_recipes

__all__ = ["tts"]

console = Console()


def tts(
    recipe: Annotated[str, typer.Option(
        "--recipe", "-r", help=f"A recipe file (YAML or JSON), or a shipped recipe by name: "
                               f"{', '.join(shipped_recipes())}.")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Run folder: progress.jsonl (the resume state) and tts.json (the results); "
                            "default runs/tts/<recipe name>.")] = None,
    problems: Annotated[int | None, typer.Option(
        help="Run on this many problems instead of the recipe's (a later run with more resumes).")] = None,
    restart: Annotated[bool, typer.Option(
        "--restart", help="Forget the progress of an earlier run in the folder and start afresh.")] = False,
) -> None:
    """Run a test-time-compute sweep from a recipe, resumably, and write its results file.

    A shipped recipe by name, on 2 of its problems: prmkit tts --recipe quick --problems 2
    then draw its curves: prmkit report runs/tts/quick/tts.json -o runs/tts/quick/report
    An interrupted run resumes: rerun the same command and finished work is not redone. A recipe whose
    settings changed since is refused (--restart starts afresh).
    """
    from prmkit.search import tts_file

    result, path = tts_file(recipe, out, problems=problems, restart=restart)
    for line in [*result.lines(), f"{path}: results (prmkit report {path} -o {path.parent / 'report'})"]:
        console.print(line, highlight=False, soft_wrap=True)
