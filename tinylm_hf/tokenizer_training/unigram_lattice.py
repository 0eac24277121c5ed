"""The lattices of Unigram training (forward-backward and Viterbi): the readable reference, and the dispatch to
its kernels.

A lattice holds, for each of many strings (the distinct words, or the pieces themselves), every occurrence of
a piece inside it as a node (start, end, piece), ordered by start then end: then a node leaving position
p always comes after every node arriving at p, so forward passes are one loop over the nodes and backward
passes the same loop run backwards.

The E step multiplies probabilities instead of adding logs (one multiply-add per node); a string whose total
probability falls below `TINY` (a long run of rare pieces) is redone in log space. Viterbi keeps, of paths
with equal scores, the one whose last piece starts earliest (sentencepiece's rule). `unigram_lattice_kernels`
runs these loops compiled by numba, in the same order, so both give the same numbers.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..tokenization.jit import kernels_enabled
from .unigram_paths import TINY, best_paths, log_add

# Below this many characters of strings, and while numba is not yet loaded, the reference runs instead of the
# kernels (equal results): loading numba and the kernels costs about 0.5-0.9 s of CPU and 110 MB, more than the
# whole reference run on TinyStories (115k characters of distinct words: 0.6 s of CPU and 63 MB at the peak,
# against 0.7 s and 184 MB on the kernels; 2-core machine).
KERNEL_MIN_CHARS = 150_000


@dataclass
class Lattice:
    """The nodes of many strings: string s owns nodes offsets[s]:offsets[s + 1], ordered by (start, end)."""

    lengths: np.ndarray  # int64, characters of each string
    offsets: np.ndarray  # int64, len(strings) + 1
    start: np.ndarray  # int32, node -> first character, from its string's start
    end: np.ndarray  # int32, node -> one past its last character
    piece: np.ndarray  # int32, node -> piece id (index into the pieces it was built from)

    def keep(self, alive: np.ndarray) -> Lattice:
        """The lattice without the nodes of pieces where `alive` is False."""
        if _use_kernels(self.lengths):
            from .unigram_lattice_kernels import keep_nodes

            return Lattice(self.lengths, *keep_nodes(self.offsets, self.start, self.end, self.piece, alive))
        kept = np.flatnonzero(alive[self.piece])
        return Lattice(self.lengths, np.searchsorted(kept, self.offsets), self.start[kept], self.end[kept],
                       self.piece[kept])


def build_lattice(strings: Sequence[str], pieces: Sequence[str], *, whole: bool) -> Lattice:
    """Every piece (ids: indices into `pieces`) inside every string; with `whole=False` a node never spans its
    whole string (the strings are pieces: their lattices hold their other segmentations)."""
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    if not _use_kernels(lengths):
        return _as_lattice(lengths, *build_lattice_reference(strings, pieces, whole=whole))
    from .unigram_lattice_kernels import build_trie, find_nodes

    trie = build_trie(*_code_points(pieces))
    longest = max(map(len, pieces), default=1)
    return Lattice(lengths, *find_nodes(*_code_points(strings), *trie, longest, whole))


def expected_counts(lattice: Lattice, scores: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """E step: each piece's expected count, the sum over strings of count x its posterior (forward-backward).

    `scores` are the pieces' log-probabilities by id (ids without nodes are ignored)."""
    if not _use_kernels(lattice.lengths):
        return np.array(expected_counts_reference(*_as_lists(lattice), scores.tolist(), freqs.tolist()))
    from .unigram_lattice_kernels import expected_counts_kernel

    return expected_counts_kernel(lattice.lengths, lattice.offsets, lattice.start, lattice.end, lattice.piece,
                                  scores, freqs.astype(np.float64))


def viterbi_pieces(lattice: Lattice, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(string, piece) of every node on each string's best path; strings without a path give none."""
    if not _use_kernels(lattice.lengths):
        owners, used = viterbi_pieces_reference(*_as_lists(lattice), scores.tolist())
        return np.array(owners, dtype=np.int64), np.array(used, dtype=np.int64)
    from .unigram_lattice_kernels import viterbi_pieces_kernel

    return viterbi_pieces_kernel(lattice.lengths, lattice.offsets, lattice.start, lattice.end, lattice.piece, scores)


def _use_kernels(lengths: np.ndarray) -> bool:
    """Whether the kernels run for strings of these `lengths` (see `KERNEL_MIN_CHARS`)."""
    small = "numba" not in sys.modules and int(lengths.sum()) < KERNEL_MIN_CHARS
    return not small and kernels_enabled()


def _code_points(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The strings' code points back to back (int32) and where each starts (int64, one more entry)."""
    codes = np.frombuffer("".join(strings).encode("utf-32-le"), dtype=np.uint32).astype(np.int32)
    starts = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in strings], out=starts[1:])
    return codes, starts


