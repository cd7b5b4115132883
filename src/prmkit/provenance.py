"""Typed provenance: one dataclass per stage kind, serialised exactly as the ``args`` prmkit writes.

A stage records what it did with ``trace.add_provenance(entry)``; a reader gets the entry back with
``provenance.typed`` (or :func:`parse`) and reads fields, not dict keys:

>>> from prmkit.trace import Problem, Trace
>>> t = Trace(id="t", problem=Problem("1+1?"))
>>> t.add_provenance(GenerateProvenance("hf", policy=PolicyRef("hf", "smollm2-135m"), splitter="newline"))
>>> t.provenance[0].args
{'policy': {'backend': 'hf', 'model': 'smollm2-135m'}, 'splitter': 'newline'}
>>> t.provenance[0].typed.policy.model
'smollm2-135m'

``to_dict()`` is the entry's ``args``; ``from_dict(args, name)`` reads any entry written before:
a missing key is None, a key it does not know (or whose value is not of the field's type) is kept
in ``extra`` (``settings`` for search and guided), and an entry read from a dict is written back with
that dict's keys, in its order, null values included, so ``E.from_dict(d, n).to_dict() == d``.
:class:`TrainProvenance` is the record beside a trained reward model (``prmkit_rm.json``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

__all__ = [
    "REDACTED", "is_secret_name", "redact_secrets", "redact_url", "redact_text", "secrets_of",
    "PolicyRef", "SamplingRef", "PromptRef", "GenerateProvenance", "LabelArgs", "LabelProvenance", "ScoreProvenance", "SearchProvenance",
    "GuidedProvenance", "SelectProvenance", "TrainProvenance", "STAGE_ENTRIES", "parse",
]


# -- secrets -------------------------------------------------------------------------------------------
# A policy or judge argument that authenticates (``-p api_key=...``) must reach the backend but never a
# file, a log or a message. Every record that keeps arguments (``StepLabel.args``, ``Provenance.args``,
# the label store's run setup, a ``PolicySpec`` described) passes them through :func:`redact_secrets`.

#: What a secret's value is replaced by.
REDACTED = "<redacted>"

_SECRET_WORDS = {"authorization", "auth", "password", "passwd", "passphrase", "secret", "headers",
                 "header", "cookie", "cookies", "credential", "credentials", "apikey", "bearer"}
#: ``*_token`` names that are vocabulary, not credentials (``eos_token``, ``placeholder_token``).
_VOCAB_TOKENS = {"bos", "eos", "pad", "unk", "sep", "cls", "mask", "placeholder", "stop", "step",
                 "start", "end", "special", "label", "reward", "verdict", "good", "bad", "positive",
                 "negative", "split", "image"}


def is_secret_name(name: str) -> bool:
    """Whether an argument called ``name`` holds a credential (case-insensitive): ``api_key``,
    ``token`` / ``hf_token`` / ``access_token``, ``authorization``, ``password``, ``secret``,
    ``headers``, ``cookie``, ``credentials``, ...; counts such as ``max_new_tokens`` and vocabulary
    such as ``eos_token`` are not.

    >>> [is_secret_name(n) for n in ("api_key", "X-Api-Key", "hf_token", "Authorization", "headers")]
    [True, True, True, True, True]
    >>> [is_secret_name(n) for n in ("max_new_tokens", "eos_token", "tokenizer", "base_url", "key")]
    [False, False, False, False, False]
    """
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()) if w]
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if any(a in ("api", "private", "access", "client", "signing") and b == "key"
           for a, b in zip(words, words[1:], strict=False)):
        return True
    return words[-1] == "token" and not (len(words) == 2 and words[0] in _VOCAB_TOKENS)


def redact_secrets(value: Any) -> Any:
    """``value`` with the value of every key :func:`is_secret_name` flags replaced by
    :data:`REDACTED`, at any depth of dicts and lists; other values are kept as they are (the same
    objects where nothing was redacted, so a record without secrets is written unchanged).

    >>> redact_secrets({"policy": {"kwargs": {"api_key": "sk-1", "model": "m"}}, "max_new_tokens": 64})
    {'policy': {'kwargs': {'api_key': '<redacted>', 'model': 'm'}}, 'max_new_tokens': 64}

    A URL's user info is a secret too:

    >>> redact_secrets({"base_url": "http://me:sk-1@127.0.0.1:8000/v1"})
    {'base_url': 'http://<redacted>@127.0.0.1:8000/v1'}
    """
    if isinstance(value, Mapping):
        out = {k: (REDACTED if isinstance(k, str) and is_secret_name(k) and v is not None
                   else redact_secrets(v)) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) and isinstance(value, dict) else out
    if isinstance(value, list):
        items = [redact_secrets(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, str) and "@" in value and _URL_USERINFO.match(value):
        return _URL_USERINFO.sub(rf"\1{REDACTED}@", value, count=1)  # http://user:key@host -> <redacted>@host
    return value


#: A URL's scheme and user info (``user:key@``), which can hold a secret.
_URL_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
#: The same anywhere in a text (an error message that quotes the URL it failed on).
_URL_USERINFO_ANYWHERE = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"<>]+@")
#: Shorter secrets are not searched for in text: "ab" would redact half of any message.
_MIN_SECRET_LEN = 4


def redact_url(url: str) -> str:
    """``url`` with its user info (``user:key@``) replaced by :data:`REDACTED`: the form of a URL
    that may be recorded, printed or put in a message.

    >>> redact_url("https://me:sk-1@api.example.com/v1"), redact_url("http://127.0.0.1:8000/v1")
    ('https://<redacted>@api.example.com/v1', 'http://127.0.0.1:8000/v1')
    """
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", url, count=1) if "@" in url else url


def secrets_of(args: Any) -> list[str]:
    """Every secret in a backend's arguments, longest first: the values of the keys
    :func:`is_secret_name` flags (at any depth) and the user info of any URL among the values (whole,
    its password, and the ``user:password`` pair as HTTP basic auth sends it, base64-encoded), so
    :func:`redact_text` can remove them from text a server sent back.

    >>> secrets_of({"base_url": "http://me:sk-1@h/v1", "api_key": "sk-2", "model": "m"})
    ['bWU6c2stMQ==', 'me:sk-1', 'sk-1', 'sk-2']
    """
    import base64
    from urllib.parse import unquote

    found: set[str] = set()

    def walk(v: Any, secret: bool) -> None:
        if isinstance(v, Mapping):
            for k, x in v.items():
                walk(x, secret or (isinstance(k, str) and is_secret_name(k)))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, secret)
        elif isinstance(v, str):
            if secret:
                found.add(v)
                if v.lower().startswith(("bearer ", "basic ")):
                    found.add(v.split(None, 1)[1])
            m = _URL_USERINFO.match(v) if "@" in v else None
            if m:
                info = v[len(m.group(1)):m.end() - 1]
                user, _, password = info.partition(":")
                for form in {info, unquote(info)}:
                    found.add(form)
                    found.add(base64.b64encode(unquote(form).encode()).decode())
                if password:
                    found.update({password, unquote(password)})
        elif secret and v is not None and not isinstance(v, (bool, int, float)):
            found.add(str(v))

    walk(args, False)
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LEN), key=lambda s: (-len(s), s))


def redact_text(text: str, secrets: Any = ()) -> str:
    """``text`` (an error body, a server's message, a model's answer) with the user info of every URL
    in it and every string of ``secrets`` (say :func:`secrets_of` a backend's arguments) replaced by
    :data:`REDACTED`: what a server sends back may repeat the key it was sent.

    >>> redact_text("HTTP 401 from http://me:sk-1@h/v1: bad key Bearer sk-2", ["sk-2"])
    'HTTP 401 from http://<redacted>@h/v1: bad key Bearer <redacted>'
    """
    if not isinstance(text, str) or not text:
        return text
    if "@" in text:
        text = _URL_USERINFO_ANYWHERE.sub(rf"\1{REDACTED}@", text)
    for s in sorted((s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET_LEN),
                    key=len, reverse=True):
        if s in text:
            text = text.replace(s, REDACTED)
    return text


@dataclass
class _Entry:
    """Shared (de)serialisation. A subclass lists its fields' keys in ``_ORDER`` (the order its writer
    uses; ``"*"`` marks where the keys of its catch-all dict go) and which keys its writer writes
    even when None (``_ALWAYS``)."""

    _ORDER: ClassVar[tuple[str, ...]] = ("*",)
    _ALWAYS: ClassVar[tuple[str, ...]] = ()
    _REST: ClassVar[str] = "extra"          # the catch-all dict field
    _NESTED: ClassVar[dict[str, type]] = {}  # key -> entry type of a nested dict (PolicyRef)

    #: The keys of the dict this entry was read from, in order (None: built in code). They are
    #: written back in that order, with their null values.
    read_keys: tuple[str, ...] | None = field(default=None, kw_only=True, compare=False, repr=False)

    def _known(self) -> dict[str, Any]:
        """Serialised key -> value of every field but the catch-all (nested entries as dicts)."""
        out = {}
        for f in fields(self):
            if f.name in ("name", "read_keys", self._REST):
                continue
            v = getattr(self, f.name)
            out[f.name] = v.to_dict() if isinstance(v, _Entry) else v
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ``args`` dict, as prmkit has always written it for this stage."""
        keys = self.read_keys
        always = self._always()
        values = {k: v for k, v in self._known().items()
                  if v is not None or (k in keys if keys is not None else k in always)}
        values.update(getattr(self, self._REST))  # a known key with a value of another type: as read
        star = self._ORDER.index("*")
        if keys is not None:
            rank = {k: i for i, k in enumerate(keys)}
            order = sorted(values, key=lambda k: rank.get(k, len(rank)))
        else:
            rank = {k: i for i, k in enumerate(self._ORDER)}
            order = sorted(values, key=lambda k: rank.get(k, star))
        return {k: _copy(values[k]) for k in order}

    def _always(self) -> tuple[str, ...]:
        """Keys written even when None, in an entry built in code."""
        return self._ALWAYS

    @classmethod
    def _read(cls, d: Any, types: Mapping[str, type | tuple[type, ...]]) -> tuple[dict[str, Any], dict]:
        """``(field values, rest)``: each key of ``types`` whose value is None or of its type(s)
        (nested entries parsed), everything else in ``rest``."""
        d = d if isinstance(d, Mapping) else {}
        got: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for k, v in d.items():
            want = types.get(k)
            if want is not None and (v is None or (isinstance(v, want) and not _is_bool_for_int(v, want))):
                nested = cls._NESTED.get(k)
                got[k] = nested.from_dict(v) if nested is not None and v is not None else v
            else:
                rest[k] = v
        return got, rest


