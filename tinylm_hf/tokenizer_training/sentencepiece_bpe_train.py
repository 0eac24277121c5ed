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

Known difference: sentencepiece picks each step's best pair among an "active" subset (the top 5%,
at least 1000, refreshed every 100 merges); this trainer takes the exact best over all pairs. The
two agree unless that heuristic misses the true best pair (not seen on the bundled corpus).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..tokenization.sentencepiece_bpe import SentencePieceBPETokenizer
from .flat_merges import FlatWords
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
from .pair_merges import PAIR_MASK, PAIR_SHIFT, progress_bar
from .piece_rules import join_shapes, piece_shape
from .word_splitting import WordCounts

# sentencepiece's default for BPE models (Llama 2's tokenizer has it too).
SENTENCEPIECE_BPE_BYTE_FALLBACK = True


def train_sentencepiece_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    byte_fallback: bool = SENTENCEPIECE_BPE_BYTE_FALLBACK,
    progress: bool = True,
) -> list[tuple[str, float]]:
    """Train a SentencePiece BPE on a UTF-8 text file; return (piece, score) in id order.

    Equal to `sentencepiece`'s BPE trainer with identity normalisation, character_coverage=1.0,
    remove_extra_whitespaces=False and `control_symbols=special_tokens` (see the module docstring).
    """
    counts = count_metaspace_words(read_line_chunks(input_path))
    require_words(counts, f"training file {os.fspath(input_path)!r}")
    return _train(counts, vocab_size, special_tokens, byte_fallback=byte_fallback, progress=progress)


def train_sentencepiece_bpe_from_iterator(
    iterator: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    byte_fallback: bool = SENTENCEPIECE_BPE_BYTE_FALLBACK,
    progress: bool = True,
) -> list[tuple[str, float]]:
    """Train on an iterable of strings (e.g. a `datasets` column); each string is split into lines.

    Memory holds one string at a time plus the counts of distinct words.
    """
    counts = count_metaspace_words(iterator)
    require_words(counts, "the iterator")
    return _train(counts, vocab_size, special_tokens, byte_fallback=byte_fallback, progress=progress)


def train_sentencepiece_bpe_from_counts(
    counts: Mapping[str, int],
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    byte_fallback: bool = SENTENCEPIECE_BPE_BYTE_FALLBACK,
    progress: bool = False,
) -> list[tuple[str, float]]:
    """Train on word counts (metaspace words -> count, e.g. summed over shards).

    >>> pieces = train_sentencepiece_bpe_from_counts({"▁aab": 2, "▁ab": 1}, 7, byte_fallback=False)
    >>> pieces
    [('<unk>', 0.0), ('<s>', 0.0), ('</s>', 0.0), ('ab', -0.0), ('a', -1.0), ('b', -2.0), ('▁', -3.0)]
    """
    words = check_word_counts(counts)
    require_words(words, "counts")
    return _train(words, vocab_size, special_tokens, byte_fallback=byte_fallback, progress=progress)


def train_sentencepiece_bpe_tokenizer(
    counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *, byte_fallback: bool | None = None,
    progress: bool = False,
) -> SentencePieceBPETokenizer:
    """The SentencePiece BPE family's trainer: a `SentencePieceBPETokenizer` from sentencepiece word counts.

    `byte_fallback` defaults to `SENTENCEPIECE_BPE_BYTE_FALLBACK`.
    """
    fallback = SENTENCEPIECE_BPE_BYTE_FALLBACK if byte_fallback is None else byte_fallback
    return train_metaspace_tokenizer(SentencePieceBPETokenizer, train_sentencepiece_bpe_from_counts, counts.counts,
                                     vocab_size, special_tokens, byte_fallback=fallback, progress=progress)


def _train(
    counts: Mapping[str, int],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    byte_fallback: bool,
    progress: bool,
) -> list[tuple[str, float]]:
    # 1. Fixed pieces, then the alphabet: every character, most frequent first.
    fixed = meta_pieces(special_tokens, byte_fallback=byte_fallback)
    chars = [c for c, _ in count_characters(counts)]
    check_vocab_size(vocab_size, len(fixed), len(chars))
    num_merges = vocab_size - len(fixed) - len(chars)
    merged = _learn_pieces(counts, chars, num_merges, progress)
    if len(merged) < num_merges:
        raise ValueError(
            f"vocab_size={vocab_size} is too large for this corpus: only {len(fixed) + len(chars) + len(merged)} "
            "pieces can be made (sentencepiece fails the same way); lower vocab_size"
        )
    # 4. Scores: fixed pieces 0, then -i for the i-th merged piece and on through the characters.
    learned = merged + chars
    return [(p, 0.0) for p in fixed] + [(p, -float(i)) for i, p in enumerate(learned)]


def _learn_pieces(counts: Mapping[str, int], chars: list[str], num_merges: int, progress: bool) -> list[str]:
    """Merged pieces in merge order (at most `num_merges`)."""
    flat = _flat_words(counts, chars)
    pieces = _Pieces(chars)
    queue = _PairQueue(flat.pair_counts, pieces.key_of)
    merged: list[str] = []
    made = set(chars)
    bar = progress_bar(num_merges, progress, "SentencePiece BPE merges")
    while len(merged) < num_merges:
        popped = queue.pop()
        if popped is None:
            break
        pair, key_bytes = popped
        piece = key_bytes.decode("utf-8")
        if piece in made:
            del flat.pair_counts[pair]  # sentencepiece drops a pair whose piece already exists
            continue
        made.add(piece)
        merged.append(piece)
        new_id = pieces.add(pair, key_bytes)
        new_pairs, _ = flat.merge(pair, new_id)
        for new_pair in new_pairs:
            queue.offer(new_pair)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return merged


