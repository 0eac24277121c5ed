"""Encoding over worker processes: many texts (`encode_batch`) or one big file (`encode_file`).

A file is read in windows of about `WINDOW_CHARS` characters, each cut where no cut changes the
ids (after a special token, or at a safe pre-token boundary; see `BPETokenizer._find_stream_cut`),
so the concatenated ids equal one `encode` of the whole text. Workers write each window's ids as
uint32 into a shared-memory block and send back only its name and length; the parent copies the
ids out and frees the block. At most `IN_FLIGHT_PER_WORKER` windows per worker are read ahead, so
`encode_file_blocks` runs in memory bounded independently of the file size (a run without any
safe cut, e.g. megabytes without a space, is one window). A killed worker raises
`WorkerDiedError` within seconds.

Not imported by `bpe.py` (nor copied into saved model folders): `BPETokenizer.encode_batch` and
`encode_file` load this module on first use.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator
from itertools import accumulate
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import TYPE_CHECKING

from .grouping import group_by_size
from .process_pool import make_executor, map_in_order, resolve_workers

if TYPE_CHECKING:  # for annotations only: bpe.py loads this module, never the reverse
    from .bpe import BPETokenizer

# Below this many characters (or bytes of a file) the work is done in-process: a pool costs ~0.1 s.
PARALLEL_MIN_CHARS = 1 << 20
# Characters per file window (one task); a window's text and ids are a few MB at most.
WINDOW_CHARS = 1 << 20
# Characters of texts grouped into one encode_batch task.
BATCH_TASK_CHARS = 1 << 18
# Tasks submitted ahead per worker: enough to keep workers busy while the parent copies ids.
IN_FLIGHT_PER_WORKER = 2
_ID_TYPECODE = "I"  # uint32: every vocabulary id fits
_ID_BYTES = array(_ID_TYPECODE).itemsize

_WORKER_TOKENIZER: BPETokenizer | None = None


def encode_batch(
    tokenizer: BPETokenizer, texts: Iterable[str], num_workers: int | None = None
) -> list[list[int]]:
    """Encode many texts over `num_workers` processes (default: the usable CPUs); each equals `encode(text)`."""
    texts = list(texts)
    workers = resolve_workers(num_workers)
    if workers <= 1 or len(texts) <= 1 or sum(map(len, texts)) < PARALLEL_MIN_CHARS:
        return [tokenizer.encode(t) for t in texts]
    results: list[list[int]] = []
    with make_executor(workers, _init_worker, (tokenizer,)) as executor:
        blocks = map_in_order(executor, _encode_texts_to_shared, group_by_size(texts, len, BATCH_TASK_CHARS),
                              max_in_flight=workers * IN_FLIGHT_PER_WORKER, job="encoding a batch",
                              on_abandoned=_free_shared)
        for name, lengths in blocks:
            ids = _take_shared(name, sum(lengths)).tolist()
            ends = list(accumulate(lengths))
            results += [ids[end - n : end] for n, end in zip(lengths, ends)]
    return results


def encode_file(
    tokenizer: BPETokenizer,
    path: str | os.PathLike,
    num_workers: int | None = None,
    *,
    encoding: str = "utf-8",
) -> list[int]:
    """Encode a text file over `num_workers` processes; equals `encode(Path(path).read_text())`."""
    ids: list[int] = []
    for block in encode_file_blocks(tokenizer, path, num_workers, encoding=encoding):
        ids += block.tolist()
    return ids


def encode_file_blocks(
    tokenizer: BPETokenizer,
    path: str | os.PathLike,
    num_workers: int | None = None,
    *,
    encoding: str = "utf-8",
) -> Iterator[array]:
    """The ids of a text file as uint32 `array("I")` blocks in file order, in bounded memory.

    Their concatenation equals `encode(Path(path).read_text(encoding=...))` (universal newlines,
    invalid bytes replaced). Write the blocks straight to a token file, or view one as numpy with
    `np.frombuffer(block, dtype=np.uint32)`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    workers = resolve_workers(num_workers)
    with open(path, encoding=encoding, errors="replace") as handle:
        windows = tokenizer._iter_independent_pieces(iter(lambda: handle.read(WINDOW_CHARS), ""), WINDOW_CHARS)
        if workers <= 1 or path.stat().st_size < PARALLEL_MIN_CHARS:
            for window in windows:
                yield array(_ID_TYPECODE, tokenizer.encode(window))
            return
        with make_executor(workers, _init_worker, (tokenizer,)) as executor:
            blocks = map_in_order(executor, _encode_texts_to_shared, ([w] for w in windows),
                                  max_in_flight=workers * IN_FLIGHT_PER_WORKER,
                                  job=f"encoding {path}", on_abandoned=_free_shared)
            for name, (count,) in blocks:
                yield _take_shared(name, count)


# ------------------------------------------------------------------------------ worker side
def _init_worker(tokenizer: BPETokenizer) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = tokenizer


def _encode_texts_to_shared(texts: list[str]) -> tuple[str, list[int]]:
    """Worker: encode texts, write all ids into a new shared-memory block; return its name and the lengths."""
    encode = _WORKER_TOKENIZER.encode
    parts = [encode(text) for text in texts]
    ids = array(_ID_TYPECODE)
    for part in parts:
        ids.extend(part)
    block = SharedMemory(create=True, size=max(1, len(ids) * _ID_BYTES))
    try:
        with block.buf[: len(ids) * _ID_BYTES] as raw, raw.cast(_ID_TYPECODE) as view:
            view[:] = ids
    finally:
        block.close()
    return block.name, [len(part) for part in parts]


# ------------------------------------------------------------------------------ parent side
def _take_shared(name: str, count: int) -> array:
    """Copy `count` ids out of a worker's shared-memory block and free the block."""
    block = SharedMemory(name=name)
    try:
        ids = array(_ID_TYPECODE)
        with block.buf[: count * _ID_BYTES] as raw:
            ids.frombytes(raw)
        return ids
    finally:
        block.close()
        block.unlink()


def _free_shared(result: tuple[str, list[int]]) -> None:
    block = SharedMemory(name=result[0])
    block.close()
    block.unlink()
