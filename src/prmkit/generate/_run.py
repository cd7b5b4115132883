"""The ``prmkit generate`` stage, file-level: problems from the built-in environment or a dataset,
the prompts the policy expects, and :func:`~prmkit.generate.sample_traces` into a resumable file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder
from prmkit.errors import PrmkitError
from prmkit.generate._hints import HINT_ARMS, hinted_problems
from prmkit.generate._sampling import SampleReport, problems_from_file, sample_traces
from prmkit.policies import Policy, SamplingParams
from prmkit.trace import Problem

__all__ = ["ENVS", "load_problems", "parse_steps", "generate_file"]

#: Built-in problem sources (``--env``).
ENVS = {"arith": "procedural multi-step arithmetic word problems with known intermediate values"}


def parse_steps(steps: str) -> int | tuple[int, int]:
    """``"3"`` -> 3, ``"2-4"`` -> (2, 4): operations per arith problem."""
    lo, _, hi = steps.partition("-")
    try:
        return int(lo) if not hi else (int(lo), int(hi))
    except ValueError:
        raise PrmkitError(f"steps must be N or MIN-MAX, got {steps!r}") from None


def load_problems(*, env: str | None = None, data: str | os.PathLike | None = None,
                  data_format: str | None = None, n: int = 50, start: int = 0, steps: str = "3",
                  ops: str = "+-*", max_operand: int = 20, distractors: int = 0, env_seed: int = 0,
                  hints: Sequence[str] | None = None, hint_seed: int = 0
                  ) -> tuple[list[Problem], ArithConfig | None]:
    """``(problems, arith config or None)``: problems ``start .. start+n-1`` of the built-in
    environment ``env`` (``arith``, with its difficulty settings) or of the dataset file ``data``
    (any format with reference answers; ``data_format`` detected when None). Exactly one of the two.

    ``hints`` (arms of :data:`HINT_ARMS`: ``none``, ``right``, ``wrong``) asks each problem
    once per arm, with "A teacher says the answer is N." appended (:func:`hinted_problems`,
    wrong values drawn by ``hint_seed``), for the ``faithfulness`` probe; problems without a reference
    answer cannot be hinted and are refused."""
    if (env is None) == (data is None):
        raise PrmkitError("give exactly one of --env arith or --data PATH")
    if env is not None:
        if env not in ENVS:
            raise PrmkitError(f"unknown environment {env!r}; built in: {', '.join(ENVS)}")
        cfg: ArithConfig | None = ArithConfig(steps=parse_steps(steps), ops=tuple(ops), max_operand=max_operand,
                                              distractors=distractors, seed=env_seed)
        problems = ArithEnv(cfg).problems(n, start=start)
    else:
        path = Path(data)  # type: ignore[arg-type]
        if not path.exists():
            raise PrmkitError(f"{path}: no such file")
        problems, cfg = problems_from_file(path, data_format, limit=start + n)[start:], None
    if hints:
        problems = _hinted(problems, hints, hint_seed)
    return problems, cfg


def _hinted(problems: list[Problem], arms: Sequence[str], seed: int) -> list[Problem]:
    unknown = [a for a in arms if a not in HINT_ARMS]
    if unknown or len(set(arms)) != len(arms):
        raise PrmkitError(f"hint arms must be distinct names among {', '.join(HINT_ARMS)}; got {', '.join(arms)}")
    unanswered = [p.id or p.text[:40] for p in problems if p.answer is None]
    if unanswered:
        raise PrmkitError(f"{len(unanswered)} problem(s) have no reference answer to hint at "
                          f"(first: {unanswered[0]!r})")
    return hinted_problems(problems, seed=seed, arms=arms)


def generate_file(out: str | os.PathLike, problems: list[Problem], policy: Policy, *,
                  params: SamplingParams, arith_config: ArithConfig | None = None,
                  source: str | None = None, shots: int | None = None, problems_per_call: int = 4,
                  label: bool = True, overwrite: bool = False, progress: bool = True) -> SampleReport:
    """Sample ``params.n`` traces per problem into ``out`` (appended, resumable), with the prompts
    ``policy`` expects (:meth:`PromptBuilder.for_policy`: the arith environment's worked examples
    when ``arith_config`` is given, else ``source``'s), steps split, answers and outcomes checked,
    symbolic step labels unless ``label`` is False."""
    prompts = PromptBuilder.for_policy(policy, config=arith_config, source=source, shots=shots)
    return sample_traces(problems, policy, out, params=params, prompts=prompts,
                         problems_per_call=problems_per_call, label=label, overwrite=overwrite,
                         progress=progress)
