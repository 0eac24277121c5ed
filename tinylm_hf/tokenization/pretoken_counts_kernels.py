"""Counting pre-tokens as a numba kernel: `count_spans`, over the spans that the encoder's scanner finds
(`tokenization.bpe.kernels.pretoken_bounds`, the one scanner of GPT-2's and cl100k's patterns).

`count_spans` is `Counter(data[s:e] for s, e in spans)` (weighted): a hash table (open addressing) maps each
distinct span to the first span equal to it, and a hash match is confirmed by comparing the bytes,
so two different pre-tokens are never counted together. `add_spans` adds to such a table, kept between calls (the
running total of a file's chunks: `Counter.update`). Imported only after `kernels_enabled()`; the
reference is `regex.findall(pattern, text)` and `Counter` (see `pretoken_counts._count_file`).
"""

from __future__ import annotations

import numpy as np

from .bpe.kernels import same_bytes
from .jit import njit
from .bpe.merges_kernels import grow

_HASH = np.uint64(0x9E3779B97F4A7C15)


@njit(refcounts=False)
def _hash(data, start, end):
    """A 64-bit multiplicative hash with a final mix: the slot is taken from its high bits."""
    h = np.uint64(end - start)
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * _HASH
    return h ^ (h >> np.uint64(29))


@njit()
def count_spans(data, starts, ends, weights):
    """The distinct spans data[starts[i]:ends[i]]: (their bytes back to back, their lengths, their
    summed weights), in order of first occurrence."""
    table, hashes, offsets, lengths, counts, store, distinct, stored = add_spans(
        *empty_span_table(), data, starts, ends, weights)
    return store[:stored].copy(), lengths[:distinct].copy(), counts[:distinct].copy()


@njit()
def empty_span_table():
    """A table of no spans, for `add_spans`: (slots, hashes, offsets, lengths, counts, store, distinct, stored)."""
    # slot -> distinct span; sized by the distinct spans (grown when half full) so that it, and the copy
    # of the distinct spans that matches are checked against, stay in the CPU's cache.
    table = np.full(1 << 12, -1, dtype=np.int64)
    hashes = np.empty(1 << 11, dtype=np.uint64)  # distinct span -> hash, start in `store`, length, weight
    return (table, hashes, np.empty(1 << 11, dtype=np.int64), np.empty(1 << 11, dtype=np.int64),
            np.empty(1 << 11, dtype=np.int64), np.empty(1 << 14, dtype=np.uint8), 0, 0)


@njit()
def add_spans(table, hashes, offsets, lengths, counts, store, distinct, stored, data, starts, ends, weights):
    """Add the spans data[starts[i]:ends[i]], weighted, to a table of distinct spans (from `empty_span_table` or an
    earlier call); returns the table, grown where it had to be."""
    for i in range(len(starts)):
        start, length = starts[i], ends[i] - starts[i]
        h = _hash(data, start, ends[i])
        mask = len(table) - 1
        slot = int(h >> np.uint64(16)) & mask
        while table[slot] >= 0:
            d = table[slot]
            if hashes[d] == h and lengths[d] == length and same_bytes(store, offsets[d], data, start, length):
                counts[d] += weights[i]
                break
            slot = (slot + 1) & mask
        else:
            hashes, offsets = grow(hashes, distinct + 1), grow(offsets, distinct + 1)
            lengths, counts = grow(lengths, distinct + 1), grow(counts, distinct + 1)
            store = grow(store, stored + length)
            store[stored: stored + length] = data[start: start + length]
            table[slot] = distinct
            hashes[distinct], offsets[distinct], lengths[distinct], counts[distinct] = h, stored, length, weights[i]
            distinct += 1
            stored += length
            if 2 * distinct > len(table):
                table = _rehash(table, hashes, distinct)
    return table, hashes, offsets, lengths, counts, store, distinct, stored


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
