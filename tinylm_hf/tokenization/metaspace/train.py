"""What the sentencepiece-style trainers (Unigram, SentencePiece BPE) share before their algorithms.

The words sentencepiece trains on (`split_metaspace_words`: each line with the dummy prefix, cut before
each `▁`); word counting from a file, an iterable of strings or given counts (bounded memory: only the Counter
of distinct words grows), the id layout sentencepiece uses (`<unk>`, `<s>`, `</s>`, then special
tokens, then byte pieces), the alphabet of characters in sentencepiece's order, and the vocabulary
size check.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import regex

from .sentencepiece_model import BOS_PIECE, BYTE_PIECES, EOS_PIECE, SPACE_SYMBOL, UNK_PIECE, float32_score
from .core import MetaspaceTokenizer
from ..jit import group_by_chars, kernels_enabled, map_in_threads, resolve_workers
from ..pretoken_counts import SpanCounts, spans_to_counter, sum_span_counts, texts_as_bytes
from ..pretokenize import check_special_tokens
from ..piece_rules import UNMERGEABLE_CHARS
from ..training_source import TrainingSource, read_training_source

# Bytes of text counted at a time when reading a file (whole lines).
READ_CHUNK_BYTES = 1 << 20
# Characters of text counted at a time, and counted by the reference before the kernels take over (while numba is
# not loaded: loading it costs more than counting this much).
BATCH_CHARS = 1 << 20
KERNEL_MIN_CHARS = 8 << 20
# Words whose characters are turned into arrays at a time.
WORDS_PER_SLICE = 1 << 16
# sentencepiece's defaults: ids 0, 1, 2.
META_PIECES = (UNK_PIECE, BOS_PIECE, EOS_PIECE)

_WORD = regex.compile(f"{SPACE_SYMBOL}[^{SPACE_SYMBOL}]*|[^{SPACE_SYMBOL}]+")


def split_words(metaspace_text: str) -> list[str]:
    """Cut metaspace text before every `▁`: `▁a▁▁b` -> [`▁a`, `▁`, `▁b`] (sentencepiece's SplitIntoWords)."""
    return _WORD.findall(metaspace_text)


def split_metaspace_words(text: str) -> list[str]:
    """The words sentencepiece trains on: each line gets the dummy prefix and is cut before each `▁`.

    Lines are split at "\\n" only (as sentencepiece reads a file); empty lines give nothing.

    >>> split_metaspace_words("The cat  sat.\\nIt ran")
    ['▁The', '▁cat', '▁', '▁sat.', '▁It', '▁ran']
    """
    return [word for words in _words(_checked_texts([text])) for word in words]


def _words(texts: Iterable[str]) -> Iterator[list[str]]:
    """Each text's words: its non-empty lines joined by spaces, with a `▁` before each space-separated part, cut
    before each `▁` (lines and parts end where words end, so the words of all lines at once are each line's).
    Only the text in hand is held: its copies replace it as they are made."""
    for text in texts:
        if "\n\n" in text or text.startswith("\n") or text.endswith("\n"):
            text = "\n".join(line for line in text.split("\n") if line)
        if not text:
            yield []
        elif SPACE_SYMBOL in text:  # a literal `▁` also starts a word
            yield split_words(SPACE_SYMBOL + text.replace("\n", SPACE_SYMBOL).replace(" ", SPACE_SYMBOL))
        else:  # the same words at C speed: `str.split` where each part already starts with its `▁`
            yield (SPACE_SYMBOL + text.replace("\n", " ").replace(" ", " " + SPACE_SYMBOL)).split(" ")


def read_line_chunks(path: str | os.PathLike) -> Iterator[str]:
    """Yield a UTF-8 text file as strings of whole lines, about 1 MiB at a time.

    Raises ValueError (naming the file) for a missing-in-spirit input: empty or not UTF-8.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training file not found: {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"training file {path!r} is empty")
    with open(path, encoding="utf-8-sig", errors="strict", newline="\n") as handle:  # a leading BOM is no text
        try:
            while True:
                lines = handle.readlines(READ_CHUNK_BYTES)
                if not lines:
                    return
                yield "".join(lines)
        except UnicodeDecodeError as exc:
            raise ValueError(f"training file {path!r} is not valid UTF-8 ({exc}); re-encode it as UTF-8") from exc


def count_metaspace_words(texts: Iterable[str], *, num_workers: int | None = None) -> Counter[str]:
    """Count sentencepiece words (those of `split_metaspace_words`) over many texts, holding only the counts and
    the texts in hand.

    The texts are counted in batches of about `BATCH_CHARS`: by the reference (`str.split` and a `Counter`) while
    numba is not loaded, for the first `KERNEL_MIN_CHARS` (loading it costs more than counting those), then by the
    kernels (`words_kernels.metaspace_word_bounds` and `count_spans`) on `num_workers` threads."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of strings, not a single string; wrap it in a list")
    return _count_batches(group_by_chars(_checked_texts(texts), BATCH_CHARS), num_workers)


