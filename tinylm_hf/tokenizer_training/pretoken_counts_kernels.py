"""Counting GPT-2 pre-tokens as numba kernels: find them (`gpt2_bounds`), then count equal spans (`count_spans`).

`gpt2_bounds` scans code points once, over their classes (`pretokenize_arrays.CLASS_TABLE`: letter, number,
whitespace, other), with the rules of GPT-2's pattern (see `gpt2_end`); `count_spans` is
`Counter(text[s:e] for s, e in spans)` (weighted): a hash table (open addressing) maps each distinct span to
the first span equal to it, and a hash match is confirmed by comparing code points, so two different
pre-tokens are never counted together. Imported only after `kernels_enabled()`; the reference is
`regex.findall(GPT2_PATTERN, text)` and `Counter` (see `pretoken_counts.count_gpt2_pretokens`).
"""

from __future__ import annotations

import numpy as np

from ..tokenization.jit import njit
from ..tokenization.pretokenize_arrays import APOSTROPHE, SPACE, SPACE_CLASS
from .bpe_merges_kernels import grow

_HASH = np.uint64(0x9E3779B97F4A7C15)


@njit()
def _hash(points, start, end):
    h = np.uint64(end - start)
    for i in range(start, end):
        h = (h ^ np.uint64(points[i])) * _HASH
    return h ^ (h >> np.uint64(29))


@njit()
def count_spans(points, starts, ends, weights):
    """The distinct spans points[starts[i]:ends[i]]: (their code points back to back, their lengths, their
    summed weights), in order of first occurrence."""
    # slot -> distinct span; sized by the distinct spans (grown when half full) so that it, and the copy
    # of the distinct spans that matches are checked against, stay in the CPU's cache.
    table = np.full(1 << 12, -1, dtype=np.int64)
    hashes = np.empty(1 << 11, dtype=np.uint64)  # distinct span -> hash, start in `store`, length, weight
    offsets = np.empty(1 << 11, dtype=np.int64)
    lengths = np.empty(1 << 11, dtype=np.int64)
    counts = np.empty(1 << 11, dtype=np.int64)
    store = np.empty(1 << 14, dtype=points.dtype)
    distinct, stored = 0, 0
    for i in range(len(starts)):
        start, length = starts[i], ends[i] - starts[i]
        h = _hash(points, start, ends[i])
        mask = len(table) - 1
        slot = int(h >> np.uint64(16)) & mask
        while table[slot] >= 0:
            d = table[slot]
            if hashes[d] == h and lengths[d] == length and _equal(store, offsets[d], points, start, length):
                counts[d] += weights[i]
                break
            slot = (slot + 1) & mask
        else:
            hashes, offsets = grow(hashes, distinct + 1), grow(offsets, distinct + 1)
            lengths, counts = grow(lengths, distinct + 1), grow(counts, distinct + 1)
            store = grow(store, stored + length)
            store[stored: stored + length] = points[start: start + length]
            table[slot] = distinct
            hashes[distinct], offsets[distinct], lengths[distinct], counts[distinct] = h, stored, length, weights[i]
            distinct += 1
            stored += length
            if 2 * distinct > len(table):
                table = _rehash(table, hashes, distinct)
    return store[:stored].copy(), lengths[:distinct].copy(), counts[:distinct].copy()


@njit()
def _equal(store, offset, points, start, length):
    for k in range(length):
        if store[offset + k] != points[start + k]:
            return False
    return True


@njit()
def _rehash(table, hashes, distinct):
    """The slot table at twice the capacity."""
    bigger = np.full(2 * len(table), -1, dtype=np.int64)
    mask = len(bigger) - 1
    for d in range(distinct):
        slot = int(hashes[d] >> np.uint64(16)) & mask
        while bigger[slot] >= 0:
            slot = (slot + 1) & mask
        bigger[slot] = d
    return bigger


@njit()
def gpt2_bounds(points, cuts, classes):
    """(starts, ends) of the GPT-2 pre-tokens of the texts points[cuts[k]:cuts[k + 1]], in order."""
    starts = np.empty(len(points), dtype=np.int64)
    ends = np.empty(len(points), dtype=np.int64)
    n = 0
    for k in range(len(cuts) - 1):
        i, end = cuts[k], cuts[k + 1]
        while i < end:
            starts[n] = i
            i = gpt2_end(points, classes, i, end)
            ends[n] = i
            n += 1
    return starts[:n], ends[:n]


@njit()
def gpt2_end(points, classes, i, end):
    """Where the GPT-2 pre-token that starts at i ends (its text ends at `end`).

    `'s 't 'm 'd 're 've 'll`; else a run of one class (` ?\\p{L}+`, ` ?\\p{N}+`, ` ?[^\\s\\p{L}\\p{N}]+`), which
    a single space before it joins; whitespace before non-whitespace leaves its last character to what
    follows (`\\s+(?!\\S)`), and a lone whitespace character other than a space stands alone (`\\s+`).
    """
    c = points[i]
    if c == APOSTROPHE and i + 1 < end:
        d = points[i + 1]
        if d == 115 or d == 116 or d == 109 or d == 100:  # s t m d
            return i + 2
        if i + 2 < end:
            e = points[i + 2]
            if (d == 108 and e == 108) or (d == 118 and e == 101) or (d == 114 and e == 101):  # ll ve re
                return i + 3
    kind = classes[c]
    j = i + 1
    if kind == SPACE_CLASS:
        while j < end and classes[points[j]] == SPACE_CLASS:
            j += 1
        if j == end:
            return end
        if j - i > 1:
            return j - 1
        if c != SPACE:
            return j
        kind = classes[points[j]]  # a space joins the run after it
        j += 1
    while j < end and classes[points[j]] == kind:
        j += 1
    return j
