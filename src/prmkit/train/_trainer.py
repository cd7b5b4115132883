"""PRM and ORM training, top to bottom: data -> model -> loop -> checkpoint.

Loss: at each step's label position, cross-entropy between the head's two-class distribution and the
target ``[1 - p, p]`` (``p`` = 1 / 0 for hard labels, the Monte Carlo probability for soft ones), or
binary cross-entropy for a one-output head; positions without a label are masked. It is summed over
the labelled positions of an optimizer step (on every process) and divided by their number, so gradient
accumulation and several processes give the same update as one big batch.

Speed: forward passes run in ``precision`` (``bf16``: bfloat16 autocast, weights and optimizer state
in float32; ``int8``: the backbone's linear layers multiply in int8 on a CPU, see
:mod:`prmkit.train._int8`, with the decoder's activations, norms and rotary embedding compiled, see
:mod:`prmkit.train._fused`; ``auto``: bf16 where the hardware has it natively, see :data:`TRAIN_AUTO`), the head runs
only at the label positions (:meth:`RewardModel.position_logits`), AdamW is the fused kernel where
torch has one for the device, and batches hold traces of similar length (``bucketing``).

Runs on one process or many (DDP; :func:`prmkit.train.launch` starts them on CPU, over gloo, and
``accelerate launch --multi_gpu`` on GPUs): each process takes every ``world``-th batch. Checkpoints
(``save_every``) hold the weights (or LoRA adapter), the optimizer
state in safetensors and the position in the data, so a resumed run continues exactly where it
stopped. The final model is a plain ``save_pretrained`` folder; LoRA is merged into it. Each is
written whole in a staging folder, then renamed into place; a failure on the way (a full disk, Ctrl-C)
removes the staging folder, so ``output_dir`` holds what it held before.

A run is extended by resuming it with a larger ``max_steps`` (or ``epochs``): from its newest
checkpoint (an interrupted run's, or the one ``keep_final_checkpoint`` leaves beside a finished
model). The learning-rate schedule is then recomputed for the new total from the checkpoint's step
on, so the result is not the run that the larger budget would have been from the start; the log
says so. A smaller total than the checkpoint's step is refused.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import full_disk_error, is_full_disk
from prmkit._jsonio import publish_folder, publish_into
from prmkit._result import Record
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.eval import auroc, first_error_accuracy
from prmkit.models import RM_CONFIG, Encoded, Precision, RewardModel, fp32_attention, resolve_precision
from prmkit.policies import cpu_info, int8_problem, use_inductor_cache
from prmkit.provenance import TrainProvenance
from prmkit.train._config import TrainConfig
from prmkit.train._data import DataReport, encode_traces, length_batches, read_trace_files, split_by_problem
from prmkit.train._fused import fused_elementwise
from prmkit.train._int8 import int8_products

__all__ = ["train", "TrainResult", "evaluate_encoded", "position_loss", "replaces_finished_model"]

CHECKPOINT_PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.json"
#: Config fields that must match for a run to resume from a checkpoint (``max_steps`` and ``epochs``
#: may grow: that extends the run; see the module docs).
RESUME_KEYS = ("kind", "model", "convention", "num_labels", "lora", "train", "format", "label_source",
               "neutral", "soft_labels", "outcome", "max_traces", "sample_traces", "tool_check", "max_length",
               "batch_size", "grad_accum", "lr", "weight_decay", "warmup_ratio", "bucketing", "seed",
               "eval_fraction", "precision")
#: Config fields that set the run's length: a resume may raise them (an extension).
LENGTH_KEYS = ("epochs", "max_steps")

#: What ``precision: auto`` trains in where the hardware has native bfloat16 (elsewhere fp32). bf16,
#: because it kept fp32's quality on SmolLM2-135M: 40 steps of full fine-tuning on the PRMBench
#: circular training file, evaluated on its 90 test traces, ended at eval loss 0.369 and step AUROC
#: 0.891 in bf16 against 0.391 and 0.882 in fp32 (the commands are in the README), and in the 6-step
#: train_vs_trl benchmark both ended at the same eval loss to 4 decimals.
TRAIN_AUTO = "bf16"


@dataclass
class TrainResult(Record):
    """What a run did: where the model is, how it was fed, how fast it went, how it scored
    (``eval``: the final evaluation's metrics by name, None without held-out data)."""

    kind: ClassVar[str] = "train"

    output_dir: str
    steps: int
    seconds: float
    tokens: int
    padded_tokens: int
    train_data: dict[str, Any]
    eval_data: dict[str, Any] | None
    eval: dict[str, Any] | None
    history: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: str | None = None
    precision: dict[str, Any] | None = None  #: requested / used / note (see prmkit.models.Precision)
    optimizer: str | None = None             #: the AdamW implementation used (fused / foreach / for-loop)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def eval_line(self) -> str | None:
        """``final eval: eval_loss 0.3012, auroc 0.8610, ...`` (the float metrics), or None without one."""
        if not self.eval:
            return None
        return "final eval: " + ", ".join(f"{k} {v:.4f}" for k, v in self.eval.items() if isinstance(v, float))

    def lines(self) -> list[str]:
        """What a terminal shows of the run: its length, speed and output, then the final evaluation."""
        head = (f"{self.steps} optimizer steps in {self.seconds:.0f} s ({self.tokens_per_s:.0f} tokens/s"
                f"{', resumed from ' + self.resumed_from if self.resumed_from else ''}): {self.output_dir}")
        return [head, *([e] if (e := self.eval_line()) else [])]


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "train", "training") from None
    return torch


