"""Building any registered labeler from the options every labeling command shares.

``prmkit label`` has one set of options for every method (``--policy``, ``-k``, ``--seed``, ...). A
labeler receives those that its ``__init__`` names, by name, or renamed by its
:attr:`~prmkit.labelers.RolloutLabeler.option_names`; ``-o KEY=VALUE`` extras go to it as they are.
So a new labeler — built in, registered with :func:`~prmkit.labelers.register_labeler`, or a plugin
of the ``prmkit.labelers`` entry-point group — is one file, and the command line needs no change.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
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
                  extra: Mapping[str, Any] | None = None) -> RolloutLabeler:
    """The labeler registered as ``method``, built from the shared options it takes.

    Each parameter of the labeler's ``__init__`` gets the option its ``option_names`` maps it to
    when that is given, else the option of its own name when given (see :data:`LABEL_OPTIONS`);
    options it does not take are left out, so one set of options serves every method. ``extra``
    (``-o KEY=VALUE``) goes to the labeler as it is and wins. An unknown ``method`` is an error
    listing the registered ones; a wrong argument is a :class:`~prmkit.errors.PrmkitError`.

    >>> build_labeler("binary", {"policy": "scripted", "policy_args": {"completions": ["x"]},
    ...                          "k": 2, "retries": 5}, {"max_rollouts": 4}).args["max_rollouts"]
    4
    """
    options = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = sorted(set(options) - set(LABEL_OPTIONS) - set(_POLICY_ARGS.values()))
    if unknown:
        raise PrmkitError(f"unknown labeling option(s) {', '.join(unknown)}; known: "
                          f"{', '.join(LABEL_OPTIONS)}")
    cls = LABELERS.load(method)
    renamed = getattr(cls, "option_names", {}) or {}
    kwargs: dict[str, Any] = {}
    for param in _parameters(cls):
        for option in (renamed.get(param), param):
            if option not in LABEL_OPTIONS:
                continue
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
