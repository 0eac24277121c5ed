"""The E step (forward-backward) and Viterbi loops over Unigram lattices: one source, run as Python over lists by
`lattice`'s reference and compiled as they are by `lattice_kernels` over arrays, so both give
the same numbers.

A lattice is given as its columns (`lattice.Lattice`); the caller gives the outputs and the work rows
(`alpha`, `beta`, `best`, `back`: one more item than the longest string), as lists or as arrays.
"""

from __future__ import annotations

import math


def log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)), exact where either is -inf."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


def add_expected_counts(lengths, offsets, start, end, piece, scores, freqs, tiny, probs, expected, alpha,
                        beta) -> None:
    """Add to `expected` (by piece) each string's count x the posterior of each of its nodes.

    Forward-backward multiplies probabilities (`probs`, filled with exp(`scores`)); a string whose total is
    below `tiny` is redone in log space.
    """
    for i in range(len(scores)):
        probs[i] = math.exp(scores[i])  # libm's exp on both paths (numpy's own can differ in the last bit)
    for s in range(len(lengths)):
        size, lo, hi = lengths[s], offsets[s], offsets[s + 1]
        alpha[0] = 1.0
        for i in range(1, size + 1):
            alpha[i] = 0.0
        for k in range(lo, hi):
            alpha[end[k]] += alpha[start[k]] * probs[piece[k]]
        if alpha[size] < tiny:
            for i in range(1, size + 1):
                alpha[i] = -math.inf
            alpha[0] = 0.0
            for k in range(lo, hi):
                alpha[end[k]] = log_add(alpha[end[k]], alpha[start[k]] + scores[piece[k]])
            for i in range(size):
                beta[i] = -math.inf
            beta[size] = 0.0
            for k in range(hi - 1, lo - 1, -1):
                beta[start[k]] = log_add(beta[start[k]], scores[piece[k]] + beta[end[k]])
            z = alpha[size]
            if z != -math.inf:
                for k in range(lo, hi):
                    expected[piece[k]] += freqs[s] * math.exp(alpha[start[k]] + scores[piece[k]] + beta[end[k]] - z)
            continue
        for i in range(size):
            beta[i] = 0.0
        beta[size] = 1.0
        for k in range(hi - 1, lo - 1, -1):
            beta[start[k]] += probs[piece[k]] * beta[end[k]]
        weight = freqs[s] / alpha[size]
        for k in range(lo, hi):
            expected[piece[k]] += weight * (alpha[start[k]] * probs[piece[k]] * beta[end[k]])


def viterbi_paths(lengths, offsets, start, end, piece, scores, owners, used, best, back) -> int:
    """Write (string, piece) of every node on each string's best path, from its end, to `owners` and `used` (room
    for one per character); return how many. Of paths with equal scores, the one whose last piece starts
    earliest is kept (sentencepiece's rule); a string without a path gives none."""
    count = 0
    for s in range(len(lengths)):
        size = lengths[s]
        best[0] = 0.0
        for i in range(size + 1):
            back[i] = -1
        for k in range(offsets[s], offsets[s + 1]):
            i, j = start[k], end[k]
            if i > 0 and back[i] < 0:
                continue
            candidate = best[i] + scores[piece[k]]
            if back[j] < 0 or candidate > best[j]:
                best[j] = candidate
                back[j] = k
        position = size
        while position > 0 and back[position] >= 0:
            k = back[position]
            owners[count], used[count] = s, piece[k]
            count += 1
            position = start[k]
    return count
