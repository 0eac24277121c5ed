"""The prepared-data format: one flat token array per split (`train.bin`, `val.bin`) and a JSON header.

The array is raw little-endian uint16 or uint32 (the narrowest that holds the largest id the
tokenizer can produce). The header beside it (`train.json`) records the dtype, the token count,
the UTF-8 byte count of the text (for bits per byte), the document count, the tokenizer (folder and
fingerprint, so a run never mixes data of two tokenizers), where the text came from and a digest of the tokens
(`token_digest`, so a resumed run knows its data by content).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_output, check_input_file, write_json_atomic

HEADER_SUFFIX = ".json"
TOKEN_DTYPES = ("uint16", "uint32", "uint8")  # token ids (token_dtype), and uint8 0/1 flags (static masks)


def header_path(path: str | os.PathLike) -> Path:
    """`train.bin` -> `train.json`."""
    return Path(path).with_suffix(HEADER_SUFFIX)


def read_header(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON header beside a `.bin` token file."""
    header = header_path(path)
    if not header.is_file():
        raise FileNotFoundError(f"no header {header} beside {path}; make the data with `tinylm prepare`")
    try:
        values = json.loads(header.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"header {header} is corrupt ({err}); re-run `tinylm prepare`") from None
    problem = header_problem(values)
    if problem:
        raise ValueError(f"header {header} is corrupt ({problem}); re-run `tinylm prepare`")
    return values


HEADER_COUNTS = ("count", "vocab_size", "max_id", "bytes", "documents")  # integers >= 0 where present (`count` always)


def header_problem(values: Any) -> str | None:
    """What is wrong with a parsed header's shape (a JSON object, a known dtype, counts that are integers >= 0),
    or None."""
    if not isinstance(values, dict):
        return f"a JSON object is expected, not {type(values).__name__}"
    if values.get("dtype") not in TOKEN_DTYPES:
        return f"dtype {values.get('dtype')!r} is not one of {', '.join(TOKEN_DTYPES)}"
    for key in HEADER_COUNTS:
        value = values.get(key, 0) if key != "count" else values.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{key} {value!r} is not an integer >= 0"
    eos, max_id, vocab_size = values.get("eos_id"), values.get("max_id"), values.get("vocab_size")
    if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int) or eos < 0):
        return f"eos_id {eos!r} is not an integer >= 0"
    if max_id is not None and vocab_size is not None and vocab_size > max_id + 1:
        return f"vocab_size {vocab_size:,} is more ids than 0..max_id {max_id:,} hold"
    if max_id is not None and eos is not None and eos > max_id:
        return f"eos_id {eos:,} is above max_id {max_id:,}"
    return None


def load_tokens(path: str | os.PathLike) -> np.memmap:
    """Open a prepared `.bin` token file as a read-only `np.memmap`, checking it against its header."""
    path = Path(path)
    check_input_file(path, "token file", "make it with `tinylm prepare`")
    header = read_header(path)
    dtype, count = np.dtype(header["dtype"]), int(header["count"])  # their shape checked by read_header
    if path.stat().st_size != count * dtype.itemsize:
        raise ValueError(
            f"token file {path} has {path.stat().st_size} bytes but its header promises {count} {dtype.name} "
            "tokens: it is truncated or from another run; re-run `tinylm prepare`"
        )
    if count == 0:
        return np.zeros(0, dtype=dtype)
    tokens = np.memmap(path, dtype=dtype, mode="r", shape=(count,))
    _check_ids(tokens, header, path)
    return tokens


def _check_ids(tokens: np.ndarray, header: dict[str, Any], path: Path) -> None:
    """Token ids must be ids of the header's vocabulary (up to its `max_id`, else below its `vocab_size`), stored in
    the dtype `prepare` picks for them: a header that lies about the dtype makes ids out of range, or too narrow a
    dtype."""
    vocab_size, max_id = header.get("vocab_size"), header.get("max_id")
    if tokens.dtype == np.uint8:
        _check_flags(tokens, header, path)
        return
    if vocab_size is None and max_id is None:  # no vocabulary to check the ids against
        return
    largest_allowed = max_id if max_id is not None else (vocab_size - 1 if isinstance(vocab_size, int) else None)
    if isinstance(largest_allowed, bool) or not isinstance(largest_allowed, int) or largest_allowed < 0:
        raise ValueError(f"the header of {path} gives vocab_size {vocab_size!r} / max_id {max_id!r}: "
                         "re-run `tinylm prepare`")
    if tokens.dtype.itemsize < token_dtype(largest_allowed).itemsize:
        raise ValueError(f"the header of {path} gives dtype {tokens.dtype.name}, too narrow for ids up to "
                         f"{largest_allowed:,}: the header does not describe this file; re-run `tinylm prepare`")
    if tokens.dtype.itemsize > token_dtype(largest_allowed).itemsize:
        raise ValueError(f"the header of {path} gives dtype {tokens.dtype.name}, but `tinylm prepare` stores ids up to "
                         f"{largest_allowed:,} as {token_dtype(largest_allowed).name}: the header does not describe "
                         "this file; re-run `tinylm prepare`")
    largest = int(tokens.max())
    if largest > largest_allowed:
        raise ValueError(f"{path} holds token id {largest:,}, outside its header's vocabulary (ids up to "
                         f"{largest_allowed:,}): the header's dtype or vocabulary does not describe this file; "
                         "re-run `tinylm prepare`")


