"""Word counting for the tokenizer trainers, and the word-count file format that lets shards be summed.

Counting words (pre-tokens) is the part of training that grows with the data, and it is additive:
count shards anywhere (a `datasets.map`, a Slurm array, Spark or Ray), save each `Counter` with
`save_word_counts`, then `sum_word_counts` the loaded files and train from the sum. The result is
identical to training on the concatenated text, provided every shard ends where its words end
(files and documents do: a text's last word never continues into the next text).

Words are split exactly as the named trainer splits them (`WORD_SPLITTERS`, one row per algorithm):
"bpe" = special tokens cut out, then the regex `pattern` (GPT-2's by default); "wordpiece" = special
tokens cut out, then BERT's normaliser (with `lowercase`) and pre-tokenizer.
"""

from __future__ import annotations

import codecs
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..tokenization.atomic_files import write_text_atomic
from ..tokenization.pretokenize import (
    GPT2_PATTERN,
    PATTERNS,
    check_special_tokens,
    compile_special_pattern,
    pretokenize_gpt2,
    resolve_pattern,
    split_on_special_tokens,
)
from ..tokenization.wordpiece import pretokenize_bert
from .metaspace_train import count_metaspace_words, read_line_chunks

FORMAT = "tinylm-word-counts"
FORMAT_VERSION = 1
# Files are read in blocks of this many bytes and cut where words end (bounded memory).
READ_BYTES = 1 << 20

# (pattern, lowercase) -> a function from text (free of special tokens) to its words.
SplitFactory = Callable[[str, bool], Callable[[str], list[str]]]


def _bpe_split(pattern: str, lowercase: bool) -> Callable[[str], list[str]]:
    if pattern == GPT2_PATTERN:
        return pretokenize_gpt2
    import regex

    return regex.compile(pattern).findall


def _wordpiece_split(pattern: str, lowercase: bool) -> Callable[[str], list[str]]:
    return lambda text: pretokenize_bert(text, lowercase=lowercase)


def _cut_after_last_space(text: str) -> int:
    """For BERT words: just after the last space or newline (no word crosses it), or -1."""
    cut = max(text.rfind(" "), text.rfind("\n")) + 1
    return cut if cut > 0 else -1


def _count_bpe_file(path: Path, specials: list[str], pattern: str, lowercase: bool,
                    num_workers: int | None) -> Counter[str]:
    # train_bpe's own parallel counter (lazy import: bpe_train imports this module).
    from .bpe_train import count_pretokens

    return count_pretokens(os.fspath(path), specials, pattern, num_workers=num_workers)


@dataclass(frozen=True)
class WordSplitter:
    """How one algorithm splits text into words, and which options change the words."""

    split: SplitFactory
    # Last index at which a text can be cut without changing its words (-1: none); used to read files
    # in blocks. Unused when `count_file` is given.
    find_cut: Callable[[str], int]
    uses_pattern: bool = False
    uses_lowercase: bool = False
    # A faster whole-file counter (path, specials, pattern, lowercase, num_workers) -> Counter, if the
    # trainer has one.
    count_file: Callable[[Path, list[str], str, bool, int | None], Counter[str]] | None = field(default=None)
    # False for sentencepiece-style trainers: their special tokens are control pieces that text never
    # produces, and their words are counted with special-token text left in place.
    cuts_special_tokens: bool = True


def _metaspace_split(pattern: str, lowercase: bool) -> Callable[[str], list[str]]:
    return lambda text: list(count_metaspace_words([text]).elements())


def _cut_after_last_newline(text: str) -> int:
    """For sentencepiece words (read line by line): just after the last newline, or -1."""
    return text.rfind("\n") + 1 or -1


def _count_metaspace_file(path: Path, specials: list[str], pattern: str, lowercase: bool,
                          num_workers: int | None) -> Counter[str]:
    return count_metaspace_words(read_line_chunks(path))


_METASPACE = WordSplitter(_metaspace_split, _cut_after_last_newline, count_file=_count_metaspace_file,
                          cuts_special_tokens=False)
