"""Input conventions of PRM families: how a trace becomes model text and where each step is scored.

A :class:`Convention` renders ``(problem, steps)`` into text with one anchor per step (see
:mod:`prmkit.models._align`) and says how a score comes out of the model at that position:

- ``head="classifier"``: a token-classification head (``AutoModelForTokenClassification``); two
  classes -> softmax probability of class 1, one class -> sigmoid (the TRL / Qwen / Skywork style);
- ``head="lm_token"``: a causal LM; P(good) / (P(good) + P(bad)) over two vocabulary tokens at the
  position (Math-Shepherd's ``ки`` tag, RLHFlow's ``+``/``-`` assistant turns).

Published conventions are registered by name in :data:`CONVENTIONS`; ``prmkit`` is the default for
models trained here. An ORM uses the same convention and scores only the last step's position.

>>> c = get_convention("math-shepherd")
>>> r = c.render("1+1?", ["Step 1: 1+1=2 ки", "The answer is 2"])
>>> r.text
'1+1? Step 1: 1+1=2 ки ки\\nThe answer is 2 ки'
>>> [r.text[a:b] for a, b in r.anchors]
[' ки', ' ки']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.models._align import Rendered

__all__ = ["CONVENTIONS", "Convention", "get_convention", "register_convention", "QWEN_PRM_SYSTEM"]

#: The system prompt of Qwen2.5-Math-PRM's model card.
QWEN_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class Convention:
    """How a trace is written for a PRM and where its step scores are read.

    - ``prompt_sep``: between the problem and the first step (plain text);
    - ``tag``: written after every step; its span is the step's anchor (empty: the step's own last
      characters are the anchor);
    - ``joiner``: between one step's tag and the next step (not part of any anchor);
    - ``chat``: ``None`` (plain text), ``"assistant"`` (system + user problem + one assistant turn holding
      every step, Qwen2.5-Math-PRM) or ``"turns"`` (one user turn per step, each answered by an assistant
      verdict token, RLHFlow);
    - ``bos``: write the tokenizer's BOS token text first (Skywork-PRM); ``"auto"``: only where the
      tokenizer has one (TRL);
    - ``pieces``: tokenise the BOS, the problem head, every step, tag and joiner one at a time and join
      the ids, as Skywork's ``prepare_input`` and TRL's ``tokenize_row`` do (plain text only): tokenising
      the whole text can merge a step's last characters with its tag (Qwen's ``".\n"`` token), an input
      those models never saw;
    - ``good`` / ``bad``: verdict tokens of ``head="lm_token"``;
    - ``add_special_tokens``: let the tokenizer add its own special tokens (BOS / CLS / SEP);
    - ``num_labels``: outputs of a classifier head (2: softmax, 1: sigmoid); None: 2 unless configured.
    """

    name: str
    head: Literal["classifier", "lm_token"] = "classifier"
    prompt_sep: str = "\n"
    tag: str = "\n"
    joiner: str = ""
    chat: Literal["assistant", "turns"] | None = None
    system: str | None = None
    bos: bool | Literal["auto"] = False
    pieces: bool = False
    good: str = "+"
    bad: str = "-"
    add_special_tokens: bool = True
    num_labels: int | None = None
    doc: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Convention:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise PrmkitError(f"unknown convention field(s) {unknown}; known: {sorted(known)}")
        return cls(**d)

    # -- rendering ----------------------------------------------------------------------------------
    def render(self, problem: str, steps: list[str], tokenizer: Any = None,
               verdicts: list[bool] | None = None) -> Rendered:
        """The model text and one anchor per step.

        ``verdicts`` (``chat="turns"`` only) writes the true ``good``/``bad`` verdicts into the
        assistant turns, as in training; scoring writes ``good`` everywhere, as RLHFlow's inference does.
        """
        if not steps:
            raise PrmkitError("a trace without steps cannot be scored")
        if self.chat is None:
            return self._render_plain(problem, steps, tokenizer)
        if self.pieces:
            raise PrmkitError(f"convention {self.name!r}: pieces=True needs chat=None")
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise PrmkitError(f"convention {self.name!r} needs a tokenizer with a chat template")
        if self.chat == "assistant":
            return self._render_assistant(problem, steps, tokenizer)
        return self._render_turns(problem, steps, tokenizer, verdicts)

    def _bos(self, tokenizer: Any) -> str:
        if not self.bos:
            return ""
        bos = getattr(tokenizer, "bos_token", None)
        if not bos and self.bos == "auto":
            return ""
        if not bos:
            raise PrmkitError(f"convention {self.name!r} starts with BOS but the tokenizer has none")
        return bos

    def _body(self, steps: list[str], start: int
              ) -> tuple[str, list[tuple[int, int]], list[tuple[int, int]]]:
        """The steps' text, one anchor per step, and the pieces (joiner, step, tag) it is made of."""
        parts: list[str] = []
        anchors: list[tuple[int, int]] = []
        pieces: list[tuple[int, int]] = []
        at = start
        for i, step in enumerate(steps):
            for part in ((self.joiner,) if i else ()) + (step, self.tag):
                parts.append(part)
                pieces.append((at, at + len(part)))
                at += len(part)
            anchors.append(pieces[-1] if self.tag else (at - len(step), at))
        return "".join(parts), anchors, pieces

    def _render_plain(self, problem: str, steps: list[str], tokenizer: Any) -> Rendered:
        bos = self._bos(tokenizer)
        head = bos + problem + self.prompt_sep
        body, anchors, pieces = self._body(steps, len(head))
        if not self.pieces:
            return Rendered(head + body, anchors)
        return Rendered(head + body, anchors, pieces=[(0, len(bos)), (len(bos), len(head)), *pieces])

    def _messages(self, problem: str, content: str) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": self.system}] if self.system is not None else []
        return msgs + [{"role": "user", "content": problem}, {"role": "assistant", "content": content}]

    def _render_assistant(self, problem: str, steps: list[str], tokenizer: Any) -> Rendered:
        content, rel, _ = self._body(steps, 0)
        text = tokenizer.apply_chat_template(self._messages(problem, content), tokenize=False,
                                             add_generation_prompt=False)
        start = _find_after(text, content, text.find(problem) + len(problem) if problem in text else 0)
        if start < 0:
            raise PrmkitError(f"the chat template of convention {self.name!r} does not keep the "
                              "assistant text verbatim; cannot place step labels")
        return Rendered(text, [(a + start, b + start) for a, b in rel])

    def _render_turns(self, problem: str, steps: list[str], tokenizer: Any,
                      verdicts: list[bool] | None) -> Rendered:
        if verdicts is not None and len(verdicts) != len(steps):
            raise PrmkitError(f"{len(verdicts)} verdicts for {len(steps)} steps")
        msgs = [{"role": "system", "content": self.system}] if self.system is not None else []
        users: list[str] = []
        marks: list[str] = []
        for i, step in enumerate(steps):
            user = f"{problem} {step}" if i == 0 else step
            mark = self.good if verdicts is None or verdicts[i] else self.bad
            msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": mark}]
            users.append(user)
            marks.append(mark)
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
        anchors: list[tuple[int, int]] = []
        label_tokens: list[int] = []
        at = 0
        for user, mark in zip(users, marks, strict=True):
            u = _find_after(text, user, at)
            if u < 0 and user.strip() != user:  # templates that trim each message (Llama 3's)
                user = user.strip()
                u = _find_after(text, user, at)
            m = _find_after(text, mark, u + len(user)) if u >= 0 else -1
            if u < 0 or m < 0:
                raise PrmkitError(f"the chat template of convention {self.name!r} does not keep the "
                                  "turns verbatim; cannot place step labels")
            anchors.append((u + len(user), m))  # the template text between the step and its verdict
            label_tokens.append(m)
            at = m + len(mark)
        return Rendered(text, anchors, label_tokens=label_tokens)


