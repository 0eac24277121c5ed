"""Pre-tokenization shared by BPE training and encoding: regex patterns and special-token splitting.

Pre-tokens are the units BPE works inside: no merge ever crosses a pre-token or a special token.
`compile_pretokenizer` compiles a pattern so that `\\p{L}`, `\\p{N}` and `\\s` mean what they mean to the
fast twin and tiktoken (Unicode 16.0, `regex_classes`), not the newer Unicode of the `regex` module.
`pretokenize_gpt2` is a faster path for GPT-2's pattern (stdlib `re` on ASCII stretches), and
`find_safe_cut` finds places where text can be cut without changing its pre-tokens (streaming, blocks
for threads).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import regex

from .regex_classes import LETTER, NUMBER, WHITESPACE

# GPT-2's pattern (identical to tiktoken's "gpt2" pat_str).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# cl100k ("GPT-4") pattern, as in tiktoken.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
PATTERNS = {"gpt2": GPT2_PATTERN, "gpt4": GPT4_PATTERN}
# The end-of-text token: document separator in corpora, and eos/bos/unk of TinyLM's byte-level BPE.
EOS_TOKEN = "<|endoftext|>"
# The pad token every family but WordPiece (which has BERT's [PAD]) is trained with unless told otherwise:
# apart from the end of text, so that padding masked out of a loss never teaches a model not to end.
PAD_TOKEN = "<|pad|>"


def resolve_pattern(pattern: str) -> str:
    """Return the regex for a named pattern ("gpt2", "gpt4") or a custom pattern string as is."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be 'gpt2', 'gpt4' or a non-empty regex string, got {pattern!r}")
    resolved = PATTERNS.get(pattern, pattern)
    try:
        regex.compile(resolved)
    except regex.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regex: {exc}") from exc
    check_pattern_backtracking(resolved)
    return resolved


def _class_body(ranges: tuple[tuple[int, int], ...]) -> str:
    """The inside of a regex character class holding exactly `ranges`."""
    return "".join(f"\\U{a:08X}-\\U{b:08X}" for a, b in ranges)


# \p{L}, \p{N} and \s as the fast twin has them, and the regex escapes of `_explicit_classes`.
_CLASS_BODIES = {r"\p{L}": _class_body(LETTER), r"\p{N}": _class_body(NUMBER), r"\s": _class_body(WHITESPACE)}
_PATTERN_ATOM = regex.compile(r"\\p\{[LN]\}|\\[sS]|\\.|\[\^?|\]|.", regex.DOTALL)


def _explicit_classes(pattern: str) -> str:
    """`pattern` with `\\p{L}`, `\\p{N}`, `\\s` and `\\S` spelled out as ranges (classes are not nested)."""
    out, in_class = [], False
    for atom in _PATTERN_ATOM.findall(pattern):
        if atom in _CLASS_BODIES:
            atom = _CLASS_BODIES[atom] if in_class else f"[{_CLASS_BODIES[atom]}]"
        elif atom == r"\S" and not in_class:
            atom = "[^" + _CLASS_BODIES[r"\s"] + "]"
        elif atom.startswith("["):
            in_class = True
        elif atom == "]":
            in_class = False
        out.append(atom)
    return "".join(out)


@functools.cache
def compile_pretokenizer(pattern: str) -> regex.Pattern:
    """The compiled pre-tokenizer of a resolved pattern; GPT-2's and cl100k's classes are the fast twin's.

    >>> compile_pretokenizer(GPT2_PATTERN).findall(chr(0x10940) + "'s") == [chr(0x10940) + "'", "s"]  # U+10940:
    True
    >>> regex.findall(GPT2_PATTERN, chr(0x10940) + "'s") == [chr(0x10940), "'s"]  # a letter to Unicode 17
    True
    """
    return regex.compile(_explicit_classes(pattern) if pattern in PATTERNS.values() else pattern)


def pattern_name(pattern: str) -> str:
    """The name of a built-in pattern ("gpt2", "gpt4") given by name or as its regex; any other regex as is."""
    resolved = resolve_pattern(pattern)
    return next((name for name, regex in PATTERNS.items() if regex == resolved), resolved)


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


