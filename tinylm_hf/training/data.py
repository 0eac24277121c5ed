"""Token data: random training batches, a sequential evaluation iterator, and `tinylm prepare`.

A prepared dataset is a folder with one flat token array per split (`train.bin`, `val.bin`, raw
little-endian uint16/uint32) and a JSON header beside each (`train.json`, `val.json`) saying the dtype,
the token count, the UTF-8 byte count of the text (for bits per byte), the tokenizer and the source.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..fileio import write_json_atomic

EOS_MARKER = "<|endoftext|>"


# ----------------------------------------------------------------------------- batches


def _check_batch_args(n_tokens: int, batch_size: int, context_length: int) -> None:
    if batch_size <= 0 or context_length <= 0:
        raise ValueError(f"batch_size and context_length must be positive, got {batch_size}, {context_length}")
    if n_tokens <= context_length:
        raise ValueError(
            f"data has {n_tokens} tokens, need more than context_length={context_length} to draw a batch"
        )


def sample_starts(
    n_tokens: int, batch_size: int, context_length: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Uniform random window starts in `[0, n_tokens - context_length)` (every valid start reachable)."""
    _check_batch_args(n_tokens, batch_size, context_length)
    return torch.randint(0, n_tokens - context_length, (batch_size,), generator=generator)


