"""Byte-level BPE encoding and decoding by merge rank, with special tokens and GPT-2 file I/O.

The specification is tiktoken's: pre-tokens from the regex, each merged by rank (`bpe_merge`: the
lowest-rank adjacent pair, leftmost first, until none has a rank). For GPT-2's and cl100k's patterns the
same ids come from numba kernels (`bpe_kernels`: a one-pass scanner over character classes, a
whole-vocabulary lookup, the merge), where numba is installed (`jit.kernels_enabled`); the pure-Python
path here is their reference and the fallback. Kernels run without the GIL, so `encode_batch` and
`encode_file` spread blocks of text, cut where no cut changes the ids, over threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator
from functools import lru_cache
from itertools import accumulate, chain
from pathlib import Path
from typing import Literal

import regex

from .merge import merge_by_heap, merge_short
from .byte_unicode import token_to_unicode
from .gpt2_files import MERGES_FILE, VOCAB_FILE, load_merges_txt, load_vocab_json, write_gpt2_files
from ..jit import group_by_chars, kernels_enabled, map_in_threads, resolve_workers
from ..pretokenize import (
    GPT2_PATTERN,
    check_special_tokens,
    compile_pretokenizer,
    compile_special_pattern,
    find_safe_cut,
    has_safe_cuts,
    pattern_name,
    pretokenize_gpt2,
    resolve_pattern,
)

# The pure-Python path caches this many pre-tokens' ids before it empties its cache (bounded memory).
CACHE_LIMIT = 1 << 16
# encode_iterable buffers about this many characters before looking for a safe place to cut.
STREAM_FLUSH_CHARS = 1 << 14
# Pre-tokens of at least this many bytes merge over a heap (O(n log n)) in the pure-Python path.
HEAP_MIN_BYTES = 64
# encode_file reads windows of about this many characters, one thread task each (bounded memory).
WINDOW_CHARS = 1 << 20
# encode_batch groups texts into tasks of about this many characters.
BATCH_TASK_CHARS = 1 << 18
# Tasks submitted ahead per thread: enough to keep every thread busy while results are collected.


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
        self._safe_cuts = has_safe_cuts(self.pattern)
        # The kernels run GPT-2's and cl100k's patterns, on ids and ranks below 2**21 (their packed pair table).
        fits = max(self.vocab) < 2**21 and len(self.merges) < 2**21
        self._kernel_pattern = pattern_name(self.pattern) if self._safe_cuts and fits else None
        self._make_derived()

    def _make_derived(self) -> None:
        """The cache and the kernel's tables, built from the vocab and merges when first used, never pickled."""
        self._cache: dict[str, list[int]] = {}  # pre-token -> ids, for the pure-Python path
        self._kernel = None  # bpe_kernels.BPEKernel, built at the first kernel encode
        # The pure-Python pre-tokenizer: GPT-2's has a faster equal form (stdlib `re` on ASCII).
        self._pretokenize: Callable[[str], list[str]] = (
            pretokenize_gpt2 if self.pattern == GPT2_PATTERN else compile_pretokenizer(self.pattern).findall)

    def __getstate__(self) -> dict:
        # Derived data: leaving it out keeps pickles small and their hashes stable.
        state = self.__dict__.copy()
        for name in ("_cache", "_kernel", "_pretokenize"):
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
        ids = self._cache.get(piece)
        if ids is None:
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            ids = self._cache[piece] = self._encode_bytes(piece.encode("utf-8"))
        return ids

    def _encode_reference(self, text: str) -> list[int]:
        """The pure-Python path: the regex's pre-tokens, each merged by rank (the kernels' specification)."""
        return list(chain.from_iterable(map(self._encode_pretoken, self._pretokenize(text))))

    def _use_kernel(self):
        """The kernel encoder (`bpe_kernels.BPEKernel`) where it runs for this pattern, else None."""
        if self._kernel is None and self._kernel_pattern is not None and kernels_enabled():
            from .kernels import BPEKernel

            self._kernel = BPEKernel(self.vocab, self.ranks, self._merged_by_rank, self._byte_ids,
                                     self._kernel_pattern)
        return self._kernel if self._kernel_pattern is not None and kernels_enabled() else None

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text ignoring special tokens (their text is encoded as plain bytes)."""
        return self._encode_many([text], None)[0]

    def encode(self, text: str) -> list[int]:
        """Encode text; special tokens (longest match first) map to their own ids.

        Any special token's text becomes its id, also in untrusted text: use `encode_text` for
        tiktoken's explicit policy.
        """
        return self._encode_many([text], self._special_pattern)[0]

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
        return self._encode_many([text], _special_pattern_for(allowed & specials))[0]

    def _encode_many(self, texts: list[str], special_pattern: regex.Pattern | None) -> list[list[int]]:
        """The ids of each text, special tokens (matched by `special_pattern`, None for none) as their ids.

        Where the kernels run, all texts go to them in one call: the text between special tokens as
        UTF-8 pieces, each followed by the special token's id (-1 after a text's last piece).
        """
        kernel = self._use_kernel()
        if kernel is None or not texts:
            return [list(chain.from_iterable(self._encode_reference(p) if isinstance(p, str) else (p,)
                                             for p in self._split_special(text, special_pattern))) for text in texts]
        import numpy as np

        pieces: list[bytes] = []
        after: list[int] = []  # the special id after each piece, -1 at a text's end
        firsts: list[int] = []  # each text's first piece
        for text in texts:
            firsts.append(len(pieces))
            for part in self._split_special(text, special_pattern):
                if isinstance(part, str):
                    pieces.append(part.encode("utf-8"))
                    after.append(-1)
                else:
                    after[-1] = part
        bounds = np.fromiter(accumulate(map(len, pieces), initial=0), dtype=np.int64, count=len(pieces) + 1)
        ids, counts = kernel.encode(b"".join(pieces), bounds, np.asarray(after, dtype=np.int64))
        if len(texts) == 1:
            return [kernel.to_list(ids)]
        ends = np.cumsum(counts)[np.asarray(firsts[1:] + [len(pieces)]) - 1].tolist()
        ids = kernel.to_list(ids)
        return [ids[start:end] for start, end in zip([0, *ends], ends)]

    def _split_special(self, text: str, special_pattern: regex.Pattern | None) -> Iterator[str | int]:
        """The text between special tokens (str) and each special token's id (int), in order."""
        start = 0
        for match in special_pattern.finditer(text) if special_pattern is not None else ():
            yield text[start : match.start()]
            yield self.special_ids[match.group()]
            start = match.end()
        yield text[start:]

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of strings (e.g. a file's lines) into exactly `encode` of their join.

        Memory stays bounded whatever the input size or line length: text is flushed at the last
        place where cutting cannot change the result (after a special token, or at a safe pre-token
        boundary for the built-in patterns: a space, a newline between non-spaces, punctuation after
        a letter, so text of any script has them); only text with none of them (one pre-token), or a
        custom pattern on text without special tokens, is buffered whole.
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
        """Encode many texts over `num_workers` threads (default: the usable CPUs); each equals `encode(text)`.

        Texts go to the kernels in groups of about `BATCH_TASK_CHARS` characters, one group per task.
        """
        texts = list(texts)
        workers = resolve_workers(num_workers)
        groups = list(group_by_chars(texts, BATCH_TASK_CHARS))
        encode = lambda group: self._encode_many(group, self._special_pattern)  # noqa: E731
        return list(chain.from_iterable(map_in_threads(encode, groups, workers)))

    def encode_file(
        self, path: str | os.PathLike, num_workers: int | None = None, *, encoding: str = "utf-8"
    ) -> list[int]:
        """Encode a whole text file over `num_workers` threads; equals `encode` of its contents.

        The file is read in windows of about `WINDOW_CHARS` characters cut where no cut changes the ids
        (see `encode_iterable`), at most `jit.IN_FLIGHT_PER_WORKER` windows per thread ahead: memory stays
        bounded by the window size, not the file's (universal newlines, invalid bytes replaced).
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        ids: list[int] = []
        with open(path, encoding=encoding, errors="replace") as handle:
            windows = self._iter_independent_pieces(iter(lambda: handle.read(WINDOW_CHARS), ""), WINDOW_CHARS)
            for part in map_in_threads(self.encode, windows, resolve_workers(num_workers)):
                ids += part
        return ids

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
