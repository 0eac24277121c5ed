"""The byte-level BPE merge loop: the readable reference, and the dispatch to its compiled kernel.

Every word (a distinct pre-token, with its count) lies in one flat list of symbol ids with doubly linked
neighbours, so a merge touches only the positions where its pair occurs, whatever the word's length.
A pair's count is its occurrences weighted by word count; `where` maps a pair to the positions of its
left symbol (entries go stale as neighbours merge: they are checked when used). A max-heap holds
(count, pair) entries: counts of existing pairs only fall, so a popped entry whose count is stale is
pushed back with its current count (lazy update). Ties go to the greatest (left bytes, right bytes), then
to the smaller ids. `bpe_merges_kernels.learn_merges_kernel` is this loop over arrays, compiled by numba.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..tokenization.jit import kernels_enabled

# Inverting bytes (b -> 255 - b) plus a terminator above every inverted byte turns "greatest
# (bytes_a, bytes_b)" into "smallest string", which is what a min-heap pops first.
INVERT_TABLE = bytes(range(255, -1, -1))
INVERT_END = chr(256)


def learn_merges(words: Sequence[bytes], freqs: Sequence[int], token_bytes: list[bytes],
                 num_merges: int) -> list[tuple[int, int]]:
    """Merge the most frequent pair `num_merges` times (fewer if pairs run out): the merged id pairs.

    `token_bytes` (id -> bytes: the 256 bytes, then the specials) is extended with each merged token.
    Runs the compiled kernel where numba is installed, else `learn_merges_reference`.
    """
    if not kernels_enabled():
        return learn_merges_reference(words, freqs, token_bytes, num_merges)
    from .bpe_merges_kernels import learn_merges_kernel

    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    symbols = np.frombuffer(b"".join(words), dtype=np.uint8)
    first = b"".join(token_bytes)
    offsets = np.zeros(len(token_bytes) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in token_bytes], out=offsets[1:])
    merged = learn_merges_kernel(symbols, lengths, np.asarray(freqs, dtype=np.int64),
                                 np.frombuffer(first, dtype=np.uint8), offsets, num_merges)
    pairs = [(int(a), int(b)) for a, b in merged.tolist()]
    for left, right in pairs:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    return pairs


def learn_merges_reference(words: Sequence[bytes], freqs: Sequence[int], token_bytes: list[bytes],
                           num_merges: int) -> list[tuple[int, int]]:
    """`learn_merges` in plain Python: the specification the kernel is tested equal to."""
    # 1. All words back to back: position -> symbol id (-1: merged away), its word's count, and its
    # live neighbours (-1: none, at a word's edge).
    symbol: list[int] = []
    weight: list[int] = []
    nxt: list[int] = []
    prv: list[int] = []
    for word, freq in zip(words, freqs):
        start, size = len(symbol), len(word)
        symbol.extend(word)
        weight.extend([freq] * size)
        nxt.extend(range(start + 1, start + size))
        nxt.append(-1)
        prv.append(-1)
        prv.extend(range(start, start + size - 1))
    # 2. Pair counts and positions.
    counts: defaultdict[tuple[int, int], int] = defaultdict(int)  # (left, right) -> weighted count
    where: defaultdict[tuple[int, int], list[int]] = defaultdict(list)  # pair -> left positions
    for p, q in enumerate(nxt):
        if q >= 0:
            pair = (symbol[p], symbol[q])
            counts[pair] += weight[p]
            where[pair].append(p)
    inverted = [_invert(b) for b in token_bytes]
    heap = [(-count, inverted[a] + inverted[b], (a, b)) for (a, b), count in counts.items()]
    heapq.heapify(heap)
    # 3. Merge loop.
    merges: list[tuple[int, int]] = []
    while len(merges) < num_merges and heap:
        neg_count, key, pair = heapq.heappop(heap)
        count = counts.get(pair, 0)
        if count != -neg_count:
            if count > 0:
                heapq.heappush(heap, (-count, key, pair))
            continue
        new_id = len(token_bytes)
        token_bytes.append(token_bytes[pair[0]] + token_bytes[pair[1]])
        inverted.append(_invert(token_bytes[new_id]))
        merges.append(pair)
        made = _merge_pair(pair, new_id, sorted(set(where.pop(pair))), symbol, weight, nxt, prv, counts, where)
        counts[pair] = 0
        for new_pair in made:
            # A new pair can net to zero: (Y, X) in "Y X" -> "Y Y" is counted and then uncounted.
            if counts[new_pair] > 0:
                key = inverted[new_pair[0]] + inverted[new_pair[1]]
                heapq.heappush(heap, (-counts[new_pair], key, new_pair))
    return merges


def _merge_pair(pair: tuple[int, int], new_id: int, positions: list[int], symbol: list[int], weight: list[int],
                nxt: list[int], prv: list[int], counts: defaultdict, where: defaultdict) -> set[tuple[int, int]]:
    """Replace the live occurrences of `pair` at `positions` (left to right) by `new_id`; return the new pairs."""
    left, right = pair
    made: set[tuple[int, int]] = set()
    for p in positions:
        q = nxt[p]
        if symbol[p] != left or q < 0 or symbol[q] != right:
            continue  # stale, or overlapped by the occurrence just merged ("a a a" for (a, a))
        w, before, after = weight[p], prv[p], nxt[q]
        if before >= 0:
            s = symbol[before]
            counts[(s, left)] -= w
            counts[(s, new_id)] += w
            where[(s, new_id)].append(before)
            made.add((s, new_id))
        if after >= 0:
            s = symbol[after]
            counts[(right, s)] -= w
            counts[(new_id, s)] += w
            where[(new_id, s)].append(p)
            made.add((new_id, s))
            prv[after] = p
        symbol[p], symbol[q], nxt[p] = new_id, -1, after
    return made


def _invert(token: bytes) -> str:
    return token.translate(INVERT_TABLE).decode("latin-1") + INVERT_END
