"""Byte-level BPE encoding and decoding by merge rank, with special tokens and GPT-2 file I/O."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import regex

from .byte_unicode import token_to_unicode, unicode_to_token
from .pretokenize import check_special_tokens, compile_special_pattern, resolve_pattern


class BPETokenizer:
    """A byte-level BPE tokenizer: `vocab` (id -> bytes), `merges` in learned order, special tokens.

    >>> tok = BPETokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> tok.encode("abc")
    [256, 99]
    >>> tok.decode([256, 99])
    'abc'
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
        *,
        pattern: str = "gpt2",
    ) -> None:
        self.vocab: dict[int, bytes] = dict(vocab)
        self.merges: list[tuple[bytes, bytes]] = list(merges)
        self.special_tokens: list[str] = check_special_tokens(special_tokens)
        self.pattern = resolve_pattern(pattern)
        self._pretokenizer = regex.compile(self.pattern)
        self.token_to_id: dict[bytes, int] = {token: i for i, token in self.vocab.items()}
        # A special token missing from the vocab gets the next free id.
        for special in self.special_tokens:
            token = special.encode("utf-8")
            if token not in self.token_to_id:
                new_id = max(self.vocab, default=-1) + 1
                self.vocab[new_id] = token
                self.token_to_id[token] = new_id
        self.special_ids: dict[str, int] = {
            s: self.token_to_id[s.encode("utf-8")] for s in self.special_tokens
        }
        self._special_pattern = compile_special_pattern(self.special_tokens)
        missing = [i for i in range(256) if bytes([i]) not in self.token_to_id]
        if missing:
            raise ValueError(f"vocab lacks single-byte tokens for bytes {missing[:8]}...")
        # (left id, right id) -> (rank, merged id)
        self.ranks: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (left, right) in enumerate(self.merges):
            try:
                pair = (self.token_to_id[left], self.token_to_id[right])
                merged = self.token_to_id[left + right]
            except KeyError as exc:
                raise ValueError(f"merge {rank} {(left, right)!r} uses a token not in the vocab") from exc
            self.ranks.setdefault(pair, (rank, merged))
        self._byte_ids = [self.token_to_id[bytes([i])] for i in range(256)]
        self._cache: dict[str, list[int]] = {}

    # ----------------------------------------------------------------------------------- encode
    def _encode_pretoken(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        ids = [self._byte_ids[b] for b in piece.encode("utf-8")]
        ranks = self.ranks
        while len(ids) > 1:
            # The applicable merge learned earliest wins (tiktoken's _educational merge loop).
            best = min(
                (ranks[p][0], i) for i, p in enumerate(zip(ids, ids[1:])) if p in ranks
            ) if any(p in ranks for p in zip(ids, ids[1:])) else None
            if best is None:
                break
            pair = (ids[best[1]], ids[best[1] + 1])
            merged = ranks[pair][1]
            out: list[int] = []
            i = 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                    out.append(merged)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            ids = out
        self._cache[piece] = ids
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text ignoring special tokens (their text is encoded as plain bytes)."""
        ids: list[int] = []
        for piece in self._pretokenizer.findall(text):
            ids.extend(self._encode_pretoken(piece))
        return ids

    def encode(self, text: str) -> list[int]:
        """Encode text; special tokens (longest match first) map to their own ids."""
        if self._special_pattern is None:
            return self.encode_ordinary(text)
        ids: list[int] = []
        start = 0
        for match in self._special_pattern.finditer(text):
            ids.extend(self.encode_ordinary(text[start : match.start()]))
            ids.append(self.special_ids[match.group()])
            start = match.end()
        ids.extend(self.encode_ordinary(text[start:]))
        return ids

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of strings (e.g. a file's lines) into exactly `encode` of their join."""
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            # Only text up to the last newline is safe to encode: later text may still grow.
            cut = buffer.rfind("\n")
            if cut < 0:
                continue
            yield from self.encode(buffer[: cut + 1])
            buffer = buffer[cut + 1 :]
        if buffer:
            yield from self.encode(buffer)

    # ----------------------------------------------------------------------------------- decode
    def decode(self, ids: Iterable[int]) -> str:
        """Join the tokens' bytes and decode as UTF-8, replacing invalid sequences with U+FFFD."""
        try:
            data = b"".join(self.vocab[i] for i in ids)
        except KeyError as exc:
            raise ValueError(f"token id {exc.args[0]} is not in the vocabulary") from exc
        return data.decode("utf-8", errors="replace")

    # ------------------------------------------------------------------------------------ files
    @classmethod
    def from_files(
        cls,
        vocab_path: str | os.PathLike,
        merges_path: str | os.PathLike,
        special_tokens: list[str] | None = None,
        **kwargs,
    ) -> BPETokenizer:
        """Load GPT-2-format `vocab.json` + `merges.txt`."""
        vocab = load_vocab_json(vocab_path)
        merges = load_merges_txt(merges_path)
        return cls(vocab, merges, special_tokens, **kwargs)

    def save(self, directory: str | os.PathLike) -> tuple[Path, Path]:
        """Write `vocab.json` and `merges.txt` (GPT-2 format) into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
        vocab_json = {token_to_unicode(tok): i for i, tok in sorted(self.vocab.items())}
        _write_atomic(vocab_path, json.dumps(vocab_json, ensure_ascii=False, indent=2) + "\n")
        lines = ["#version: 0.2"]
        lines += [f"{token_to_unicode(a)} {token_to_unicode(b)}" for a, b in self.merges]
        _write_atomic(merges_path, "\n".join(lines) + "\n")
        return vocab_path, merges_path


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_vocab_json(path: str | os.PathLike) -> dict[int, bytes]:
    """Read a GPT-2 `vocab.json` (bytes-to-unicode string -> id) into id -> bytes."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object mapping token strings to ids")
    vocab: dict[int, bytes] = {}
    for text, idx in raw.items():
        if not isinstance(idx, int) or idx < 0:
            raise ValueError(f"{path}: token {text!r} has id {idx!r}, expected a non-negative integer")
        try:
            vocab[idx] = unicode_to_token(text)
        except KeyError:
            # Added tokens (e.g. "<|endoftext|>") are stored as their own text when not byte-mapped.
            vocab[idx] = text.encode("utf-8")
    return vocab


def load_merges_txt(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """Read a GPT-2 `merges.txt` (optional `#version` header, one space-separated pair a line)."""
    path = Path(path)
    merges: list[tuple[bytes, bytes]] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if (lineno == 1 and line.startswith("#version")) or not line.strip():
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not parts[0] or not parts[1]:
                raise ValueError(f"{path}: line {lineno}: expected two space-separated tokens, got {line!r}")
            try:
                merges.append((unicode_to_token(parts[0]), unicode_to_token(parts[1])))
            except KeyError as exc:
                raise ValueError(f"{path}: line {lineno}: character {exc.args[0]!r} is not in the byte map") from exc
    return merges
