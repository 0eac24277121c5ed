"""How byte-level BPE merges a pre-token: one rule, three implementations for three workloads.

The rule (tiktoken's): merge the lowest-rank adjacent pair, the leftmost if several, until no pair
has a rank. `merge_short` runs it as a short quadratic loop (fastest on one short pre-token);
`merge_by_heap` keeps a heap of pair ranks on a linked list, so one long pre-token (a run without
whitespace) costs O(n log n); `BatchMerger` merges many new pre-tokens at once with numpy, the
cold-cache path of `BPETokenizer`: every word takes its one merge per round together, so a round
is a handful of array operations over all words, and a text's new pre-tokens cost a few dozen
rounds instead of a Python loop each. Words stay where they are (a merged-away token is marked
dead and skipped by linked neighbours); finished words leave the arrays once they are half of
them, and the last few words, where numpy's per-call cost would dominate, finish in `merge_short`.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import chain, repeat

import numpy as np

from .int_table import IntTable

# A word's pairs are ranked by one int64 key, rank << OFFSET_BITS | the pair's offset in the word,
# so the minimum key of a word is its lowest rank at its leftmost place.
OFFSET_BITS = 16
MAX_WORD_BYTES = 1 << OFFSET_BITS
NO_RANK = 1 << 46  # the rank of a pair never learned (above every real rank)
NO_KEY = NO_RANK << OFFSET_BITS  # keys at or above this hold no mergeable pair
_OFFSET_MASK = MAX_WORD_BYTES - 1
# BatchMerger hands the words still merging to `merge_short` once fewer than this many are left.
TAIL_WORDS = 128


def merge_short(ids: list[int], rank_of: Callable, merged_by_rank: list[int]) -> list[int]:
    """BPE of one pre-token's ids (`rank_of`: (left, right) -> rank or None), quadratic in its length.

    >>> merge_short([97, 98, 99], {(97, 98): 0, (256, 99): 1}.get, [256, 257])
    [257]
    """
    # pair_ranks[i] is the rank of (ids[i], ids[i + 1]), NO_RANK if never learned.
    pair_ranks = list(map(rank_of, zip(ids, ids[1:]), repeat(NO_RANK)))
    while pair_ranks:
        best = min(pair_ranks)
        if best == NO_RANK:
            break
        i = pair_ranks.index(best)
        new = merged_by_rank[best]
        ids[i : i + 2] = (new,)
        del pair_ranks[i]
        # Only the pairs touching the new token change.
        if i > 0:
            pair_ranks[i - 1] = rank_of((ids[i - 1], new), NO_RANK)
        if i < len(pair_ranks):
            pair_ranks[i] = rank_of((new, ids[i + 1]), NO_RANK)
    return ids


def merge_by_heap(ids: list[int], rank_of: Callable, merged_by_rank: list[int]) -> list[int]:
    """BPE of one pre-token in O(n log n): a heap of (rank, position) over a linked list of tokens.

    Pops the lowest rank, leftmost first, exactly as `merge_short` merges; an entry whose pair
    has changed or vanished since it was pushed is skipped when popped (each pair has one rank, so
    "its rank still matches" means "it is still that pair").

    >>> merge_by_heap([97, 97, 97], {(97, 97): 0}.get, [256])
    [256, 97]
    """
    n = len(ids)
    ids = ids + [-1]  # a sentinel after the last token: (token, -1) has no rank
    nxt = list(range(1, n + 2))  # next live position (n: the sentinel)
    prv = list(range(-1, n))  # previous live position (-1: none)
    heap = [
        (rank, i)
        for i, rank in enumerate(map(rank_of, zip(ids, ids[1:n]), repeat(NO_RANK)))
        if rank != NO_RANK
    ]
    heapify(heap)
    while heap:
        rank, i = heappop(heap)
        j = nxt[i]
        if rank_of((ids[i], ids[j])) != rank:
            continue  # stale: i or j was merged away (dead tokens are -1) or changed
        ids[i] = new = merged_by_rank[rank]
        ids[j] = -1
        k = nxt[j]
        nxt[i], prv[k] = k, i
        p = prv[i]
        if p >= 0 and (r := rank_of((ids[p], new))) is not None:
            heappush(heap, (r, p))
        if (r := rank_of((new, ids[k]))) is not None:
            heappush(heap, (r, i))
    return [t for t in ids if t >= 0]


class BatchMerger:
    """Merge ranks in a numpy hash table (`IntTable`), looked up many pairs at a time."""

    def __init__(self, ranks: dict[tuple[int, int], int], merged_by_rank: list[int], byte_ids: list[int]) -> None:
        """`ranks`: (left id, right id) -> rank; `merged_by_rank`: rank -> merged id; `byte_ids`: byte -> id."""
        if len(merged_by_rank) >= NO_RANK:
            raise ValueError(f"too many merges for the batch encoder: {len(merged_by_rank)}")
        self._rank_of, self._merged_by_rank = ranks.get, merged_by_rank  # for the last few words
        self.merged = np.asarray(merged_by_rank, dtype=np.int64)
        self.byte_ids = np.asarray(byte_ids, dtype=np.int64)
        pairs = np.fromiter(chain.from_iterable(ranks), dtype=np.int64, count=2 * len(ranks)).reshape(-1, 2)
        self.base = int(max(pairs.max(initial=0), self.merged.max(initial=0), self.byte_ids.max(initial=0))) + 1
        if self.base > 1 << 31:  # pair keys left * base + right must fit in int64
            raise ValueError(f"token ids up to {self.base - 1} are too large for the batch encoder (< 2**31)")
        keys = pairs[:, 0] * self.base + pairs[:, 1]
        values = np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))
        self._ranks = IntTable(keys, values, missing=NO_RANK)
        # The rank of every pair of byte tokens, by (first byte << 8 | second byte): a word's first round.
        first, second = np.divmod(np.arange(1 << 16), 1 << 8)
        self._byte_pair_ranks = self.rank_of(self.byte_ids[first], self.byte_ids[second])

    def rank_of(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Ranks of the pairs (left[i], right[i]); `NO_RANK` where the pair was never learned."""
        return self._ranks.get(left * self.base + right)

    def encode_words(self, words: list[bytes]) -> list[list[int]]:
        """The BPE ids of each word (non-empty, shorter than `MAX_WORD_BYTES`), equal to merging each alone."""
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        flat, sizes = self._merge(np.frombuffer(b"".join(words), dtype=np.uint8), lengths)
        ids = flat.tolist()
        bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        return [ids[a:b] for a, b in zip(bounds, bounds[1:])]

    def _merge(self, data: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All words' ids back to back and each word's number of ids, in the words' order."""
        size = len(data)
        starts = np.cumsum(lengths) - lengths
        result = np.empty(size, dtype=np.int64)  # the final ids in place, -1 where merged away
        tokens = self.byte_ids[data]
        offset = np.arange(size) - np.repeat(starts, lengths)  # position in its word
        nxt = np.arange(1, size + 1)  # next live position of the word, -1 after its last
        nxt[starts + lengths - 1] = -1
        prv = np.arange(-1, size - 1)
        prv[starts] = -1
        key = np.full(size, NO_KEY, dtype=np.int64)  # key[i]: the pair (i, nxt[i])
        inner = np.flatnonzero(nxt >= 0)
        pair_bytes = (data[inner].astype(np.int64) << 8) | data[inner + 1]
        key[inner] = (self._byte_pair_ranks[pair_bytes] << OFFSET_BITS) | offset[inner]
        origin = np.arange(size)  # position in `result` of each position
        seg_start, seg_len = starts, lengths  # the words still in the arrays
        tail: list[tuple[int, int]] = []  # (first position, length) of words left to merge_short
        while len(seg_start):
            best = np.minimum.reduceat(key, seg_start)
            merging = best < NO_KEY
            if np.count_nonzero(merging) < TAIL_WORDS:
                tail = list(zip(seg_start[merging].tolist(), seg_len[merging].tolist()))
                break
            if 2 * int(seg_len[~merging].sum()) >= len(tokens):  # drop the finished words
                leaving = np.repeat(~merging, seg_len)
                result[origin[leaving]] = tokens[leaving]
                staying = ~leaving
                renumber = np.cumsum(staying) - 1
                tokens, key, offset, origin = tokens[staying], key[staying], offset[staying], origin[staying]
                nxt, prv = nxt[staying], prv[staying]
                nxt = np.where(nxt >= 0, renumber[nxt], -1)
                prv = np.where(prv >= 0, renumber[prv], -1)
                seg_len, best = seg_len[merging], best[merging]
                seg_start = np.cumsum(seg_len) - seg_len
                merging = np.ones(len(best), dtype=bool)
                if not len(seg_start):
                    break
            words = np.flatnonzero(merging)
            best = best[words]
            at = seg_start[words] + (best & _OFFSET_MASK)  # merge (at, nxt[at]) into at
            new = self.merged[best >> OFFSET_BITS]
            gone = nxt[at]
            after = nxt[gone]
            tokens[at] = new
            tokens[gone] = -1
            key[gone] = NO_KEY
            nxt[at] = after
            has_after = after >= 0
            prv[after[has_after]] = at[has_after]
            right = self.rank_of(new[has_after], tokens[after[has_after]])
            key[at] = NO_KEY
            key[at[has_after]] = (right << OFFSET_BITS) | offset[at[has_after]]
            before = prv[at]
            has_before = before >= 0
            before = before[has_before]
            left = self.rank_of(tokens[before], new[has_before])
            key[before] = (left << OFFSET_BITS) | offset[before]
        result[origin] = tokens
        for start, length in tail:
            word = tokens[start : start + length]
            merged = merge_short(word[word >= 0].tolist(), self._rank_of, self._merged_by_rank)
            first = origin[start]
            result[first : first + length] = -1
            result[first : first + len(merged)] = merged
        live = result >= 0
        sizes = np.add.reduceat(live.astype(np.int64), starts) if len(starts) else lengths
        return result[live], sizes