def position_loss(logits, targets):
    """``(sum of losses, count)`` over labelled positions (``targets`` NaN = no label)."""
    torch = _torch()
    mask = ~torch.isnan(targets)
    t = targets[mask]
    lg = logits[mask].float()
    if t.numel() == 0:
        return lg.sum() * 0.0, 0
    if lg.shape[-1] == 1:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(lg[:, 0], t, reduction="sum")
    else:
        logp = torch.log_softmax(lg, dim=-1)
        loss = -(t * logp[:, 1] + (1 - t) * logp[:, 0]).sum()
    return loss, int(t.numel())


class _Scorer:
    """Wraps the model so that the forward pass DDP sees is the one that computes position logits."""

    @staticmethod
    def build(rm: RewardModel):
        torch = _torch()

        class Scorer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = rm.model

            def forward(self, input_ids, attention_mask, rows, cols):
                return rm.position_logits(input_ids, attention_mask, rows, cols)

        return Scorer()


def evaluate_encoded(rm: RewardModel, encoded: list[Encoded], *, batch_size: int = 8,
                     precision: str = "fp32") -> dict[str, Any]:
    """Eval loss, step AUROC and first-error accuracy (PRM) or trace accuracy / AUROC (ORM).

    ``precision`` defaults to fp32 whatever the training precision, so eval losses of runs trained in
    different precisions compare the weights, not the arithmetic of the evaluation.
    """
    _torch()  # a clear error where torch is missing
    if not encoded:
        return {}
    prec = resolve_precision(precision, rm.device, auto=TRAIN_AUTO, shape=rm.compute_shape())
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    preds: list[list[float]] = [[] for _ in encoded]
    loss_sum, count = 0.0, 0
    was_training = rm.model.training
    rm.model.eval()
    try:
        with prec.inference(rm.device):
            for s in range(0, len(order), batch_size):
                idx = order[s:s + batch_size]
                b = rm.collate([encoded[i] for i in idx])
                dev = rm.device
                logits = rm.position_logits(b["input_ids"].to(dev), b["attention_mask"].to(dev),
                                            b["rows"].to(dev), b["cols"].to(dev))
                ls, n = position_loss(logits, b["targets"].to(dev))
                loss_sum += float(ls)
                count += n
                p = rm.probabilities(logits).tolist()
                at = 0
                for i in idx:
                    k = len(encoded[i].positions)
                    preds[i] = p[at:at + k]
                    at += k
    finally:
        rm.model.train(was_training)
    scores, positives = [], []
    for e, p in zip(encoded, preds, strict=True):
        for t, v in zip(e.targets or [], p, strict=True):
            if t is not None:
                scores.append(v)
                positives.append(t >= 0.5)
    out: dict[str, Any] = {"eval_loss": loss_sum / max(count, 1), "eval_positions": count,
                           "eval_traces": len(encoded)}
    out["auroc"] = auroc(scores, positives)
    if rm.kind == "prm":
        out["first_error_accuracy"] = first_error_accuracy(preds, [e.targets or [] for e in encoded])
    else:
        out["accuracy"] = sum((s >= 0.5) == p for s, p in zip(scores, positives, strict=True)) / max(len(scores), 1)
    return out


