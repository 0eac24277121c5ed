"""An int64 -> int64 hash table in numpy arrays, looked up and filled many keys at a time.

Open addressing with linear probing: a key's first slot comes from Fibonacci hashing, each round of
a lookup moves every still-unresolved key one slot on, so a batch of keys costs a few array passes
instead of a Python loop. Used for BPE's merge ranks (`bpe_merge.BatchMerger`) and for pre-token
hashes (`pretoken_table.PretokenTable`).
"""

from __future__ import annotations

import numpy as np

_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing
EMPTY = -1  # the key of an empty slot (a key of -1 can be neither stored nor found)


class IntTable:
    """int64 keys -> int64 values; `get` answers `missing` for a key not stored. Load factor <= 1/2."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, *, missing: int) -> None:
        self.missing = missing
        self._count = 0
        self._allocate(max(8, (2 * len(keys)).bit_length()))
        self.insert(keys, values)

    def __len__(self) -> int:
        return self._count

    def _allocate(self, bits: int) -> None:
        self._bits = bits
        self._keys = np.full(1 << bits, EMPTY, dtype=np.int64)
        self._values = np.full(1 << bits, self.missing, dtype=np.int64)

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        return ((keys.astype(np.uint64) * _HASH_MULTIPLIER) >> np.uint64(64 - self._bits)).astype(np.int64)

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Store keys (distinct, not yet stored, not `EMPTY`) with their values; the table grows as needed."""
        if 2 * (self._count + len(keys)) > len(self._keys):
            stored = self._keys != EMPTY
            keys = np.concatenate([self._keys[stored], keys])
            values = np.concatenate([self._values[stored], values])
            self._count = 0
            self._allocate(max(8, (2 * len(keys)).bit_length()))
        size = len(self._keys)
        claims = np.full(size, -1, dtype=np.int64)
        pending, slots = np.arange(len(keys)), self._slots(keys)
        while len(pending):  # of the keys wanting a free slot, one wins it; the others move on
            free = np.flatnonzero(self._keys[slots] == EMPTY)
            claims[slots[free]] = pending[free]  # with duplicate slots, one write lands
            won = free[claims[slots[free]] == pending[free]]
            self._keys[slots[won]] = keys[pending[won]]
            self._values[slots[won]] = values[pending[won]]
            left = np.ones(len(pending), dtype=bool)
            left[won] = False
            pending, slots = pending[left], (slots[left] + 1) & (size - 1)
        self._count += len(keys)

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The value of each key, `missing` where it is not stored."""
        slots = self._slots(keys)
        found = self._keys[slots]
        hit = found == keys  # an EMPTY query meets an empty slot, whose value is `missing`
        out = np.where(hit, self._values[slots], self.missing)
        todo = np.flatnonzero(~hit & (found != EMPTY))  # the keys that must probe on
        mask = len(self._keys) - 1
        slots = (slots[todo] + 1) & mask
        while len(todo):
            found = self._keys[slots]
            hit = found == keys[todo]
            out[todo[hit]] = self._values[slots[hit]]
            probe = ~hit & (found != EMPTY)
            todo, slots = todo[probe], (slots[probe] + 1) & mask
        return out
