"""Policy SFT on a tiny local model: training data, a saved adapter the hf backend loads."""

from __future__ import annotations

import json

import pytest

from prmkit.envs import ArithConfig, ArithEnv
from prmkit.errors import PrmkitError
from prmkit.policies import SamplingParams, get_policy
from prmkit.train._policy_sft import SFT_SEED, PolicySFTConfig, sft_policy, training_examples

pytest.importorskip("trl")


def test_training_examples_are_reference_solutions():
    cfg = PolicySFTConfig(examples=6, distractors=(0, 1), steps=(2, 2))
    rows = training_examples(cfg)
    assert len(rows) == 6
    # Problems alternate between the two distractor settings, from seeds no evaluation uses.
    first = ArithEnv(ArithConfig(steps=(2, 2), ops=cfg.ops, seed=SFT_SEED)).problem(0)
    assert rows[0]["prompt"][-1]["content"] == first.text
    assert rows[0]["completion"] == [{"role": "assistant", "content": first.solution}]
    assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user"]  # zero-shot prompt
    assert "has" in rows[1]["prompt"][-1]["content"]


def test_config_errors_reported_together():
    with pytest.raises(PrmkitError) as e:
        sft_policy(PolicySFTConfig(examples=0, batch_size=0, steps=(0, 9)))
    assert "examples" in str(e.value) and "batch_size" in str(e.value) and "steps" in str(e.value)


@pytest.mark.slow
def test_sft_writes_an_adapter_the_policy_loads(tiny_lm, tmp_path):
    out = sft_policy(PolicySFTConfig(output_dir=str(tmp_path / "sft"), model=tiny_lm, examples=8,
                                     batch_size=4, lora_r=4, target_modules=["q_proj", "v_proj"],
                                     max_length=1024))  # the tiny tokenizer spends many tokens
    assert (out / "adapter_config.json").exists() and (out / "adapter_model.safetensors").exists()
    card = json.loads((out / "prmkit_sft.json").read_text())
    assert card["steps"] == 2 and card["train_loss"] > 0
    assert card["config"]["examples"] == 8 and card["command"].startswith("prmkit policy sft")
    pol = get_policy("hf", model=tiny_lm, adapter=str(out), progress=False)
    assert pol.model_id.endswith("+sft")
    base = get_policy("hf", model=tiny_lm, progress=False)
    # LoRA B starts at zero, so only a trained adapter changes the weights.
    changed = any((a - b).abs().max() > 0 for a, b in zip(pol.model.parameters(),
                                                          base.model.parameters(), strict=True))
    assert changed
    out_text = pol.generate([base_request()], SamplingParams(n=1, max_new_tokens=4, temperature=0))
    assert out_text[0][0].num_tokens >= 1


def base_request():
    from prmkit.policies import GenerationRequest

    return GenerationRequest([{"role": "user", "content": "Tom has 3 apples."}], key="x")
