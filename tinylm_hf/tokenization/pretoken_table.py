"""Pre-tokens looked up as numbers: every pre-token of a text hashed and looked up at once.

The cold-cache encoder's per-token Python work, moved into numpy. Each pre-token (a span of the
text's code-point array, from `pretokenize_arrays`) gets a 64-bit polynomial hash via prefix sums;
all hashes are looked up together (an `IntTable`: hash -> entry), and each hit is
verified against the entry's code points, so a hash collision can never change an id (it only
sends the pre-token down the slow path). The table starts from a seed (the encoder's: every
vocabulary entry, so a cold encode of ordinary text meets few misses) and learns every missed
pre-token, whose ids the caller computes with the merge loop. The ids of all pre-tokens come out
with one gather.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from itertools import chain

import numpy as np

from .int_table import EMPTY, IntTable
from .pretokenize_arrays import code_points, pretoken_bounds

HASH_BASE = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64
_INVERSE_BASE = pow(HASH_BASE, -1, 1 << 64)
# Pre-tokens longer than this (code points) are encoded but not remembered.
MAX_ENTRY_POINTS = 256
# Entries (beyond the vocabulary) before the table starts again from the vocabulary.
TABLE_LIMIT = 1 << 18

EncodeMissing = Callable[[list[str]], Mapping[str, list[int]]]


class _Powers:
    """HASH_BASE**k and its inverse**k modulo 2**64 (uint64), grown on demand."""

    def __init__(self) -> None:
        self.up = self.down = np.ones(1, dtype=np.uint64)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.up) < n:
            size = max(n, 2 * len(self.up))
            self.up, self.down = _power_table(HASH_BASE, size), _power_table(_INVERSE_BASE, size)
        return self.up[:n], self.down[:n]


def _power_table(base: int, size: int) -> np.ndarray:
    """base**k mod 2**64 for k < size, by doubling: each step multiplies the known half by one power."""
    powers = np.ones(size, dtype=np.uint64)
    known = 1
    while known < size:
        step = min(known, size - known)
        powers[known : known + step] = powers[:step] * np.uint64(pow(base, known, 1 << 64))
        known += step
    return powers


_POWERS = _Powers()


def hash_spans(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """sum(points[start + k] * HASH_BASE**k) mod 2**64 for every span [start, end) (uint64)."""
    up, down = _POWERS.get(len(points) + 1)
    prefix = np.zeros(len(points) + 1, dtype=np.uint64)
    np.cumsum(points * up[: len(points)], out=prefix[1:])
    return (prefix[ends] - prefix[starts]) * down[starts]


def spans_match(points: np.ndarray, starts: np.ndarray, lengths: np.ndarray, others: np.ndarray,
                others_starts: np.ndarray) -> np.ndarray:
    """Whether each span of `points` (spans that tile it) equals the span of `others` of the same
    length at `others_starts` (one vectorized comparison of every code point)."""
    source = np.repeat(others_starts - starts, lengths) + np.arange(len(points))
    differs = np.take(others, source, mode="clip") != points
    return ~np.logical_or.reduceat(differs, starts)


class PretokenTable:
    """Pre-token (as code points) -> ids, looked up many at a time; starts from a seed and learns misses."""

    def __init__(self, words: list[str], ids: Mapping[str, list[int]], limit: int = TABLE_LIMIT) -> None:
        """Seed the table with distinct `words`, each with its ids (`ids[word]`)."""
        self.limit = limit
        self._clear()
        self._add(*_flatten_words(words), *_flatten_ids(words, ids))
        self._seed_state = self._state()
        self._seed_size = len(self)
        self._index = copy.deepcopy(self._index)  # the seed's index stays as it is

    def _clear(self) -> None:
        self._index = IntTable(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), missing=-1)  # hash -> entry
        self._points = np.zeros(0, dtype=np.uint32)  # every entry's code points, back to back
        self._point_starts = np.zeros(0, dtype=np.int64)
        self._lengths = np.zeros(0, dtype=np.int64)  # code points per entry
        self._ids = np.zeros(0, dtype=np.int64)  # every entry's ids, back to back
        self._id_starts = np.zeros(0, dtype=np.int64)
        self._id_counts = np.zeros(0, dtype=np.int64)

    def _state(self) -> tuple:
        return (self._index, self._points, self._point_starts, self._lengths,
                self._ids, self._id_starts, self._id_counts)

    def __len__(self) -> int:
        return len(self._lengths)

    @property
    def learned(self) -> int:
        """Entries added since the seed (at most `limit` after each `encode`)."""
        return len(self) - self._seed_size

    def _add(self, points: np.ndarray, lengths: np.ndarray, hashes: np.ndarray, ids: np.ndarray,
             counts: np.ndarray) -> np.ndarray:
        """Append entries (code points and ids back to back, `counts` ids each); index those whose
        hash is new. Their entry numbers."""
        first = len(self._lengths)
        self._point_starts = np.concatenate([self._point_starts, len(self._points) + _starts_of(lengths)])
        self._points = np.concatenate([self._points, points])
        self._lengths = np.concatenate([self._lengths, lengths])
        self._id_starts = np.concatenate([self._id_starts, len(self._ids) + _starts_of(counts)])
        self._ids = np.concatenate([self._ids, ids])
        self._id_counts = np.concatenate([self._id_counts, counts])
        entries = np.arange(first, first + len(counts))
        # A hash already indexed (or repeated here) stays with its first entry; the others are never found.
        keys = hashes.view(np.int64)
        _, unique = np.unique(keys, return_index=True)
        fresh = unique[(self._index.get(keys[unique]) < 0) & (keys[unique] != EMPTY)]
        fresh = fresh[lengths[fresh] <= MAX_ENTRY_POINTS]
        self._index.insert(keys[fresh], entries[fresh])
        return entries

    def lookup(self, points: np.ndarray, starts: np.ndarray, lengths: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """The entry of each span (-1 where none): found by hash, kept only if its code points are equal."""
        if not len(self) or not len(starts):
            return np.full(len(starts), -1, dtype=np.int64)
        entry = self._index.get(hashes.view(np.int64))
        found = entry >= 0
        found &= self._lengths[entry] == lengths  # entry -1 reads the last entry: rejected below if so
        found &= spans_match(points, starts, lengths, self._points, np.where(found, self._point_starts[entry], 0))
        return np.where(found, entry, -1)

    def encode(self, text: str, cuts: np.ndarray, encode_missing: EncodeMissing) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the GPT-2 pre-tokens of `text` (independent texts joined, starting at `cuts`), and
        how many ids come before each cut. `encode_missing` gives the ids of pre-tokens not in the table."""
        points, starts, ends = pretoken_bounds(text, cuts)
        lengths = ends - starts
        hashes = hash_spans(points, starts, ends)
        entry = self.lookup(points, starts, lengths, hashes)
        missing = np.flatnonzero(entry < 0)
        if len(missing):
            entry[missing] = self._learn(text, points, starts[missing], ends[missing], hashes[missing], encode_missing)
        counts = self._id_counts[entry]
        before = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=before[1:])
        source = np.repeat(self._id_starts[entry] - before[:-1], counts) + np.arange(before[-1])
        ids = self._ids[source]
        if self.learned > self.limit:  # bounded memory on endless streams: back to the seed
            self._restore_seed()
        return ids, before[np.searchsorted(starts, cuts)]

    def _learn(self, text: str, points: np.ndarray, starts: np.ndarray, ends: np.ndarray, hashes: np.ndarray,
               encode_missing: EncodeMissing) -> np.ndarray:
        """Encode the missed spans (each distinct one once), add them as entries, return their entries."""
        words = list(map(text.__getitem__, map(slice, starts.tolist(), ends.tolist())))
        first = dict(zip(reversed(words), range(len(words) - 1, -1, -1)))  # word -> its first span
        new, spans = list(first), np.fromiter(first.values(), dtype=np.int64, count=len(first))
        flat, counts = _flatten_ids(new, encode_missing(new))
        lengths = ends[spans] - starts[spans]
        source = np.repeat(starts[spans] - _starts_of(lengths), lengths) + np.arange(int(lengths.sum()))
        entries = self._add(points[source], lengths, hashes[spans], flat, counts)
        entry_of = dict(zip(new, entries.tolist()))
        return np.fromiter(map(entry_of.__getitem__, words), dtype=np.int64, count=len(words))

    def _restore_seed(self) -> None:
        (index, self._points, self._point_starts, self._lengths,
         self._ids, self._id_starts, self._id_counts) = self._seed_state
        self._index = copy.deepcopy(index)


def _starts_of(lengths: np.ndarray) -> np.ndarray:
    """Where each of back-to-back pieces of these lengths starts."""
    return np.cumsum(lengths) - lengths


def _flatten_ids(words: list[str], ids: Mapping[str, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(every word's ids back to back, how many each)."""
    each = list(map(ids.__getitem__, words))
    counts = np.fromiter(map(len, each), dtype=np.int64, count=len(each))
    return np.fromiter(chain.from_iterable(each), dtype=np.int64, count=int(counts.sum())), counts


def _flatten_words(words: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(code points back to back, lengths, hashes) of words."""
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    points = code_points("".join(words))
    starts = _starts_of(lengths)
    return points, lengths, hash_spans(points, starts, starts + lengths)
