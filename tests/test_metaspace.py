"""metaspace: sentencepiece's text handling and .model files."""

from __future__ import annotations

import pytest
import sentencepiece as spm

from sentencepiece_models import TRAIN, head_lines, train_spm
from tinylm_hf.tokenization.metaspace.sentencepiece_model import (
    CONTROL,
    NORMAL,
    UNKNOWN,
    SentencePieceModel,
    parse_sentencepiece_model,
    read_sentencepiece_model,
    serialize_sentencepiece_model,
    to_metaspace,
    write_sentencepiece_model,
)


def test_dummy_prefix_is_added_even_before_a_leading_space():
    assert to_metaspace(" a  b") == "▁▁a▁▁b"
    assert to_metaspace("") == ""
    assert to_metaspace("  a  b ", remove_extra_whitespaces=True) == "▁a▁b"


def test_model_file_round_trips_and_sentencepiece_loads_ours(tmp_path):
    model = SentencePieceModel(
        pieces=[("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL), ("▁a", -1.0, NORMAL), ("▁", -2.0, NORMAL), ("a", -3.0, NORMAL)],
        model_type="unigram",
        remove_extra_whitespaces=False,
        normalizer_name="identity",
    )
    path = write_sentencepiece_model(model, tmp_path / "m.model")
    back = read_sentencepiece_model(path)
    assert back.pieces == model.pieces and back.model_type == "unigram" and not back.remove_extra_whitespaces
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert processor.encode_as_pieces("a a") == ["▁a", "▁a"]


def test_reads_a_model_trained_by_sentencepiece(tmp_path):
    path = train_spm(tmp_path, head_lines(TRAIN, 100_000, tmp_path / "c.txt"), "bpe", 400, byte_fallback=True)
    model = read_sentencepiece_model(path)
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert [p for p, _, _ in model.pieces] == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    assert model.model_type == "bpe" and model.byte_fallback and model.normalizer_name == "identity"
    assert serialize_sentencepiece_model(model)  # writable again


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b"\x0a\x05\x0a\x01", b"", b"\x0a\x02\x10\x01"], ids=["garbage", "truncated", "empty", "no-text"])
def test_corrupt_model_file_is_a_clear_error(data):
    with pytest.raises(ValueError, match="sentencepiece"):
        parse_sentencepiece_model(data)


def small_model(score: float = -1.0) -> SentencePieceModel:
    return SentencePieceModel(
        pieces=[("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL), ("▁a", score, NORMAL),
                ("▁", -2.0, NORMAL), ("a", -3.0, NORMAL)],
        remove_extra_whitespaces=False, normalizer_name="identity",
    )


def test_model_file_cut_at_a_piece_boundary_is_refused():
    data = serialize_sentencepiece_model(small_model())
    piece = b"\x0a" + bytes([data[1]]) + data[2 : 2 + data[1]]  # the first piece's field, as written
    assert data.startswith(piece)
    with pytest.raises(ValueError, match="no trainer_spec after its 1 pieces: the file is cut short"):
        parse_sentencepiece_model(data[: len(piece)])


def test_model_file_missing_pieces_of_its_vocab_size_is_refused():
    data = serialize_sentencepiece_model(small_model())
    piece = data[: 2 + data[1]]
    with pytest.raises(ValueError, match="5 pieces where its trainer_spec says 6"):
        parse_sentencepiece_model(data[len(piece):])  # the first piece cut out, the rest intact


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_model_file_with_a_non_finite_score_is_refused(bad):
    import struct

    sentinel = struct.pack("<f", 1234.5)
    data = serialize_sentencepiece_model(small_model(1234.5))
    assert data.count(sentinel) == 1
    with pytest.raises(ValueError, match="piece '▁a' with score .*: scores must be finite"):
        parse_sentencepiece_model(data.replace(sentinel, struct.pack("<f", bad)))
