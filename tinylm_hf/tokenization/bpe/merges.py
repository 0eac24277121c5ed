"""The BPE merge loop (byte-level BPE, SentencePiece BPE, WordPiece): the readable reference, and the dispatch
to its kernel.

Every word (a distinct pre-token, with its count) lies in one flat list of symbol ids with doubly linked
neighbours, so a merge touches only the positions where its pair occurs, whatever the word's length.
A pair's count is its occurrences weighted by word count; `where` maps a pair to the positions of its
left symbol (entries go stale as neighbours merge: they are checked when used). A max-heap holds
(count, pair) entries: counts of existing pairs only fall, so a popped entry whose count is stale is
pushed back with its current count (lazy update). Ties: byte-level BPE takes the greatest (left bytes,
right bytes); SentencePiece BPE the shortest joined piece (in characters), then the smallest joined UTF-8,
and lets only pairs that pass its piece rules join (`piece_rules.join_shapes`), dropping a pair whose
piece already exists. Then the smaller ids. WordPiece (`prefix_length`) joins a continuation without its
"##" prefix, and a joined token already in the vocabulary keeps its id: the merge then makes no new token
and its pairs, counted before, grow (so they are pushed again, and their position lists are sorted).
`bpe_merges_kernels.learn_merges_kernel` is this loop over arrays, compiled by numba.
"""

from __future__ import annotations

import heapq
import sys
from array import array
from collections import defaultdict
from collections.abc import Sequence
from itertools import accumulate, chain, repeat
from typing import TYPE_CHECKING

from ..jit import kernels_enabled
from ..piece_rules import PieceShape, join_shapes

if TYPE_CHECKING:
    import numpy as np

# Below this many symbols, and while numba is not yet loaded, the reference runs instead of the kernel
# (equal results): loading numba costs about 0.4 s of CPU and 130 MB the first time, more than the whole
# reference loop on a small corpus (SentencePiece BPE, CPU of the whole run: 0.55 s reference vs 0.82 s
# kernel on TinyStories, 116k symbols; 2.4 s vs 1.4 s on 5 MB of novels, 556k symbols).
KERNEL_MIN_SYMBOLS = 250_000
# Inverting bytes (b -> 255 - b) plus a terminator above every inverted byte turns "greatest
# (bytes_a, bytes_b)" into "smallest string", which is what a min-heap pops first.
INVERT_TABLE = bytes(range(255, -1, -1))
INVERT_END = chr(256)


def learn_merges(symbols: np.ndarray, lengths: np.ndarray, freqs: Sequence[int], token_bytes: list[bytes],
                 num_merges: int, shapes: list[PieceShape | None] | None = None, *,
                 prefix_length: int | None = None) -> list[tuple[int, int]]:
    """Merge the most frequent pair `num_merges` times (fewer if pairs run out): the merged id pairs.

    Words are `symbols` (ids, back to back) cut by `lengths`, each counted `freqs`. `token_bytes` (id ->
    bytes: for byte-level BPE the 256 bytes then the specials) is extended with each merged token.
    `shapes` (id -> `piece_rules.piece_shape`, None: never joins) selects SentencePiece BPE's rules and is
    extended too. `prefix_length` (bytes of WordPiece's continuing-subword prefix, which every right token
    starts with) selects WordPiece's joins: `num_merges` then counts new tokens, and a merge whose token
    exists (no new bytes appended) is listed too. Runs the compiled kernel where numba is installed (see
    `KERNEL_MIN_SYMBOLS`), else `learn_merges_reference`.
    """
    import numpy as np  # here, not above: WordPiece's small runs use the reference without it (20 MB)

    if not runs_kernel(len(symbols)):
        words = np.split(np.asarray(symbols), np.cumsum(lengths)[:-1]) if len(lengths) else []
        return learn_merges_reference([w.tolist() for w in words], freqs, token_bytes, num_merges, shapes,
                                      prefix_length=prefix_length)
    from .merges_kernels import learn_merges_kernel

    offsets = np.zeros(len(token_bytes) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in token_bytes], out=offsets[1:])
    first = np.frombuffer(b"".join(token_bytes), dtype=np.uint8)
    freqs = np.asarray(freqs, dtype=np.int64)
    small = 3 * len(symbols) < 2**31 and (not len(freqs) or freqs.max() < 2**31)
    merged = learn_merges_kernel(np.asarray(symbols), np.asarray(lengths, dtype=np.int64), freqs, first, offsets,
                                 _shape_rows(shapes, num_merges), num_merges,
                                 np.zeros(0, dtype=np.int32 if small else np.int64),
                                 -1 if prefix_length is None else prefix_length)
    pairs = [(int(a), int(b)) for a, b in merged.tolist()]
    existing = set(token_bytes)
    for left, right in pairs:
        joined = token_bytes[left] + token_bytes[right][prefix_length or 0:]
        if prefix_length is not None and joined in existing:
            continue  # WordPiece: the token exists and keeps its id
        existing.add(joined)
        token_bytes.append(joined)
        if shapes is not None:
            shapes.append(join_shapes(shapes[left], shapes[right]))
    return pairs


