"""Checks of prmkit's decode loop shared by the CPU and GPU tests of the torch backend. Importable
because ``tests/conftest.py`` puts this folder on ``sys.path``."""

from __future__ import annotations


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
