"""Dataset rows to token ids as plain text, in blocks of rows over threads: prepare's tokenizing stage.

Rows are read from their Arrow table in blocks of about `BLOCK_CHARS` characters and encoded on `workers` threads,
at most a few blocks ahead of the writer, so memory is bounded by the block size whatever the corpus size; the ids
come back in row order as one int64 array per block, an end id after every row.

Text is plain text (`plain_text.encode_plain`: a special token's spelling is ordinary characters). TinyLM's
byte-level BPE encodes straight through its core (`BPETokenizer.encode_batch`, numba kernels that release the GIL,
so threads encode at once): the Hugging Face layer would hand the core each text unchanged. Every other tokenizer
(the other families' reference encoders, a `tokenizers` backend) runs `encode_plain` itself on the same threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..tokenization.jit import group_by_chars, map_in_threads
from ..tokenization.plain_text import encode_plain, refuse_forged_text

BLOCK_CHARS = 1 << 20  # characters of text per block of rows (one thread task)

Encoder = Callable[[list[str]], list[list[int]]]  # texts -> each text's ids, encoded in the calling thread


def plain_encoder(tokenizer: Any) -> Encoder:
    """A function giving each text's plain-text ids (`encode_plain`'s), encoding in the thread that calls it."""
    from ..tokenization.bpe.tokenization_tinylm import TinyLMTokenizer

    core = getattr(tokenizer, "core", None)
    if (isinstance(tokenizer, TinyLMTokenizer) and not tokenizer.add_prefix_space and not core.special_tokens
            and all(token.special for token in tokenizer.added_tokens_decoder.values())):
        # What `tokenize` does with split_special_tokens=True: no added token matches, the whole text is encoded.
        core.encode_ordinary("")  # builds the kernel's tables here, once, before threads would race to
        def encode_core(texts: list[str]) -> list[list[int]]:
            refuse_forged_text(tokenizer, texts)
            return core.encode_batch(texts, num_workers=1)

        return encode_core
    return lambda texts: encode_plain(tokenizer, texts)


def text_lengths(ds: Any, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(characters, UTF-8 bytes) of each row's text in `column`, read from the Arrow table (no Python strings)."""
    import pyarrow.compute as pc

    chars, nbytes = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for table in ds.with_format("arrow").iter(batch_size=1 << 16):
        chars.append(pc.utf8_length(table[column]).to_numpy().astype(np.int64))
        nbytes.append(pc.binary_length(table[column]).to_numpy().astype(np.int64))
    return np.concatenate(chars), np.concatenate(nbytes)


def row_blocks(chars: np.ndarray, block_chars: int = BLOCK_CHARS) -> list[tuple[int, int]]:
    """Row ranges `[first, last)` of at least `block_chars` characters each (the last may hold fewer).

    >>> row_blocks(np.array([3, 3, 3, 10, 1]), 5)
    [(0, 2), (2, 4), (4, 5)]
    """
    ends = np.cumsum(chars)
    blocks, first = [], 0
    while first < len(chars):
        start = int(ends[first - 1]) if first else 0
        last = min(int(np.searchsorted(ends, start + block_chars)) + 1, len(chars))
        blocks.append((first, last))
        first = last
    return blocks


def with_end_ids(ids: list[list[int]], end_id: int) -> np.ndarray:
    """The ids of each text, `end_id` after each, as one int64 array."""
    flat: list[int] = []
    for text_ids in ids:
        flat += text_ids
        flat.append(end_id)
    return np.array(flat, dtype=np.int64)


def encode_rows(ds: Any, column: str, blocks: Iterable[tuple[int, int]], encode: Encoder, end_id: int, *,
                workers: int) -> Iterator[np.ndarray]:
    """The ids of the text in `column` of each block of rows (`row_blocks`), `end_id` after each row, in order.

    Blocks are read in this thread (the Arrow reader) and encoded by `encode` on `workers` threads.
    """
    yield from encode_blocks((ds[first:last][column] for first, last in blocks), encode, end_id, workers=workers)


def text_blocks(texts: Iterable[str], block_chars: int = BLOCK_CHARS) -> Iterator[list[str]]:
    """Texts gathered into lists of at least `block_chars` characters (the last may hold fewer), in order."""
    return group_by_chars(texts, block_chars)


def encode_blocks(blocks: Iterable[list[str]], encode: Encoder, end_id: int, *, workers: int) -> Iterator[np.ndarray]:
    """The ids of each block of texts, `end_id` after each text, in order; blocks are taken in this thread as the
    threads need them (a few ahead), so a stream of texts is never held whole."""
    yield from map_in_threads(lambda block: with_end_ids(encode(block), end_id), blocks, workers)
