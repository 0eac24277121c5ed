"""Byte-level BPE encoding as numba kernels: GPT-2's or cl100k's pre-tokens by a one-pass scanner, then each
pre-token's ids by a whole-vocabulary lookup or the textbook lowest-rank merge.

The specification is the pure-Python path of `bpe.py` (`regex` pre-tokens, `merge_short`/`merge_by_heap`);
these kernels compute the same ids over UTF-8 bytes without a Python object per pre-token:

- the scanner reads one code point at a time, classifies it with one lookup in `CLASS_TABLE` (letter,
  number, whitespace, other: the ranges of `regex_classes`) and applies the pattern's alternatives in their
  order, the way the regex engine would (`gpt2_pretoken_end`, `gpt4_pretoken_end`);
- a pre-token that is a whole vocabulary entry (one that merges to itself) is that entry, found in an
  open-addressing table of the entries' bytes (tiktoken's shortcut);
- any other merges by rank: the lowest-rank adjacent pair, the leftmost of equal ranks, until none has a
  rank; pair ranks sit in an open-addressing table keyed by (left id << 32 | right id). Short pre-tokens
  rescan an array of pair ranks (quadratic, fastest when short); long ones (a run without whitespace) keep
  a binary heap of (rank, position) over a linked list, so they cost O(n log n).

The scanner is also BPE training's (`tokenization.pretoken_counts` counts the spans `pretoken_bounds`
finds). The per-token loops allocate nothing and are compiled without reference counting
(`njit(refcounts=False)`); only the functions that allocate (`encode_texts`, `merge_by_heap`, table
builders) count references. Imported only after `jit.kernels_enabled()`; every function here is compiled
at its first call and cached.
"""

from __future__ import annotations

from itertools import accumulate, chain, repeat

import numpy as np

from ..jit import njit
from ..regex_classes import LETTER, NUMBER, WHITESPACE

OTHER, LETTER_CLASS, NUMBER_CLASS, SPACE_CLASS = 0, 1, 2, 3  # a code point's class, as the scanner sees it

NO_RANK = np.int64(1 << 62)  # the rank of a pair never learned
EMPTY = -1  # an empty slot of an open-addressing table
# Pre-tokens of at least this many bytes merge over the heap instead of the quadratic rescan.
HEAP_MIN_BYTES = 64
# Slots of the table of pre-tokens merged earlier in one call (half of them fill: at most 32k pre-tokens).
MERGED_SLOTS = 1 << 16
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the slot is the top bits of key * _MIX
SHORT_MASK = np.int64((1 << 56) - 1)
ID_BITS = 21  # pair slots pack two ids and a rank of ID_BITS bits each: ids and ranks below 2**21
ID_MASK = np.int64((1 << ID_BITS) - 1)


def _class_table() -> np.ndarray:
    """The class (OTHER, LETTER_CLASS, NUMBER_CLASS, SPACE_CLASS) of every code point, U+0000..U+10FFFF (uint8):
    `regex`'s letters, numbers and whitespace (`regex_classes`); surrogates and unassigned code points are OTHER."""
    table = np.full(0x110000, OTHER, dtype=np.uint8)
    for ranges, value in ((LETTER, LETTER_CLASS), (NUMBER, NUMBER_CLASS), (WHITESPACE, SPACE_CLASS)):
        for first, last in ranges:
            table[first : last + 1] = value
    return table


CLASS_TABLE = _class_table()


