"""How ``POST /get_reward`` turns OpenRLHF's texts into traces.

OpenRLHF sends ``query``: the full text of each sample as its tokenizer decodes it with special tokens
kept (prompt, chat template and response together), ``prompts``: the prompt text of each sample, and
``labels`` (the dataset's label, unused here). Each query becomes a trace:

1. **problem / completion**: where ``prompts[i]`` is given and ``query[i]`` starts with it, the problem
   is the prompt and the completion is the rest of the query. Where the query does not start with the
   prompt (a tokenizer whose decode does not round-trip the prompt), the prompt's last occurrence
   inside the query is the cut; where it does not occur at all, or no prompts are sent, the whole
   query is the completion and the problem is empty (``prompt_found`` says which happened).
2. **end markers**: special tokens left at the end of the completion by the decode (``<|im_end|>``,
   ``<|endoftext|>``, ``<|eot_id|>``, ``</s>``, ...: any run of ``<|...|>`` / ``</s>`` / ``<eos>`` at
   the very end) are cut off, so they do not become part of the last step.
3. **steps**: the completion is cut by a prmkit splitter (``newline`` by default, as
   :class:`~prmkit.rl.PRMReward` and ``prmkit generate``: every non-empty line is a step).

>>> t, found = query_trace("Q: 2+2?\\nA:", "Q: 2+2?\\nA: 2 + 2 = 4\\nThe answer is 4.<|im_end|>", "q0")
>>> found, t.problem.text, [s.text for s in t.steps]
(True, 'Q: 2+2?\\nA:', ['2 + 2 = 4', 'The answer is 4.'])
"""

from __future__ import annotations

import re

from prmkit.data import Splitter, get_splitter
from prmkit.trace import Problem, Trace

__all__ = ["query_trace", "split_query", "strip_end_markers", "END_MARKERS"]

#: Special tokens a decoded query may end with (with the whitespace around them). What this pattern
#: matches at the end of a completion is cut; :func:`strip_end_markers` finds it in linear time.
END_MARKERS = re.compile(r"(?:\s*(?:<\|[A-Za-z0-9_]+\|>|</s>|<eos>|<end_of_turn>))+\s*\Z")

# END_MARKERS read backwards, matched at the start of the reversed text. ``END_MARKERS.sub`` searches
# from every position, and at each one ``\s*`` runs to the end of a whitespace run before failing:
# quadratic, 56 s for a completion of 100 KB of spaces, with the event loop blocked. Matched only at
# position 0 of the reversed text, each character is tried a bounded number of times.
_END_MARKERS_REVERSED = re.compile(r"\s*(?:(?:>\|[A-Za-z0-9_]+\|<|>s/<|>soe<|>nrut_fo_dne<)\s*)+")


def split_query(prompt: str | None, query: str) -> tuple[str, str, bool]:
    """``(problem, completion, prompt_found)`` of one query (module docs, rules 1 and 2)."""
    problem, completion, found = "", query, False
    if prompt:
        if query.startswith(prompt):
            problem, completion, found = prompt, query[len(prompt):], True
        elif (at := query.rfind(prompt)) >= 0:
            problem, completion, found = prompt, query[at + len(prompt):], True
    return problem, strip_end_markers(completion), found


def strip_end_markers(text: str) -> str:
    """``text`` without the special tokens it ends with (:data:`END_MARKERS`), in linear time.

    >>> strip_end_markers("The answer is 8.<|im_end|>\\n<|endoftext|>  "), strip_end_markers("a  ")
    ('The answer is 8.', 'a  ')
    """
    m = _END_MARKERS_REVERSED.match(text[::-1])
    return text[:len(text) - m.end()] if m else text


def query_trace(prompt: str | None, query: str, id: str, splitter: str | Splitter = "newline"
                ) -> tuple[Trace, bool]:
    """The trace of one query (module docs) and whether its prompt was found in it."""
    problem, completion, found = split_query(prompt, query)
    split = get_splitter(splitter) if isinstance(splitter, str) else splitter
    return Trace(id=id, problem=Problem(problem), steps=split.split(completion), text=completion), found
