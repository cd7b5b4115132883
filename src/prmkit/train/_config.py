"""Training configuration: typed dataclasses, YAML files, dotted ``key=value`` overrides.

Every problem in a config (unknown keys, wrong types, bad values) is reported at once, not one per
run. Example configs ship with prmkit (``prmkit train prm --config tiny``); see :func:`example_configs`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.models import PRECISIONS
from prmkit.train._data import TOOL_CHECKS

__all__ = ["LoraSettings", "TrainConfig", "ConfigError", "load_config", "example_configs", "TRAIN_PRECISIONS"]

#: The values a training ``precision`` takes: scoring's, and ``int8`` (:mod:`prmkit.train._int8`).
TRAIN_PRECISIONS = (*PRECISIONS[:-1], "int8", PRECISIONS[-1])


class ConfigError(PrmkitError):
    """All the problems found in a config, one per line."""

    def __init__(self, problems: list[str], source: str | None = None) -> None:
        self.problems = problems
        head = f"invalid config {source}" if source else "invalid config"
        super().__init__(head + ":\n  " + "\n  ".join(problems))


@dataclass
class LoraSettings:
    """LoRA through ``peft``; the new score head is trained in full (``modules_to_save``)."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"


@dataclass
class TrainConfig:
    """One PRM or ORM training run. Fields are grouped: what, data and labels, optimisation, run."""

    # what
    kind: str = "prm"                 #: prm (step labels) or orm (one outcome label per trace)
    model: str = "tiny"               #: path, hub id, smollm2/minilm/tiny, or a shipped name
    convention: Any = "prmkit"        #: a registered convention name or a dict of its fields
    num_labels: int | None = None     #: classifier heads: 2 (softmax) or 1 (sigmoid); None: convention's, else 2
    lora: LoraSettings | None = None  #: LoRA settings; None trains every weight
    causal: bool = False              #: encoder backbones: attend to earlier tokens only (see RewardModel.from_backbone)
    trust_remote_code: bool = False
    # data and labels
    train: list[str] = field(default_factory=list)  #: trace files (any prmkit format)
    eval: list[str] = field(default_factory=list)   #: held-out trace files
    eval_fraction: float = 0.0        #: without eval files: hold out this fraction of train by problem
    format: str | None = None         #: input format (default: detected per file)
    label_source: str | None = None   #: which StepLabel source to train on (None: each step's first)
    neutral: str = "positive"         #: neutral (0) hard labels: positive / negative / ignore
    soft_labels: bool = False         #: train on soft label values (Monte Carlo probabilities)
    outcome: str = "auto"             #: ORM target: outcome / answer / steps / auto
    max_traces: int | None = None     #: use only the first N training traces
    #: train on a random sample of N training traces (drawn with ``seed``, after the held-out split, so
    #: the held-out traces stay those of the whole corpus): a curve against corpus size apart from the
    #: steps, or several epochs over fewer traces at the budget of one pass over more
    sample_traces: int | None = None
    #: PRM only: "calculator" leaves out of the loss every label from the first step whose written
    #: arithmetic the calculator flags (the check settles those when the PRM is used with it)
    tool_check: str | None = None
    # optimisation
    max_length: int = 1024
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 2e-5
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0
    max_grad_norm: float = 1.0
    epochs: float = 1.0
    max_steps: int = -1               #: optimizer steps; overrides epochs when > 0
    bucketing: bool = True            #: batches of similar length (little compute on padding)
    disable_dropout: bool = True
    precision: str = "auto"           #: compute: fp32, bf16 (autocast; fp32 weights), int8 (the backbone's products; CPU) or auto (bf16 where native)
    dtype: str | None = None          #: weight storage: float32 (None: on every device) / bfloat16 / float16
    # run
    output_dir: str = "runs/prm"
    eval_every: int = 0               #: optimizer steps between evaluations (0: at the end only)
    save_every: int = 0               #: optimizer steps between resumable checkpoints (0: none)
    keep_checkpoints: int = 2
    resume: bool = True               #: continue from the newest checkpoint in output_dir
    keep_final_checkpoint: bool = False  #: keep a checkpoint of the last step, so a larger max_steps / epochs can extend the run later
    log_every: int = 10
    seed: int = 0
    progress: bool = True

    def validate(self) -> list[str]:
        problems = []
        if self.kind not in ("prm", "orm"):
            problems.append(f"kind: must be prm or orm, got {self.kind!r}")
        if self.neutral not in ("positive", "negative", "ignore"):
            problems.append(f"neutral: must be positive, negative or ignore, got {self.neutral!r}")
        if self.outcome not in ("auto", "outcome", "answer", "steps"):
            problems.append(f"outcome: must be auto, outcome, answer or steps, got {self.outcome!r}")
        if self.tool_check not in (None, *TOOL_CHECKS):
            problems.append(f"tool_check: must be {', '.join(TOOL_CHECKS)} or null, got {self.tool_check!r}")
        elif self.tool_check is not None and self.kind != "prm":
            problems.append("tool_check: a tool checks steps; an ORM has none to leave to it")
        if self.precision not in TRAIN_PRECISIONS:
            problems.append(f"precision: must be {', '.join(TRAIN_PRECISIONS[:-1])} or {TRAIN_PRECISIONS[-1]}, "
                            f"got {self.precision!r}")
        if self.num_labels not in (None, 1, 2):
            problems.append(f"num_labels: must be 1 or 2, got {self.num_labels}")
        if not self.train:
            problems.append("train: give at least one trace file")
        for name in ("batch_size", "grad_accum", "max_length"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.eval_fraction < 1:
            problems.append(f"eval_fraction: must be in [0, 1), got {self.eval_fraction}")
        if self.lr <= 0:
            problems.append(f"lr: must be positive, got {self.lr}")
        if self.max_steps <= 0 and self.epochs <= 0:
            problems.append("epochs or max_steps must be positive")
        if self.sample_traces is not None and self.sample_traces < 1:
            problems.append("sample_traces: must be at least 1 (or null: every trace), "
                            f"got {self.sample_traces}")
        return problems

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- loading --------------------------------------------------------------------------------------------

def example_configs() -> dict[str, Path]:
    """The configs shipped with prmkit, by name (``tiny``, ``minilm``, ``smollm2-lora``, ...)."""
    folder = Path(__file__).parent / "configs"
    return {p.stem: p for p in sorted(folder.glob("*.yaml"), key=lambda p: p.stem)}  # by name: a-b before a-b-c


def _yaml():
    try:
        import yaml
    except ImportError:
        from prmkit.errors import MissingDependencyError

        raise MissingDependencyError("pyyaml", "train", "training configs") from None
    return yaml


def load_config(path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                **values: Any) -> TrainConfig:
    """A :class:`TrainConfig` from a YAML file (or a shipped config's name), then ``key=value``
    overrides (dotted for nested fields: ``lora.r=8``; values parsed as YAML), then keyword values.

    >>> load_config(None, ["train=[a.jsonl]", "lora.r=4", "lr=1e-4"]).lora.r
    4
    >>> load_config(None, ["train=[a.jsonl]", "batch=3", "lr=fast"])
    Traceback (most recent call last):
    ...
    prmkit.train._config.ConfigError: invalid config:
      batch: unknown key (did you mean batch_size?)
      lr: expected float, got str 'fast'
    """
    yaml = _yaml()
    raw: dict[str, Any] = {}
    source = None
    if path is not None:
        shipped = example_configs()
        p = Path(path)
        if not p.exists() and path in shipped:
            p = shipped[path]
        if not p.exists():
            raise PrmkitError(f"no config file {path!r} (shipped configs: {', '.join(shipped)})")
        source = str(p)
        try:
            raw = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError([f"not valid YAML: {e}"], source) from None
        if not isinstance(raw, dict):
            raise ConfigError(["the top level must be a mapping of keys to values"], source)
    problems: list[str] = []
    for item in overrides:
        key, eq, text = item.partition("=")
        if not eq or not key:
            problems.append(f"{item!r}: an override is key=value")
            continue
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            value = text
        node = raw
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
    raw.update(values)
    cfg = _build(TrainConfig, raw, "", problems)
    if cfg is not None:
        # a field that failed to convert kept its default; do not also report the default as bad
        failed = {_field_of(p) for p in problems}
        problems += [p for p in cfg.validate() if _field_of(p) not in failed]
    if problems:
        raise ConfigError(problems, source)
    return cfg


def _field_of(problem: str) -> str:
    """The top-level field a problem line is about (``lora.r: ...`` -> ``lora``)."""
    return problem.split(":")[0].split("[")[0].split(".")[0]


def _build(cls: type, raw: dict[str, Any], prefix: str, problems: list[str]) -> Any:
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]  # a list: the hint below must not vary by run
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if key not in known:
            close = [k for k in known if k.startswith(str(key)) or str(key).startswith(k)]
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{where}: unknown key{hint}")
            continue
        ok, converted = _convert(value, hints[key], where, problems)
        if ok:
            kwargs[key] = converted
    try:
        return cls(**kwargs)
    except TypeError as e:  # pragma: no cover - every field has a default
        problems.append(f"{prefix or 'config'}: {e}")
        return None


