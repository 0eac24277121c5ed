"""GPT-2 pre-tokenization as numpy array operations: a scanner over character classes.

`regex.findall(GPT2_PATTERN, text)` stays the specification; this module finds the same pre-tokens
without per-character or per-token Python. The text becomes a code-point array, one table lookup
classifies every code point (letter, number, whitespace, other: `regex`'s own classes, from
`regex_classes`), and the pattern's alternatives become shifted comparisons that mark where each
pre-token starts:

- a change of class starts a pre-token (`\\p{L}+`, `\\p{N}+`, `[^\\s\\p{L}\\p{N}]+`, `\\s+`);
- the last whitespace character before a non-whitespace one leaves its run (`\\s+(?!\\S)` backs off
  one character), and when it is a space it joins the pre-token after it (` ?\\p{L}+` ...);
- an apostrophe that starts a pre-token takes `s d m t` or `ll ve re` after it (the contractions).

`cuts` mark where independent texts were joined (special tokens taken out): nothing joins across
a cut, and whitespace before a cut is at its text's end.
"""

from __future__ import annotations

import numpy as np

from .regex_classes import LETTER, NUMBER, WHITESPACE

OTHER, LETTER_CLASS, NUMBER_CLASS, SPACE_CLASS = 0, 1, 2, 3
SPACE, APOSTROPHE = ord(" "), ord("'")
# Contractions of GPT-2's pattern after the apostrophe: one letter, or two.
CONTRACTIONS_1 = tuple(map(ord, "sdmt"))
CONTRACTIONS_2 = tuple((ord(a), ord(b)) for a, b in ("ll", "ve", "re"))


def _class_table() -> np.ndarray:
    """The class of every code point (uint8), U+0000..U+10FFFF."""
    table = np.full(0x110000, OTHER, dtype=np.uint8)
    for ranges, value in ((LETTER, LETTER_CLASS), (NUMBER, NUMBER_CLASS), (WHITESPACE, SPACE_CLASS)):
        for first, last in ranges:
            table[first : last + 1] = value
    return table


CLASS_TABLE = _class_table()


def code_points(text: str) -> np.ndarray:
    """The text's code points (uint32); lone surrogates stay as their own code points, as in `str`."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def gpt2_starts(points: np.ndarray, cuts: np.ndarray | None = None) -> np.ndarray:
    """Positions where GPT-2's pre-tokens start (int64, ascending; position 0 first when non-empty).

    `cuts`: positions where a new independent text starts (sorted; 0 and len(points) allowed).
    """
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    classes = CLASS_TABLE[points]
    cut = np.zeros(n + 1, dtype=bool)  # cut[i]: a text starts at i (cut[n]: the end)
    cut[0] = cut[n] = True
    if cuts is not None:
        cut[cuts] = True
    start = cut[:n].copy()
    start[1:] |= classes[1:] != classes[:-1]
    space = classes == SPACE_CLASS
    # Whitespace followed by non-whitespace of the same text: its own pre-token, or the space in front.
    before_word = np.zeros(n, dtype=bool)
    before_word[:-1] = space[:-1] & ~space[1:] & ~cut[1:n]
    start |= before_word
    prefix = np.flatnonzero(before_word & (points == SPACE)) + 1
    start[prefix] = False
    _mark_contractions(points, start, cut)
    return np.flatnonzero(start)


def _mark_contractions(points: np.ndarray, start: np.ndarray, cut: np.ndarray) -> None:
    """Split `'s 'd 'm 't 'll 've 're` off the letters after an apostrophe that starts a pre-token."""
    n = len(points)
    at = np.flatnonzero(start & (points == APOSTROPHE))
    at = at[(at + 1 < n) & ~cut[np.minimum(at + 1, n)]]
    if not len(at):
        return
    first = points[at + 1]
    length = np.where(np.isin(first, CONTRACTIONS_1), 2, 0)
    two = at[(length == 0) & (at + 2 < n)]
    if len(two):
        pairs = (points[two + 1].astype(np.int64) << 21) | points[two + 2]
        wanted = [(a << 21) | b for a, b in CONTRACTIONS_2]
        ok = np.isin(pairs, wanted) & ~cut[two + 2]
        length[np.searchsorted(at, two[ok])] = 3
    at, length = at[length > 0], length[length > 0]
    start[at + 1] = False  # the letters after the apostrophe no longer start a pre-token
    end = at + length
    start[end[end < n]] = True


def pretoken_bounds(text: str, cuts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(code points, starts, ends) of the GPT-2 pre-tokens of `text`."""
    points = code_points(text)
    starts = gpt2_starts(points, cuts)
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    if len(ends):
        ends[-1] = len(points)
    return points, starts, ends


def pretokenize_gpt2_arrays(text: str) -> list[str]:
    """GPT-2 pre-tokens of `text`, equal to `regex.findall(GPT2_PATTERN, text)`.

    >>> pretokenize_gpt2_arrays("It's  2 cats!\\n")
    ['It', "'s", ' ', ' 2', ' cats', '!', '\\n']
    """
    _, starts, ends = pretoken_bounds(text)
    return list(map(text.__getitem__, map(slice, starts.tolist(), ends.tolist())))