def runs_kernel(num_symbols: int, min_symbols: int | None = None) -> bool:
    """Whether a compiled kernel runs on `num_symbols` symbols in all: kernels are enabled, and there are at least
    `min_symbols` (default `KERNEL_MIN_SYMBOLS`, `learn_merges`'; WordPiece and the Unigram lattices pass their
    own) or numba is loaded already."""
    small = num_symbols < (KERNEL_MIN_SYMBOLS if min_symbols is None else min_symbols) and "numba" not in sys.modules
    return not small and kernels_enabled()


def _shape_rows(shapes: list[PieceShape | None] | None, num_merges: int) -> np.ndarray:
    """The kernel's shapes: (characters, starts with "▁", first script, last script), scripts numbered, -1 for
    none; a row of -1 for a token that never joins; room for the merged tokens. Empty for byte-level BPE."""
    import numpy as np

    if shapes is None:
        return np.zeros((0, 4), dtype=np.int64)
    scripts: dict[str | None, int] = {None: -1}
    rows = np.full((len(shapes) + num_merges, 4), -1, dtype=np.int64)
    for i, shape in enumerate(shapes):
        if shape is not None:
            length, space, first, last = shape
            rows[i] = length, space, scripts.setdefault(first, len(scripts)), scripts.setdefault(last, len(scripts))
    return rows


def learn_merges_reference(words: Sequence[Sequence[int]], freqs: Sequence[int], token_bytes: list[bytes],
                           num_merges: int, shapes: list[PieceShape | None] | None = None, *,
                           prefix_length: int | None = None) -> list[tuple[int, int]]:
    """`learn_merges` in plain Python over words as id lists: the specification the kernel is tested equal to."""
    symbol, weight, nxt, prv = _link_words(words, freqs)
    # Pair counts and positions.
    counts: defaultdict[tuple[int, int], int] = defaultdict(int)  # (left, right) -> weighted count
    where: defaultdict[tuple[int, int], array] = defaultdict(_positions)  # pair -> left positions
    for p, q in enumerate(nxt):
        if q >= 0:
            pair = (symbol[p], symbol[q])
            counts[pair] += weight[p]
            where[pair].append(p)
    key = _piece_key if shapes is not None else _byte_key
    inverted = [_invert(b) for b in token_bytes]  # byte-level BPE's order
    heap = [(-count, k, pair) for pair, count in counts.items() if (k := key(pair, token_bytes, inverted, shapes))]
    heapq.heapify(heap)
    existing = {b: i for i, b in enumerate(token_bytes)}  # bytes -> id
    merges: list[tuple[int, int]] = []
    made_tokens = 0
    while made_tokens < num_merges and heap:
        neg_count, k, pair = heapq.heappop(heap)
        count = counts.get(pair, 0)
        if count != -neg_count:
            if count > 0:
                heapq.heappush(heap, (-count, k, pair))
            continue
        joined = token_bytes[pair[0]] + token_bytes[pair[1]][prefix_length or 0:]
        if shapes is not None and joined in existing:
            del counts[pair], where[pair]  # sentencepiece drops a pair whose piece already exists
            continue
        new_id = existing.get(joined) if prefix_length is not None else None
        if new_id is None:  # WordPiece keeps the id of a joined token that exists
            new_id = existing[joined] = len(token_bytes)
            token_bytes.append(joined)
            inverted.append(_invert(joined))
            if shapes is not None:
                shapes.append(join_shapes(shapes[pair[0]], shapes[pair[1]]))
            made_tokens += 1
        merges.append(pair)
        # Positions come mostly in order (sorting them is then linear); one listed twice is skipped as stale.
        made = _merge_pair(pair, new_id, sorted(where.pop(pair)), symbol, weight, nxt, prv, counts, where)
        counts.pop(pair, None)
        for new_pair in made:
            # A new pair can net to zero: (Y, X) in "Y X" -> "Y Y" is counted and then uncounted.
            if counts.get(new_pair, 0) > 0 and (k := key(new_pair, token_bytes, inverted, shapes)):
                heapq.heappush(heap, (-counts[new_pair], k, new_pair))
    return merges


