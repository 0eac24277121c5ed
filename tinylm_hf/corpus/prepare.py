"""`prepare_dataset`: tokenize a corpus into `train.bin` / `val.bin` (see token_files.py).

Documents come from structure, never from text content: JSON-lines records, `datasets` rows, or
plain-text files cut by `split_documents` (separator lines, else blank lines, else fixed-size
pieces). Document text is tokenized as plain text (a literal `<|endoftext|>` inside it is not the
control token); the eos id is appended after every document. Plain-text and JSON-lines files are read as
they go (`StreamedDocuments`: a pass to measure, then one per split to tokenize, one document in memory at a time),
and so is a dataset in a local folder (`datasets` streaming); a `.json` file holding one JSON document (an array of
rows) and a dataset named on the Hub load through `datasets` (Arrow tables on disk, the Hub's beside its cached
tokens). Either way documents are tokenized in blocks over threads (`encode_rows`) and streamed into the token
files, so memory stays bounded by the block size and the largest document, never the corpus. Outputs are staged in a temporary folder and moved
into place at the end, so a failed run (a full disk, a kill) leaves earlier outputs intact and no
partial files.

Nothing is reused because of a name: local files are loaded and tokenized in the stage folder (no `datasets` cache
outlives the run), and the tokens of a named dataset are cached beside its rows in the `datasets` cache under a key
of what they depend on (the rows' fingerprint, the tokenizer's fingerprint, the column and end id), never the
tokenizer folder's path, so a tokenizer trained again in place tokenizes afresh.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import make_folders, make_temp, no_space
from ..tokenization.pretokenize import EOS_TOKEN
from ..tokenization.jit import resolve_workers
from ..tokenizer_loading import load_tokenizer
from .encode_rows import Encoder, encode_blocks, encode_rows, plain_encoder, row_blocks, text_blocks, text_lengths
from .sources import (
    check_json_rows,
    check_text_column,
    check_utf8_file,
    datasets_errors_unlogged,
    expand_inputs,
    is_json_lines,
    iter_file_documents,
    iter_json_lines,
    load_named_dataset,
    read_dataset_rows,
)
from .token_files import header_path, load_tokens, read_header, token_dtype, tokenizer_fingerprint, write_tokens

SPLITS = ("train", "val")
TOKENIZE_VERSION = 2  # part of the tokens' cache key: raise it when what `_tokenize_split` makes changes
CACHE_PREFIX = "tinylm-tokens-"  # a named dataset's cached tokens: <its datasets cache folder>/tinylm-tokens-<key>.bin


class StreamedDocuments:
    """Documents read as they go (text files, a streamed dataset), from the `first` up to the `last` (exclusive):
    every iteration reads the source again, so a corpus larger than memory is never held.

    `read()` gives (document, the rule that cut it, or None for rows); `rules` says whether the header counts them.
    """

    def __init__(self, read: Callable[[], Iterator[tuple[str, str | None]]], *, rules: bool, first: int = 0,
                 last: int | None = None) -> None:
        self.read, self.rules, self.first, self.last = read, rules, first, last

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        return islice(self.read(), self.first, self.last)

    def part(self, first: int, last: int | None) -> StreamedDocuments:
        """The documents from the `first` up to the `last` of these (from their start)."""
        return StreamedDocuments(self.read, rules=self.rules, first=first, last=last)


def _file_documents(files: Sequence[str]) -> StreamedDocuments:
    """The documents of UTF-8 text files (`iter_file_documents`), each with the rule that cut it."""
    return StreamedDocuments(lambda: (document for path in files for document in iter_file_documents(path)),
                             rules=True)


def _row_documents(rows: Any, column: str, dataset: str) -> StreamedDocuments:
    """The texts of a streamed `datasets` split (`IterableDataset`), each checked as `check_text_column` checks an
    Arrow table's (the column is there, and holds text, never null); a row that cannot be read is one line."""
    source = f"dataset {dataset}"

    def read() -> Iterator[tuple[str, None]]:
        for number, row in enumerate(read_dataset_rows(dataset, rows), 1):
            yield _row_text(row, column, source, number), None

    return StreamedDocuments(read, rules=False)


