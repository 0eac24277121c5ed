"""Byte-level BPE encoding and decoding by merge rank, with special tokens and GPT-2 file I/O.

Speed comes from three things: GPT-2 pre-tokens found by stdlib `re` on ASCII stretches
(`pretokenize_gpt2`), a per-pre-token cache looked up from C (`map` over a dict with `__missing__`),
and, for large inputs, `encode_batch` / `encode_file` over worker processes.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import chain, repeat
from pathlib import Path

import regex

from .byte_unicode import token_to_unicode
from .gpt2_files import load_merges_txt, load_vocab_json, write_gpt2_files
from .pretokenize import (
    GPT2_PATTERN,
    check_special_tokens,
    compile_special_pattern,
    find_next_safe_cut,
    find_safe_cut,
    has_safe_cuts,
    pretokenize_gpt2,
    resolve_pattern,
)

# Pre-token cache entries before the cache is emptied (keeps memory bounded on endless streams).
CACHE_LIMIT = 1 << 16
# encode_iterable buffers about this many characters before looking for a safe place to cut.
STREAM_FLUSH_CHARS = 1 << 14
# Below this many characters the parallel paths encode in-process (a pool costs ~0.1 s to start).
PARALLEL_MIN_CHARS = 1 << 20
# encode pauses the garbage collector for texts at least this long.
GC_PAUSE_CHARS = 1 << 16
_NO_MERGE = 1 << 62  # rank of a pair that was never learned


class _PretokenCache(dict):
    """pre-token str -> ids; a miss runs BPE, so hits never leave C when read through `map`."""

    def __init__(self, encode_bytes) -> None:
        super().__init__()
        self._encode_bytes = encode_bytes

    def __missing__(self, piece: str) -> list[int]:
        ids = self._encode_bytes(piece.encode("utf-8"))
        if len(self) >= CACHE_LIMIT:
            self.clear()
        self[piece] = ids
        return ids


class BPETokenizer:
    """A byte-level BPE tokenizer: `vocab` (id -> bytes), `merges` in learned order, special tokens.

    Merges apply by rank (the earliest-learned applicable merge first); special tokens match
    longest first and map to their own ids.

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    >>> tok = BPETokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")], ["<|endoftext|>"])
    >>> tok.encode("abcab<|endoftext|>")
    [257, 256, 258]
    >>> tok.decode([257, 256, 258])
    'abcab<|endoftext|>'
    >>> tok.decode([0xE2])  # a lone byte that is not valid UTF-8
    '\ufffd'
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
        self._max_special_len = max((len(s) for s in self.special_tokens), default=0)
        missing = [i for i in range(256) if bytes([i]) not in self.token_to_id]
        if missing:
            raise ValueError(f"vocab lacks single-byte tokens for bytes {missing[:8]}; every byte needs an id")
        self.ranks: dict[tuple[int, int], int] = {}  # (left id, right id) -> rank
        self._merged_by_rank: list[int] = []  # rank -> merged id
        for rank, (left, right) in enumerate(self.merges):
            try:
                pair = (self.token_to_id[left], self.token_to_id[right])
                merged = self.token_to_id[left + right]
            except KeyError as exc:
                raise ValueError(
                    f"merge {rank} {(left, right)!r}: token {exc.args[0]!r} is not in the vocab"
                ) from exc
            self.ranks.setdefault(pair, rank)
            self._merged_by_rank.append(merged)
        self._byte_ids = [self.token_to_id[bytes([i])] for i in range(256)]
        self._fast_gpt2 = self.pattern == GPT2_PATTERN
        self._safe_cuts = has_safe_cuts(self.pattern)
        self._cache = _PretokenCache(self._encode_bytes)

    def __getstate__(self) -> dict:
        # The cache is derived data: leaving it out keeps pickles small and their hashes stable.
        state = self.__dict__.copy()
        del state["_cache"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache = _PretokenCache(self._encode_bytes)

    # ----------------------------------------------------------------------------------- encode
    def _encode_bytes(self, data: bytes) -> list[int]:
        """BPE one pre-token: merge the lowest-rank adjacent pair (leftmost first) until none applies."""
        ids = list(map(self._byte_ids.__getitem__, data))
        rank_of, merged_id = self.ranks.get, self._merged_by_rank
        # pair_ranks[i] is the rank of (ids[i], ids[i + 1]), _NO_MERGE if never learned.
        pair_ranks = list(map(rank_of, zip(ids, ids[1:]), repeat(_NO_MERGE)))
        while pair_ranks:
            best = min(pair_ranks)
            if best == _NO_MERGE:
                break
            i = pair_ranks.index(best)
            new = merged_id[best]
            ids[i : i + 2] = (new,)
            del pair_ranks[i]
            # Only the pairs touching the new token change.
            if i > 0:
                pair_ranks[i - 1] = rank_of((ids[i - 1], new), _NO_MERGE)
            if i < len(pair_ranks):
                pair_ranks[i] = rank_of((new, ids[i + 1]), _NO_MERGE)
        return ids

    def _pretokenize(self, text: str) -> list[str]:
        if self._fast_gpt2:
            return pretokenize_gpt2(text)
        return self._pretokenizer.findall(text)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text ignoring special tokens (their text is encoded as plain bytes)."""
        return list(chain.from_iterable(map(self._cache.__getitem__, self._pretokenize(text))))

    def encode(self, text: str) -> list[int]:
        """Encode text; special tokens (longest match first) map to their own ids."""
        if len(text) < GC_PAUSE_CHARS or not gc.isenabled():
            return self._encode(text)
        # Encoding creates no reference cycles; a collection would only rescan the growing cache.
        gc.disable()
        try:
            return self._encode(text)
        finally:
            gc.enable()

    def _encode(self, text: str) -> list[int]:
        if self._special_pattern is None:
            return self.encode_ordinary(text)
        ids: list[int] = []
        start = 0
        for match in self._special_pattern.finditer(text):
            ids += self.encode_ordinary(text[start : match.start()])
            ids.append(self.special_ids[match.group()])
            start = match.end()
        ids += self.encode_ordinary(text[start:])
        return ids

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of strings (e.g. a file's lines) into exactly `encode` of their join.

        Memory stays bounded whatever the input size or line length: text is flushed at the last
        place where cutting cannot change the result (after a special token, or at a safe pre-token
        boundary for the built-in patterns); only a custom pattern on text without special tokens
        has no such place and buffers.
        """
        pending: list[str] = []
        size, threshold = 0, STREAM_FLUSH_CHARS
        for chunk in iterable:
            pending.append(chunk)
            size += len(chunk)
            if size < threshold:
                continue
            text = "".join(pending)
            cut = self._find_stream_cut(text)
            if cut > 0:
                yield from self.encode(text[:cut])
                text = text[cut:]
            pending, size = [text], len(text)
            # No cut found: wait for twice as much text so re-joining stays linear overall.
            threshold = STREAM_FLUSH_CHARS if cut > 0 else 2 * size
        yield from self.encode("".join(pending))

    def _find_stream_cut(self, text: str) -> int:
        """The last position where text[:p] encodes independently of whatever text follows, or 0."""
        cut, limit = 0, len(text)
        if self._special_pattern is not None:
            # A special token starting at or after `limit` might still grow with later text.
            limit = len(text) - self._max_special_len + 1
            for match in self._special_pattern.finditer(text, 0, len(text)):
                if match.start() >= limit:
                    break
                cut = match.end()
        if self._safe_cuts:
            safe = find_safe_cut(text, cut, limit)
            if safe > cut:
                cut = safe
        return cut

    # --------------------------------------------------------------------------------- parallel
    def encode_batch(self, texts: Iterable[str], num_workers: int | None = None) -> list[list[int]]:
        """Encode many texts, over `num_workers` processes (default: all CPUs) when worth it.

        Each result equals `encode(text)`.
        """
        texts = list(texts)
        workers = _resolve_workers(num_workers)
        if workers <= 1 or len(texts) <= 1 or sum(map(len, texts)) < PARALLEL_MIN_CHARS:
            return [self.encode(t) for t in texts]
        chunksize = max(1, len(texts) // (workers * 8))
        try:
            with _make_pool(self, workers) as pool:
                return [ids.tolist() for ids in pool.imap(_encode_in_worker, texts, chunksize)]
        finally:
            _release_worker_state()

    def encode_file(
        self, path: str | os.PathLike, num_workers: int | None = None, *, encoding: str = "utf-8"
    ) -> list[int]:
        """Encode a whole text file over `num_workers` processes; equals `encode` of its contents.

        The text is cut into pieces at special tokens (document boundaries), or at safe pre-token
        boundaries where documents are too long, so that no cut changes the ids.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        text = path.read_text(encoding=encoding, errors="replace")
        workers = _resolve_workers(num_workers)
        if workers <= 1 or len(text) < PARALLEL_MIN_CHARS:
            return self.encode(text)
        spans = self._split_for_workers(text, workers * 4)
        ids: list[int] = []
        try:
            with _make_pool(self, workers, text) as pool:
                if _WORKER_TEXT is text:  # forked workers already hold the text: send offsets only
                    results = pool.imap(_encode_span_in_worker, spans)
                else:
                    results = pool.imap(_encode_in_worker, (text[a:b] for a, b in spans))
                for part in results:
                    ids += part.tolist()
        finally:
            _release_worker_state()
        return ids

    def _split_for_workers(self, text: str, num_pieces: int) -> list[tuple[int, int]]:
        """Cut text into about `num_pieces` (start, end) spans whose encodings concatenate to `encode(text)`."""
        step = max(1, len(text) // max(1, num_pieces))
        spans = (
            [m.span() for m in self._special_pattern.finditer(text)]
            if self._special_pattern is not None
            else []
        )
        pieces, start, k = [], 0, 0
        for target in range(step, len(text), step):
            if target <= start:
                continue
            while k < len(spans) and spans[k][1] <= target:
                k += 1
            cut = -1
            if k < len(spans) and spans[k][0] < target + step // 2:
                cut = spans[k][0] if spans[k][0] >= target else spans[k][1]
            elif self._safe_cuts:
                cut = find_next_safe_cut(text, target)
                # Never inside a special token: move to its end.
                j = bisect_right(spans, (cut, len(text))) - 1
                if cut != -1 and j >= 0 and spans[j][0] < cut < spans[j][1]:
                    cut = spans[j][1]
            if cut > start:
                pieces.append((start, cut))
                start = cut
        pieces.append((start, len(text)))
        return pieces

    # ----------------------------------------------------------------------------------- decode
    def decode(self, ids: Iterable[int]) -> str:
        """Join the tokens' bytes and decode as UTF-8, replacing invalid sequences with U+FFFD."""
        try:
            data = b"".join(map(self.vocab.__getitem__, ids))
        except KeyError as exc:
            raise ValueError(
                f"token id {exc.args[0]!r} is not in the vocabulary (ids run 0..{max(self.vocab)})"
            ) from exc
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
        """Load GPT-2-format `vocab.json` + `merges.txt`; a corrupt file raises ValueError with file:line."""
        vocab = load_vocab_json(vocab_path)
        merges = load_merges_txt(merges_path, vocab=vocab)
        return cls(vocab, merges, special_tokens, **kwargs)

    def save(self, directory: str | os.PathLike) -> tuple[Path, Path]:
        """Write `vocab.json` and `merges.txt` (GPT-2 format) into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocab = {token_to_unicode(tok): i for i, tok in self.vocab.items()}
        merges = [(token_to_unicode(a), token_to_unicode(b)) for a, b in self.merges]
        vocab_path, merges_path = write_gpt2_files(vocab, merges, directory)
        return Path(vocab_path), Path(merges_path)


# ------------------------------------------------------------------------------ worker processes
_WORKER_TOKENIZER: BPETokenizer | None = None
_WORKER_TEXT: str | None = None


def _resolve_workers(num_workers: int | None) -> int:
    if num_workers is None:
        return os.cpu_count() or 1
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive integer or None, got {num_workers!r}")
    return num_workers


def _init_worker(state: tuple | None) -> None:
    global _WORKER_TOKENIZER
    if state is not None:
        vocab, merges, special_tokens, pattern = state
        _WORKER_TOKENIZER = BPETokenizer(vocab, merges, special_tokens, pattern=pattern)


def _release_worker_state() -> None:
    global _WORKER_TOKENIZER, _WORKER_TEXT
    _WORKER_TOKENIZER = _WORKER_TEXT = None


def _encode_in_worker(text: str) -> array:
    # An array pickles as one bytes blob: much cheaper to send back than a list of ints.
    return array("l", _WORKER_TOKENIZER.encode(text))


def _encode_span_in_worker(span: tuple[int, int]) -> array:
    return array("l", _WORKER_TOKENIZER.encode(_WORKER_TEXT[span[0] : span[1]]))


def _make_pool(tokenizer: BPETokenizer, workers: int, text: str | None = None):
    """A process pool whose workers hold `tokenizer` (and `text`) inherited by fork, else rebuilt."""
    global _WORKER_TOKENIZER, _WORKER_TEXT
    _WORKER_TEXT = None
    if "fork" in multiprocessing.get_all_start_methods():
        _WORKER_TOKENIZER, _WORKER_TEXT = tokenizer, text
        # Frozen objects are never scanned by the children's collector, so their pages stay shared.
        gc.freeze()
        try:
            return multiprocessing.get_context("fork").Pool(workers, _init_worker, (None,))
        finally:
            gc.unfreeze()
    state = (tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, tokenizer.pattern)
    return multiprocessing.get_context("spawn").Pool(workers, _init_worker, (state,))
