"""The encoders' cache of already encoded words (pre-tokens, units): the one implementation for every family."""

from __future__ import annotations

from collections.abc import Callable

CACHE_LIMIT = 1 << 16  # words kept before the cache starts afresh (bounded memory on endless streams)


class EncodeCache(dict):
    """word str -> ids; a miss runs `encode`, so hits never leave C when read through `map`."""

    def __init__(self, encode: Callable[[str], list[int]], limit: int = CACHE_LIMIT) -> None:
        super().__init__()
        self._encode = encode
        self.limit = limit

    def __missing__(self, word: str) -> list[int]:
        ids = self._encode(word)
        if len(self) >= self.limit:
            self.clear()
        self[word] = ids
        return ids


def missing_keys(cache: dict[str, list[int]], wanted: set[str], limit: int) -> set[str]:
    """The words of `wanted` that `cache` lacks, for filling in bulk; all of them, after emptying the
    cache, when adding them would pass `limit` (the rule `EncodeCache` follows one miss at a time)."""
    missing = wanted.difference(cache)
    if len(cache) + len(missing) > limit:
        cache.clear()
        return wanted
    return missing
