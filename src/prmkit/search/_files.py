"""The ``prmkit select`` and ``prmkit search`` stages, file-level.

- :func:`select_file`: choose one trace per problem from a scored file, report the accuracy of the
  choices (and of majority vote and the oracle beside them), optionally write the chosen traces;
- :func:`search_file`: run a step-level search on every problem and write the answer traces.

Both write to a temporary file renamed on success: a failure never leaves half a file, and never
touches an existing output or the input.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import durable_file, output_lock
from prmkit._jsonio import iter_json_records, open_text, write_jsonl_line
from prmkit._result import Record
from prmkit.data import read
from prmkit.envs import ArithConfig, PromptBuilder
from prmkit.errors import PrmkitError
from prmkit.policies import Policy
from prmkit.provenance import SelectProvenance
from prmkit.scoring import StepScorer
from prmkit.search._search import SEARCHES, SearchConfig, search
from prmkit.search._select import SCORED_METHODS, SELECTORS, SelectionReport, select_problems
from prmkit.trace import Problem, Trace, TraceWriter
from prmkit.trace_queries import is_correct, partly_scored, problem_key, score_keys

__all__ = ["select_file", "SelectFileReport", "search_file", "SearchFileReport", "pick_score_key",
           "check_search_settings"]


def pick_score_key(traces: list[Trace], key: str | None) -> str:
    """``key``, or the only scorer name the traces carry (an error names the choices otherwise)."""
    if key is not None:
        return key
    keys = score_keys(traces)
    if not keys:
        raise PrmkitError("the traces carry no scores: run prmkit score first, or use --method majority")
    if len(keys) > 1:
        raise PrmkitError(f"the traces carry scores from several scorers ({', '.join(keys)}): pick one "
                          "with --key")
    return keys[0]


@dataclass
class SelectFileReport(Record):
    """What :func:`select_file` did: the method's report, the reference methods' reports, the score
    key used, how many candidates that key scored only in part (``partial``, see
    :func:`~prmkit.trace_queries.partly_scored`) and how many chosen traces were written (``out`` None:
    none)."""

    kind: ClassVar[str] = "select_file"
    report: SelectionReport = field(metadata={"record": SelectionReport})
    references: list[SelectionReport] = field(metadata={"records": SelectionReport})
    key: str | None = None
    out: str | None = None
    written: int = 0
    partial: int = 0
    candidates: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [self.report.summary() + (f" (scores: {self.key})" if self.key else ""),
               "reference: " + "; ".join(r.summary() for r in self.references)]
        if self.partial:
            out.append(f"{self.partial} of {self.candidates} candidates scored only in part by "
                       f"{self.key} (steps past max_length unscored): their trace scores cover the "
                       "steps that fit")
        if self.out is not None:
            out.append(f"{self.out}: {self.written} chosen traces")
        return out


def select_file(inp: str | os.PathLike, *, method: str = "bon", aggregate: str = "min",
                key: str | None = None, out: str | os.PathLike | None = None, fmt: str | None = None
                ) -> SelectFileReport:
    """Choose one trace per problem of ``inp`` with ``method`` (:data:`SELECTORS`); scored methods use
    the stored scores ``key`` (default: the only scorer found) aggregated by ``aggregate``. With
    ``out``, the chosen traces are written there with ``meta["selection"]`` and a ``select``
    provenance entry."""
    if method not in SELECTORS:
        raise PrmkitError(f"unknown selection method {method!r}; one of {', '.join(SELECTORS)}")
    inp = Path(inp)
    if not inp.exists():
        raise PrmkitError(f"{inp}: no such file")
    traces = list(read(inp, fmt))
    if not traces:
        raise PrmkitError(f"{inp}: no traces")
    if method in SCORED_METHODS:
        key = pick_score_key(traces, key)
    report = select_problems(traces, method, aggregate=aggregate, key=key)
    refs = [select_problems(traces, m) for m in ("majority", "oracle") if m != method]
    result = SelectFileReport(report, refs, key if method in SCORED_METHODS else None,
                              candidates=len(traces))
    if method in SCORED_METHODS and key is not None:
        result.partial = sum(partly_scored(t, key) for t in traces)
    if out is not None:
        out = Path(out)
        with durable_file(out, inputs=[inp]) as partial, TraceWriter(partial) as w:
            for s in report.selections:
                if s.trace is None:
                    continue
                t = s.trace
                t.meta["selection"] = s.to_dict()
                t.add_provenance(SelectProvenance(method, aggregate=s.aggregate, key=key))
                w.write(t)
        result.out, result.written = str(out), w.count
    return result


@dataclass
class SearchFileReport(Record):
    """What :func:`search_file` did: problems searched, how many could be judged and were right, and
    the tokens generated and scored (compare methods at equal compute)."""

    kind: ClassVar[str] = "search_file"
    out: str
    method: str
    problems: int = 0
    judged: int = 0
    right: int = 0
    generated_tokens: int = 0
    scored_tokens: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accuracy(self) -> float | None:
        return self.right / self.judged if self.judged else None

    def lines(self) -> list[str]:
        k = max(1, self.problems)
        acc = f"{self.accuracy:.1%} on {self.judged} problems" if self.judged else "n/a"
        return [f"{self.out}: {self.method} accuracy {acc}; per problem {self.generated_tokens / k:.0f} "
                f"tokens generated, {self.scored_tokens / k:.0f} scored"]


def _search_options(method: str) -> list[str]:
    """The settings the search ``method`` takes: its own parameters after ``(problem, policy, scorer,
    prompts)``, then :class:`SearchConfig`'s fields (every search takes them)."""
    params = list(inspect.signature(SEARCHES.load(method)).parameters.values())[4:]
    own = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
           and p.name != "config"]
    return own + [f.name for f in fields(SearchConfig) if f.name not in own]


