"""A PRM (or ORM) as a reward function with TRL's GRPO contract.

TRL calls every reward function as ``reward_fn(prompts=..., completions=..., **kwargs)`` and expects
one ``float`` or ``None`` per completion (``None``: this function has no opinion on that sample;
TRL then ignores it for this function). Completions are strings, or, for conversational datasets,
lists of chat messages (``[{"role": "assistant", "content": "..."}]``); prompts likewise. TRL logs a
function's rewards under its ``__name__``.

:class:`PRMReward` turns each completion into a trace (the problem is the prompt's last user message,
or for a chat-templated string prompt its last user turn, by the rule ``prmkit serve`` uses:
:func:`prmkit.serve.problem_from`; the steps are cut by a prmkit splitter, ``newline`` by default, as
``prmkit generate`` does, inside a :class:`~prmkit.serve.ReasoningSplitter`: ``<think>`` / ``</think>``
and end markers, the policy tokenizer's special tokens among them, are never a step), scores
all of them in one call, and aggregates each trace's step scores (``min`` by default) into its
reward. A completion is unscorable when it has no step, or when the scorer rejects it (say, longer
than an ORM's ``max_length``, or a problem that leaves no room for any step: ``too_long``); it gets
``unscored_reward``, ``None`` by default: TRL's "no opinion", which TRL (1.16:
``trl/trainer/grpo_trainer.py``, ``_calculate_rewards`` and ``_generate_and_score_completions``)
turns into NaN, leaves out of its group's mean and std when every reward function gave it, and gives
advantage 0. A number (``unscored_reward=0.0``) is for trainers that need one.

A completion the PRM scores on only some of its steps (steps past ``max_length`` with
``long="truncate"``) is handled as ``truncation=`` says: ``score_prefix`` (the default) aggregates the
steps that were scored, ``none`` gives it ``unscored_reward``, ``error`` raises (as it does for a
rejected completion). Nothing is silent: every call counts completions, scored, ``no_steps``,
``rejected`` (of which ``too_long``), ``partial`` and ``unscored_steps`` into
:attr:`PRMReward.stats` (all calls) and :attr:`PRMReward.last_stats` (the last call), logs a warning
on the ``prmkit.rl`` logger when any completion was not fully scored, and, under TRL (>= 1.x passes a
``log_metric`` callable to reward functions), logs ``<name>/unscored_frac`` and
``<name>/partial_frac`` with the rewards.

>>> from prmkit.search import ScriptedScorer
>>> reward = PRMReward(ScriptedScorer({"2 + 2 = 4": 0.9, "The answer is 4.": 0.8}))
>>> reward(prompts=["What is 2 + 2?"] * 2, completions=["2 + 2 = 4\\nThe answer is 4.", "  "])
[0.8, None]
>>> reward.__name__
'prm_min'
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.scoring import StepScorer, get_aggregator, score_each
from prmkit.serve import problem_from, reasoning_splitter
from prmkit.trace import Problem, Trace

__all__ = ["PRMReward", "completion_text", "prompt_text", "TRUNCATION"]

log = logging.getLogger("prmkit.rl")

#: What to do with a completion scored on only some of its steps (module docs).
TRUNCATION = ("score_prefix", "none", "error")


def _content(content: Any) -> str:
    """A message's text: a string, or the text parts of an OpenAI-style content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return "" if content is None else str(content)


def completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """The text of a completion: the string itself, or its assistant messages' contents joined by
    newlines (a conversational completion)."""
    if isinstance(completion, str):
        return completion
    return "\n".join(_content(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant")


def prompt_text(prompt: str | Sequence[dict[str, Any]], rule: str = "last-user") -> str:
    """The problem a prompt poses: its last user message (a conversational prompt also holds the system
    prompt and worked examples, which are not the problem), or for a string the last user turn of its
    chat template, else the string itself (:func:`prmkit.serve.problem_from`, the rule ``prmkit serve``
    applies to OpenRLHF's prompts). ``rule="whole"``: the string as it is, or every message's text."""
    if isinstance(prompt, str):
        return problem_from(prompt, rule)
    if rule == "whole":
        return "\n".join(_content(m.get("content")) for m in prompt)
    problem_from("", rule)  # the rule's check
    users = [m for m in prompt if m.get("role") == "user"]
    return _content(users[-1].get("content")) if users else ""


def _build(recipe: tuple[str, dict[str, Any]] | None) -> StepScorer:
    from prmkit.scoring import get_scorer, model_scorer

    if recipe is None:
        raise PrmkitError("this reward function has no scorer and no recipe to build one")
    how, args = recipe
    if how == "model":
        args = dict(args)
        return model_scorer(args.pop("path"), **args)
    return get_scorer(how, **args)


class PRMReward:
    """``reward_fn(prompts, completions, **kwargs) -> list[float | None]`` over a
    :class:`~prmkit.scoring.StepScorer` (module docs).

    ``aggregate``: step scores -> reward (``min``, ``last``, ``prod``, ``mean``, ``geo_mean``,
    ``first_below:<t>``). ``splitter``: how a completion is cut into steps. ``name``: the
    ``__name__`` TRL logs (default ``prm_<aggregate>``, or ``orm`` for an ORM). ``scale``/``shift``:
    the reward is ``scale * score + shift`` (e.g. ``scale=2, shift=-1`` for rewards in [-1, 1]).
    ``truncation``: ``score_prefix``, ``none`` or ``error`` for a completion scored on only some of its
    steps (module docs); ``stats`` / ``last_stats`` count what could not be scored.
    ``unscored_reward``: the reward of a completion nothing of which was scored (``None``: TRL's "no
    opinion"; used as it is, not scaled). ``problem_from``: ``last-user`` or ``whole``
    (:func:`prompt_text`). ``tokenizer``: the *policy's*, whose special tokens are blanked in its
    completions beside :data:`~prmkit.serve.DEFAULT_END_MARKERS` and ``end_markers``; ``think``: ``keep``
    the lines of a ``<think>`` block as steps, or score only the ``answer`` after it.

    It pickles (TRL's ``AsyncGRPOTrainer`` runs reward functions in a spawned process): a remote scorer
    travels as its URL and options, a scorer made by :meth:`from_pretrained` as its path and arguments,
    both rebuilt on first use in the child; the counts start again at zero there.

    Scoring goes through :func:`prmkit.scoring.score_each`: a scorer that says per trace why it
    refused one (a local model, :class:`~prmkit.serve.RemoteScorer` in one request) is called once;
    any other is called again on halves of a refused batch.
    """

    def __init__(self, scorer: StepScorer, *, aggregate: str = "min", splitter: str = "newline",
                 name: str | None = None, scale: float = 1.0, shift: float = 0.0,
                 truncation: str = "score_prefix", unscored_reward: float | None = None,
                 problem_from: str = "last-user", tokenizer: Any = None, end_markers: Sequence[str] = (),
                 think: str = "keep") -> None:
        if truncation not in TRUNCATION:
            raise PrmkitError(f"truncation must be one of {', '.join(TRUNCATION)}, got {truncation!r}")
        self.truncation = truncation
        self.unscored_reward = unscored_reward
        #: Counts over every call: completions, scored, no_steps, rejected, partial, unscored_steps.
        self.stats: Counter[str] = Counter()
        #: The same counts for the last call only.
        self.last_stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._scorer: StepScorer | None = scorer
        #: ``(how, arguments)`` that rebuild the scorer in another process: ``("model", {"path": ...,
        #: ...})`` from :meth:`from_pretrained`, a remote scorer's own recipe; None: the scorer itself
        #: is pickled.
        self.recipe: tuple[str, dict[str, Any]] | None = (
            scorer.recipe() if callable(getattr(scorer, "recipe", None)) else None)
        self.aggregate = aggregate
        self._agg = get_aggregator(aggregate)
        prompt_text("", problem_from)  # the rule's check
        self.problem_from = problem_from
        self.splitter = reasoning_splitter(splitter, tokenizer=tokenizer, end_markers=end_markers, think=think)
        self.scale = scale
        self.shift = shift
        default = "orm" if scorer.kind == "orm" else f"prm_{aggregate.replace(':', '_')}"
        self.__name__ = name or default

    @classmethod
    def from_pretrained(cls, path: str, *, aggregate: str = "min", splitter: str = "newline",
                        name: str | None = None, truncation: str = "score_prefix",
                        unscored_reward: float | None = None, **scorer_args: Any) -> PRMReward:
        """A reward function over a checkpoint folder, or a server's ``http://host:port`` (loaded as
        ``prmkit search --model`` does)."""
        from prmkit.scoring import model_scorer

        reward = cls(model_scorer(path, **scorer_args), aggregate=aggregate, splitter=splitter, name=name,
                     truncation=truncation, unscored_reward=unscored_reward)
        reward.recipe = ("model", {"path": str(path), **scorer_args})
        return reward

    @property
    def scorer(self) -> StepScorer:
        """The scorer; in a process this reward function was unpickled into, built from :attr:`recipe`
        on first use (once, under a lock: TRL calls reward functions from worker threads)."""
        if self._scorer is None:
            with self._lock:
                if self._scorer is None:
                    self._scorer = _build(self.recipe)
        assert self._scorer is not None
        return self._scorer

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"], state["_agg"]
        if self.recipe is not None:
            state["_scorer"] = None  # rebuilt from the recipe on first use there
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._agg = get_aggregator(self.aggregate)

    def traces(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[Trace | None]:
        """The trace of every completion (None where it has no step)."""
        if len(prompts) != len(completions):
            raise PrmkitError(f"{len(prompts)} prompts for {len(completions)} completions")
        out: list[Trace | None] = []
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            text = self.splitter.clean(completion_text(c))
            steps = self.splitter.inner.split(text)
            out.append(Trace(id=f"rl-{i}", problem=Problem(prompt_text(p, self.problem_from)), steps=steps, text=text)
                       if steps else None)
        return out

    def step_scores(self, traces: Sequence[Trace | None]) -> list[list[float | None] | None]:
        """Scores of every trace in one scorer call; if the scorer rejects the batch, one by one, so
        a single unscorable trace costs only its own reward (None)."""
        return [r for r, _ in self._scored(traces)]

    def _scored(self, traces: Sequence[Trace | None]) -> list[tuple[list[float | None] | None, str | None]]:
        """Per trace ``(scores, None)`` or ``(None, why)``: one call for all of them
        (:func:`prmkit.scoring.score_each`), a refused trace costing only its own reward."""
        idx = [i for i, t in enumerate(traces) if t is not None]
        out: list[tuple[list[float | None] | None, str | None]] = [(None, "no steps")] * len(traces)
        for i, r in zip(idx, score_each(self.scorer, [traces[i] for i in idx]), strict=True):
            out[i] = r
        return out

    def resolve(self, traces: Sequence[Trace | None], log_metric: Any = None
                ) -> list[list[float | None] | None]:
        """Every trace's step scores with the ``truncation`` policy applied (None: no reward), counted
        into :attr:`stats` and :attr:`last_stats`, logged when anything was not scored."""
        found = self._scored(traces)
        c: Counter[str] = Counter(completions=len(found))
        out: list[list[float | None] | None] = []
        for k, (scores, why) in enumerate(found):
            if scores is None:
                c["no_steps" if why == "no steps" else "rejected"] += 1
                # prmkit's length refusals name max_length (RewardModel.encode_all, a server's reason)
                if why != "no steps" and "max_length" in str(why):
                    c["too_long"] += 1
                if self.truncation == "error" and why != "no steps":
                    raise PrmkitError(f"completion {k}: not scored: {why}")
                out.append(None)
                continue
            missing = sum(s is None for s in scores)
            if missing:
                c["partial"] += 1
                c["unscored_steps"] += missing
                if self.truncation == "error":
                    raise PrmkitError(f"completion {k}: {missing} of {len(scores)} steps not scored "
                                      "(past the PRM's max_length)")
                if self.truncation == "none" or missing == len(scores):
                    out.append(None)
                    continue
            c["scored"] += 1
            out.append(scores)
        self.last_stats = c
        with self._lock:  # Counter.update is not atomic: verl and TRL call from several threads
            self.stats.update(c)
        unscored = c["no_steps"] + c["rejected"]
        if unscored or c["partial"]:
            log.warning("%s: of %d completions, %d without steps, %d rejected by the scorer, %d scored on "
                        "only some steps (%d steps unscored; %d too long for max_length; truncation=%s, "
                        "unscored reward %s)", self.__name__, c["completions"], c["no_steps"], c["rejected"],
                        c["partial"], c["unscored_steps"], c["too_long"], self.truncation, self.unscored_reward)
        if callable(log_metric) and c["completions"]:
            for key, value in (("unscored_frac", unscored), ("partial_frac", c["partial"])):
                try:
                    log_metric(f"{self.__name__}/{key}", value / c["completions"])
                except Exception as e:  # a logging hook must never cost the rewards
                    log.warning("log_metric failed: %s", e)
        return out

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
                 ) -> list[float | None]:
        """One reward per completion, None where it could not be scored. ``kwargs`` (dataset columns,
        ``completion_ids``, ``trainer_state``, ...) are accepted; only TRL's ``log_metric`` is used."""
        rewards: list[float | None] = []
        for scores in self.resolve(self.traces(prompts, completions), kwargs.get("log_metric")):
            value = self._agg(scores) if scores else None
            rewards.append(self.unscored_reward if value is None else self.scale * value + self.shift)
        return rewards