# GPT-2's pattern restated for ASCII-only text in stdlib `re`, which runs ~2x faster than `regex`.
# On ASCII, \p{L} is [A-Za-z], \p{N} is [0-9] and the `regex` module's \s is [\t\n\v\f\r ]
# (stdlib \s would also match \x1c-\x1f, so whitespace is spelled out).
_WS = r"\t\n\x0b\x0c\r "
ASCII_GPT2_PATTERN = (
    rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{_WS}A-Za-z0-9]+|[{_WS}]+(?![^{_WS}])|[{_WS}]+"""
)
# A run of non-ASCII characters: the stretches the fast ASCII path must hand to `regex`.
NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
# Safe cuts, searched in reverse (see `has_safe_cuts`); the group that matched starts the cut:
# a space after a non-space, a non-space after a newline between non-spaces, other after a letter.
_LETTER, _NOT_SPACE = f"[{_class_body(LETTER)}]", f"[^{_class_body(WHITESPACE)}]"
_OTHER = "[^" + "".join(_CLASS_BODIES.values()) + "]"


@functools.cache
def _safe_cut_pattern() -> regex.Pattern:
    """Compiled at first use, as GPT-2's pattern is (`pretokenize_gpt2`): 15 ms each, which importing this
    module for its other helpers (WordPiece, special tokens) does not pay."""
    return regex.compile(rf"(?r){_NOT_SPACE}(?:( )|\n({_NOT_SPACE}))|{_LETTER}({_OTHER})")


def has_safe_cuts(pattern: str) -> bool:
    """Whether `find_safe_cut` is valid for this pattern (proved for GPT-2's and cl100k's patterns).

    For both, these positions p are pre-token boundaries whose two sides pre-tokenize independently:
    - text[p] == " " after a non-space: no alternative crosses from a non-space into a following space
      (a space only ever starts a pre-token), and only `(?!\\S)` and `$` look ahead, which at p see the
      same space either way;
    - just after a "\\n" that sits between two non-spaces: the newline ends its pre-token either way
      (alone, or after punctuation in cl100k's `[\\r\\n]*+`), and no pre-token starts with it and goes on;
    - a character that is neither whitespace, letter nor number after a letter: the letters end there
      and nothing ahead reaches back (text without spaces, such as Chinese, has these).
    """
    return pattern in (GPT2_PATTERN, GPT4_PATTERN)


def find_safe_cut(text: str, start: int = 0, end: int | None = None) -> int:
    """The last safe cut p in (start, end] (see `has_safe_cuts`), or -1.

    Splitting the text at p and pre-tokenizing both sides gives the same pre-tokens as the whole
    (for patterns where `has_safe_cuts` holds).
    """
    end = len(text) - 1 if end is None else min(end, len(text) - 1)
    if end <= start:
        return -1
    match = _safe_cut_pattern().search(text, start, end + 1)
    return -1 if match is None else match.start(match.lastindex)


def find_next_safe_cut(text: str, start: int) -> int:
    """The first position p >= start where text[p] == " " follows a non-space (Python isspace), or -1."""
    p = text.find(" ", max(start, 1))
    while p != -1 and text[p - 1].isspace():
        p = text.find(" ", p + 1)
    return p


def find_previous_safe_cut(text: str, start: int, end: int) -> int:
    """The last position p in (start, end] where text[p] == " " follows a non-space, or `start`."""
    p = text.rfind(" ", start + 1, end + 1)
    while p > start and text[p - 1].isspace():
        p = text.rfind(" ", start + 1, p)
    return p if p > start else start


_ASCII_GPT2 = re.compile(ASCII_GPT2_PATTERN)


def pretokenize_gpt2(text: str) -> list[str]:
    """GPT-2 pre-tokens of `text`, equal to `compile_pretokenizer(GPT2_PATTERN).findall(text)` but faster.

    ASCII stretches go through stdlib `re`; each non-ASCII run, widened to the safe cuts around it
    (see `has_safe_cuts`), goes through `regex`.
    """
    if text.isascii():
        return _ASCII_GPT2.findall(text)
    pieces: list[str] = []
    pos = 0
    for run in NON_ASCII_RUN.finditer(text):
        first, last = run.span()
        if last <= pos:
            continue
        start = find_previous_safe_cut(text, pos, first)
        end = find_next_safe_cut(text, last)
        end = len(text) if end == -1 else end
        pieces += _ASCII_GPT2.findall(text[pos:start])
        pieces += compile_pretokenizer(GPT2_PATTERN).findall(text[start:end])
        pos = end
    pieces += _ASCII_GPT2.findall(text[pos:])
    return pieces


# --------------------------------------------------------------------------- catastrophic backtracking
# A quantifier: *, +, ?, {n}, {n,}, {,m}, {n,m}, then ? (lazy) or + (possessive: never gives back).
_QUANTIFIER = re.compile(r"(?:([*+?])|\{(\d*)(,?)(\d*)\})([?+]?)")
_GROUP_OPENING = re.compile(r"\((\?(?:[:>=!|]|<[=!]|P?<\w+>|P=\w+\)|[a-zA-Z^-]+[:)]|#[^)]*\)))?")


def check_pattern_backtracking(pattern: str) -> None:
    """Refuse a regex with the shapes that backtrack exponentially: a repeated group whose body itself repeats or
    alternates, as `(a+)+`, `(\\w+\\s?)*` or `(a|ab)*` (three lines of text can take minutes).

    A possessive quantifier (`++`, `*+`) or an atomic group (`(?>...)`) never backtracks, so either makes such a
    shape safe; GPT-2's and GPT-4's patterns pass. Polynomial shapes (`\\s*\\s*x`) are not refused.
    """
    stack = [[False, False, False]]  # per open group: [body repeats, body alternates, atomic]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "(":
            opening = _GROUP_OPENING.match(pattern, i)
            i = opening.end()
            prefix = opening.group(1) or ""
            if not (prefix.endswith(")") and prefix != "("):  # (?i) and (?#...) open no group
                stack.append([False, False, prefix == "?>"])
            continue
        if char == "|":
            stack[-1][1] = True
            i += 1
            continue
        if char == ")" and len(stack) > 1:
            repeats, alternates, atomic = stack.pop()
            end = i
            i, repeated, unbounded = _read_quantifier(pattern, i + 1)
            if repeated and not atomic and (repeats or alternates):
                raise ValueError(
                    f"pattern {pattern!r} can take exponential time: the group ending at character {end} repeats "
                    "a part that itself repeats or alternates; make a quantifier possessive (++ or *+) or the "
                    "group atomic ((?>...))")
            stack[-1][0] |= unbounded or (repeats and not atomic)
            continue
        i = _skip_atom(pattern, i)
        i, _, unbounded = _read_quantifier(pattern, i)
        stack[-1][0] |= unbounded


def _read_quantifier(pattern: str, i: int) -> tuple[int, bool, bool]:
    """(index after the quantifier at `i`, whether it repeats more than once and backtracks, whether unbounded)."""
    match = _QUANTIFIER.match(pattern, i)
    if match is None:
        return i, False, False
    symbol, low, comma, high, mode = match.groups()
    if symbol is None and not (low or high):
        return i, False, False  # "{" or "{,}" is a literal here
    if symbol is not None:
        most = 1 if symbol == "?" else None
    else:
        most = (int(high) if high else None) if comma else int(low)
    backtracks = mode != "+"
    return match.end(), backtracks and (most is None or most > 1), backtracks and most is None


def _skip_atom(pattern: str, i: int) -> int:
    """The index after the atom at `i`: an escape (\\p{L}, \\x{41}), a character class, or one character."""
    if pattern[i] == "\\":
        braced = regex.match(r"\\[pPNxuUg]\{[^}]*\}", pattern[i:])
        return i + (braced.end() if braced else 2)
    if pattern[i] == "[":
        j = i + 1
        j += pattern[j] == "^" if j < len(pattern) else 0
        j += pattern[j] == "]" if j < len(pattern) else 0  # a leading "]" is a literal
        while j < len(pattern) and pattern[j] != "]":
            j += 2 if pattern[j] == "\\" else 1
        return j + 1
    return i + 1
