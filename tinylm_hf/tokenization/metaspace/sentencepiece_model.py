"""SentencePiece-style text handling shared by the Unigram and SentencePiece BPE tokenizers.

Owns: the space symbol `▁` and the dummy prefix (`to_metaspace`), the units encoding may cut text into
(`split_encoding_units`), byte-fallback piece names (`<0x41>`), and reading/writing sentencepiece
`.model` files (a small protobuf reader/writer: the `protobuf` package is not needed). What only
training needs (the words a trainer counts, which pieces it may create) is in the trainers' modules.

This file imports only the standard library and `regex`; saved folders carry it flat (`remote_code.py`).
"""

from __future__ import annotations

import codecs
import math
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import regex

from ..atomic_files import write_bytes_atomic

SPACE_SYMBOL = "\u2581"  # "▁": sentencepiece's visible space
MODEL_FILE = "tokenizer.model"  # a sentencepiece model's file name in a folder (Llama's and T5's folders too)
# sentencepiece's unknown, beginning- and end-of-text pieces (its ids 0, 1, 2 by default)
UNK_PIECE = "<unk>"
BOS_PIECE = "<s>"
EOS_PIECE = "</s>"
# Piece types of a sentencepiece ModelProto (sentencepiece_model.proto).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}



# ---------------------------------------------------------------------------------------------
# Text <-> metaspace


def to_metaspace(text: str, *, add_dummy_prefix: bool = True, remove_extra_whitespaces: bool = False) -> str:
    """Text as sentencepiece sees it (identity normalisation): spaces become `▁`, plus a leading `▁`.

    Like sentencepiece, the dummy prefix is added even when the text already starts with a space,
    and empty text stays empty. `remove_extra_whitespaces` strips and collapses runs of spaces first
    (sentencepiece's default; Llama 2's models turn it off).

    >>> to_metaspace("Hello  world")
    '▁Hello▁▁world'
    """
    if remove_extra_whitespaces:
        text = " ".join(part for part in text.split(" ") if part)
    if not text:
        return ""
    text = text.replace(" ", SPACE_SYMBOL)
    return SPACE_SYMBOL + text if add_dummy_prefix else text


def from_metaspace(pieces_text: str, *, add_dummy_prefix: bool = True) -> str:
    """Inverse of `to_metaspace` (without whitespace removal): `▁` back to spaces, dummy prefix dropped."""
    text = pieces_text.replace(SPACE_SYMBOL, " ")
    if add_dummy_prefix and text.startswith(" "):
        text = text[1:]
    return text


def has_word_boundaries(pieces: Iterable[str]) -> bool:
    """Whether encoding may cut text before each `▁` that follows another character.

    True when no piece holds a `▁` right after a non-`▁` character: then no piece can cross such a
    cut, and each word can be encoded (and cached) on its own. Llama 2's `▁▁` pieces are fine.
    """
    for piece in pieces:
        stripped = piece.lstrip(SPACE_SYMBOL)
        if SPACE_SYMBOL in stripped:
            return False
    return True


_CUT_BEFORE_SPACE = regex.compile(f"(?<=[^{SPACE_SYMBOL}])(?={SPACE_SYMBOL})")


def split_encoding_units(metaspace_text: str) -> list[str]:
    """Cut metaspace text before each `▁` that follows a non-`▁` character: `▁a▁▁b` -> [`▁a`, `▁▁b`]."""
    return _CUT_BEFORE_SPACE.split(metaspace_text)


# ---------------------------------------------------------------------------------------------
# Byte fallback


def byte_piece(byte: int) -> str:
    """The byte-fallback piece for one byte: 65 -> `<0x41>` (sentencepiece's spelling)."""
    return f"<0x{byte:02X}>"


BYTE_PIECES = tuple(byte_piece(b) for b in range(256))
_BYTE_OF_PIECE = {piece: b for b, piece in enumerate(BYTE_PIECES)}


def piece_byte(piece: str) -> int | None:
    """The byte a `<0x..>` piece stands for, or None for any other piece."""
    return _BYTE_OF_PIECE.get(piece)


def _replace_one_byte(error: UnicodeDecodeError) -> tuple[str, int]:
    return "\ufffd", error.start + 1


# sentencepiece's rule for byte pieces that are not UTF-8: one U+FFFD for each byte that starts no valid
# character (Python's "replace" gives one for a whole truncated sequence: b"\xe2\x82" -> 1, sentencepiece 2)
BYTE_ERRORS = "tinylm-sentencepiece-replace"
codecs.register_error(BYTE_ERRORS, _replace_one_byte)


