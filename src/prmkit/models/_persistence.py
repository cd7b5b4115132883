"""Reading and writing reward models: :meth:`~PersistenceMixin.from_pretrained` (a prmkit checkpoint,
a published PRM, or a shipped model merged on first use), :meth:`~PersistenceMixin.from_backbone` and
:meth:`~PersistenceMixin.save_pretrained`.

Checkpoints are plain ``save_pretrained`` folders (safetensors) that ``transformers`` loads without
prmkit (``AutoModelForTokenClassification`` for classifier heads, ``AutoModelForCausalLM`` for
LM-token heads); ``prmkit_rm.json`` beside them records the convention and kind. Only safetensors
weights are read: a folder whose weights are pickle files only (``pytorch_model.bin``, ``*.pt``, ...)
is refused unless ``allow_pickle=True`` (``--allow-pickle``), since unpickling can run any code.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from prmkit._durable import build_lock
from prmkit._jsonio import publish_into
from prmkit._weights import check_safe_weights
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.models._conventions import Convention, get_convention
from prmkit.models._forward import _torch
from prmkit.models._shipped import SHIPPED_MODELS, is_complete, merged_cache_folder, publish, shipped_asset
from prmkit.provenance import TrainProvenance

#: The file in a checkpoint folder that tells prmkit how to use the model (transformers ignores it).
RM_CONFIG = "prmkit_rm.json"

_RM = TypeVar("_RM", bound="PersistenceMixin")


class PersistenceMixin:
    """:class:`~prmkit.models.RewardModel`'s checkpoints: :meth:`from_pretrained`,
    :meth:`from_backbone` and :meth:`save_pretrained`."""

    # Set by RewardModel.
    model: Any
    tokenizer: Any
    convention: Convention
    kind: str
    max_length: int | None
    name: str
    folder: str | None

    @classmethod
    def from_pretrained(cls: type[_RM], path: str, *, convention: Convention | str | dict | None = None,
                        kind: str | None = None, device: str | None = None, dtype: str | None = None,
                        trust_remote_code: bool = False, max_length: int | None = None,
                        precision: str = "fp32", long: str = "window",
                        allow_pickle: bool = False) -> _RM:
        """Load a checkpoint (prmkit's, or a published PRM with ``convention=`` its registered name).

        A folder with ``prmkit_rm.json`` brings its own convention, kind and max length; arguments
        override them. ``max_length`` may be anything up to the model's position limit
        (``max_position_embeddings``: 8192 for SmolLM2, so the shipped models too; a larger value is
        refused). A longer one reads long traces whole in one pass instead of in windows (for fewer
        tokens, see ``benchmarks/long_traces.py``); the steps that fit either way score the same (a
        decoder), a trace that fits either way costs the same, and the memory of the longest batch
        grows with the longest trace. ``long``: what a PRM does past
        ``max_length`` (see the class). On the command line: ``-s max_length=4096``.
        ``path`` may also name a shipped model (``default``, ``default-word``, ...: :data:`SHIPPED_MODELS`).
        ``allow_pickle``: also read pickle weight files (``pytorch_model.bin``, ``*.pt``, ``*.pth``,
        ``*.ckpt``) where a folder has no safetensors; only for a checkpoint you trust.

        >>> rm = RewardModel.from_pretrained("default", max_length=4096)  # doctest: +SKIP
        """

        path = _resolve_name(cls, path)
        saved: dict[str, Any] = {}
        cfg_file = Path(path) / RM_CONFIG
        if cfg_file.is_file():
            saved = json.loads(cfg_file.read_text())
        conv = get_convention(convention if convention is not None else saved.get("convention"))
        kind = kind or saved.get("kind", "prm")
        max_length = max_length or saved.get("max_length")
        model, tok = _load(path, conv, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
        rm = cls(model, tok, convention=conv, kind=kind, max_length=max_length, name=saved.get("name", path),
                 precision=precision, long=long)
        rm.folder = str(path)
        return rm

    @classmethod
    def from_backbone(cls: type[_RM], backbone: str, *, convention: Convention | str | dict | None = None,
                      kind: str = "prm", num_labels: int | None = None, device: str | None = None,
                      dtype: str | None = None, trust_remote_code: bool = False,
                      max_length: int | None = None, seed: int = 0,
                      head_init: str = "random", causal: bool = False, precision: str = "fp32",
                      allow_pickle: bool = False) -> _RM:
        """A new reward model on a pretrained backbone (a fresh head for ``classifier`` conventions),
        ready to train. ``backbone`` is a path, hub id or one of ``smollm2``, ``minilm``, ``tiny``, or
        a shipped reward model's name (``default-word``, ...: :data:`SHIPPED_MODELS`), to train it
        further: its merged weights, and its trained head kept, as from any folder that has one.

        ``causal``: an encoder backbone (BERT-like) attends only to earlier tokens (its config's
        ``is_decoder``), so a step's score cannot read later steps or the final answer — what a PRM
        should see. It is saved in the checkpoint's ``config.json``, so plain ``transformers`` loads
        the same causal model. Refused for an encoder that ignores the setting (checked by a forward
        pass); a decoder is causal already. ``allow_pickle``: as in :meth:`from_pretrained`."""

        torch = _torch()
        conv = get_convention(convention)
        path = _resolve_name(cls, backbone)
        torch.manual_seed(seed)  # anything a backbone initialises at random
        model, tok = _load(path, conv, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                           num_labels=num_labels or conv.num_labels or 2, causal=causal,
                           allow_pickle=allow_pickle)
        if causal and getattr(model.config, "model_type", None) in (_masked_lm_types() or ()):
            _check_causal(model, path)
        if head_init not in ("random", "zero"):
            raise PrmkitError(f"head_init must be 'random' or 'zero', got {head_init!r}")
        if head_init == "zero" and conv.head == "classifier" and not _has_trained_head(path):
            _zero_head(model)
        return cls(model, tok, convention=conv, kind=kind, max_length=max_length, name=backbone,
                   precision=precision)

    def save_pretrained(self, path: str | os.PathLike, *, record: TrainProvenance | None = None) -> None:
        """A plain transformers folder (safetensors) plus ``prmkit_rm.json``: the model's kind,
        convention, max_length and name, with what ``record`` adds (the trainer's config and steps)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written into a staging folder beside ``path``, then moved in with ``prmkit_rm.json`` last:
        # a failure (a full disk) leaves what ``path`` held as it was.
        stage = path.with_name(f".tmp-{path.name}-{os.getpid()}")
        shutil.rmtree(stage, ignore_errors=True)
        try:
            stage.mkdir()
            with _quiet_transformers():
                self.model.save_pretrained(stage)
                self.tokenizer.save_pretrained(stage)
            info = replace(record or TrainProvenance(), name=self.name, kind=self.kind,
                           convention=self.convention.to_dict(), max_length=self.max_length)
            (stage / RM_CONFIG).write_text(json.dumps(info.to_dict(), indent=2, default=str) + "\n")
            publish_into(stage, path, last=RM_CONFIG)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _has_trained_head(path: str) -> bool:
    try:
        from transformers import AutoConfig

        archs = getattr(AutoConfig.from_pretrained(path), "architectures", None) or []
    except (OSError, ValueError):
        return False
    return any(a.endswith("ForTokenClassification") for a in archs)


def _zero_head(model: Any) -> None:
    torch = _torch()
    for name in ("score", "classifier"):
        layer = getattr(model, name, None)
        if isinstance(layer, torch.nn.Linear):
            with torch.no_grad():
                layer.weight.zero_()
                if layer.bias is not None:
                    layer.bias.zero_()


def _masked_lm_types() -> Any:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES
    except ImportError:  # pragma: no cover - very old transformers
        return None
    return MODEL_FOR_MASKED_LM_MAPPING_NAMES


def _is_encoder(cfg: Any) -> bool:
    """A model type with a masked-LM head is bidirectional (BERT-like) unless its config says
    ``is_decoder`` (then it attends causally); decoder-only ones have none."""
    if cfg is None:
        return False
    types = _masked_lm_types()
    if types is None:  # pragma: no cover - very old transformers
        return True  # unknown: do not trim
    return getattr(cfg, "model_type", None) in types and not getattr(cfg, "is_decoder", False)


def _check_causal(model: Any, path: str) -> None:
    """Refuse a backbone that was asked to attend causally but does not: a later token must not change
    an earlier position's output."""
    torch = _torch()
    vocab = model.config.vocab_size
    device = next(model.parameters()).device  # a model on a GPU reads ids there too
    a = torch.tensor([[1 % vocab, 2 % vocab, 3 % vocab, 4 % vocab]], device=device)
    b = a.clone()
    b[0, -1] = 5 % vocab
    with torch.no_grad():
        la = model(input_ids=a).logits[0, 0].float()
        lb = model(input_ids=b).logits[0, 0].float()
    # a bidirectional backbone moves position 0 by far more than any rounding; bf16 weights round at ~1e-2
    atol = 1e-5 if next(model.parameters()).dtype == torch.float32 else 1e-2
    if not torch.allclose(la, lb, atol=atol):
        raise PrmkitError(f"{path}: this backbone ignores is_decoder and attends in both directions; "
                          f"causal=True is not possible with it (use a decoder backbone)")


def _load(path: str, conv: Convention, *, device: str | None, dtype: str | None,
          trust_remote_code: bool, num_labels: int | None = None,
          causal: bool = False, allow_pickle: bool = False) -> tuple[Any, Any]:
    check_safe_weights(path, allow_pickle=allow_pickle)
    torch = _torch()
    try:
        from transformers import (
            AutoConfig,
            AutoModel,
            AutoModelForCausalLM,
            AutoModelForTokenClassification,
            AutoTokenizer,
        )
    except ImportError:
        raise MissingDependencyError("transformers", "hf", "reward models") from None
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = getattr(torch, dtype) if dtype else (
        torch.bfloat16 if device.startswith("cuda") else torch.float32)
    kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    # The tokenizer's loader takes no use_safetensors; the models' loaders read no pickle without it.
    mkw: dict[str, Any] = {**kw, **({} if allow_pickle else {"use_safetensors": True})}
    try:
        with _quiet_transformers():
            tok = AutoTokenizer.from_pretrained(path, **kw)
            if conv.head == "lm_token":
                model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **mkw)
            else:
                cfg = AutoConfig.from_pretrained(path, **kw)
                archs = getattr(cfg, "architectures", None) or []
                is_tc = any(a.endswith("ForTokenClassification") for a in archs)
                if trust_remote_code and archs and not is_tc and "AutoModel" in (getattr(cfg, "auto_map", None) or {}):
                    model = AutoModel.from_pretrained(path, dtype=torch_dtype, **mkw)  # e.g. Qwen2.5-Math-PRM
                else:
                    extra: dict[str, Any] = {}
                    labels = num_labels or conv.num_labels
                    if labels is not None and not is_tc:  # a new head on a backbone (or a value head)
                        names = ["incorrect", "correct"] if labels == 2 else ["correct"]
                        extra = {"num_labels": labels, "id2label": dict(enumerate(names)),
                                 "label2id": {n: i for i, n in enumerate(names)}}
                    if causal and cfg.model_type in (_masked_lm_types() or ()):
                        # Set on the config object: not every model's __init__ takes it as a kwarg.
                        for k, v in {**extra, "is_decoder": True}.items():
                            setattr(cfg, k, v)
                        extra = {"config": cfg}
                    model, info = AutoModelForTokenClassification.from_pretrained(
                        path, dtype=torch_dtype, output_loading_info=True, **extra, **mkw)
                    if num_labels is None:  # a trained reward model: its head must come from the checkpoint
                        _require_head(model, path, info.get("missing_keys", []))
    except (OSError, ValueError) as e:
        hint = ("" if allow_pickle or "safetensors" not in str(e) else
                " (only safetensors weights are read: pass --allow-pickle / allow_pickle=True for a "
                "checkpoint you trust that has pickle weights only)")
        raise PrmkitError(f"cannot load reward model {path!r}: {e}{hint}") from None
    model.to(device).eval()
    return model, tok


#: Value-head names of published checkpoints that are not transformers token-classification models:
#: ``checkpoint key prefix -> where it goes``. Skywork-o1-Open-PRM keeps its head as ``v_head.summary``.
VALUE_HEADS = ("v_head.summary", "v_head")


def _require_head(model: Any, path: str, missing: list[str]) -> None:
    """Fail loudly instead of scoring with a randomly initialised head; map known value heads."""
    head = next((n for n in ("score", "classifier") if hasattr(model, n)), None)
    lost = [k for k in missing if head and k.startswith(head + ".")]
    if not lost:
        return
    import glob

    from safetensors import safe_open

    torch = _torch()
    folder = path
    if not os.path.isdir(folder):
        try:
            from huggingface_hub import snapshot_download

            folder = snapshot_download(path, local_files_only=True)
        except Exception:  # noqa: BLE001 - any failure means: no local copy to look in
            folder = None
    found: dict[str, Any] = {}
    for f in sorted(glob.glob(os.path.join(folder, "*.safetensors"))) if folder else []:
        with safe_open(f, framework="pt") as st:
            for key in st.keys():
                for prefix in VALUE_HEADS:
                    if key in (f"{prefix}.weight", f"{prefix}.bias"):
                        found.setdefault(key.rsplit(".", 1)[1], st.get_tensor(key))
    layer = getattr(model, head)
    if "weight" in found and tuple(found["weight"].shape) == tuple(layer.weight.shape):
        with torch.no_grad():
            layer.weight.copy_(found["weight"])
            if "bias" in found and getattr(layer, "bias", None) is not None:
                layer.bias.copy_(found["bias"])
        return
    raise PrmkitError(f"{path} has no trained {head} head ({', '.join(lost)} missing): it is a backbone, "
                      "not a reward model. Train one with `prmkit train`, or use RewardModel.from_backbone "
                      "to start from it.")


class _quiet_transformers:
    """Silence transformers' load reports and progress bars (a new head's missing weights are
    expected here) for the duration of a load."""

    def __enter__(self):
        from transformers.utils import logging as tl

        self._level = tl.get_verbosity()
        self._bars = tl.is_progress_bar_enabled()
        tl.set_verbosity_error()
        tl.disable_progress_bar()

    def __exit__(self, *exc: object) -> None:
        from transformers.utils import logging as tl

        tl.set_verbosity(self._level)
        if self._bars:
            tl.enable_progress_bar()


def _resolve_name(cls: type[PersistenceMixin], name: str) -> str:
    """A shipped model's merged folder, a backbone alias's folder, else ``name`` (a path or hub id)."""
    from prmkit.models._backbones import resolve_backbone

    return merged_shipped_folder(cls, name) if name in SHIPPED_MODELS else resolve_backbone(name)


def merged_shipped_folder(cls: type[PersistenceMixin], name: str) -> str:
    """:func:`~prmkit.models.shipped_model_folder` (the merge made with ``cls``, the reward model
    class: this module cannot import it)."""
    out = merged_cache_folder(name)
    if is_complete(out):
        return str(out)
    try:
        import peft  # noqa: F401
    except ImportError:
        raise MissingDependencyError("peft", "train", "the shipped reward models (a LoRA adapter)") from None
    # One process merges a shipped model at a time; another waits, then loads the merged folder.
    with build_lock(out, f"merging the shipped model {name!r}"):
        if not is_complete(out):
            _merge_shipped(cls, name, out)
    return str(out)


def _merge_shipped(cls: type[PersistenceMixin], name: str, out: Path) -> None:
    from peft import PeftModel

    asset = shipped_asset(name)
    info: dict[str, Any] = json.loads((asset / RM_CONFIG).read_text())
    record = TrainProvenance.from_dict(info)
    if not record.base_model:
        raise PrmkitError(f"{asset / RM_CONFIG}: the training record names no base model")
    rm = cls.from_backbone(record.base_model, convention=info.get("convention"),
                           kind=info.get("kind", "prm"), max_length=info.get("max_length"),
                           causal=bool((record.train_config or {}).get("causal", False)))
    # Into a copy of each base weight (the same numbers): the base is mapped from the backbone
    # cache's file, and a merge in place copied it page by page on write.
    rm.model = PeftModel.from_pretrained(rm.model, str(asset)).merge_and_unload(safe_merge=True)
    rm.name = info.get("name") or name
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    rm.save_pretrained(tmp, record=record)
    publish(tmp, out)