def _count_batches(batches: Iterator[list[str]], num_workers: int | None, counted: int = 0) -> Counter[str]:
    """`count_metaspace_words` of batches of texts, `counted` characters having been counted before them."""
    counts: Counter[str] = Counter()
    for batch in batches:
        if (counted >= KERNEL_MIN_CHARS or "numba" in sys.modules) and kernels_enabled():
            total = _count_by_kernels(itertools.chain([batch], batches), num_workers)
            total.update(counts)  # the reference's few: added to the kernels' many, not the other way
            return total
        for words in _words(batch):
            counts.update(words)  # a list: counted in C
        counted += sum(map(len, batch))
    return counts


class MetaspaceWordCounter:
    """sentencepiece word -> count over texts given one at a time (a streamed dataset's rows), counted a batch of
    `BATCH_CHARS` at a time as `count_metaspace_words` counts them. `add(text)` takes a text, `counts()` gives the
    counts of all. (`lowercase` is no option of these words: sentencepiece keeps case.)"""

    def __init__(self, lowercase: bool = False) -> None:
        self.words: Counter[str] = Counter()
        self.batch: list[str] = []
        self.batch_chars = self.counted = 0

    def add(self, text: str) -> None:
        """Count the words of one text (counted once its batch is full)."""
        self.batch.append(text)
        self.batch_chars += len(text)
        if self.batch_chars >= BATCH_CHARS:
            self._count_batch()

    def counts(self) -> Counter[str]:
        """The words of every text added."""
        self._count_batch()
        return self.words

    def _count_batch(self) -> None:
        if self.batch:
            self.words.update(_count_batches(iter([self.batch]), 1, self.counted))
            self.counted += self.batch_chars
            self.batch, self.batch_chars = [], 0


def _checked_texts(texts: Iterable[str]) -> Iterator[str]:
    """The texts, each checked to be a `str` as it comes (the one check of every path that counts them)."""
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"the iterator must yield str, got {type(text).__name__}")
        yield text


def _count_by_kernels(batches: Iterable[list[str]], num_workers: int | None) -> Counter[str]:
    """The words of the batches, counted by the kernels over threads, as spans of bytes until the end."""
    from .words_kernels import metaspace_word_bounds
    from ..pretoken_counts_kernels import count_spans

    def count(batch: list[str]) -> SpanCounts:
        data, bounds = texts_as_bytes(batch)
        # a word ends at each space, newline and `▁` (0xE2, its first byte, bounds their number) and each text's end
        most_words = len(bounds) + sum(int(np.count_nonzero(data == byte)) for byte in (0x20, 0x0A, 0xE2))
        starts, ends = metaspace_word_bounds(data, bounds, most_words)
        return count_spans(data, starts, ends, np.ones(len(starts), dtype=np.int64))

    spans = sum_span_counts(map_in_threads(count, batches, resolve_workers(num_workers)))
    return spans_to_counter(spans, prefix=SPACE_SYMBOL)


def check_word_counts(counts: Mapping[str, int]) -> Counter[str]:
    """Validate word counts (str -> non-negative int); keys are re-cut at `▁` so any metaspace text works."""
    if not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a mapping of metaspace word -> count, got {type(counts).__name__}")
    merged: Counter[str] = Counter()
    for word, count in counts.items():
        if not isinstance(word, str):
            raise TypeError(f"word keys must be str (metaspace words such as '▁the'), got {word!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count of word {word!r} must be a non-negative int, got {count!r}")
        if " " in word or "\n" in word:
            raise ValueError(f"word {word!r} holds a space or newline; count words with split_metaspace_words")
        if count:
            for part in split_words(word):
                merged[part] += count
    return merged


