"""GPT-2's reversible map between bytes and printable unicode characters (used in vocab.json/merges.txt)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """Map every byte 0..255 to a printable character, as GPT-2's encoder.py does.

    Printable latin-1 bytes map to themselves; the rest are shifted to 256+ so that no token
    string in vocab.json contains whitespace or control characters.
    """
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    shift = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + shift)
            shift += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    """Inverse of `bytes_to_unicode`."""
    return {c: b for b, c in bytes_to_unicode().items()}


def token_to_unicode(token: bytes) -> str:
    """Token bytes -> the printable string GPT-2's files use for it."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def unicode_to_token(text: str) -> bytes:
    """Printable vocab.json string -> token bytes; KeyError on a character outside the map."""
    table = unicode_to_bytes()
    return bytes(table[c] for c in text)
