"""How each trainer splits text into words, and counting those words in files and texts.

A `WordSplitter` is one way of cutting text into the words a trainer counts: byte-level BPE's regex
pre-tokens (`BPE_WORDS`), BERT's normalised words (`BERT_WORDS`) or sentencepiece's `▁`-words of each
line (`METASPACE_WORDS`). The family table names each family's splitter; `count_split_words` counts
with one, reading files in blocks cut where words end (bounded memory). `WordCounts` is such a count
with the options that made it.

BERT words are counted by chunk (`BertWordCounter`): most of a text repeats, so its whitespace-separated
chunks are counted first, at C speed, and only the distinct chunks are normalised and split into words.
"""

from __future__ import annotations

import codecs
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .pretokenize import (
    GPT2_PATTERN,
    check_special_tokens,
    compile_special_pattern,
    pretokenize_gpt2,
    resolve_pattern,
    split_on_special_tokens,
)
from .wordpiece.core import (
    CJK_RANGES,
    choose_word_finder,
    normalize_bert,
    pretokenize_bert,
    split_bert_words,
)

# Files are read in blocks of this many bytes and cut where words end (bounded memory). A block's
# list of words takes ~15x its size: 256 KiB keeps WordPiece training's peak near its counts, at no cost
# in speed (1 MiB blocks added ~17 MB).
READ_BYTES = 1 << 18

# `str.split` cuts at every character BERT reads as a space, and at these, which BERT removes (joining their
# neighbours): a text holding one is counted word by word. (`in` finds each at memchr speed, where a search for
# a class took 0.05 s on 10 MB.)
_REMOVED_SPACES = "\x0b\x0c\x1c\x1d\x1e\x1f\x85"
# BERT puts spaces around CJK ideographs, so a chunk holding one is no longer one normalised chunk: such chunks
# are normalised one by one (the astral ideographs, rare and slow to search for, are caught when the chunks'
# normalisations fail to match them one to one).
_BMP_CJK = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in CJK_RANGES if b <= 0xFFFF) + "]")
# Distinct chunks held before their words are added to the counts: bounds memory (~150 bytes a chunk).
CHUNKS_HELD = 1 << 18

class WordCounter(Protocol):
    """Counts words over texts given one at a time: `add(text)` (a text free of special tokens), then `counts()`."""

    def add(self, text: str) -> None: ...

    def counts(self) -> Counter[str]: ...


# (pattern, lowercase) -> a function from text (free of special tokens) to its words.
SplitFactory = Callable[[str, bool], Callable[[str], list[str]]]


@dataclass(frozen=True)
class WordSplitter:
    """How one family's trainer splits text into words, and which options change the words."""

    split: SplitFactory
    # Last index at which a text can be cut without changing its words (-1: none); used to read files
    # in blocks. Unused when `count_file` is given.
    find_cut: Callable[[str], int]
    uses_pattern: bool = False
    uses_lowercase: bool = False
    # A faster whole-file counter (path, specials, pattern, lowercase, num_workers) -> Counter, if the
    # trainer has one.
    count_file: Callable[[Path, list[str], str, bool, int | None], Counter[str]] | None = field(default=None)
    # A faster counter of texts than counting `split` of each, made with `lowercase`: `add(text)` takes a text
    # free of special tokens, `counts()` gives its words' counts. Used for texts and, without `count_file`, files.
    counter: Callable[[bool], WordCounter] | None = field(default=None)
    # False for sentencepiece-style trainers: their special tokens are control pieces that text never
    # produces, and their words are counted with special-token text left in place.
    cuts_special_tokens: bool = True


def _bpe_split(pattern: str, lowercase: bool) -> Callable[[str], list[str]]:
    if pattern == GPT2_PATTERN:
        return pretokenize_gpt2
    from .pretokenize import compile_pretokenizer

    return compile_pretokenizer(pattern).findall


def _wordpiece_split(pattern: str, lowercase: bool) -> Callable[[str], list[str]]:
    return lambda text: pretokenize_bert(text, lowercase=lowercase)


