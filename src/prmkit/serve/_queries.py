"""How ``POST /get_reward`` turns OpenRLHF's texts into traces.

OpenRLHF sends ``query``: the full text of each sample as its tokenizer decodes it with special tokens
kept (prompt, chat template and response together), ``prompts``: the prompt text of each sample, and
``labels`` (the dataset's label, unused here). Each query becomes a trace:

1. **problem / completion**: where ``prompts[i]`` is given and ``query[i]`` starts with it, the prompt
   is cut off and the completion is the rest of the query. Where the query does not start with the
   prompt (a tokenizer whose decode does not round-trip the prompt), the prompt's last occurrence
   inside the query is the cut; where it does not occur at all, or no prompts are sent, the whole
   query is the completion and the problem is empty (``prompt_found`` says which happened).
2. **end markers**: special tokens left at the end of the completion by the decode (``<|im_end|>``,
   ``<|endoftext|>``, ``<|eot_id|>``, ``</s>``, ...: any run of ``<|...|>`` / ``</s>`` / ``<eos>`` at
   the very end) are cut off, so they do not become part of the last step.
3. **the problem** is read from the prompt by :func:`problem_from` (``problem_from="last-user"``, the
   default: the last user turn of a chat-templated prompt, for ChatML (Qwen, SmolLM2), Llama-3,
   Gemma, DeepSeek (R1/V3), Phi-3 and ``[INST]`` templates; a prompt in none of them is the problem as
   it is; ``whole``: the prompt as it is). :class:`~prmkit.rl.PRMReward` reads a TRL prompt by the same
   rule, so a server and a reward function give one trace the same problem.
4. **steps**: the completion is cut by :class:`ReasoningSplitter` around a prmkit splitter (``newline``
   by default, as :class:`~prmkit.rl.PRMReward` and ``prmkit generate``: every non-empty line is a
   step): ``<think>`` / ``</think>`` and end markers (:data:`DEFAULT_END_MARKERS`, plus a policy
   tokenizer's own special tokens where one is given: :func:`end_markers_of`) are blanked (replaced by
   as many spaces, so every step's span still points into the policy's text) and never become a step
   or part of one.

>>> t, found = query_trace("<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n",
...                        "<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n<think>\\n2 + 2 = 4\\n"
...                        "</think>\\nThe answer is 4.<|im_end|>", "q1")
>>> found, t.problem.text, [s.text for s in t.steps]
(True, '2+2?', ['2 + 2 = 4', 'The answer is 4.'])
>>> t, found = query_trace("Q: 2+2?\\nA:", "Q: 2+2?\\nA: 2 + 2 = 4\\nThe answer is 4.<|im_end|>", "q0")
>>> found, t.problem.text, [s.text for s in t.steps]
(True, 'Q: 2+2?\\nA:', ['2 + 2 = 4', 'The answer is 4.'])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from prmkit.data import Splitter, get_splitter
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace

__all__ = ["query_trace", "split_query", "strip_end_markers", "END_MARKERS", "PROBLEM_FROM", "problem_from",
           "DEFAULT_END_MARKERS", "THINK", "end_markers_of", "ReasoningSplitter", "reasoning_splitter"]

#: How a prompt gives the problem: its last user turn (of a chat template), or the whole prompt.
PROBLEM_FROM = ("last-user", "whole")

#: What :class:`ReasoningSplitter` does with a ``<think>...</think>`` block: ``keep`` its lines as steps
#: (the tags blanked), or score only the ``answer`` after the last ``</think>``.
THINK = ("keep", "answer")

#: End-of-turn / end-of-text markers blanked in every completion, whatever the tokenizer.
DEFAULT_END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|end|>", "</s>", "<eos>",
                       "<end_of_turn>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<|im_start|>")

# The last user turn of each common chat template: the turn's text is group 1. A turn whose end marker
# is missing (a prompt cut there) runs to the next turn's start or to the end of the prompt.
_USER_TURNS = [re.compile(p, re.S) for p in (
    r"<\|im_start\|>user\n(.*?)(?:<\|im_end\|>|(?=<\|im_start\|>)|\Z)",  # ChatML: Qwen, SmolLM2
    r"<\|start_header_id\|>user<\|end_header_id\|>\n\n(.*?)(?:<\|eot_id\|>|(?=<\|start_header_id\|>)|\Z)",  # Llama-3
    r"<start_of_turn>user\n(.*?)(?:<end_of_turn>|(?=<start_of_turn>)|\Z)",  # Gemma
    r"<\uff5cUser\uff5c>(.*?)(?=<\uff5cAssistant\uff5c>|<\uff5cUser\uff5c>|\Z)",  # DeepSeek R1 / V3
    r"<\|user\|>\n?(.*?)(?:<\|end\|>|(?=<\|assistant\|>)|\Z)",  # Phi-3
    r"\[INST\](?:\s*<<SYS>>.*?<</SYS>>)?(.*?)(?:\[/INST\]|\Z)",  # Llama-2, Mistral
)]


def problem_from(prompt: str, rule: str = "last-user") -> str:
    """The problem a prompt poses (module docs, rule 3): ``last-user``: the text of its last user turn
    when it is chat-templated (stripped), else the prompt as it is; ``whole``: the prompt as it is.

    >>> problem_from("<|im_start|>system\\nBe brief.<|im_end|>\\n<|im_start|>user\\nWhat is 2+2?<|im_end|>\\n"
    ...              "<|im_start|>assistant\\n")
    'What is 2+2?'
    >>> problem_from("Q: 2+2?\\nA:")
    'Q: 2+2?\\nA:'
    """
    if rule not in PROBLEM_FROM:
        raise PrmkitError(f"problem_from must be one of {', '.join(PROBLEM_FROM)}, got {rule!r}")
    if rule == "whole":
        return prompt
    best: re.Match[str] | None = None
    for pattern in _USER_TURNS:
        for m in pattern.finditer(prompt):
            if best is None or m.start() > best.start():
                best = m
    return best.group(1).strip() if best is not None else prompt


def end_markers_of(tokenizer: Any) -> tuple[str, ...]:
    """A policy tokenizer's special tokens that look like markup (``<...>``, ``[...]``; the end-of-text,
    end-of-turn, padding tokens), to be blanked in its completions. Single characters and plain words
    are left alone: blanking them would cut text."""
    if tokenizer is None:
        return ()
    found = list(getattr(tokenizer, "all_special_tokens", None) or [])
    eos = getattr(tokenizer, "eos_token", None)
    if isinstance(eos, str):
        found.append(eos)
    return tuple(sorted({t for t in found if isinstance(t, str) and len(t) >= 3
                         and ((t[0] == "<" and t[-1] == ">") or (t[0] == "[" and t[-1] == "]"))}))


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


class ReasoningSplitter:
    """A splitter for a reasoning model's completion (module docs, rule 4): ``inner`` cuts it into steps
    after ``<think>``, ``</think>`` and every end marker are replaced by as many spaces (``think="answer"``:
    everything up to the last ``</think>``), so none of them is a step or inside one, and each step's span
    is its place in the completion as the policy wrote it. :meth:`clean` gives that blanked text, which
    is the text the spans point into.

    >>> s = ReasoningSplitter("newline", end_markers=["<\uff5cend\u2581of\u2581sentence\uff5c>"])
    >>> [(x.text, x.span) for x in s.split("Add.\\n</think>\\n\\nIt is 4.<\uff5cend\u2581of\u2581sentence\uff5c>")]
    [('Add.', (0, 4)), ('It is 4.', (15, 23))]
    """

    def __init__(self, inner: str | Splitter = "newline", *, end_markers: Iterable[str] = (),
                 think: str = "keep") -> None:
        if think not in THINK:
            raise PrmkitError(f"think must be one of {', '.join(THINK)}, got {think!r}")
        self.inner = get_splitter(inner) if isinstance(inner, str) else inner
        self.name = f"{self.inner.name}+think"
        self.think = think
        # Longest first, so a marker that contains another is blanked whole.
        self.markers = tuple(sorted({*DEFAULT_END_MARKERS, *end_markers, "<think>", "</think>"}, key=len,
                                    reverse=True))
        self.options: dict[str, Any] = {"inner": self.inner.name, "think": think, "end_markers": list(end_markers)}

    def clean(self, text: str) -> str:
        """``text`` with the think tags and end markers blanked and its trailing whitespace cut: every
        character left is at its place in ``text``."""
        if self.think == "answer" and (at := text.rfind("</think>")) >= 0:
            text = _blank(text, 0, at + len("</think>"))
        for marker in self.markers:
            if marker in text:
                text = text.replace(marker, " " * len(marker))
        return strip_end_markers(text).rstrip()  # and other ``<|...|>`` markers at the very end

    def split(self, text: str) -> list[Step]:
        """The steps of ``text`` once cleaned (:meth:`clean`), each with its span."""
        return self.inner.split(self.clean(text))


def reasoning_splitter(splitter: str | Splitter = "newline", *, tokenizer: Any = None,
                       end_markers: Sequence[str] = (), think: str = "keep") -> ReasoningSplitter:
    """A :class:`ReasoningSplitter` around ``splitter`` whose end markers are the defaults, the policy
    ``tokenizer``'s special tokens (:func:`end_markers_of`) and ``end_markers``."""
    if isinstance(splitter, ReasoningSplitter):
        return splitter
    return ReasoningSplitter(splitter, end_markers=(*end_markers_of(tokenizer), *end_markers), think=think)

