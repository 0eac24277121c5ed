"""Counting equal spans of code points (pre-tokens) as a numba kernel: `Counter(text[s:e] for s, e in spans)` (weighted).

A hash table (open addressing) maps each distinct span to the first span equal to it; a hash match is
confirmed by comparing code points, so two different pre-tokens are never counted together. Imported only
after `kernels_enabled()` (see `pretoken_counts.count_gpt2_pretokens`).
"""

from __future__ import annotations

import numpy as np

from ..tokenization.jit import njit

_HASH = np.uint64(0x9E3779B97F4A7C15)


@njit()
def _hash(points, start, end):
    h = np.uint64(end - start)
    for i in range(start, end):
        h = (h ^ np.uint64(points[i])) * _HASH
    return h ^ (h >> np.uint64(29))


@njit()
def _equal(points, a, b, length):
    for i in range(length):
        if points[a + i] != points[b + i]:
            return False
    return True


@njit()
def count_spans(points, starts, ends, weights):
    """(first, counts): for each distinct span, the index of its first occurrence and its summed weight."""
    n = len(starts)
    capacity = 16
    while capacity < 2 * n:
        capacity *= 2
    mask = capacity - 1
    first = np.full(capacity, -1, dtype=np.int64)  # slot -> first span with this content
    hashes = np.zeros(capacity, dtype=np.uint64)
    counts = np.zeros(capacity, dtype=np.int64)
    distinct = 0
    for i in range(n):
        start, length = starts[i], ends[i] - starts[i]
        h = _hash(points, start, ends[i])
        slot = int(h >> np.uint64(16)) & mask
        while True:
            j = first[slot]
            if j < 0:
                first[slot], hashes[slot], counts[slot] = i, h, weights[i]
                distinct += 1
                break
            if hashes[slot] == h and ends[j] - starts[j] == length and _equal(points, starts[j], start, length):
                counts[slot] += weights[i]
                break
            slot = (slot + 1) & mask
    out_first = np.empty(distinct, dtype=np.int64)
    out_counts = np.empty(distinct, dtype=np.int64)
    k = 0
    for slot in range(capacity):
        if first[slot] >= 0:
            out_first[k], out_counts[k] = first[slot], counts[slot]
            k += 1
    return out_first, out_counts