def _find_after(text: str, needle: str, start: int) -> int:
    return text.find(needle, max(start, 0))


#: name -> :class:`Convention` (the built-ins are objects; plugins of the ``prmkit.conventions``
#: entry-point group are ``"module:attr"`` of a Convention, imported when asked for).
CONVENTIONS = Registry("PRM convention", {}, group="prmkit.conventions")


def _add(c: Convention) -> Convention:
    CONVENTIONS[c.name] = c
    return c


_add(Convention(
    "prmkit", doc="prmkit's default: problem, newline, each step followed by a newline; a "
    "2-class token-classification head reads each step's newline token (the last token of the step "
    "where the tokenizer drops newlines, as WordPiece does)."))
_add(Convention(
    "trl", prompt_sep="", tag="\n", bos="auto", pieces=True, add_special_tokens=False,
    doc="TRL's PRMTrainer (<= 1.13): the tokenizer's BOS where it has one, the prompt directly followed "
    "by the steps, each ending in the step separator (default newline), every part tokenised on its own "
    "without other special tokens, as its tokenize_row does; 2-class head."))
_add(Convention(
    "qwen2.5-math-prm", chat="assistant", system=QWEN_PRM_SYSTEM, tag="<extra_0>", num_labels=2,
    doc="Qwen2.5-Math-PRM-7B/72B: ChatML with the card's system prompt, the steps in one assistant "
    "turn each followed by <extra_0>; a 2-class head (softmax, class 1 = correct) at every <extra_0>. "
    "The hub checkpoints need trust_remote_code=True."))
