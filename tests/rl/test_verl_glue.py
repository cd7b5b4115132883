"""verl glue (``prmkit/rl/_verl.py``) under verl's calling patterns, issue 48: the reward object is built
once however many threads ask at once (it was built on each of 16 threads, and ``stats`` counted 13 of
32 calls), a solution without a problem is warned about once and counted, the batch variant answers a
whole batch in one scorer call, and the dense reward manager puts each step's reward on the response
token that ends the step.

The ``DataProto`` test needs verl, which does not install with its dependencies on this CPU machine
(ray, vLLM-era pins); ``pip install --no-deps verl tensordict pyvers codetiming omegaconf`` into a
folder on ``PYTHONPATH`` is enough to import ``verl.DataProto`` (verl 0.9.1, tensordict 0.10.0), and
the test skips where verl cannot be imported. The same manager is also run on a plain object with
DataProto's two mappings (``batch``, ``non_tensor_batch``), which is all it reads.
"""

from __future__ import annotations

import logging
import threading
import time
import types

import pytest

import prmkit.rl._verl as verl_glue
from prmkit.rl import DenseStepReward, PRMReward
from prmkit.search import ScriptedScorer

SCORES = {"3 + 5 = 8.": 0.75, "The answer is 8.": 0.5}


class Recording(ScriptedScorer):
    """A scripted scorer that also records each call's problems."""

    def __init__(self, scores):
        super().__init__(scores)
        self.problems: list[list[str]] = []

    def score(self, traces):
        self.problems.append([t.problem.text for t in traces])
        return super().score(traces)


@pytest.fixture()
def fresh(monkeypatch):
    monkeypatch.setattr(verl_glue, "_REWARD", None)
    monkeypatch.setattr(verl_glue, "_WARNED", False)
    monkeypatch.setattr(verl_glue, "_DENSE", {})
    monkeypatch.setenv("PRMKIT_REWARD_URL", "http://127.0.0.1:9")


def test_sixteen_threads_build_one_reward_object_and_count_every_call(fresh, monkeypatch):
    import prmkit.scoring

    built = []

    def slow_scorer(name, **kw):  # the build takes a while, as a /health round trip does
        built.append(kw["url"])
        time.sleep(0.05)
        return ScriptedScorer(SCORES)

    monkeypatch.setattr(prmkit.scoring, "get_scorer", slow_scorer)
    start = threading.Barrier(16)
    got = []

    def worker():
        start.wait()
        for _ in range(2):
            got.append(verl_glue.compute_score("arith", "3 + 5 = 8.\nThe answer is 8.", "8", {"question": "3+5?"}))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    assert len(got) == 32 and {g["score"] for g in got} == {0.5}
    assert verl_glue.reward_function().stats["completions"] == 32


def test_a_solution_without_a_problem_is_warned_once_and_counted(fresh, monkeypatch, caplog):
    monkeypatch.setattr(verl_glue, "_REWARD", PRMReward(ScriptedScorer(SCORES)))
    with caplog.at_level(logging.WARNING, logger="prmkit.rl"):
        a = verl_glue.compute_score("MATH", "3 + 5 = 8.", "8", {"index": 0, "split": "train"})  # MATH's extra_info
        b = verl_glue.compute_score("MATH", "3 + 5 = 8.", "8", None)
        c = verl_glue.compute_score("MATH", "3 + 5 = 8.", "8", {"question": "3+5?"})
    assert [x["prm_no_problem"] for x in (a, b, c)] == [1.0, 1.0, 0.0]
    assert sum("without a problem" in r.getMessage() for r in caplog.records) == 1
    assert verl_glue.reward_function().stats["no_problem"] == 2