# -- checkpoints ------------------------------------------------------------------------------------------

def _checkpoints(out: Path) -> list[Path]:
    found = [p for p in out.glob(CHECKPOINT_PREFIX + "*") if (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX):]))


def _save_optimizer(optimizer, path: Path) -> dict[str, Any]:
    """Optimizer tensors to safetensors (nothing pickled); the rest is returned for the JSON state."""
    torch = _torch()
    from safetensors.torch import save_file

    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for pid, state in sd["state"].items():
        for k, v in state.items():
            if torch.is_tensor(v):
                tensors[f"{pid}.{k}"] = v.detach().contiguous().cpu()
            else:
                scalars[f"{pid}.{k}"] = v
    save_file(tensors, str(path))
    return {"param_groups": sd["param_groups"], "scalars": scalars}


def _load_optimizer(optimizer, path: Path, saved: dict[str, Any]) -> None:
    from safetensors.torch import load_file

    state: dict[int, dict[str, Any]] = {}
    for key, v in load_file(str(path)).items():
        pid, _, name = key.partition(".")
        state.setdefault(int(pid), {})[name] = v
    for key, v in saved.get("scalars", {}).items():
        pid, _, name = key.partition(".")
        state.setdefault(int(pid), {})[name] = v
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})


def _resume_mismatch(cfg: TrainConfig, saved: dict[str, Any]) -> list[str]:
    now = cfg.to_dict()
    default = TrainConfig().to_dict()  # a key added since the checkpoint was written had its default
    saved = {k: saved.get(k, default.get(k)) for k in RESUME_KEYS}
    return [f"{k}: checkpoint has {saved[k]!r}, config has {now.get(k)!r}"
            for k in RESUME_KEYS if json.dumps(saved[k], sort_keys=True, default=str)
            != json.dumps(now.get(k), sort_keys=True, default=str)]


def replaces_finished_model(cfg: TrainConfig) -> bool:
    """Whether training ``cfg`` would replace a finished model: ``cfg.output_dir`` holds one and no
    checkpoint this run would resume from (a run kept with ``keep_final_checkpoint`` is extended,
    an interrupted one resumed; neither replaces anything). ``prmkit train`` refuses such a run
    unless ``--overwrite``."""
    out = Path(cfg.output_dir)
    return (out / RM_CONFIG).is_file() and not (cfg.resume and _checkpoints(out))


def _check_output_dir(output_dir: str) -> None:
    """Refuse (:class:`~prmkit.errors.PrmkitError`, one line naming the folder) an ``output_dir`` this
    process cannot write, before anything loads: a probe file is created and removed in it, or, where
    it does not exist yet, in the nearest folder above it that does (where the run will create it).
    Without it, a read-only folder failed only at the first save, after the model had loaded and
    trained."""
    out = Path(output_dir).absolute()
    folder = out
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise PrmkitError(f"output_dir {output_dir}: {folder} is a file, not a folder; choose another "
                          "output_dir")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".prmkit-write-probe-"):
            pass
    except OSError as e:
        what = "cannot write in it" if folder == out else f"cannot create it in {folder}"
        raise PrmkitError(f"output_dir {output_dir}: {what} ({e.strerror or e}); choose another "
                          "output_dir or make the folder writable") from None


