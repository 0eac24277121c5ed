"""Learning-rate schedule: linear warm-up, cosine decay, then a floor (CS336 / nanoGPT)."""

from __future__ import annotations

import math


def cosine_lr(
    it: int, max_lr: float, min_lr: float, warmup_iters: int, cosine_cycle_iters: int
) -> float:
    """Learning rate at iteration ``it``.

    ``it < warmup_iters``: ``it / warmup_iters * max_lr`` (rises linearly from 0);
    ``warmup_iters <= it <= cosine_cycle_iters``: cosine from ``max_lr`` down to ``min_lr``;
    after that: ``min_lr``.

    Examples:
        >>> [cosine_lr(it, 1.0, 0.1, 10, 100) for it in (0, 5, 10, 55, 100, 500)]
        [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]
    """
    if warmup_iters < 0:
        raise ValueError(f"warmup_iters must be >= 0, got {warmup_iters}")
    if cosine_cycle_iters < warmup_iters:
        raise ValueError(
            f"cosine_cycle_iters ({cosine_cycle_iters}) must be >= warmup_iters ({warmup_iters})"
        )
    if it < warmup_iters:
        return it / warmup_iters * max_lr
    if it > cosine_cycle_iters:
        return min_lr
    if cosine_cycle_iters == warmup_iters:  # a zero-length decay: the peak, then the floor
        return max_lr
    progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)
