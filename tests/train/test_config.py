"""Training configs: YAML files, dotted overrides, every problem reported at once, the shipped configs."""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.train import ConfigError, LoraSettings, TrainConfig, example_configs, load_config


def test_yaml_file_then_overrides_then_keywords(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("# prmkit train prm --config run.yaml\n"
                    "model: tiny\nbatch_size: 4\nlr: 3.0e-4\nlora:\n  r: 16\n  alpha: 8\n")
    cfg = load_config(str(path), ["train=[a.jsonl, b.jsonl]", "lora.r=4", "lr=1e-4", "epochs=2",
                                  "dtype=null"], kind="orm")
    assert cfg.train == ["a.jsonl", "b.jsonl"]
    assert cfg.lora == LoraSettings(r=4, alpha=8)           # r overridden, alpha from the file
    assert cfg.batch_size == 4                              # from the file
    assert cfg.lr == 1e-4 and isinstance(cfg.lr, float)    # YAML reads "1e-4" as a string
    assert cfg.epochs == 2.0 and isinstance(cfg.epochs, float)
    assert cfg.dtype is None
    assert cfg.kind == "orm"                                # keyword values come last


def test_dotted_override_creates_the_nested_section_and_a_bare_string_is_a_list():
    cfg = load_config(None, ["train=one.jsonl", "lora.r=4"])
    assert cfg.train == ["one.jsonl"]
    assert cfg.lora == LoraSettings(r=4)  # the other LoRA fields keep their defaults
    assert load_config(None, ["train=x", "lora.r=4", "lora=null"]).lora is None


def test_every_problem_is_reported_together():
    with pytest.raises(ConfigError) as info:
        load_config(None, ["batch=3", "lr=fast", "kind=xrm", "batch_size=0", "lora.rank=8",
                           "lora.r=four", "max_steps=true", "noequals"])
    assert info.value.problems == [
        "'noequals': an override is key=value",
        "batch: unknown key (did you mean batch_size?)",
        "lr: expected float, got str 'fast'",
        "lora.rank: unknown key (did you mean r?)",
        "lora.r: expected int, got str 'four'",
        "max_steps: expected int, got bool True",
        "kind: must be prm or orm, got 'xrm'",
        "train: give at least one trace file",
        "batch_size: must be at least 1, got 0",
    ]
    # the message lists them too, one per line
    assert str(info.value).splitlines()[1:] == ["  " + p for p in info.value.problems]


def test_a_field_that_failed_to_convert_is_not_also_reported_at_its_default():
    with pytest.raises(ConfigError) as info:
        load_config(None, ["train=[1, 2]"])
    assert info.value.problems == ["train[0]: expected str, got int 1"]


def test_bad_values(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(None, ["train=[x]", "eval_fraction=1", "num_labels=3", "neutral=maybe",
                           "outcome=vote", "lr=0", "grad_accum=0", "epochs=0", "lora=3"])
    assert info.value.problems == [
        "lora: expected a mapping, got int 3",
        "neutral: must be positive, negative or ignore, got 'maybe'",
        "outcome: must be auto, outcome, answer or steps, got 'vote'",
        "num_labels: must be 1 or 2, got 3",
        "grad_accum: must be at least 1, got 0",
        "eval_fraction: must be in [0, 1), got 1.0",
        "lr: must be positive, got 0.0",
        "epochs or max_steps must be positive",
    ]


def test_bad_files(tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(str(listed), ["train=[x]"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("lr: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(broken))
    numeric = tmp_path / "numeric.yaml"
    numeric.write_text("1: 2\ntrain: [x]\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(numeric))
    assert info.value.problems == ["1: unknown key"]
    with pytest.raises(PrmkitError, match="no config file 'nope.yaml' .*shipped configs: .*tiny"):
        load_config("nope.yaml")


SHIPPED = ["default-orm", "default-prm", "default-word", "default-word-orm", "minilm", "public-prm",
           "qwen2.5-math-7b-gpu", "smollm2-lora", "tiny"]
LORA = ("smollm2-lora", "default-prm", "default-orm", "default-word", "default-word-orm", "public-prm")


def test_the_shipped_configs_are_listed():
    assert sorted(example_configs()) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_loads(name):
    cfg = load_config(name, ["train=[x.jsonl]"])
    assert isinstance(cfg, TrainConfig) and cfg.train == ["x.jsonl"] and cfg.validate() == []
    first = example_configs()[name].read_text().splitlines()[0]
    kind = "orm" if name.endswith("-orm") else "prm"
    assert first.startswith("# ") and f"prmkit train {kind} --config {name} " in first  # how to run it
    assert (cfg.lora is not None) == (name in LORA)


def test_a_saved_config_loads_back_equal(tmp_path):
    from prmkit.train._trainer import _write_config_yaml

    cfg = load_config("smollm2-lora", ["train=[a.jsonl]", "lora.r=4", "convention={name: mine, tag: ' <s>'}"])
    _write_config_yaml(cfg, tmp_path / "train_config.yaml")
    assert load_config(str(tmp_path / "train_config.yaml")) == cfg


def test_precision_is_validated_and_defaults_to_auto():
    assert load_config(None, ["train=[x]"]).precision == "auto"
    assert load_config(None, ["train=[x]", "precision=bf16"]).precision == "bf16"
    assert load_config(None, ["train=[x]", "precision=int8"]).precision == "int8"
    with pytest.raises(ConfigError) as info:
        load_config(None, ["train=[x]", "precision=fp16", "lr=0"])
    assert info.value.problems == ["precision: must be auto, fp32, int8 or bf16, got 'fp16'",
                                   "lr: must be positive, got 0.0"]
