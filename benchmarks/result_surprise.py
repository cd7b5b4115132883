"""How much the default policy itself knows about its arithmetic slips: the AUROC, over held-out steps of
the form ``... a op b = c.``, of the log-probability the policy gives the written result ``c`` (after
the prompt the trace was generated with and the steps before it), for the symbolic label "step right".

This is the signal a PRM on the same backbone could read; ``benchmarks/verifier.py`` measures how much
of it the trained PRM and the training-free ``likelihood`` scorer (whole-step token log-probs) turn
into best-of-N accuracy. The last line prints the AUROC on steps whose first symbolic verdict is
``correct`` or ``arithmetic_error``.

    python benchmarks/result_surprise.py --heldout runs/verifier/heldout-v2.jsonl --traces 60
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import sys
import time

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

_RESULT = re.compile(r"= (\d+)\.?\s*$")


def _auroc(pos: list[float], neg: list[float]) -> float:
    """prmkit.eval's AUROC of positives over negatives (NaN without both)."""
    from prmkit.eval import auroc

    got = auroc([*pos, *neg], [True] * len(pos) + [False] * len(neg))
    return float("nan") if got is None else got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heldout", required=True, help="traces with symbolic step labels (prmkit generate)")
    ap.add_argument("--traces", type=int, default=60, help="traces drawn at random (seeded)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from prmkit.labelers import rollout_messages
    from prmkit.policies import GenerationRequest, get_policy
    from prmkit.trace import read_traces

    t0 = time.perf_counter()
    policy = get_policy("hf", progress=False)
    tok, lm = policy.tokenizer, policy.model
    traces = list(read_traces(args.heldout))
    random.Random(args.seed).shuffle(traces)
    rows: list[tuple[float, str]] = []  # (log-prob of the written result, symbolic verdict)
    for t in traces[:args.traces]:
        text = policy.render(GenerationRequest(rollout_messages(t, None, policy.prompt_shots)))
        for step in t.steps:
            label = next((lab for lab in step.labels if lab.source == "symbolic"), None)
            m = _RESULT.search(step.text)
            if label is not None and m:
                before = text + step.text[:m.start(1)]
                ids = tok(before, add_special_tokens=False)["input_ids"]
                full = tok(before + m.group(1), add_special_tokens=False)["input_ids"]
                if full[:len(ids)] == ids:  # the result's tokens are its own
                    with torch.inference_mode():
                        lp = torch.log_softmax(lm(input_ids=torch.tensor([full])).logits[0].float(), -1)
                    rows.append((sum(lp[i - 1, full[i]].item() for i in range(len(ids), len(full))),
                                 str((label.meta or {}).get("verdict", ""))))
            text += step.text + "\n"
    right = [v for v, verdict in rows if verdict == "correct"]
    slips = [v for v, verdict in rows if verdict == "arithmetic_error"]
    print(f"{len(rows)} steps with a written result from {min(args.traces, len(traces))} traces: "
          f"{len(right)} right, {len(slips)} arithmetic slips, {len(rows) - len(right) - len(slips)} other errors")
    print(f"({time.perf_counter() - t0:.0f} s)  python benchmarks/result_surprise.py "
          + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    print(f"AUROC of the result's log-probability, right vs slipped: {_auroc(right, slips):.3f}")
    _record.record("result_surprise", {"steps": len(rows), "right": len(right), "slips": len(slips)},
                   _auroc(right, slips), goal="the policy's own log-probability of a result separates slips (AUROC)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