def _is_bool_for_int(v: Any, want: Any) -> bool:
    return isinstance(v, bool) and want in (int, (int, float))


def _copy(v: Any) -> Any:
    """A shallow copy of a container, so a written entry does not share dicts with its writer."""
    return dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v


@dataclass
class PolicyRef(_Entry):
    """A policy as its ``describe()`` records it: ``backend``, ``model`` id, LoRA ``adapter``, and the
    backend's other settings (device, dtype, base_url, ...) in ``extra``."""

    backend: str | None = None
    model: str | None = None
    adapter: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _ORDER = ("backend", "model", "adapter", "*")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PolicyRef:
        """Read a policy's ``describe()`` dict."""
        got, rest = cls._read(d, {"backend": str, "model": str, "adapter": str})
        return cls(**got, extra=rest, read_keys=tuple(d))


@dataclass
class SamplingRef(_Entry):
    """How a policy sampled, as :meth:`~prmkit.policies.SamplingParams.to_dict` records it: ``n``
    completions per request, ``max_new_tokens``, ``temperature``, ``top_p``, ``stop`` strings and
    ``seed``; other keys in ``extra``."""

    n: int | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _ORDER = ("n", "max_new_tokens", "temperature", "top_p", "stop", "seed", "*")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SamplingRef:
        """Read a ``SamplingParams.to_dict()`` dict."""
        got, rest = cls._read(d, {"n": int, "max_new_tokens": int, "temperature": (int, float),
                                  "top_p": (int, float), "stop": list, "seed": int})
        return cls(**got, extra=rest, read_keys=tuple(d))