def decode_pieces(pieces: Iterable[str], *, add_dummy_prefix: bool = True) -> str:
    """Join pieces into text: byte pieces are gathered into UTF-8, each byte that starts no valid character
    becoming U+FFFD, as sentencepiece decodes."""
    out: list[str] = []
    pending = bytearray()
    for piece in pieces:
        byte = _BYTE_OF_PIECE.get(piece)
        if byte is not None:
            pending.append(byte)
            continue
        if pending:
            out.append(pending.decode("utf-8", errors=BYTE_ERRORS))
            pending.clear()
        out.append(piece)
    if pending:
        out.append(pending.decode("utf-8", errors=BYTE_ERRORS))
    return from_metaspace("".join(out), add_dummy_prefix=add_dummy_prefix)


# ---------------------------------------------------------------------------------------------
# sentencepiece .model files (protobuf wire format, the fields tinylm uses)


@dataclass
class SentencePieceModel:
    """What tinylm reads from (and writes to) a sentencepiece `.model` file.

    `pieces` are (piece, score, type) in id order; `model_type` is "unigram" or "bpe".
    """

    pieces: list[tuple[str, float, int]]
    model_type: str = "unigram"
    byte_fallback: bool = False
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    normalizer_name: str = ""
    has_charsmap: bool = False
    unk_id: int = 0
    extra: dict = field(default_factory=dict)

    def unk_piece(self) -> str:
        return self.pieces[self.unk_id][0]


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def fail(self, why: str) -> ValueError:
        return ValueError(f"{self.what} is not a valid sentencepiece .model file ({why} at byte {self.pos})")

    def varint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise self.fail("truncated varint")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def fields(self) -> Iterable[tuple[int, int, object]]:
        """(field number, wire type, value): ints for varints/fixed, bytes for length-delimited."""
        while self.pos < len(self.data):
            key = self.varint()
            number, wire = key >> 3, key & 7
            if number == 0:
                raise self.fail("field number 0")
            if wire == 0:
                yield number, wire, self.varint()
            elif wire in (1, 5):
                size = 8 if wire == 1 else 4
                if self.pos + size > len(self.data):
                    raise self.fail("truncated fixed field")
                yield number, wire, self.data[self.pos : self.pos + size]
                self.pos += size
            elif wire == 2:
                size = self.varint()
                if self.pos + size > len(self.data):
                    raise self.fail("truncated length-delimited field")
                yield number, wire, self.data[self.pos : self.pos + size]
                self.pos += size
            else:
                raise self.fail(f"unsupported wire type {wire}")