def _convert(value: Any, tp: Any, where: str, problems: list[str]) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True, value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return True, None
        others = [a for a in args if a is not type(None)]
        if len(others) == 1:  # Optional[X]: X's own problems (lora.r: ...) say more than "expected X"
            return _convert(value, others[0], where, problems)
        for a in args:
            if a is type(None):
                continue
            trial: list[str] = []
            ok, v = _convert(value, a, where, trial)
            if ok and not trial:
                return True, v
        names = " or ".join(getattr(a, "__name__", str(a)) for a in args)
        problems.append(f"{where}: expected {names}, got {type(value).__name__} {value!r}")
        return False, None
    if dataclasses.is_dataclass(tp):
        if isinstance(value, dict):
            return True, _build(tp, value, where + ".", problems)
        problems.append(f"{where}: expected a mapping, got {type(value).__name__} {value!r}")
        return False, None
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            problems.append(f"{where}: expected a list, got {type(value).__name__} {value!r}")
            return False, None
        out = []
        for i, v in enumerate(value):
            ok, c = _convert(v, item, f"{where}[{i}]", problems)
            if not ok:
                return False, None
            out.append(c)
        return True, out
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return True, float(value)
    if tp is float and isinstance(value, str):
        try:
            return True, float(value)  # YAML reads 1e-4 (no dot) as a string
        except ValueError:
            pass
    if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
        return True, value
    problems.append(f"{where}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return False, None