@dataclass
class PromptRef(_Entry):
    """The prompt a trace was generated with, as the prompt builder's ``describe()`` records it:
    ``source`` (``arith``, ``dataset``, ...), worked examples (``shots``) and the ``system`` prompt;
    other keys in ``extra``."""

    source: str | None = None
    shots: int | None = None
    system: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _ORDER = ("source", "shots", "system", "*")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PromptRef:
        """Read a ``PromptBuilder.describe()`` dict."""
        got, rest = cls._read(d, {"source": str, "shots": int, "system": str})
        return cls(**got, extra=rest, read_keys=tuple(d))


@dataclass
class GenerateProvenance(_Entry):
    """``generate``: traces sampled from a policy. ``name`` is the policy's name; ``sampling`` how it
    sampled (:class:`SamplingRef`), ``prompt`` the prompt it was given (:class:`PromptRef`),
    ``splitter`` how the completion was cut into steps. ``sampling`` and ``prompt`` may be given as
    the dicts ``SamplingParams.to_dict()`` and ``PromptBuilder.describe()`` return."""

    name: str
    policy: PolicyRef | None = None
    sampling: SamplingRef | None = None
    prompt: PromptRef | None = None
    splitter: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    stage: ClassVar[str] = "generate"
    _ORDER = ("policy", "sampling", "prompt", "splitter", "*")
    _NESTED = {"policy": PolicyRef, "sampling": SamplingRef, "prompt": PromptRef}

    def __post_init__(self) -> None:
        if isinstance(self.sampling, Mapping):
            self.sampling = SamplingRef.from_dict(self.sampling)
        if isinstance(self.prompt, Mapping):
            self.prompt = PromptRef.from_dict(self.prompt)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str) -> GenerateProvenance:
        got, rest = cls._read(d, {"policy": dict, "sampling": dict, "prompt": dict, "splitter": str})
        return cls(name, **got, extra=rest, read_keys=tuple(d or {}))