# ------------------------------------------------------------------------------------------- scanner
@njit(inline=True)
def decode_at(data, i):
    """(code point, byte length) of the UTF-8 character starting at data[i] (valid UTF-8)."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (data[i + 1] & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F), 3
    return (((b & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6)
            | (data[i + 3] & 0x3F)), 4


@njit(inline=True)
def class_at(data, i, end, classes):
    """(class, byte length) of the character at i; (-1, 0) at `end`."""
    if i >= end:
        return np.int64(-1), np.int64(0)
    if data[i] < 0x80:
        return np.int64(classes[data[i]]), np.int64(1)
    cp, size = decode_at(data, i)
    return np.int64(classes[cp]), np.int64(size)


@njit(inline=True)
def run_end(data, i, end, classes, cls):
    """The end of the run of characters of class `cls` starting at i."""
    while i < end:
        if data[i] < 0x80:  # ASCII: its own code point
            if classes[data[i]] != cls:
                break
            i += 1
            continue
        cp, size = decode_at(data, i)
        if classes[cp] != cls:
            break
        i += size
    return i


@njit(inline=True)
def contraction_end(data, i, end, ignore_case):
    """The end of `'s 'd 'm 't 'll 've 're` at i (cl100k: any case, and U+017F for s), or -1."""
    if data[i] != 39 or i + 1 >= end:  # "'"
        return -1
    a = data[i + 1] | 32 if ignore_case else data[i + 1]
    if a == 115 or a == 100 or a == 109 or a == 116:  # s d m t
        return i + 2
    if ignore_case and i + 2 < end and data[i + 1] == 0xC5 and data[i + 2] == 0xBF:  # U+017F folds to s
        return i + 3
    if i + 2 < end:
        b = data[i + 2] | 32 if ignore_case else data[i + 2]
        if (a == 108 and b == 108) or (a == 118 and b == 101) or (a == 114 and b == 101):  # ll ve re
            return i + 3
    return -1


@njit(inline=True)
def whitespace_end(data, i, end, run):
    """`\\s+(?!\\S)|\\s+` at whitespace i whose run ends at `run`: all of it at the text's end, else all
    but its last character (which starts the next pre-token), or that one character alone."""
    if run == end:
        return run
    last = run - 1
    while data[last] & 0xC0 == 0x80:  # back to the first byte of the last character
        last -= 1
    return last if last > i else run


@njit(refcounts=False)
def gpt2_pretoken_end(data, i, end, classes):
    """Where the GPT-2 pre-token starting at i ends:
    `'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`."""
    k = contraction_end(data, i, end, False)
    if k >= 0:
        return k
    j = i + 1 if data[i] == 32 else i  # the optional leading space
    c, _ = class_at(data, j, end, classes)
    if c == LETTER_CLASS or c == NUMBER_CLASS or c == OTHER:
        return run_end(data, j, end, classes, c)
    return whitespace_end(data, i, end, run_end(data, i, end, classes, SPACE_CLASS))


@njit(refcounts=False)
def gpt4_pretoken_end(data, i, end, classes):
    """Where the cl100k pre-token starting at i ends: `'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|
    \\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s`."""
    k = contraction_end(data, i, end, True)
    if k >= 0:
        return k
    c, size = class_at(data, i, end, classes)
    if c == LETTER_CLASS:
        return run_end(data, i, end, classes, LETTER_CLASS)
    if c != NUMBER_CLASS and data[i] != 10 and data[i] != 13:
        if class_at(data, i + size, end, classes)[0] == LETTER_CLASS:  # one non-letter, then letters
            return run_end(data, i + size, end, classes, LETTER_CLASS)
    if c == NUMBER_CLASS:
        j = i
        for _ in range(3):
            if class_at(data, j, end, classes)[0] != NUMBER_CLASS:
                break
            j += class_at(data, j, end, classes)[1]
        return j
    j = i + 1 if data[i] == 32 else i
    if class_at(data, j, end, classes)[0] == OTHER:
        j = run_end(data, j, end, classes, OTHER)
        while j < end and (data[j] == 10 or data[j] == 13):
            j += 1
        return j
    run = run_end(data, i, end, classes, SPACE_CLASS)
    if run == end:
        return run  # \s++$
    newline = -1
    for j in range(i, run):
        if data[j] == 10 or data[j] == 13:
            newline = j
    if newline >= 0:
        return newline + 1  # \s*[\r\n]
    return whitespace_end(data, i, end, run)  # \s+(?!\S)|\s


# ------------------------------------------------------------------------------------------- tables
@njit(inline=True)
def slot_of(key, mask):
    """The first slot to probe for a non-negative int64 key."""
    return np.int64((np.uint64(key) * _MIX) >> np.uint64(32)) & mask


@njit(inline=True)
def rank_of(left, right, pairs):
    """The rank of the pair (left, right), or NO_RANK. A slot of `pairs` packs left << 42 | right << 21 | rank."""
    key = (np.int64(left) << 21) | np.int64(right)
    mask = len(pairs) - 1
    s = slot_of(key, mask)
    while pairs[s] != EMPTY:
        if pairs[s] >> 21 == key:
            return pairs[s] & ID_MASK
        s = (s + 1) & mask
    return NO_RANK


@njit()
def make_pair_table(lefts, rights, ranks, size):
    """An open-addressing table of the distinct pairs (lefts[k], rights[k]) and their ranks, each slot one
    int64 left << 42 | right << 21 | rank, so that the table is small and a probe is one read."""
    pairs = np.full(size, EMPTY, dtype=np.int64)
    mask = size - 1
    for k in range(len(lefts)):
        key = (np.int64(lefts[k]) << 21) | np.int64(rights[k])
        s = slot_of(key, mask)
        while pairs[s] != EMPTY:
            s = (s + 1) & mask
        pairs[s] = (key << 21) | ranks[k]
    return pairs


@njit()
def make_byte_pair_ranks(byte_ids, pairs):
    """The rank of every pair of byte tokens, by first byte << 8 | second byte: a pre-token's first lookups."""
    ranks = np.empty(1 << 16, dtype=np.int64)
    for k in range(1 << 16):
        ranks[k] = rank_of(byte_ids[k >> 8], byte_ids[k & 0xFF], pairs)
    return ranks