WORD_SPLITTERS: dict[str, WordSplitter] = {
    "bpe": WordSplitter(_bpe_split, lambda text: -1, uses_pattern=True, count_file=_count_bpe_file),
    "wordpiece": WordSplitter(_wordpiece_split, _cut_after_last_space, uses_lowercase=True),
    "unigram": _METASPACE,
    "sentencepiece-bpe": _METASPACE,
}


def get_word_splitter(algorithm: str) -> WordSplitter:
    """The `WORD_SPLITTERS` row of `algorithm`, or a ValueError listing the known ones."""
    splitter = WORD_SPLITTERS.get(algorithm) if isinstance(algorithm, str) else None
    if splitter is None:
        raise ValueError(f"unknown algorithm {algorithm!r}: expected one of {sorted(WORD_SPLITTERS)}")
    return splitter


# ---------------------------------------------------------------------------------------- counting
def count_words(
    inputs: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    algorithm: str = "bpe",
    special_tokens: Iterable[str] | None = None,
    pattern: str = "gpt2",
    lowercase: bool = False,
    num_workers: int | None = None,
) -> Counter[str]:
    """Count the words of files or texts exactly as `algorithm`'s trainer splits them.

    `num_workers` (default: the CPU count) processes count each large file for bpe.

    `inputs` is a file path (str or `os.PathLike`), or an iterable whose items are texts (`str`) or
    files (`os.PathLike`, e.g. `pathlib.Path`): `["a b", Path("c.txt")]` counts one text and one file.
    An iterable is consumed one item at a time (a generator or a `datasets` column is never held
    whole); files are read in blocks. Special tokens are cut out first, so no word crosses one:
    pass the same `special_tokens` (and `pattern` / `lowercase`) as to the trainer.

    >>> count_words(["the cat. The", "cat"], algorithm="wordpiece", lowercase=True)
    Counter({'the': 2, 'cat': 2, '.': 1})
    """
    splitter = get_word_splitter(algorithm)
    specials = check_special_tokens(special_tokens) if splitter.cuts_special_tokens else []
    resolved = resolve_pattern(pattern)
    split = splitter.split(resolved, bool(lowercase))
    counts: Counter[str] = Counter()
    sources = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs
    if isinstance(inputs, bytes) or not isinstance(sources, Iterable):
        raise TypeError(f"inputs must be a path or an iterable of texts/paths, got {type(inputs).__name__}")
    for index, source in enumerate(sources):
        if isinstance(source, os.PathLike) or source is inputs:
            path = _check_file(source)
            if splitter.count_file is not None:
                counts.update(splitter.count_file(path, specials, resolved, bool(lowercase), num_workers))
            else:
                for text in read_text_blocks(path, splitter.find_cut, specials):
                    count_text(text, specials, split, counts)
        elif isinstance(source, str):
            count_text(source, specials, split, counts)
        else:
            raise TypeError(
                f"item {index} of inputs is {type(source).__name__}: items must be texts (str) or "
                "files (os.PathLike); decode bytes first"
            )
    return counts


def iter_texts(iterator: Iterable[str]) -> Iterator[str]:
    """The items of a trainer's `iterator`, checked to be texts (never paths: see `count_words`)."""
    if isinstance(iterator, (str, bytes)) or not isinstance(iterator, Iterable):
        raise TypeError(f"iterator must be an iterable of strings (e.g. [text]), got {type(iterator).__name__}")
    for index, text in enumerate(iterator):
        if not isinstance(text, str):
            raise TypeError(f"item {index} of the iterator is {type(text).__name__}, not str")
        yield text


def count_text(text: str, special_tokens: list[str], split: Callable[[str], list[str]], counts: Counter[str]) -> None:
    """Add the words of one text (special tokens cut out) to `counts`."""
    for part in split_on_special_tokens(text, special_tokens) if special_tokens else (text,):
        if part:
            counts.update(split(part))


def _check_file(source: str | os.PathLike) -> Path:
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"training file not found: {str(path)!r}")
    return path


