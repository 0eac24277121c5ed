"""Where code runs: the torch device, CPU threads and the compute dtype, checked with clear errors."""

from __future__ import annotations

import contextlib
import os

import torch


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """The torch device for `name` ("auto", "cpu", "cuda", "cuda:N", "mps"); an absent GPU is a ValueError."""
    if name == "auto":
        return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} asked for, but torch sees no CUDA GPU here; use --device cpu")
        if device.index is None:
            device = torch.device("cuda", local_rank)
        elif device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r}: only {torch.cuda.device_count()} GPU(s) here")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' asked for, but MPS is not available here; use --device cpu")
    return device


def physical_cores() -> int:
    """Physical CPU cores this process may use (hyper-threads of one core share its arithmetic units)."""
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cores: set[tuple[str, str]] = set()
    package = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("physical id"):
                    package = line.split(":", 1)[1].strip()
                elif line.startswith("core id"):
                    cores.add((package, line.split(":", 1)[1].strip()))
    except OSError:
        return logical
    if not cores:
        return logical
    threads_per_core = max(1, (os.cpu_count() or logical) // len(cores))
    return max(1, logical // threads_per_core)


def set_threads(threads: int | None) -> int:
    """Set torch's intra-op threads (default: `physical_cores()`); returns the number set."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    threads = threads or physical_cores()
    torch.set_num_threads(threads)
    return threads


def autocast_context(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """bfloat16 autocast for dtype "bfloat16" (or "auto" on a CUDA GPU that supports it), else a no-op."""
    if dtype == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    else:
        bf16 = dtype == "bfloat16"
    if bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
