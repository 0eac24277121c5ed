"""The BPE merge loop as a numba kernel: `bpe_merges.learn_merges_reference` over arrays.

It runs byte-level BPE, SentencePiece BPE (another tie-break in the heap, and `shapes`: which pairs may
join) and WordPiece (`prefix_length`: a continuation joins without its prefix, an existing token keeps its id).

The same algorithm: words back to back in one linked array of symbols, a pair table (open addressing,
pair -> weighted count and a list of the positions of its left symbol), and a max-heap of (count, pair)
entries updated lazily. Growable arrays double when full; what one step reads together sits in one row. Imported only after `kernels_enabled()`.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from ..piece_rules import MAX_PIECE_LENGTH

_EMPTY = -1  # key of a free slot in the pair table; end of a position list
_HASH = np.uint64(0x9E3779B97F4A7C15)


@njit()
def grow(array, size):
    """`array` with room for at least `size` items (rows of a 2-d array): doubled, contents kept."""
    if size <= len(array):
        return array
    bigger = np.empty((max(size, 2 * len(array)),) + array.shape[1:], dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


# Columns of the pair table (one row per slot, so that a probe reads one cache line) and of the word links.
KEY, COUNT, HEAD = 0, 1, 2
SYM, NEXT, PREV, WEIGHT = 0, 1, 2, 3


@njit()
def _slot(table, key):
    """The slot holding `key`, or the free slot where it goes (the table is never full)."""
    mask = len(table) - 1
    h = np.uint64(key) * _HASH
    slot = int(h ^ (h >> np.uint64(32))) & mask  # the high half mixes in the left id, the low half the right
    while table[slot, KEY] != key and table[slot, KEY] != _EMPTY:
        slot = (slot + 1) & mask
    return slot


@njit()
def _new_table(capacity):
    table = np.zeros((capacity, 3), dtype=np.int64)
    table[:, KEY] = _EMPTY
    table[:, HEAD] = _EMPTY
    return table


@njit()
def _rehash(table):
    """The pair table at twice the capacity."""
    bigger = _new_table(2 * len(table))
    for old in range(len(table)):
        if table[old, KEY] != _EMPTY:
            bigger[_slot(bigger, table[old, KEY])] = table[old]
    return bigger


@njit()
def _compare(tok, off, x, y):
    """-1, 0 or 1 as the bytes of token x are less than, equal to or greater than token y's."""
    i, j, end_i, end_j = off[x], off[y], off[x + 1], off[y + 1]
    while i < end_i and j < end_j:
        if tok[i] != tok[j]:
            return 1 if tok[i] > tok[j] else -1
        i += 1
        j += 1
    return int(i < end_i) - int(j < end_j)


@njit()
def _before(hc, ha, hb, i, j, tok, off, shapes):
    """Whether heap entry i pops before entry j: the greater count first, then on a tie

    byte-level BPE (`shapes` empty): the greater (left bytes, right bytes), then the smaller ids;
    sentencepiece BPE (`shapes`, see `join_shape`): the shorter joined piece, then the smaller joined
    UTF-8, then the smaller ids.
    """
    if hc[i] != hc[j]:
        return hc[i] > hc[j]
    if len(shapes):
        size_i, size_j = shapes[ha[i], 0] + shapes[hb[i], 0], shapes[ha[j], 0] + shapes[hb[j], 0]
        if size_i != size_j:
            return size_i < size_j
        order = -_compare_joined(tok, off, ha[i], hb[i], ha[j], hb[j])
    else:
        order = _compare(tok, off, ha[i], ha[j])
        if order == 0:
            order = _compare(tok, off, hb[i], hb[j])
    if order != 0:
        return order > 0
    return ha[i] < ha[j] or (ha[i] == ha[j] and hb[i] < hb[j])


@njit()
def join_shape(shapes, a, b, new_id):
    """Whether tokens a and b may join; when so and `new_id` >= 0, store the joined piece's shape there.

    sentencepiece's piece rules (`piece_rules.join_shapes`) on shapes (id -> characters (-1: never joins),
    starts with "▁", first script, last script; -1: none): at most `MAX_PIECE_LENGTH` characters, no "▁"
    after the start, one script. Empty `shapes` (byte-level BPE): every pair joins.
    """
    if not len(shapes):
        return True
    if shapes[a, 0] < 0 or shapes[b, 0] < 0 or shapes[a, 0] + shapes[b, 0] > MAX_PIECE_LENGTH or shapes[b, 1]:
        return False
    if shapes[a, 3] >= 0 and shapes[b, 2] >= 0 and shapes[a, 3] != shapes[b, 2]:
        return False
    if new_id >= 0:
        shapes[new_id, 0], shapes[new_id, 1] = shapes[a, 0] + shapes[b, 0], shapes[a, 1]
        shapes[new_id, 2] = shapes[a, 2] if shapes[a, 2] >= 0 else shapes[b, 2]
        shapes[new_id, 3] = shapes[b, 3] if shapes[b, 3] >= 0 else shapes[a, 3]
    return True