#: Special tokens a decoded query may end with (with the whitespace around them). What this pattern
#: matches at the end of a completion is cut; :func:`strip_end_markers` finds it in linear time.
END_MARKERS = re.compile(r"(?:\s*(?:<\|[A-Za-z0-9_]+\|>|</s>|<eos>|<end_of_turn>|<\uff5c[^\uff5c<>]+\uff5c>))+\s*\Z")

# END_MARKERS read backwards, matched at the start of the reversed text. ``END_MARKERS.sub`` searches
# from every position, and at each one ``\s*`` runs to the end of a whitespace run before failing:
# quadratic, 56 s for a completion of 100 KB of spaces, with the event loop blocked. Matched only at
# position 0 of the reversed text, each character is tried a bounded number of times.
_END_MARKERS_REVERSED = re.compile(r"\s*(?:(?:>\|[A-Za-z0-9_]+\|<|>s/<|>soe<|>nrut_fo_dne<|>\uff5c[^\uff5c<>]+\uff5c<)\s*)+")


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


def query_trace(prompt: str | None, query: str, id: str, splitter: str | Splitter = "newline", *,
                problem_rule: str = "last-user") -> tuple[Trace, bool]:
    """The trace of one query (module docs) and whether its prompt was found in it. ``splitter``: a
    name or splitter, wrapped in a :class:`ReasoningSplitter` unless it is one."""
    problem, completion, found = split_query(prompt, query)
    split = reasoning_splitter(splitter)
    text = split.clean(completion)
    return Trace(id=id, problem=Problem(problem_from(problem, problem_rule)), steps=split.inner.split(text),
                 text=text), found
