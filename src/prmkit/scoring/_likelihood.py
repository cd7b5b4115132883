"""``likelihood``: a training-free step scorer, a causal LM's surprise at what each step wrote.

Each trace is read by a causal LM (by default the default policy: SmolLM2-135M-Instruct with the
shipped arith adapter) after the prompt the trace was generated with (its ``generate`` provenance,
else the default prompt: :func:`~prmkit.labelers.rollout_messages`). The log-probability the LM gives
every token it reads is reduced over each step's tokens — ``min`` (the step's most surprising token),
``mean`` (per-token), or ``result`` (the most surprising token of the values the step claims: numbers
after ``=`` or "answer is", :data:`RESULT`; a step that claims none gets None, no evidence either way)
— and the step's score is ``exp`` of it, a number in (0, 1]. ``margin`` reads the same values as
``result`` but measures each token against the LM's own first choice at that position
(``log p(written) - log p(most likely)``): 1.0 when the LM would have written that result itself, however
unsure it was, so a right result the LM finds hard is not scored like a slip.

Why it is here: it is the baseline a trained PRM has to beat besides outcome checking and voting. An
arithmetic slip such as ``72 - 15 = 49`` is a token the LM did not expect after ``72 - 15 =``; on real
SmolLM2 samples the log-probability of a step's *result* separates slips from right results with a
step AUROC of 0.967 (172 steps, ``benchmarks/result_surprise.py``). Reduced over all of a step's tokens the
signal is noisier (``min``: best-of-16 26.6% on 64 held-out ``arith`` problems, majority vote 34.4%);
``reduce="result"`` reads the claimed values alone: on 128 held-out problems x 16 it picked a right answer
for 36.9% with the trace's minimum (majority vote 36.0%, the shipped PRM 28.9%; step AUROC 0.890), which
``benchmarks/verifier.py --likelihood --likelihood-reduce result`` measures.
It is not a verifier of logic: a fluent wrong step the LM would have written itself scores high. Token
confidence of this kind is what DeepConf (Fu et al., 2025) filters traces with.

Scores do not depend on batching beyond float rounding: each trace is its own row, right-padded,
and the padding is masked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.trace import Trace

__all__ = ["LikelihoodScorer"]

REDUCTIONS = ("min", "mean", "result", "margin")
#: Reductions that read only the claimed values (:data:`RESULT`).
_RESULT_ONLY = ("result", "margin")

#: What ``reduce="result"`` reads: the value a step claims — a number after ``=`` or after "answer is"
#: (``72 - 15 = 49``, ``The answer is 94``). Group 1 is the number.
RESULT = re.compile(r"(?:=|\banswer is:?)\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)


def _results(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Character ranges of the claimed values (:data:`RESULT`) inside ``text[lo:hi]``."""
    return [(lo + m.start(1), lo + m.end(1)) for m in RESULT.finditer(text[lo:hi])]


def _step_spans(trace: Trace, start: int) -> tuple[str, list[tuple[int, int]]]:
    """The assistant text of ``trace`` and each step's character range in it, offset by ``start``
    (the prompt's length): the trace's own text when its steps carry spans into it, else the steps
    joined by newlines (how ``prmkit generate`` cuts a completion)."""
    spans = [s.span for s in trace.steps]
    if trace.text is not None and trace.steps and all(sp is not None for sp in spans):
        return trace.text, [(start + a, start + b) for a, b in spans]  # type: ignore[misc]
    text, out = "", []
    for i, step in enumerate(trace.steps):
        if i:
            text += "\n"
        out.append((start + len(text), start + len(text) + len(step.text)))
        text += step.text
    return text, out


