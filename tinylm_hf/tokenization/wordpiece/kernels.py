"""WordPiece encoding as a numba kernel: BERT's words of normalised text, then greedy longest-match-first.

The specification is the pure-Python path of `wordpiece.py` (`split_bert_words`, then
`WordPieceTokenizer._encode_word` per word); this kernel computes the same ids over the text's code points
without a Python object per word:

- a word is a run of characters that are neither a space nor punctuation, or one punctuation character
  (normalised text holds no other whitespace); punctuation is one lookup in `PUNCTUATION_TABLE`;
- a word longer than `max_chars` is the unknown token; else its pieces are the longest vocabulary entry
  that starts it, then the longest continuation (an entry that is the prefix, "##", and then these
  characters) that starts the rest, and so on; a word with a position no entry covers is the unknown token;
- entries sit in an open-addressing table keyed by (continuation or not, code points): the hashes of
  every candidate at one position come from one pass over its characters, tried longest first.

Imported only after `jit.kernels_enabled()`; every function here is compiled at its first call and cached.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .bert_unicode import PUNCTUATION
from ..jit import njit

EMPTY = -1  # an empty slot of the table
SPACE = 32  # the one whitespace left in normalised text
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the slot is the top bits of the hash


def _punctuation_table() -> np.ndarray:
    """1 for every code point BERT's pre-tokenizer makes a word of its own, else 0 (uint8, all of Unicode)."""
    table = np.zeros(0x110000, dtype=np.uint8)
    for first, last in PUNCTUATION:
        table[first : last + 1] = 1
    return table


PUNCTUATION_TABLE = _punctuation_table()


@njit()
def _seed(continuation):
    return np.uint64(continuation + 1) * _MIX


@njit()
def _step(h, cp):
    return (h ^ np.uint64(cp)) * _MIX


@njit()
def _build_table(chars, offsets, flags, bits):
    """Slots (2**bits) holding each entry's index, keyed by (flag, chars[offsets[e]:offsets[e + 1]])."""
    table = np.full(1 << bits, EMPTY, dtype=np.int32)
    mask, shift = (1 << bits) - 1, np.uint64(64 - bits)
    for e in range(len(flags)):
        h = _seed(flags[e])
        for k in range(offsets[e], offsets[e + 1]):
            h = _step(h, chars[k])
        slot = np.int64(h >> shift)
        while table[slot] != EMPTY:
            slot = (slot + 1) & mask
        table[slot] = e
    return table


@njit()
def _find(table, shift, h, cps, start, size, flag, chars, offsets, flags):
    """The entry equal to (flag, cps[start:start + size]) whose hash is h, or EMPTY."""
    mask = len(table) - 1
    slot = np.int64(h >> shift)
    while table[slot] != EMPTY:
        e = table[slot]
        if flags[e] == flag and offsets[e + 1] - offsets[e] == size:
            k = 0
            while k < size and chars[offsets[e] + k] == cps[start + k]:
                k += 1
            if k == size:
                return e
        slot = (slot + 1) & mask
    return EMPTY


@njit()
def _longest_entry(cps, pos, end, flag, table, shift, chars, offsets, flags, longest, hashes):
    """(entry, its characters) of the longest entry of this flag that starts cps[pos:end], or (EMPTY, 0)."""
    limit = min(end - pos, longest[flag])
    h = _seed(flag)
    for k in range(limit):  # hashes[k + 1]: the candidate of k + 1 characters
        h = _step(h, cps[pos + k])
        hashes[k + 1] = h
    for size in range(limit, 0, -1):
        found = _find(table, shift, hashes[size], cps, pos, size, flag, chars, offsets, flags)
        if found != EMPTY:
            return found, size
    return EMPTY, 0


@njit()
def encode_kernel(cps, punctuation, vocab):
    """The ids of normalised text given as code points (see the module docstring)."""
    table, shift, chars, offsets, flags, ids, longest, unk_id, max_chars = vocab
    out = np.empty(len(cps), dtype=np.int64)  # at most one id per character
    hashes = np.empty(max(longest[0], longest[1]) + 1, dtype=np.uint64)
    n, i, size = 0, 0, len(cps)
    while i < size:
        if cps[i] == SPACE:
            i += 1
            continue
        end = i + 1  # the word is cps[i:end]
        if not punctuation[cps[i]]:
            while end < size and cps[end] != SPACE and not punctuation[cps[end]]:
                end += 1
        first, pos = n, i
        while pos < end and end - i <= max_chars:
            found, length = _longest_entry(cps, pos, end, 0 if pos == i else 1, table, shift, chars, offsets,
                                           flags, longest, hashes)
            if found == EMPTY:
                break
            out[n] = ids[found]
            n += 1
            pos += length
        if pos < end:  # a position no entry covers, or a word over max_chars: the whole word is unknown
            out[first] = unk_id
            n = first + 1
        i = end
    return out[:n]


class WordPieceKernel:
    """A WordPiece vocabulary as the kernel's arrays; `encode` gives the ids of normalised text."""

    def __init__(self, token_to_id: Mapping[str, int], prefix: str, unk_id: int, max_chars: int) -> None:
        # Entries: every token (flag 0, at a word's start) and every token after its prefix (flag 1).
        keys = [(0, token, i) for token, i in token_to_id.items()]
        keys += [(1, token[len(prefix):], i) for token, i in token_to_id.items()
                 if token.startswith(prefix) and len(token) > len(prefix)]
        text = "".join(key for _, key, _ in keys)
        chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        lengths = np.fromiter((len(key) for _, key, _ in keys), dtype=np.int64, count=len(keys))
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        flags = np.fromiter((flag for flag, _, _ in keys), dtype=np.int64, count=len(keys))
        ids = np.fromiter((i for _, _, i in keys), dtype=np.int64, count=len(keys))
        longest = np.array([lengths[flags == f].max(initial=0) for f in (0, 1)], dtype=np.int64)
        bits = max(4, (2 * len(keys)).bit_length())  # at most half full
        table = _build_table(chars, offsets, flags, bits)
        self.vocab = (table, np.uint64(64 - bits), chars, offsets, flags, ids, longest, np.int64(unk_id),
                      np.int64(max_chars))

    def encode(self, normalized: str) -> list[int]:
        """Ids of text already normalised (`wordpiece.normalize_bert`)."""
        cps = np.frombuffer(normalized.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        return encode_kernel(cps, PUNCTUATION_TABLE, self.vocab).tolist()