def _positions() -> array:
    """A list of positions as 8-byte integers: a third of the memory of a list of ints."""
    return array("q")


def _link_words(words: Sequence[Sequence[int]], freqs: Sequence[int]) -> tuple[array | list[int], ...]:
    """All words back to back: position -> symbol id (-1: merged away), its word's count, and its
    live neighbours (-1: none, at a word's edge)."""
    lengths = list(map(len, words))
    # A list: its items are the words' own id objects, and reading one makes none.
    symbol = list(chain.from_iterable(words))
    weight = list(chain.from_iterable(map(repeat, freqs, lengths)))  # counts may pass 64 bits
    nxt, prv = array("q", range(1, len(symbol) + 1)), array("q", range(-1, len(symbol) - 1))
    for end in accumulate(lengths):  # cut the links at the words' edges
        nxt[end - 1] = -1
        if end < len(symbol):
            prv[end] = -1
    return symbol, weight, nxt, prv


def _byte_key(pair: tuple[int, int], token_bytes: list[bytes], inverted: list[str], shapes: None) -> str:
    return inverted[pair[0]] + inverted[pair[1]]


def _piece_key(pair: tuple[int, int], token_bytes: list[bytes], inverted: list[str],
               shapes: list[PieceShape | None]) -> tuple[int, bytes] | None:
    """(characters, UTF-8) of the joined piece, or None when sentencepiece's rules forbid it."""
    left, right = shapes[pair[0]], shapes[pair[1]]
    shape = join_shapes(left, right) if left is not None and right is not None else None
    return None if shape is None else (shape[0], token_bytes[pair[0]] + token_bytes[pair[1]])


def _merge_pair(pair: tuple[int, int], new_id: int, positions: list[int], symbol: list[int], weight: list[int],
                nxt: list[int], prv: list[int], counts: defaultdict, where: defaultdict) -> set[tuple[int, int]]:
    """Replace the live occurrences of `pair` at `positions` (left to right) by `new_id`; return the new pairs."""
    left, right = pair
    made: set[tuple[int, int]] = set()
    for p in positions:
        q = nxt[p]
        if symbol[p] != left or q < 0 or symbol[q] != right:
            continue  # stale, listed twice, or overlapped by the occurrence just merged ("a a a" for (a, a))
        w, before, after = weight[p], prv[p], nxt[q]
        if before >= 0:
            s = symbol[before]
            _uncount((s, left), w, counts, where)
            new = (s, new_id)
            counts[new] += w
            where[new].append(before)
            made.add(new)
        if after >= 0:
            s = symbol[after]
            _uncount((right, s), w, counts, where)
            new = (new_id, s)
            counts[new] += w
            where[new].append(p)
            made.add(new)
            prv[after] = p
        symbol[p], symbol[q], nxt[p] = new_id, -1, after
    return made


def _uncount(pair: tuple[int, int], w: int, counts: defaultdict, where: defaultdict) -> None:
    """Count `w` fewer of `pair`; forget a pair left with none (its listed positions are all stale)."""
    count = counts[pair] - w
    if count:
        counts[pair] = count
    else:  # none left: forget it
        del counts[pair]
        where.pop(pair, None)


def _invert(token: bytes) -> str:
    return token.translate(INVERT_TABLE).decode("latin-1") + INVERT_END
