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
