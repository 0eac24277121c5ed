"""Every substring a Unigram piece may be, named with numpy: the seed pieces.

The words are joined into one array of code points. A substring may be a piece when it lies in one
segment of its word (segments end before a `▁` that is not first and where the Unicode script
changes; combining marks take the script before them) and has at most `max_length` characters.
Substrings are named one length at a time, as the levels of a trie: the name of `s + c` is the rank
of (name of `s`, `c`) among the pairs found at that length, so equal substrings share a name and no
Python loop runs over the positions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..metaspace.sentencepiece_model import SPACE_SYMBOL
from ..piece_rules import script_of

_SPACE = ord(SPACE_SYMBOL)
# Positions compared at a time when finding where the sorted names change (a full sorted copy was 8 bytes a position).
_CHUNK = 1 << 20


def position_dtype(characters: int, max_length: int) -> type[np.signedinteger]:
    """int32 where every position of a text of `characters` (and `max_length` past its end) fits, else int64."""
    return np.int32 if characters + max_length < 2**31 else np.int64


class Substrings:
    """The valid substrings of `words`, one length (`size`) at a time.

    `level` = (positions, names): the start of every valid substring of `size` characters in the joined text
    (ascending) and its name. Positions, names and the per-character arrays are int32 (`index`) while the text
    is shorter than 2**31 characters (int64 beyond): about 22 bytes a character are held, where int64 arrays
    and np.unique's copies took over 100 on code.
    """

    def __init__(self, words: list[str], max_length: int) -> None:
        self.text = "".join(words)
        self.codes = np.frombuffer(self.text.encode("utf-32-le"), dtype=np.uint32)  # code points, below 2**21
        self.index = position_dtype(len(self.codes), max_length)
        lengths = np.fromiter(map(len, words), dtype=self.index, count=len(words))
        self.word_start = np.zeros(len(words) + 1, dtype=self.index)  # word w: word_start[w] .. word_start[w + 1]
        np.cumsum(lengths, out=self.word_start[1:])
        self.word_of = np.repeat(np.arange(len(words), dtype=self.index), lengths)  # position -> word
        self.max_length = max_length
        # The distinct characters ascending and each position's rank among them (np.unique(return_inverse)
        # without its sort and int64 copies).
        present = np.zeros(int(self.codes.max(initial=0)) + 1, dtype=bool)
        present[self.codes] = True
        self.chars = np.flatnonzero(present)
        rank = np.zeros(len(present), dtype=np.int32)
        rank[self.chars] = np.arange(len(self.chars), dtype=np.int32)
        self.first_names = rank[self.codes]  # position -> name of its character
        self.segment = np.cumsum(self._breaks(), dtype=self.index)  # position -> segment number
        self.size = 1
        self.level = (np.arange(len(self.codes), dtype=self.index), self.first_names)

    def _breaks(self) -> np.ndarray:
        """True where a segment starts: word starts, `▁` and script changes (rules of `_valid_spans`)."""
        codes = self.codes
        scripts: dict[str, int] = {}
        sid_of_char = np.array(
            [-1 if c == _SPACE or script_of(chr(c)) == "Inherited" else scripts.setdefault(script_of(chr(c)), len(scripts))
             for c in self.chars.tolist()],
            dtype=np.int32,
        )
        sid = sid_of_char[self.first_names]  # position -> script id, -1 for none
        is_space = codes == _SPACE
        breaks = np.zeros(len(codes), dtype=bool)
        breaks[self.word_start[:-1]] = True
        # The script in force before position k: that of the last character with a script since
        # the word start or the last `▁` (none if that `▁` comes later).
        last = np.where((sid >= 0) | is_space, np.arange(len(codes), dtype=self.index), -1)
        np.maximum.accumulate(last, out=last)
        before = np.empty_like(last)
        before[:1], before[1:] = -1, last[:-1]
        del last
        in_word = before >= self.word_start[self.word_of]
        current = np.where(in_word & ~is_space[before], sid[before], -1)
        breaks |= is_space | ((sid >= 0) & (current >= 0) & (sid != current))
        return breaks

    def next_level(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Name the substrings one character longer than the last level; None when there are none.

        Returns (positions, local names, sort order of the positions by name, first index of each
        name in that order) for the aggregates the seeds need. The last level is dropped as the new one is built.
        """
        size = self.size + 1
        if size > self.max_length:
            return None
        positions, names = self.level
        last = positions + (size - 1)
        ok = last < len(self.codes)
        ok[ok] = self.segment[last[ok]] == self.segment[positions[ok]]
        del last
        positions = positions[ok]
        if not len(positions):
            return None
        keys = names[ok].astype(np.int64) * len(self.chars)  # (name, next character): int64, as the names times
        keys += self.first_names[positions + (size - 1)]      # the characters can pass 2**31
        self.level = names = ok = None
        order = np.argsort(keys)
        first = np.empty(len(keys), dtype=bool)  # where a new name starts in that order; sorted keys by chunks
        first[0] = True
        for lo in range(1, len(keys), _CHUNK):
            hi = min(lo + _CHUNK, len(keys))
            sorted_keys = keys[order[lo - 1 : hi]]
            np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=first[lo:hi])
        del keys
        order = order.astype(self.index)
        local = np.empty(len(first), dtype=self.index)
        local[order] = np.cumsum(first, dtype=self.index) - 1
        self.size, self.level = size, (positions, local)
        return positions, local, order, np.flatnonzero(first)


