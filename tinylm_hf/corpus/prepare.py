"""`prepare_dataset`: tokenize a corpus with `datasets` into `train.bin` / `val.bin` (see token_files.py).

Documents come from structure, never from text content: JSON-lines records, `datasets` rows, or
plain-text files cut by `split_documents` (separator lines, else blank lines, else fixed-size
pieces). Document text is tokenized as plain text (a literal `<|endoftext|>` inside it is not the
control token); the eos id is appended after every document. Outputs are staged in a temporary
folder and moved into place at the end, so a failed run (a full disk, a kill) leaves earlier
outputs intact and no partial files.

Nothing is reused because of a name: local files are loaded and tokenized in the stage folder (no `datasets` cache
outlives the run), and the tokenization of a named dataset is cached under a key of what it depends on (the rows'
fingerprint, the tokenizer's fingerprint, the column and end id), never the tokenizer folder's path, so a tokenizer
trained again in place tokenizes afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import make_folders, make_temp, no_space
from ..tokenization.pretokenize import EOS_TOKEN
from ..tokenization.plain_text import encode_plain
from ..tokenization.process_pool import WorkerDiedError
from ..tokenizer_loading import load_tokenizer
from .documents import choose_split_rule, split_documents
from .sources import TEXT_ENCODING, check_text_column, check_utf8_file, expand_inputs, load_named_dataset
from .token_files import header_path, token_dtype, tokenizer_fingerprint, write_tokens

SPLITS = ("train", "val")
_FINGERPRINTS: dict[int, str] = {}  # id of a loaded tokenizer -> its fingerprint, computed once per process
TOKENIZE_VERSION = 1  # part of the tokenization's cache key: raise it when `_tokenize` changes what it makes


def _split_text_file(batch: dict[str, list], column: str) -> dict[str, list]:
    docs, rules = [], []
    for text in batch[column]:
        rule = choose_split_rule(text)
        parts = split_documents(text, rule=rule)
        docs += parts
        rules += [rule] * len(parts)
    return {"text": docs, "split_rule": rules}


_FORKING_PARENT: list[int] = []  # while a pool starts: [pid, thread id] whose forked workers die with it
_BIND_CHILD: list[bool] = [False]  # set in the parent just before each fork: is this fork one to bind?
_PRCTL: list[Any] = []  # libc's prctl, looked up in the parent: a forked child imports nothing


def _before_fork() -> None:
    # Linux's PR_SET_PDEATHSIG fires when the forking *thread* exits: bind only the workers the `with` block's own
    # thread forks. A pool's helper thread that replaces a dead worker exits at the pool's end, and its children
    # would be killed then, holding the pool's queue lock.
    _BIND_CHILD[0] = bool(_FORKING_PARENT) and _FORKING_PARENT[1] == threading.get_ident()


def _die_with_parent() -> None:
    """At fork, in a child of `_workers_die_with_parent`: ask Linux to SIGKILL this process when its parent dies (a
    SIGKILLed prepare runs no cleanup, and a pool's workers would wait for work forever); exit if it is gone already."""
    if not _BIND_CHILD[0]:
        return
    _BIND_CHILD[0] = False  # the worker's own children are not ours to bind
    _PRCTL[0](1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != _FORKING_PARENT[0]:  # the parent died before the request was made
        os._exit(1)


@contextlib.contextmanager
def _workers_die_with_parent() -> Iterator[None]:
    """Processes this thread forks inside the `with` (the tokenizing pool's workers) are killed when it dies."""
    if sys.platform.startswith("linux"):
        if not _PRCTL:
            import ctypes

            _PRCTL[:] = [ctypes.CDLL(None, use_errno=True).prctl]
            os.register_at_fork(before=_before_fork, after_in_child=_die_with_parent)
        _FORKING_PARENT[:] = [os.getpid(), threading.get_ident()]
    try:
        yield
    finally:
        _FORKING_PARENT.clear()


def _tokenize(batch: dict[str, list], tokenizer_dir: str, column: str, eos_id: int,
              fingerprint: str) -> dict[str, list]:
    tok = load_tokenizer(tokenizer_dir)
    if id(tok) not in _FINGERPRINTS:  # the loader keeps what it loaded: an id is never reused for another tokenizer
        _FINGERPRINTS[id(tok)] = tokenizer_fingerprint(tok)
    if _FINGERPRINTS[id(tok)] != fingerprint:  # the folder was trained again while prepare ran
        raise ValueError(f"the tokenizer in {tokenizer_dir} changed while prepare ran (fingerprint "
                         f"{_FINGERPRINTS[id(tok)]}, {fingerprint} at the start): run prepare again")
    texts = batch[column]
    ids = encode_plain(tok, texts)
    ids = [doc + [eos_id] for doc in ids]
    return {"ids": ids, "n_tokens": [len(d) for d in ids], "n_bytes": [len(t.encode("utf-8")) for t in texts]}


def _load_files(files: Sequence[str], text_column: str, cache_dir: Path) -> tuple[Any, str]:
    """A `datasets.Dataset` of documents from text or JSON-lines files (read by `sources`' UTF-8 rule), and its
    text column.

    `datasets` keys its cache of local files by their paths and times only, so they are loaded into `cache_dir`
    (the run's stage folder), never from an earlier run's cache."""
    from datasets import load_dataset

    for f in files:
        check_utf8_file(f)
    suffixes = {Path(f).suffix.lower() for f in files}
    if suffixes <= {".json", ".jsonl"}:
        ds = load_dataset("json", data_files=list(files), split="train", cache_dir=str(cache_dir))
        check_text_column(ds, text_column, ", ".join(Path(f).name for f in files))
        return ds, text_column
    if suffixes & {".json", ".jsonl"}:
        raise ValueError(f"mix of JSON and text inputs {list(files)}: prepare them separately")
    # "text" is line-based; with sample_by="document" each file is one row, cut into documents here.
    raw = load_dataset("text", data_files=list(files), sample_by="document", split="train", encoding=TEXT_ENCODING,
                       cache_dir=str(cache_dir))
    docs = raw.map(_split_text_file, batched=True, batch_size=1, remove_columns=raw.column_names,
                   fn_kwargs={"column": "text"}, desc="splitting documents")
    return docs, "text"


def _load_input_files(input_files: Sequence[str | os.PathLike], val_files: Sequence[str | os.PathLike] | None,
                      text_column: str, cache_dir: Path) -> tuple[Any, Any, str, dict[str, Any]]:
    """(train documents, validation documents or None, text column, source record) of `--input` / `--val-input`
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


def _load_named(dataset: str, split: str | None, text_column: str, cache_dir: Path) -> tuple[Any, Any, str, dict[str, Any]]:
    """(train rows, its validation split or None, text column, source record) of a `datasets` dataset, every text
    checked (no nulls). A local folder loads into `cache_dir`; a dataset name through the `datasets` cache (its
    revision keys it)."""
    from datasets import DatasetDict

    local = Path(str(dataset)).exists()
    loaded = load_named_dataset(dataset, split=split, cache_dir=str(cache_dir) if local else None)
    val_ds = None
    if isinstance(loaded, DatasetDict):
        train_ds = loaded["train"]
        val_ds = next((loaded[n] for n in ("validation", "valid", "val", "test") if n in loaded), None)
    else:
        train_ds = loaded
    for part in (train_ds, val_ds):
        if part is not None:
            check_text_column(part, text_column, f"dataset {dataset}")
    return train_ds, val_ds, text_column, {"dataset": dataset, "split": split}


def tokenize_cache_key(ds: Any, fn_kwargs: dict[str, Any]) -> str:
    """The `datasets` cache key of tokenizing `ds`: the rows (datasets' fingerprint of them), the tokenizer's
    fingerprint, the column and the end id (`fn_kwargs` less the folder's path), and this module's version."""
    options = {k: v for k, v in fn_kwargs.items() if k != "tokenizer_dir"}
    payload = json.dumps([ds._fingerprint, options, TOKENIZE_VERSION], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _map_in_workers(ds: Any, function: Any, *, num_proc: int, desc: str, fn_kwargs: dict[str, Any],
                    new_fingerprint: str | None = None) -> Any:
    """`ds.map` over `num_proc` worker processes; a worker that dies (killed, out of memory) is a clear error."""
    from multiprocess.context import ProcessError  # datasets' pool reports a lost worker through these

    try:
        with _workers_die_with_parent():
            return ds.map(function, batched=True, num_proc=num_proc, remove_columns=ds.column_names,
                          fn_kwargs=fn_kwargs, desc=desc, new_fingerprint=new_fingerprint)
    except (RuntimeError, EOFError, ConnectionError, ProcessError) as err:
        _reraise_interruption(err)
        if num_proc > 1 and ("died" in str(err) or not isinstance(err, RuntimeError)):
            raise WorkerDiedError(
                f"a worker process died while {desc} (killed, or out of memory?); nothing was written. "
                "Run again, with a lower --num-proc if memory is short"
            ) from err
        raise


def _reraise_interruption(err: BaseException) -> None:
    """Re-raise a Ctrl-C or a signal turned exception (`cli.Terminated`) that `datasets`' pool reported as a dead
    worker while it stopped the workers: the run was stopped, no worker failed."""
    cause = err.__context__
    while cause is not None:
        if not isinstance(cause, Exception):
            raise cause from None
        cause = cause.__context__


def _carve_validation(ds: Any, column: str, val_fraction: float) -> tuple[Any, Any]:
    """The trailing documents holding about `val_fraction` of the characters become validation."""
    if len(ds) < 2:
        raise ValueError(
            "the input holds a single document: nothing to carve a validation split from; "
            "give --val-input, or more text"
        )
    lengths = np.fromiter((len(t) for t in ds[column]), dtype=np.int64, count=len(ds))
    from_end = np.cumsum(lengths[::-1])
    n_val = int(np.searchsorted(from_end, val_fraction * from_end[-1])) + 1
    n_val = min(max(n_val, 1), len(ds) - 1)
    return ds.select(range(len(ds) - n_val)), ds.select(range(len(ds) - n_val, len(ds)))


def _id_chunks(tokenized: Any, rows: int = 1024) -> Iterator[np.ndarray]:
    for first in range(0, len(tokenized), rows):
        ids = tokenized[first : first + rows]["ids"]
        yield np.fromiter((t for doc in ids for t in doc), dtype=np.int64)


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

    Local files, and a dataset that is a local folder, load into `cache_dir`: `datasets` would know them again by
    their paths and times alone. A dataset name loads through the `datasets` cache (its revision keys it)."""
    if input_files is not None:
        train_ds, val_ds, column, source = _load_input_files(input_files, val_files, text_column, cache_dir)
    else:
        train_ds, val_ds, column, source = _load_named(str(dataset), split, text_column, cache_dir)
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
) -> dict[str, dict[str, Any]]:
    """Tokenize a corpus into `out_dir/{train,val}.bin` with JSON headers; returns the two headers.

    The text comes from `input_files` (plain UTF-8 text, or JSON lines with a `text_column`) or a
    `datasets` dataset name. `val_files` (or the dataset's own validation split) become `val.bin`;
    otherwise the trailing documents holding `val_fraction` of the characters are carved off.
    Each header says how the documents were found (`split_rules`) and where the text came from.
    """
    if (input_files is None) == (dataset is None):
        raise ValueError("give exactly one of input_files or dataset")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tokenizer_dir = str(tokenizer_dir)
    tok = load_tokenizer(tokenizer_dir)
    eos_id = document_end_id(tok, tokenizer_dir)
    num_proc = num_proc or max(1, min(4, os.cpu_count() or 1))
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
        headers = {name: _tokenize_split(ds, name, stage, token_dtype(max_id), base, options, num_proc)
                   for name, ds in zip(SPLITS, (train_ds, val_ds))}
        for name in SPLITS:  # data first, headers last: a header never describes a missing array
            os.replace(stage / f"{name}.bin", out / f"{name}.bin")
        for name in SPLITS:
            os.replace(header_path(stage / f"{name}.bin"), header_path(out / f"{name}.bin"))
    except Exception as err:
        converted = no_space(err, out, "free some space and run prepare again")
        if converted is err:
            raise
        raise converted from err
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_if_left_empty(out, created)
    return headers


def _tokenize_split(ds: Any, name: str, stage: Path, dtype: np.dtype, base: dict[str, Any], options: dict[str, Any],
                    num_proc: int) -> dict[str, Any]:
    """Tokenize one split's rows into `stage/<name>.bin` and its header; returns the header."""
    tokenized = _map_in_workers(ds, _tokenize, num_proc=min(num_proc, max(1, len(ds))), desc=f"tokenizing {name}",
                                fn_kwargs=options, new_fingerprint=tokenize_cache_key(ds, options))
    header = {**base, "split": name, "documents": len(ds), "bytes": int(sum(tokenized["n_bytes"]))}
    if "split_rule" in ds.column_names:
        header["split_rules"] = dict(Counter(ds["split_rule"]))
    total = int(sum(tokenized["n_tokens"]))
    return write_tokens(_id_chunks(tokenized), stage / f"{name}.bin", dtype, total, header)


def _remove_if_left_empty(out: Path, created: Path | None) -> None:
    """Remove the folders from `out` up to `created` (those this run made) when a failed run left them empty."""
    folder = out
    while created is not None and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        if folder == created:
            break
        folder = folder.parent