def _check_flags(flags: np.ndarray, header: dict[str, Any], path: Path) -> None:
    """uint8 holds only 0/1 flags (static masks; their header says `"flags": true`), never token ids: a token file
    whose header says uint8 (its count doubled, say) is refused."""
    if not header.get("flags"):
        raise ValueError(f"the header of {path} gives dtype uint8, which only 0/1 flag files (static masks) are stored "
                         "in, not token ids: the header does not describe this file; re-run `tinylm prepare` (and "
                         "`--mlm-static` for masks)")
    if flags.size and int(flags.max()) > 1:
        raise ValueError(f"{path} holds the value {int(flags.max())} where static-mask flags are 0 or 1: it is not a "
                         "mask file; re-run `tinylm prepare --mlm-static`")


def token_dtype(max_id: int) -> np.dtype:
    """The narrowest unsigned dtype that holds every id up to `max_id`."""
    if max_id < 0:
        raise ValueError(f"max_id must be >= 0, got {max_id}")
    return np.dtype(np.uint16) if max_id < 1 << 16 else np.dtype(np.uint32)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short hash of a tokenizer's class and full vocabulary (added tokens included).

    Data, checkpoints and runs record it, so that data made by one tokenizer is never trained on
    with (or shipped beside) another.
    """
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    payload = json.dumps([type(tokenizer).__name__.removesuffix("Fast"), vocab], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def check_tokenizer_fingerprint(tokenizer: Any, expected: str | None, *, folder: Any, made: str) -> None:
    """Refuse `tokenizer` (loaded from `folder`) unless its fingerprint is `expected`, that of the tokenizer that made
    `made` (nothing is checked when nothing was recorded)."""
    if expected is None:
        return
    actual = tokenizer_fingerprint(tokenizer)
    if actual != expected:
        raise ValueError(
            f"the tokenizer in {folder} is not the one that made {made} (fingerprint {actual}, recorded {expected}): "
            "it was trained again or is another tokenizer; use the tokenizer folder that made the data"
        )


def token_digest(tokens: np.ndarray) -> str:
    """A short hash of a token array's contents: what a file derived from it (static masks) records, so that it is
    never used beside other tokens of the same length."""
    return hashlib.sha256(np.ascontiguousarray(tokens).view(np.uint8)).hexdigest()[:16]


def write_tokens(
    chunks: Any, path: Path, dtype: np.dtype, total: int | None,
    header: dict[str, Any] | Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Write the ids of an iterable of int arrays (`total` of them, when known ahead) to `path` (via a temp file),
    then its header (or what `header()` gives once the chunks are written: counts a stream knows only at its end).

    Every id is checked against `dtype` before it is stored, so ids never wrap silently. The header records the
    tokens' count and `token_digest`: what a resumed run knows its data by.
    """
    limit = np.iinfo(dtype).max
    written = 0
    digest = hashlib.sha256()
    with atomic_output(path) as tmp:
        with open(tmp, "wb") as out:
            for ids in chunks:
                ids = np.asarray(ids, dtype=np.int64)
                if ids.size and (ids.min() < 0 or ids.max() > limit):
                    raise ValueError(f"token id {int(ids.max())} does not fit {dtype.name}; this is a bug in prepare")
                stored = ids.astype(dtype).tobytes()
                out.write(stored)
                digest.update(stored)
                written += ids.size
        if total is not None and written != total:
            raise RuntimeError(f"wrote {written} tokens to {path}, expected {total}")
    header = {**(header() if callable(header) else header), "dtype": dtype.name, "count": written,
              "token_digest": digest.hexdigest()[:16]}
    write_json_atomic(header_path(path), header)
    return header
