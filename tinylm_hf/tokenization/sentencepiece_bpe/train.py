"""SentencePiece BPE training: sentencepiece's `bpe_model_trainer.cc` rules on word counts.

Rules (read from sentencepiece's source and checked against its trainer):
1. Words are `▁`-prefixed pieces of each line (`split_metaspace_words`), deduplicated with counts.
2. Symbols start as code points. Each step joins the most frequent adjacent pair; ties go to the
   shorter joined piece (in characters), then to the smaller joined piece as UTF-8 bytes.
3. A pair whose joined piece breaks sentencepiece's piece rules (`is_valid_piece`: `▁` only first,
   one Unicode script, at most 16 characters) is never counted; a pair whose joined piece already
   exists (`aa`+`a` after `a`+`aa`) is dropped, not merged.
4. Ids: `<unk>`, `<s>`, `</s>`, special tokens, 256 byte pieces (byte_fallback), merged pieces in
   merge order (score -i for the i-th), then every character, most frequent first (scores go on
   falling). Fixed pieces score 0.

The merge loop is `bpe.merges.learn_merges` (a compiled kernel where numba is installed).

Known difference: sentencepiece picks each step's best pair among an "active" subset (the top 5%,
at least 1000, refreshed every 100 merges); this trainer takes the exact best over all pairs. The
two agree unless that heuristic misses the true best pair (not seen on the bundled corpus).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from .core import SentencePieceBPETokenizer
from ..bpe.merges import learn_merges
from ..metaspace.train import (
    WORDS_PER_SLICE,
    check_vocab_size,
    count_characters,
    metaspace_word_counts,
    meta_pieces,
    train_metaspace_tokenizer,
)
from ..pair_merges import progress_bar
from ..piece_rules import PieceShape, piece_shape
from ..training_source import TrainingSource
from ..word_splitting import WordCounts
from ..families import FAMILIES

# sentencepiece's default for BPE models (Llama 2's tokenizer has it too).
SENTENCEPIECE_BPE_BYTE_FALLBACK = FAMILIES["sentencepiece-bpe"].byte_fallback


def train_sentencepiece_bpe(
    input_path: TrainingSource,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    byte_fallback: bool = SENTENCEPIECE_BPE_BYTE_FALLBACK,
    progress: bool = True,
) -> list[tuple[str, float]]:
    """Train a SentencePiece BPE; return (piece, score) in id order.

    `input_path` is a UTF-8 text file (a `str` or `os.PathLike`), an iterable of strings (e.g. a `datasets`
    column; each string is split into lines, and memory holds one string at a time plus the counts of distinct
    words) or word counts (a `Mapping` of metaspace words -> count, e.g. summed over shards). Equal to
    `sentencepiece`'s BPE trainer with identity normalisation, character_coverage=1.0,
    remove_extra_whitespaces=False and `control_symbols=special_tokens` (see the module docstring).

    >>> pieces = train_sentencepiece_bpe({"▁aab": 2, "▁ab": 1}, 7, byte_fallback=False, progress=False)
    >>> pieces
    [('<unk>', 0.0), ('<s>', 0.0), ('</s>', 0.0), ('ab', -0.0), ('a', -1.0), ('b', -2.0), ('▁', -3.0)]
    """
    counts = metaspace_word_counts(input_path)
    return _train(counts, vocab_size, special_tokens, byte_fallback=byte_fallback, progress=progress)


def train_sentencepiece_bpe_tokenizer(
    counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *, byte_fallback: bool | None = None,
    progress: bool = False,
) -> SentencePieceBPETokenizer:
    """The SentencePiece BPE family's trainer: a `SentencePieceBPETokenizer` from sentencepiece word counts.

    `byte_fallback` defaults to `SENTENCEPIECE_BPE_BYTE_FALLBACK`.
    """
    fallback = SENTENCEPIECE_BPE_BYTE_FALLBACK if byte_fallback is None else byte_fallback
    return train_metaspace_tokenizer(SentencePieceBPETokenizer, train_sentencepiece_bpe, counts.counts,
                                     vocab_size, special_tokens, byte_fallback=fallback, progress=progress)


def _train(
    counts: Counter[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    byte_fallback: bool,
    progress: bool,
) -> list[tuple[str, float]]:
    """The pieces learned from `counts`, a Counter of this module's own making: it is emptied once the words are
    symbol arrays, so that its strings are freed before the merge loop's arrays are made."""
    # 1. Fixed pieces, then the alphabet: every character, most frequent first.
    fixed = meta_pieces(special_tokens, byte_fallback=byte_fallback)
    chars = [c for c, _ in count_characters(counts)]
    check_vocab_size(vocab_size, len(fixed), len(chars))
    num_merges = vocab_size - len(fixed) - len(chars)
    # 3. Merges (`bpe.merges.learn_merges` under sentencepiece's rules). Id i is chars[i]; id len(chars) stands
    # for every character outside the alphabet and never joins.
    token_bytes = [c.encode("utf-8") for c in chars] + [b""]
    shapes: list[PieceShape | None] = [piece_shape(c) for c in chars] + [None]
    bar = progress_bar(num_merges, progress, "SentencePiece BPE merges")
    symbols, lengths, freqs = _symbol_words(counts, chars)
    counts.clear()
    pairs = learn_merges(symbols, lengths, freqs, token_bytes, num_merges, shapes)
    if bar is not None:
        bar.update(len(pairs))
        bar.close()
    if len(pairs) < num_merges:
        raise ValueError(
            f"vocab_size={vocab_size} is too large for this corpus: only {len(fixed) + len(chars) + len(pairs)} "
            "pieces can be made (sentencepiece fails the same way); lower vocab_size"
        )
    # 4. Scores: fixed pieces 0, then -i for the i-th merged piece and on through the characters.
    learned = [piece.decode("utf-8") for piece in token_bytes[len(chars) + 1:]] + chars
    return [(p, 0.0) for p in fixed] + [(p, -float(i)) for i, p in enumerate(learned)]


def _symbol_words(counts: Mapping[str, int], chars: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The words as symbol ids (id i: chars[i]) back to back, their lengths and counts; single symbols hold no pair.

    Characters outside the alphabet (tab, ...) share one id, `len(chars)`, that never pairs.
    """
    # 2. Symbols: character ids. Words as id lists, deduplicated with counts; characters turned into ids a slice of
    # words at a time (arrays over all the characters at once would take some 20 bytes a character).
    ids = np.full(sys.maxunicode + 1, len(chars), dtype=np.int32)  # code point -> symbol id
    ids[np.array([ord(c) for c in chars], dtype=np.int64)] = np.arange(len(chars), dtype=np.int32)
    long_words = [word for word in counts if len(word) > 1]
    lengths = np.fromiter(map(len, long_words), dtype=np.int64, count=len(long_words))
    symbols = np.empty(int(lengths.sum()), dtype=np.int32)
    done = 0
    for first in range(0, len(long_words), WORDS_PER_SLICE):
        codes = np.frombuffer("".join(long_words[first: first + WORDS_PER_SLICE]).encode("utf-32-le"), dtype=np.uint32)
        symbols[done: done + len(codes)] = ids[codes]
        done += len(codes)
    return symbols, lengths, np.fromiter((counts[w] for w in long_words), dtype=np.int64, count=len(long_words))