@njit()
def _joined_byte(tok, off, a, b, k):
    """Byte k of the bytes of token a followed by token b."""
    size_a = off[a + 1] - off[a]
    return tok[off[a] + k] if k < size_a else tok[off[b] + k - size_a]


@njit()
def _compare_joined(tok, off, a, b, c, d):
    """-1, 0 or 1 as bytes(a) + bytes(b) are less than, equal to or greater than bytes(c) + bytes(d)."""
    size_ab = off[a + 1] - off[a] + off[b + 1] - off[b]
    size_cd = off[c + 1] - off[c] + off[d + 1] - off[d]
    for k in range(min(size_ab, size_cd)):
        x, y = _joined_byte(tok, off, a, b, k), _joined_byte(tok, off, c, d, k)
        if x != y:
            return 1 if x > y else -1
    return int(size_ab > size_cd) - int(size_ab < size_cd)


@njit()
def _swap(hc, ha, hb, i, j):
    hc[i], hc[j] = hc[j], hc[i]
    ha[i], ha[j] = ha[j], ha[i]
    hb[i], hb[j] = hb[j], hb[i]


@njit()
def _sift_up(hc, ha, hb, i, tok, off, shapes):
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(hc, ha, hb, i, parent, tok, off, shapes):
            break
        _swap(hc, ha, hb, i, parent)
        i = parent


@njit()
def _sift_down(hc, ha, hb, size, tok, off, shapes):
    i = 0
    while True:
        best, child = i, 2 * i + 1
        if child < size and _before(hc, ha, hb, child, best, tok, off, shapes):
            best = child
        if child + 1 < size and _before(hc, ha, hb, child + 1, best, tok, off, shapes):
            best = child + 1
        if best == i:
            return
        _swap(hc, ha, hb, i, best)
        i = best


# Slots of the `state` array: the scalars the helpers below update.
USED, NUM_OCC, HEAP_SIZE = 0, 1, 2


@njit()
def learn_merges_kernel(symbols, lengths, freqs, first_tok, first_off, shapes, num_merges, like, prefix_length):
    """Merged (left, right) id pairs, in order: the words are `symbols` cut by `lengths`, counted `freqs`;
    tokens 0.. have the bytes `first_tok[first_off[i]:first_off[i + 1]]`.

    `shapes` empty: byte-level BPE. Else sentencepiece BPE: rows for the first tokens and room for the
    merged ones (see `join_shape`); a pair whose joined piece already exists is dropped, not merged.
    `prefix_length` >= 0: WordPiece, where the right token's first `prefix_length` bytes are not joined and
    a joined token that exists keeps its id (the merge is listed; `num_merges` counts new tokens).
    The word links and position lists take the integer type of `like` (int32 where it holds them: half the memory).
    """
    links = _link_words(symbols, lengths, freqs, like)
    num_tokens = len(first_off) - 1
    tok = grow(first_tok.copy(), len(first_tok) + 16)
    off = np.zeros(num_tokens + num_merges + 1, dtype=np.int64)
    off[: num_tokens + 1] = first_off
    wordpiece = prefix_length >= 0
    pieces = _piece_table(tok, off, num_tokens, num_tokens + num_merges if len(shapes) or wordpiece else 0)
    state = np.zeros(3, dtype=np.int64)
    table, occ = _count_pairs(links, state, like)
    empty = np.empty(0, dtype=np.int32)
    hc, ha, hb = _push_made(table[table[:, KEY] != _EMPTY, KEY], table, np.empty(0, dtype=np.int64), empty, empty,
                            tok, off, shapes, state)  # a heap of every pair that may merge
    merges = np.empty((num_merges, 2), dtype=np.int32)
    done = listed = 0  # new tokens, merges listed
    while done < num_merges and state[HEAP_SIZE] > 0:
        left, right = _pop_current(table, hc, ha, hb, tok, off, shapes, state)
        if left < 0:
            continue
        new_id = num_tokens + done
        pair = (np.int64(left) << 32) | right
        tok = _append_token(tok, off, left, right, new_id, max(prefix_length, 0))
        existing = _add_piece(pieces, tok, off, new_id) if len(pieces) else _EMPTY
        if existing != _EMPTY and not wordpiece:
            table[_slot(table, pair), COUNT] = 0  # sentencepiece drops a pair whose piece already exists
            continue
        if existing == _EMPTY:
            join_shape(shapes, left, right, new_id)
            done += 1
        else:
            new_id = existing  # WordPiece: the joined token exists and keeps its id
        merges = grow(merges, listed + 1)
        merges[listed, 0], merges[listed, 1] = left, right
        listed += 1
        positions = _take_positions(table, occ, pair, wordpiece)
        occ = grow(occ, state[NUM_OCC] + 2 * len(positions))  # two entries per occurrence at most
        made, table = _merge_positions(positions, left, right, new_id, links, table, occ, state, existing != _EMPTY)
        # The merge uncounts the pair's overlapped occurrences ("a a a" for (a, a)) after its count was cleared:
        # clear it again, as the reference does, or a WordPiece merge that makes the pair anew counts from below 0.
        table[_slot(table, pair), COUNT] = 0
        hc, ha, hb = _push_made(made, table, hc, ha, hb, tok, off, shapes, state)
    return merges[:listed]


