"""Long pre-tokens for BPE training: merged in place by position, so a merge costs its occurrences.

`bpe_train` rebuilds a short word (a list of ids) whenever a merge touches it, which is cheapest
for ordinary words but quadratic for a pre-token of millions of bytes (DNA, base64, a language
without spaces): each merge would copy the whole word. Words of at least `LONG_WORD_BYTES` bytes
live here instead, concatenated into one arena: a doubly linked list of ids (arrays, 4 bytes per
position) with a pair -> positions index, so merging a pair touches only where it occurs and the
whole training run costs about linear time in the long words' total length.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable
from functools import partial
from itertools import count, islice

from .pair_merges import PAIR_MASK, PAIR_SHIFT

# Words of at least this many bytes go to the arena.
LONG_WORD_BYTES = 256
_GAP = -1  # id of a dead position, and of the separator after each word


class LongWordArena:
    """Long words (ids, count) as one linked list; `merge` replaces a pair where it occurs."""

    def __init__(self, words: Iterable[tuple[bytes, int]], pair_counts: defaultdict[int, int]) -> None:
        """Lay the words out one after another and add their pair counts to `pair_counts`."""
        self.ids = array("i")  # position -> token id, _GAP when dead or a separator
        self.freq = array("q")  # position -> count of the word it belongs to
        for word, word_count in words:
            self.ids.extend(word)
            self.ids.append(_GAP)
            self.freq.extend([word_count] * (len(word) + 1))
        if len(self.ids) >= 2**31:
            raise ValueError("long pre-tokens total over 2 GiB; split the training text (e.g. by lines)")
        size = len(self.ids)
        self.next = array("i", range(1, size + 1))  # next live position (size: none)
        self.prev = array("i", range(-1, size - 1))  # previous live position (-1: none)
        # pair -> positions of its left token; entries go stale and are checked when used.
        self.positions: defaultdict[int, array] = defaultdict(partial(array, "i"))
        positions, shift = self.positions, PAIR_SHIFT
        for position, left, right in zip(count(), self.ids, islice(self.ids, 1, None)):
            if left != _GAP and right != _GAP:
                positions[(left << shift) | right].append(position)
        for pair, where in positions.items():
            pair_counts[pair] += sum(map(self.freq.__getitem__, where))

    def merge(self, pair: int, new_id: int, pair_counts: defaultdict[int, int]) -> set[int]:
        """Replace every occurrence of `pair` (left to right) by `new_id`; update neighbour counts.

        Returns the new pairs (those holding new_id), as `pair_merges.merge_words` does.
        """
        where = self.positions.pop(pair, None)
        if where is None:
            return set()
        left, right = pair >> PAIR_SHIFT, pair & PAIR_MASK
        # Overlapping occurrences ("a a a" for (a, a)) must merge leftmost first.
        order = sorted(where) if left == right else where
        ids, nxt, prv, freq = self.ids, self.next, self.prev, self.freq
        shift, size = PAIR_SHIFT, len(ids)
        new_left, right_left = new_id << shift, right << shift
        fresh: defaultdict[int, list[int]] = defaultdict(list)  # new pair -> positions
        for p in order:
            q = nxt[p]
            if ids[p] != left or ids[q] != right:
                continue  # stale: merged away or changed since it was indexed
            weight = freq[p]
            before, after = prv[p], nxt[q]
            if before >= 0 and (b := ids[before]) != _GAP:
                b <<= shift
                pair_counts[b | left] -= weight
                pair_counts[b | new_id] += weight
                fresh[b | new_id].append(before)
            if after < size and (a := ids[after]) != _GAP:
                pair_counts[right_left | a] -= weight
                pair_counts[new_left | a] += weight
                fresh[new_left | a].append(p)
            ids[p], ids[q] = new_id, _GAP
            nxt[p] = after
            if after < size:
                prv[after] = p
        for new_pair, where in fresh.items():
            self.positions[new_pair].extend(where)
        return set(fresh)
