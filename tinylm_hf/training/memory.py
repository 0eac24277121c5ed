"""The memory a training step needs, estimated before anything is allocated, so that a batch that cannot fit is a
one-line refusal naming `--batch-size`, never an allocator traceback or the out-of-memory killer.

The estimate is a lower bound: the weights, their gradients and AdamW's two moments (16 bytes a parameter), plus the
activations a backward pass keeps, about 10 hidden-sized and 3 intermediate-sized values a token in every layer and
the logits (attention's own buffers left out). Measured on CPU (float32) it is about two thirds of the real peak, so a
batch it refuses could never run, and one it lets through may still be too large.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .config import TrainConfig

ADAMW_BYTES_PER_PARAMETER = 16  # float32 weight, gradient and AdamW's two moments
MEMINFO = Path("/proc/meminfo")  # Linux's account of memory, in kB


def step_memory_bytes(rows: int, context: int, shape: dict[str, int], *, activation_bytes: int = 4) -> int:
    """Lower bound of the memory one micro-step of `rows` sequences of `context` tokens needs on a model of `shape`
    (vocab_size, hidden_size, intermediate_size, num_hidden_layers)."""
    vocab, hidden, inner, layers = (shape[k] for k in ("vocab_size", "hidden_size", "intermediate_size",
                                                        "num_hidden_layers"))
    parameters = vocab * hidden + layers * (2 * hidden * hidden + 3 * hidden * inner)
    per_token = vocab + layers * (10 * hidden + 3 * inner)
    return ADAMW_BYTES_PER_PARAMETER * parameters + rows * context * per_token * activation_bytes


def available_memory(device: torch.device) -> int | None:
    """Bytes free on `device` for this run: free GPU memory, or the memory the OS can give without swapping."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "cpu":
        return meminfo_available()
    return None


def meminfo_available(meminfo: Path = MEMINFO) -> int | None:
    """Bytes the OS can give without swapping: `MemAvailable` of /proc/meminfo (Linux 3.14+, what `free` shows as
    available and psutil reads), or None where there is no such line (another OS): the check is then skipped."""
    try:
        lines = meminfo.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        name, _, value = line.partition(":")
        if name == "MemAvailable" and value.split()[1:] == ["kB"]:
            return int(value.split()[0]) * 1024
    return None


def model_shape(config: TrainConfig, vocab_size: int) -> dict[str, int] | None:
    """The sizes of the model the run trains: those of `init_from`'s config.json, else of the preset and `--model`
    (None where they cannot be read yet: building the model then names the problem)."""
    from ..modeling import TinyLMConfig

    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
    if config.init_from:
        path = Path(config.init_from) / "config.json"
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    else:
        overrides: dict[str, Any] = {"vocab_size": vocab_size, "max_position_embeddings": config.context_length,
                                     **config.model}
        model_config = TinyLMConfig.from_preset(config.preset, **overrides) if config.preset else TinyLMConfig(**overrides)
        values = model_config.to_dict()
    if not all(isinstance(values.get(k), int) for k in keys):
        return None
    return {k: max(int(values[k]), vocab_size) if k == "vocab_size" else int(values[k]) for k in keys}


def check_step_memory(config: TrainConfig, vocab_size: int, rows: int, device: torch.device) -> None:
    """Refuse a batch whose step (or evaluation batch, forward only) cannot fit in the memory `device` has free: a
    ValueError naming `--batch-size` (`--eval-batch-size`)."""
    shape = model_shape(config, vocab_size)
    free = available_memory(device)
    if shape is None or free is None:
        return
    activation_bytes = 2 if device.type == "cuda" and config.dtype != "float32" else 4
    need = step_memory_bytes(rows, config.context_length, shape, activation_bytes=activation_bytes)
    if need > free:
        raise ValueError(
            f"--batch-size {config.batch_size} (micro-batches of {rows} rows of --context-length "
            f"{config.context_length}) needs at least {need / 2**30:,.1f} GiB a step and {device.type} has "
            f"{free / 2**30:,.1f} GiB free: lower --batch-size, or raise --grad-accum-steps to take it in parts"
        )
    eval_rows = config.eval_batch_size or 0
    need = eval_rows * config.context_length * shape["vocab_size"] * activation_bytes  # its logits alone
    if need > free:
        raise ValueError(f"--eval-batch-size {eval_rows} needs at least {need / 2**30:,.1f} GiB for its logits and "
                         f"{device.type} has {free / 2**30:,.1f} GiB free: lower --eval-batch-size")
