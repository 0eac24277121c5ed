"""What the merge-based trainers share: a pair of token ids as one int, merging a pair inside words kept as
id lists (the BPE and WordPiece trainers' step), and the progress bar over merges."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

# A pair (a, b) of token ids is stored as the int (a << PAIR_SHIFT) | b.
PAIR_SHIFT = 32
PAIR_MASK = (1 << PAIR_SHIFT) - 1


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


def progress_bar(total: int, enabled: bool, desc: str):
    """A tqdm bar counting merges, or None when disabled (tqdm is imported only when needed)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="merge")
