"""Pair merges over all words at once with numpy: the counting core of the SentencePiece BPE trainer.

Every word's symbols live in one flat array with doubly linked neighbours (`prev`, `next`; -1 at a
word's edge), as sentencepiece's trainer keeps them. A pair (a, b) is the int `a << 32 | b`; `where`
maps a pair to the positions of its left symbol (arrays, entries may go stale: they are checked
when used). Merging a pair replaces every occurrence, left to right within a word (in a run
`a a a` of pair (a, a) only the first two join), with a handful of array operations whatever the
number of occurrences, and returns the count changes of the neighbouring pairs in one batch.
The result equals `pair_merges.merge_words` on the same words.
"""

from __future__ import annotations

from array import array

import numpy as np

from .pair_merges import PAIR_MASK, PAIR_SHIFT

# Merges with fewer candidate positions than this run a plain Python loop (numpy's per-call cost
# dominates small batches); both paths give the same counts.
NUMPY_MIN_POSITIONS = 64


class FlatWords:
    """Words (symbol id lists with counts) as flat linked arrays, with pair counts and positions.

    `pair_counts`: pair -> occurrences weighted by word count (pairs dropped by the caller may
    go negative as their neighbours merge; they are never merged again).
    """

    def __init__(self, symbol: np.ndarray, lengths: np.ndarray, freqs: np.ndarray) -> None:
        """`symbol`: all words' symbol ids back to back; `lengths`, `freqs`: per word."""
        symbol = np.asarray(symbol, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        self.weight = np.repeat(np.asarray(freqs, dtype=np.int64), lengths)  # position -> its word's count
        size = len(symbol)
        ends = np.cumsum(lengths)
        nxt = np.arange(1, size + 1, dtype=np.int64)
        nxt[ends[lengths > 0] - 1] = -1
        prv = np.arange(-1, size - 1, dtype=np.int64)
        prv[(ends - lengths)[lengths > 0]] = -1
        # Each array twice, sharing memory: numpy views for batches, array.array for fast scalars.
        self.lists = tuple(array("q", a.tobytes()) for a in (symbol, nxt, prv, self.weight))
        self.symbol, self.next, self.prev = (np.frombuffer(a, dtype=np.int64) for a in self.lists[:3])
        self._marks = np.zeros(size, dtype=bool)  # scratch flags, all False between merges
        left = np.flatnonzero(self.next >= 0)
        codes = (self.symbol[left] << PAIR_SHIFT) | self.symbol[left + 1]
        order = np.argsort(codes, kind="stable")
        codes, left = codes[order], left[order]
        pairs, starts = np.unique(codes, return_index=True)
        sums = np.add.reduceat(self.weight[left], starts) if len(starts) else starts
        self.pair_counts: dict[int, int] = dict(zip(pairs.tolist(), sums.tolist()))
        bounds = starts.tolist() + [len(left)]
        # pair -> chunks of positions (numpy arrays or lists of ints); a pair gets positions only
        # when it is made, so it has one chunk
        self.where: dict[int, list] = {pair: [left[a:b]] for pair, a, b in zip(pairs.tolist(), bounds, bounds[1:])}

    def merge(self, pair: int, new_id: int) -> tuple[list[int], int]:
        """Replace every occurrence of `pair` by `new_id`; update neighbour counts; drop `pair`.

        Returns the pairs holding `new_id` (their counts final for this merge) and the number of
        occurrences replaced, weighted by word count.
        """
        left_id, right_id = pair >> PAIR_SHIFT, pair & PAIR_MASK
        chunks = self.where.pop(pair, [])
        if sum(map(len, chunks)) < NUMPY_MIN_POSITIONS:
            found = [p for chunk in chunks for p in (chunk if isinstance(chunk, list) else chunk.tolist())]
            found.sort()
            return self._merge_few(pair, new_id, found)
        found = np.concatenate(chunks) if len(chunks) > 1 else np.asarray(chunks[0])
        symbol, nxt, prv, weight = self.symbol, self.next, self.prev, self.weight
        # 1. The live occurrences (stale entries fail the check: their symbols changed).
        after = nxt[found]
        live = (symbol[found] == left_id) & (after >= 0)
        live[live] = symbol[after[live]] == right_id
        at = found[live]
        if left_id == right_id and len(at):
            at = _first_of_each_two(np.sort(at), prv)
        if not len(at):
            self.pair_counts.pop(pair, None)
            return [], 0
        # 2. Neighbours before the merge: L = left of the occurrence, Q = its right symbol, R = after Q.
        q = nxt[at]
        before, beyond = prv[at], nxt[q]
        w = weight[at]
        is_q = self._marks
        is_q[q] = True
        # Old pairs that vanish: (L, a) unless L is another occurrence's b (then (b, a) is counted
        # once, as that occurrence's right pair), and (b, R).
        has_before = before >= 0
        old_left = has_before & ~is_q[np.maximum(before, 0)]
        has_beyond = beyond >= 0
        gone = np.concatenate([(symbol[before[old_left]] << PAIR_SHIFT) | left_id,
                               (right_id << PAIR_SHIFT) | symbol[beyond[has_beyond]]])
        gone_w = np.concatenate([w[old_left], w[has_beyond]])
        is_q[q] = False
        # 3. Merge: the left position takes new_id, the right one dies; relink.
        symbol[at] = new_id
        symbol[q] = -1
        nxt[at] = beyond
        prv[beyond[has_beyond]] = at[has_beyond]
        # 4. New pairs: (new, R) and (L, new) unless L is itself merged (counted as its (new, R)).
        left_of = prv[at]  # after relinking, L of a merged neighbour is that neighbour
        is_at = self._marks
        is_at[at] = True
        new_left = (left_of >= 0) & ~is_at[np.maximum(left_of, 0)]
        is_at[at] = False
        made = np.concatenate([(new_id << PAIR_SHIFT) | symbol[beyond[has_beyond]],
                               (symbol[left_of[new_left]] << PAIR_SHIFT) | new_id])
        made_at = np.concatenate([at[has_beyond], left_of[new_left]])
        made_w = np.concatenate([w[has_beyond], w[new_left]])
        self._apply(gone, gone_w, made, made_w)
        self.pair_counts.pop(pair, None)  # after the updates: (a, a) runs touched it too
        return self._index(made, made_at), int(w.sum())

    def _apply(self, gone: np.ndarray, gone_w: np.ndarray, made: np.ndarray, made_w: np.ndarray) -> None:
        """Add the count changes of all touched pairs to `pair_counts`, one dict update per pair."""
        codes = np.concatenate([gone, made])
        if not len(codes):
            return
        deltas = np.concatenate([-gone_w, made_w])
        order = np.argsort(codes, kind="stable")
        codes = codes[order]
        starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
        pairs, sums = codes[starts], np.add.reduceat(deltas[order], starts)
        counts = self.pair_counts
        for pair, delta in zip(pairs.tolist(), sums.tolist()):
            if delta:
                counts[pair] = counts.get(pair, 0) + delta

    def _index(self, made: np.ndarray, made_at: np.ndarray) -> list[int]:
        """Record the positions of the new pairs in `where`; return the distinct new pairs."""
        if not len(made):
            return []
        order = np.argsort(made, kind="stable")
        made, made_at = made[order], made_at[order]
        starts = np.flatnonzero(np.concatenate([[True], made[1:] != made[:-1]]))
        where = self.where
        new_pairs = made[starts].tolist()
        bounds = starts.tolist() + [len(made)]
        for pair, a, b in zip(new_pairs, bounds, bounds[1:]):
            where[pair] = [made_at[a:b]]  # pairs holding new_id are new: no earlier chunks
        return new_pairs

    def _merge_few(self, pair: int, new_id: int, found: list[int]) -> tuple[list[int], int]:
        """`merge` one occurrence at a time, left to right (a stale or overlapped one fails the check)."""
        left_id, right_id = pair >> PAIR_SHIFT, pair & PAIR_MASK
        symbol, nxt, prv, weight = self.lists
        counts = self.pair_counts
        get = counts.get
        new_left, right_left = new_id << PAIR_SHIFT, right_id << PAIR_SHIFT
        new_pairs: dict[int, list[int]] = {}  # new pair -> its positions
        replaced = 0
        for at in found:
            q = nxt[at]
            if symbol[at] != left_id or q < 0 or symbol[q] != right_id:
                continue
            w = weight[at]
            replaced += w
            before, beyond = prv[at], nxt[q]
            if before >= 0:
                old = symbol[before] << PAIR_SHIFT
                gone = old | left_id
                counts[gone] = get(gone, 0) - w
                made = old | new_id
                counts[made] = get(made, 0) + w
                positions = new_pairs.get(made)
                if positions is None:
                    new_pairs[made] = [before]
                else:
                    positions.append(before)
            if beyond >= 0:
                after = symbol[beyond]
                gone = right_left | after
                counts[gone] = get(gone, 0) - w
                made = new_left | after
                counts[made] = get(made, 0) + w
                positions = new_pairs.get(made)
                if positions is None:
                    new_pairs[made] = [at]
                else:
                    positions.append(at)
                prv[beyond] = at
            symbol[at] = new_id
            symbol[q] = -1
            nxt[at] = beyond
        counts.pop(pair, None)
        where = self.where
        for made, positions in new_pairs.items():
            where[made] = [positions]  # pairs holding new_id are new: no earlier chunks
        return list(new_pairs), replaced


def _first_of_each_two(at: np.ndarray, prv: np.ndarray) -> np.ndarray:
    """Occurrences of a pair (a, a) that merge, left to right: in a run of k a's, the 1st, 3rd, ...

    `at` (sorted) are the left positions of all (a, a) occurrences; one continues a run when the
    symbol before it also starts an occurrence (then it is the previous element of `at`).
    """
    continues = np.zeros(len(at), dtype=bool)
    continues[1:] = prv[at[1:]] == at[:-1]
    run_start = np.flatnonzero(~continues)
    index_in_run = np.arange(len(at)) - np.repeat(run_start, np.diff(np.append(run_start, len(at))))
    return at[index_in_run % 2 == 0]