def _row_text(row: dict, column: str, source: str, number: int, at: str = "") -> str:
    """The text in `column` of row `number` of `source` (`at`: where in it), checked as `check_text_column` checks an
    Arrow table's: the column is there and holds text, never null."""
    if column not in row:
        raise ValueError(f"text column {column!r} is not in {source}{at} (columns: {list(row)}); pass --text-column")
    text = row[column]
    if text is None:
        raise ValueError(f"row {number} of {source} has no text in column {column!r} (null): remove the row or give it "
                         "a text")
    if not isinstance(text, str):
        raise ValueError(f"column {column!r} of {source} holds {type(text).__name__}, not text; name a text column "
                         "with --text-column")
    return text


def _json_documents(files: Sequence[str], column: str) -> StreamedDocuments:
    """The texts in `column` of JSON-lines files, read as they go (one line in memory at a time), each row checked as
    `check_text_column` checks an Arrow table's (the column is there and holds text, never null)."""
    def read() -> Iterator[tuple[str, None]]:
        for path in files:
            name = Path(path).name
            for row, (line, value) in enumerate(iter_json_lines(path), 1):
                if not isinstance(value, dict):
                    raise ValueError(f"input file {path}, line {line} is a JSON {type(value).__name__}, not an object "
                                     "(a row): give one JSON object per line")
                yield _row_text(value, column, name, row, at=f", line {line}"), None

    return StreamedDocuments(read, rules=False)


def _load_files(files: Sequence[str], text_column: str, cache_dir: Path) -> tuple[Any, str]:
    """The documents of text files or JSON-lines files (`StreamedDocuments`, read as they go), or a `datasets.Dataset`
    of rows where a `.json` file holds one JSON document (read whole); and their text column. Every file is checked
    to be UTF-8 first (`sources`' rule).

    `datasets` keys its cache of local files by their paths and times only, so JSON documents are loaded into
    `cache_dir` (the run's stage folder), never from an earlier run's cache."""
    from datasets import load_dataset

    for f in files:
        check_utf8_file(f)
    suffixes = {Path(f).suffix.lower() for f in files}
    if suffixes <= {".json", ".jsonl"} and all(is_json_lines(f) for f in files):
        return _json_documents(files, text_column), text_column
    if suffixes <= {".json", ".jsonl"}:
        try:
            with datasets_errors_unlogged():
                ds = load_dataset("json", data_files=list(files), split="train", cache_dir=str(cache_dir))
        except Exception:  # datasets' DatasetGenerationError, StopIteration of an empty file: name the file and line
            for f in files:
                check_json_rows(f)
            raise
        check_text_column(ds, text_column, ", ".join(Path(f).name for f in files))
        return ds, text_column
    if suffixes & {".json", ".jsonl"}:
        raise ValueError(f"mix of JSON and text inputs {list(files)}: prepare them separately")
    return _file_documents(files), "text"


def _load_input_files(input_files: Sequence[str | os.PathLike], val_files: Sequence[str | os.PathLike] | None,
                      text_column: str, cache_dir: Path) -> tuple[Any, Any, str, dict[str, Any]]:
    """(train documents, validation documents or None, text column, source record) of `--input` / `--val-data`
    paths or globs."""
    files = [str(f) for f in expand_inputs(input_files)]
    train_ds, column = _load_files(files, text_column, cache_dir)
    source: dict[str, Any] = {"input_files": [Path(f).name for f in files]}
    val_ds = None
    if val_files:
        val_paths = [str(f) for f in expand_inputs(val_files)]
        val_ds, _ = _load_files(val_paths, text_column, cache_dir)
        source["val_files"] = [Path(f).name for f in val_paths]
    return train_ds, val_ds, column, source


