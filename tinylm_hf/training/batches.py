"""Runtime batching over prepared token arrays: seeded random training windows, each optimizer step's
micro-batches (`StepBatches`), and a sequential eval walk."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch


def _check_batch_args(n_tokens: int, batch_size: int, context_length: int) -> None:
    if batch_size <= 0 or context_length <= 0:
        raise ValueError(f"batch_size and context_length must be positive, got {batch_size}, {context_length}")
    if n_tokens <= context_length:
        raise ValueError(
            f"data has {n_tokens} tokens, need more than context_length={context_length} to draw a batch"
        )


def sample_starts(
    n_tokens: int, batch_size: int, context_length: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Uniform random window starts in `[0, n_tokens - context_length)` (every valid start reachable)."""
    _check_batch_args(n_tokens, batch_size, context_length)
    return torch.randint(0, n_tokens - context_length, (batch_size,), generator=generator)


def batch_from_starts(
    data: np.ndarray, starts: Sequence[int] | torch.Tensor, context_length: int, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut `(x, y)` windows of `context_length` tokens at `starts`; `y` is `x` shifted by one."""
    offsets = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(context_length + 1)  # (B, T + 1)
    xy = torch.from_numpy(np.asarray(np.asarray(data)[offsets], dtype=np.int64))
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        xy = xy.pin_memory().to(device, non_blocking=True)  # one pinned copy; the host does not wait for it
    else:
        xy = xy.to(device)
    return xy[:, :-1], xy[:, 1:]


def get_batch(
    data: np.ndarray,
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw `batch_size` random windows from the 1-D token array `data`.

    Returns `(x, y)`, long tensors of shape `(batch_size, context_length)` on `device`, with
    `y[i] = data[s_i + 1 : s_i + context_length + 1]`. Pass a seeded `torch.Generator` for a
    reproducible stream (its state is what a training checkpoint saves as the sampler state).
    """
    if getattr(data, "ndim", 1) != 1:
        raise ValueError(f"data must be a 1-D token array, got shape {getattr(data, 'shape', None)}")
    starts = sample_starts(len(data), batch_size, context_length, generator)
    return batch_from_starts(data, starts, context_length, device)


def iter_eval_batches(
    data: np.ndarray, batch_size: int, context_length: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Walk `data` once in order: every token after the first is a target exactly once.

    Windows start at `0, T, 2T, ...`; full windows come `batch_size` at a time (the last batch may
    hold fewer rows) and a final shorter window, if any tokens are left, comes as its own batch.
    Tensors are long and on the CPU.
    """
    n = len(data)
    _check_batch_args(n, batch_size, context_length)
    n_full = (n - 1) // context_length
    for first in range(0, n_full, batch_size):
        starts = range(first * context_length, min(first + batch_size, n_full) * context_length, context_length)
        yield batch_from_starts(data, list(starts), context_length, "cpu")
    tail_start = n_full * context_length
    if n - 1 - tail_start > 0:
        tail = torch.from_numpy(np.asarray(data[tail_start:], dtype=np.int64))[None]  # (1, r + 1)
        yield tail[:, :-1], tail[:, 1:]


MicroBatch = tuple[torch.Tensor, torch.Tensor]  # (input_ids, labels), each (rows, context_length)


class StepBatches:
    """The micro-batches of each optimizer step, from the run's seeded sampler.

    The next step's batches are drawn while the device still works on this step (`prefetch_next`, train_step's
    `overlap`); a checkpoint keeps the sampler as it was before that draw (`sampler_state`), so a resumed
    run draws them again.
    """

    def __init__(self, draw: Callable[[torch.Generator, int, slice, torch.device, tuple[int, ...]], MicroBatch],
                 sampler: torch.Generator, *, grad_accum_steps: int, size: int, rows: slice, device: torch.device,
                 seed: int) -> None:
        self.draw = draw  # the objective's micro_batch(sampler, size, rows, device, seed)
        self.sampler = sampler
        self.grad_accum_steps, self.size, self.rows, self.device, self.seed = grad_accum_steps, size, rows, device, seed
        self.sampler_state = sampler.get_state()
        self._prefetched: dict[int, list[MicroBatch]] = {}
        self._next: int | None = None

    def take(self, step: int, *, max_iters: int) -> list[MicroBatch]:
        """The micro-batches of step `step` (0-based) of a run of `max_iters` steps."""
        batches = self._prefetched.pop(step, None) or self._draw(step)
        self.sampler_state = self.sampler.get_state()
        self._next = step + 1 if step + 1 < max_iters else None
        return batches

    def prefetch_next(self) -> None:
        """Draw the next step's micro-batches now (none after the last step)."""
        if self._next is not None:
            self._prefetched[self._next] = self._draw(self._next)

    def _draw(self, step: int) -> list[MicroBatch]:
        return [self.draw(self.sampler, self.size, self.rows, self.device, (self.seed, step, i))
                for i in range(self.grad_accum_steps)]