@contextlib.contextmanager
def _staging(out: Path, name: str) -> Iterator[Path]:
    """A fresh staging folder ``out / name`` for something published whole (a checkpoint, the final
    model). On any failure (a full disk, Ctrl-C) it is removed, and so are the folders made for it
    that hold nothing else (``out`` itself on a first run), so ``out`` is left as it was; a full disk
    is then said in the user's terms (:func:`~prmkit._durable.full_disk_error`)."""
    stage = out / name
    shutil.rmtree(stage, ignore_errors=True)
    made = [p for p in (out, *out.parents) if not p.exists()]  # deepest first
    stage.mkdir(parents=True)
    try:
        yield stage
    except BaseException as e:
        shutil.rmtree(stage, ignore_errors=True)
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: it holds something else now; kept
                folder.rmdir()
        if is_full_disk(e):
            raise full_disk_error(out, e) from e
        raise


# -- the run ------------------------------------------------------------------------------------------------

def train(cfg: TrainConfig, *, log=print) -> TrainResult:
    """Train a PRM or ORM as ``cfg`` says; returns a :class:`TrainResult` (the model is in
    ``cfg.output_dir``)."""
    torch = _torch()
    try:
        from accelerate import Accelerator
        from accelerate.utils import set_seed
    except ImportError:
        raise MissingDependencyError("accelerate", "train", "training") from None
    problems = cfg.validate()
    if problems:
        from prmkit.train._config import ConfigError

        raise ConfigError(problems)

    out = Path(cfg.output_dir)
    acc = Accelerator(cpu=not torch.cuda.is_available())
    main = acc.is_main_process
    if main:  # the one process that writes, before the model loads
        _check_output_dir(cfg.output_dir)
    say = log if main else (lambda *a, **k: None)
    set_seed(cfg.seed)
    if cfg.precision == "int8":
        problem = int8_problem(acc.device)
        prec = Precision("int8", "int8") if problem is None else Precision("int8", "fp32", problem)
        if problem is None:  # what it compiles kept in prmkit's cache, as the decode loop's is
            use_inductor_cache()
            if not cpu_info().fast_int8:  # asked for by name: done, but the user should know the cost
                say(f"warning: this CPU ({cpu_info().cpu_class}) has no int8 dot-product instructions "
                    "(VNNI or AMX): int8 products are slower than fp32 here; precision=auto trains in fp32")
    else:
        prec = resolve_precision(cfg.precision, acc.device, auto=TRAIN_AUTO)
    # Weights (and so AdamW's state) in float32 unless dtype says otherwise, on every device: a model
    # loads in bfloat16 by default on a GPU, where AdamW's small updates would round away.
    weights = cfg.dtype or "float32"
    say(f"precision: {prec.describe()}" + ("" if prec.used == "fp32" else
                                           f", weights and optimizer state in {weights}"))

    # 1. Where to start: a fresh backbone, or the newest checkpoint of this run.
    ckpt = _checkpoints(out)[-1] if cfg.resume and out.is_dir() and _checkpoints(out) else None
    state: dict[str, Any] = {}
    if ckpt is not None:
        state = json.loads((ckpt / STATE_FILE).read_text())
        bad = _resume_mismatch(cfg, state["config"])
        if bad:
            raise PrmkitError(f"{ckpt} was written by a different configuration; use another output_dir "
                              "or resume=false:\n  " + "\n  ".join(bad))
        say(f"resuming from {ckpt} (step {state['step']})")
    full_ckpt = ckpt is not None and cfg.lora is None
    # The main process first: a backbone alias may be built or converted into the prmkit cache on first
    # use, and once the process group exists transformers' save_pretrained writes no weights on other ranks.
    with acc.main_process_first():
        rm = (RewardModel.from_pretrained(str(ckpt), max_length=cfg.max_length, dtype=weights)
              if full_ckpt else
              RewardModel.from_backbone(cfg.model, convention=cfg.convention, kind=cfg.kind,
                                        num_labels=cfg.num_labels, dtype=weights, max_length=cfg.max_length,
                                        trust_remote_code=cfg.trust_remote_code, seed=cfg.seed,
                                        causal=cfg.causal))
    rm.model.to(acc.device)
    if cfg.disable_dropout:
        for m in rm.model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0

    # 2. Data: read, hold out, encode; everything left out is counted.
    traces = read_trace_files(cfg.train, cfg.format, cfg.max_traces)
    held: list = []
    if cfg.eval:
        held = read_trace_files(cfg.eval, cfg.format)
    elif cfg.eval_fraction > 0:
        traces, held = split_by_problem(traces, cfg.eval_fraction, cfg.seed)
    if cfg.sample_traces is not None:
        if cfg.sample_traces > len(traces):
            raise PrmkitError(f"sample_traces: {cfg.sample_traces} asked for, but there are only "
                              f"{len(traces)} training traces (after the held-out split)")
        say(f"a random sample of {cfg.sample_traces} of the {len(traces)} training traces (seed {cfg.seed})")
        traces = random.Random(cfg.seed).sample(traces, cfg.sample_traces)
    label_kw = {"kind": cfg.kind, "label_source": cfg.label_source, "neutral": cfg.neutral,
                "soft": cfg.soft_labels, "outcome": cfg.outcome, "tool_check": cfg.tool_check}
    train_report, eval_report = DataReport(), DataReport()
    data = encode_traces(rm, traces, report=train_report, **label_kw)
    eval_data = encode_traces(rm, held, report=eval_report, **label_kw) if held else []
    say(f"train: {train_report.summary()}")
    if held:
        say(f"eval: {eval_report.summary()}")
    if not data:
        raise PrmkitError(f"no usable training traces: {train_report.summary()}")

    # 3. LoRA (the new head is trained in full) and the optimizer.
    peft_model = None
    if cfg.lora is not None:
        peft_model = _apply_lora(rm, cfg)
        if ckpt is not None:
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            set_peft_model_state_dict(peft_model, load_file(str(ckpt / "adapter" / "adapter_model.safetensors")))
    params = [p for p in rm.model.parameters() if p.requires_grad]
    optimizer, opt_kind = _adamw(params, cfg)
    scorer = _Scorer.build(rm)
    scorer, optimizer = acc.prepare(scorer, optimizer)
    if ckpt is not None:
        _load_optimizer(optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer,
                        ckpt / "optimizer.safetensors", state["optimizer"])

    # 4. Schedule: each process takes every world-th batch; all take the same number.
    world, rank = acc.num_processes, acc.process_index
    lengths = [len(e) for e in data]

    def epoch_batches(epoch: int) -> list[list[int]]:
        batches = length_batches(lengths, cfg.batch_size, seed=cfg.seed + epoch, bucketing=cfg.bucketing)
        per_rank = len(batches) // world
        return batches[rank::world][:per_rank]

    micro_per_epoch = len(epoch_batches(0))
    if micro_per_epoch == 0:
        raise PrmkitError(f"{len(data)} training traces make fewer batches than processes ({world})")
    steps_per_epoch = math.ceil(micro_per_epoch / cfg.grad_accum)
    total = cfg.max_steps if cfg.max_steps > 0 else max(1, math.ceil(cfg.epochs * steps_per_epoch))
    warmup = int(cfg.warmup_ratio * total)

    def lr_at(step: int) -> float:  # linear warmup, then linear decay to 0 (the transformers default)
        if step < warmup:
            return cfg.lr * (step + 1) / warmup
        return cfg.lr * max(0.0, (total - step) / max(1, total - warmup))

    step, epoch, pos = state.get("step", 0), state.get("epoch", 0), state.get("pos", 0)
    if ckpt is not None:
        if step > total:
            raise PrmkitError(f"{ckpt} is at step {step}, past this run's {total} steps: a run can be "
                              "extended (a larger max_steps or epochs), not shortened; use another "
                              "output_dir or resume=false")
        was = {k: state["config"].get(k) for k in LENGTH_KEYS}
        if was != {k: getattr(cfg, k) for k in LENGTH_KEYS}:
            say(f"extending the run: {', '.join(f'{k} {was[k]} -> {getattr(cfg, k)}' for k in LENGTH_KEYS)}"
                f" ({total} steps); the learning-rate schedule is recomputed for {total} steps from step "
                f"{step} on, so this is not the run {total} steps would have been from the start")
    history: list[dict[str, Any]] = state.get("history", [])
    say(f"{total} optimizer steps ({steps_per_epoch}/epoch, {world} process(es), batch {cfg.batch_size} "
        f"x accumulation {cfg.grad_accum}, AdamW {opt_kind})")

    # 5. The loop.
    from prmkit._progress import progress_bar

    seconds, tokens, padded = 0.0, 0, 0
    win_loss, win_count = 0.0, 0
    last_eval: dict[str, Any] | None = None
    scorer.train()
    # bf16 on a CPU: attention in float32 is the faster there (see fp32_attention)
    cpu_bf16 = prec.used == "bf16" and acc.device.type == "cpu"
    backbone = getattr(rm.model, rm.model.base_model_prefix, rm.model)
    with (fp32_attention(rm.model, enabled=cpu_bf16) as attention32,
          int8_products(backbone, enabled=prec.used == "int8") as int8_layers,
          fused_elementwise(backbone, enabled=prec.used == "int8") as fused,
          progress_bar(total - step, "training", enabled=cfg.progress and main) as advance):
        if attention32:
            say("attention in float32 (on this CPU faster than in bf16)")
        if int8_layers:
            say(f"int8 products in the backbone's {int8_layers} linear layers (the head and everything "
                "else in float32)")
        if any(fused.values()):
            say("compiled elementwise parts: " + ", ".join(f"{n} {k}" for k, n in fused.items() if n))
        while step < total:
            batches = epoch_batches(epoch)
            while pos < len(batches) and step < total:
                t0 = time.perf_counter()
                group = [rm.collate([data[i] for i in b]) for b in batches[pos:pos + cfg.grad_accum]]
                labelled = sum(int((~torch.isnan(g["targets"])).sum()) for g in group)
                if world > 1:  # DDP averages gradients over processes: divide by the mean count
                    count = torch.tensor([labelled], dtype=torch.float64, device=acc.device)
                    labelled = float(acc.reduce(count, reduction="sum")[0]) / world
                for g_i, g in enumerate(group):
                    sync = g_i == len(group) - 1
                    with nullcontext() if sync or world == 1 else acc.no_sync(scorer):
                        with prec.autocast(acc.device):
                            logits = scorer(*(g[k].to(acc.device) for k in ("input_ids", "attention_mask", "rows", "cols")))
                        loss, n = position_loss(logits, g["targets"].to(acc.device))
                        acc.backward(loss / max(labelled, 1))
                    win_loss += float(loss.detach())
                    win_count += n
                    tokens += int(g["attention_mask"].sum())
                    padded += g["attention_mask"].numel()
                if cfg.max_grad_norm:
                    acc.clip_grad_norm_(params, cfg.max_grad_norm)
                for group_ in optimizer.param_groups:
                    group_["lr"] = lr_at(step)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                seconds += time.perf_counter() - t0
                pos += len(group)
                step += 1
                advance(1)
                if step % cfg.log_every == 0 or step == total:
                    rec = {"step": step, "epoch": epoch, "loss": win_loss / max(win_count, 1),
                           "lr": lr_at(step - 1), "tokens_per_s": tokens / seconds if seconds else 0.0}
                    history.append(rec)
                    win_loss, win_count = 0.0, 0
                    if main and step % (cfg.log_every * 10) == 0:
                        say(f"step {step}/{total} loss {rec['loss']:.4f} {rec['tokens_per_s']:.0f} tok/s")
                if eval_data and cfg.eval_every and step % cfg.eval_every == 0 and step < total:
                    last_eval = _eval_main(acc, rm, eval_data, cfg, step, history, say)
                if cfg.save_every and step % cfg.save_every == 0 and step < total:
                    _save_checkpoint(acc, rm, peft_model, optimizer, cfg, out, step, epoch, pos, history)
            if pos >= len(batches):
                epoch, pos = epoch + 1, 0

    # 6. Final evaluation, a checkpoint to extend the run from (if asked) and the plain transformers folder.
    if eval_data:
        last_eval = _eval_main(acc, rm, eval_data, cfg, step, history, say)
    if cfg.keep_final_checkpoint and not (out / f"{CHECKPOINT_PREFIX}{step}").exists():
        _save_checkpoint(acc, rm, peft_model, optimizer, cfg, out, step, epoch, pos, history)
    acc.wait_for_everyone()
    totals = torch.tensor([tokens, padded], dtype=torch.float64, device=acc.device)
    totals = acc.reduce(totals, reduction="sum") if world > 1 else totals
    tokens, padded = int(totals[0]), int(totals[1])
    if main:
        # Written whole to a folder beside the checkpoints, flushed, then moved into place with
        # prmkit_rm.json last: a failure leaves an earlier model in ``out`` as it was.
        with _staging(out, ".tmp-final") as stage:
            if peft_model is not None:
                # The adapter (and the head it trains in full) alone, beside the merged weights: a few
                # MB, what a shipped model is made of (prmkit.models.export_shipped).
                peft_model.save_pretrained(stage / "adapter")
                rm.model = _merged(peft_model, out)
            rm.name = f"prmkit-{cfg.kind}:{cfg.model}"
            record = TrainProvenance(train_config=cfg.to_dict(), steps=step, extra={
                "train_data": train_report.to_dict(), "eval_data": eval_report.to_dict() if held else None,
                "eval": last_eval, "processes": world, "precision": prec.to_dict(), "optimizer": opt_kind})
            rm.save_pretrained(stage, record=record)
            _write_config_yaml(cfg, stage / "train_config.yaml")
            with open(stage / "metrics.jsonl", "w") as f:
                for rec in history:
                    f.write(json.dumps(rec) + "\n")
            publish_into(stage, out, last=RM_CONFIG)
        for old in _checkpoints(out)[:-1] if cfg.keep_final_checkpoint else _checkpoints(out):
            shutil.rmtree(old, ignore_errors=True)
        say(f"saved {cfg.kind.upper()} to {out} ({step} steps, {tokens / max(seconds, 1e-9):.0f} tokens/s, "
            f"{tokens / max(padded, 1):.1%} of batch tokens were not padding)")
    acc.wait_for_everyone()
    return TrainResult(str(out), step, seconds, tokens, padded, train_report.to_dict(),
                       eval_report.to_dict() if held else None, last_eval, history,
                       str(ckpt) if ckpt else None, prec.to_dict(), opt_kind)


