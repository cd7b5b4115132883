"""PRM and ORM families behind one scoring interface.

- :class:`RewardModel`: ``score(traces)`` -> per-step (PRM) or per-trace (ORM) probabilities of being
  correct, batched; ``from_pretrained`` / ``from_backbone`` / ``save_pretrained``.
- :class:`Convention` and :data:`CONVENTIONS`: how a family writes a trace and reads its scores
  (``prmkit``, ``trl``, ``qwen2.5-math-prm``, ``math-shepherd``, ``rlhflow``, ``skywork-prm``).
- :func:`align`: step character spans -> exactly one token position per step, for any tokenizer.
- :class:`Precision`, :func:`resolve_precision`: fp32 / bf16 (autocast) / auto compute for training
  and scoring, falling back to fp32 where the hardware has no native bfloat16 (:func:`bf16_problem`).
- Shipped reward models by name (:data:`SHIPPED_MODELS`: ``default``, ``default-orm``, ``default-word``,
  ``default-word-orm``): a LoRA adapter over an installed base, merged and cached on first use
  (:func:`shipped_model_folder`).
"""

from prmkit.models._align import Aligned, AlignmentError, Rendered, align
from prmkit.models._backbones import BACKBONES, build_char_tokenizer, build_tiny_backbone, resolve_backbone
from prmkit.models._conventions import (
    CONVENTIONS,
    QWEN_PRM_SYSTEM,
    Convention,
    get_convention,
    register_convention,
)
from prmkit.models._encoding import Encoded
from prmkit.models._forward import SCORE_AUTO
from prmkit.models._model import (
    PICKLE_WEIGHTS,
    RewardModel,
    check_safe_weights,
    load_reward_model,
    shipped_model_folder,
)
from prmkit.models._persistence import RM_CONFIG
from prmkit.models._precision import (
    FP32_SDPA,
    GQA_SDPA,
    PRECISIONS,
    Precision,
    bf16_problem,
    fp32_attention,
    gqa_attention,
    resolve_precision,
)
from prmkit.models._shipped import SHIPPED_MODELS, export_shipped

__all__ = [
    "Aligned", "AlignmentError", "Rendered", "align",
    "BACKBONES", "build_char_tokenizer", "build_tiny_backbone", "resolve_backbone",
    "CONVENTIONS", "QWEN_PRM_SYSTEM", "Convention", "get_convention", "register_convention",
    "RM_CONFIG", "SCORE_AUTO", "Encoded", "RewardModel", "load_reward_model", "check_safe_weights",
    "PICKLE_WEIGHTS",
    "SHIPPED_MODELS", "export_shipped", "shipped_model_folder",
    "FP32_SDPA", "PRECISIONS", "Precision", "bf16_problem", "fp32_attention", "resolve_precision",
    "GQA_SDPA", "gqa_attention",
]
