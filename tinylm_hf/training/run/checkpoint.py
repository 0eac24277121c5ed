"""Checkpoints: the raw (model, optimizer, iteration) triple, and full training state for exact resume.

This module alone knows how a checkpoint is stored: what follows writes its entries, and `read_checkpoint`
reads one back as a typed `Checkpoint`, the record every other module uses (publishing, resume, scripts).

Files are written atomically (a temp file in the same folder, fsynced, then `os.replace`), so a
run killed mid-write leaves the previous checkpoint intact; orphaned temp files are removed on the
next start. Every file is read with `torch.load(weights_only=True)`: a checkpoint is data, and a
planted pickle payload cannot run (it fails to load with a clear error instead). Training states
carry the run id of the run that wrote them, so a resume never continues another run.
"""

from __future__ import annotations

import errno
import io
import math
import os
import pickle
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

import numpy as np
import torch

from ...fileio import atomic_output, check_input_file, make_folders, no_space

if TYPE_CHECKING:
    from ...modeling import TinyLMConfig

CHECKPOINT_PATTERN = re.compile(r"^ckpt_(\d+)\.pt$")
BEST_CHECKPOINT = "best.pt"


class CheckpointError(ValueError):
    """A checkpoint file cannot be used: truncated, corrupt, unsafe, or of another run."""


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The plain model inside DDP (`.module`) and `torch.compile` (`._orig_mod`) wrappers."""
    while True:
        if hasattr(model, "module") and isinstance(model.module, torch.nn.Module):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def atomic_torch_save(obj: Any, out: str | os.PathLike | BinaryIO | IO[bytes]) -> None:
    """`torch.save` to a path via an fsynced temp file + `os.replace`, or straight into a binary file object.

    A full disk raises `OSError` saying "no space left on <folder>", and the old file stays.
    """
    if not isinstance(out, (str, os.PathLike)):
        torch.save(obj, out)
        return
    path = Path(out)
    make_folders(path.parent)
    hint = f"{path.name} was not written; free some space, then continue with --resume"
    try:
        with atomic_output(path) as tmp, CheckpointFile(tmp, "wb") as fh:
            try:
                torch.save(obj, fh)
            except RuntimeError:
                if fh.error is not None:  # torch reports a failed write only by its aftermath ("unexpected pos")
                    raise fh.error from None
                raise
    except OSError as err:
        raise no_space(err, path.parent, hint) from err
    except RuntimeError as err:  # torch reports a failed write as RuntimeError ("... file write failed")
        if "write" in str(err) and _disk_full(path.parent):
            raise no_space(OSError(errno.ENOSPC, str(err)), path.parent, hint) from err
        raise


class CheckpointFile(io.FileIO):
    """The file a checkpoint is written to, keeping the OSError of a failed write (a full disk): torch.save
    swallows it and raises a RuntimeError about zip positions instead."""

    error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.write_through(data)
        except OSError as err:
            self.error = err
            raise

    def write_through(self, data: Any) -> int:
        """The plain write to disk."""
        return super().write(data)


def _disk_full(folder: Path) -> bool:
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def load_state(src: str | os.PathLike | BinaryIO | IO[bytes]) -> dict[str, Any]:
    """`torch.load(weights_only=True)` on CPU; a corrupt, truncated or code-carrying file is a `CheckpointError`."""
    name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else getattr(src, "name", "checkpoint")
    if isinstance(src, (str, os.PathLike)):
        check_input_file(src, "checkpoint")
    try:
        state = torch.load(src, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"{name} holds objects a checkpoint never holds (it would run code to load them); refusing it. "
            f"Detail: {str(err).splitlines()[0]}"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise CheckpointError(f"{name} is truncated or corrupt ({str(err).splitlines()[0]})") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{name} is not a tinylm checkpoint (no model state)")
    return state


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as read back (`read_checkpoint`): the weights, the optimizer, and what the run recorded.

    A raw checkpoint (`save_checkpoint`) holds the weights, the optimizer and the iteration only; a training
    checkpoint (`save_training_state`) holds every field.
    """

    path: Path | None
    """The file it was read from (None for a file object)."""
    model: dict[str, torch.Tensor]
    """The model's state dict."""
    optimizer: dict[str, Any]
    """The optimizer's state dict."""
    iteration: int
    """Optimizer steps done when it was written."""
    run_id: str | None = None
    """The run that wrote it; None for a raw checkpoint or one from before runs had ids."""
    rng: dict[str, Any] = field(default_factory=dict)
    """Every random stream (`capture_rng_state`)."""
    train_config: dict[str, Any] = field(default_factory=dict)
    """`TrainConfig.to_dict()` of the run."""
    model_config: dict[str, Any] | None = None
    """The model's config as a dict; None for a raw checkpoint."""
    metrics: list[dict[str, Any]] = field(default_factory=list)
    """The run's metrics records up to this checkpoint."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the run keeps beside the weights to resume exactly (`state.RunCheckpoints.save`)."""

    @classmethod
    def from_state(cls, state: dict[str, Any], path: str | os.PathLike | None = None) -> Checkpoint:
        """The record of a dict that `load_state` returned."""
        return cls(
            path=Path(path) if path is not None else None, model=state["model"], optimizer=state.get("optimizer", {}),
            iteration=int(state.get("iteration", 0)), run_id=state.get("run_id"), rng=state.get("rng") or {},
            train_config=state.get("train_config") or {}, model_config=state.get("model_config"),
            metrics=list(state.get("metrics") or []), extra=state.get("extra") or {},
        )

    @property
    def objective(self) -> str | None:
        """The objective the run trained, by name; None for a checkpoint written before runs recorded one
        (`training.objectives.objective_class` tells its objective from the model it holds)."""
        return self.train_config.get("objective") or None

    def tinylm_config(self) -> TinyLMConfig:
        """The `TinyLMConfig` of the saved model (without the entries `save_pretrained` adds for a folder)."""
        from ...modeling import TinyLMConfig

        if self.model_config is None:
            raise ValueError(f"{self.path or 'the checkpoint'} has no model config: it is not a training checkpoint "
                             "of `tinylm train`")
        derived = ("architectures", "auto_map", "dtype", "torch_dtype")
        return TinyLMConfig(**{k: v for k, v in self.model_config.items() if k not in derived})