def metaspace_word_counts(input_path: TrainingSource) -> Counter[str]:
    """The sentencepiece words of a trainer's source (`read_training_source`): a file read in whole lines, texts
    each split into lines, or word counts re-cut at `▁` (`check_word_counts`)."""
    return read_training_source(input_path, count_file=lambda path: count_metaspace_words(read_line_chunks(path)),
                                count_texts=count_metaspace_words, check_counts=check_word_counts,
                                nothing="text to train on")


def meta_pieces(special_tokens: Sequence[str] | None, *, byte_fallback: bool) -> list[str]:
    """sentencepiece's fixed ids: `<unk>`, `<s>`, `</s>`, the special tokens, then 256 byte pieces."""
    specials = check_special_tokens(special_tokens)
    pieces = list(META_PIECES) + [t for t in specials if t not in META_PIECES]
    if byte_fallback:
        pieces += [p for p in BYTE_PIECES if p not in pieces]
    return pieces


def count_characters(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Characters of the words with their counts, most frequent first, ties by code point.

    This is sentencepiece's order for its required characters (character_coverage=1.0); tab, NUL
    and U+2585 are left out, as sentencepiece never makes them pieces.
    """
    totals = np.zeros(sys.maxunicode + 1, dtype=np.int64)
    present = np.zeros(sys.maxunicode + 1, dtype=bool)  # even where only words counted 0 hold them
    for words, weights in _word_slices(counts):
        # code points of a slice of words at once, each weighted by its word's count (numpy, no per-char loop)
        codes = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32)
        weights = np.repeat(weights, np.fromiter(map(len, words), dtype=np.int64, count=len(words)))
        present[codes] = True
        if int(weights.sum()) < 1 << 53:  # float64 sums of integers are exact below 2**53
            summed = np.bincount(codes, weights=weights)
            totals[: len(summed)] += summed.astype(np.int64)
        else:
            np.add.at(totals, codes, weights)
    chars = np.flatnonzero(present)
    pairs = zip(map(chr, chars.tolist()), totals[chars].tolist())
    return sorted(((c, n) for c, n in pairs if c not in UNMERGEABLE_CHARS), key=lambda item: (-item[1], item[0]))


def _word_slices(counts: Mapping[str, int]) -> Iterator[tuple[list[str], np.ndarray]]:
    """The words and their counts, `WORDS_PER_SLICE` at a time (arrays over all their characters at once would
    take some 30 bytes a character)."""
    words = iter(counts.items())
    while part := list(itertools.islice(words, WORDS_PER_SLICE)):
        yield [word for word, _ in part], np.fromiter((n for _, n in part), dtype=np.int64, count=len(part))


def check_vocab_size(vocab_size: int, num_meta: int, num_chars: int) -> None:
    """vocab_size must hold the fixed pieces and every character (character_coverage=1.0)."""
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    minimum = num_meta + num_chars
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the corpus has {num_chars} distinct characters and "
            f"there are {num_meta} fixed pieces (<unk>, <s>, </s>, special tokens, byte pieces); "
            f"use vocab_size >= {minimum}"
        )


def train_metaspace_tokenizer(
    core_class: type[MetaspaceTokenizer],
    train: Callable[..., list[tuple[str, float]]],
    counts: Mapping[str, int],
    vocab_size: int,
    special_tokens: Sequence[str],
    *,
    byte_fallback: bool,
    progress: bool,
) -> MetaspaceTokenizer:
    """`train`'s pieces (from `counts`) as a `core_class` tokenizer, exactly as its `.model` file will hold them:
    scores as float32, `<s>`, `</s>` and `special_tokens` as control pieces (ids, never produced from text)."""
    pieces = train(counts, vocab_size, special_tokens, byte_fallback=byte_fallback, progress=progress)
    stored = [(piece, float32_score(score)) for piece, score in pieces]
    return core_class(stored, byte_fallback=byte_fallback, special_tokens=[BOS_PIECE, EOS_PIECE, *special_tokens])