def _text(value: object, reader: _Reader) -> str:
    if not isinstance(value, bytes):
        raise reader.fail("expected a string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise reader.fail("a string that is not UTF-8") from exc


def _parse_piece(data: bytes, what: str) -> tuple[str, float, int]:
    reader = _Reader(data, what)
    piece, score, kind = None, 0.0, NORMAL
    for number, wire, value in reader.fields():
        if number == 1 and wire == 2:
            piece = _text(value, reader)
        elif number == 2 and wire == 5:
            score = struct.unpack("<f", value)[0]
        elif number == 3 and wire == 0:
            kind = value
    if not piece:
        raise reader.fail("a piece without text")
    if not math.isfinite(score):
        raise reader.fail(f"piece {piece!r} with score {score}: scores must be finite numbers; re-train or "
                          "re-export the model")
    if kind not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
        raise reader.fail(f"piece {piece!r} with unknown type {kind}")
    return piece, score, kind


def float32_score(score: float) -> float:
    """A piece's score as a `.model` file stores it (a float32), so a tokenizer equals the one it saves."""
    return struct.unpack("<f", struct.pack("<f", score))[0]


def parse_sentencepiece_model(data: bytes, what: str = "data") -> SentencePieceModel:
    """Parse the bytes of a `.model` file (a serialized sentencepiece ModelProto)."""
    reader = _Reader(data, what)
    model = SentencePieceModel(pieces=[])
    vocab_size = None  # the trainer_spec's; None until it is read
    for number, wire, value in reader.fields():
        if number == 1 and wire == 2:
            model.pieces.append(_parse_piece(value, what))
        elif number == 2 and wire == 2:
            vocab_size = _parse_trainer(value, what, model)
        elif number == 3 and wire == 2:
            _parse_normalizer(value, what, model)
    if vocab_size is None:
        raise reader.fail(f"no trainer_spec after its {len(model.pieces)} pieces: the file is cut short; "
                          "copy or save it again")
    if vocab_size and vocab_size != len(model.pieces):
        raise reader.fail(f"{len(model.pieces)} pieces where its trainer_spec says {vocab_size}: the file is cut "
                          "short or was edited; copy or save it again")
    _check_model(model, what)
    return model


def _parse_trainer(data: bytes, what: str, model: SentencePieceModel) -> int:
    """Read the trainer_spec's model type and byte fallback into `model`; return its vocab_size (0: not given)."""
    vocab_size = 0
    for number, wire, value in _Reader(data, what).fields():
        if number == 3 and wire == 0:
            model.model_type = MODEL_TYPES.get(value, str(value))
        elif number == 4 and wire == 0:
            vocab_size = value
        elif number == 35 and wire == 0:
            model.byte_fallback = bool(value)
    return vocab_size


def _parse_normalizer(data: bytes, what: str, model: SentencePieceModel) -> None:
    reader = _Reader(data, what)
    for number, wire, value in reader.fields():
        if number == 1 and wire == 2:
            model.normalizer_name = _text(value, reader)
        elif number == 2 and wire == 2:
            model.has_charsmap = len(value) > 0
        elif number == 3 and wire == 0:
            model.add_dummy_prefix = bool(value)
        elif number == 4 and wire == 0:
            model.remove_extra_whitespaces = bool(value)
        elif number == 5 and wire == 0:
            model.escape_whitespaces = bool(value)


def _check_model(model: SentencePieceModel, what: str) -> None:
    if not model.pieces:
        raise ValueError(f"{what} is not a valid sentencepiece .model file (it holds no pieces)")
    unk = [i for i, (_, _, kind) in enumerate(model.pieces) if kind == UNKNOWN]
    if len(unk) != 1:
        raise ValueError(f"{what}: a sentencepiece model needs exactly one unknown piece, found {len(unk)}")
    model.unk_id = unk[0]
    names = [p for p, _, _ in model.pieces]
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: duplicate pieces in the sentencepiece model")
    if model.byte_fallback and any(piece_byte(p) is None for p, _, k in model.pieces if k == BYTE):
        raise ValueError(f"{what}: a byte piece is not spelled <0xHH>")


def read_sentencepiece_model(path: str | os.PathLike) -> SentencePieceModel:
    """Read a sentencepiece `.model` file; a clear ValueError when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sentencepiece model not found: {str(path)!r}")
    return parse_sentencepiece_model(path.read_bytes(), repr(str(path)))


def _key(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32 fields are written as 10-byte varints, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(value)


def serialize_sentencepiece_model(model: SentencePieceModel) -> bytes:
    """The bytes of a `.model` file that the `sentencepiece` library loads (identity normalisation)."""
    out = bytearray()
    for piece, score, kind in model.pieces:
        if not math.isfinite(score):
            raise ValueError(f"piece {piece!r} has a non-finite score {score}")
        body = _bytes_field(1, piece.encode("utf-8")) + _key(2, 5) + struct.pack("<f", score)
        if kind != NORMAL:
            body += _int_field(3, kind)
        out += _bytes_field(1, body)
    model_type = {name: number for number, name in MODEL_TYPES.items()}[model.model_type]
    ids = {p: i for i, (p, _, _) in enumerate(model.pieces)}
    trainer = _int_field(3, model_type) + _int_field(4, len(model.pieces))
    trainer += _int_field(35, int(model.byte_fallback))
    for number, piece in ((40, UNK_PIECE), (41, BOS_PIECE), (42, EOS_PIECE), (43, "<pad>")):
        trainer += _int_field(number, ids.get(piece, -1))
    out += _bytes_field(2, trainer)
    normalizer = _bytes_field(1, (model.normalizer_name or "identity").encode("utf-8"))
    normalizer += _int_field(3, int(model.add_dummy_prefix)) + _int_field(4, int(model.remove_extra_whitespaces))
    normalizer += _int_field(5, int(model.escape_whitespaces))
    out += _bytes_field(3, normalizer)
    return bytes(out)


def write_sentencepiece_model(model: SentencePieceModel, path: str | os.PathLike) -> str:
    """Write a `.model` file atomically; returns the path as a string."""
    return str(write_bytes_atomic(path, serialize_sentencepiece_model(model)))


def piece_types(
    pieces: Iterable[str], *, unk_token: str, byte_fallback: bool, special_tokens: Iterable[str]
) -> list[int]:
    """sentencepiece piece types for a piece list: unknown, control (specials), byte, else normal."""
    specials = set(special_tokens)
    types = []
    for piece in pieces:
        if piece == unk_token:
            types.append(UNKNOWN)
        elif piece in specials:
            types.append(CONTROL)
        elif byte_fallback and piece_byte(piece) is not None:
            types.append(BYTE)
        else:
            types.append(NORMAL)
    return types