@dataclass
class LabelArgs(_Entry):
    """A labeler's arguments as it records them (``labeler.args``): the settings rollout and judge
    labelers share are fields — the ``policy`` (its name and model), rollouts per prefix ``k``,
    ``max_new_tokens``, ``temperature``, ``top_p``, ``seed``, worked examples (``shots``), how answers
    are compared (``answer_method``), a judge's ``retries``, a search's ``max_rollouts`` and what the
    steps after the first error get (``after_error``); a labeler's own settings (``mc``'s ``sources``,
    ``omegaprm``'s ``search``, a plugin's) stay in ``extra``, no schema per labeler needed. Written
    back in the order it was given or read.

    >>> a = LabelArgs.from_dict({"sources": ["mc_hard"], "k": 8, "seed": 0, "temperature": 0.7})
    >>> (a.k, a.seed, a.extra), a["k"], a.to_dict() == {"sources": ["mc_hard"], "k": 8, "seed": 0, "temperature": 0.7}
    ((8, 0, {'sources': ['mc_hard']}), 8, True)
    """

    policy: PolicyRef | None = None
    k: int | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    shots: int | None = None
    answer_method: str | None = None
    retries: int | None = None
    max_rollouts: int | None = None
    after_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _NESTED = {"policy": PolicyRef}
    _TYPES: ClassVar[dict[str, Any]] = {
        "policy": dict, "k": int, "max_new_tokens": int, "temperature": (int, float), "top_p": (int, float),
        "seed": int, "shots": int, "answer_method": str, "retries": int, "max_rollouts": int,
        "after_error": str}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LabelArgs:
        """Read a labeler's ``args`` dict (any labeler's, a plugin's too)."""
        got, rest = cls._read(d, cls._TYPES)
        return cls(**got, extra=rest, read_keys=tuple(d or {}))

    # The arguments read as the dict they were written as, for code written before they were typed.
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)


@dataclass
class LabelProvenance(_Entry):
    """``label``: step labels from a labeler. ``name`` is the labeler's name; ``args`` its arguments
    (:class:`LabelArgs`, recorded under ``"args"``; a dict is read into one); ``policies`` the policy
    behind each channel (``rollout``, ``judge``; None where the channel never started), recorded as
    ``"<channel>_policy"``. A labeler without channels (the symbolic checker) records its settings at
    the top level: they are in ``extra``.

    The label sources, models and rollouts of each step are on the step labels themselves
    (:class:`~prmkit.trace.StepLabel`), the cost in ``trace.meta["labeling"]``.
    """

    name: str
    args: LabelArgs | None = None
    policies: dict[str, PolicyRef | None] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    stage: ClassVar[str] = "label"
    _ORDER = ("args", "*")
    _NESTED = {"args": LabelArgs}

    def __post_init__(self) -> None:
        if isinstance(self.args, Mapping):
            self.args = LabelArgs.from_dict(self.args)

    @property
    def judge_policy(self) -> PolicyRef | None:
        """The policy behind the ``judge`` channel (an LLM judge), if any."""
        return self.policies.get("judge")

    def _known(self) -> dict[str, Any]:
        out: dict[str, Any] = {"args": None if self.args is None else self.args.to_dict()}
        out.update({f"{ch}_policy": p.to_dict() if p is not None else None for ch, p in self.policies.items()})
        return out

    def _always(self) -> tuple[str, ...]:
        # A channel's key is written even when its policy is None (as the engine always did).
        return tuple(f"{ch}_policy" for ch in self.policies)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str) -> LabelProvenance:
        got, rest = cls._read(d, {"args": dict})
        policies: dict[str, PolicyRef | None] = {}
        for k in list(rest):
            v = rest[k]
            if k.endswith("_policy") and len(k) > len("_policy") and (v is None or isinstance(v, Mapping)):
                policies[k[:-len("_policy")]] = None if v is None else PolicyRef.from_dict(v)
                del rest[k]
        return cls(name, **got, policies=policies, extra=rest, read_keys=tuple(d or {}))


@dataclass
class ScoreProvenance(_Entry):
    """``score``: step (PRM) or trace (ORM) scores. ``name`` is the score key the scores were written
    under; ``scorer`` the scoring implementation (``prefix_caching``), ``model`` the reward model's
    name, ``kind`` ``prm`` / ``orm``, ``convention`` and ``precision`` as the model used them,
    ``aggregate`` how step scores became the trace score (None for an ORM). A scorer's other settings
    (batch size, cache sizes, ...) are in ``extra``."""

    name: str
    scorer: str | None = None
    model: str | None = None
    kind: str | None = None
    convention: str | None = None
    precision: str | None = None
    aggregate: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    stage: ClassVar[str] = "score"
    _ORDER = ("scorer", "model", "kind", "convention", "*", "precision", "aggregate")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str) -> ScoreProvenance:
        got, rest = cls._read(d, {k: str for k in ("scorer", "model", "kind", "convention", "precision",
                                                   "aggregate")})
        return cls(name, **got, extra=rest, read_keys=tuple(d or {}))


@dataclass
class SearchProvenance(_Entry):
    """``search``: the best path of a step-level search. ``name`` is the method (``beam``, ...);
    ``policy`` expanded the paths, ``scorer`` (of ``kind`` prm / orm) scored them, ``select`` picked
    the returned one; ``settings`` are the method's and the search config's settings."""

    name: str
    policy: PolicyRef | None = None
    scorer: str | None = None
    kind: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    select: str | None = None

    stage: ClassVar[str] = "search"
    _ORDER = ("policy", "scorer", "kind", "*", "select")
    _REST = "settings"
    _NESTED = {"policy": PolicyRef}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str) -> SearchProvenance:
        got, rest = cls._read(d, {"policy": dict, "scorer": str, "kind": str, "select": str})
        return cls(name, **got, settings=rest, read_keys=tuple(d or {}))


@dataclass
class GuidedProvenance(_Entry):
    """``guided``: a trace from scorer-guided generation (rejection, ...). ``name`` is the method;
    ``policy`` sampled, ``scorer`` (its name) judged; ``settings`` are the method's settings."""

    name: str
    policy: PolicyRef | None = None
    scorer: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    stage: ClassVar[str] = "guided"
    _ORDER = ("policy", "scorer", "*")
    _REST = "settings"
    _NESTED = {"policy": PolicyRef}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str) -> GuidedProvenance:
        got, rest = cls._read(d, {"policy": dict, "scorer": str})
        return cls(name, **got, settings=rest, read_keys=tuple(d or {}))


@dataclass
class SelectProvenance(_Entry):
    """``select``: a trace picked among a problem's candidates. ``name`` is the method (``argmax``,
    ``majority``, ...); ``aggregate`` made trace scores of step scores, ``key`` named the scores read
    (both written, None when the method uses none)."""

    name: str
    aggregate: str | None = None
    key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    stage: ClassVar[str] = "select"
    _ORDER = ("aggregate", "key", "*")
    _ALWAYS = ("aggregate", "key")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str) -> SelectProvenance:
        got, rest = cls._read(d, {"aggregate": str, "key": str})
        return cls(name, **got, extra=rest, read_keys=tuple(d or {}))


@dataclass
class TrainProvenance(_Entry):
    """The record beside a reward model prmkit saved (``prmkit_rm.json``): the model's ``name``,
    ``kind`` (prm / orm; None: not recorded, read as prm), ``convention`` (its dict), ``max_length``;
    and, from prmkit's trainer, ``train_config`` (the :class:`~prmkit.train.TrainConfig` dict) and
    ``steps`` (optimizer steps). The trainer's other records (data reports, evaluation, precision,
    ...) are in ``extra``. The config's backbone, label source and data read as fields below."""

    name: str | None = None
    kind: str | None = None
    convention: dict[str, Any] | str | None = None
    max_length: int | None = None
    train_config: dict[str, Any] | None = None
    steps: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    stage: ClassVar[str] = "train"
    _ORDER = ("kind", "convention", "max_length", "name", "train_config", "train_data", "eval_data",
              "eval", "steps", "*")
    _ALWAYS = ("kind", "convention", "max_length", "name")

    def _known(self) -> dict[str, Any]:
        return {"name": self.name, **super()._known()}

    @property
    def base_model(self) -> str | None:
        """The backbone trained on (``train_config.model``: a path, hub id or prmkit alias)."""
        return _config_str(self.train_config, "model")

    @property
    def label_source(self) -> str | None:
        """The step-label source trained on (``train_config.label_source``; None: each step's first)."""
        return _config_str(self.train_config, "label_source")

    @property
    def data(self) -> list[str]:
        """The training trace files (``train_config.train``)."""
        files = (self.train_config or {}).get("train")
        return [str(x) for x in files] if isinstance(files, list) else []

    @property
    def convention_name(self) -> str | None:
        """The convention's registered name."""
        conv = self.convention
        name = conv.get("name") if isinstance(conv, Mapping) else conv
        return str(name) if name else None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainProvenance:
        """Read a ``prmkit_rm.json`` object."""
        got, rest = cls._read(d, {"name": str, "kind": str, "convention": (dict, str), "max_length": int,
                                  "train_config": dict, "steps": int})
        return cls(**got, extra=rest, read_keys=tuple(d or {}))


def _config_str(cfg: Mapping[str, Any] | None, key: str) -> str | None:
    v = (cfg or {}).get(key)
    return None if v is None or v == "" else str(v)


#: The typed entry of each stage kind: ``stage -> class``.
STAGE_ENTRIES: dict[str, type] = {c.stage: c for c in (
    GenerateProvenance, LabelProvenance, ScoreProvenance, SearchProvenance, GuidedProvenance,
    SelectProvenance)}

Entry = GenerateProvenance | LabelProvenance | ScoreProvenance | SearchProvenance | GuidedProvenance \
    | SelectProvenance


def parse(stage: str, name: str, args: Mapping[str, Any] | None) -> Entry | None:
    """The typed entry of a provenance record, or None for a stage without one (``import``,
    ``split``, ``derive``, ...: their ``name`` says all a reader uses).

    >>> parse("select", "argmax", {"aggregate": "min", "key": "prm"})
    SelectProvenance(name='argmax', aggregate='min', key='prm', extra={})
    """
    cls = STAGE_ENTRIES.get(stage)
    return None if cls is None else cls.from_dict(args or {}, name)