class BertWordCounter:
    """BERT word -> count over texts, equal to counting `pretokenize_bert` of each, but counted by chunk.

    A text's whitespace-separated chunks are counted first (`str.split` and `Counter`, at C speed); only the
    distinct chunks are normalised and split into words, each word counted as often as its chunk. This is
    exact because every step of BERT's normaliser is per character, or (NFD's reordering) never crosses a
    space.
    """

    def __init__(self, lowercase: bool) -> None:
        self.lowercase = lowercase
        self.words: Counter[str] = Counter()
        self.chunks: Counter[str] = Counter()  # distinct chunks not yet added to `words`

    def add(self, text: str) -> None:
        """Count the words of one text (free of special tokens)."""
        if any(space in text for space in _REMOVED_SPACES):
            self.words.update(pretokenize_bert(text, lowercase=self.lowercase))
            return
        self.chunks.update(text.split())
        if len(self.chunks) > CHUNKS_HELD:
            self._add_chunk_words()

    def counts(self) -> Counter[str]:
        """The words of every text added."""
        self._add_chunk_words()
        return self.words

    def _add_chunk_words(self) -> None:
        chunks, lowercase = self.chunks, self.lowercase
        joined = " ".join(chunks)
        if _BMP_CJK.search(joined):
            for chunk in [chunk for chunk in chunks if _BMP_CJK.search(chunk)]:
                self._add_words([normalize_bert(chunk, lowercase=lowercase)], [chunks.pop(chunk)], split_bert_words)
            joined = " ".join(chunks)
        normalized = normalize_bert(joined, lowercase=lowercase)
        texts = normalized.split(" ") if chunks else []
        if len(texts) != len(chunks):  # an astral CJK ideograph gained spaces
            texts = [normalize_bert(chunk, lowercase=lowercase) for chunk in chunks]
        self._add_words(texts, chunks.values(), choose_word_finder(normalized))
        chunks.clear()

    def _add_words(self, texts: Iterable[str], counts: Iterable[int], find_words: Callable[[str], list[str]]) -> None:
        """Add the words of normalised `texts`, each counted `counts` times."""
        words = self.words
        get = words.get  # dict.get: no `Counter.__missing__` call
        for text, count in zip(texts, counts):
            if text.isalnum():  # no punctuation and no space: one word
                words[text] = get(text, 0) + count
            else:
                for word in find_words(text):
                    words[word] = get(word, 0) + count


def _cut_after_last_space(text: str) -> int:
    """For BERT words: just after the last space or newline (no word crosses it), or -1."""
    cut = max(text.rfind(" "), text.rfind("\n")) + 1
    return cut if cut > 0 else -1


def _count_bpe_file(path: Path, specials: list[str], pattern: str, lowercase: bool,
                    num_workers: int | None) -> Counter[str]:
    # Imported here, as in the two metaspace functions below: their numpy and numba cost
    # WordPiece counting ~20 MB and 0.2 s of start-up that it never uses.
    from .pretoken_counts import count_pretokens

    return count_pretokens(os.fspath(path), specials, pattern, num_workers=num_workers)


def _metaspace_split(pattern: str, lowercase: bool) -> Callable[[str], list[str]]:
    from .metaspace.train import split_metaspace_words

    return split_metaspace_words


def _metaspace_counter(lowercase: bool) -> WordCounter:
    from .metaspace.train import MetaspaceWordCounter

    return MetaspaceWordCounter(lowercase)


def _cut_after_last_newline(text: str) -> int:
    """For sentencepiece words (read line by line): just after the last newline, or -1."""
    return text.rfind("\n") + 1 or -1


def _count_metaspace_file(path: Path, specials: list[str], pattern: str, lowercase: bool,
                          num_workers: int | None) -> Counter[str]:
    from .metaspace.train import count_metaspace_words, read_line_chunks

    return count_metaspace_words(read_line_chunks(path), num_workers=num_workers)


# Byte-level BPE: special tokens cut out, then the regex `pattern` (GPT-2's by default).
BPE_WORDS = WordSplitter(_bpe_split, lambda text: -1, uses_pattern=True, count_file=_count_bpe_file)
# WordPiece: special tokens cut out, then BERT's normaliser (with `lowercase`) and pre-tokenizer.
BERT_WORDS = WordSplitter(_wordpiece_split, _cut_after_last_space, uses_lowercase=True, counter=BertWordCounter)
# Unigram and SentencePiece BPE: each line's words, the dummy prefix `▁` in front.
METASPACE_WORDS = WordSplitter(_metaspace_split, _cut_after_last_newline, count_file=_count_metaspace_file,
                               counter=_metaspace_counter,
                               cuts_special_tokens=False)