def read_checkpoint(src: str | os.PathLike | BinaryIO | IO[bytes]) -> Checkpoint:
    """Read a checkpoint file as a `Checkpoint` (safely: see `load_state`); the one reader outside this module."""
    return Checkpoint.from_state(load_state(src), src if isinstance(src, (str, os.PathLike)) else None)


def save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: str | os.PathLike | BinaryIO | IO[bytes],
) -> None:
    """Save model weights, optimizer state and the iteration number to a path or binary file object."""
    atomic_torch_save(
        {"model": unwrap_model(model).state_dict(), "optimizer": optimizer.state_dict(), "iteration": int(iteration)},
        out,
    )


def load_checkpoint(
    src: str | os.PathLike | BinaryIO | IO[bytes],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
) -> int:
    """Restore `model` (and `optimizer` if given) from `save_checkpoint`'s output; returns the iteration."""
    checkpoint = read_checkpoint(src)
    unwrap_model(model).load_state_dict(checkpoint.model)
    if optimizer is not None:
        optimizer.load_state_dict(checkpoint.optimizer)
    return checkpoint.iteration


# ----------------------------------------------------------------------------- training state


def capture_rng_state(generator: torch.Generator | None = None) -> dict[str, Any]:
    """Every random stream a training step touches: python, numpy, torch (CPU, CUDA) and the sampler.

    Stored as tensors and plain lists only, so `torch.load(weights_only=True)` reads it back.
    """
    version, keys, gauss = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(keys), gauss],
        "numpy": [np_name, np_keys.tolist(), int(np_pos), int(np_has_gauss), float(np_gauss)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if generator is not None:
        state["sampler"] = generator.get_state()
    return state


def restore_rng_state(state: dict[str, Any], generator: torch.Generator | None = None) -> None:
    """Inverse of `capture_rng_state`."""
    version, keys, gauss = state["python"]
    random.setstate((version, tuple(keys), gauss))
    name, np_keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(np_keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if generator is not None and "sampler" in state:
        generator.set_state(state["sampler"])


def checkpoint_path(directory: str | os.PathLike, iteration: int) -> Path:
    """`directory/ckpt_{iteration:08d}.pt`: names sort by iteration."""
    return Path(directory) / f"ckpt_{int(iteration):08d}.pt"


def list_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """Training checkpoints in `directory`, oldest first (best.pt is not among them)."""
    d = Path(directory)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := CHECKPOINT_PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def find_latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The newest training checkpoint in `directory`, or None."""
    found = list_checkpoints(directory)
    return found[-1] if found else None


def remove_orphaned_temp_files(directory: str | os.PathLike) -> list[Path]:
    """Delete temp files that killed writes left in `directory`; returns what was removed."""
    d = Path(directory)
    if not d.is_dir():
        return []
    orphans = [p for p in d.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    for p in orphans:
        p.unlink(missing_ok=True)
    return orphans


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
    run_id: str | None = None,
    path: str | os.PathLike | None = None,
) -> Path:
    """Write a full training checkpoint for `iteration` and delete all but the newest `keep_last`.

    Refuses (ValueError) to write weights that are not all finite: a checkpoint is always a state
    worth resuming from. `path` overrides the file name (e.g. best.pt, which rotation never deletes).
    """
    plain = unwrap_model(model)
    bad = [name for name, p in plain.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise ValueError(f"refusing to checkpoint non-finite weights ({', '.join(bad[:3])}, ...)")
    target = Path(path) if path is not None else checkpoint_path(directory, iteration)
    state = {
        "model": plain.state_dict(),
        "optimizer": optimizer.state_dict(),
        "iteration": int(iteration),
        "run_id": run_id,
        "rng": capture_rng_state(generator),
        "train_config": train_config,
        "model_config": _plain(model_config),
        "metrics": metrics,
        "extra": extra or {},
    }
    atomic_torch_save(state, target)
    if path is None and keep_last is not None and keep_last > 0:
        for old in list_checkpoints(directory)[:-keep_last]:
            old.unlink(missing_ok=True)
    return target


def _plain(value: Any) -> Any:
    """Config values as JSON-like data (dtypes and other objects as strings) for the weights-only loader."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def load_training_state(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Restore model, optimizer and every RNG stream from `path`; returns the whole saved dict.

    With `run_id`, a checkpoint written by another run is a `CheckpointError` and nothing is restored.
    """
    state = load_state(path)
    if run_id is not None and state.get("run_id") != run_id:
        raise CheckpointError(f"{path} belongs to run {state.get('run_id')!r}, not to this run ({run_id!r})")
    restore_training_state(Checkpoint.from_state(state, path), model=model, optimizer=optimizer, generator=generator)
    return state


def newest_loadable_state(directory: str | os.PathLike, run_id: str | None) -> tuple[Path, Checkpoint, list[str]]:
    """The newest checkpoint of `run_id` in `directory` that loads, its `Checkpoint`, and why newer ones were skipped.

    Raises `FileNotFoundError` when no checkpoint of the run loads.
    """
    skipped: list[str] = []
    for path in reversed(list_checkpoints(directory)):
        try:
            state = read_checkpoint(path)
        except CheckpointError as err:
            skipped.append(str(err))
            continue
        if run_id is not None and state.run_id != run_id:
            skipped.append(f"{path} belongs to run {state.run_id!r}, not {run_id!r}")
            continue
        if not math.isfinite(float(state.extra.get("loss") or 0.0)):
            skipped.append(f"{path} was saved with a non-finite loss")
            continue
        return path, state, skipped
    detail = "; ".join(skipped) if skipped else "none found"
    raise FileNotFoundError(f"no usable checkpoint of this run in {directory} ({detail})")


def restore_training_state(
    state: Checkpoint, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
    generator: torch.Generator | None = None,
) -> None:
    """Apply an already read training checkpoint to the model, optimizer and RNG streams."""
    unwrap_model(model).load_state_dict(state.model)
    optimizer.load_state_dict(state.optimizer)
    restore_rng_state(state.rng, generator)