def _load_named(dataset: str, split: str | None, text_column: str) -> tuple[Any, Any, str, dict[str, Any]]:
    """(train rows, its validation split or None, text column, source record) of a `datasets` dataset, every text
    checked (no nulls). A local folder is streamed (`StreamedDocuments`: never copied, never held); a dataset name
    loads through the `datasets` cache (its revision keys it, and its tokens are cached beside it)."""
    from datasets import DatasetDict, IterableDatasetDict

    source = {"dataset": dataset, "split": split}
    if Path(str(dataset)).exists():
        loaded = load_named_dataset(dataset, split=split, streaming=True)
        parts = loaded if isinstance(loaded, IterableDatasetDict) else {"train": loaded}
        if "train" not in parts:
            raise ValueError(f"dataset {dataset} has no train split (splits: {sorted(parts)}); name one with --split")
        val = next((parts[n] for n in ("validation", "valid", "val", "test") if n in parts), None)
        train_docs = _row_documents(parts["train"], text_column, dataset)
        val_docs = None if val is None else _row_documents(val, text_column, dataset)
        return train_docs, val_docs, text_column, source
    loaded = load_named_dataset(dataset, split=split)
    val_ds = None
    if isinstance(loaded, DatasetDict):
        train_ds = loaded["train"]
        val_ds = next((loaded[n] for n in ("validation", "valid", "val", "test") if n in loaded), None)
    else:
        train_ds = loaded
    for part in (train_ds, val_ds):
        if part is not None:
            check_text_column(part, text_column, f"dataset {dataset}")
    return train_ds, val_ds, text_column, source


