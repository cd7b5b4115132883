"""Which weight files prmkit reads: a model folder whose weights are Python pickles only is refused
unless the user says they trust it (the README: nothing is unpickled). Shared by every package that
loads weights (reward models in ``models``, policies in ``policies``), which do not import each other
both ways."""

from __future__ import annotations

import os
from pathlib import Path

from prmkit.errors import PrmkitError

__all__ = ["PICKLE_WEIGHTS", "check_safe_weights"]

#: Weight files that are Python pickles (``torch.load``): reading one can run any code it holds.
PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")


def check_safe_weights(path: str | os.PathLike, *, allow_pickle: bool = False,
                       flag: str = "--allow-pickle (allow_pickle=True in Python)") -> None:
    """Refuse a model folder whose weights are pickle files only (:data:`PICKLE_WEIGHTS`, no
    ``*.safetensors``) unless ``allow_pickle``: unpickling a file runs whatever code it holds.
    A hub id (not a folder) is not checked here; it is loaded with ``use_safetensors=True``.
    ``flag`` is how the caller's user allows it, named in the error.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "pytorch_model.bin").write_bytes(b"")
    >>> check_safe_weights(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: ...: its weights are pickle files only (pytorch_model.bin) ...
    >>> check_safe_weights(d, allow_pickle=True)
    """
    folder = Path(path)
    if allow_pickle or not folder.is_dir() or any(folder.glob("*.safetensors")):
        return
    pickled = sorted({p.name for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern)})
    if pickled:
        raise PrmkitError(
            f"{path}: its weights are pickle files only ({', '.join(pickled)}) and unpickling can run "
            "arbitrary code, so prmkit does not load them. Convert the checkpoint to safetensors "
            "(load it once where you trust it and save_pretrained), or, if you trust this folder, "
            f"pass {flag}.")