_add(Convention(
    "math-shepherd", head="lm_token", prompt_sep=" ", tag=" ки", joiner="\n", good="+", bad="-",
    doc="Math-Shepherd (peiyi9979/math-shepherd-mistral-7b-prm): '{question} {step} ки\\n{step} ки'; "
    "P('+') / (P('+') + P('-')) of the next token at every 'ки' tag."))
_add(Convention(
    "rlhflow", head="lm_token", chat="turns", good="+", bad="-", add_special_tokens=False,
    doc="RLHFlow PRMs (Llama3.1-8B-PRM-*): a chat where the first user turn is the question and the "
    "first step, each later user turn one step, each assistant turn '+' or '-'; the score is "
    "P('+') / (P('+') + P('-')) of the assistant's token. Scoring fills every verdict with '+'."))
_add(Convention(
    "skywork-prm", prompt_sep="\n", tag="\n", bos=True, pieces=True, add_special_tokens=False, num_labels=1,
    doc="Skywork-o1-Open-PRM-Qwen-2.5: BOS + problem + newline, each step followed by a newline, each "
    "step and newline tokenised on its own (as its prepare_input does); a "
    "one-output value head read with a sigmoid at every step newline (a checkpoint's v_head.summary "
    "weights are loaded into it)."))


def register_convention(c: Convention) -> Convention:
    """Add (or replace) a named convention, so configs and checkpoints can refer to it by name."""
    return _add(c)


def get_convention(spec: str | dict[str, Any] | Convention | None) -> Convention:
    """A convention by name, from a dict of fields (a custom one), or the default (``prmkit``).

    >>> get_convention(None).name, get_convention({"name": "mine", "tag": " <step>"}).tag
    ('prmkit', ' <step>')
    """
    if spec is None:
        return CONVENTIONS["prmkit"]
    if isinstance(spec, Convention):
        return spec
    if isinstance(spec, dict):
        return Convention.from_dict(spec)
    c = CONVENTIONS.load(spec)
    if isinstance(c, dict):
        c = Convention.from_dict(c)
    if not isinstance(c, Convention):
        raise PrmkitError(f"PRM convention {spec!r} ({CONVENTIONS.plugin(spec) or CONVENTIONS[spec]}) "
                          f"is a {type(c).__name__}, not a Convention")
    return c
