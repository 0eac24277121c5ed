"""The Unigram lattices' loops as numba kernels, over flat arrays.

Building a lattice (`build_lattice_reference`'s job: count, then write) walks a trie of the pieces (each node's edges sorted by code
point, searched by bisection): finding the pieces that start at a position is one walk down from the root that
stops where no piece continues. Forward-backward and Viterbi are `unigram_paths`' loops compiled as they are.
Imported only after `kernels_enabled()`.
"""

from __future__ import annotations

import types

import numpy as np

from ..jit import njit
from . import paths as unigram_paths

_EMPTY = -1  # key of a free slot in the trie's edge table
_CODE_BITS = 21  # code points are below 2**21
_HASH = np.uint64(0x9E3779B97F4A7C15)


@njit(inline=True)
def _slot(keys, key):
    """The slot holding `key`, or the free slot where it goes (the table is never full)."""
    mask = len(keys) - 1
    h = np.uint64(key) * _HASH
    slot = int(h >> np.uint64(32)) & mask
    while keys[slot] != key and keys[slot] != _EMPTY:
        slot = (slot + 1) & mask
    return slot


@njit()
def build_trie(codes, starts):
    """The trie of the strings codes[starts[i]:starts[i + 1]]: (first edge of each node and one past its last,
    edge code points, edge children, node -> string id). Node 0 is the root; a node ending no string has id -1.

    Built through an open-addressing table (parent, code point) -> child, then laid out as sorted edge lists:
    a walk then reads a few small arrays that stay in the cache.
    """
    capacity = 1
    while capacity < 2 * len(codes) + 2:
        capacity *= 2
    keys = np.full(capacity, _EMPTY, dtype=np.int64)
    children = np.zeros(capacity, dtype=np.int32)
    node_piece = np.full(len(codes) + 1, -1, dtype=np.int32)
    nodes = 1
    for i in range(len(starts) - 1):
        node = 0
        for k in range(starts[i], starts[i + 1]):
            key = (np.int64(node) << _CODE_BITS) | codes[k]
            slot = _slot(keys, key)
            if keys[slot] == _EMPTY:
                keys[slot] = key
                children[slot] = nodes
                nodes += 1
            node = children[slot]
        node_piece[node] = i
    used = np.flatnonzero(keys != _EMPTY)
    order = used[np.argsort(keys[used])]  # edges by (parent, code)
    first_edge = np.zeros(nodes + 1, dtype=np.int64)
    for slot in order:
        first_edge[(keys[slot] >> _CODE_BITS) + 1] += 1
    first_edge = np.cumsum(first_edge)
    return first_edge, (keys[order] & ((1 << _CODE_BITS) - 1)).astype(np.int32), children[order], node_piece[:nodes]


@njit(inline=True)
def _child(first_edge, edge_code, edge_child, node, code):
    """The child of `node` along `code`, or -1: a binary search of its edges, which are sorted by code."""
    lo, hi = first_edge[node], first_edge[node + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if edge_code[mid] < code:
            lo = mid + 1
        else:
            hi = mid
    if lo < first_edge[node + 1] and edge_code[lo] == code:
        return edge_child[lo]
    return -1


@njit()
def _string_nodes(codes, first, last, first_edge, edge_code, edge_child, node_piece, whole, write, start, end, piece,
                  count):
    """Count the nodes of codes[first:last] on from `count`, writing them there when `write` (the arrays have
    room); return the new count."""
    for i in range(first, last):
        node = 0
        for j in range(i, last):
            node = _child(first_edge, edge_code, edge_child, node, codes[j])
            if node < 0:
                break
            found = node_piece[node]
            if found >= 0 and (whole or i > first or j < last - 1):
                if write:
                    start[count], end[count], piece[count] = i - first, j + 1 - first, found
                count += 1
    return count


@njit()
def count_nodes(codes, starts, first_edge, edge_code, edge_child, node_piece, whole):
    """The offsets of the strings' lattices (`build_lattice_reference`'s), by a walk of the trie: `write_nodes` then
    fills arrays of exactly that size (a growing buffer and its trimmed copy held the nodes twice at the peak)."""
    strings = len(starts) - 1
    offsets = np.zeros(strings + 1, dtype=np.int64)
    nowhere = np.empty(0, dtype=np.int32)
    for s in range(strings):
        offsets[s + 1] = _string_nodes(codes, starts[s], starts[s + 1], first_edge, edge_code, edge_child,
                                       node_piece, whole, False, nowhere, nowhere, nowhere, offsets[s])
    return offsets


@njit()
def write_nodes(codes, starts, first_edge, edge_code, edge_child, node_piece, whole, offsets, start, end, piece):
    """Write the nodes (start, end, piece) of the strings' lattices at `offsets` (`count_nodes`')."""
    for s in range(len(starts) - 1):
        _string_nodes(codes, starts[s], starts[s + 1], first_edge, edge_code, edge_child, node_piece, whole, True,
                      start, end, piece, offsets[s])


@njit()
def keep_nodes(offsets, start, end, piece, alive):
    """`Lattice.keep` in one pass, in place: the nodes of live pieces moved to the front (a node never moves
    forward), `offsets` rewritten; returns how many are kept."""
    count = lo = offsets[0]
    for s in range(len(offsets) - 1):
        hi = offsets[s + 1]
        for k in range(lo, hi):
            if alive[piece[k]]:
                start[count], end[count], piece[count] = start[k], end[k], piece[k]
                count += 1
        offsets[s + 1] = count
        lo = hi
    return count


def _compiled(loop, **helpers):
    """`loop` compiled by numba, with its calls to the plain functions `helpers` names bound to compiled copies."""
    compiled = {name: njit(inline=True)(helper) for name, helper in helpers.items()}
    return njit()(types.FunctionType(loop.__code__, {**loop.__globals__, **compiled}, loop.__name__))


add_expected_counts = _compiled(unigram_paths.add_expected_counts, log_add=unigram_paths.log_add)
viterbi_paths = _compiled(unigram_paths.viterbi_paths)