def _merged(peft_model: Any, out: Path) -> Any:
    """The LoRA model with its adapter merged into a copy of each base weight (peft's ``safe_merge``),
    the same numbers as a merge in place: the base weights are mapped from the backbone cache's
    file, and adding to them in place copied that file page by page on write (a one-step SmolLM2 run
    spent about a quarter of its time there). The copy also refuses weights that are not finite."""
    try:
        return peft_model.merge_and_unload(safe_merge=True)
    except ValueError as e:
        if "NaN" not in str(e):
            raise
        raise PrmkitError(f"{out}: the trained LoRA adapter gives weights that are not finite (NaN or "
                          "inf): the run diverged (try a lower lr); the final model was not saved") from None


def _eval_main(acc, rm: RewardModel, eval_data: list[Encoded], cfg: TrainConfig, step: int,
               history: list[dict[str, Any]], say) -> dict[str, Any] | None:
    result = None
    if acc.is_main_process:
        result = evaluate_encoded(rm, eval_data, batch_size=cfg.batch_size)
        history.append({"step": step, **result})
        parts = [f"{k} {v:.4f}" for k, v in result.items() if isinstance(v, float)]
        say(f"eval at step {step}: " + ", ".join(parts))
    acc.wait_for_everyone()
    return result


def _adamw(params: list, cfg: TrainConfig) -> tuple[Any, str]:
    """AdamW with torch's fused kernel where it exists for these parameters (CPU since torch 2.4,
    CUDA), else the multi-tensor (foreach) one, else the per-tensor loop. The same update; one step
    over SmolLM2-135M's weights on this 2-core CPU took 5-6 times longer foreach or per tensor than
    fused (10-13 s against 2.1 s, measured in one process under the same load)."""
    torch = _torch()
    for kind in ("fused", "foreach"):
        try:
            return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, **{kind: True}), kind
        except (RuntimeError, TypeError, ValueError):  # no such kernel for this device or dtype
            continue
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay), "for-loop"


