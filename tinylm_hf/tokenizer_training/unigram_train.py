"""Unigram training: seed pieces, EM with forward-backward, pruning by loss (sentencepiece's recipe).

1. Words: `▁`-prefixed pieces of each line with counts (`split_metaspace_words`).
2. Seeds: every character, plus every valid substring (`is_valid_piece`, at most
   `max_piece_length` characters) found at least twice in the corpus, scored
   count x length; log-probabilities from those scores.
3. EM: the E step runs forward-backward on each word's lattice (all pieces that match inside it)
   and adds each piece's expected count times the word's count; the M step drops pieces expected
   fewer than 0.5 times and re-scores with sentencepiece's Bayesian update
   `digamma(count) - digamma(total)`.
4. Pruning: each piece's loss is the likelihood lost if its occurrences on the Viterbi paths were
   replaced by its own second-best segmentation; the lowest-loss pieces go, keeping
   `max(shrinking_factor x size, 1.1 x vocab_size)` pieces; then EM again, until the size fits.
5. Final: every character, then the best-scored pieces up to `vocab_size`, sorted by score;
   `<unk>`, `<s>`, `</s>` and the special tokens come first with score 0.

Single characters are never dropped (so every word keeps a path). Seeds and lattices come from
`unigram_seeds` (every substring named with numpy); the lattices of all words are numpy arrays
processed one end position at a time, so each EM pass is a few array operations. The words are
split into one lattice per CPU, walked in threads: numpy releases the GIL inside its array loops.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..tokenization.jit import resolve_workers
from ..tokenization.unigram import UnigramTokenizer
from .metaspace_train import (
    check_vocab_size,
    check_word_counts,
    count_characters,
    count_metaspace_words,
    meta_pieces,
    read_line_chunks,
    require_words,
    train_metaspace_tokenizer,
)
from .piece_rules import MAX_PIECE_LENGTH, UNMERGEABLE_CHARS
from .unigram_seeds import piece_nodes, seed_pieces, word_nodes
from .word_splitting import WordCounts

# Most seed pieces kept (sentencepiece's seed_sentencepiece_size).
SEED_SIZE = 1_000_000
# The M step drops pieces expected fewer times than this (sentencepiece's kExpectedFrequencyThreshold).
MIN_EXPECTED = 0.5
# EM stops pruning once the size is at most this factor times vocab_size (sentencepiece's 1.1).
OVERSIZE = 1.1
# Words per lattice part at least: below this one thread does the whole E step.
MIN_WORDS_PER_PART = 5_000
# sentencepiece's default, kept by `train_unigram*` (llama.cpp's Unigram tokenizer has no byte fallback either).
UNIGRAM_BYTE_FALLBACK = False
# The Unigram family's default (`train_tokenizer`, `tinylm train-tokenizer`): training reads lines, so without
# byte pieces every newline (and any character the text lacked) is <unk>, which a language model cannot
# write. `--no-byte-fallback` gives sentencepiece's default (llama.cpp's `t5` tokenizer, for export-gguf).
UNIGRAM_FAMILY_BYTE_FALLBACK = True


def train_unigram(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    max_piece_length: int = MAX_PIECE_LENGTH,
    shrinking_factor: float = 0.75,
    num_sub_iterations: int = 2,
    progress: bool = True,
    byte_fallback: bool = UNIGRAM_BYTE_FALLBACK,
) -> list[tuple[str, float]]:
    """Train a Unigram model on a UTF-8 text file; return (piece, log-probability) in id order.

    `byte_fallback`: also reserve the 256 `<0x..>` byte pieces (after the special tokens, as
    sentencepiece's `byte_fallback=true`), so characters no piece covers, such as a newline, which
    line-by-line training never sees, encode as bytes instead of `<unk>`.
    """
    counts = count_metaspace_words(read_line_chunks(input_path))
    require_words(counts, f"training file {os.fspath(input_path)!r}")
    return _train(counts, vocab_size, special_tokens, max_piece_length, shrinking_factor, num_sub_iterations,
                  byte_fallback, progress)


def train_unigram_from_iterator(
    iterator: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    max_piece_length: int = MAX_PIECE_LENGTH,
    shrinking_factor: float = 0.75,
    num_sub_iterations: int = 2,
    progress: bool = True,
    byte_fallback: bool = UNIGRAM_BYTE_FALLBACK,
) -> list[tuple[str, float]]:
    """Train on an iterable of strings; memory holds one string plus the counts of distinct words."""
    counts = count_metaspace_words(iterator)
    require_words(counts, "the iterator")
    return _train(counts, vocab_size, special_tokens, max_piece_length, shrinking_factor, num_sub_iterations,
                  byte_fallback, progress)


def train_unigram_from_counts(
    counts: Mapping[str, int],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    max_piece_length: int = MAX_PIECE_LENGTH,
    shrinking_factor: float = 0.75,
    num_sub_iterations: int = 2,
    progress: bool = False,
    byte_fallback: bool = UNIGRAM_BYTE_FALLBACK,
) -> list[tuple[str, float]]:
    """Train on word counts (metaspace words -> count, e.g. summed over shards)."""
    words = check_word_counts(counts)
    require_words(words, "counts")
    return _train(words, vocab_size, special_tokens, max_piece_length, shrinking_factor, num_sub_iterations,
                  byte_fallback, progress)


def train_unigram_tokenizer(counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *,
                            byte_fallback: bool | None = None, progress: bool = False) -> UnigramTokenizer:
    """The Unigram family's trainer: a `UnigramTokenizer` from sentencepiece word counts.

    `byte_fallback` defaults to `UNIGRAM_FAMILY_BYTE_FALLBACK` (on: newlines stay newlines).
    """
    fallback = UNIGRAM_FAMILY_BYTE_FALLBACK if byte_fallback is None else byte_fallback
    return train_metaspace_tokenizer(UnigramTokenizer, train_unigram_from_counts, counts.counts, vocab_size,
                                     special_tokens, byte_fallback=fallback, progress=progress)


def _check_options(max_piece_length: int, shrinking_factor: float, num_sub_iterations: int) -> None:
    if not isinstance(max_piece_length, int) or not 1 <= max_piece_length <= 512:
        raise ValueError(f"max_piece_length must be an int in [1, 512], got {max_piece_length!r}")
    if not isinstance(shrinking_factor, (int, float)) or not 0.0 < shrinking_factor < 1.0:
        raise ValueError(f"shrinking_factor must be in (0, 1), got {shrinking_factor!r}")
    if not isinstance(num_sub_iterations, int) or num_sub_iterations < 1:
        raise ValueError(f"num_sub_iterations must be a positive int, got {num_sub_iterations!r}")


def _train(
    counts: Mapping[str, int],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    max_piece_length: int,
    shrinking_factor: float,
    num_sub_iterations: int,
    byte_fallback: bool,
    progress: bool,
) -> list[tuple[str, float]]:
    _check_options(max_piece_length, shrinking_factor, num_sub_iterations)
    fixed = meta_pieces(special_tokens, byte_fallback=byte_fallback)
    chars = count_characters(counts)
    check_vocab_size(vocab_size, len(fixed), len(chars))
    words = _clean_words(counts)
    pieces, scores, subs, piece_where, piece_sizes = seed_pieces(words, chars, max_piece_length, SEED_SIZE)
    is_char = piece_sizes == 1
    freqs = np.array(list(words.values()), dtype=np.float64)
    parts = max(1, min(resolve_workers(None), len(freqs) // MIN_WORDS_PER_PART))
    with ThreadPoolExecutor(parts) as threads:
        word_lattice = _Lattices(np.diff(subs.word_start), *word_nodes(subs), freqs, parts, threads)
        piece_lattice = _Lattice.from_nodes(piece_sizes, *piece_nodes(subs, piece_where, piece_sizes))
        del subs  # the joined text and its names: only the lattices are needed from here
        return _train_em(word_lattice, piece_lattice, pieces, scores, is_char, fixed, vocab_size,
                         shrinking_factor, num_sub_iterations, progress)


def _train_em(
    word_lattice: _Lattices,
    piece_lattice: _Lattice,
    pieces: list[str],
    scores: np.ndarray,
    is_char: np.ndarray,
    fixed: list[str],
    vocab_size: int,
    shrinking_factor: float,
    num_sub_iterations: int,
    progress: bool,
) -> list[tuple[str, float]]:
    """EM rounds and pruning from the seeds until the size fits, then the final pieces (steps 3-5)."""
    target = vocab_size - len(fixed)
    desired = int(vocab_size * OVERSIZE)
    alive = np.arange(len(pieces))  # indices of surviving pieces into the seed list
    round_number = 0
    while True:
        for _ in range(num_sub_iterations):
            expected = word_lattice.expected_counts(scores)
            keep = (expected >= MIN_EXPECTED) | is_char[alive]
            scores = _digamma_scores(np.maximum(expected[keep], MIN_EXPECTED))
            alive = alive[keep]
            word_lattice.keep(keep)
            piece_lattice.keep(keep, strings_too=True)
        round_number += 1
        if progress:
            print(f"unigram EM round {round_number}: {len(alive)} pieces")
        if len(alive) <= desired:
            break
        keep = _prune(word_lattice, piece_lattice, scores, is_char[alive], desired, shrinking_factor)
        scores, alive = scores[keep], alive[keep]
        word_lattice.keep(keep)
        piece_lattice.keep(keep, strings_too=True)
    final = _finalize([pieces[i] for i in alive], scores, is_char[alive], target)
    if len(final) < target:
        raise ValueError(
            f"vocab_size={vocab_size} is too large for this corpus: training kept only "
            f"{len(fixed) + len(final)} pieces (sentencepiece fails the same way); lower vocab_size"
        )
    return [(p, 0.0) for p in fixed] + final


def _clean_words(counts: Mapping[str, int]) -> Counter[str]:
    """Words with the characters no piece may hold (tab, ...) cut out: they end a word there."""
    if not any(c in word for word in counts for c in UNMERGEABLE_CHARS):
        return Counter(counts)
    cleaned: Counter[str] = Counter()
    for word, count in counts.items():
        part = []
        for char in word + "\t":
            if char in UNMERGEABLE_CHARS:
                if part:
                    cleaned["".join(part)] += count
                part = []
            else:
                part.append(char)
    return cleaned


def _digamma_scores(expected: np.ndarray) -> np.ndarray:
    """sentencepiece's M step: digamma(expected) - digamma(sum of expected)."""
    return _digamma(expected) - _digamma(np.array([expected.sum()]))[0]


def _digamma(x: np.ndarray) -> np.ndarray:
    """sentencepiece's Digamma: recurrence up to 7, then the asymptotic series."""
    x = x.astype(np.float64).copy()
    result = np.zeros_like(x)
    for _ in range(7):
        small = x < 7
        result[small] -= 1.0 / x[small]
        x[small] += 1.0
    x -= 0.5
    xx = 1.0 / x
    xx2 = xx * xx
    xx4 = xx2 * xx2
    return result + np.log(x) + xx2 / 24.0 - 7.0 / 960.0 * xx4 + 31.0 / 8064.0 * xx4 * xx2 - 127.0 / 30720.0 * xx4 * xx4


def _prune(
    word_lattice: _Lattices,
    piece_lattice: _Lattice,
    scores: np.ndarray,
    is_char: np.ndarray,
    desired: int,
    shrinking_factor: float,
) -> np.ndarray:
    """Boolean mask of the pieces to keep (sentencepiece's PruneSentencePieces)."""
    size = len(scores)
    # Viterbi counts on the corpus.
    owners, used = word_lattice.viterbi_pieces(scores)
    freq = np.bincount(used, weights=word_lattice.freqs[owners], minlength=size)
    total = freq.sum()
    # Each piece's best segmentation without itself (its alternative).
    alt_owner, alt_piece = piece_lattice.viterbi_pieces(scores)
    alt_score = np.bincount(alt_owner, weights=scores[alt_piece], minlength=size)
    alt_len = np.bincount(alt_owner, minlength=size)
    has_alt = alt_len > 0
    # A piece whose own split scores higher is never on a Viterbi path: it can go.
    removable = has_alt & (alt_score > scores)
    with np.errstate(divide="ignore", invalid="ignore"):  # pieces with freq 0 are never candidates
        logsum_alt = np.log(total + freq * (alt_len - 1))
        alt_gain = np.bincount(alt_owner, weights=np.log(freq[alt_piece] + freq[alt_owner]), minlength=size)
        logprob_alt = alt_gain - alt_len * logsum_alt
        loss = freq / total * (np.log(freq) - math.log(total) - logprob_alt)
    keep = is_char | (~has_alt & (freq > 0))
    candidates = np.flatnonzero(has_alt & ~removable & (freq > 0) & ~is_char)
    room = max(desired, int(shrinking_factor * size)) - int(keep.sum())
    if room > 0:
        order = np.lexsort((candidates, -loss[candidates]))
        keep[candidates[order[:room]]] = True
    return keep


def _finalize(pieces: list[str], scores: np.ndarray, is_char: np.ndarray, target: int) -> list[tuple[str, float]]:
    """Every character, then the best-scored pieces up to `target`, all sorted by score (ties by piece)."""
    chosen = [(p, float(s)) for p, s, c in zip(pieces, scores, is_char) if c]
    rest = sorted(((p, float(s)) for p, s, c in zip(pieces, scores, is_char) if not c), key=lambda x: (-x[1], x[0]))
    chosen += rest[: max(0, target - len(chosen))]
    return sorted(chosen, key=lambda item: (-item[1], item[0]))


class _Lattice:
    """The lattices of many strings as flat arrays: node k spans positions start[k]..end[k].

    Positions are global: string s owns offset[s] .. offset[s] + len(s). Nodes are sorted by the
    end position within their string, so a forward pass is one array step per end position.
    """

    def __init__(self, offsets, lengths, start, end, piece, owner, rel_end, backward) -> None:
        self.offsets, self.lengths = offsets, lengths
        self.size = int(offsets[-1] + lengths[-1] + 1) if len(offsets) else 0  # positions in all
        self.start, self.end, self.piece, self.owner, self.rel_end = start, end, piece, owner, rel_end
        self.backward = backward  # nodes by start within their string, last first, then string, end
        self._cached_passes: tuple[list[_Group], list[_Group]] | None = None

    @classmethod
    def from_nodes(cls, lengths: np.ndarray, start: np.ndarray, end: np.ndarray, piece: np.ndarray,
                   owner: np.ndarray) -> _Lattice:
        """Lattices of strings of `lengths` from nodes whose start/end count within their owner string."""
        offsets = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        span = int(lengths.max(initial=0)) + 1
        order = _sort_order(end, owner, start, span, len(lengths))
        owner, piece, start, rel_end = owner[order], piece[order], start[order], end[order]
        backward = _sort_order(span - 1 - start, owner, rel_end, span, len(lengths))
        base = offsets[owner]
        return cls(offsets, lengths, base + start, base + rel_end, piece, owner, rel_end, backward)

    def keep(self, mask: np.ndarray, *, strings_too: bool = False) -> None:
        """Drop the nodes of pieces where `mask` is False and renumber the rest.

        With `strings_too` the strings are the pieces themselves: dropped pieces' lattices go too.
        """
        self._cached_passes = None
        renumber = np.cumsum(mask) - 1
        alive = mask[self.piece]
        if strings_too:
            alive &= mask[self.owner]
            self.offsets, self.lengths = self.offsets[mask], self.lengths[mask]
        self.backward = (np.cumsum(alive) - 1)[self.backward[alive[self.backward]]]
        self.start, self.end, self.owner, self.rel_end = (a[alive] for a in (self.start, self.end, self.owner, self.rel_end))
        self.piece = renumber[self.piece[alive]]
        if strings_too:
            self.owner = renumber[self.owner]

    def _passes(self) -> tuple[list[_Group], list[_Group]]:
        """The forward and backward passes' groups (cached until `keep` changes the nodes).

        Forward: nodes by end position within their string (one group per end position), landing
        on their end. Backward: by start position, last first, landing on their start.
        """
        if self._cached_passes is None:
            backward = self.backward
            start = self.start[backward]
            self._cached_passes = (
                _groups(np.arange(len(self.rel_end)), self.rel_end, self.end),
                _groups(backward, start - self.offsets[self.owner[backward]], start),
            )
        return self._cached_passes

    def expected_counts(self, scores: np.ndarray, freqs: np.ndarray) -> np.ndarray:
        """E step: sum over strings of count x posterior probability of each piece (forward-backward)."""
        forward, backward = self._passes()
        node_score = scores[self.piece]
        alpha = np.full(self.size, -np.inf)
        alpha[self.offsets] = 0.0
        for group in forward:
            nodes = group.nodes
            group.logsumexp_into(alpha, alpha[self.start[nodes]] + node_score[nodes])
        beta = np.full(self.size, -np.inf)
        ends = self.offsets + self.lengths
        beta[ends] = 0.0
        for group in backward:
            nodes = group.nodes
            group.logsumexp_into(beta, beta[self.end[nodes]] + node_score[nodes])
        z = alpha[ends]
        posterior = np.exp(alpha[self.start] + node_score + beta[self.end] - z[self.owner])
        return np.bincount(self.piece, weights=posterior * freqs[self.owner], minlength=len(scores))

    def viterbi_pieces(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(owner string, piece) of every node on each string's best path.

        Ties keep the path whose last piece starts earliest, as sentencepiece's Viterbi does.
        Strings without a path (a piece's lattice without the piece itself) give no nodes.
        """
        node_score = scores[self.piece]
        best = np.full(self.size, -np.inf)
        best[self.offsets] = 0.0
        back = np.full(self.size, -1)  # position -> node index of the best path ending there
        for group in self._passes()[0]:
            nodes = group.nodes
            values = best[self.start[nodes]] + node_score[nodes]
            # Nodes are sorted by (end, start): the first maximum of each end keeps the earliest start.
            peak = np.maximum.reduceat(values, group.starts)
            is_max = (values == np.repeat(peak, group.counts)) & np.isfinite(values)
            first = np.minimum.reduceat(np.where(is_max, np.arange(len(values)), len(values)), group.starts)
            found = first < len(values)
            best[group.targets[found]] = values[first[found]]
            back[group.targets[found]] = nodes[first[found]]
        owners, used = [], []
        position = self.offsets + self.lengths
        owner = np.arange(len(self.offsets))
        node = back[position]
        while True:
            live = node >= 0
            node, owner = node[live], owner[live]
            if not len(node):
                break
            owners.append(owner)
            used.append(self.piece[node])
            node = back[self.start[node]]
        if not owners:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(owners), np.concatenate(used)


class _Lattices:
    """The words' lattices in `parts` pieces (consecutive words), walked in threads; the methods of
    `_Lattice` over all words, with `freqs` (per word) kept here."""

    def __init__(self, lengths: np.ndarray, start: np.ndarray, end: np.ndarray, piece: np.ndarray,
                 owner: np.ndarray, freqs: np.ndarray, parts: int, threads: ThreadPoolExecutor) -> None:
        self.freqs, self.threads = freqs, threads
        self.bounds = np.linspace(0, len(lengths), parts + 1).astype(np.int64)  # word ranges
        self.parts = []
        for first, last in zip(self.bounds[:-1], self.bounds[1:]):
            mine = (owner >= first) & (owner < last)
            self.parts.append(_Lattice.from_nodes(lengths[first:last], start[mine], end[mine], piece[mine],
                                                  owner[mine] - first))

    def _map(self, fn, *args) -> list:
        return list(self.threads.map(fn, *args))

    def expected_counts(self, scores: np.ndarray) -> np.ndarray:
        """E step over all words (see `_Lattice.expected_counts`)."""
        freqs = [self.freqs[first:last] for first, last in zip(self.bounds[:-1], self.bounds[1:])]
        return sum(self._map(lambda part, f: part.expected_counts(scores, f), self.parts, freqs))

    def viterbi_pieces(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(word, piece) of every node on each word's best path (see `_Lattice.viterbi_pieces`)."""
        found = self._map(lambda part: part.viterbi_pieces(scores), self.parts)
        owners = np.concatenate([owner + first for (owner, _), first in zip(found, self.bounds)])
        return owners, np.concatenate([used for _, used in found])

    def keep(self, mask: np.ndarray) -> None:
        """Drop the nodes of pieces where `mask` is False and renumber the rest."""
        self._map(lambda part: part.keep(mask), self.parts)


def _sort_order(first: np.ndarray, second: np.ndarray, third: np.ndarray, span: int, strings: int) -> np.ndarray:
    """Indices sorting by (first, second, third); first and third < span, second < strings.

    One argsort of a combined int64 key where it fits (much faster than a three-key lexsort).
    """
    if span * span * strings >= 1 << 62:
        return np.lexsort((third, second, first))
    return np.argsort((first * strings + second) * span + third)


class _Group:
    """Nodes processed together in a pass: `nodes` (indices), runs landing on one position each.

    The runs start at `starts` (offsets into `nodes`), hold `counts` nodes and land on `targets`.
    """

    __slots__ = ("nodes", "starts", "counts", "targets")

    def __init__(self, nodes: np.ndarray, landing: np.ndarray) -> None:
        first = np.concatenate([[True], landing[1:] != landing[:-1]])
        self.nodes, self.starts = nodes, np.flatnonzero(first)
        self.counts = np.diff(np.append(self.starts, len(nodes)))
        self.targets = landing[self.starts]

    def logsumexp_into(self, target: np.ndarray, values: np.ndarray) -> None:
        """target[p] = logsumexp of the values landing on p, for each run."""
        peak = np.maximum.reduceat(values, self.starts)
        finite_peak = np.where(np.isfinite(peak), peak, 0.0)
        sums = np.add.reduceat(np.exp(values - np.repeat(finite_peak, self.counts)), self.starts)
        with np.errstate(divide="ignore"):
            target[self.targets] = finite_peak + np.log(sums)


def _groups(order: np.ndarray, key: np.ndarray, landing: np.ndarray) -> list[_Group]:
    """Split nodes taken in `order` (key sorted along it) into groups of equal key."""
    bounds = np.flatnonzero(np.diff(key)) + 1
    edges = np.concatenate([[0], bounds, [len(order)]]).tolist()
    return [_Group(order[lo:hi], landing[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
