"""`MetaspaceTokenizer`: the base of the sentencepiece-style tokenizers (Unigram, SentencePiece BPE).

The base owns what both share, as minbpe's `Tokenizer` does: the piece table (ids, scores, piece
types), text -> metaspace units, a per-unit cache, unknown handling (byte fallback or one fused
`<unk>`), decoding, and `.model` files. A subclass only segments one unit (`_segment`).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from pathlib import Path

from .sentencepiece_model import (
    BOS_PIECE,
    BYTE_PIECES,
    CONTROL,
    EOS_PIECE,
    MODEL_FILE,
    NORMAL,
    SPACE_SYMBOL,
    UNK_PIECE,
    UNKNOWN,
    USER_DEFINED,
    SentencePieceModel,
    decode_pieces,
    has_word_boundaries,
    piece_types,
    read_sentencepiece_model,
    split_encoding_units,
    to_metaspace,
    write_sentencepiece_model,
)

# What sentencepiece's decoder writes for an unknown piece.
UNK_SURFACE = " \u2047 "
CACHE_LIMIT = 1 << 16  # units kept before the cache starts afresh (bounded memory on endless streams)


class EncodeCache(dict):
    """unit str -> ids; a miss runs `encode`, so hits never leave C when read through `map`.

    Units repeat (words, mostly), and segmenting one in Python costs far more than a lookup.
    """

    def __init__(self, encode: Callable[[str], list[int]]) -> None:
        super().__init__()
        self._encode = encode

    def __missing__(self, unit: str) -> list[int]:
        if len(self) >= CACHE_LIMIT:
            self.clear()
        ids = self[unit] = self._encode(unit)
        return ids


class MetaspaceTokenizer:
    """Pieces with scores, in id order; text is segmented unit by unit (see `split_encoding_units`).

    Args:
        pieces: (piece, score) in id order.
        unk_token: the unknown piece (must be in `pieces`).
        byte_fallback: characters no piece covers become `<0x..>` byte pieces (all 256 needed);
            otherwise each run of them becomes one `<unk>`.
        special_tokens: control pieces (sentencepiece's `<s>`, `</s>`, ...): they have ids but are
            never produced from text. Defaults to `<s>` and `</s>` where present.
        add_dummy_prefix / remove_extra_whitespaces: sentencepiece's normaliser options.
    """

    model_type = ""

    def __init__(
        self,
        pieces: Sequence[tuple[str, float]],
        *,
        unk_token: str = UNK_PIECE,
        byte_fallback: bool = False,
        special_tokens: Iterable[str] | None = None,
        add_dummy_prefix: bool = True,
        remove_extra_whitespaces: bool = False,
        types: Sequence[int] | None = None,
    ) -> None:
        names, scores = _check_pieces(pieces)
        if unk_token not in names:
            raise ValueError(f"unk_token {unk_token!r} is not one of the pieces; add it (sentencepiece puts it at id 0)")
        if special_tokens is None:
            special_tokens = [t for t in (BOS_PIECE, EOS_PIECE) if t in names]
        if types is None:
            types = piece_types(names, unk_token=unk_token, byte_fallback=byte_fallback, special_tokens=special_tokens)
        self.pieces: list[str] = names
        self.scores: list[float] = scores
        self.types: list[int] = list(types)
        self.unk_token = unk_token
        self.byte_fallback = bool(byte_fallback)
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.piece_to_id: dict[str, int] = {p: i for i, p in enumerate(names)}
        self.unk_id = self.piece_to_id[unk_token]
        if USER_DEFINED in self.types:
            raise ValueError("user-defined pieces are not supported; add such tokens as special tokens instead")
        # Pieces that segmentation may produce (sentencepiece: NORMAL; UNUSED pieces are skipped).
        self.normal: dict[str, int] = {p: i for i, p in enumerate(names) if self.types[i] == NORMAL}
        self.special_tokens: list[str] = [p for i, p in enumerate(names) if self.types[i] == CONTROL]
        self._byte_ids: list[int] | None = None
        if self.byte_fallback:
            missing = [p for p in BYTE_PIECES if p not in self.piece_to_id]
            if missing:
                raise ValueError(f"byte_fallback=True needs all 256 byte pieces <0x00>..<0xFF>; missing {missing[:4]}")
            self._byte_ids = [self.piece_to_id[p] for p in BYTE_PIECES]
        self._cut_units = has_word_boundaries(self.normal)
        self._cache = EncodeCache(self._encode_unit)

    # ------------------------------------------------------------------------------- encoding
    def encode(self, text: str) -> list[int]:
        """Ids of `text`: metaspace units segmented one by one (cached), unknowns handled."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        return self.encode_metaspace(self.normalize(text))

    def normalize(self, text: str) -> str:
        """`text` as the pieces spell it (`to_metaspace` with this model's options): what `encode_metaspace` takes."""
        return to_metaspace(
            text, add_dummy_prefix=self.add_dummy_prefix, remove_extra_whitespaces=self.remove_extra_whitespaces
        )

    def encode_metaspace(self, metaspace: str) -> list[int]:
        """Ids of text already normalised (`normalize`): the Hugging Face classes normalise each piece of text
        between added tokens, and match normalised added tokens in it, before encoding what is left."""
        if not metaspace:
            return []
        units = split_encoding_units(metaspace) if self._cut_units else [metaspace]
        ids = list(chain.from_iterable(map(self._cache.__getitem__, units)))
        if not self.byte_fallback and self.unk_id in ids:
            ids = _fuse_unknowns(ids, self.unk_id)
        return ids

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """`encode` over many texts."""
        return [self.encode(text) for text in texts]

    def _encode_unit(self, unit: str) -> list[int]:
        ids: list[int] = []
        for surface, index in self._segment(unit):
            if index >= 0:
                ids.append(index)
            elif self._byte_ids is not None:
                ids += [self._byte_ids[b] for b in surface.encode("utf-8")]
            else:
                ids.append(self.unk_id)
        return ids

    def _segment(self, unit: str) -> list[tuple[str, int]]:
        """(surface, id) pieces of one unit; id -1 for a character no piece covers."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------- decoding
    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` as sentencepiece decodes: control pieces vanish, `<unk>` reads " ⁇ "."""
        pieces = []
        for index in ids:
            if not 0 <= index < len(self.pieces):
                raise ValueError(f"token id {index} is out of range (vocabulary size {len(self.pieces)})")
            kind = self.types[index]
            if kind == CONTROL:
                continue
            pieces.append(UNK_SURFACE if kind == UNKNOWN else self.pieces[index])
        return decode_pieces(pieces, add_dummy_prefix=self.add_dummy_prefix)

    def id_to_piece(self, index: int) -> str:
        return self.pieces[index]

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    # ---------------------------------------------------------------------------------- files
    files = (MODEL_FILE,)  # what `save` writes into a folder

    @classmethod
    def load(cls, directory: str | os.PathLike):
        """Load the `tokenizer.model` that `save` wrote into `directory`."""
        return cls.from_sentencepiece(Path(directory) / MODEL_FILE)

    @classmethod
    def from_sentencepiece(cls, path: str | os.PathLike):
        """Load a sentencepiece `.model` file of this tokenizer's model type."""
        model = read_sentencepiece_model(path)
        return cls.from_sentencepiece_model(model, what=repr(os.fspath(path)))

    @classmethod
    def from_sentencepiece_model(cls, model: SentencePieceModel, *, what: str = "the model"):
        if model.model_type != cls.model_type:
            raise ValueError(f"{what} is a sentencepiece {model.model_type} model; {cls.__name__} reads {cls.model_type} models")
        if model.has_charsmap or model.normalizer_name not in ("", "identity"):
            raise ValueError(
                f"{what} uses the {model.normalizer_name!r} normalisation; only identity normalisation is "
                "supported (train with normalization_rule_name='identity')"
            )
        if not model.escape_whitespaces:
            raise ValueError(f"{what} does not escape whitespace as ▁; it cannot be loaded")
        return cls(
            [(p, s) for p, s, _ in model.pieces],
            unk_token=model.unk_piece(),
            byte_fallback=model.byte_fallback,
            add_dummy_prefix=model.add_dummy_prefix,
            remove_extra_whitespaces=model.remove_extra_whitespaces,
            types=[kind for _, _, kind in model.pieces],
        )

    def to_sentencepiece_model(self) -> SentencePieceModel:
        return SentencePieceModel(
            pieces=[(p, s, t) for p, s, t in zip(self.pieces, self.scores, self.types)],
            model_type=self.model_type,
            byte_fallback=self.byte_fallback,
            add_dummy_prefix=self.add_dummy_prefix,
            remove_extra_whitespaces=self.remove_extra_whitespaces,
            normalizer_name="identity",
        )

    def save(self, directory: str | os.PathLike, *, prefix: str = "") -> str:
        """Write the sentencepiece `tokenizer.model` (named after `prefix`) into `directory` (created).

        The `sentencepiece` library loads the file. A path ending in `.model` that is not a folder is the file
        to write itself (as this method was first called).
        """
        path = Path(directory)
        if path.is_dir() or path.suffix != ".model":
            path.mkdir(parents=True, exist_ok=True)
            path = path / f"{prefix}{MODEL_FILE}"
        return write_sentencepiece_model(self.to_sentencepiece_model(), path)


def _check_pieces(pieces: Sequence[tuple[str, float]]) -> tuple[list[str], list[float]]:
    if isinstance(pieces, (str, bytes)) or not isinstance(pieces, Sequence):
        raise TypeError(f"pieces must be a list of (piece, score) pairs, got {type(pieces).__name__}")
    names: list[str] = []
    scores: list[float] = []
    for item in pieces:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str) and item[0]):
            raise ValueError(f"each piece must be a (non-empty str, float) pair, got {item!r}")
        if " " in item[0]:
            raise ValueError(f"piece {item[0]!r} holds a space; sentencepiece pieces spell spaces as {SPACE_SYMBOL!r}")
        names.append(item[0])
        scores.append(float(item[1]))
    if len(set(names)) != len(names):
        duplicates = sorted({p for p in names if names.count(p) > 1})[:5]
        raise ValueError(f"duplicate pieces: {duplicates}")
    return names, scores


def _fuse_unknowns(ids: list[int], unk_id: int) -> list[int]:
    """Collapse each run of `<unk>` ids into one, as sentencepiece does."""
    out: list[int] = []
    for index in ids:
        if index != unk_id or not out or out[-1] != unk_id:
            out.append(index)
    return out


WHITESPACE_PIECES = ("<0x20>", "<0x0A>", "<0x09>", "<0x0D>")  # whitespace byte-fallback pieces
LINE_BREAK_PIECES = {"\n", "\r", "<0x0A>", "<0x0D>"}


def word_boundaries(tokens: list[str | None], tokenizer: object) -> tuple[list[bool], list[bool]]:
    """Per token: (starts a word, ends with a line break), for sentencepiece-style vocabularies: a token starts a
    word if it begins with ``▁`` or is a whitespace byte piece; it ends a line if it is a line break."""
    starts = [bool(t) and (t.startswith(SPACE_SYMBOL) or t in WHITESPACE_PIECES) for t in tokens]
    return starts, [t in LINE_BREAK_PIECES for t in tokens]