@njit()
def _piece_table(tok, off, num_tokens, room):
    """A set of pieces (open addressing over ids, keyed by their bytes) holding tokens 0..num_tokens-1,
    with room for `room` pieces (0: no set, for byte-level BPE)."""
    capacity = 16
    while capacity < 2 * room:
        capacity *= 2
    table = np.full(capacity if room else 0, _EMPTY, dtype=np.int64)
    for token in range(num_tokens if room else 0):
        _add_piece(table, tok, off, token)
    return table


@njit()
def _add_piece(table, tok, off, token):
    """Add token's bytes to the set: `_EMPTY`, or the id of an equal piece already there (nothing added)."""
    h = _HASH
    for k in range(off[token], off[token + 1]):
        h = (h ^ np.uint64(tok[k])) * _HASH
    mask = len(table) - 1
    slot = int(h ^ (h >> np.uint64(32))) & mask
    while table[slot] != _EMPTY:
        if _compare(tok, off, table[slot], token) == 0:
            return table[slot]
        slot = (slot + 1) & mask
    table[slot] = token
    return _EMPTY


@njit()
def _link_words(symbols, lengths, freqs, like):
    """Words back to back, one row per position: symbol id, next and previous position in the word (-1:
    none), the word's count (one row, so that a merge reads one cache line per position)."""
    links = np.empty((len(symbols), 4), dtype=like.dtype)
    start = 0
    for w in range(len(lengths)):
        end = start + lengths[w]
        for p in range(start, end):
            links[p, SYM] = symbols[p]
            links[p, NEXT] = p + 1 if p + 1 < end else -1
            links[p, PREV] = p - 1 if p > start else -1
            links[p, WEIGHT] = freqs[w]
        start = end
    return links


@njit()
def _count_pairs(links, state, like):
    """The pair table (key, weighted count, head of its position list) and the position-list nodes
    (position, next node: linked newest first).

    Each pair's first nodes lie side by side, in position order (counted, then placed): reading a list
    then walks memory in order, not one node per cache miss across all the pairs' interleaved nodes.
    """
    # Sized by the distinct pairs, not the positions, so that the table stays in the CPU's cache.
    table = _new_table(1 << 12)
    for p in range(len(links)):  # 1. count each pair, and its occurrences in HEAD for now
        q = links[p, NEXT]
        if q >= 0:
            key = (np.int64(links[p, SYM]) << 32) | links[q, SYM]
            slot = _slot(table, key)
            if table[slot, KEY] == _EMPTY:
                table[slot, KEY], table[slot, HEAD] = key, 0
                state[USED] += 1
            table[slot, COUNT] += links[p, WEIGHT]
            table[slot, HEAD] += 1
            if 2 * state[USED] > len(table):
                table = _rehash(table)
    fill = np.empty(len(table), dtype=np.int64)  # 2. each pair's first node
    for slot in range(len(table)):
        if table[slot, KEY] != _EMPTY:
            fill[slot] = state[NUM_OCC]
            state[NUM_OCC] += table[slot, HEAD]
            table[slot, HEAD] = _EMPTY
    occ = np.empty((max(len(links), 16), 2), dtype=like.dtype)
    for p in range(len(links)):  # 3. place the positions
        q = links[p, NEXT]
        if q >= 0:
            slot = _slot(table, (np.int64(links[p, SYM]) << 32) | links[q, SYM])
            node = fill[slot]
            fill[slot] = node + 1
            occ[node, 0], occ[node, 1] = p, table[slot, HEAD]
            table[slot, HEAD] = node
    return table, occ


@njit()
def _add(table, occ, state, key, w, at):
    """Count `w` more of pair `key` and list position `at` for it (`occ` has room): (whether the pair is
    new, the table, grown when half full)."""
    slot = _slot(table, key)
    new = table[slot, KEY] == _EMPTY
    if new:
        table[slot, KEY] = key
        state[USED] += 1
    table[slot, COUNT] += w
    node = state[NUM_OCC]
    occ[node, 0], occ[node, 1] = at, table[slot, HEAD]
    table[slot, HEAD] = node
    state[NUM_OCC] = node + 1
    if 2 * state[USED] > len(table):
        table = _rehash(table)
    return new, table


