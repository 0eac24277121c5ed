"""Cutting a stream of items into consecutive groups of about a given total size: the batches of work
that BPE encoding fills its caches with, and the tasks parallel encoding hands to each worker."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def group_by_size(items: Iterable[T], size_of: Callable[[T], int], limit: int) -> Iterator[list[T]]:
    """Consecutive items in lists whose sizes sum to `limit` or just past it (the last list: less)."""
    group: list[T] = []
    size = 0
    for item in items:
        group.append(item)
        size += size_of(item)
        if size >= limit:
            yield group
            group, size = [], 0
    if group:
        yield group
