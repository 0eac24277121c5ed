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


class Substrings:
    """The valid substrings of `words`, one length (`size`) at a time.

    `level` = (positions, names): the start of every valid substring of `size` characters in the joined text
    (ascending) and its name.
    """

    def __init__(self, words: list[str], max_length: int) -> None:
        self.text = "".join(words)
        self.codes = np.frombuffer(self.text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        lengths = np.array([len(w) for w in words], dtype=np.int64)
        self.word_start = np.concatenate([[0], np.cumsum(lengths)])  # word w: word_start[w] .. word_start[w + 1]
        self.word_of = np.repeat(np.arange(len(words), dtype=np.int64), lengths)  # position -> word
        self.max_length = max_length
        self.chars, first_names = np.unique(self.codes, return_inverse=True)
        self.first_names = first_names.astype(np.int64)  # position -> name of its character
        self.segment = np.cumsum(self._breaks())  # position -> segment number
        self.size = 1
        self.level = (np.arange(len(self.codes)), self.first_names)

    def _breaks(self) -> np.ndarray:
        """True where a segment starts: word starts, `▁` and script changes (rules of `_valid_spans`)."""
        codes = self.codes
        scripts: dict[str, int] = {}
        sid_of_char = np.array(
            [-1 if c == _SPACE or script_of(chr(c)) == "Inherited" else scripts.setdefault(script_of(chr(c)), len(scripts))
             for c in self.chars.tolist()],
            dtype=np.int64,
        )
        sid = sid_of_char[self.first_names]  # position -> script id, -1 for none
        is_space = codes == _SPACE
        breaks = np.zeros(len(codes), dtype=bool)
        breaks[self.word_start[:-1]] = True
        # The script in force before position k: that of the last character with a script since
        # the word start or the last `▁` (none if that `▁` comes later).
        index = np.arange(len(codes))
        last = np.maximum.accumulate(np.where((sid >= 0) | is_space, index, -1))
        before = np.concatenate([[-1], last[:-1]])
        in_word = before >= self.word_start[self.word_of]
        current = np.where(in_word & ~is_space[before], sid[before], -1)
        breaks |= is_space | ((sid >= 0) & (current >= 0) & (sid != current))
        return breaks

    def next_level(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Name the substrings one character longer than the last level; None when there are none.

        Returns (positions, local names, sort order of the positions by name, first index of each
        name in that order) for the aggregates the seeds need.
        """
        size = self.size + 1
        if size > self.max_length:
            return None
        positions, names = self.level
        last = positions + size - 1
        ok = last < len(self.codes)
        ok[ok] = self.segment[last[ok]] == self.segment[positions[ok]]
        positions = positions[ok]
        if not len(positions):
            return None
        keys = names[ok] * len(self.chars) + self.first_names[positions + size - 1]
        order = np.argsort(keys)
        sorted_keys = keys[order]
        first = np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]])
        local = np.empty(len(keys), dtype=np.int64)
        local[order] = np.cumsum(first) - 1
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
    weights = np.array(list(words.values()), dtype=np.int64)[subs.word_of]  # position -> word count
    word_end = subs.word_start[subs.word_of + 1]
    found = []  # (positions, counts, size) of the seed candidates of each length
    while (level := subs.next_level()) is not None:
        positions, local, order, starts = level
        size = subs.size
        after_at = positions + size
        inside = after_at < word_end[positions]
        after = np.where(inside, subs.codes[np.minimum(after_at, len(subs.codes) - 1)], _SPACE)[order]
        counts = np.add.reduceat(weights[positions][order], starts)
        branching = np.minimum.reduceat(after, starts) != np.maximum.reduceat(after, starts)
        chosen = np.flatnonzero(branching & (counts >= 2))
        found.append((positions[order[starts[chosen]]], counts[chosen], size))
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
