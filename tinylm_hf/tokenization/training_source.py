"""A trainer's source, told apart in one place: a text file, word counts or texts (`read_training_source`).

Every family's trainer (`train_bpe`, `train_wordpiece`, `train_unigram`, `train_sentencepiece_bpe`) takes one of
the three as its first argument and gets its checked words from here; each family says how it counts a file and
texts and how it checks counts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar, Union

# A trainer's first argument: a UTF-8 text file, word counts (counted elsewhere, e.g. summed shards) or texts.
TrainingSource = Union[str, os.PathLike, Mapping, Iterable[str]]
Words = TypeVar("Words")


def read_training_source(
    source: TrainingSource,
    *,
    count_file: Callable[[str], Words],
    count_texts: Callable[[Iterable[str]], Words],
    check_counts: Callable[[Mapping], Words],
    nothing: str,
    counts_types: tuple[type, ...] = (Mapping,),
    size: Callable[[Words], int] = len,
    counts_may_be_empty: bool = False,
) -> Words:
    """A family's checked words from a trainer's `source`, the one place a trainer tells its sources apart.

    A `str` or `os.PathLike` is a text file (`count_file` gets its path, checked to be a non-empty file); a
    `Mapping` (or another of `counts_types`) is word counts (`check_counts`); anything else is texts
    (`count_texts`, which rejects what is no iterable of strings). Words of `size` 0 are a ValueError naming the
    source: "training file 'x' holds no {nothing}", "the iterator holds no {nothing}" or "counts hold no word
    with a positive count" (unless `counts_may_be_empty`: byte-level BPE learns its bytes from no words at all).
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"training file not found: {path!r}")
        if os.path.getsize(path) == 0:
            raise ValueError(f"training file {path!r} is empty")
        words, empty = count_file(path), f"training file {path!r} holds no {nothing}"
    elif isinstance(source, counts_types):
        words, empty = check_counts(source), "counts hold no word with a positive count"
        if counts_may_be_empty:
            return words
    else:
        words, empty = count_texts(source), f"the iterator holds no {nothing}"
    if not size(words):
        raise ValueError(empty)
    return words
