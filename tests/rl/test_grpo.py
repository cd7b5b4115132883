"""``prmkit rl`` (prmkit.rl.rl_train): the advantage rules and the clipped loss against hand computations,
one optimisation step on a tiny causal LM, the rewards of scripted completions on arith, config errors."""

from __future__ import annotations

import math

import pytest

from prmkit.errors import PrmkitError
from prmkit.rl import clipped_token_loss, dense_advantages, group_advantages, load_rl_config

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

EPS = 1e-4  # prmkit.rl._advantages.EPS: added to the std


# -- advantages: 2-sample groups, derived by hand -----------------------------------------------------

def test_grpo_advantages_are_the_group_normalised_rewards():
    # mean 0.5, population std 0.5
    assert group_advantages([1.0, 0.0]) == pytest.approx([0.5 / (0.5 + EPS), -0.5 / (0.5 + EPS)])
    assert group_advantages([1.0, 0.0], scale=False) == [0.5, -0.5]
    assert group_advantages([0.3, 0.3]) == [0.0, 0.0]  # no signal, not NaN


def test_rloo_advantages_subtract_the_mean_of_the_others():
    assert group_advantages([1.0, 0.0], baseline="rloo") == [1.0, -1.0]
    assert group_advantages([1.0, 0.0, 0.5], baseline="rloo") == [0.75, -0.75, 0.0]


def test_dense_advantages_follow_deepseekmath_process_supervision():
    # Completion 0: steps end at tokens 1 and 3 (4 tokens), rewards 1, 1; completion 1: steps end at
    # tokens 0 and 2 (3 tokens), rewards 0, 1. All four step rewards: mean 3/4, std sqrt(3)/4, so a 1
    # normalises to 1/sqrt(3) and a 0 to -sqrt(3). A token's advantage: its step's and the later steps'.
    adv = dense_advantages([[1.0, 1.0], [0.0, 1.0]], [[1, 3], [0, 2]], [4, 3])
    one, zero = 1 / math.sqrt(3), -math.sqrt(3)
    assert adv[0] == pytest.approx([2 * one, 2 * one, one, one], rel=1e-3)
    assert adv[1] == pytest.approx([zero + one, one, one], rel=1e-3)


def test_dense_advantages_give_tokens_after_the_last_step_nothing():
    adv = dense_advantages([[1.0], [0.0]], [[0], [1]], [3, 3])
    assert adv[0][1:] == [0.0, 0.0] and adv[1][2] == 0.0
    with pytest.raises(PrmkitError, match="outside completion 0"):
        dense_advantages([[1.0], [0.0]], [[5], [1]], [3, 3])


# -- the clipped objective ---------------------------------------------------------------------------

