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


SPACES = {" ", "\n", "\t", "\r", "\x0b", "\x0c"}  # bytes that start a word when a token begins with one
LINE_BREAKS = {"\n", "\r"}


def word_boundaries(tokens: list[str | None], tokenizer: object) -> tuple[list[bool], list[bool]]:
    """Per token: (starts a word, ends with a line break), for byte-level BPE vocabularies (GPT-2's characters).

    A token starts a word if its first byte is whitespace (``Ġ`` = space, ``Ċ`` = newline); it ends a line if its
    last byte is a line break.
    """
    to_byte = unicode_to_bytes()

    def decoded(char: str) -> str:
        return chr(to_byte[char]) if char in to_byte else char

    starts = [bool(t) and decoded(t[0]) in SPACES for t in tokens]
    ends = [bool(t) and decoded(t[-1]) in LINE_BREAKS for t in tokens]
    return starts, ends
