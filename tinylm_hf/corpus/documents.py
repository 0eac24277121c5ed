"""Cutting raw text into documents: the one document splitter (prepare, eval and the lm-eval tasks use it).

A document is the unit an end-of-text token closes. Text says where its documents end in one of three
ways, tried in order: the separator (`<|endoftext|>`) alone on a line, else blank lines, else nothing
at all (one huge line, a DNA string), which is cut into pieces of about `piece_chars` characters at
whitespace where there is some. The separator counts only on its own line: inside a line it is
ordinary text, so untrusted text cannot end a document (or forge a control token) by spelling it.

The `*_stream` functions give the same rule and documents from text read piece by piece (a file larger than memory):
both rules that look for lines are line properties, so they run line by line, and fixed-size pieces depend only on
the text before them. Memory is then the largest document (a line, for the rule), never the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Literal

from ..tokenization.pretokenize import EOS_TOKEN

SplitRule = Literal["separator", "blank_lines", "fixed_size"]
PIECE_CHARS = 1 << 14
_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")
_BLANK = " \t\r\f\v"  # what a line of `_BLANK_LINES` holds
_SPACE_RUN = re.compile(r"[ \t]+")


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


def _separator_body(separator: str) -> re.Pattern[str]:
    """A regex matching a whole line (without its newline) that is a separator line of `separator_line`."""
    return re.compile(rf"[ \t]*{re.escape(separator)}[ \t]*\r?")


def choose_stream_split_rule(pieces: Iterable[str], separator: str = EOS_TOKEN) -> SplitRule:
    """`choose_split_rule` of the text that `pieces` make up, read piece by piece (what `readline(limit)` gives:
    a piece ending in a newline ends its line), holding at most a short piece of one line.

    Blank lines count (as in `choose_split_rule`, which strips the text) only between two lines holding text.
    """
    body = _separator_body(separator)
    longest = 2 * len(separator) + 4  # a separator line with its runs of spaces cut short is no longer
    line: str | None = ""  # the line so far, runs of spaces cut short; None once it can be no separator line
    blank, content = True, False  # whether the line so far is blank, holds text
    content_seen = blank_pending = blank_found = False
    for piece in pieces:
        ended = piece.endswith("\n")
        text = piece[:-1] if ended else piece
        if line is not None:
            line = _SPACE_RUN.sub(lambda run: run.group()[: len(separator) + 1], line + text)
            line = line if len(line) <= longest else None
        blank = blank and not text.strip(_BLANK)
        content = content or bool(text.strip())
        if not ended:
            continue
        if line is not None and body.fullmatch(line):
            return "separator"
        blank_pending = blank_pending or (blank and content_seen)
        blank_found = blank_found or (content and blank_pending)
        content_seen = content_seen or content
        line, blank, content = "", True, False
    if line is not None and line and body.fullmatch(line):  # the last line, without a newline
        return "separator"
    return "blank_lines" if blank_found or (content and blank_pending) else "fixed_size"


def split_lines_stream(lines: Iterable[str], rule: Literal["separator", "blank_lines"],
                       separator: str = EOS_TOKEN) -> Iterator[str]:
    """`split_documents(text, rule=rule)` of the text that `lines` make up (each line with its newline, the last
    perhaps without), one document at a time."""
    body = _separator_body(separator)
    document: list[str] = []
    joined = True  # whether the newline before this line belongs to the blank lines that ended a document
    for line in lines:
        ended = line.endswith("\n")
        text = line[:-1] if ended else line
        if rule == "separator":
            ends_document = body.fullmatch(text) is not None
        elif rule == "blank_lines":
            ends_document = ended and not joined and not text.strip(_BLANK)
        else:
            raise ValueError(f"split_lines_stream cuts at lines: rule {rule!r} is not 'separator' or 'blank_lines'")
        if ends_document:
            yield from _kept("".join(document))
            document = []
        else:
            document.append(line)
        joined = ends_document
    yield from _kept("".join(document))


def split_fixed_size_stream(blocks: Iterable[str], piece_chars: int = PIECE_CHARS) -> Iterator[str]:
    """`split_documents(text, rule="fixed_size")` of the text that `blocks` make up, one piece at a time."""
    pending = ""
    for block in blocks:
        pieces = _fixed_size_pieces(pending + block, piece_chars)
        for piece in pieces[:-1]:  # final: a piece depends only on the text before its end
            yield from _kept(piece)
        pending = pieces[-1]
    yield from _kept(pending)


def _kept(part: str) -> list[str]:
    """A part between two cuts as `split_documents` keeps it: outer newlines stripped, none if it is blank."""
    return [part.strip("\r\n")] if part.strip() else []
