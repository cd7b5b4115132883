"""``prmkit agent run | export`` (the ``agent`` environment's trajectories) and ``prmkit monitor``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.cli._data import parse_options
from prmkit.cli._help import monitor_help, names, organism_help
from prmkit.cli._options import MonitorArgOpt, MonitorOpt, OverwriteOpt
from prmkit.cli._paths import input_files, output_file
from prmkit.envs import SPEC_ORGANISMS
from prmkit.policies import POLICIES

__all__ = ["agent_app", "monitor"]

console = Console()
agent_app = typer.Typer(help="The agent environment: run organisms or a chat model, export transcripts.",
                        no_args_is_help=True)

def _say(lines: list[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


@agent_app.command("run")
def run(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output JSONL of labelled trajectories.")],
    organism: Annotated[list[str] | None, typer.Option("--organism", help=organism_help())] = None,
    policy: Annotated[str | None, typer.Option(
        help=f"Also run a chat backend as the agent ({names(POLICIES)}).")] = None,
    policy_arg: Annotated[list[str] | None, typer.Option(
        "--policy-arg", "-p", help="Backend argument KEY=VALUE (base_url=..., model=...). Repeatable.")] = None,
    tasks: Annotated[int, typer.Option(min=1, help="How many tasks.")] = 20,
    start: Annotated[int, typer.Option(min=0, help="Index of the first task.")] = 0,
    loophole: Annotated[str, typer.Option(
        help="mixed (answer key on even tasks, lenient grader on odd), answer_key, lenient_grader, "
             "or off (the control arm).")] = "mixed",
    env_seed: Annotated[int, typer.Option(help="Which task set.")] = 0,
    seed: Annotated[int, typer.Option(help="Organism and sampling seed.")] = 0,
    guard: Annotated[str | None, typer.Option(
        help=monitor_help("A deployment monitor run before each submit (a flag stops the episode)"))
    ] = None,
    monitor_arg: MonitorArgOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Run agents on the agent environment; every step labelled valid / error / recovery / exploit.

    Example: prmkit agent run --organism all --tasks 20 -o agent.jsonl
    """
    from prmkit.envs import AgentConfig, agent_file, load_agents
    from prmkit.monitor import load_monitors

    output_file(out, overwrite)
    agents = load_agents(organism or [], policy=policy, policy_args=parse_options(policy_arg), seed=seed)
    monitor = load_monitors([guard], monitor_arg)[0] if guard else None
    report = agent_file(out, agents, tasks=tasks, start=start,
                        config=AgentConfig(loophole=loophole, seed=env_seed), guard=monitor,
                        overwrite=overwrite)
    first, *rest = report.lines()
    _say([f"{out}: {first}", *rest])


@agent_app.command("spec")
def spec(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output JSONL of labelled trajectories.")],
    organism: Annotated[list[str] | None, typer.Option(
        "--organism", help=f"{', '.join(SPEC_ORGANISMS)}, or all (default). Repeatable.")] = None,
    requests: Annotated[int, typer.Option(min=1, help="How many requests.")] = 40,
    start: Annotated[int, typer.Option(min=0, help="Index of the first request.")] = 0,
    seed: Annotated[int, typer.Option(help="Which request set.")] = 0,
    spec_file: Annotated[Path | None, typer.Option(
        "--spec", help="A spec file (YAML/JSON rules with id, text, decision) replacing the built-in "
                       "rules R1-R4.", callback=input_files)] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """The safety-spec environment: organisms that reason over the rules, refuse on surface cues, cite
    the wrong rule, or act against their reasoning; every step labelled; over- and under-refusal rates.

    Example: prmkit agent spec -o spec.jsonl --requests 20
    """
    from prmkit.envs import spec_file as write_spec

    output_file(out, overwrite)
    _say(write_spec(out, organism or ["all"], requests=requests, start=start, seed=seed, spec=spec_file,
                    overwrite=overwrite).lines())


@agent_app.command("export")
def export(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Agent trajectories (prmkit JSONL).",
                                        callback=input_files)],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="JSONL of {id, messages} OpenAI chat transcripts.")],
    overwrite: OverwriteOpt = False,
) -> None:
    """Export trajectories as OpenAI chat transcripts with tool_calls."""
    from prmkit.envs import export_messages_file

    output_file(out, overwrite)
    _say([f"wrote {export_messages_file(inp, out, overwrite=overwrite)} transcripts to {out}"])


def monitor(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Traces (prmkit JSONL).", callback=input_files)],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="The traces with the monitors' flags in "
                                                            "meta.monitor.")],
    monitor_spec: MonitorOpt = None,
    monitor_arg: MonitorArgOpt = None,
    view: Annotated[str, typer.Option(help="What the monitors see: all, actions or reasoning.")] = "all",
    deploy: Annotated[bool, typer.Option(
        "--deploy", help="Deployment mode: monitor only what precedes each submit; a flagged trajectory "
        "is marked stopped, with the latency.")] = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Run monitors over traces and write their flags (step + evidence) into the traces.

    On the file of prmkit agent run (the README runs this line after making it):
    prmkit monitor --monitor rule agent.jsonl monitored.jsonl
    """
    from prmkit.monitor import load_monitors, monitor_file

    output_file(out, overwrite)
    report = monitor_file(inp, out, load_monitors(monitor_spec or [], monitor_arg), view=view, deploy=deploy,
                          overwrite=overwrite)
    _say(report.lines() + [f"wrote {out}"])
