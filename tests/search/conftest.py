"""A scripted policy that walks a hand-written tree of steps, and the problem the tests search on."""

from __future__ import annotations

from collections import Counter

import pytest

from prmkit.envs import PromptBuilder
from prmkit.policies import ScriptedPolicy
from prmkit.trace import Problem


class TreePolicy(ScriptedPolicy):
    """``tree`` maps a prefix (the steps so far, each followed by a newline) to its possible next
    steps; every request for a prefix takes the next of them in turn (cycling). Records ``(key, n)``
    of every request, so tests can check how the budget was spent."""

    def __init__(self, tree: dict[str, list[str]]) -> None:
        self.tree = tree
        self.taken: Counter[str] = Counter()
        self.calls: list[list[tuple[str, str, int]]] = []
        super().__init__(self._child, model_id="tree")

    def _child(self, request, index: int) -> str:
        options = self.tree[request.prefix]
        k = self.taken[request.prefix]
        self.taken[request.prefix] += 1
        return options[k % len(options)]

    def generate(self, requests, params):
        self.calls.append([(r.key, r.prefix, params.n) for r in requests])
        return super().generate(requests, params)


@pytest.fixture()
def problem() -> Problem:
    return Problem("q", answer="6", id="p")


@pytest.fixture()
def prompts() -> PromptBuilder:
    return PromptBuilder("dataset", shots=0)


@pytest.fixture()
def tree_policy():
    """The :class:`TreePolicy` class (tests build one per tree)."""
    return TreePolicy


@pytest.fixture(scope="session")
def tiny_prm_dir(tmp_path_factory):
    """A saved PRM on the ``tiny`` backbone with a zeroed head (every step scores exactly 0.5),
    built in a private prmkit cache."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    mp = pytest.MonkeyPatch()
    mp.setenv("PRMKIT_CACHE", str(tmp_path_factory.mktemp("prmkit-cache")))
    from prmkit.models import RewardModel

    path = tmp_path_factory.mktemp("tiny-prm")
    RewardModel.from_backbone("tiny", head_init="zero").save_pretrained(path)
    yield path
    mp.undo()
