"""The lattices of Unigram training (forward-backward and Viterbi), and which path runs them.

A lattice holds, for each of many strings (the distinct words, or the pieces themselves), every occurrence of
a piece inside it as a node (start, end, piece), ordered by start then end: then a node leaving position
p always comes after every node arriving at p, so forward passes are one loop over the nodes and backward
passes the same loop run backwards.

The E step multiplies probabilities instead of adding logs (one multiply-add per node); a string whose total
probability falls below `TINY` (a long run of rare pieces) is redone in log space. Viterbi keeps, of paths
with equal scores, the one whose last piece starts earliest (sentencepiece's rule). Those loops are
`unigram_paths`': the reference runs them as Python over lists, `unigram_lattice_kernels` compiles them as they
are, so both give the same numbers. A lattice is built by a dict of the pieces here, by a trie there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from . import paths as unigram_paths
from ..bpe.merges import runs_kernel

# Below this many characters of strings, and while numba is not yet loaded, the reference runs instead of the
# kernels (equal results): loading numba and the kernels costs about 0.5-0.9 s of CPU and 110 MB, more than the
# whole reference run on TinyStories (115k characters of distinct words: 0.6 s of CPU and 63 MB at the peak,
# against 0.7 s and 184 MB on the kernels; 2-core machine).
KERNEL_MIN_CHARS = 150_000
# A string whose total probability is below this is redone in log space (its paths could have underflowed).
TINY = 1e-200


@dataclass
class Lattice:
    """The nodes of many strings: string s owns nodes offsets[s]:offsets[s + 1], ordered by (start, end)."""

    lengths: np.ndarray  # int64, characters of each string
    offsets: np.ndarray  # int64, len(strings) + 1
    start: np.ndarray  # `node_position_dtype`, node -> first character, from its string's start
    end: np.ndarray  # `node_position_dtype`, node -> one past its last character
    piece: np.ndarray  # int32, node -> piece id (index into the pieces it was built from)

    def keep(self, alive: np.ndarray) -> None:
        """Drop, in place, the nodes of pieces where `alive` is False: the live nodes move to the front and the
        columns become views of them. Training replaces its lattice each round, and a second lattice held beside
        the first was the peak of training on many words."""
        if runs_kernel(int(self.lengths.sum()), KERNEL_MIN_CHARS):
            from .lattice_kernels import keep_nodes

            count = keep_nodes(self.offsets, self.start, self.end, self.piece, alive)
        else:
            kept = np.flatnonzero(alive[self.piece])
            count = len(kept)
            self.offsets[:] = np.searchsorted(kept, self.offsets)
            for column in (self.start, self.end, self.piece):
                column[:count] = column[kept]
        self.start, self.end, self.piece = self.start[:count], self.end[:count], self.piece[:count]


def build_lattice(strings: Sequence[str], pieces: Sequence[str], *, whole: bool) -> Lattice:
    """Every piece (ids: indices into `pieces`) inside every string; with `whole=False` a node never spans its
    whole string (the strings are pieces: their lattices hold their other segmentations)."""
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    positions = node_position_dtype(lengths)
    if not runs_kernel(int(lengths.sum()), KERNEL_MIN_CHARS):
        offsets, start, end, piece = build_lattice_reference(strings, pieces, whole=whole)
        return Lattice(lengths, np.array(offsets, dtype=np.int64), np.array(start, dtype=positions),
                       np.array(end, dtype=positions), np.array(piece, dtype=np.int32))
    from .lattice_kernels import build_trie, count_nodes, write_nodes

    trie = build_trie(*_code_points(pieces))
    codes, starts = _code_points(strings)
    offsets = count_nodes(codes, starts, *trie, whole)
    nodes = Lattice(lengths, offsets, np.empty(offsets[-1], dtype=positions), np.empty(offsets[-1], dtype=positions),
                    np.empty(offsets[-1], dtype=np.int32))
    write_nodes(codes, starts, *trie, whole, offsets, nodes.start, nodes.end, nodes.piece)
    return nodes


def node_position_dtype(lengths: np.ndarray) -> type[np.unsignedinteger] | type[np.signedinteger]:
    """The type of nodes' start and end: uint16 where every string has at most 65535 characters (8 bytes a node with
    the piece id instead of 12: the lattice of all words is the largest array of training), else int32."""
    return np.uint16 if int(lengths.max(initial=0)) <= 0xFFFF else np.int32


def expected_counts(lattice: Lattice, scores: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """E step: each piece's expected count, the sum over strings of count x its posterior (forward-backward).

    `scores` are the pieces' log-probabilities by id (ids without nodes are ignored)."""
    loops, given, new = _loops(lattice)
    longest = int(lattice.lengths.max(initial=0)) + 1
    expected = new(len(scores), float)
    loops.add_expected_counts(*map(given, _columns(lattice)), given(scores), given(freqs.astype(np.float64)), TINY,
                              new(len(scores), float), expected, new(longest, float), new(longest, float))
    return np.asarray(expected, dtype=np.float64)


def viterbi_pieces(lattice: Lattice, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(string, piece) of every node on each string's best path; strings without a path give none."""
    loops, given, new = _loops(lattice)
    room, longest = int(lattice.lengths.sum()), int(lattice.lengths.max(initial=0)) + 1
    owners, used = new(room, int), new(room, int)
    count = loops.viterbi_paths(*map(given, _columns(lattice)), given(scores), owners, used, new(longest, float),
                                new(longest, int))
    return np.asarray(owners[:count], dtype=np.int64), np.asarray(used[:count], dtype=np.int64)


def _loops(lattice: Lattice) -> tuple[ModuleType, Callable[[np.ndarray], Any], Callable[[int, type], Any]]:
    """Where `unigram_paths`' loops run on `lattice` (see `KERNEL_MIN_CHARS`): compiled over arrays, or as Python
    over lists. Returns (the module that runs them, how an array is given to them, a maker of zeroed buffers)."""
    if runs_kernel(int(lattice.lengths.sum()), KERNEL_MIN_CHARS):
        from . import lattice_kernels as unigram_lattice_kernels

        return unigram_lattice_kernels, lambda array: array, lambda size, kind: np.zeros(size, dtype=kind)
    return unigram_paths, np.ndarray.tolist, lambda size, kind: [kind()] * size


def _columns(lattice: Lattice) -> tuple[np.ndarray, ...]:
    return lattice.lengths, lattice.offsets, lattice.start, lattice.end, lattice.piece


def _code_points(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The strings' code points back to back (int32) and where each starts (int64, one more entry)."""
    codes = np.frombuffer("".join(strings).encode("utf-32-le"), dtype=np.uint32).astype(np.int32)
    starts = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in strings], out=starts[1:])
    return codes, starts


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