@njit(inline=True)
def hash_bytes(data, start, end):
    """A 63-bit hash of data[start:end] (FNV-1a)."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@njit(inline=True)
def bytes_key(data, start, end):
    """The whole-lookup key of data[start:end]: up to 7 bytes themselves with their count in the top byte
    (equal keys mean equal bytes), longer ones their hash with 8 in the top byte (equal bytes to be checked)."""
    n = end - start
    if n >= 8:
        return (hash_bytes(data, start, end) & SHORT_MASK) | (np.int64(8) << 56)
    key = np.int64(n) << 56
    for k in range(n):
        key |= np.int64(data[start + k]) << (8 * k)
    return key


@njit(inline=True)
def same_bytes(x, a, y, b, n):
    """Whether x[a:a + n] == y[b:b + n]."""
    for k in range(n):
        if x[a + k] != y[b + k]:
            return False
    return True


@njit(refcounts=False)
def find_whole(data, start, end, whole, token_bytes, token_starts):
    """The id of the vocabulary entry whose bytes are data[start:end] (among those in `whole`), or -1.

    `whole` interleaves slots' keys (`bytes_key`) and ids."""
    key = bytes_key(data, start, end)
    mask = (len(whole) >> 1) - 1
    s = slot_of(key, mask)
    n = end - start
    while whole[2 * s] != EMPTY:
        if whole[2 * s] == key:
            t = whole[2 * s + 1]
            if n < 8:
                return t
            a = token_starts[t]
            if token_starts[t + 1] - a == n and same_bytes(token_bytes, a, data, start, n):
                return t
        s = (s + 1) & mask
    return -1


@njit()
def make_whole_table(token_bytes, token_starts, keep, size):
    """An open-addressing table of the ids t with keep[t] true, by `bytes_key` of their bytes."""
    whole = np.full(2 * size, EMPTY, dtype=np.int64)
    mask = size - 1
    for t in range(len(keep)):
        if keep[t]:
            key = bytes_key(token_bytes, token_starts[t], token_starts[t + 1])
            s = slot_of(key, mask)
            while whole[2 * s] != EMPTY:
                s = (s + 1) & mask
            whole[2 * s], whole[2 * s + 1] = key, t
    return whole


