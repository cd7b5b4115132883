"""Small learnable trace sets for the trainer tests, and a private prmkit cache for the ``tiny`` backbone.

The marker data: short additions, one equation per step; a step is labelled -1 exactly when it ends
with the marker ``wrong`` (its equation is also false, e.g. ``2+2=5 wrong``), +1 otherwise. A trace's
``outcome`` is ``correct`` exactly when none of its steps is wrong. The marker sits right before the
step's newline (the label position of the ``prmkit`` convention), so a 2-layer model learns it in a few
dozen optimizer steps. The soft variant carries the same verdicts as ``mc_soft`` probabilities.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("yaml")

from prmkit.trace import Problem, Step, StepLabel, Trace, write_traces  # noqa: E402

MARKER = "wrong"
#: Soft label values of right / wrong steps (cycled): Monte Carlo estimates from 10 rollouts.
SOFT_RIGHT = (1.0, 0.9, 0.8, 0.7)
SOFT_WRONG = (0.0, 0.1, 0.2, 0.3)


def marker_traces(n: int, *, seed: int, prefix: str = "t", soft: bool = False) -> list[Trace]:
    """``n`` traces of 2-4 steps; about a third of the steps are wrong (marked), every trace differs.

    Problem ids are unique per trace, so ``eval_fraction`` splits traces (not whole sets) apart.
    """
    rng = random.Random(seed)
    out = []
    for k in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        steps = []
        total = a
        n_steps = rng.randint(2, 4)
        # every trace has at least one right and (for two thirds of them) one wrong step
        wrong_at = {rng.randrange(n_steps)} if k % 3 else set()
        for i in range(n_steps):
            c = b if i == 0 else rng.randint(1, 9)
            right = i not in wrong_at
            result = total + c if right else total + c + rng.randint(1, 3)
            text = f"{total}+{c}={result}" + ("" if right else f" {MARKER}")
            total = total + c
            if soft:
                values = SOFT_RIGHT if right else SOFT_WRONG
                label = StepLabel(values[(k + i) % 4], source="mc_soft", kind="soft", rollouts=10)
            else:
                label = StepLabel(1 if right else -1, source="human")
            steps.append(Step(text, labels=[label]))
        out.append(Trace(id=f"{prefix}{k}", problem=Problem(f"{a}+{b}+...?", id=f"{prefix}-p{k}"),
                         steps=steps, outcome="correct" if not wrong_at else "incorrect"))
    return out


@pytest.fixture(scope="session", autouse=True)
def prmkit_cache(tmp_path_factory):
    """Every test here builds and caches the ``tiny`` backbone in its own folder, never the user's."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("prmkit-cache")
    mp.setenv("PRMKIT_CACHE", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="session")
def marker_files(tmp_path_factory) -> dict[str, Path]:
    """JSONL files: ``train`` (48 traces), ``eval`` (24 held-out traces), ``soft`` (48, mc_soft labels),
    ``four`` (the first 4 training traces)."""
    folder = tmp_path_factory.mktemp("marker-data")
    train = marker_traces(48, seed=1)
    files = {"train": folder / "train.jsonl", "eval": folder / "eval.jsonl",
             "soft": folder / "soft.jsonl", "four": folder / "four.jsonl"}
    write_traces(train, files["train"])
    write_traces(marker_traces(24, seed=2, prefix="e"), files["eval"])
    write_traces(marker_traces(48, seed=1, soft=True), files["soft"])
    write_traces(train[:4], files["four"])
    return files