def test_batch_variant_scores_the_batch_in_one_call(fresh, monkeypatch):
    scorer = Recording(SCORES)
    monkeypatch.setattr(verl_glue, "_REWARD", PRMReward(scorer))
    got = verl_glue.compute_score_batch(
        ["arith"] * 3, ["3 + 5 = 8.\nThe answer is 8.", "3 + 5 = 8.", "  "], ["8"] * 3,
        [{"question": "3+5?"}, {"prompt": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "3+5?"}]}, {"problem": "3+5?"}])
    assert [g["score"] for g in got] == [0.5, 0.75, 0.0]
    assert [g["prm_unscored"] for g in got] == [0.0, 0.0, 1.0]
    assert [g["prm_no_problem"] for g in got] == [0.0, 0.0, 0.0]
    assert scorer.problems == [["3+5?", "3+5?"]]  # one call; the blank solution never sent


# -- dense step rewards on a DataProto -----------------------------------------------------------------
PROMPT = "<|im_start|>user\n3+5?<|im_end|>\n<|im_start|>assistant\n"
RESPONSES = ["3 + 5 = 8.\nThe answer is 8.<|im_end|>", "The answer is 8."]


def _tensors(tok):
    """verl's layout: prompts left-padded, responses right-padded, one attention mask over both."""
    import torch

    p = tok(PROMPT, add_special_tokens=False)["input_ids"]
    rs = [tok(r, add_special_tokens=False)["input_ids"] for r in RESPONSES]
    width = max(map(len, rs)) + 3
    prompts = torch.tensor([[tok.pad_token_id] * 2 + p] * 2)
    responses = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rs])
    mask = torch.tensor([[0] * 2 + [1] * len(p) + [1] * len(r) + [0] * (width - len(r)) for r in rs])
    return {"prompts": prompts, "responses": responses, "attention_mask": mask}, [len(r) for r in rs]


def _check(out, lengths, tok):
    # Response 0 (characters, then <|im_end|> as one token): step 0 ends at token 9 ('.'), step 1 at 26.
    assert [(k, v) for k, v in enumerate(out[0].tolist()) if v] == [(9, 0.75), (26, 0.5)]
    assert lengths[0] == 28 and out[0, 27].item() == 0.0  # the end token carries nothing
    assert [(k, v) for k, v in enumerate(out[1].tolist()) if v] == [(15, 0.5)]


def _manager(tok, scorer):
    return verl_glue.PRMDenseRewardManager(None, tok, reward=DenseStepReward(scorer, tok))


def test_dense_manager_on_a_stand_in_with_dataprotos_mappings(fresh):
    pytest.importorskip("torch")
    from prmkit.models import build_char_tokenizer

    tok = build_char_tokenizer()
    batch, lengths = _tensors(tok)
    data = types.SimpleNamespace(batch=batch, non_tensor_batch={"extra_info": [{}, {"question": "3+5?"}]})
    scorer = Recording(SCORES)
    got = _manager(tok, scorer)(data, return_dict=True)
    _check(got["reward_tensor"], lengths, tok)
    # No question in sample 0's extra_info: the prompt's last user turn is its problem.
    assert scorer.problems == [["3+5?", "3+5?"]]


def test_dense_manager_on_a_verl_dataproto(fresh):
    verl = pytest.importorskip("verl", reason="verl is not installed (it does not install with its "
                               "dependencies on this CPU machine; see the module docs)")
    import asyncio

    import numpy as np

    from prmkit.models import build_char_tokenizer

    tok = build_char_tokenizer()
    tensors, lengths = _tensors(tok)
    data = verl.DataProto.from_dict(tensors=tensors, non_tensors={
        "extra_info": np.array([{"question": "3+5?"}, {}], dtype=object),
        "data_source": np.array(["arith", "arith"], dtype=object)})
    manager = _manager(tok, ScriptedScorer(SCORES))
    _check(manager(data), lengths, tok)
    # The reward loop's way: one sample at a time, then assembled on the batch.
    singles = [asyncio.run(manager.run_single(data[i:i + 1])) for i in range(len(data))]
    _check(manager.assemble_rm_scores(data, [s["reward_score"] for s in singles]), lengths, tok)
