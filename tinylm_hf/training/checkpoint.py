"""Checkpoints: the raw (model, optimizer, iteration) triple, and full training state for exact resume.

Files are written atomically (a temp file in the same folder, then `os.replace`), so a run killed
mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np
import torch

CHECKPOINT_PATTERN = re.compile(r"^ckpt_(\d+)\.pt$")


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    # DDP wraps in .module, torch.compile in ._orig_mod; state dicts are saved from the plain model.
    while True:
        if hasattr(model, "module") and isinstance(model.module, torch.nn.Module):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def atomic_torch_save(obj: Any, out: str | os.PathLike | BinaryIO | IO[bytes]) -> None:
    """`torch.save` to a path via temp file + `os.replace`, or straight into a binary file object."""
    if isinstance(out, (str, os.PathLike)):
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            torch.save(obj, tmp)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
    else:
        torch.save(obj, out)


def save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: str | os.PathLike | BinaryIO | IO[bytes],
) -> None:
    """Save model weights, optimizer state and the iteration number to a path or binary file object."""
    atomic_torch_save(
        {"model": _unwrap(model).state_dict(), "optimizer": optimizer.state_dict(), "iteration": int(iteration)},
        out,
    )


def load_checkpoint(
    src: str | os.PathLike | BinaryIO | IO[bytes],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
) -> int:
    """Restore `model` (and `optimizer` if given) from `save_checkpoint`'s output; returns the iteration."""
    if isinstance(src, (str, os.PathLike)) and not Path(src).is_file():
        raise FileNotFoundError(f"checkpoint {src} does not exist")
    state = torch.load(src, map_location="cpu", weights_only=False)
    _unwrap(model).load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return int(state["iteration"])


# ----------------------------------------------------------------------------- training state


def capture_rng_state(generator: torch.Generator | None = None) -> dict[str, Any]:
    """Every random stream a training step touches: python, numpy, torch (CPU, CUDA) and the sampler."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if generator is not None:
        state["sampler"] = generator.get_state()
    return state


def restore_rng_state(state: dict[str, Any], generator: torch.Generator | None = None) -> None:
    """Inverse of `capture_rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if generator is not None and "sampler" in state:
        generator.set_state(state["sampler"])


def checkpoint_path(directory: str | os.PathLike, iteration: int) -> Path:
    """`directory/ckpt_{iteration:08d}.pt`: names sort by iteration."""
    return Path(directory) / f"ckpt_{int(iteration):08d}.pt"


def list_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """Training checkpoints in `directory`, oldest first."""
    d = Path(directory)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := CHECKPOINT_PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def find_latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The newest training checkpoint in `directory`, or None."""
    found = list_checkpoints(directory)
    return found[-1] if found else None


def save_training_state(
    directory: str | os.PathLike,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    generator: torch.Generator | None,
    train_config: dict[str, Any],
    model_config: dict[str, Any],
    metrics: list[dict[str, Any]],
    extra: dict[str, Any] | None = None,
    keep_last: int | None = None,
) -> Path:
    """Write a full training checkpoint for `iteration` and delete all but the newest `keep_last`."""
    path = checkpoint_path(directory, iteration)
    state = {
        "model": _unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "iteration": int(iteration),
        "rng": capture_rng_state(generator),
        "train_config": train_config,
        "model_config": model_config,
        "metrics": metrics,
        "extra": extra or {},
    }
    atomic_torch_save(state, path)
    if keep_last is not None and keep_last > 0:
        for old in list_checkpoints(directory)[:-keep_last]:
            old.unlink(missing_ok=True)
    return path


def load_training_state(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator | None = None,
) -> dict[str, Any]:
    """Restore model, optimizer and every RNG stream from `path`; returns the whole saved dict."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    state = torch.load(path, map_location="cpu", weights_only=False)
    _unwrap(model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    restore_rng_state(state["rng"], generator)
    return state