def tokenize_cache_key(ds: Any, fn_kwargs: dict[str, Any]) -> str:
    """The cache key of the tokens of `ds`: the rows (datasets' fingerprint of them), the tokenizer's fingerprint,
    the column and the end id (`fn_kwargs` less the folder's path), and this module's version."""
    options = {k: v for k, v in fn_kwargs.items() if k != "tokenizer_dir"}
    payload = json.dumps([ds._fingerprint, options, TOKENIZE_VERSION], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _carve_validation(ds: Any, column: str, val_fraction: float) -> tuple[Any, Any]:
    """The trailing documents holding about `val_fraction` of the characters become validation."""
    if isinstance(ds, StreamedDocuments):
        lengths = np.fromiter((len(text) for text, _ in ds), dtype=np.int64)
    else:
        lengths, _ = text_lengths(ds, column)
    if len(lengths) < 2:
        raise ValueError(
            "the input holds a single document: nothing to carve a validation split from; "
            "give --val-data, or more text"
        )
    from_end = np.cumsum(lengths[::-1])
    n_val = int(np.searchsorted(from_end, val_fraction * from_end[-1])) + 1
    cut = len(lengths) - min(max(n_val, 1), len(lengths) - 1)
    if isinstance(ds, StreamedDocuments):
        return ds.part(0, cut), ds.part(cut, None)
    return ds.select(range(cut)), ds.select(range(cut, len(ds)))


def document_end_id(tok: Any, where: str) -> int:
    """The id that ends each document: the eos token, else `<|endoftext|>`, else the sep token.

    A WordPiece (BERT-style) tokenizer has no eos token; BERT's pretraining data ends its segments
    with `[SEP]`, so its documents end with that.
    """
    vocab = tok.get_vocab()
    for token in (tok.eos_token, EOS_TOKEN, tok.sep_token):
        if token is not None and str(token) in vocab:
            return int(vocab[str(token)])
    raise ValueError(f"tokenizer in {where} has no eos token, {EOS_TOKEN!r} or sep token to end documents with")


def _load_sources(
    input_files: Sequence[str | os.PathLike] | None, val_files: Sequence[str | os.PathLike] | None,
    dataset: str | None, split: str | None, text_column: str, val_fraction: float, cache_dir: Path,
) -> tuple[Any, Any, str, dict[str, Any]]:
    """(training rows, validation rows, their text column, where the text came from).

    Text files, JSON-lines files and a dataset in a local folder are streamed; a `.json` document loads into
    `cache_dir`: `datasets` would know it again by its path and time alone. A dataset name loads through the `datasets` cache (its revision
    keys it)."""
    if input_files is not None:
        train_ds, val_ds, column, source = _load_input_files(input_files, val_files, text_column, cache_dir)
    else:
        train_ds, val_ds, column, source = _load_named(str(dataset), split, text_column)
    if val_ds is None:
        train_ds, val_ds = _carve_validation(train_ds, column, val_fraction)
        source["val_carved"] = val_fraction
    return train_ds, val_ds, column, source


def prepare_dataset(
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    input_files: Sequence[str | os.PathLike] | None = None,
    dataset: str | None = None,
    split: str | None = None,
    text_column: str = "text",
    val_fraction: float = 0.05,
    num_proc: int | None = None,
    val_files: Sequence[str | os.PathLike] | None = None,
    *,
    num_workers: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Tokenize a corpus into `out_dir/{train,val}.bin` with JSON headers; returns the two headers.

    The text comes from `input_files` (plain UTF-8 text, or JSON lines with a `text_column`) or a
    `datasets` dataset name. `val_files` (or the dataset's own validation split) become `val.bin`;
    otherwise the trailing documents holding `val_fraction` of the characters are carved off.
    Each header says how the documents were found (`split_rules`) and where the text came from.
    The documents are tokenized on `num_workers` threads (default: the usable CPUs); `num_proc` is the same
    count under its older name.
    """
    if (input_files is None) == (dataset is None):
        raise ValueError("give exactly one of input_files or dataset")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tokenizer_dir = str(tokenizer_dir)
    tok = load_tokenizer(tokenizer_dir)
    eos_id = document_end_id(tok, tokenizer_dir)
    if num_workers is not None and num_proc is not None and num_workers != num_proc:
        raise ValueError(f"num_workers={num_workers} and num_proc={num_proc} name the same thread count: give one")
    workers = resolve_workers(num_workers if num_workers is not None else num_proc)
    out = Path(out_dir)
    created = make_folders(out)  # the top folder this run made (None if out existed), removed if it fails
    max_id = max(tok.get_vocab().values())
    fingerprint = tokenizer_fingerprint(tok)
    base = {"tokenizer": os.path.abspath(tokenizer_dir), "tokenizer_fingerprint": fingerprint,
            "vocab_size": len(tok), "max_id": max_id, "eos_id": int(eos_id)}
    options = {"tokenizer_dir": tokenizer_dir, "column": text_column, "eos_id": int(eos_id), "fingerprint": fingerprint}
    stage = make_temp(out, "prepare", directory=True)  # a stage a killed prepare left is removed first
    try:
        train_ds, val_ds, options["column"], base["source"] = _load_sources(
            input_files, val_files, dataset, split, text_column, val_fraction, stage / "datasets")
        encode = plain_encoder(tok)
        headers = {name: _tokenize_split(ds, name, stage, token_dtype(max_id), base, options, encode, workers)
                   for name, ds in zip(SPLITS, (train_ds, val_ds))}
        for name in SPLITS:  # data first, headers last: a header never describes a missing array
            os.replace(stage / f"{name}.bin", out / f"{name}.bin")
        for name in SPLITS:
            os.replace(header_path(stage / f"{name}.bin"), header_path(out / f"{name}.bin"))
    except Exception as err:
        _reraise_interruption(err)
        converted = no_space(err, out, "free some space and run prepare again")
        if converted is err:
            raise
        raise converted from err
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_if_left_empty(out, created)
    return headers


def _reraise_interruption(err: BaseException) -> None:
    """Re-raise a Ctrl-C or a signal turned exception (`cli.Terminated`) that a library wrapped in an error of its own
    (`datasets` reports one that stops its loading as a failed generation): the run was stopped, nothing failed."""
    cause = err.__context__
    while cause is not None:
        if not isinstance(cause, Exception):
            raise cause from None
        cause = cause.__context__


def _tokenize_split(ds: Any, name: str, stage: Path, dtype: np.dtype, base: dict[str, Any], options: dict[str, Any],
                    encode: Encoder, workers: int) -> dict[str, Any]:
    """Tokenize one split's rows (or file documents) into `stage/<name>.bin` and its header (or take a named
    dataset's cached tokens); returns the header."""
    if isinstance(ds, StreamedDocuments):
        tally = _DocumentTally(ds)
        header: dict[str, Any] | Any = lambda: {**base, "split": name, **tally.counts()}  # noqa: E731
        chunks, cached, hit = encode_blocks(text_blocks(tally), encode, options["eos_id"], workers=workers), None, False
    else:
        column = options["column"]
        chars, nbytes = text_lengths(ds, column)
        header = {**base, "split": name, "documents": len(ds), "bytes": int(nbytes.sum())}
        cached = _cache_path(ds, options, stage)
        chunks = _cached_tokens(cached, header)
        hit = chunks is not None
        if not hit:
            chunks = encode_rows(ds, column, row_blocks(chars), encode, options["eos_id"], workers=workers)
    try:
        header = write_tokens(chunks, stage / f"{name}.bin", dtype, None, header)
    except MemoryError:
        raise OSError(errno.ENOMEM, f"out of memory while tokenizing the {name} split; nothing was written: free "
                      "some memory, or run with fewer --workers") from None
    if cached is not None and not hit:
        write_tokens(_slices(load_tokens(stage / f"{name}.bin")), cached, dtype, None, header)
    return header


class _DocumentTally:
    """The texts of streamed documents, counted as they pass: documents, UTF-8 bytes, and how many each rule cut."""

    def __init__(self, documents: StreamedDocuments) -> None:
        self.documents, self.rules, self.bytes, self.count = documents, Counter(), 0, 0

    def __iter__(self) -> Iterator[str]:
        for text, rule in self.documents:
            self.count += 1
            self.bytes += len(text.encode("utf-8"))
            if rule is not None:
                self.rules[rule] += 1
            yield text

    def counts(self) -> dict[str, Any]:
        """The header's counts, once every text has passed."""
        counts = {"documents": self.count, "bytes": self.bytes}
        return {**counts, "split_rules": dict(self.rules)} if self.documents.rules else counts


def _cache_path(ds: Any, options: dict[str, Any], stage: Path) -> Path | None:
    """Where the tokens of `ds` are cached: beside its Arrow files in the `datasets` cache, under its cache key.
    None for rows loaded into the stage folder (local files and folders: tokenized afresh in every run)."""
    files = getattr(ds, "cache_files", None)
    if not files:
        return None
    folder = Path(files[0]["filename"]).parent
    if folder.resolve().is_relative_to(stage.resolve()):
        return None
    return folder / f"{CACHE_PREFIX}{tokenize_cache_key(ds, options)}.bin"


def _cached_tokens(cached: Path | None, header: dict[str, Any]) -> Iterator[np.ndarray] | None:
    """The cached tokens at `cached` in slices, when they are there, whole and of these rows; else None."""
    if cached is None or not cached.is_file():
        return None
    try:
        tokens, kept = load_tokens(cached), read_header(cached)
    except (OSError, ValueError):  # a cache entry cut short or damaged: tokenized again
        return None
    if (kept["documents"], kept["bytes"]) != (header["documents"], header["bytes"]):
        return None
    return _slices(tokens)


def _slices(tokens: np.ndarray, size: int = 1 << 20) -> Iterator[np.ndarray]:
    for first in range(0, len(tokens), size):
        yield np.asarray(tokens[first : first + size])


def _remove_if_left_empty(out: Path, created: Path | None) -> None:
    """Remove the folders from `out` up to `created` (those this run made) when a failed run left them empty."""
    folder = out
    while created is not None and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        if folder == created:
            break
        folder = folder.parent