def _as_lattice(lengths: np.ndarray, offsets: list[int], start: list[int], end: list[int],
                piece: list[int]) -> Lattice:
    return Lattice(lengths, np.array(offsets, dtype=np.int64), np.array(start, dtype=np.int32),
                   np.array(end, dtype=np.int32), np.array(piece, dtype=np.int32))


def _as_lists(lattice: Lattice) -> tuple[list[int], ...]:
    return tuple(a.tolist() for a in (lattice.lengths, lattice.offsets, lattice.start, lattice.end, lattice.piece))


def build_lattice_reference(strings: Sequence[str], pieces: Sequence[str], *,
                            whole: bool) -> tuple[list[int], list[int], list[int], list[int]]:
    """`build_lattice` in plain Python: (offsets, start, end, piece) lists."""
    ids = {p: i for i, p in enumerate(pieces)}
    longest = max(map(len, ids), default=0)
    offsets, start, end, piece = [0], [], [], []
    for string in strings:
        size = len(string)
        for i in range(size):
            for j in range(i + 1, min(size, i + longest) + 1):
                found = ids.get(string[i:j])
                if found is not None and (whole or j - i < size):
                    start.append(i), end.append(j), piece.append(found)
        offsets.append(len(piece))
    return offsets, start, end, piece


def expected_counts_reference(lengths: list[int], offsets: list[int], start: list[int], end: list[int],
                              piece: list[int], scores: list[float], freqs: list[float]) -> list[float]:
    """`expected_counts` in plain Python."""
    expected = [0.0] * len(scores)
    probs = [math.exp(s) for s in scores]
    for s, size in enumerate(lengths):
        nodes = range(offsets[s], offsets[s + 1])
        alpha = [1.0] + [0.0] * size
        for k in nodes:
            alpha[end[k]] += alpha[start[k]] * probs[piece[k]]
        if alpha[size] < TINY:
            _expected_in_logs(size, nodes, start, end, piece, scores, freqs[s], expected)
            continue
        beta = [0.0] * size + [1.0]
        for k in reversed(nodes):
            beta[start[k]] += probs[piece[k]] * beta[end[k]]
        weight = freqs[s] / alpha[size]
        for k in nodes:
            expected[piece[k]] += weight * (alpha[start[k]] * probs[piece[k]] * beta[end[k]])
    return expected


def _expected_in_logs(size: int, nodes: range, start: list[int], end: list[int], piece: list[int],
                      scores: list[float], freq: float, expected: list[float]) -> None:
    """One string's forward-backward in log space (its probabilities could underflow)."""
    alpha = [0.0] + [-math.inf] * size
    for k in nodes:
        alpha[end[k]] = log_add(alpha[end[k]], alpha[start[k]] + scores[piece[k]])
    beta = [-math.inf] * size + [0.0]
    for k in reversed(nodes):
        beta[start[k]] = log_add(beta[start[k]], scores[piece[k]] + beta[end[k]])
    z = alpha[size]
    if z == -math.inf:
        return
    for k in nodes:
        expected[piece[k]] += freq * math.exp(alpha[start[k]] + scores[piece[k]] + beta[end[k]] - z)


def viterbi_pieces_reference(lengths: list[int], offsets: list[int], start: list[int], end: list[int],
                             piece: list[int], scores: list[float]) -> tuple[list[int], list[int]]:
    """`viterbi_pieces` in plain Python: (owners, pieces) lists, each string's path from its end."""
    owners, used = [], []
    for s, size in enumerate(lengths):
        best = [0.0] * (size + 1)
        back = [-1] * (size + 1)
        best_paths(offsets[s], offsets[s + 1], start, end, piece, scores, best, back)
        position = size
        while position > 0 and back[position] >= 0:
            k = back[position]
            owners.append(s), used.append(piece[k])
            position = start[k]
    return owners, used
