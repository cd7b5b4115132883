"""The configuration of ``prmkit rl``: one typed dataclass read from YAML, every error reported together.

>>> cfg = RLConfig(rewards={"outcome": 1.0, "oracle": 0.5})
>>> cfg.validate()
>>> sorted(cfg.dense_components()), cfg.scalar_components()
(['oracle'], ['outcome'])
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.rl._advantages import BASELINES

__all__ = ["RLConfig", "load_rl_config", "REWARD_COMPONENTS", "CLAIMLESS"]

#: Reward components (``rewards:`` weights) and whether each is a trace-level scalar or per step.
REWARD_COMPONENTS = {
    "outcome": "scalar",    # 1 when the final answer equals the environment's answer, else 0
    "prm": "scalar",        # the PRM's step scores aggregated (``prm_aggregate``, min by default)
    "prm_dense": "dense",   # each step's PRM score, on that step's tokens
    "pav": "dense",         # PRM score after the step minus before it (Q(prefix + step) - Q(prefix))
    "oracle": "dense",      # the symbolic checker's verdict of each step (1 valid, 0 not)
}

#: What a step the checker finds no claim in (verdict ``no_claim``: a plan, a restatement, a line of dots)
#: counts as, in the ``oracle`` reward and in ``eval/step_validity``: ``"invalid"`` (the default: a
#: policy cannot raise its validity by writing lines that claim nothing) or ``"valid"`` (the checker's
#: own +1, what every run before this option measured).
CLAIMLESS = ("invalid", "valid")


@dataclass
class RLConfig:
    """What ``prmkit rl`` trains (see docs/rl.md for every field).

    Policy: ``model`` (a folder or hub id; None: the embedded SmolLM2-135M-Instruct), ``adapter`` merged
    in first (``"default"``: prmkit's arith SFT adapter for the default model), ``chat_template`` for a
    tokenizer without one; LoRA ``lora_r`` / ``lora_alpha`` on ``target_modules``.
    Problems: the ``arith`` environment with ``env`` (ArithConfig fields); training problems from index
    ``train_start`` on, held-out evaluation problems ``0 .. eval_problems - 1``.
    Optimisation: ``steps`` of ``prompts_per_step`` prompts x ``group_size`` sampled completions,
    ``baseline`` (grpo / rloo), ``scale_rewards`` (divide by the group's std), ``clip_eps``,
    ``inner_steps`` (gradient steps per batch, μ), ``kl_coef`` (0: no reference pass).
    Rewards: ``rewards`` maps components (:data:`REWARD_COMPONENTS`) to weights; a PRM component uses
    ``scorer`` (a registered scorer name, ``model`` with ``path: default`` for the shipped PRM) with
    ``scorer_options``. ``claimless``: what a step that makes no claim the checker can test counts as
    in the ``oracle`` reward and the step validity (:data:`CLAIMLESS`).
    """

    output_dir: str = "runs/rl"
    model: str | None = None
    gguf_file: str | None = None
    adapter: str | None = "default"
    chat_template: str | None = None
    env: dict[str, Any] = field(default_factory=lambda: {"steps": 2})
    train_start: int = 1000
    eval_problems: int = 16
    eval_every: int = 10
    eval_max_new_tokens: int | None = None
    steps: int = 20
    prompts_per_step: int = 2
    group_size: int = 4
    max_new_tokens: int = 96
    temperature: float = 1.0
    learning_rate: float = 5e-5
    lora_r: int = 8
    lora_alpha: int = 16
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    baseline: str = "grpo"
    scale_rewards: bool = True
    clip_eps: float = 0.2
    inner_steps: int = 1
    kl_coef: float = 0.0
    rewards: dict[str, float] = field(default_factory=lambda: {"outcome": 1.0})
    scorer: str = "model"
    scorer_options: dict[str, Any] = field(default_factory=lambda: {"path": "default"})
    prm_aggregate: str = "min"
    claimless: str = "invalid"
    splitter: str = "newline"
    shots: int = 0
    seed: int = 0
    checkpoint_every: int = 1
    progress: bool = True

    def scalar_components(self) -> list[str]:
        return [c for c, w in self.rewards.items() if REWARD_COMPONENTS.get(c) == "scalar" and w]

    def dense_components(self) -> list[str]:
        return [c for c, w in self.rewards.items() if REWARD_COMPONENTS.get(c) == "dense" and w]

    def needs_scorer(self) -> bool:
        return any(self.rewards.get(c) for c in ("prm", "prm_dense", "pav"))

    def errors(self) -> list[str]:
        """Every problem with the values (empty: valid)."""
        e = []
        for name in ("steps", "prompts_per_step", "max_new_tokens", "lora_r", "inner_steps",
                     "checkpoint_every", "eval_every"):
            if getattr(self, name) < 1:
                e.append(f"field {name!r}: must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            e.append(f"field 'group_size': must be >= 2 (advantages compare a group's completions), got {self.group_size}")
        if self.eval_problems < 0 or self.train_start < 0:
            e.append("fields 'eval_problems' and 'train_start': must be >= 0")
        if self.train_start < self.eval_problems:
            e.append(f"field 'train_start': {self.train_start} would train on held-out problems "
                     f"0..{self.eval_problems - 1}; use at least eval_problems")
        if self.temperature <= 0:
            e.append(f"field 'temperature': sampling needs a temperature > 0, got {self.temperature}")
        if self.learning_rate <= 0:
            e.append(f"field 'learning_rate': must be > 0, got {self.learning_rate}")
        if not 0 < self.clip_eps < 1:
            e.append(f"field 'clip_eps': must be in (0, 1), got {self.clip_eps}")
        if self.kl_coef < 0:
            e.append(f"field 'kl_coef': must be >= 0, got {self.kl_coef}")
        if self.baseline not in BASELINES:
            e.append(f"field 'baseline': one of {', '.join(BASELINES)}, got {self.baseline!r}")
        if self.claimless not in CLAIMLESS:
            e.append(f"field 'claimless': one of {', '.join(CLAIMLESS)}, got {self.claimless!r}")
        unknown = sorted(set(self.rewards) - set(REWARD_COMPONENTS))
        if unknown:
            e.append(f"field 'rewards': unknown component(s) {', '.join(unknown)} "
                     f"(known: {', '.join(REWARD_COMPONENTS)})")
        bad = [k for k, w in self.rewards.items() if not _is_number(w) or w < 0]
        if bad:
            e.append(f"field 'rewards': weights must be numbers >= 0 ({', '.join(map(str, bad))})")
        if not any(_is_number(w) and w > 0 for w in self.rewards.values()):
            e.append("field 'rewards': give at least one component a weight > 0")
        return e

    def validate(self, where: str = "rl config") -> None:
        errs = self.errors()
        if errs:
            raise PrmkitError(f"{where}: " + "; ".join(errs))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_TYPES = {f.name: f.type for f in fields(RLConfig)}


def _check_type(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be field ``name`` (None: it can)."""
    t = str(_TYPES[name])
    if value is None:
        return None if "None" in t else "may not be null"
    if t.startswith("int"):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"expected an integer, got {value!r}"
    if t.startswith("float"):
        return None if _is_number(value) else f"expected a number, got {value!r}"
    if t.startswith("bool"):
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if t.startswith("str"):
        return None if isinstance(value, str) else f"expected a string, got {value!r}"
    if t.startswith("dict"):
        return None if isinstance(value, Mapping) else f"expected a mapping, got {value!r}"
    if t.startswith("list"):
        ok = isinstance(value, list) and all(isinstance(x, str) for x in value)
        return None if ok else f"expected a list of strings, got {value!r}"
    return None


def _key_lines(path: str | os.PathLike) -> dict[str, int]:
    """The line of each top-level key of a YAML file (empty where it cannot tell)."""
    try:
        import yaml

        node = yaml.compose(open(path, encoding="utf-8").read())
    except Exception:  # the parse error itself is load_yaml_or_json's to report
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)}


