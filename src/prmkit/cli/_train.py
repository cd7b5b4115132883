"""``prmkit train prm|orm --config cfg.yaml key=value ...``: train a process or outcome reward model."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from prmkit.cli._options import OverwriteOpt
from prmkit.cli._paths import input_file, utf8_file

if TYPE_CHECKING:
    from prmkit.train import TrainConfig

app = typer.Typer(help="Train process (prm) and outcome (orm) reward models.", no_args_is_help=True)
console = Console(stderr=True)

_CONFIG_HELP = ("A YAML config, or the name of a shipped one (tiny, minilm, smollm2-lora, "
                "qwen2.5-math-7b-gpu); 'prmkit train configs' lists them.")
_OVERRIDE_HELP = "key=value overrides, dotted for nested fields (lora.r=8), values parsed as YAML."
_PROCESSES_HELP = ("Train on this many CPU processes (DDP over gloo), started here; on GPUs use "
                   "accelerate launch --multi_gpu --num_processes N -m prmkit train ... instead.")


def _run(kind: str, config: str | None, overrides: list[str] | None, num_processes: int,
         overwrite: bool = False) -> None:
    from prmkit.errors import PrmkitError
    from prmkit.train import launch, load_config, replaces_finished_model

    if config is not None and Path(config).exists():  # else a shipped config's name
        utf8_file(input_file(config))
    cfg = load_config(config, list(overrides or []), kind=kind)
    if not overwrite and replaces_finished_model(cfg):
        raise PrmkitError(f"{cfg.output_dir}: already holds a trained model; pass --overwrite to replace "
                          "it (to extend a run instead, train it with keep_final_checkpoint=true, then "
                          "rerun with a larger max_steps)")
    _check_data(cfg)
    try:
        result = launch(cfg, num_processes, log=lambda msg: console.print(msg, highlight=False, soft_wrap=True))
    except KeyboardInterrupt:  # typer turns it into a silent exit 130 before prmkit's main can say it
        typer.secho("interrupted", fg="yellow", err=True)
        raise SystemExit(130) from None
    if (line := result.eval_line()) is not None:  # the trainer's log already said where the model went
        console.print(line, highlight=False)


def _check_data(cfg: TrainConfig) -> None:
    """Read the trace files through once before training starts, as the trainer will: it reads them
    only after loading the model (seconds to minutes), and a missing or malformed file should not
    wait for that."""
    from prmkit.data import read

    for path in [*cfg.train, *cfg.eval]:
        input_file(path)
    train = itertools.chain.from_iterable(read(p, cfg.format) for p in cfg.train)
    for _ in itertools.chain(itertools.islice(train, cfg.max_traces),
                             *(read(p, cfg.format) for p in cfg.eval)):
        pass


# The docstrings below write "\\[" where the help shows "[": typer renders them as rich markup, which
# would take "[traces.jsonl]" for a style tag and drop it.
@app.command()
def prm(
    overrides: Annotated[list[str] | None, typer.Argument(help=_OVERRIDE_HELP)] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help=_CONFIG_HELP)] = None,
    num_processes: Annotated[int, typer.Option("--num-processes", min=1, help=_PROCESSES_HELP)] = 1,
    overwrite: OverwriteOpt = False,
) -> None:
    """Train a PRM on step labels.

    Example: prmkit train prm --config tiny train=\\[traces.jsonl] output_dir=runs/prm
    On 2 CPU processes: prmkit train prm --num-processes 2 --config tiny train=\\[traces.jsonl]
    On 8 GPUs: accelerate launch --multi_gpu --num_processes 8 -m prmkit train prm --config qwen2.5-math-7b-gpu train=\\[traces.jsonl]
    """
    _run("prm", config, overrides, num_processes, overwrite)


@app.command()
def orm(
    overrides: Annotated[list[str] | None, typer.Argument(help=_OVERRIDE_HELP)] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help=_CONFIG_HELP)] = None,
    num_processes: Annotated[int, typer.Option("--num-processes", min=1, help=_PROCESSES_HELP)] = 1,
    overwrite: OverwriteOpt = False,
) -> None:
    """Train an ORM (one outcome label per trace) on the same backbones and inputs as a PRM.

    Example: prmkit train orm --config tiny train=\\[traces.jsonl] output_dir=runs/orm
    """
    _run("orm", config, overrides, num_processes, overwrite)


@app.command()
def configs() -> None:
    """List the configs shipped with prmkit (use a name with --config)."""
    from prmkit.train import example_configs

    for name, path in example_configs().items():
        first = next((ln for ln in path.read_text().splitlines()[1:] if ln.startswith("#")), "#")
        typer.echo(f"{name:24s} {first.lstrip('# ').strip()}  ({path})")