def seed_pieces(
    words: Mapping[str, int], chars: list[tuple[str, int]], max_length: int, seed_size: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Characters (by count) then substrings seen at least twice in the corpus (by count x length).

    sentencepiece counts seeds on the whole sentences, so counts are corpus counts: each distinct
    word's substrings weigh its count. Like its suffix-array seeds, only substrings followed by two
    different characters somewhere are kept (the others always extend to a longer seed); a word's
    end is followed by `▁` (the next word's start).
    Returns (pieces, log-probabilities, whether each piece is one character).
    """
    subs = Substrings(list(words), max_length)
    word_counts = np.fromiter(words.values(), dtype=np.int64, count=len(words))
    found = []  # (positions, counts, size) of the seed candidates of each length
    while (level := subs.next_level()) is not None:
        positions, local, order, starts = level
        size = subs.size
        word = subs.word_of[positions]
        after_at = positions + size
        inside = after_at < subs.word_start[1:][word]
        after = np.full(len(positions), _SPACE, dtype=subs.codes.dtype)  # a word's end is followed by `▁`
        after[inside] = subs.codes[after_at[inside]]
        del after_at, inside
        after = after[order]
        word = word[order]
        counts = np.add.reduceat(word_counts[word], starts)
        del word
        branching = np.minimum.reduceat(after, starts) != np.maximum.reduceat(after, starts)
        del after
        chosen = np.flatnonzero(branching & (counts >= 2))
        found.append((positions[order[starts[chosen]]].astype(np.int64), counts[chosen], size))
        del positions, local, order, starts, level
    where = np.concatenate([f[0] for f in found] + [np.zeros(0, np.int64)])
    sizes = np.concatenate([np.full(len(f[0]), f[2]) for f in found] + [np.zeros(0, np.int64)])
    scores = (np.concatenate([f[1] for f in found] + [np.zeros(0, np.int64)]) * sizes).tolist()
    text = subs.text
    strings = [text[p : p + n] for p, n in zip(where.tolist(), sizes.tolist())]
    best = sorted(range(len(strings)), key=lambda i: (-scores[i], strings[i]))[:seed_size]
    pieces = [c for c, _ in chars] + [strings[i] for i in best]
    all_scores = [n for _, n in chars] + [scores[i] for i in best]
    log_probs = np.log(np.array(all_scores, dtype=np.float64)) - math.log(sum(all_scores))
    return pieces, log_probs, np.arange(len(pieces)) < len(chars)
