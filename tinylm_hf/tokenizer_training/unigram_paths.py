"""The steps over one string's lattice that `unigram_lattice`'s reference runs as Python and its kernels compile
(numba compiles these very functions): one source for both, so both give the same numbers."""

from __future__ import annotations

import math

# A string whose total probability is below this is redone in log space (its paths could have underflowed).
TINY = 1e-200


def log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)), exact where either is -inf."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


def best_paths(lo: int, hi: int, start, end, piece, scores, best, back) -> None:
    """Viterbi over nodes lo:hi of one string: back[j] = the last node of the best path ending at j, best[j]
    its score (back must hold -1, best[0] 0)."""
    for k in range(lo, hi):
        i, j = start[k], end[k]
        if i > 0 and back[i] < 0:
            continue
        candidate = best[i] + scores[piece[k]]
        if back[j] < 0 or candidate > best[j]:
            best[j] = candidate
            back[j] = k