def _apply_lora(rm: RewardModel, cfg: TrainConfig):
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise MissingDependencyError("peft", "train", "LoRA training") from None
    lora = cfg.lora
    assert lora is not None
    targets = lora.target_modules
    head: list[str] | None = None
    if rm.convention.head == "lm_token":
        task = "CAUSAL_LM"
    else:
        task = "TOKEN_CLS"
        head = [n for n in ("score", "classifier") if isinstance(getattr(rm.model, n, None), _torch().nn.Module)]
        if isinstance(targets, str) and targets.lower() == "all-linear":
            # peft's all-linear leaves out the head of a causal LM or sequence classifier, not of a token
            # classifier: LoRA would wrap the head, which modules_to_save then refuses. Name them here.
            targets = _linear_layers(rm.model, exclude=head)
    pc = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                    target_modules=targets, task_type=task, modules_to_save=head or None)
    peft_model = get_peft_model(rm.model, pc)  # wraps rm.model's layers in place; rm.model stays usable
    return peft_model


def _linear_layers(model, exclude: list[str]) -> list[str]:
    """Names of every linear layer of ``model`` outside the modules named in ``exclude``."""
    torch = _torch()
    from transformers.pytorch_utils import Conv1D

    return [name for name, m in model.named_modules()
            if isinstance(m, (torch.nn.Linear, Conv1D))
            and not any(name == x or name.startswith(x + ".") for x in exclude)]