def batch_from_starts(
    data: np.ndarray, starts: Sequence[int] | torch.Tensor, context_length: int, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut `(x, y)` windows of `context_length` tokens at `starts`; `y` is `x` shifted by one."""
    rows = np.stack([np.asarray(data[int(s) : int(s) + context_length + 1], dtype=np.int64) for s in starts])
    xy = torch.from_numpy(rows)  # (B, T + 1)
    x, y = xy[:, :-1], xy[:, 1:]
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


def get_batch(
    data: np.ndarray,
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw `batch_size` random windows from the 1-D token array `data`.

    Returns `(x, y)`, long tensors of shape `(batch_size, context_length)` on `device`, with
    `y[i] = data[s_i + 1 : s_i + context_length + 1]`. Pass a seeded `torch.Generator` for a
    reproducible stream (its state is what a training checkpoint saves as the sampler state).
    """
    if getattr(data, "ndim", 1) != 1:
        raise ValueError(f"data must be a 1-D token array, got shape {getattr(data, 'shape', None)}")
    starts = sample_starts(len(data), batch_size, context_length, generator)
    return batch_from_starts(data, starts, context_length, device)


def iter_eval_batches(
    data: np.ndarray, batch_size: int, context_length: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Walk `data` once in order: every token after the first is a target exactly once.

    Windows start at `0, T, 2T, ...`; full windows come `batch_size` at a time (the last batch may
    hold fewer rows) and a final shorter window, if any tokens are left, comes as its own batch.
    Tensors are long and on the CPU.
    """
    n = len(data)
    _check_batch_args(n, batch_size, context_length)
    n_full = (n - 1) // context_length
    for first in range(0, n_full, batch_size):
        starts = range(first * context_length, min(first + batch_size, n_full) * context_length, context_length)
        yield batch_from_starts(data, list(starts), context_length, "cpu")
    tail_start = n_full * context_length
    if n - 1 - tail_start > 0:
        tail = torch.from_numpy(np.asarray(data[tail_start:], dtype=np.int64))[None]  # (1, r + 1)
        yield tail[:, :-1], tail[:, 1:]


# ----------------------------------------------------------------------------- token files


def read_header(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON header beside a `.bin` token file (`train.bin` -> `train.json`)."""
    header_path = Path(path).with_suffix(".json")
    if not header_path.is_file():
        raise FileNotFoundError(f"no header {header_path} beside {path}; make the data with `tinylm prepare`")
    return json.loads(header_path.read_text())


def load_tokens(path: str | os.PathLike) -> np.memmap:
    """Open a prepared `.bin` token file as a read-only `np.memmap`, using its JSON header."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file {path} does not exist; make it with `tinylm prepare`")
    header = read_header(path)
    return np.memmap(path, dtype=np.dtype(header["dtype"]), mode="r", shape=(int(header["count"]),))




def write_tokens(ds: Any, path: Path, dtype: np.dtype, header: dict[str, Any], desc: str) -> dict[str, Any]:
    """Write the `ids` column of a tokenized `datasets.Dataset` as one flat array, plus its header."""
    from tqdm.auto import tqdm

    total = int(sum(ds["n_tokens"]))
    n_bytes = int(sum(ds["n_bytes"]))
    tmp = path.with_name(path.name + ".tmp")
    out = np.memmap(tmp, dtype=dtype, mode="w+", shape=(max(total, 1),))
    pos = 0
    shard = 1024
    with tqdm(total=total, desc=desc, unit="tok", unit_scale=True) as bar:
        for first in range(0, len(ds), shard):
            ids = ds[first : first + shard]["ids"]
            flat = np.fromiter((t for doc in ids for t in doc), dtype=np.int64)
            out[pos : pos + len(flat)] = flat.astype(dtype)
            pos += len(flat)
            bar.update(len(flat))
    out.flush()
    del out
    if total == 0:
        with open(tmp, "r+b") as fh:
            fh.truncate(0)
    os.replace(tmp, path)
    header = {**header, "dtype": np.dtype(dtype).name, "count": total, "bytes": n_bytes, "documents": len(ds)}
    write_json_atomic(path.with_suffix(".json"), header)
    return header


# ----------------------------------------------------------------------------- prepare

_TOKENIZERS: dict[str, Any] = {}


def _tokenizer(tokenizer_dir: str) -> Any:
    # one tokenizer per (worker) process: datasets pickles the map function, not the tokenizer.
    if tokenizer_dir not in _TOKENIZERS:
        from transformers import AutoTokenizer

        try:
            import tinylm_hf  # noqa: F401  (registers TinyLM's tokenizer classes)
        except ImportError:  # pragma: no cover
            pass
        _TOKENIZERS[tokenizer_dir] = AutoTokenizer.from_pretrained(tokenizer_dir)
    return _TOKENIZERS[tokenizer_dir]


def _split_documents(batch: dict[str, list], text_column: str) -> dict[str, list]:
    docs: list[str] = []
    for text in batch[text_column]:
        for part in text.split(EOS_MARKER):
            part = part.strip("\n")
            if part.strip():
                docs.append(part)
    return {"text": docs}


def _tokenize(batch: dict[str, list], tokenizer_dir: str, text_column: str, eos_id: int) -> dict[str, list]:
    tok = _tokenizer(tokenizer_dir)
    texts = [t for t in batch[text_column]]
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    ids = [doc + [eos_id] for doc in ids]
    return {
        "ids": ids,
        "n_tokens": [len(doc) for doc in ids],
        "n_bytes": [len(t.encode("utf-8")) for t in texts],
    }


def _load_text_files(files: Sequence[str], num_proc: int) -> Any:
    """Load plain-text or JSON-lines files with `datasets`; text files are cut into documents at `<|endoftext|>`."""
    from datasets import load_dataset

    for f in files:
        if not Path(f).is_file():
            raise FileNotFoundError(f"input file {f} does not exist")
    suffixes = {Path(f).suffix.lower() for f in files}
    if suffixes <= {".json", ".jsonl"}:
        return load_dataset("json", data_files=list(map(str, files)), split="train"), "json"
    if suffixes & {".json", ".jsonl"}:
        raise ValueError(f"mix of JSON and text inputs {list(files)}: prepare them separately")
    # "text" is line-based; a whole file is one sample with sample_by="document", then split on the marker.
    raw = load_dataset("text", data_files=list(map(str, files)), sample_by="document", split="train")
    docs = raw.map(_split_documents, batched=True, batch_size=1, remove_columns=raw.column_names,
                   fn_kwargs={"text_column": "text"}, desc="splitting documents")
    return docs, "text"


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
    """Tokenize a corpus into `out_dir/{train,val}.bin` (+ JSON headers); returns the two headers.

    The text comes from `input_files` (plain text with documents separated by `<|endoftext|>` lines,
    or JSON lines with a `text_column`) or from a `datasets` dataset name. `val_files` (or the
    dataset's own validation split) become `val.bin`; otherwise the last `val_fraction` of the
    documents is carved off. The eos id is appended after every document.
    """
    from datasets import DatasetDict, load_dataset

    if (input_files is None) == (dataset is None):
        raise ValueError("give exactly one of input_files or dataset")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tokenizer_dir = str(tokenizer_dir)
    if not Path(tokenizer_dir).is_dir():
        raise FileNotFoundError(f"tokenizer folder {tokenizer_dir} does not exist")
    num_proc = num_proc or max(1, min(4, os.cpu_count() or 1))
    tok = _tokenizer(tokenizer_dir)
    eos_id = tok.eos_token_id
    if eos_id is None:
        eos_id = tok.convert_tokens_to_ids(EOS_MARKER)
    if eos_id is None:
        raise ValueError(f"tokenizer in {tokenizer_dir} has no eos token (or {EOS_MARKER!r})")

    val_ds = None
    if input_files is not None:
        files = [str(f) for f in input_files]
        train_ds, _ = _load_text_files(files, num_proc)
        source = {"input_files": [os.path.abspath(f) for f in files]}
        if val_files:
            val_ds, _ = _load_text_files([str(f) for f in val_files], num_proc)
            source["val_files"] = [os.path.abspath(str(f)) for f in val_files]
    else:
        loaded = load_dataset(dataset, split=split)
        source = {"dataset": dataset, "split": split}
        if isinstance(loaded, DatasetDict):
            train_ds = loaded["train"]
            for name in ("validation", "valid", "val", "test"):
                if name in loaded:
                    val_ds = loaded[name]
                    break
        else:
            train_ds = loaded
    column = text_column if text_column in train_ds.column_names else "text"
    if column not in train_ds.column_names:
        raise ValueError(f"text column {text_column!r} not in dataset columns {train_ds.column_names}")
    if val_ds is None:
        n_val = max(1, int(round(len(train_ds) * val_fraction)))
        if len(train_ds) < 2:
            raise ValueError("need at least 2 documents to carve off a validation split")
        parts = train_ds.train_test_split(test_size=n_val, shuffle=False)
        train_ds, val_ds = parts["train"], parts["test"]

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = np.dtype(np.uint16) if len(tok) <= 65536 else np.dtype(np.uint32)
    headers = {}
    for name, ds in (("train", train_ds), ("val", val_ds)):
        col = column if column in ds.column_names else "text"
        tokenized = ds.map(
            _tokenize,
            batched=True,
            num_proc=min(num_proc, max(1, len(ds))),
            remove_columns=ds.column_names,
            fn_kwargs={"tokenizer_dir": tokenizer_dir, "text_column": col, "eos_id": int(eos_id)},
            desc=f"tokenizing {name}",
        )
        header = {"tokenizer": os.path.abspath(tokenizer_dir), "vocab_size": len(tok), "eos_id": int(eos_id),
                  "source": source, "split": name}
        headers[name] = write_tokens(tokenized, out / f"{name}.bin", dtype, header, desc=f"writing {name}.bin")
    return headers


def add_prepare_parser(subparsers: Any) -> None:
    """`tinylm prepare`: tokenize text files or a `datasets` dataset into train.bin/val.bin."""
    p = subparsers.add_parser("prepare", help="tokenize a corpus into train.bin / val.bin for training")
    p.add_argument("--tokenizer", required=True, help="folder of a saved tokenizer (AutoTokenizer)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", help="text files (<|endoftext|>-separated) or .jsonl files")
    src.add_argument("--dataset", help="a datasets name (needs network unless cached)")
    p.add_argument("--val-input", nargs="+", default=None, help="validation files (else carved off)")
    p.add_argument("--split", default=None, help="dataset split (with --dataset)")
    p.add_argument("--text-column", default="text", help="column holding the text (default: text)")
    p.add_argument("--val-fraction", type=float, default=0.05, help="share of documents for validation")
    p.add_argument("--num-proc", type=int, default=None, help="tokenizing processes")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=_run_prepare)


def _run_prepare(args: argparse.Namespace) -> int:
    headers = prepare_dataset(
        args.tokenizer, args.out, input_files=args.input, dataset=args.dataset, split=args.split,
        text_column=args.text_column, val_fraction=args.val_fraction, num_proc=args.num_proc,
        val_files=args.val_input,
    )
    for name, h in headers.items():
        print(f"{name}: {h['count']:,} tokens ({h['dtype']}), {h['documents']:,} documents")
    return 0
