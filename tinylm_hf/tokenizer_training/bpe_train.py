"""Byte-level BPE training: parallel pre-token counting, then incremental merges.

`train_bpe` counts pre-tokens of a text file (chunks cut at special tokens, dealt to worker
processes), and `train_bpe_from_counts` learns merges from such counts. Vocabulary ids: 0..255 are the
single bytes, then the special tokens in the given order, then one id per merge in merge order.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import BinaryIO

import regex

from ..tokenization.pretokenize import (
    GPT2_PATTERN,
    GPT4_PATTERN,
    check_special_tokens,
    compile_special_pattern,
    resolve_pattern,
)
from ..tokenization.process_pool import make_executor, map_in_order, resolve_workers
from .bpe_train_long import LONG_WORD_BYTES, LongWordArena

# Files smaller than this are counted in the calling process: on a few MB, starting a pool of
# workers costs about what it saves (measured on TinyStories, 2.4 MB).
PARALLEL_MIN_BYTES = 4 << 20
# Target chunk size: bounds a worker's memory (chunk text plus its pre-token list). Each worker
# reads its chunks one after another and returns one Counter.
CHUNK_BYTES = 1 << 20
# Block size used when searching forward for a chunk boundary.
SEARCH_BLOCK_BYTES = 1 << 12
# A pair (a, b) of token ids is stored as the int (a << PAIR_SHIFT) | b.
PAIR_SHIFT = 32
PAIR_MASK = (1 << PAIR_SHIFT) - 1
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
    Invalid UTF-8 is decoded with U+FFFD replacement. `num_workers` defaults to the CPU count;
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
    # Imported here: word_counts imports this module for its file counter.
    from .word_counts import count_words, iter_texts

    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    counts = count_words(iter_texts(iterator), algorithm="bpe", special_tokens=specials, pattern=pattern)
    if not counts:
        raise ValueError("the iterator gave no text outside the special tokens")
    return train_bpe_from_counts(counts, vocab_size, specials, progress=progress)


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
# Pre-token counting


def count_pretokens(
    path: str,
    special_tokens: Sequence[str],
    pattern: str,
    *,
    num_workers: int | None = None,
) -> Counter[str]:
    """Count the pre-tokens of a file (pre-token -> count), with special tokens removed."""
    num_workers = resolve_workers(num_workers)
    size = os.path.getsize(path)
    if size < PARALLEL_MIN_BYTES:
        num_workers = 1
    num_chunks = max(num_workers, -(-size // CHUNK_BYTES))
    bounds = find_chunk_boundaries(path, num_chunks, special_tokens, pattern)
    ranges = list(zip(bounds, bounds[1:]))
    groups = _balance(ranges, num_workers)
    tasks = [(path, group, list(special_tokens), pattern) for group in groups]
    if len(tasks) == 1:
        return _count_ranges(tasks[0])
    totals: Counter[str] = Counter()
    with make_executor(len(tasks)) as executor:
        job = f"counting the pre-tokens of {path}"
        for counts in map_in_order(executor, _count_ranges, tasks, max_in_flight=len(tasks), job=job):
            totals.update(counts)
    return totals


def _balance(ranges: list[tuple[int, int]], num_groups: int) -> list[list[tuple[int, int]]]:
    """Deal byte ranges to at most `num_groups` groups, largest first to the lightest group."""
    groups: list[list[tuple[int, int]]] = [[] for _ in range(min(num_groups, len(ranges)))]
    loads = [0] * len(groups)
    for start, end in sorted(ranges, key=lambda r: r[0] - r[1]):
        lightest = loads.index(min(loads))
        groups[lightest].append((start, end))
        loads[lightest] += end - start
    return groups


def find_chunk_boundaries(
    path: str, num_chunks: int, special_tokens: Sequence[str], pattern: str
) -> list[int]:
    """Byte offsets [0, ..., size] cutting the file where pre-tokenization cannot be changed.

    With special tokens, a boundary is the start of the first special token at or after an even
    split point. Without them, and only for the built-in patterns, it is just after a newline
    that sits between two non-space ASCII bytes (both patterns end and start a pre-token there).
    Otherwise the file is one chunk. The search reads small blocks, never the whole file.
    """
    size = os.path.getsize(path)
    if special_tokens:
        needles = [token.encode("utf-8") for token in special_tokens]
        after = False
    elif pattern in (GPT2_PATTERN, GPT4_PATTERN):
        needles = [b"\n"]
        after = True
    else:
        return [0, size]
    bounds = [0]
    with open(path, "rb") as handle:
        for k in range(1, num_chunks):
            position = max(size * k // num_chunks, bounds[-1])
            cut = _search_forward(handle, position, size, needles, after)
            if not after and cut < size:
                cut = _start_of_covering_special(handle, cut, needles)
            if cut > bounds[-1] and cut < size:
                bounds.append(cut)
    bounds.append(size)
    return bounds


def _search_forward(
    handle: BinaryIO, position: int, size: int, needles: list[bytes], after: bool
) -> int:
    """Offset of the first cut at or after `position` (or `size` when there is none)."""
    overlap = max(len(n) for n in needles) + 1
    while position < size:
        handle.seek(position)
        block = handle.read(SEARCH_BLOCK_BYTES + overlap)
        hits = [h for h in (_find_cut(block, n, after) for n in needles) if h >= 0]
        if hits:
            return position + min(hits)
        if len(block) <= overlap:
            break
        position += SEARCH_BLOCK_BYTES
    return size


def _start_of_covering_special(handle: BinaryIO, cut: int, needles: list[bytes]) -> int:
    """Move a cut back to the start of a longer special token that covers it ("A<|x|>" vs "<|x|>")."""
    span = max(len(n) for n in needles) - 1
    start = max(cut - span, 0)
    handle.seek(start)
    window = handle.read(cut - start + span + 1)
    best = cut
    for needle in needles:
        index = window.find(needle)
        while 0 <= index and start + index < best:
            if start + index + len(needle) > cut:
                best = start + index
                break
            index = window.find(needle, index + 1)
    return best


def _find_cut(block: bytes, needle: bytes, after: bool) -> int:
    """Index in `block` of a cut: at `needle`, or (after=True) just past a safe newline."""
    if not after:
        return block.find(needle)
    index = block.find(needle, 1)
    while 0 < index < len(block) - 1:
        if _is_plain(block[index - 1]) and _is_plain(block[index + 1]):
            return index + 1
        index = block.find(needle, index + 1)
    return -1


def _is_plain(byte: int) -> bool:
    return 0x21 <= byte <= 0x7E


def _count_ranges(task: tuple[str, list[tuple[int, int]], list[str], str]) -> Counter[str]:
    """Worker: read byte ranges one at a time, drop special tokens, count regex pre-tokens."""
    path, ranges, special_tokens, pattern = task
    finder = regex.compile(pattern).findall
    counts: Counter[str] = Counter()
    with open(path, "rb") as handle:
        for start, end in ranges:
            handle.seek(start)
            text = handle.read(end - start).decode("utf-8", errors="replace")
            for part in _split_text(text, special_tokens):
                if part:
                    counts.update(finder(part))
    return counts


def _split_text(text: str, special_tokens: Sequence[str]) -> Iterator[str]:
    special = compile_special_pattern(special_tokens)
    if special is None:
        yield text
        return
    start = 0
    for match in special.finditer(text):
        yield text[start : match.start()]
        start = match.end()
    yield text[start:]


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


def merge_words(
    words: list[list[int]],
    freqs: list[int],
    word_indices: Iterable[int],
    left: int,
    right: int,
    new_id: int,
    pair_counts: defaultdict[int, int],
    where: defaultdict[int, list[int]],
) -> tuple[set[int], int]:
    """Replace (left, right) by new_id in the given words, updating neighbour pair counts.

    Returns the pairs that contain new_id (their counts final for this merge) and how many
    occurrences were replaced, weighted by word frequency (the WordPiece trainer's token counts).
    """
    shift = PAIR_SHIFT
    new_left = new_id << shift  # (new_id, x) = new_left | x
    right_left = right << shift  # (right, x) = right_left | x
    new_pairs: set[int] = set()
    replaced = 0
    # An index is listed once per occurrence of the pair: rebuild each word once.
    for index in dict.fromkeys(word_indices):
        word = words[index]
        if left not in word:
            continue  # stale index entry: an earlier merge consumed the pair
        i = word.index(left)
        out = word[:i]
        last = len(word) - 1
        freq = freqs[index]
        while i <= last:
            token = word[i]
            if token == left and i < last and word[i + 1] == right:
                if out:
                    prev = out[-1] << shift
                    pair_counts[prev | left] -= freq
                    pair = prev | new_id
                    pair_counts[pair] += freq
                    where[pair].append(index)
                    new_pairs.add(pair)
                if i + 1 < last:
                    nxt = word[i + 2]
                    pair_counts[right_left | nxt] -= freq
                    pair = new_left | nxt
                    pair_counts[pair] += freq
                    where[pair].append(index)
                    new_pairs.add(pair)
                out.append(new_id)
                replaced += freq
                i += 2
            else:
                out.append(token)
                i += 1
        words[index] = out
    return new_pairs, replaced


def _invert(token: bytes) -> str:
    return token.translate(INVERT_TABLE).decode("latin-1") + INVERT_END


def progress_bar(total: int, enabled: bool, desc: str):
    """A tqdm bar counting merges, or None when disabled (tqdm is imported only when needed)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="merge")