def read_text_blocks(path: Path, find_cut: Callable[[str], int], special_tokens: list[str]) -> Iterator[str]:
    """A UTF-8 file as texts of about `READ_BYTES`, each cut where `find_cut` says words end.

    A cut never falls inside a special token. Invalid UTF-8 raises ValueError with its byte offset.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
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


# ------------------------------------------------------------------------------------ file format
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


def make_word_counts(
    counts: Mapping[str, int],
    *,
    algorithm: str,
    pattern: str = "gpt2",
    lowercase: bool = False,
    special_tokens: Iterable[str] | None = None,
) -> WordCounts:
    """Counts plus their options in canonical form (options an algorithm ignores become None)."""
    splitter = get_word_splitter(algorithm)
    canonical = None
    if splitter.uses_pattern:
        resolved = resolve_pattern(pattern)
        canonical = next((name for name, regex in PATTERNS.items() if regex == resolved), resolved)
    checked = Counter()
    for word, count in counts.items():
        if not isinstance(word, str) or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"word counts must map str -> non-negative int, got {word!r}: {count!r}")
        if count and word:
            checked[word] = count
    return WordCounts(
        counts=checked,
        algorithm=algorithm,
        pattern=canonical,
        lowercase=bool(lowercase) if splitter.uses_lowercase else None,
        special_tokens=sorted(check_special_tokens(special_tokens)) if splitter.cuts_special_tokens else [],
    )


def save_word_counts(
    counts: Mapping[str, int],
    path: str | os.PathLike,
    *,
    algorithm: str,
    pattern: str = "gpt2",
    lowercase: bool = False,
    special_tokens: Iterable[str] | None = None,
) -> Path:
    """Write counts and the options that made them as JSON (atomically); returns the path."""
    record = make_word_counts(counts, algorithm=algorithm, pattern=pattern, lowercase=lowercase,
                              special_tokens=special_tokens)  # fmt: skip
    body = {"format": FORMAT, "version": FORMAT_VERSION, **record.options(),
            "counts": dict(record.counts.most_common())}  # fmt: skip
    path = Path(path)
    write_text_atomic(path, json.dumps(body, ensure_ascii=False) + "\n")
    return path


def load_word_counts(path: str | os.PathLike) -> WordCounts:
    """Read a file written by `save_word_counts`; anything else raises ValueError naming the problem."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word-count file not found: {str(path)!r}")
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{str(path)!r} is not a word-count JSON file: {exc}") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a word-count file (no \"format\": \"{FORMAT}\")")
    if body.get("version") != FORMAT_VERSION:
        raise ValueError(f"{str(path)!r} has word-count format version {body.get('version')!r}; expected {FORMAT_VERSION}")
    missing = [k for k in ("algorithm", "pattern", "lowercase", "special_tokens", "counts") if k not in body]
    if missing or not isinstance(body["counts"], dict):
        raise ValueError(f"{str(path)!r} lacks {missing or ['counts as an object']}")
    splitter = get_word_splitter(body["algorithm"])
    record = make_word_counts(
        body["counts"],
        algorithm=body["algorithm"],
        pattern=body["pattern"] if splitter.uses_pattern else "gpt2",
        lowercase=bool(body["lowercase"]),
        special_tokens=body["special_tokens"],
    )
    return record


def sum_word_counts(parts: Iterable[WordCounts | str | os.PathLike]) -> WordCounts:
    """Sum word counts (loaded, or paths to load); counts made with different options are refused."""
    total: WordCounts | None = None
    for part in parts:
        record = part if isinstance(part, WordCounts) else load_word_counts(part)
        if total is None:
            total = WordCounts(Counter(record.counts), **record.options())
        elif record.options() != total.options():
            raise ValueError(
                f"cannot sum word counts made with different options: {record.options()} vs {total.options()}; "
                "count every shard with the same algorithm, pattern, lowercase and special tokens"
            )
        else:
            total.counts.update(record.counts)
    if total is None:
        raise ValueError("sum_word_counts needs at least one word-count file")
    return total