def _flat_words(counts: Mapping[str, int], chars: list[str]) -> FlatWords:
    """The words as symbol ids (id i: chars[i]) with their counts; single symbols hold no pair.

    Characters outside the alphabet (tab, ...) share one id, `len(chars)`, that never pairs.
    """
    # 2. Symbols: character ids. Words as id lists, deduplicated with counts.
    outside = len(chars)
    long_words = [word for word in counts if len(word) > 1]
    codes = np.frombuffer("".join(long_words).encode("utf-32-le"), dtype=np.uint32)
    alphabet = np.array([ord(c) for c in chars], dtype=np.uint32)
    by_code = np.argsort(alphabet)
    found = np.minimum(np.searchsorted(alphabet, codes, sorter=by_code), len(chars) - 1)
    symbols = np.where(alphabet[by_code[found]] == codes, by_code[found], outside)
    lengths = np.fromiter(map(len, long_words), dtype=np.int64, count=len(long_words))
    return FlatWords(symbols, lengths, np.array([counts[w] for w in long_words], dtype=np.int64))


class _Pieces:
    """The pieces by id: the characters, one id for characters outside the alphabet, then merged pieces."""

    def __init__(self, chars: list[str]) -> None:
        self.utf8 = [c.encode() for c in chars] + [b""]  # id -> piece as UTF-8
        self.shapes = [piece_shape(c) for c in chars] + [None]  # id -> shape (None: never pairs)
        self._keys: dict[int, tuple[int, bytes] | None] = {}  # pair -> (length, UTF-8), None if invalid

    def key_of(self, pair: int) -> tuple[int, bytes] | None:
        """(characters, UTF-8) of the piece a pair would make, or None when sentencepiece's rules forbid it."""
        key = self._keys.get(pair, False)
        if key is False:
            left, right = self.shapes[pair >> PAIR_SHIFT], self.shapes[pair & PAIR_MASK]
            shape = join_shapes(left, right) if left is not None and right is not None else None
            key = None if shape is None else (shape[0], self.utf8[pair >> PAIR_SHIFT] + self.utf8[pair & PAIR_MASK])
            self._keys[pair] = key
        return key

    def add(self, pair: int, utf8: bytes) -> int:
        """The id of the piece `pair` makes (UTF-8 `utf8`), added."""
        self.utf8.append(utf8)
        self.shapes.append(join_shapes(self.shapes[pair >> PAIR_SHIFT], self.shapes[pair & PAIR_MASK]))
        return len(self.utf8) - 1


class _PairQueue:
    """The pairs by count, greatest first (ties: fewest characters, then smallest UTF-8); valid pairs only.

    3. A max-heap of (-count, length, bytes, pair); a stale count is re-offered when popped (counts of
    old pairs only fall). Only pairs counted at least `floor` are in the heap (the max count never
    rises: a new pair occurs at most as often as the merged one). When the heap runs dry the floor
    drops to 7/8 of the highest count left: most pairs never get near the top, so they never get a
    key or a heap entry (a floor of half the top admitted 3% more work on TinyStories).
    """

    def __init__(self, pair_counts: dict[int, int], key_of: Callable[[int], tuple[int, bytes] | None]) -> None:
        self.counts, self.key_of = pair_counts, key_of
        self.heap: list[tuple[int, int, bytes, int]] = []
        # the initial pairs, most frequent first
        self.by_count = sorted(pair_counts.items(), key=lambda item: -item[1])
        self.cursor = 0  # by_count[:cursor] has been admitted or set aside
        # max-heap of (-count when set aside, pair): counts only fall, so these are upper bounds
        self.aside: list[tuple[int, int]] = []
        self.floor = 1  # set by _lower_floor before the first merge (the heap starts empty)

    def offer(self, pair: int) -> None:
        """Put a pair with its current count in the heap (at least `floor`) or aside (counted at all)."""
        count = self.counts.get(pair, 0)
        if count >= self.floor:
            key = self.key_of(pair)
            if key is not None:
                heapq.heappush(self.heap, (-count, key[0], key[1], pair))
        elif count > 0:
            heapq.heappush(self.aside, (-count, pair))

    def pop(self) -> tuple[int, bytes] | None:
        """The best pair and the UTF-8 of the piece it makes; None when no pair is left."""
        while True:
            if not self.heap:
                if not self._lower_floor():
                    return None
                continue
            neg_count, _, key_bytes, pair = heapq.heappop(self.heap)
            if self.counts.get(pair, 0) == -neg_count:
                return pair, key_bytes
            self.offer(pair)

    def _lower_floor(self) -> bool:
        """Lower the floor to 7/8 of the highest count left and admit the pairs that reach it; False if none is left."""
        by_count, aside = self.by_count, self.aside
        top = max(by_count[self.cursor][1] if self.cursor < len(by_count) else 0, -aside[0][0] if aside else 0)
        if top <= 0:
            return False
        self.floor = max(1, top * 7 // 8)
        while self.cursor < len(by_count) and by_count[self.cursor][1] >= self.floor:
            self.cursor += 1
            self.offer(by_count[self.cursor - 1][0])
        while aside and -aside[0][0] >= self.floor:
            self.offer(heapq.heappop(aside)[1])
        return True
