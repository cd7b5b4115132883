"""Reward models shipped with prmkit, by name: ``default`` (a PRM trained on ``arith`` traces) and
``default-orm`` (its ORM twin); ``default-word`` and ``default-word-orm``, the same for natural-language word
problems (GSM8K train with injected errors and PRMBench's train files).

A shipped model is small: a LoRA adapter with its trained head (``adapter_model.safetensors``, what
``peft`` saves) and ``prmkit_rm.json`` (kind, convention, max length, and the training record, whose
``train_config.model`` names the base: a backbone alias such as ``smollm2``, whose weights are already
installed for the default policy). The first use merges the adapter into the base and caches a plain
transformers folder under ``$PRMKIT_CACHE/models/<name>-<content hash>``, written atomically; every
later use, by any process, loads that folder. So ``--model default`` works everywhere a checkpoint
folder does (``RewardModel.from_pretrained("default")``, ``prmkit score --model default``, ...).

:func:`export_shipped` makes such a folder from a ``prmkit train`` output trained with LoRA (the
trainer keeps the adapter in ``adapter/`` beside the merged weights).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from prmkit._jsonio import publish_folder
from prmkit.errors import PrmkitError

__all__ = ["SHIPPED_MODELS", "ASSETS", "shipped_asset", "merged_cache_folder", "export_shipped"]

#: Where the shipped models live inside the package.
ASSETS = Path(__file__).resolve().parent.parent / "assets"

#: Shipped model name -> its asset folder (under :data:`ASSETS`).
SHIPPED_MODELS: dict[str, str] = {
    "default": "prm-smollm2-arith",
    "default-orm": "orm-smollm2-arith",
    "default-word": "prm-smollm2-word",
    "default-word-orm": "orm-smollm2-word",
}

RM_CONFIG = "prmkit_rm.json"
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for name in (*_ADAPTER_FILES, RM_CONFIG):
        h.update(name.encode())
        h.update((folder / name).read_bytes())
    return h.hexdigest()[:16]


def shipped_asset(name: str) -> Path:
    """The asset folder of the shipped model ``name`` (checked complete)."""
    if name not in SHIPPED_MODELS:
        raise PrmkitError(f"unknown shipped model {name!r}; shipped: {', '.join(SHIPPED_MODELS)}")
    asset = ASSETS / SHIPPED_MODELS[name]
    if not all((asset / f).is_file() for f in (*_ADAPTER_FILES, RM_CONFIG)):
        raise PrmkitError(f"the shipped model {name!r} is not in this installation ({asset} is incomplete)")
    return asset


def merged_cache_folder(name: str) -> Path:
    """Where the merged weights of the shipped model ``name`` are cached (keyed by the asset's content)."""
    from prmkit.policies import cache_dir

    asset = shipped_asset(name)
    return cache_dir() / "models" / f"{SHIPPED_MODELS[name]}-{_digest(asset)}"


def is_complete(path: Path) -> bool:
    """Whether a merged folder is finished (weights, config and the prmkit record)."""
    return (path / "config.json").is_file() and (path / RM_CONFIG).is_file() and any(
        path.glob("*.safetensors"))


def publish(tmp: Path, out: Path) -> None:
    """Rename a finished temporary folder into place, flushed to disk (another process may have been
    first: then its folder stays)."""
    if out.exists() and not is_complete(out):
        shutil.rmtree(out, ignore_errors=True)
    try:
        publish_folder(tmp, out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def _portable(value):
    """``value`` with every absolute path made relative to the working folder (when under it) or cut to
    its file name."""
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_portable(v) for v in value]
    if isinstance(value, str) and os.path.isabs(value):
        path = Path(value)
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return path.name
    return value


def _cast_tensors(path: Path, dtype: str) -> None:
    """Rewrite a safetensors file with its floating-point tensors cast to ``dtype``."""
    import torch
    from safetensors.torch import load_file, save_file

    target = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    tensors = {k: (v.to(target) if v.is_floating_point() else v) for k, v in load_file(str(path)).items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def export_shipped(trained: str | os.PathLike, asset: str | os.PathLike, *, note: str = "",
                   dtype: str | None = None, max_length: int | None = None) -> Path:
    """Copy what a shipped model needs from a LoRA ``prmkit train`` output ``trained`` (its ``adapter/``
    folder and ``prmkit_rm.json``) into ``asset``, with a README saying what it is (``note``).

    ``dtype`` (``"bfloat16"`` or ``"float16"``) stores the adapter's floating-point tensors at that
    precision — half the bytes in the package; the merge casts them back to the base's dtype, so
    scores move by the rounding of the adapter weights (the shipped models are evaluated as exported).
    None copies them as trained.

    ``max_length``: the longest input the shipped model reads in one pass (default: the training
    run's). The shipped pair says 4096, so every trace of ProcessBench and PRMBench is read whole
    (``benchmarks/long_traces.py``); a model trained on shorter traces scores the positions that fit
    at the training length exactly as before."""
    if dtype not in (None, "bfloat16", "float16"):  # before anything is written
        raise PrmkitError(f"dtype must be bfloat16 or float16, got {dtype!r}")
    if max_length is not None and max_length < 1:
        raise PrmkitError(f"max_length must be a positive number of tokens, got {max_length}")
    trained, asset = Path(trained), Path(asset)
    adapter = trained / "adapter"
    if not all((adapter / f).is_file() for f in _ADAPTER_FILES):
        raise PrmkitError(f"{trained}: no LoRA adapter (adapter/adapter_model.safetensors); train with a "
                          "lora: section, e.g. --config smollm2-lora")
    tmp = asset.with_name(asset.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in _ADAPTER_FILES:
        shutil.copy2(adapter / f, tmp / f)
    if dtype is not None:
        _cast_tensors(tmp / "adapter_model.safetensors", dtype)
    info = json.loads((trained / RM_CONFIG).read_text())
    # The record travels in every install: no absolute path of the machine that trained it.
    if isinstance(info.get("train_config"), dict):
        info["train_config"] = _portable(info["train_config"])
    if max_length is not None:
        info["max_length"] = max_length
    (tmp / RM_CONFIG).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    (tmp / "README.md").write_text(
        f"# {asset.name}\n\nA prmkit {info.get('kind', 'prm').upper()}: a LoRA adapter and head over the "
        f"base named in prmkit_rm.json (train_config.model), merged and cached on first use.\n\n{note}\n")
    publish_folder(tmp, asset, replace=True)
    return asset
