"""Pre-tokenization shared by BPE training and encoding: regex patterns and special-token splitting.

Pre-tokens are the units BPE works inside: no merge ever crosses a pre-token or a special token.
"""

from __future__ import annotations

from collections.abc import Iterable

import regex

# GPT-2's pattern (identical to tiktoken's "gpt2" pat_str).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# cl100k ("GPT-4") pattern, as in tiktoken.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
PATTERNS = {"gpt2": GPT2_PATTERN, "gpt4": GPT4_PATTERN}


def resolve_pattern(pattern: str) -> str:
    """Return the regex for a named pattern ("gpt2", "gpt4") or a custom pattern string as is."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be 'gpt2', 'gpt4' or a non-empty regex string, got {pattern!r}")
    resolved = PATTERNS.get(pattern, pattern)
    try:
        regex.compile(resolved)
    except regex.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regex: {exc}") from exc
    return resolved


def check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """Validate special tokens (non-empty strings, no duplicates) and return them as a list."""
    tokens = list(special_tokens or [])
    for token in tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
    duplicates = sorted({t for t in tokens if tokens.count(t) > 1})
    if duplicates:
        raise ValueError(f"duplicate special tokens: {duplicates}")
    return tokens


def compile_special_pattern(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """A regex matching any special token, longest first, so overlapping tokens resolve to the longest."""
    tokens = sorted(set(special_tokens), key=len, reverse=True)
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(t) for t in tokens))


def split_on_special_tokens(
    text: str, special_tokens: Iterable[str], *, keep: bool = False
) -> list[str]:
    """Split text at special tokens; with keep=True the special tokens stay in the list as items.

    >>> split_on_special_tokens("a<|endoftext|>b", ["<|endoftext|>"])
    ['a', 'b']
    """
    special = compile_special_pattern(special_tokens)
    if special is None:
        return [text]
    parts: list[str] = []
    start = 0
    for match in special.finditer(text):
        parts.append(text[start : match.start()])
        if keep:
            parts.append(match.group())
        start = match.end()
    parts.append(text[start:])
    return parts
