"""Building any registered labeler from the options every labeling command shares.

``prmkit label`` has one set of options for every method (``--policy``, ``-k``, ``--seed``, ...). A
labeler receives those that its ``__init__`` names, by name, or renamed by its
:attr:`~prmkit.labelers.RolloutLabeler.option_names`; ``-o KEY=VALUE`` extras go to it as they are.
So a new labeler — built in, registered with :func:`~prmkit.labelers.register_labeler`, or a plugin
of the ``prmkit.labelers`` entry-point group — is one file, and the command line needs no change.
An option the user gave that the chosen labeler does not take is an error naming it (``given``), so
``prmkit label -m symbolic -k 8`` is refused rather than run without its ``-k``.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.labelers._base import LABELERS, RolloutLabeler
from prmkit.labelers._executors import PolicySpec
from prmkit.policies import default_backend

__all__ = ["LABEL_OPTIONS", "build_labeler", "policy_spec"]

#: The options ``prmkit label`` shares between labelers (None or absent: not given, the labeler's
#: own default applies). ``policy`` / ``judge_policy`` are backend names or ``"module:attr"`` (their
#: ``-p`` / ``-j`` arguments in ``policy_args`` / ``judge_args``), a :class:`PolicySpec` or a built
#: policy; a labeler that takes ``policy`` always gets one (default: :func:`default_backend`).
LABEL_OPTIONS = (
    "policy", "judge_policy", "k", "max_rollouts", "after_error", "retries", "max_new_tokens",
    "judge_max_new_tokens", "temperature", "judge_temperature", "top_p", "seed", "shots", "workers",
    "ray_address",
)
_POLICY_ARGS = {"policy": "policy_args", "judge_policy": "judge_args"}


def policy_spec(name: str | None = None, args: Mapping[str, Any] | None = None) -> PolicySpec:
    """The policy a command line names: a backend (None: :func:`~prmkit.policies.default_backend`)
    or ``"module:attr"``, with its ``-p KEY=VALUE`` arguments. A backend that draws its own progress
    bar (it takes ``progress``) gets ``progress=False`` unless ``args`` say otherwise: the labeling
    bar is the one shown. An unknown backend is an error listing the known ones.

    >>> policy_spec("scripted", {"completions": ["The answer is 4."]}).kwargs
    {'completions': ['The answer is 4.']}
    """
    kwargs = dict(args or {})
    spec = PolicySpec(name or default_backend(), kwargs)
    if "progress" not in kwargs and "progress" in _parameters(spec.factory()):
        kwargs["progress"] = False
    return spec


def _parameters(factory: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin or C factory without a signature: nothing to match
        return {}


def _routes(cls: Any) -> dict[str, tuple[str, ...]]:
    """Each ``__init__`` parameter of ``cls`` -> the shared options that feed it, first choice first
    (its ``option_names`` entry, then the option of its own name). A class whose ``__init__`` takes
    ``**kwargs`` hands them to its base class's (the spec labeler's go to the judge labeler's), so
    the base's parameters are its too."""
    renamed = getattr(cls, "option_names", {}) or {}
    params = _parameters(cls)
    routes = {name: tuple(o for o in (renamed.get(name), name) if o in LABEL_OPTIONS)
              for name, p in params.items()
              if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
    if isinstance(cls, type) and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        base = next((c for c in cls.__mro__[1:] if "__init__" in vars(c)), object)
        if base is not object:
            routes = {**_routes(base), **routes}
    return routes


def _taken(cls: Any) -> list[str]:
    """The shared options ``cls`` takes, with ``policy_args`` / ``judge_args`` beside their policy."""
    taken = {o for options in _routes(cls).values() for o in options}
    return [o for option in LABEL_OPTIONS if option in taken
            for o in (option, _POLICY_ARGS.get(option)) if o is not None]


def _refuse_untaken(method: str, cls: Any, given: Collection[str],
                    spelled: Mapping[str, str] | None) -> None:
    taken = _taken(cls)
    untaken = [o for o in given if o not in taken]
    if not untaken:
        return
    spell = dict(spelled or {})
    what = (f"{spell.get(untaken[0], untaken[0])} is not an option" if len(untaken) == 1
            else f"{', '.join(spell.get(o, o) for o in untaken)} are not options")
    takes = ", ".join(spell.get(o, o) for o in taken if spelled is None or o in spelled)
    raise PrmkitError(f"{what} of the {method} labeler ("
                      + (f"it takes: {takes})" if takes else "it takes none of the shared options)"))


def _policy(options: Mapping[str, Any], option: str) -> Any:
    value = options.get(option)
    args = options.get(_POLICY_ARGS[option]) or {}
    if value is None and option != "policy":
        return None
    if value is None or isinstance(value, str):
        return policy_spec(value, args)
    if args:
        raise PrmkitError(f"{_POLICY_ARGS[option]} only apply to a policy given by name, not to "
                          f"{type(value).__name__}")
    return value  # a PolicySpec or a built policy


def build_labeler(method: str, options: Mapping[str, Any] | None = None,
                  extra: Mapping[str, Any] | None = None, *, given: Collection[str] = (),
                  spelled: Mapping[str, str] | None = None) -> RolloutLabeler:
    """The labeler registered as ``method``, built from the shared options it takes.

    Each parameter of the labeler's ``__init__`` gets the option its ``option_names`` maps it to
    when that is given, else the option of its own name when given (see :data:`LABEL_OPTIONS`);
    options it does not take are left out, so one set of options serves every method. ``extra``
    (``-o KEY=VALUE``) goes to the labeler as it is and wins. An unknown ``method`` is an error
    listing the registered ones; a wrong argument is a :class:`~prmkit.errors.PrmkitError`.

    ``given``: the options the user chose (a command line's explicit flags, not its defaults); one
    the labeler does not take is an error naming it and those it does take, before anything is
    built. ``spelled``: how the user writes each option, for that error (``{"k": "--k / -k"}``;
    default: the option's own name); with it, the error lists only options ``spelled`` names.

    >>> build_labeler("binary", {"policy": "scripted", "policy_args": {"completions": ["x"]},
    ...                          "k": 2, "retries": 5}, {"max_rollouts": 4}).args["max_rollouts"]
    4
    >>> build_labeler("symbolic", {"k": 8}, given=["k"])
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: k is not an option of the symbolic labeler (it takes none of the shared options)
    """
    options = {k: v for k, v in (options or {}).items() if v is not None}
    known = (*LABEL_OPTIONS, *_POLICY_ARGS.values())
    unknown = sorted((set(options) | set(given)) - set(known))
    if unknown:
        raise PrmkitError(f"unknown labeling option(s) {', '.join(unknown)}; known: "
                          f"{', '.join(LABEL_OPTIONS)}")
    cls = LABELERS.load(method)
    _refuse_untaken(method, cls, given, spelled)
    kwargs: dict[str, Any] = {}
    for param, routes in _routes(cls).items():
        for option in routes:
            value = _policy(options, option) if option in _POLICY_ARGS else options.get(option)
            if value is not None:
                kwargs[param] = value
                break
    kwargs.update(extra or {})
    labeler = LABELERS.create(method, **kwargs)
    if not isinstance(labeler, RolloutLabeler):
        raise PrmkitError(f"labeler {method!r} ({LABELERS.plugin(method) or LABELERS[method]}) made a "
                          f"{type(labeler).__name__}, not a prmkit.labelers.RolloutLabeler")
    return labeler