def test_clipped_loss_equals_a_hand_computation():
    logp = torch.tensor([[0.0, -1.0], [-0.2, 0.0]])
    old = torch.tensor([[-0.5, -0.5], [-0.2, 0.0]])
    adv = torch.tensor([[1.0, -1.0], [2.0, 2.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss, stats = clipped_token_loss(logp, old, adv, mask, clip_eps=0.2)
    # completion 0: ratio e^0.5 with A=+1 is clipped to 1.2 -> -1.2; ratio e^-0.5 with A=-1:
    # min(-0.607, -0.8) = -0.8 -> +0.8; mean -0.2. Completion 1: its one real token, ratio 1 -> -2.
    assert float(loss) == pytest.approx(((-1.2 + 0.8) / 2 + -2.0) / 2)
    assert stats["clip_frac"] == pytest.approx(2 / 3)  # both tokens of completion 0, of 3 real tokens
    # k3 KL to a reference 0.1 below the policy on every token: e^-0.1 + 0.1 - 1 per token
    ref = logp - 0.1
    k3 = math.exp(-0.1) + 0.1 - 1
    loss_kl, stats = clipped_token_loss(logp, old, adv, mask, clip_eps=0.2, ref_logp=ref, kl_coef=0.5)
    assert stats["kl"] == pytest.approx(k3, rel=1e-5)
    assert float(loss_kl) == pytest.approx(float(loss) + 0.5 * k3, rel=1e-5)


# -- one optimisation step on a tiny causal LM ---------------------------------------------------------

def _tiny_lm(vocab: int = 40):
    import transformers as T
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    cfg = T.Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    lm = get_peft_model(T.Qwen2ForCausalLM(cfg), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                         task_type="CAUSAL_LM"))
    # LoRA's B starts at zero; move it off zero so both LoRA matrices get gradients from step one
    for n, p in lm.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.02)
    return lm


def test_one_step_raises_the_rewarded_completion_and_lowers_the_other():
    from prmkit.rl._grpo import completion_logprobs, sample_group

    lm = _tiny_lm()
    prompt = [1, 2, 3, 4]
    completions = sample_group(lm, prompt, 2, max_new_tokens=5, temperature=1.0, eos={0}, seed=3)
    assert completions == sample_group(lm, prompt, 2, max_new_tokens=5, temperature=1.0, eos={0}, seed=3)
    assert completions[0] != completions[1]
    adv_seq = group_advantages([1.0, 0.0])  # the first is rewarded
    opt = torch.optim.AdamW([p for p in lm.parameters() if p.requires_grad], lr=1e-2)
    with torch.no_grad():
        before, mask = completion_logprobs(lm, prompt, completions, pad=0)
    width = mask.shape[1]
    adv = torch.tensor([[a] * width for a in adv_seq])
    logp, mask = completion_logprobs(lm, prompt, completions, pad=0)
    loss, _ = clipped_token_loss(logp, logp.detach(), adv, mask)
    loss.backward()
    opt.step()
    with torch.no_grad():
        after, _ = completion_logprobs(lm, prompt, completions, pad=0)
    total = lambda lp, g: float((lp[g] * mask[g]).sum())  # noqa: E731
    assert total(after, 0) > total(before, 0)
    assert total(after, 1) < total(before, 1)


# -- rewards of scripted completions on arith ---------------------------------------------------------

def test_scripted_completions_get_outcome_oracle_and_prm_rewards_on_their_step_tokens(char_tokenizer):
    from prmkit.envs import ArithEnv
    from prmkit.rl import RLConfig
    from prmkit.rl._grpo import Group, _traces, group_token_advantages, score_group
    from prmkit.search import ScriptedScorer

    problem = ArithEnv(steps=1, seed=0).problem(0)
    op = problem.meta["arith"]["ops"][0]
    right = f"{op['before']} {op['op']} {op['operand']} = {op['after']}.\nThe answer is {op['after']}."
    wrong = f"{op['before']} {op['op']} {op['operand']} = {op['after'] + 1}.\nThe answer is {op['after'] + 1}."
    tok = char_tokenizer
    tokens = [tok(t, add_special_tokens=False)["input_ids"] for t in (right, wrong)]
    group = Group(problem, [0], tokens)
    _traces(group, tok, "newline", "t")
    assert group.step_ends == [[right.index("\n") - 1, len(right) - 1], [wrong.index("\n") - 1, len(wrong) - 1]]
    scorer = ScriptedScorer({right.splitlines()[0]: 0.9}, default=0.2)
    cfg = RLConfig(rewards={"outcome": 1.0, "oracle": 1.0, "prm": 0.0, "prm_dense": 0.0, "pav": 0.0},
                   scorer="scripted")
    score_group(group, cfg, scorer)
    assert group.scalar["outcome"] == [1.0, 0.0]
    assert group.dense["oracle"] == [[1.0, 1.0], [0.0, 1.0]]  # the wrong answer follows from its step
    assert group.scalar["prm"] == [0.2, 0.2]  # min over steps
    assert group.dense["prm_dense"] == [[0.9, 0.2], [0.2, 0.2]]
    # PAV: Q(empty prefix) is the group's mean outcome, 0.5
    assert [pytest.approx(r) for r in group.dense["pav"]] == [[0.4, -0.7], [-0.3, 0.0]]
    adv = group_token_advantages(group, cfg)
    outcome = group_advantages([1.0, 0.0])
    dense = dense_advantages(group.dense["oracle"], group.step_ends, [len(t) for t in tokens])
    for g in range(2):
        assert adv[g] == pytest.approx([outcome[g] + d for d in dense[g]])


def test_a_step_that_claims_nothing_earns_no_oracle_reward_unless_claimless_is_valid(char_tokenizer):
    # the gaming run of docs/rl.md: a policy wrote lines of dots, which the checker passes (no_claim)
    from prmkit.envs import ArithEnv
    from prmkit.rl import RLConfig
    from prmkit.rl._grpo import Group, _traces, score_group

    problem = ArithEnv(steps=1, seed=0).problem(0)
    op = problem.meta["arith"]["ops"][0]
    text = f"........\n{op['before']} {op['op']} {op['operand']} = {op['after']}.\nThe answer is {op['after']}."
    tok = char_tokenizer
    rewards = {}
    for claimless in ("invalid", "valid"):
        group = Group(problem, [0], [tok(text, add_special_tokens=False)["input_ids"]] * 2)
        _traces(group, tok, "newline", "t")
        assert [s.labels[-1].meta["verdict"] for s in group.traces[0].steps][0] == "no_claim"
        score_group(group, RLConfig(rewards={"outcome": 1.0, "oracle": 1.0}, claimless=claimless))
        rewards[claimless] = group.dense["oracle"][0]
    assert rewards == {"invalid": [0.0, 1.0, 1.0], "valid": [1.0, 1.0, 1.0]}
    with pytest.raises(PrmkitError, match="field 'claimless'"):
        RLConfig(claimless="maybe").validate()


# -- the config ----------------------------------------------------------------------------------------

def test_config_errors_name_the_file_and_every_bad_field(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text("group_size: 1\nrewards: {outcome: 1.0, vibes: 2}\nlearning_rat: 0.1\nsteps: many\n")
    with pytest.raises(PrmkitError) as e:
        load_rl_config(path)
    msg = str(e.value)
    assert msg.startswith(str(path))
    assert "line 3: unknown field 'learning_rat'" in msg and "line 4: field 'steps': expected an integer" in msg
    path.write_text("group_size: 1\nrewards: {outcome: 1.0, vibes: 2}\nbaseline: ppo\nenv: {steps: 9}\n")
    with pytest.raises(PrmkitError) as e:
        load_rl_config(path)
    msg = str(e.value)
    assert "line 1: field 'group_size'" in msg and "line 2: field 'rewards': unknown component(s) vibes" in msg
    assert "line 3: field 'baseline'" in msg
    path.write_text("rewards: {outcome: 1.0}\nenv: {steps: 9}\n")
    with pytest.raises(PrmkitError, match="field 'env'.*steps must lie within"):
        load_rl_config(path)
    path.write_text("rewards: {outcome: 1.0\n")
    with pytest.raises(PrmkitError, match=r"rl.yaml:2"):
        load_rl_config(path)


def test_the_shipped_example_config_loads():
    from importlib.resources import files

    for f in files("prmkit.rl").joinpath("configs").iterdir():
        if f.name.endswith(".yaml"):
            assert load_rl_config(str(f)).steps >= 1
