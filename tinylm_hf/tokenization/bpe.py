"""Byte-level BPE encoding and decoding by merge rank, with special tokens and GPT-2 file I/O.

The specification is tiktoken's: pre-tokens from the regex, a pre-token that is one vocabulary
entry is that entry, any other merges by rank. For GPT-2's pattern the same ids come from array
operations (`pretokenize_arrays` finds the pre-tokens, `pretoken_table` looks them all up by hash
in a table seeded with the vocabulary), text in blocks of `BLOCK_CHARS`; only the pre-tokens the
table lacks reach Python, and new ones merge together (`bpe_merge.BatchMerger`). A lone pre-token
merges in a short loop, or, when long (a run without whitespace), over a heap, so hostile input
costs O(n log n). Parallel encoding over worker processes lives in `parallel_encode` (imported on
first use).
"""

from __future__ import annotations

import gc
import importlib
import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from itertools import chain, islice
from pathlib import Path
from typing import Literal

import numpy as np
import regex

from .bpe_merge import MAX_WORD_BYTES, BatchMerger, merge_by_heap, merge_short
from .byte_unicode import token_to_unicode
from .encode_cache import EncodeCache, missing_keys
from .gpt2_files import MERGES_FILE, VOCAB_FILE, load_merges_txt, load_vocab_json, write_gpt2_files
from .pretoken_table import PretokenTable
from .pretokenize import (
    GPT2_PATTERN,
    check_special_tokens,
    compile_special_pattern,
    find_safe_cut,
    has_safe_cuts,
    resolve_pattern,
    split_into_blocks,
)