def config_from_dict(d: Any, where: str = "rl config", lines: Mapping[str, int] | None = None) -> RLConfig:
    """An :class:`RLConfig` from a mapping; unknown keys, wrong types and bad values are reported
    together, each naming its field (and its line, where ``lines`` maps fields to lines)."""
    if not isinstance(d, Mapping):
        raise PrmkitError(f"{where}: expected a mapping of fields, got {type(d).__name__}")
    lines = lines or {}

    def at(k: str) -> str:
        return f"line {lines[k]}: " if k in lines else ""

    errs = [f"{at(k)}unknown field {k!r} (known: {', '.join(_TYPES)})" for k in d if k not in _TYPES]
    for k, v in d.items():
        if k in _TYPES:
            why = _check_type(k, v)
            if why:
                errs.append(f"{at(k)}field {k!r}: {why}")
    if errs:
        raise PrmkitError(f"{where}: " + "; ".join(errs))
    kw = {k: (float(v) if str(_TYPES[k]).startswith("float") and v is not None else v) for k, v in d.items()}
    cfg = RLConfig(**kw)
    bad = cfg.errors()
    if bad:
        named = []
        for e in bad:
            field_name = e.split("'")[1] if e.startswith("field") else ""
            named.append(f"{at(field_name)}{e}")
        raise PrmkitError(f"{where}: " + "; ".join(named))
    from prmkit.envs import ArithConfig

    ArithConfig.from_dict(cfg.env, where=f"{where}: field 'env'")
    return cfg


def load_rl_config(path: str | os.PathLike) -> RLConfig:
    """The config in the YAML (or JSON) file ``path``; an error names the file and the field."""
    from prmkit._jsonio import load_yaml_or_json

    data = load_yaml_or_json(path, "rl config") or {}
    return config_from_dict(data, where=str(path), lines=_key_lines(path))
