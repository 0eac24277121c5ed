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

Single characters are never dropped (so every word keeps a path). Seeds come from `unigram_seeds`
(every substring named with numpy); the lattices, forward-backward and Viterbi from `unigram_lattice`
(plain loops over flat arrays, compiled by numba where it is installed).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from .core import UnigramTokenizer
from ..metaspace.train import (
    check_vocab_size,
    count_characters,
    metaspace_word_counts,
    meta_pieces,
    train_metaspace_tokenizer,
)
from ..piece_rules import MAX_PIECE_LENGTH, UNMERGEABLE_CHARS
from .lattice import Lattice, build_lattice, expected_counts, viterbi_pieces
from .seeds import seed_pieces
from ..training_source import TrainingSource
from ..word_splitting import WordCounts
from ..families import FAMILIES

# Most seed pieces kept (sentencepiece's seed_sentencepiece_size).
SEED_SIZE = 1_000_000
# The M step drops pieces expected fewer times than this (sentencepiece's kExpectedFrequencyThreshold).
MIN_EXPECTED = 0.5
# EM stops pruning once the size is at most this factor times vocab_size (sentencepiece's 1.1).
OVERSIZE = 1.1
# sentencepiece's default, kept by `train_unigram*` (llama.cpp's Unigram tokenizer has no byte fallback either).
UNIGRAM_BYTE_FALLBACK = False
# The Unigram family's default (`train_tokenizer`, `tinylm train-tokenizer`): training reads lines, so without
# byte pieces every newline (and any character the text lacked) is <unk>, which a language model cannot
# write. `--no-byte-fallback` gives sentencepiece's default (llama.cpp's `t5` tokenizer, for export-gguf).
UNIGRAM_FAMILY_BYTE_FALLBACK = FAMILIES["unigram"].byte_fallback
_UNMERGEABLE = re.compile("[" + re.escape("".join(sorted(UNMERGEABLE_CHARS))) + "]")


def train_unigram(
    input_path: TrainingSource,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    max_piece_length: int = MAX_PIECE_LENGTH,
    shrinking_factor: float = 0.75,
    num_sub_iterations: int = 2,
    progress: bool = True,
    byte_fallback: bool = UNIGRAM_BYTE_FALLBACK,
) -> list[tuple[str, float]]:
    """Train a Unigram model; return (piece, log-probability) in id order.

    `input_path` is a UTF-8 text file (a `str` or `os.PathLike`), an iterable of strings (memory holds one string
    plus the counts of distinct words) or word counts (a `Mapping` of metaspace words -> count, e.g. summed over
    shards).

    `byte_fallback`: also reserve the 256 `<0x..>` byte pieces (after the special tokens, as
    sentencepiece's `byte_fallback=true`), so characters no piece covers, such as a newline, which
    line-by-line training never sees, encode as bytes instead of `<unk>`.
    """
    counts = metaspace_word_counts(input_path)
    return _train(counts, vocab_size, special_tokens, max_piece_length, shrinking_factor, num_sub_iterations,
                  byte_fallback, progress)


def train_unigram_tokenizer(counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *,
                            byte_fallback: bool | None = None, progress: bool = False) -> UnigramTokenizer:
    """The Unigram family's trainer: a `UnigramTokenizer` from sentencepiece word counts.

    `byte_fallback` defaults to `UNIGRAM_FAMILY_BYTE_FALLBACK` (on: newlines stay newlines).
    """
    fallback = UNIGRAM_FAMILY_BYTE_FALLBACK if byte_fallback is None else byte_fallback
    return train_metaspace_tokenizer(UnigramTokenizer, train_unigram, counts.counts, vocab_size,
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
    """Steps 2-5: the seeds, then EM rounds and pruning until the size fits, then the final pieces.

    The words' lattice names pieces by seed index; `alive` lists the survivors.
    """
    _check_options(max_piece_length, shrinking_factor, num_sub_iterations)
    fixed = meta_pieces(special_tokens, byte_fallback=byte_fallback)
    chars = count_characters(counts)
    check_vocab_size(vocab_size, len(fixed), len(chars))
    # In one fixed order: the E step's sums then do not depend on how the counts were gathered (pieces whose
    # expected counts are equal in exact arithmetic keep one order, shards or not).
    words = dict(sorted(_clean_words(counts).items()))
    pieces, scores, is_char = seed_pieces(words, chars, max_piece_length, SEED_SIZE)
    freqs = np.array(list(words.values()), dtype=np.float64)
    lattice = build_lattice(list(words), pieces, whole=True)
    target = vocab_size - len(fixed)
    desired = int(vocab_size * OVERSIZE)
    alive = np.arange(len(pieces))  # indices of surviving pieces into the seed list
    for round_number in itertools.count(1):
        for _ in range(num_sub_iterations):
            expected = expected_counts(lattice, _by_seed(scores, alive, len(pieces)), freqs)[alive]
            keep = (expected >= MIN_EXPECTED) | is_char[alive]
            scores = _digamma_scores(np.maximum(expected[keep], MIN_EXPECTED))
            alive = alive[keep]
            lattice.keep(_by_seed(True, alive, len(pieces)))
        if progress:
            print(f"unigram EM round {round_number}: {len(alive)} pieces")
        if len(alive) <= desired:
            break
        keep = _prune(lattice, freqs, [pieces[i] for i in alive], alive, scores, is_char[alive], desired,
                      shrinking_factor)
        scores, alive = scores[keep], alive[keep]
        lattice.keep(_by_seed(True, alive, len(pieces)))
    final = _finalize([pieces[i] for i in alive], scores, is_char[alive], target)
    if len(final) < target:
        raise ValueError(
            f"vocab_size={vocab_size} is too large for this corpus: training kept only "
            f"{len(fixed) + len(final)} pieces (sentencepiece fails the same way); lower vocab_size"
        )
    return [(p, 0.0) for p in fixed] + final


def _by_seed(values: np.ndarray | bool, alive: np.ndarray, size: int) -> np.ndarray:
    """`values` of the surviving pieces spread over all `size` seeds (zero/False for the others)."""
    spread = np.zeros(size, dtype=np.asarray(values).dtype)
    spread[alive] = values
    return spread


def _clean_words(counts: Mapping[str, int]) -> Counter[str]:
    """Words with the characters no piece may hold (tab, ...) cut out: they end a word there."""
    if not any(c in word for word in counts for c in UNMERGEABLE_CHARS):
        return Counter(counts)
    cleaned: Counter[str] = Counter()
    for word, count in counts.items():
        for part in _UNMERGEABLE.split(word):
            if part:
                cleaned[part] += count
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
    lattice: Lattice,
    freqs: np.ndarray,
    survivors: list[str],
    alive: np.ndarray,
    scores: np.ndarray,
    is_char: np.ndarray,
    desired: int,
    shrinking_factor: float,
) -> np.ndarray:
    """Boolean mask of the `survivors` (seeds `alive`) to keep (sentencepiece's PruneSentencePieces)."""
    size = len(scores)
    index = np.zeros(int(alive.max(initial=0)) + 1, dtype=np.int64)  # seed index -> index among the survivors
    index[alive] = np.arange(size)
    # Viterbi counts on the corpus.
    owners, used = viterbi_pieces(lattice, _by_seed(scores, alive, len(index)))
    freq = np.bincount(index[used], weights=freqs[owners], minlength=size)
    total = freq.sum()
    # Each piece's best segmentation without itself (its alternative).
    alt_owner, alt_piece = viterbi_pieces(build_lattice(survivors, survivors, whole=False), scores)
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
