"""Which pieces a sentencepiece-style trainer may create: sentencepiece's TrainerInterface::IsValidSentencePiece.

With sentencepiece's defaults (split by Unicode script and by number): 1..`MAX_PIECE_LENGTH` characters,
no tab, NUL, space or U+2585, `▁` only first, one script per piece. `piece_shape` / `join_shapes` judge a
joined piece from its two parts without rescanning it (the SentencePiece BPE trainer's inner loop).
"""

from __future__ import annotations

from functools import lru_cache

import regex

from .metaspace.sentencepiece_model import SPACE_SYMBOL

# Pieces longer than this many characters are never created (sentencepiece's max_sentencepiece_length).
MAX_PIECE_LENGTH = 16
# Characters a trainer never puts in a piece: tab (sentencepiece's pretokenization boundary),
# NUL and U+2585 (sentencepiece's placeholder for unknown characters).
UNMERGEABLE_CHARS = frozenset("\t\x00\u2585")


# The scripts of sentencepiece's unicode_script.h (Unicode 10); anything else is "Common".
_SCRIPTS = (
    "Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak Bengali "
    "Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian Caucasian_Albanian "
    "Chakma Cham Cherokee Coptic Cuneiform Cypriot Cyrillic Deseret Devanagari Duployan "
    "Egyptian_Hieroglyphs Elbasan Ethiopic Georgian Glagolitic Gothic Grantha Greek Gujarati "
    "Gurmukhi Han Hangul Hanunoo Hatran Hebrew Hiragana Imperial_Aramaic Inherited "
    "Inscriptional_Pahlavi Inscriptional_Parthian Javanese Kaithi Kannada Katakana Kayah_Li "
    "Kharoshthi Khmer Khojki Khudawadi Lao Latin Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian "
    "Mahajani Malayalam Mandaic Manichaean Marchen Meetei_Mayek Mende_Kikakui Meroitic_Cursive "
    "Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean New_Tai_Lue Newa Nko "
    "Ogham Ol_Chiki Old_Hungarian Old_Italic Old_North_Arabian Old_Permic Old_Persian "
    "Old_South_Arabian Old_Turkic Oriya Osage Osmanya Pahawh_Hmong Palmyrene Pau_Cin_Hau Phags_Pa "
    "Phoenician Psalter_Pahlavi Rejang Runic Samaritan Saurashtra Sharada Shavian Siddham "
    "SignWriting Sinhala Sora_Sompeng Sundanese Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le Tai_Tham "
    "Tai_Viet Takri Tamil Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta Ugaritic Vai "
    "Warang_Citi Yi "
).split()


@lru_cache(maxsize=1)
def _script_pattern() -> regex.Pattern:
    """One group per script, compiled at first use: 15 ms that trainers which never ask a script skip."""
    return regex.compile("|".join(f"(?P<{name}>\\p{{Script={name}}})" for name in _SCRIPTS))


_JAPANESE = {"Hiragana", "Katakana"}


@lru_cache(maxsize=1 << 16)
def script_of(char: str) -> str:
    """Unicode script of a character as sentencepiece groups them (Hiragana/Katakana count as Han).

    Scripts outside sentencepiece's list (and unassigned characters) are "Common", as there; its
    table is Unicode 10, so characters assigned since then are the one place the two can differ.
    """
    match = _script_pattern().match(char)
    name = match.lastgroup if match else "Common"
    if name in _JAPANESE or char == "\u30fc":
        return "Han"
    return name


def is_valid_piece(piece: str, max_length: int = MAX_PIECE_LENGTH) -> bool:
    """Whether a trainer may create this piece (sentencepiece's defaults: split by script and number).

    Rules: 1..max_length characters; no tab, NUL, space or U+2585; `▁` only as the first character;
    no two Unicode scripts in one piece (digits and punctuation are "Common"; combining marks take
    the script of the character before them).
    """
    if not piece or len(piece) > max_length:
        return False
    previous = None  # None: any script may follow
    for position, char in enumerate(piece):
        if char in UNMERGEABLE_CHARS or char == " ":
            return False
        if char == SPACE_SYMBOL:
            if position > 0:
                return False
            continue
        script = script_of(char)
        if script == "Inherited":
            script = previous
        if script is not None and previous is not None and script != previous:
            return False
        previous = script
    return True


# What `is_valid_piece` needs to know of a valid piece to judge it joined to another:
# (length, starts with "▁", script of its first non-combining character, script it ends in).
PieceShape = tuple[int, bool, "str | None", "str | None"]


def piece_shape(piece: str) -> PieceShape:
    """The shape of a valid piece (see `join_shapes`)."""
    first = last = None
    for char in piece:
        if char == SPACE_SYMBOL:
            continue
        script = script_of(char)
        if script == "Inherited":
            continue
        if first is None:
            first = script
        last = script
    return len(piece), piece.startswith(SPACE_SYMBOL), first, last


def join_shapes(left: PieceShape, right: PieceShape, max_length: int = MAX_PIECE_LENGTH) -> PieceShape | None:
    """Shape of left+right, or None when `is_valid_piece(left + right)` is False (both valid).

    Equal to the full check because only the junction can break it: `▁` must not start the right
    part, and the script the left part ends in must be the right part's first script.
    """
    length = left[0] + right[0]
    if length > max_length or right[1]:
        return None
    if left[3] is not None and right[2] is not None and left[3] != right[2]:
        return None
    first = left[2] if left[2] is not None else right[2]
    last = right[3] if right[3] is not None else left[3]
    return length, left[1], first, last
