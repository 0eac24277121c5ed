"""metaspace: sentencepiece's text handling, piece rules and .model files."""

from __future__ import annotations

from collections import Counter

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from sentencepiece_models import TRAIN, head_lines, train_spm
from tinylm_hf.tokenization.metaspace import (
    CONTROL,
    NORMAL,
    UNKNOWN,
    SentencePieceModel,
    is_valid_piece,
    join_shapes,
    parse_sentencepiece_model,
    piece_shape,
    read_sentencepiece_model,
    serialize_sentencepiece_model,
    split_metaspace_words,
    split_words,
    to_metaspace,
    write_sentencepiece_model,
)
from tinylm_hf.tokenizer_training.metaspace_train import count_metaspace_words

TEXT = st.text(alphabet=st.sampled_from(list("ab ▁\n\t1,é\u0301漢")), max_size=40)


def test_dummy_prefix_is_added_even_before_a_leading_space():
    assert to_metaspace(" a  b") == "▁▁a▁▁b"
    assert to_metaspace("") == ""
    assert to_metaspace("  a  b ", remove_extra_whitespaces=True) == "▁a▁b"


def test_words_are_cut_before_each_space_symbol_line_by_line():
    assert split_metaspace_words("The cat  sat.\n\nIt ran ") == ["▁The", "▁cat", "▁", "▁sat.", "▁It", "▁ran", "▁"]


@given(TEXT)
@settings(max_examples=100, deadline=None)
def test_fast_word_counting_equals_the_word_split(text):
    per_line = [w for line in text.split("\n") if line for w in split_words(to_metaspace(line))]
    assert split_metaspace_words(text) == per_line
    assert count_metaspace_words([text]) == Counter(per_line)


def test_piece_rules_follow_sentencepiece():
    assert is_valid_piece("▁the") and is_valid_piece("▁,") and is_valid_piece("12,")
    assert not is_valid_piece("a,")  # Latin + Common
    assert not is_valid_piece("a▁")  # ▁ only first
    assert not is_valid_piece("a" * 17)
    assert is_valid_piece("e\u0301x")  # a combining mark takes the script before it


@given(st.text(alphabet=st.sampled_from(list("ab1,▁Жω\u0301あ漢")), min_size=1, max_size=9), st.text(alphabet=st.sampled_from(list("ab1,▁Жω\u0301あ漢")), min_size=1, max_size=9))
@settings(max_examples=200, deadline=None)
def test_joining_shapes_equals_checking_the_joined_piece(left, right):
    if is_valid_piece(left) and is_valid_piece(right):
        joined = join_shapes(piece_shape(left), piece_shape(right))
        assert (joined is not None) == is_valid_piece(left + right)


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