# ------------------------------------------------------------------------------------------- merging
@njit(refcounts=False)
def merge_short(ids, lo, n, pairs, merged, ranks):
    """Merge ids[lo:lo + n] in place by lowest rank (leftmost first), rescanning `ranks`; the new n.

    ranks[i] holds the rank of the pair (ids[lo + i], ids[lo + i + 1]) on entry (n - 1 of them)."""
    while n > 1:
        best, at = NO_RANK, -1
        for i in range(n - 1):
            if ranks[i] < best:
                best, at = ranks[i], i
        if at < 0:
            break
        ids[lo + at] = merged[best]
        for i in range(at + 1, n - 1):
            ids[lo + i] = ids[lo + i + 1]
        for i in range(at, n - 2):
            ranks[i] = ranks[i + 1]
        n -= 1
        if at > 0:
            ranks[at - 1] = rank_of(ids[lo + at - 1], ids[lo + at], pairs)
        if at < n - 1:
            ranks[at] = rank_of(ids[lo + at], ids[lo + at + 1], pairs)
    return n


@njit(refcounts=False)
def heap_push(heap, size, key):
    heap[size] = key
    i = size
    while i > 0 and heap[(i - 1) >> 1] > heap[i]:
        p = (i - 1) >> 1
        heap[p], heap[i] = heap[i], heap[p]
        i = p
    return size + 1