def _save_checkpoint(acc, rm: RewardModel, peft_model, optimizer, cfg: TrainConfig, out: Path, step: int,
                     epoch: int, pos: int, history: list[dict[str, Any]]) -> None:
    acc.wait_for_everyone()
    if acc.is_main_process:
        with _staging(out, f".tmp-{CHECKPOINT_PREFIX}{step}") as tmp:
            if peft_model is not None:
                peft_model.save_pretrained(tmp / "adapter")
            else:
                rm.save_pretrained(tmp)
            opt = optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer
            opt_state = _save_optimizer(opt, tmp / "optimizer.safetensors")
            state = {"step": step, "epoch": epoch, "pos": pos, "config": cfg.to_dict(), "optimizer": opt_state,
                     "history": history}
            (tmp / STATE_FILE).write_text(json.dumps(state, default=str))
            publish_folder(tmp, out / f"{CHECKPOINT_PREFIX}{step}", replace=True)
        for old in _checkpoints(out)[:-max(1, cfg.keep_checkpoints)]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()


def _write_config_yaml(cfg: TrainConfig, path: Path) -> None:
    import yaml

    header = f"# prmkit train {cfg.kind} --config {path.name}\n"
    path.write_text(header + yaml.safe_dump(cfg.to_dict(), sort_keys=False))
