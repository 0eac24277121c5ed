"""GPT-2's tokenizer file format: `vocab.json` (token string -> id) and `merges.txt` (one merge a line).

Token strings are bytes in GPT-2's bytes-to-unicode form; tokens that are not byte-mapped (added
tokens such as `<|endoftext|>`) are stored as their own text. This module is the one reader and
writer of the format: `BPETokenizer`, both Hugging Face classes and the exports call it. Saved folders
carry it flat (`remote_code.py`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from ..atomic_files import write_text_atomic
from .byte_unicode import token_to_unicode, unicode_to_token

VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
MERGES_HEADER = "#version: 0.2"


def read_vocab_json(path: str | os.PathLike) -> dict[str, int]:
    """`vocab.json` as token string -> id; a corrupt file raises ValueError naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocab file not found: {path}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid UTF-8 ({exc})") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object mapping token strings to ids")
    seen: set[int] = set()
    for text, idx in raw.items():
        if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
            raise ValueError(f"{path}: token {text!r} has id {idx!r}, expected a non-negative integer")
        if idx in seen:
            raise ValueError(f"{path}: id {idx} is used by two tokens")
        seen.add(idx)
    return raw


def load_vocab_json(path: str | os.PathLike) -> dict[int, bytes]:
    """Read a GPT-2 `vocab.json` into id -> token bytes."""
    vocab: dict[int, bytes] = {}
    for text, idx in read_vocab_json(path).items():
        try:
            vocab[idx] = unicode_to_token(text)
        except KeyError:  # an added token (e.g. "<|endoftext|>") stored as its own text
            vocab[idx] = text.encode("utf-8")
    return vocab


def _merge_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, str]]:
    """(line number, left, right) for each merge line; the `#version` header and blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"merges file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                line = line.rstrip("\r\n")
                if (lineno == 1 and line.startswith("#version")) or not line.strip():
                    continue
                parts = line.split(" ")
                if len(parts) != 2 or not parts[0] or not parts[1]:
                    raise ValueError(f"{path}: line {lineno}: expected two space-separated tokens, got {line!r}")
                yield lineno, parts[0], parts[1]
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid UTF-8 ({exc})") from exc


def read_merges_txt(path: str | os.PathLike) -> list[tuple[str, str]]:
    """`merges.txt` as (left, right) token strings in rank order."""
    return [(a, b) for _, a, b in _merge_lines(path)]


def load_merges_txt(path: str | os.PathLike, *, vocab: dict[int, bytes] | None = None) -> list[tuple[bytes, bytes]]:
    """Read a GPT-2 `merges.txt` into byte pairs; with `vocab`, every merge's parts and result must be in it."""
    known = None if vocab is None else set(vocab.values())
    merges: list[tuple[bytes, bytes]] = []
    for lineno, left, right in _merge_lines(path):
        try:
            pair = (unicode_to_token(left), unicode_to_token(right))
        except KeyError as exc:
            raise ValueError(f"{path}: line {lineno}: character {exc.args[0]!r} is not in the byte map") from exc
        if known is not None:
            for token in (pair[0], pair[1], pair[0] + pair[1]):
                if token not in known:
                    raise ValueError(
                        f"{path}: line {lineno}: merge {left + ' ' + right!r} uses token "
                        f"{token_to_unicode(token)!r}, which is not in the vocab"
                    )
        merges.append(pair)
    return merges


def write_gpt2_files(
    vocab: dict[str, int], merges: list[tuple[str, str]], directory: str | os.PathLike, *, prefix: str = ""
) -> tuple[str, str]:
    """Write `vocab.json` and `merges.txt` (strings already in the byte-to-unicode form), atomically."""
    vocab_path = Path(directory) / f"{prefix}{VOCAB_FILE}"
    merges_path = Path(directory) / f"{prefix}{MERGES_FILE}"
    ordered = dict(sorted(vocab.items(), key=lambda item: item[1]))
    write_text_atomic(vocab_path, json.dumps(ordered, ensure_ascii=False, indent=2) + "\n")
    write_text_atomic(merges_path, "\n".join([MERGES_HEADER, *(f"{a} {b}" for a, b in merges)]) + "\n")
    return str(vocab_path), str(merges_path)
