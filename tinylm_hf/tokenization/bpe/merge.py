"""How byte-level BPE merges a pre-token, in plain Python: the reference the kernels are tested equal to.

The rule (tiktoken's): merge the lowest-rank adjacent pair, the leftmost if several, until no pair
has a rank. `merge_short` runs it as the textbook quadratic loop (fastest on a short pre-token);
`merge_by_heap` keeps a heap of pair ranks on a linked list, so one long pre-token (a run without
whitespace) costs O(n log n). `bpe_kernels` compiles the same two loops.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import repeat

NO_RANK = 1 << 62  # the rank of a pair never learned (above every real rank)


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