@njit()
def _push(hc, ha, hb, count, key, tok, off, shapes, state):
    """Push (count, pair) (the heap has room)."""
    size = state[HEAP_SIZE]
    hc[size], ha[size], hb[size] = count, key >> 32, key & 0xFFFFFFFF
    state[HEAP_SIZE] = size + 1
    _sift_up(hc, ha, hb, size, tok, off, shapes)


@njit()
def _pop_current(table, hc, ha, hb, tok, off, shapes, state):
    """Pop the top entry: its (left, right) when its count is current, else (-1, -1) after pushing it
    back with its current count (when that is above zero)."""
    count, left, right = hc[0], ha[0], hb[0]
    size = state[HEAP_SIZE] - 1
    _swap(hc, ha, hb, 0, size)
    state[HEAP_SIZE] = size
    _sift_down(hc, ha, hb, size, tok, off, shapes)
    key = (np.int64(left) << 32) | right
    slot = _slot(table, key)
    current = table[slot, COUNT] if table[slot, KEY] == key else 0
    if current == count:
        return left, right
    if current > 0:
        _push(hc, ha, hb, current, key, tok, off, shapes, state)
    return -1, -1


@njit()
def _append_token(tok, off, left, right, new_id, skip):
    """Store the bytes of token `new_id` = left + right without its first `skip` bytes."""
    a_len, b_len = off[left + 1] - off[left], off[right + 1] - off[right] - skip
    start = off[new_id]
    tok = grow(tok, start + a_len + b_len)
    tok[start: start + a_len] = tok[off[left]: off[left + 1]]
    tok[start + a_len: start + a_len + b_len] = tok[off[right] + skip: off[right + 1]]
    off[new_id + 1] = start + a_len + b_len
    return tok


@njit()
def _take_positions(table, occ, key, unsorted):
    """The listed positions of pair `key`, left to right; the pair's count and list are cleared.

    A list is newest first, and its positions were added left to right (the first pairs by position; a
    pair holding a merged token during that one merge, which runs left to right): so it reads right to left.
    Not so where a merge can reuse an existing token (`unsorted`, WordPiece): that list is sorted.
    """
    slot = _slot(table, key)
    found = 0
    node = table[slot, HEAD]
    while node != _EMPTY:
        found += 1
        node = occ[node, 1]
    positions = np.empty(found, dtype=np.int64)
    node = table[slot, HEAD]
    for k in range(found - 1, -1, -1):
        positions[k] = occ[node, 0]
        node = occ[node, 1]
    table[slot, HEAD] = _EMPTY
    table[slot, COUNT] = 0
    return np.unique(positions) if unsorted else positions


@njit()
def _merge_positions(positions, left, right, new_id, links, table, occ, state, reused):
    """Replace the live occurrences of (left, right) at `positions` by `new_id`: (the pairs made, the table).

    Each pair made holds `new_id`, so each is new: listed once, when first counted. Where `new_id` is a
    `reused` token, its pairs may exist already and grow: each is listed at every occurrence.
    """
    made = np.empty(2 * len(positions), dtype=np.int64)
    num_made = 0
    for p in positions:
        q = links[p, NEXT]
        if links[p, SYM] != left or q < 0 or links[q, SYM] != right:
            continue  # stale, or overlapped by the occurrence just merged ("a a a" for (a, a))
        w, before, after = links[p, WEIGHT], links[p, PREV], links[q, NEXT]
        if before >= 0:
            s = np.int64(links[before, SYM]) << 32
            table[_slot(table, s | left), COUNT] -= w
            new, table = _add(table, occ, state, s | new_id, w, before)
            if new or reused:
                made[num_made] = s | new_id
                num_made += 1
        if after >= 0:
            s = np.int64(links[after, SYM])
            table[_slot(table, (np.int64(right) << 32) | s), COUNT] -= w
            new, table = _add(table, occ, state, (np.int64(new_id) << 32) | s, w, p)
            if new or reused:
                made[num_made] = (np.int64(new_id) << 32) | s
                num_made += 1
            links[after, PREV] = p
        links[p, SYM], links[q, SYM], links[p, NEXT] = new_id, -1, after
    return made[:num_made], table


@njit()
def _push_made(made, table, hc, ha, hb, tok, off, shapes, state):
    """Push the pairs `made` that may merge and whose count is above zero (new pairs' can net to zero)."""
    room = state[HEAP_SIZE] + len(made)
    hc, ha, hb = grow(hc, room), grow(ha, room), grow(hb, room)
    for key in made:
        count = table[_slot(table, key), COUNT]
        if count > 0 and join_shape(shapes, key >> 32, key & 0xFFFFFFFF, -1):
            _push(hc, ha, hb, count, key, tok, off, shapes, state)
    return hc, ha, hb