# Pre-token cache entries before the cache is emptied (keeps memory bounded on endless streams;
# 40 MB of novels hold about 108k distinct pre-tokens, so the cache need not be rebuilt there).
CACHE_LIMIT = 1 << 18
# GPT-2's pattern encodes text in blocks of about this many characters (cut where pre-tokens
# cannot change): big enough that numpy's per-call cost is spread thin, small enough to bound memory.
BLOCK_CHARS = 1 << 20
# encode_iterable buffers about this many characters before looking for a safe place to cut.
STREAM_FLUSH_CHARS = 1 << 14
# encode pauses the garbage collector for texts at least this long.
GC_PAUSE_CHARS = 1 << 16
# Pre-tokens of at least this many bytes merge over a heap (O(n log n)) instead of the quadratic
# loop, which is faster on short ones.
HEAP_MIN_BYTES = 64
# At least this many new pre-tokens are merged together by `BatchMerger` (numpy rounds over all
# of them); fewer go one by one, where numpy's per-call cost would dominate.
BATCH_MIN_WORDS = 64



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
        heap_min_bytes: int = HEAP_MIN_BYTES,
    ) -> None:
        if not isinstance(heap_min_bytes, int) or heap_min_bytes < 2:
            raise ValueError(f"heap_min_bytes must be an int >= 2, got {heap_min_bytes!r}")
        self.heap_min_bytes = heap_min_bytes
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
        self._make_derived()

    def _make_derived(self) -> None:
        """The caches and the batch merger: built from the vocab and merges, never pickled."""
        try:
            self._batch_merger: BatchMerger | None = BatchMerger(self.ranks, self._merged_by_rank, self._byte_ids)
        except ValueError:  # ids past its int64 keys: such a vocabulary merges word by word
            self._batch_merger = None
        self._cache = EncodeCache(self._encode_pretoken, CACHE_LIMIT)  # pre-token -> ids
        # GPT-2's pattern: pre-token hash -> ids, the vocabulary plus what was encoded since.
        self._table = self._make_table() if self._fast_gpt2 else None

    def __getstate__(self) -> dict:
        # Derived data: leaving it out keeps pickles small and their hashes stable.
        state = self.__dict__.copy()
        for name in ("_batch_merger", "_cache", "_table"):
            del state[name]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._make_derived()

    # ----------------------------------------------------------------------------------- encode
    def _encode_bytes(self, data: bytes) -> list[int]:
        """BPE one pre-token: merge the lowest-rank adjacent pair (leftmost first) until none applies."""
        ids = list(map(self._byte_ids.__getitem__, data))
        merge = merge_by_heap if len(ids) >= self.heap_min_bytes else merge_short
        return merge(ids, self.ranks.get, self._merged_by_rank)

    def _encode_pretoken(self, piece: str) -> list[int]:
        return self._encode_bytes(piece.encode("utf-8"))

    def _encode_pretokens(self, pieces: list[str]) -> list[int]:
        return list(chain.from_iterable(map(self._pretoken_ids(pieces).__getitem__, pieces)))

    def _pretoken_ids(self, pieces: list[str]) -> Mapping[str, list[int]]:
        """A mapping that gives the ids of every pre-token of `pieces`: the cache, the new ones added.

        Many new pre-tokens are merged together (`BatchMerger`); a few are left to the cache's own
        misses. When they alone outgrow the cache, they come in a mapping of their own.
        """
        cache = self._cache
        if len(pieces) < BATCH_MIN_WORDS or self._batch_merger is None:
            return cache
        new = missing_keys(cache, set(pieces), cache.limit)
        if len(new) < BATCH_MIN_WORDS:
            return cache
        limit = min(self.heap_min_bytes, MAX_WORD_BYTES)  # longer ones merge over a heap, on a miss
        short = [(piece, word) for piece in new if 0 < len(word := piece.encode("utf-8")) < limit]
        encoded = list(zip([piece for piece, _ in short], self._batch_merger.encode_words([w for _, w in short])))
        cache.update(islice(encoded, cache.limit))
        if len(new) <= cache.limit:
            return cache
        batch = EncodeCache(cache.__getitem__, len(new))
        batch.update(encoded)
        return batch

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text ignoring special tokens (their text is encoded as plain bytes)."""
        if not self._fast_gpt2:
            return self._encode_pretokens(self._pretokenizer.findall(text))
        return self._encode_parts((text,))

    def _encode_parts(self, parts: Iterable[str | int]) -> list[int]:
        """Ids of texts (GPT-2's pattern) and special-token ids, in order, a block at a time."""
        ids: list[int] = []
        for block in split_into_blocks(parts, BLOCK_CHARS):
            ids += self._encode_block(block)
        return ids

    def _encode_block(self, block: list[str | int]) -> list[int]:
        """Ids of a block: its texts joined and encoded through the table, special ids put in between."""
        is_text = [isinstance(item, str) for item in block]
        texts = [item for item, text in zip(block, is_text) if text]
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        cuts = np.concatenate([[0], np.cumsum(lengths)])  # where each text starts, and the end
        ids, before = self._table.encode("".join(texts), cuts, self._merge_words)
        if len(texts) == len(block):
            return ids.tolist()
        # A special token sits at the cut after the texts before it in the block.
        texts_before = np.cumsum(is_text)[np.logical_not(is_text)]
        specials = [item for item, text in zip(block, is_text) if not text]
        return np.insert(ids, before[texts_before], specials).tolist()

    def _make_table(self) -> PretokenTable:
        """The pre-token table, seeded with the ids of every vocabulary entry that is valid UTF-8.

        For GPT-2's vocabulary (and any where each entry merges to itself) that is tiktoken's
        rule, a pre-token that is one vocabulary entry is that entry; where an entry merges to
        several tokens, the seed holds those, as the merge loop would give.
        """
        texts = [token.decode("utf-8", "replace") for token in self.vocab.values()]
        words = [text for text, token in zip(texts, self.vocab.values()) if text.isascii() or text.encode() == token]
        with _gc_paused():  # tens of thousands of new lists: collections would rescan the vocabulary
            return PretokenTable(words, self._merge_words(words), CACHE_LIMIT)

    def _merge_words(self, words: list[str]) -> dict[str, list[int]]:
        """word -> the merge loop's ids, for distinct words; many short ones merge together (`BatchMerger`)."""
        data = [word.encode("utf-8") for word in words]
        limit = min(self.heap_min_bytes, MAX_WORD_BYTES)  # longer ones merge over a heap
        batch = [i for i, d in enumerate(data) if 0 < len(d) < limit]
        if self._batch_merger is None or len(batch) < BATCH_MIN_WORDS:
            return dict(zip(words, map(self._encode_bytes, data)))
        merged = dict(zip(batch, self._batch_merger.encode_words([data[i] for i in batch])))
        return {word: merged[i] if i in merged else self._encode_bytes(data[i]) for i, word in enumerate(words)}

    def encode(self, text: str) -> list[int]:
        """Encode text; special tokens (longest match first) map to their own ids.

        Any special token's text becomes its id, also in untrusted text: use `encode_text` for
        tiktoken's explicit policy.
        """
        return self._encode_paused(text, self._special_pattern)

    def encode_text(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encode text with tiktoken's special-token policy (`tiktoken.Encoding.encode`).

        Special-token text becomes its id only for tokens in `allowed_special` ("all" for every
        special token); elsewhere it raises ValueError when the token is in `disallowed_special`
        (by default every special token not allowed), else it is encoded as plain text.

        >>> vocab = {i: bytes([i]) for i in range(256)}
        >>> tok = BPETokenizer(vocab, [], ["<|endoftext|>"])
        >>> tok.encode_text("a<|endoftext|>", allowed_special="all")
        [97, 256]
        >>> len(tok.encode_text("a<|endoftext|>", disallowed_special=()))  # plain text: 14 bytes
        14
        """
        specials = frozenset(self.special_tokens)
        allowed = specials if allowed_special == "all" else _as_token_set(allowed_special, "allowed_special")
        if disallowed_special == "all":
            disallowed = specials - allowed
        else:
            disallowed = _as_token_set(disallowed_special, "disallowed_special")
        if disallowed:
            match = _special_pattern_for(disallowed).search(text)
            if match is not None:
                raise ValueError(_disallowed_message(match.group()))
        return self._encode_paused(text, _special_pattern_for(allowed & specials))

    def _encode_paused(self, text: str, special_pattern: regex.Pattern | None) -> list[int]:
        if len(text) < GC_PAUSE_CHARS:
            return self._encode(text, special_pattern)
        # Encoding creates no reference cycles; a collection would only rescan the growing cache.
        with _gc_paused():
            return self._encode(text, special_pattern)

    def _encode(self, text: str, special_pattern: regex.Pattern | None) -> list[int]:
        if special_pattern is None:
            return self.encode_ordinary(text)
        if self._fast_gpt2:
            return self._encode_parts(self._split_special(text, special_pattern))
        ids: list[int] = []
        for part in self._split_special(text, special_pattern):
            ids += self.encode_ordinary(part) if isinstance(part, str) else (part,)
        return ids

    def _split_special(self, text: str, special_pattern: regex.Pattern) -> Iterator[str | int]:
        """The text between special tokens (str) and each special token's id (int), in order."""
        start = 0
        for match in special_pattern.finditer(text):
            yield text[start : match.start()]
            yield self.special_ids[match.group()]
            start = match.end()
        yield text[start:]

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of strings (e.g. a file's lines) into exactly `encode` of their join.

        Memory stays bounded whatever the input size or line length: text is flushed at the last
        place where cutting cannot change the result (after a special token, or at a safe pre-token
        boundary for the built-in patterns); only a custom pattern on text without special tokens
        has no such place and buffers.
        """
        for piece in self._iter_independent_pieces(iterable, STREAM_FLUSH_CHARS):
            yield from self.encode(piece)

    def _iter_independent_pieces(self, iterable: Iterable[str], min_chars: int) -> Iterator[str]:
        """Re-cut a stream of strings into pieces of about `min_chars` or more that encode independently."""
        pending: list[str] = []
        size, threshold = 0, min_chars
        for chunk in iterable:
            pending.append(chunk)
            size += len(chunk)
            if size < threshold:
                continue
            text = "".join(pending)
            cut = self._find_stream_cut(text)
            if cut > 0:
                yield text[:cut]
                text = text[cut:]
            pending, size = [text], len(text)
            # No cut found: wait for twice as much text so re-joining stays linear overall.
            threshold = min_chars if cut > 0 else 2 * size
        yield "".join(pending)

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

        Each result equals `encode(text)`. See `parallel_encode.encode_batch`.
        """
        return _parallel_encode().encode_batch(self, texts, num_workers)

    def encode_file(
        self, path: str | os.PathLike, num_workers: int | None = None, *, encoding: str = "utf-8"
    ) -> list[int]:
        """Encode a whole text file over `num_workers` processes; equals `encode` of its contents.

        See `parallel_encode.encode_file`: the file is read in windows cut where no cut changes
        the ids, and workers return ids through shared memory.
        """
        return _parallel_encode().encode_file(self, path, num_workers, encoding=encoding)

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
    files = (VOCAB_FILE, MERGES_FILE)  # what `save` writes into a folder

    @classmethod
    def load(cls, directory: str | os.PathLike, special_tokens: list[str] | None = None, **kwargs) -> BPETokenizer:
        """Load the GPT-2-format `vocab.json` + `merges.txt` that `save` wrote into `directory`."""
        directory = Path(directory)
        return cls.from_files(directory / VOCAB_FILE, directory / MERGES_FILE, special_tokens, **kwargs)

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

    def save(self, directory: str | os.PathLike, *, prefix: str = "") -> tuple[Path, Path]:
        """Write `vocab.json` and `merges.txt` (GPT-2 format, names after `prefix`) into `directory` (created)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocab = {token_to_unicode(tok): i for i, tok in self.vocab.items()}
        merges = [(token_to_unicode(a), token_to_unicode(b)) for a, b in self.merges]
        vocab_path, merges_path = write_gpt2_files(vocab, merges, directory, prefix=prefix)
        return Path(vocab_path), Path(merges_path)


# --------------------------------------------------------------------------------- helpers
@contextmanager
def _gc_paused() -> Iterator[None]:
    """The garbage collector off inside (if it was on): for work that allocates much and makes no cycles."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _as_token_set(tokens: Collection[str], name: str) -> frozenset[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Collection) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f'{name} must be "all" or a collection of special-token strings, got {tokens!r}')
    return frozenset(tokens)


@lru_cache(maxsize=64)
def _special_pattern_for(tokens: frozenset[str]) -> regex.Pattern | None:
    return compile_special_pattern(tokens)


def _disallowed_message(token: str) -> str:
    return (
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        f"If you want this text to be encoded as a special token, pass it to `allowed_special`, "
        f"e.g. `allowed_special={{{token!r}, ...}}`.\n"
        f"If you want this text to be encoded as normal text, disable the check for this token by "
        f"passing `disallowed_special=(set(tokenizer.special_tokens) - {{{token!r}}})`.\n"
        f"To disable this check for all special tokens, pass `disallowed_special=()`."
    )


def _parallel_encode():
    """The worker-pool module, imported by name on first use.

    A `from .parallel_encode import` line would make transformers copy the pool code into every
    saved remote-code folder; loaded this way, such folders stay small and only a call to
    encode_batch/encode_file needs the module.
    """
    try:
        return importlib.import_module(".parallel_encode", __package__)
    except ImportError as exc:
        raise ImportError(
            "encode_batch/encode_file need tinylm_hf's parallel_encode module, which is not part of "
            "a saved model folder: install tinylm_hf (pip install tinylm_hf) to encode in parallel"
        ) from exc
