"""PRM and ORM training: a config dataclass and a trainer you can read top to bottom; and the
supervised tuning of the policy on the arith answer format (:func:`sft_policy`, ``prmkit policy sft``).

>>> from prmkit.train import load_config
>>> load_config("tiny", ["train=[traces.jsonl]"]).model
'tiny'
"""

from prmkit.train._config import ConfigError, LoraSettings, TrainConfig, example_configs, load_config
from prmkit.train._data import DataReport, encode_traces, length_batches, outcome_target, step_targets
from prmkit.train._launch import launch
from prmkit.train._policy_sft import PolicySFTConfig, sft_policy
from prmkit.train._trainer import (
    TRAIN_AUTO,
    TrainResult,
    evaluate_encoded,
    position_loss,
    replaces_finished_model,
    train,
)

__all__ = [
    "ConfigError", "LoraSettings", "TrainConfig", "example_configs", "load_config",
    "DataReport", "encode_traces", "length_batches", "outcome_target", "step_targets",
    "TRAIN_AUTO", "TrainResult", "evaluate_encoded", "position_loss", "replaces_finished_model", "train",
    "launch", "PolicySFTConfig", "sft_policy",
]