@njit(refcounts=False)
def heap_pop(heap, size):
    """Remove the smallest key (returned) and restore the heap of size - 1."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and heap[c + 1] < heap[c]:
            c += 1
        if heap[i] <= heap[c]:
            break
        heap[i], heap[c] = heap[c], heap[i]
        i = c
    return top


@njit()
def merge_by_heap(ids, lo, n, pairs, merged):
    """Merge ids[lo:lo + n] as `merge_short` does, in O(n log n): a heap of rank << 32 | position over a linked
    list; an entry whose pair changed since it was pushed is skipped when popped. Compacts; the new n."""
    ids = ids[lo : lo + n]
    nxt = np.arange(1, n + 1)
    prv = np.arange(-1, n - 1)
    heap = np.empty(2 * n, dtype=np.int64)  # n - 1 pairs, then each merge pops one and pushes at most two
    size = 0
    for i in range(n - 1):
        r = rank_of(ids[i], ids[i + 1], pairs)
        if r != NO_RANK:
            size = heap_push(heap, size, (r << 32) | i)
    while size > 0:
        key = heap_pop(heap, size)
        size -= 1
        rank, i = key >> 32, key & 0xFFFFFFFF
        j = nxt[i]
        if ids[i] < 0 or j >= n or rank_of(ids[i], ids[j], pairs) != rank:
            continue  # stale: i or j merged away or changed
        ids[i] = merged[rank]
        ids[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
        p = prv[i]
        if p >= 0:
            r = rank_of(ids[p], ids[i], pairs)
            if r != NO_RANK:
                size = heap_push(heap, size, (r << 32) | p)
        if k < n:
            r = rank_of(ids[i], ids[k], pairs)
            if r != NO_RANK:
                size = heap_push(heap, size, (r << 32) | i)
    m = 0
    for i in range(n):
        if ids[i] >= 0:
            ids[m] = ids[i]
            m += 1
    return m


@njit(refcounts=False)
def merge_bytes(data, start, end, out, at, byte_ids, pairs, merged, byte_pair_ranks, scratch):
    """BPE of the pre-token data[start:end] written to out[at:]; the new `at`. `scratch`: HEAP_MIN_BYTES int64."""
    n = end - start
    for k in range(n):
        out[at + k] = byte_ids[data[start + k]]
    if n >= HEAP_MIN_BYTES:
        return at + merge_by_heap(out, at, n, pairs, merged)
    for k in range(n - 1):
        scratch[k] = byte_pair_ranks[(np.int64(data[start + k]) << 8) | data[start + k + 1]]
    return at + merge_short(out, at, n, pairs, merged, scratch)


# ------------------------------------------------------------------------------------------- encoding
@njit(refcounts=False)
def find_merged(data, start, end, h, slots, seen):
    """The row k of `seen` (an earlier pre-token: its start and end in data, its ids' start and end in the
    output) whose bytes equal data[start:end] (hashed: `h`), or -1."""
    mask = len(slots) - 1
    s = slot_of(h, mask)
    n = end - start
    while slots[s] != EMPTY:
        k = slots[s]
        a = seen[k, 0]
        if seen[k, 1] - a == n and same_bytes(data, a, data, start, n):
            return k
        s = (s + 1) & mask
    return -1


@njit()
def encode_texts(data, bounds, after, gpt4, classes, byte_ids, pairs, merged, byte_pair_ranks, whole,
                 token_bytes, token_starts):
    """The ids of the texts data[bounds[t]:bounds[t + 1]] (UTF-8), each followed by the id after[t] unless it
    is negative (a special token), back to back; and each text's count of ids.

    Each text is pre-tokenized on its own (GPT-2's pattern, or cl100k's when `gpt4`). A pre-token that
    was merged before in this call copies the ids it got then (`find_merged`), up to MERGED_SLOTS / 2.
    """
    out = np.empty(len(data) + len(after), dtype=np.int64)
    text_ends = np.empty(len(bounds), dtype=np.int64)  # where each text's ids end in out, after a 0
    text_ends[0] = 0
    slots = np.full(min(MERGED_SLOTS, _pow2_at_least(len(data) // 8)), EMPTY, dtype=np.int64)
    seen = np.empty((len(slots) // 2, 4), dtype=np.int64)
    scratch = np.empty(HEAP_MIN_BYTES, dtype=np.int64)
    at = encode_into(data, bounds, after, gpt4, classes, byte_ids, pairs, merged, byte_pair_ranks, whole,
                     token_bytes, token_starts, out, text_ends, slots, seen, scratch)
    return out[:at], text_ends[1:] - text_ends[:-1]


@njit(refcounts=False)
def encode_into(data, bounds, after, gpt4, classes, byte_ids, pairs, merged, byte_pair_ranks, whole,
                token_bytes, token_starts, out, text_ends, slots, seen, scratch):
    """`encode_texts`' loop over the given buffers: writes the ids to out and where each text's ids end to
    text_ends[1:]; returns the number of ids."""
    at, remembered = 0, 0
    for t in range(len(bounds) - 1):
        i, end = bounds[t], bounds[t + 1]
        while i < end:
            j = gpt4_pretoken_end(data, i, end, classes) if gpt4 else gpt2_pretoken_end(data, i, end, classes)
            if j - i == 1:
                out[at] = byte_ids[data[i]]
                at += 1
                i = j
                continue
            found = find_whole(data, i, j, whole, token_bytes, token_starts)
            if found >= 0:
                out[at] = found
                at += 1
                i = j
                continue
            h = hash_bytes(data, i, j)
            k = find_merged(data, i, j, h, slots, seen)
            if k >= 0:
                for m in range(seen[k, 2], seen[k, 3]):
                    out[at] = out[m]
                    at += 1
            else:
                start = at
                at = merge_bytes(data, i, j, out, at, byte_ids, pairs, merged, byte_pair_ranks, scratch)
                if remembered < len(seen):
                    seen[remembered, 0], seen[remembered, 1], seen[remembered, 2], seen[remembered, 3] = i, j, start, at
                    s = slot_of(h, len(slots) - 1)
                    while slots[s] != EMPTY:
                        s = (s + 1) & (len(slots) - 1)
                    slots[s] = remembered
                    remembered += 1
            i = j
        if after[t] >= 0:
            out[at] = after[t]
            at += 1
        text_ends[t + 1] = at
    return at


@njit()
def _pow2_at_least(n):
    p = 16
    while p < n:
        p *= 2
    return p


@njit()
def merges_to_itself(token_bytes, token_starts, byte_ids, pairs, merged, byte_pair_ranks):
    """For each vocabulary entry t, whether merging its bytes gives [t]: those the whole lookup may return."""
    count = len(token_starts) - 1
    keep = np.zeros(count, dtype=np.bool_)
    out = np.empty(token_starts[-1] - token_starts[0] + 1, dtype=np.int64)
    scratch = np.empty(HEAP_MIN_BYTES, dtype=np.int64)
    for t in range(count):
        a, b = token_starts[t], token_starts[t + 1]
        if b - a >= 1:
            n = merge_bytes(token_bytes, a, b, out, 0, byte_ids, pairs, merged, byte_pair_ranks, scratch)
            keep[t] = n == 1 and out[0] == t
    return keep


# ------------------------------------------------------------------------------------------- pre-tokens
def pretoken_bounds(data: np.ndarray, bounds: np.ndarray, gpt4: bool) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends): byte offsets of the pre-tokens of the UTF-8 texts data[bounds[t]:bounds[t + 1]], in
    order (GPT-2's pattern, or cl100k's when `gpt4`); what BPE training counts."""
    return _pretoken_bounds(data, np.asarray(bounds, dtype=np.int64), gpt4, CLASS_TABLE)


