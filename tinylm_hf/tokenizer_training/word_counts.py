"""Word counting for the tokenizer trainers, and the word-count file format that lets shards be summed.

Counting words (pre-tokens) is the part of training that grows with the data, and it is additive:
count shards anywhere (a `datasets.map`, a Slurm array, Spark or Ray), save each `Counter` with
`save_word_counts`, then `sum_word_counts` the loaded files and train from the sum. The result is
identical to training on the concatenated text, provided every shard ends where its words end
(files and documents do: a text's last word never continues into the next text).

Words are split exactly as the named family's trainer splits them (its `words` in `families.FAMILIES`):
"bpe" = special tokens cut out, then the regex `pattern` (GPT-2's by default); "wordpiece" = special
tokens cut out, then BERT's normaliser (with `lowercase`) and pre-tokenizer; "unigram" and
"sentencepiece-bpe" = each line's words, the dummy prefix `▁` in front.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..fileio import atomic_output
from ..tokenization.pretokenize import check_special_tokens, compile_special_pattern, pattern_name
from ..tokenization.families import get_family
from ..tokenization.word_splitting import WordCounts, WordSplitter, count_split_words

FORMAT = "tinylm-word-counts"
FORMAT_VERSION = 1

def get_word_splitter(algorithm: str) -> WordSplitter:
    """How the family called `algorithm` splits text into words (a ValueError names the known families)."""
    return get_family(algorithm).words


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

    `num_workers` (default: the CPU count) threads count each large file for bpe.

    `inputs` is a file path (str or `os.PathLike`), or an iterable whose items are texts (`str`) or
    files (`os.PathLike`, e.g. `pathlib.Path`): `["a b", Path("c.txt")]` counts one text and one file.
    An iterable is consumed one item at a time (a generator or a `datasets` column is never held
    whole); files are read in blocks. Special tokens are cut out first, so no word crosses one:
    pass the same `special_tokens` (and `pattern` / `lowercase`) as to the trainer.

    >>> count_words(["the cat. The", "cat"], algorithm="wordpiece", lowercase=True)
    Counter({'the': 2, 'cat': 2, '.': 1})
    """
    return count_split_words(inputs, get_word_splitter(algorithm), special_tokens=special_tokens, pattern=pattern,
                             lowercase=lowercase, num_workers=num_workers)


# ------------------------------------------------------------------------------------ file format
def make_word_counts(
    counts: Mapping[str, int],
    *,
    algorithm: str,
    pattern: str = "gpt2",
    lowercase: bool = False,
    special_tokens: Iterable[str] | None = None,
) -> WordCounts:
    """Counts plus their options in canonical form (options an algorithm ignores become None).

    Where the family cuts special tokens out of text before counting, no word can hold special-token text:
    counts with such a word were not counted with these special tokens, and are refused."""
    splitter = get_word_splitter(algorithm)
    canonical = pattern_name(pattern) if splitter.uses_pattern else None
    specials = sorted(check_special_tokens(special_tokens)) if splitter.cuts_special_tokens else []
    checked = _checked_counts(counts)
    _check_no_special_text(checked, specials)
    return WordCounts(
        counts=checked,
        algorithm=algorithm,
        pattern=canonical,
        lowercase=bool(lowercase) if splitter.uses_lowercase else None,
        special_tokens=specials,
    )


def _checked_counts(counts: Mapping[str, int]) -> Counter[str]:
    """The words counted more than 0 times, checked (str -> non-negative int): `counts` itself when it is such a
    `Counter` already, as counting gives it (a large corpus's counts are most of the memory: not copied)."""
    unused = False  # a word counted 0 times, or the empty word
    for word, count in counts.items():
        if not isinstance(word, str) or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"word counts must map str -> non-negative int, got {word!r}: {count!r}")
        unused = unused or not (count and word)
    if isinstance(counts, Counter) and not unused:
        return counts
    checked: Counter[str] = Counter()
    for word, count in counts.items():
        if count and word:
            checked[word] = count
    return checked


def _check_no_special_text(counts: Mapping[str, int], special_tokens: list[str]) -> None:
    special = compile_special_pattern(special_tokens)
    if special is None:
        return
    for word in counts:
        if found := special.search(word):
            raise ValueError(f"the word {word!r} holds the special token {found.group()!r}: special tokens are cut out "
                             "of text before counting, so these counts were not counted with these special tokens; "
                             "count the text again with `tinylm count-words`")


def save_word_counts(
    counts: Mapping[str, int],
    path: str | os.PathLike,
    *,
    algorithm: str,
    pattern: str = "gpt2",
    lowercase: bool = False,
    special_tokens: Iterable[str] | None = None,
) -> Path:
    """Write counts and the options that made them as JSON (atomically), most common first; returns the path.

    The words are written one by one (no second table of them, nor one string of the whole file: the counts of a
    large corpus are most of a counting machine's memory)."""
    record = make_word_counts(counts, algorithm=algorithm, pattern=pattern, lowercase=lowercase,
                              special_tokens=special_tokens)  # fmt: skip
    head = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, **record.options(), "counts": {}},
                      ensure_ascii=False)  # fmt: skip
    words = record.counts
    path = Path(path)
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.write(head.removesuffix("}}"))
        for index, word in enumerate(sorted(words, key=words.__getitem__, reverse=True)):  # `most_common`'s order
            out.write(f"{', ' if index else ''}{json.dumps(word, ensure_ascii=False)}: {words[word]}")
        out.write("}}\n")
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
    _check_words_are_text(path, body["counts"])
    splitter = get_word_splitter(body["algorithm"])
    try:
        return make_word_counts(
            body["counts"],
            algorithm=body["algorithm"],
            pattern=body["pattern"] if splitter.uses_pattern else "gpt2",
            lowercase=bool(body["lowercase"]),
            special_tokens=body["special_tokens"],
        )
    except ValueError as err:
        raise ValueError(f"word-count file {str(path)!r}: {err}") from None


def _check_words_are_text(path: Path, counts: Mapping[str, object]) -> None:
    """Refuse a word with a lone surrogate (JSON's `\\ud800` escape): no UTF-8 text, so no tokenizer, holds one."""
    for word in counts:
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{str(path)!r} holds the word {word!r} with a lone surrogate escape, which is no Unicode "
                             "character: it is not a file `tinylm count-words` wrote; count the words again") from None


def sum_word_counts(parts: Iterable[WordCounts | str | os.PathLike]) -> WordCounts:
    """Sum word counts (loaded, or paths to load); counts made with different options, or holding no words at all,
    are refused."""
    total: WordCounts | None = None
    names: list[str] = []  # the files summed, for messages
    for part in parts:
        record = part if isinstance(part, WordCounts) else load_word_counts(part)
        names.append("(counts)" if isinstance(part, WordCounts) else repr(str(part)))
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
    if not total.counts:
        raise ValueError(f"the word counts {', '.join(map(str, names))} hold no words: there is nothing to train on; "
                         "count some text with `tinylm count-words`")
    return total