class LikelihoodScorer:
    """Scores each step by ``exp(reduce(token log-probs))`` under a causal LM (see the module docs).

    ``model`` / ``adapter``: as for the ``hf`` policy (None and ``"default"``: the default policy);
    ``policy``: an already loaded ``hf`` policy to read with instead; ``reduce``: ``min``,
    ``mean`` or ``result``; ``shots``: worked examples in the prompt when the trace does not record its own
    (default: the policy's preference); ``batch_size``: traces per forward pass.
    """

    kind = "prm"

    def __init__(self, model: str | None = None, *, adapter: str | None = "default", reduce: str = "min",
                 batch_size: int = 8, shots: int | None = None, device: str | None = None,
                 dtype: str | None = None, policy: Any = None) -> None:
        if reduce not in REDUCTIONS:
            raise PrmkitError(f"reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
        if int(batch_size) < 1:
            raise PrmkitError(f"batch_size must be at least 1, got {batch_size!r}")
        if policy is None:
            from prmkit.policies import get_policy

            policy = get_policy("hf", model=model, adapter=adapter, device=device, dtype=dtype,
                                progress=False)
        for attr in ("model", "tokenizer", "render"):
            if not hasattr(policy, attr):
                raise PrmkitError(f"the likelihood scorer needs a local transformers policy (hf); "
                                  f"{type(policy).__name__} has no {attr!r}")
        self.policy = policy
        self.reduce = reduce
        self.batch_size = int(batch_size)
        self.shots = shots
        self.name = f"likelihood:{getattr(policy, 'model_id', 'lm')}:{reduce}"

    def _row(self, trace: Trace) -> tuple[str, list[tuple[int, int]]]:
        from prmkit.labelers import rollout_messages
        from prmkit.policies import GenerationRequest

        messages = rollout_messages(trace, self.shots, getattr(self.policy, "prompt_shots", None))
        prompt = self.policy.render(GenerationRequest(messages))
        body, spans = _step_spans(trace, len(prompt))
        return prompt + body, spans

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        """Per trace, the score of every step (a step with no token of its own gets None)."""
        out: list[list[float | None]] = []
        for start in range(0, len(traces), self.batch_size):
            out.extend(self._score_batch(traces[start:start + self.batch_size]))
        return out

    def _score_batch(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        import torch

        tok, lm = self.policy.tokenizer, self.policy.model
        rows = [self._row(t) for t in traces]
        side = tok.padding_side
        tok.padding_side = "right"
        try:
            enc = tok([text for text, _ in rows], return_offsets_mapping=True, return_tensors="pt",
                      padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = side
        ids, mask = enc["input_ids"].to(lm.device), enc["attention_mask"].to(lm.device)
        with torch.inference_mode():
            logits = lm(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            nxt = ids[:, 1:]
            written = logits.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
            # margin: how far the written token falls behind the LM's own first choice (0 when it is it)
            lp = written - (logits.max(-1).values if self.reduce == "margin" else torch.logsumexp(logits, -1))
        lp = lp.cpu().tolist()
        offsets = enc["offset_mapping"].tolist()
        out = []
        for r, (text, spans) in enumerate(rows):
            per_step: list[list[float]] = [[] for _ in spans]
            # the ranges each step's tokens are read from: the whole step, or its claimed values
            ranges = [[sp] if self.reduce not in _RESULT_ONLY else _results(text, *sp) for sp in spans]
            n = int(mask[r].sum())
            for i in range(1, n):  # token i is predicted at position i - 1
                a, b = offsets[r][i]
                if b <= a:
                    continue
                for k, (s0, s1) in enumerate(spans):
                    if s0 <= a < s1 or (self.reduce in _RESULT_ONLY and a < s1 and b > s0):
                        # a token overlapping a claimed value counts (" 49" starts at its space)
                        if any(a < c1 and b > c0 for c0, c1 in ranges[k]):
                            per_step[k].append(lp[r][i - 1])
                        break
            scores: list[float | None] = []
            for vals in per_step:
                if not vals:
                    scores.append(None)
                else:
                    v = sum(vals) / len(vals) if self.reduce == "mean" else min(vals)
                    scores.append(math.exp(v))
            out.append(scores)
        return out