@njit()
def _pretoken_bounds(data, bounds, gpt4, classes):
    starts = np.empty(len(data), dtype=np.int64)
    ends = np.empty(len(data), dtype=np.int64)
    n = scan_into(data, bounds, gpt4, classes, starts, ends)
    return starts[:n], ends[:n]


@njit(refcounts=False)
def scan_into(data, bounds, gpt4, classes, starts, ends):
    """`pretoken_bounds`' loop: writes the pre-tokens' starts and ends; returns their number."""
    n = 0
    for t in range(len(bounds) - 1):
        i, end = bounds[t], bounds[t + 1]
        while i < end:
            starts[n] = i
            i = gpt4_pretoken_end(data, i, end, classes) if gpt4 else gpt2_pretoken_end(data, i, end, classes)
            ends[n] = i
            n += 1
    return n


class BPEKernel:
    """A tokenizer's vocabulary and merges as the kernels' arrays, and its encoder over many texts at once."""

    def __init__(self, vocab: dict[int, bytes], ranks: dict[tuple[int, int], int], merged_by_rank: list[int],
                 byte_ids: list[int], pattern: str) -> None:
        """`ranks`: (left id, right id) -> rank; `merged_by_rank`: rank -> merged id; `pattern`: "gpt2"/"gpt4"."""
        self.gpt4 = pattern == "gpt4"
        self.classes = CLASS_TABLE
        self.byte_ids = np.asarray(byte_ids, dtype=np.int64)
        self.merged = np.asarray(merged_by_rank, dtype=np.int64)
        ends = np.fromiter(chain.from_iterable(ranks), dtype=np.int64, count=2 * len(ranks)).reshape(-1, 2)
        rank = np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))
        self.pairs = make_pair_table(ends[:, 0], ends[:, 1], rank, _table_size(len(ranks)))
        self.byte_pair_ranks = make_byte_pair_ranks(self.byte_ids, self.pairs)
        tokens = list(map(vocab.get, range(max(vocab) + 1), repeat(b"")))
        self.token_bytes = np.frombuffer(b"".join(tokens) or b"\0", dtype=np.uint8)
        self.token_starts = np.fromiter(accumulate(map(len, tokens), initial=0), dtype=np.int64, count=len(tokens) + 1)
        keep = merges_to_itself(self.token_bytes, self.token_starts, self.byte_ids, self.pairs, self.merged,
                                self.byte_pair_ranks)
        self.whole = make_whole_table(self.token_bytes, self.token_starts, keep, _table_size(int(keep.sum())))
        # id -> its Python int: lists of ids share these objects instead of making one per id
        self.id_objects = np.arange(len(tokens)).astype(object)

    def encode(self, data: bytes, bounds: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids of the UTF-8 texts data[bounds[t]:bounds[t + 1]], each followed by the special id after[t]
        unless negative, back to back; each text's number of ids). Runs without the GIL: threads encode at once.
        """
        return encode_texts(np.frombuffer(data, dtype=np.uint8), bounds, after, self.gpt4, self.classes,
                            self.byte_ids, self.pairs, self.merged, self.byte_pair_ranks, self.whole,
                            self.token_bytes, self.token_starts)

    def to_list(self, ids: np.ndarray) -> list[int]:
        """`ids.tolist()`, about twice as fast: the ints come from `id_objects`, none is made per id."""
        return self.id_objects.take(ids).tolist()


def _table_size(count: int) -> int:
    """A power of two at least twice `count`: open addressing stays at most half full."""
    return 1 << max(4, (2 * count).bit_length())