def count_split_words(
    inputs: str | os.PathLike | Iterable[str | os.PathLike],
    splitter: WordSplitter,
    *,
    special_tokens: Iterable[str] | None = None,
    pattern: str = "gpt2",
    lowercase: bool = False,
    num_workers: int | None = None,
) -> Counter[str]:
    """Count the words of files or texts as `splitter` cuts them (see `word_counts.count_words`)."""
    specials = check_special_tokens(special_tokens) if splitter.cuts_special_tokens else []
    resolved = resolve_pattern(pattern)
    counts: Counter[str] = Counter()
    counter = splitter.counter(bool(lowercase)) if splitter.counter is not None else None
    if counter is not None:
        add = counter.add
    else:
        split = splitter.split(resolved, bool(lowercase))
        add = lambda part: counts.update(split(part))  # noqa: E731
    sources = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs
    if isinstance(inputs, bytes) or not isinstance(sources, Iterable):
        raise TypeError(f"inputs must be a path or an iterable of texts/paths, got {type(inputs).__name__}")
    for index, source in enumerate(sources):
        if isinstance(source, os.PathLike) or source is inputs:
            path = _check_file(source)
            if splitter.count_file is not None:
                counts = add_counts(counts, splitter.count_file(path, specials, resolved, bool(lowercase), num_workers))
            else:
                for text in read_text_blocks(path, splitter.find_cut, specials):
                    count_text(text, specials, add)
        elif isinstance(source, str):
            count_text(source, specials, add)
        else:
            raise TypeError(
                f"item {index} of inputs is {type(source).__name__}: items must be texts (str) or "
                "files (os.PathLike); decode bytes first"
            )
    return add_counts(counts, counter.counts()) if counter is not None else counts


def add_counts(counts: Counter[str], more: Counter[str]) -> Counter[str]:
    """The sum of two counts, made in the larger of the two (one table of a large corpus's words is most of what
    counting holds: never copy it)."""
    if len(more) > len(counts):
        counts, more = more, counts
    counts.update(more)
    return counts


def iter_texts(iterator: Iterable[str]) -> Iterator[str]:
    """The items of a trainer's `iterator`, checked to be texts (never paths: see `count_words`)."""
    if isinstance(iterator, (str, bytes)) or not isinstance(iterator, Iterable):
        raise TypeError(f"iterator must be an iterable of strings (e.g. [text]), got {type(iterator).__name__}")
    for index, text in enumerate(iterator):
        if not isinstance(text, str):
            raise TypeError(f"item {index} of the iterator is {type(text).__name__}, not str")
        yield text


def count_text(text: str, special_tokens: list[str], add: Callable[[str], None]) -> None:
    """Count the words of one text: `add` each part between its special tokens."""
    for part in split_on_special_tokens(text, special_tokens) if special_tokens else (text,):
        if part:
            add(part)


def _check_file(source: str | os.PathLike) -> Path:
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"training file not found: {str(path)!r}")
    return path


def read_text_blocks(path: Path, find_cut: Callable[[str], int], special_tokens: list[str]) -> Iterator[str]:
    """A UTF-8 file as texts of about `READ_BYTES`, each cut where `find_cut` says words end.

    A cut never falls inside a special token; a leading byte-order mark is dropped (the rule of every reader of a
    user's text, `corpus/sources.py`). Invalid UTF-8 raises ValueError with its byte offset.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")  # a leading byte-order mark is no text
    special = compile_special_pattern(special_tokens)
    longest = max(map(len, special_tokens), default=0)
    pending, offset = "", 0
    with open(path, "rb") as handle:
        while True:
            block = handle.read(READ_BYTES)
            try:
                pending += decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{str(path)!r} is not UTF-8 (bad byte near offset {offset + exc.start}); re-encode it as UTF-8"
                ) from None
            offset += len(block)
            if not block:
                break
            if special is None:
                cut = find_cut(pending)
            else:  # look only where a special token straddling the cut is wholly read, then step before it
                cut = find_cut(pending[: max(0, len(pending) - longest + 1)])
                cut = _before_covering_special(pending, cut, special, longest) if cut > 0 else cut
            if cut > 0:
                yield pending[:cut]
                pending = pending[cut:]
    if pending:
        yield pending


def _before_covering_special(text: str, cut: int, special, longest: int) -> int:
    """Move a cut back to the start of a special token that straddles it."""
    for match in special.finditer(text, max(0, cut - longest), cut + longest):
        if match.start() < cut < match.end():
            return match.start()
    return cut


@dataclass
class WordCounts:
    """Word -> count, with the options the words were split with (what `sum_word_counts` compares)."""

    counts: Counter[str]
    algorithm: str
    pattern: str | None
    lowercase: bool | None
    special_tokens: list[str]

    def options(self) -> dict:
        return {"algorithm": self.algorithm, "pattern": self.pattern, "lowercase": self.lowercase,
                "special_tokens": self.special_tokens}  # fmt: skip
