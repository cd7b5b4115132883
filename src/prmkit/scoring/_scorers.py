"""Verifiers by name, for the command line: a checkpoint folder, or the ``scripted`` mock.

- ``model``: a PRM / ORM checkpoint (``path=``, any argument of ``RewardModel.from_pretrained``)
  behind :class:`~prmkit.scoring.PrefixCachingScorer`, which scores exactly as the model does but
  runs shared prefixes once (N candidates of a problem) and reuses earlier calls (beams growing a
  step at a time); ``cache=False`` gives the plain ``RewardModel``;
- ``scripted``: :class:`~prmkit.scoring.ScriptedScorer` (``scores=`` a dict by step text or a list of
  per-trace lists, ``kind=``), for tests and examples;
- ``remote``: a model served by ``prmkit serve`` (``url=``; :class:`~prmkit.serve.RemoteScorer`), also
  what ``model`` makes of a ``path`` that is a URL (``--model http://host:port``);
- ``vllm``: a PRM served by vLLM's ``/pooling`` (``url=``, ``model=``, ``convention=``;
  :class:`~prmkit.serve.VLLMScorer`);
- ``calculator``: :class:`~prmkit.scoring.CalculatorScorer`, a calculator that flags steps whose
  written arithmetic is wrong; alone (``--scorer calculator``), or around a PRM, which ``model`` makes
  with ``check="calculator"`` (``--model DIR -s check=calculator``);
- ``checks``: :class:`~prmkit.scoring.CheckedScorer`, any step checkers of
  :data:`~prmkit.scoring.CHECKERS` (``checks="calculator,sympy,provenance"``), alone
  (``--scorer checks -s checks=sympy``) or around a PRM, which ``model`` makes with ``check=`` those
  names (``--model DIR -s check=calculator,sympy,provenance``): a flagged step scores 0.

>>> get_scorer("scripted", scores={"a": 0.5}).kind
'prm'
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.scoring._protocol import StepScorer

__all__ = ["SCORERS", "get_scorer", "register_scorer", "model_scorer", "load_scorer"]


def model_scorer(path: str, *, cache: bool = True, batch_size: int = 8, max_cached_tokens: int = 16384,
                 check: str | None = None, **model_args: Any) -> StepScorer:
    """A checkpoint as a scorer (see the module docs); a URL (``http://host:port``) is a model served
    by ``prmkit serve`` (:class:`~prmkit.serve.RemoteScorer`, built from the other arguments).
    ``check="calculator"``: its step scores with the steps whose written arithmetic is wrong set to 0
    (:class:`~prmkit.scoring.CalculatorScorer`); ``check=`` other checker names, comma-separated
    (``"calculator,sympy,provenance"``): its step scores with every step one of those checkers flags
    set to 0 (:class:`~prmkit.scoring.CheckedScorer`)."""
    if check is not None:
        if check == "calculator":  # exactly as before the checker registry: golden outputs pin it
            from prmkit.scoring._calculator import CalculatorScorer

            return CalculatorScorer(model_scorer(path, cache=cache, batch_size=batch_size,
                                                 max_cached_tokens=max_cached_tokens, **model_args))
        from prmkit.scoring._checkers import CheckedScorer, get_checkers

        checkers = get_checkers(check)  # unknown names fail here, before the model loads
        return CheckedScorer(model_scorer(path, cache=cache, batch_size=batch_size,
                                          max_cached_tokens=max_cached_tokens, **model_args), checkers)
    if _is_url(path):
        return get_scorer("remote", url=str(path), **model_args)
    from prmkit.models import RewardModel

    rm = RewardModel.from_pretrained(path, **model_args)
    if not cache:
        return rm
    from prmkit.scoring._prefix import PrefixCachingScorer

    return PrefixCachingScorer(rm, batch_size=batch_size, max_cached_tokens=max_cached_tokens)


def calculator_scorer(path: str | None = None, *, flagged: float = 0.0, **model_args: Any) -> StepScorer:
    """The registry's ``calculator`` (:class:`~prmkit.scoring.CalculatorScorer`): alone, or around the
    model at ``path`` (any ``model`` argument)."""
    from prmkit.scoring._calculator import CalculatorScorer

    if path is None:
        if model_args:
            raise PrmkitError(f"the calculator alone takes no model arguments ({', '.join(model_args)}); "
                              "give the PRM with --model DIR -s check=calculator")
        return CalculatorScorer(flagged=flagged)
    return CalculatorScorer(model_scorer(path, **model_args), flagged=flagged)


def checks_scorer(path: str | None = None, *, checks: str = "calculator,sympy,provenance",
                  flagged: float = 0.0, **model_args: Any) -> StepScorer:
    """The registry's ``checks`` (:class:`~prmkit.scoring.CheckedScorer`): the step checkers named in
    ``checks`` (comma-separated, :data:`~prmkit.scoring.CHECKERS`), alone or around the model at
    ``path`` (any ``model`` argument)."""
    from prmkit.scoring._checkers import CheckedScorer, get_checkers

    checkers = get_checkers(checks)
    if path is None:
        if model_args:
            raise PrmkitError(f"the checks alone take no model arguments ({', '.join(model_args)}); "
                              f"give the PRM with --model DIR -s check={checks}")
        return CheckedScorer(None, checkers, flagged=flagged)
    return CheckedScorer(model_scorer(path, **model_args), checkers, flagged=flagged)


def _is_url(path: Any) -> bool:
    """``http://...`` or ``https://...``; one slash is enough, since ``pathlib`` (the CLI's ``--model``
    is a path) folds ``http://host`` to ``http:/host``. The remote scorer comes through the registry,
    so scoring never imports serve (which imports scoring)."""
    return re.match(r"^https?:/", str(path)) is not None


#: name -> "module:attr" of a scorer factory.
SCORERS = Registry("scorer", {
    "model": "prmkit.scoring._scorers:model_scorer",
    "scripted": "prmkit.scoring._scripted:ScriptedScorer",
    "likelihood": "prmkit.scoring._likelihood:LikelihoodScorer",
    "remote": "prmkit.serve._remote:RemoteScorer",
    "vllm": "prmkit.serve._vllm:VLLMScorer",
    "calculator": "prmkit.scoring._scorers:calculator_scorer",
    "checks": "prmkit.scoring._scorers:checks_scorer",
}, group="prmkit.scorers")


def register_scorer(name: str, target: str) -> None:
    """Register a scorer factory as ``"module:attr"`` under ``name``."""
    SCORERS.register(name, target)


def get_scorer(name: str, **kwargs: Any) -> StepScorer:
    """The scorer registered as ``name``, built with ``kwargs``."""
    return SCORERS.create(name, **kwargs)


def load_scorer(name: str = "model", path: str | os.PathLike | None = None,
                options: dict[str, Any] | None = None, *, batch_size: int = 8,
                allow_pickle: bool = False) -> StepScorer:
    """The scorer a command line names: ``model`` needs ``path`` (a checkpoint folder; ``batch_size``
    unless ``options`` set one; ``allow_pickle`` lets it read pickle-only weights, see
    :meth:`~prmkit.models.RewardModel.from_pretrained`), any other registered scorer is built from
    ``options`` (``-s KEY=VALUE``) alone."""
    kwargs = dict(options or {})
    if name == "model":
        if path is None:
            raise PrmkitError("give the checkpoint folder with --model DIR")
        from prmkit.models import SHIPPED_MODELS

        if _is_url(path):  # a model served by `prmkit serve`
            return get_scorer("model", path=str(path), **kwargs) if "check" in kwargs \
                else get_scorer("remote", url=str(path), **kwargs)
        if not Path(path).exists() and str(path) not in SHIPPED_MODELS:
            raise PrmkitError(f"{path}: no such folder (shipped models: {', '.join(SHIPPED_MODELS)})")
        kwargs.setdefault("batch_size", batch_size)
        if allow_pickle:
            kwargs["allow_pickle"] = True
        kwargs["path"] = str(path)
    elif path is not None:
        raise PrmkitError(f"--model is for --scorer model, not {name!r}")
    return get_scorer(name, **kwargs)
