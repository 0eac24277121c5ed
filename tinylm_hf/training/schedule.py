"""Learning-rate schedule: linear warm-up, cosine decay, then a floor (CS336 / nanoGPT); over steps, or over the share
of a time budget used."""

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


def cosine_lr_by_progress(
    it: int, progress: float, max_lr: float, min_lr: float, warmup_iters: int, decay_start: float, decay_end: float
) -> float:
    """Learning rate of step ``it`` of a time-budgeted run when ``progress`` of the budget is used.

    The warm-up is counted in steps (``it / warmup_iters * max_lr``); after it the cosine runs over progress, from
    ``max_lr`` at ``decay_start`` (the progress when the warm-up ended) to ``min_lr`` at ``decay_end`` (1.0: the
    budget's end), and stays at ``min_lr`` after. Progress only grows, so the rate never rises after the warm-up,
    however the machine's speed changes; and it reaches ``min_lr`` at the last step the budget allows.

    Examples:
        >>> [round(cosine_lr_by_progress(it, p, 1.0, 0.1, 10, 0.2, 1.0), 3) for it, p in
        ...  ((5, 0.1), (10, 0.2), (50, 0.6), (90, 1.0), (95, 1.2))]
        [0.5, 1.0, 0.55, 0.1, 0.1]
    """
    if it < warmup_iters:
        return it / warmup_iters * max_lr
    if progress >= decay_end:
        return min_lr
    span = decay_end - decay_start
    q = min(1.0, max(0.0, (progress - decay_start) / span)) if span > 0 else 1.0
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * q)) * (max_lr - min_lr)
