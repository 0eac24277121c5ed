"""Cutting raw text into documents: the one document splitter (prepare, eval and the lm-eval tasks use it).

A document is the unit an end-of-text token closes. Text says where its documents end in one of three
ways, tried in order: the separator (`<|endoftext|>`) alone on a line, else blank lines, else nothing
at all (one huge line, a DNA string), which is cut into pieces of about `piece_chars` characters at
whitespace where there is some. The separator counts only on its own line: inside a line it is
ordinary text, so untrusted text cannot end a document (or forge a control token) by spelling it.
"""

from __future__ import annotations

import re
from typing import Literal

from ..tokenization.pretokenize import EOS_TOKEN

SplitRule = Literal["separator", "blank_lines", "fixed_size"]
PIECE_CHARS = 1 << 14
_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")


def separator_line(separator: str = EOS_TOKEN) -> re.Pattern[str]:
    """A regex matching `separator` alone on a line (surrounding spaces allowed)."""
    return re.compile(rf"^[ \t]*{re.escape(separator)}[ \t]*\r?$", flags=re.M)


def choose_split_rule(text: str, separator: str = EOS_TOKEN) -> SplitRule:
    """The first of separator lines, blank lines, fixed-size pieces that the text uses."""
    if separator_line(separator).search(text):
        return "separator"
    if _BLANK_LINES.search(text.strip()):
        return "blank_lines"
    return "fixed_size"


def split_documents(
    text: str, *, rule: SplitRule | None = None, separator: str = EOS_TOKEN, piece_chars: int = PIECE_CHARS
) -> list[str]:
    """Non-empty documents of `text` by `rule` (default: `choose_split_rule`), outer newlines stripped.

    >>> split_documents("a\\n<|endoftext|>\\nb <|endoftext|> c\\n")
    ['a', 'b <|endoftext|> c']
    >>> split_documents("one\\n\\n\\ntwo\\n")
    ['one', 'two']
    """
    if piece_chars < 1:
        raise ValueError(f"piece_chars must be positive, got {piece_chars}")
    rule = rule or choose_split_rule(text, separator)
    if rule == "separator":
        parts = separator_line(separator).split(text)
    elif rule == "blank_lines":
        parts = _BLANK_LINES.split(text)
    elif rule == "fixed_size":
        parts = _fixed_size_pieces(text, piece_chars)
    else:
        raise ValueError(f"unknown split rule {rule!r}; use 'separator', 'blank_lines' or 'fixed_size'")
    return [part.strip("\r\n") for part in parts if part.strip()]


def _fixed_size_pieces(text: str, piece_chars: int) -> list[str]:
    """Pieces of at most `piece_chars`, each cut after the last whitespace in its second half when there is one."""
    pieces, start = [], 0
    while len(text) - start > piece_chars:
        end = start + piece_chars
        space = max(text.rfind(" ", start + piece_chars // 2, end), text.rfind("\n", start + piece_chars // 2, end))
        cut = space + 1 if space >= 0 else end
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces
