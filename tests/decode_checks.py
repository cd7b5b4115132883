"""Models, requests and checks of prmkit's decode loop shared by the CPU and GPU tests of the torch
backend. Importable because ``tests/conftest.py`` puts this folder on ``sys.path``."""

from __future__ import annotations

from prmkit.policies import GenerationRequest


def req(text, key, prefix=""):
    return GenerationRequest([{"role": "user", "content": text}], prefix=prefix, key=key)


# Prompts of different lengths (left padding), one with a prefix to continue.
REQS = [req("Tom has 3 apples.", "a"), req("She gives away 4: 12 - 4 =", "b", prefix="Step 1:"),
        req("2 * 3", "c")]


def rows(out):
    """What a policy's completions say, comparable with ``==``."""
    return [[(c.text, c.finish_reason, c.num_tokens, c.prompt_tokens) for c in row] for row in out]


def wide_copy(folder, out, model_cls=None, config_cls=None, **extra):
    """A copy of the tiny model in ``folder`` (a Llama unless ``model_cls`` / ``config_cls`` say
    otherwise) with wide random weights, seed 1, saved to ``out``: default-initialised ones give
    nearly flat logits, where greedy choices hang on rounding (which also differs between devices)."""
    import torch
    import transformers

    model_cls = model_cls or transformers.LlamaForCausalLM
    config_cls = config_cls or transformers.LlamaConfig
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    base = transformers.AutoConfig.from_pretrained(folder)
    cfg = config_cls(vocab_size=base.vocab_size, hidden_size=32, intermediate_size=64,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=512, eos_token_id=base.eos_token_id,
                     pad_token_id=base.pad_token_id, bos_token_id=base.bos_token_id,
                     tie_word_embeddings=True, initializer_range=0.3, **extra)
    torch.manual_seed(1)
    model_cls(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def step_logits_gap(policy, requests, *, n: int = 2, max_new_tokens: int = 6, seed: int = 2):
    """Decode ``requests`` with ``policy`` (a torch-backend policy) and compare each step's logits
    with a plain forward pass of ``policy.model`` over the prompt and the tokens so far.

    Returns ``(largest absolute difference, rows x steps compared, steps)``; each step's logits are
    also checked to be on the model's device.
    """
    import torch

    from prmkit.policies import SamplingParams

    plan = policy._plan
    dev = policy.model.device
    seen = []
    step = plan.step

    def spy(tokens, positions, kv, t, torch_):
        out = step(tokens, positions, kv, t, torch_)
        assert out.device == dev
        seen.append((tokens.tolist(), out.clone()))
        return out

    plan.step = spy
    try:
        policy.generate(requests, SamplingParams(n=n, max_new_tokens=max_new_tokens, temperature=1.0, seed=seed))
    finally:
        plan.step = step
    prompts = [policy._encode(r)[0] for r in requests for _ in range(n)]
    worst, compared = 0.0, 0
    for r, prompt in enumerate(prompts):
        fed = prompt[:-1]
        for tokens, logits in seen:
            fed = fed + [tokens[r]]
            with torch.no_grad():
                ref = policy.model(torch.tensor([fed], device=dev)).logits[0, -1]
            worst = max(worst, (logits[r] - ref).abs().max().item())
            compared += 1
    return worst, compared, len(seen)