def check_search_settings(method: str, given: Collection[str], spelled: Mapping[str, str] | None = None
                          ) -> None:
    """Refuse the settings in ``given`` (those the user chose) that the search ``method`` does not
    take, naming them and those it does take; an unknown ``method`` names the known ones.
    ``spelled``: how the user writes each setting (``{"n": "--n / -n"}``; default: its own name);
    with it, only settings it names are listed.

    >>> check_search_settings("beam", ["beam_width", "n"], {"n": "--n / -n", "beam_width": "--beam-width"})
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: --n / -n is not an option of the beam search (it takes: --beam-width)
    """
    if method not in SEARCHES:
        raise PrmkitError(f"unknown search method {method!r}; one of {', '.join(SEARCHES)}")
    takes = _search_options(method)
    untaken = [k for k in given if k not in takes]
    if untaken:
        spell = dict(spelled or {})
        what = (f"{spell.get(untaken[0], untaken[0])} is not an option" if len(untaken) == 1
                else f"{', '.join(spell.get(k, k) for k in untaken)} are not options")
        listed = ", ".join(spell.get(k, k) for k in takes if spelled is None or k in spelled)
        raise PrmkitError(f"{what} of the {method} search (it takes: {listed})")


def _progress_file(out: Path, method: str, used: Mapping[str, Any]) -> Path:
    """Where a run of ``method`` with the settings ``used`` appends each problem's answer as it
    finishes (hidden, beside ``out``): a run with other settings has another file."""
    digest = hashlib.sha256(json.dumps([method, dict(used)], sort_keys=True, default=str).encode())
    return out.with_name(f".{out.name}.{method}-{digest.hexdigest()[:10]}.searching.jsonl")


def _searched(path: Path) -> dict[str, Trace]:
    """The answers an interrupted run wrote to ``path``, by problem; a torn last line (the write the
    interruption cut) is dropped and the file rewritten without it."""
    if not path.exists():
        return {}
    errors: list[Any] = []
    rows = list(iter_json_records(path, container="jsonl", errors=errors))
    total = sum(1 for _ in open(path, "rb"))
    bad = [e for e in errors if e.line != total]
    if bad:
        raise PrmkitError(f"cannot resume the search: {bad[0]} (remove {path}, or pass --overwrite)")
    done = {}
    for line, obj in rows:
        t = Trace.from_dict(obj, path=str(path), line=line)
        done[t.meta.get("problem_id") or problem_key(t.problem)] = t
    if errors:
        with durable_file(path, lock=False) as tmp, open_text(tmp, "w") as f:
            for _, obj in rows:
                write_jsonl_line(f, obj)
    return done


def search_file(out: str | os.PathLike, problems: list[Problem], policy: Policy, scorer: StepScorer, *,
                method: str = "beam", arith_config: ArithConfig | None = None, source: str | None = None,
                shots: int | None = None, given: Collection[str] = (),
                spelled: Mapping[str, str] | None = None, restart: bool = False, **options: Any
                ) -> SearchFileReport:
    """Search every problem with ``method`` (:data:`SEARCHES`: ``beam``, ``dvts``, ``mcts``) and write
    the answer traces to ``out``. The prompts are the ones ``policy`` expects
    (:meth:`PromptBuilder.for_policy`). ``options`` are the search's settings; those the method does
    not take (``n``/``m`` for ``beam``, ``beam_width``/``expansions`` for ``dvts``) are dropped, so one
    set of command-line options serves every method, unless they are ``given``: the settings the user
    chose (a command line's explicit flags, not its defaults), of which one the method does not take
    is an error naming it (:func:`check_search_settings`, with ``spelled``), before any search.

    Resumable: each answer is appended, as its problem finishes, to a hidden progress file beside
    ``out`` named by the method and settings; a rerun with the same ones skips the problems found
    there (``restart``: start afresh), and ``out`` is written, in problem order, once all are done
    (then the progress file is removed). With a seeded policy a resumed run writes what an
    uninterrupted one would: every problem's search is independent and keyed by its problem."""
    check_search_settings(method, given, spelled)
    takes = _search_options(method)
    used = {k: v for k, v in options.items() if k in takes}
    prompts = PromptBuilder.for_policy(policy, config=arith_config, source=source, shots=shots)
    out = Path(out)
    report = SearchFileReport(str(out), method, options=used)
    progress = _progress_file(out, method, used)
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out):
        if restart and progress.exists():
            progress.unlink()
        done = _searched(progress)
        answers = []
        with TraceWriter(progress, append=True) as w:
            for p in problems:
                t = done.get(problem_key(p))
                if t is None:
                    r = search(method, p, policy, scorer, prompts, **used)
                    t = r.trace
                    w.write(t)  # flushed: an interruption loses no finished problem
                answers.append(t)
        with durable_file(out, lock=False) as partial, TraceWriter(partial) as w:
            for t in answers:
                w.write(t)
                ok = is_correct(t)
                report.problems += 1
                report.judged += ok is not None
                report.right += bool(ok)
                compute = t.meta.get("search", {}).get("compute", {})
                report.generated_tokens += compute.get("generated_tokens", 0)
                report.scored_tokens += compute.get("scored_tokens", 0)
        progress.unlink()
    return report
