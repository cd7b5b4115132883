"""Sampling traces: problems -> policy -> traces with steps, answers, outcomes and symbolic labels.

:func:`sample_traces` is what ``prmkit generate`` runs. It writes each problem's N traces as soon as
they exist (one flushed JSON line each) and, run again with the same arguments, skips the problems
already complete: an interrupt loses nothing written, and because sampling is seeded per problem
(``hf`` is batch-invariant), a resumed file holds the same traces as an uninterrupted one.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import durable_file, output_lock
from prmkit._jsonio import iter_json_records, open_text, write_jsonl_line
from prmkit._progress import progress_bar
from prmkit._result import Record, register_result
from prmkit.data import answers_equal, extract_answer, get_splitter, read
from prmkit.envs import PromptBuilder, SymbolicChecker
from prmkit.errors import FormatError, PrmkitError
from prmkit.generate._passk import pass_at_k
from prmkit.policies import Completion, Policy, SamplingParams
from prmkit.provenance import GenerateProvenance, PolicyRef
from prmkit.trace import Problem, Trace, TraceWriter

__all__ = ["sample_traces", "completion_to_trace", "SampleReport", "problems_from_file"]


@register_result
@dataclass
class SampleReport(Record):
    """What a :func:`sample_traces` run did (a :class:`~prmkit._result.Result` of kind ``generate``):
    counts of this run, and ``samples``, problem id -> ``[samples, correct]`` of every complete problem
    in the output (those of earlier runs too), from which :meth:`pass_at_k` is computed without
    reading the file again."""

    kind: ClassVar[str] = "generate"
    problems: int = 0
    skipped_done: int = 0
    generated: int = 0
    correct: int = 0
    tokens: int = 0
    dropped_partial: int = 0
    finish: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[int]] = field(default_factory=dict)
    out: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.finish = Counter(self.finish)

    @property
    def accuracy(self) -> float:
        return self.correct / self.generated if self.generated else 0.0

    @property
    def traces(self) -> int:
        """Traces in the output (complete problems, this run's and earlier ones)."""
        return sum(n for n, _ in self.samples.values())

    def pass_at_k(self, ks: Sequence[int] = (1, 4, 8, 16, 32)) -> dict[int, float]:
        """Mean pass@k over the output's problems, for each ``k`` that some problem has samples for
        (a problem with fewer than ``k`` samples is left out of that ``k``)."""
        out = {}
        for k in ks:
            vals = [pass_at_k(n, c, k) for n, c in self.samples.values() if n >= k]
            if vals:
                out[k] = sum(vals) / len(vals)
        return out

    def lines(self) -> list[str]:
        """What ``prmkit generate`` prints: the counts, then pass@k."""
        n = max((n for n, _ in self.samples.values()), default=0)
        return [f"{self.out}: {self.traces} traces for {self.problems} problems "
                f"({self.skipped_done} already done, {self.generated} generated"
                + (f", {self.dropped_partial} partial lines redone" if self.dropped_partial else "")
                + f"); {self.tokens} new tokens; finish {dict(self.finish)}",
                "  ".join(f"pass@{k} {v:.1%}" for k, v in self.pass_at_k([k for k in (1, 4, 8, 16, 32)
                                                                          if k <= n]).items())]


def completion_to_trace(problem: Problem, completion: Completion, *, trace_id: str, source: str,
                        splitter: str = "newline", label: bool = True,
                        meta: dict[str, Any] | None = None,
                        provenance: GenerateProvenance | tuple[str, dict[str, Any]] | None = None
                        ) -> Trace:
    """One trace from one completion: steps cut by ``splitter`` (spans into the completion text), the
    final answer extracted, the outcome checked against ``problem.answer``, symbolic step labels.
    ``provenance``: the generate entry to record (or ``(policy name, args)``, as before)."""
    text = completion.text
    steps = get_splitter(splitter).split(text)
    answer = extract_answer(text)
    if problem.answer is None:
        outcome = "unknown"
    else:
        outcome = "correct" if answer is not None and answers_equal(answer, problem.answer) else "incorrect"
    trace = Trace(id=trace_id, problem=problem, steps=steps, final_answer=answer, outcome=outcome,
                  source=source, text=text,
                  meta={"generation": {"finish_reason": completion.finish_reason,
                                       "num_tokens": completion.num_tokens,
                                       "prompt_tokens": completion.prompt_tokens,
                                       **(meta or {})}})
    if isinstance(provenance, GenerateProvenance):
        trace.add_provenance(provenance)
    elif provenance is not None:
        trace.add_provenance("generate", *provenance)
    if label and steps:
        # strict_path: measured on the hand-labelled fixture, it finds wrong operations too
        # (F1 0.83 against 0.69); it only applies where the true intermediate values are known.
        SymbolicChecker.for_problem(problem, strict_path=True).label(trace)
    return trace


def _existing(path: Path, n: int) -> tuple[set[str], int, dict[str, list[int]]]:
    """Problem ids already complete in ``path``; rewrite the file without partial problems or a torn
    last line (an interrupted write), which are regenerated. Returns ``(done ids, dropped lines,
    [samples, correct] per done problem)``."""
    if not path.exists():
        return set(), 0, {}
    errors: list[FormatError] = []
    rows: list[tuple[int, dict[str, Any]]] = list(iter_json_records(path, container="jsonl",
                                                                    errors=errors))
    total_lines = sum(1 for _ in open(path, "rb"))
    # Only the very last line may be torn; anything else is a corrupt file we must not paper over.
    bad = [e for e in errors if e.line != total_lines]
    if bad:
        raise PrmkitError(f"cannot resume: {bad[0]} (fix or remove the file, or pass --overwrite)")
    per_problem: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for line, obj in rows:
        pid = obj.get("meta", {}).get("generation", {}).get("problem_id") if isinstance(obj, dict) else None
        if pid is None:
            raise PrmkitError(f"cannot resume: {path}:{line} was not written by prmkit generate")
        per_problem.setdefault(pid, []).append((line, obj))
    done = {pid for pid, rs in per_problem.items() if len(rs) >= n}
    keep = [obj for pid in per_problem if pid in done for _, obj in per_problem[pid]]
    dropped = len(rows) - len(keep) + len(errors)
    if dropped:  # the caller holds the output's lock
        with durable_file(path, lock=False) as tmp, open_text(tmp, "w") as f:
            for obj in keep:
                write_jsonl_line(f, obj)
    samples = {pid: [len(per_problem[pid]), sum(obj.get("outcome") == "correct" for _, obj in per_problem[pid])]
               for pid in per_problem if pid in done}
    return done, dropped, samples


def sample_traces(problems: Sequence[Problem], policy: Policy, out: str | os.PathLike, *,
                  params: SamplingParams, prompts: PromptBuilder, problems_per_call: int = 4,
                  splitter: str = "newline", label: bool = True, overwrite: bool = False,
                  progress: bool = True, on_problem: Callable[[Problem, list[Trace]], None] | None = None
                  ) -> SampleReport:
    """Sample ``params.n`` traces per problem with ``policy`` and append them to ``out`` (JSONL).

    Problems already complete in ``out`` are skipped (resume); ``overwrite`` starts afresh. Each
    trace's provenance records the policy, sampling parameters, seed and prompt.

    Problems go to the policy in fixed chunks of ``problems_per_call`` (by position in ``problems``),
    and a chunk with any problem left is asked for whole, only its missing problems written: the
    requests of every call are then the same in a resumed run as in an uninterrupted one, which is
    what a backend that is deterministic per call but not batch invariant (``ct2``) needs for a
    resumed run to reproduce an uninterrupted one exactly.
    """
    out = Path(out)
    # ``out`` is appended to as samples come (it is the resume state), so it is locked for the run:
    # a second run writing it is refused instead of interleaving lines.
    with output_lock(out):
        return _sample_into(problems, policy, out, params=params, prompts=prompts,
                            problems_per_call=problems_per_call, splitter=splitter, label=label,
                            overwrite=overwrite, progress=progress, on_problem=on_problem)


def _sample_into(problems: Sequence[Problem], policy: Policy, out: Path, *, params: SamplingParams,
                 prompts: PromptBuilder, problems_per_call: int, splitter: str, label: bool,
                 overwrite: bool, progress: bool,
                 on_problem: Callable[[Problem, list[Trace]], None] | None) -> SampleReport:
    if overwrite and out.exists():
        out.unlink()
    done, dropped, samples = _existing(out, params.n)
    report = SampleReport(problems=len(problems), dropped_partial=dropped, samples=samples, out=str(out))
    chunks = [list(problems[i:i + problems_per_call]) for i in range(0, len(problems), problems_per_call)]
    chunks = [c for c in chunks if any(_pid(p) not in done for p in c)]
    todo = sum(_pid(p) not in done for c in chunks for p in c)
    report.skipped_done = len(problems) - todo
    prov = GenerateProvenance(policy.name, policy=PolicyRef.from_dict(policy.describe()),
                              sampling=params.to_dict(), prompt=prompts.describe(), splitter=splitter)
    with progress_bar(todo, "problems", enabled=progress, transient=False) as advance, \
            TraceWriter(out, append=True) as w:
        for chunk in chunks:
            new = sum(_pid(p) not in done for p in chunk)
            with advance.inflight(new):  # the backend reports its rows and tokens as it goes
                results = policy.generate([prompts.request(p, key=_pid(p)) for p in chunk], params)
            for p, comps in zip(chunk, results, strict=True):
                if _pid(p) in done:
                    continue
                traces = []
                for k, c in enumerate(comps):
                    t = completion_to_trace(p, c, trace_id=f"{_pid(p)}#{k}",
                                            source=policy.model_id, splitter=splitter,
                                            label=label, meta={"problem_id": _pid(p), "sample": k},
                                            provenance=prov)
                    w.write(t)
                    traces.append(t)
                    report.generated += 1
                    report.correct += t.outcome == "correct"
                    report.tokens += c.num_tokens
                    report.finish[c.finish_reason] += 1
                report.samples[_pid(p)] = [len(traces), sum(t.outcome == "correct" for t in traces)]
                if on_problem:
                    on_problem(p, traces)
            advance(new)  # the chunk's problems together: a line never counts one of them alone
    return report


def _pid(p: Problem) -> str:
    return p.id or p.text[:64]


def problems_from_file(path: str | os.PathLike, fmt: str | None = None, *, limit: int | None = None,
                       skip_invalid: bool = False) -> list[Problem]:
    """Problems (with reference answers) from a dataset file in any format, e.g. GSM8K or MATH-500.
    A problem's id is its record's trace id (``test.jsonl:17`` for GSM8K, ``unique_id`` for MATH)."""
    out: list[Problem] = []
    for t in read(path, fmt, skip_invalid=skip_invalid):
        if t.problem.answer is None:
            raise PrmkitError(f"{path}: problem {t.id} has no reference answer")
        p = Problem(t.problem.text, answer=t.problem.answer, solution=t.problem.solution,
                    id=t.problem.id or t.id, meta=dict(t.problem.meta))
        out.append(p)
        if limit is not None and len(out) >= limit:
            break
    return out

