"""Byte-level BPE training: pre-token counts, then incremental merges.

`train_bpe` counts the pre-tokens of a text file (over worker processes, `pretoken_counts`), and
`train_bpe_from_counts` learns merges from such counts. Vocabulary ids: 0..255 are the
single bytes, then the special tokens in the given order, then one id per merge in merge order.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ..tokenization.bpe import BPETokenizer
from ..tokenization.pretokenize import check_special_tokens, resolve_pattern
from .bpe_train_long import LONG_WORD_BYTES, LongWordArena
from .pair_merges import PAIR_MASK, PAIR_SHIFT, merge_words, progress_bar
from .pretoken_counts import count_pretokens
from .word_splitting import BPE_WORDS, WordCounts, count_split_words, iter_texts

# Inverting bytes (b -> 255 - b) plus a terminator above every inverted byte turns "greatest
# (bytes_a, bytes_b)" into "smallest string", which is what a min-heap pops first.
INVERT_TABLE = bytes(range(255, -1, -1))
INVERT_END = chr(256)


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    num_workers: int | None = None,
    pattern: str = "gpt2",
    progress: bool = True,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE on a UTF-8 text file; return (vocab id -> bytes, merges in order).

    Special tokens are cut out of the text before pre-tokenization, so no merge crosses one.
    A file that is not UTF-8 (binary, Latin-1) is a ValueError naming the byte offset, as in every family. `num_workers` defaults to the CPU count;
    files under 4 MiB are always counted in this process.
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    path = os.fspath(input_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training file not found: {path!r}")
    size = os.path.getsize(path)
    if size == 0:
        raise ValueError(f"training file {path!r} is empty")
    resolved = resolve_pattern(pattern)
    counts = count_pretokens(path, specials, resolved, num_workers=num_workers)
    if not counts:
        raise ValueError(f"training file {path!r} holds no text outside the special tokens")
    encoded = ((token.encode("utf-8"), count) for token, count in counts.items())
    return _train_from_word_counts(encoded, vocab_size, specials, progress=progress)


def train_bpe_from_counts(
    counts: Mapping[str | bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    progress: bool = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn merges from pre-token counts computed elsewhere (shards, other machines).

    Keys are pre-tokens as `str` (encoded to UTF-8) or as raw `bytes`; both may be mixed and equal
    byte strings are summed. Values are occurrence counts (zeros are ignored). The result is
    identical to `train_bpe` on a file whose pre-tokens have these counts.

    >>> vocab, merges = train_bpe_from_counts({"ab": 2, "abc": 1, "az": 1}, 259, [])
    >>> merges  # (ab, c) and (a, z) tie at 1: the greater pair of bytes wins
    [(b'a', b'b'), (b'ab', b'c'), (b'a', b'z')]
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    if not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a mapping of pre-token -> count, got {type(counts).__name__}")
    merged: Counter[bytes] = Counter()
    for token, count in counts.items():
        if isinstance(token, str):
            token = token.encode("utf-8")
        elif not isinstance(token, bytes):
            raise TypeError(f"pre-token keys must be str or bytes, got {token!r}")
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"count of pre-token {token!r} must be a non-negative int, got {count!r}")
        if count and token:
            merged[token] += count
    return _train_from_word_counts(merged.items(), vocab_size, specials, progress=progress)


def train_bpe_from_iterator(
    iterator: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    pattern: str = "gpt2",
    progress: bool = True,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE on an iterable of texts (a list, a generator, a `datasets` column).

    Texts are counted one at a time (memory grows with the distinct pre-tokens, not the data); each
    text is pre-tokenized on its own. Equal to `train_bpe` on the texts joined, when every text ends
    where a pre-token ends (e.g. texts that end in a special token or a newline before a letter).
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    counts = count_split_words(iter_texts(iterator), BPE_WORDS, special_tokens=specials, pattern=pattern)
    if not counts:
        raise ValueError("the iterator gave no text outside the special tokens")
    return train_bpe_from_counts(counts, vocab_size, specials, progress=progress)


def train_bpe_tokenizer(counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *,
                        byte_fallback: bool | None = None, progress: bool = False) -> BPETokenizer:
    """The byte-level BPE family's trainer: a `BPETokenizer` learned from BPE word counts (`count_words`).

    Every byte has a token, so `byte_fallback` is no option here (it is ignored).
    """
    vocab, merges = train_bpe_from_counts(counts.counts, vocab_size, special_tokens, progress=progress)
    return BPETokenizer(vocab, merges, list(special_tokens), pattern=counts.pattern or "gpt2")


def _check_vocab_size(vocab_size: int, specials: list[str]) -> None:
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    minimum = 256 + len(specials)
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it must be at least 256 bytes + "
            f"{len(specials)} special tokens = {minimum}"
        )


# ---------------------------------------------------------------------------------------------
# Merges


def _train_from_word_counts(
    counts: Iterable[tuple[bytes, int]], vocab_size: int, specials: list[str], *, progress: bool
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    # 1. Vocabulary: bytes, then specials; merged tokens are appended in merge order.
    token_bytes = [bytes([i]) for i in range(256)] + [s.encode("utf-8") for s in specials]
    # 2. Words (pre-tokens) as lists of ids, deduplicated with counts; single ids hold no pair.
    # Long words (runs without whitespace) are merged by position instead (bpe_train_long).
    words: list[list[int]] = []
    freqs: list[int] = []
    long_words: list[tuple[bytes, int]] = []
    for token, count in counts:
        if len(token) >= LONG_WORD_BYTES:
            long_words.append((token, count))
        elif len(token) > 1:
            words.append(list(token))
            freqs.append(count)
    num_merges = vocab_size - len(token_bytes)
    merges = _learn_merges(words, freqs, long_words, token_bytes, num_merges, progress)
    vocab = dict(enumerate(token_bytes))
    return vocab, merges


def _learn_merges(
    words: list[list[int]],
    freqs: list[int],
    long_words: list[tuple[bytes, int]],
    token_bytes: list[bytes],
    num_merges: int,
    progress: bool,
) -> list[tuple[bytes, bytes]]:
    """Merge the most frequent pair `num_merges` times (fewer if pairs run out), in place."""
    # 3. Pair counts and the pair -> words index. Index entries may repeat or go stale (a word
    # that no longer holds the pair); the merge scan then simply finds nothing in that word.
    pair_counts: defaultdict[int, int] = defaultdict(int)  # pair -> count over the corpus
    where: defaultdict[int, list[int]] = defaultdict(list)  # pair -> words that (may) hold it
    shift = PAIR_SHIFT
    for index, word in enumerate(words):
        freq = freqs[index]
        for left, right in zip(word, word[1:]):
            pair = (left << shift) | right
            pair_counts[pair] += freq
            where[pair].append(index)
    arena = LongWordArena(long_words, pair_counts) if long_words else None
    # 4. Max-heap by (count, greatest bytes) via (-count, inverted key). Counts of existing pairs
    # only ever fall, so an entry's count is an upper bound: a popped entry whose count is stale
    # is re-pushed with the current count (lazy update).
    inverted = [_invert(b) for b in token_bytes]
    heap = [
        (-count, inverted[pair >> shift] + inverted[pair & PAIR_MASK], pair)
        for pair, count in pair_counts.items()
    ]
    heapq.heapify(heap)
    merges: list[tuple[bytes, bytes]] = []
    bar = progress_bar(num_merges, progress, "BPE merges")
    # 5. Merge loop.
    while len(merges) < num_merges and heap:
        neg_count, key, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -neg_count:
            if count > 0:
                heapq.heappush(heap, (-count, key, pair))
            continue
        left, right = pair >> shift, pair & PAIR_MASK
        new_id = len(token_bytes)
        token_bytes.append(token_bytes[left] + token_bytes[right])
        inverted.append(_invert(token_bytes[new_id]))
        merges.append((token_bytes[left], token_bytes[right]))
        new_pairs, _ = merge_words(words, freqs, where.pop(pair, ()), left, right, new_id, pair_counts, where)
        if arena is not None:
            new_pairs |= arena.merge(pair, new_id, pair_counts)
        del pair_counts[pair]
        for new_pair in new_pairs:
            # A new pair can net to zero: (Y, X) in "Y X" -> "Y Y" is counted and then uncounted.
            new_count = pair_counts[new_pair]
            if new_count > 0:
                key = inverted[new_pair >> shift] + inverted[new_pair & PAIR_MASK]
                heapq.heappush(heap, (-new_count, key, new_pair))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return merges


def _invert(token: bytes) -> str:
    return token.translate(INVERT_TABLE).decode("latin-1") + INVERT_END
