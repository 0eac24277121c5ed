"""SentencePieceBPETokenizer: ids equal to sentencepiece's and to the tokenizers twin's."""

from __future__ import annotations

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from sentencepiece_models import TRAIN, head_lines, sample_lines, train_spm
from tinylm_hf.tokenization.metaspace.backend import build_metaspace_backend
from tinylm_hf.tokenization.sentencepiece_bpe.core import SentencePieceBPETokenizer
from tinylm_hf.tokenization.unigram.core import UnigramTokenizer

TEXT = st.text(alphabet=st.sampled_from(list("the cat sat on a mat. ▁\t漢é😀")), max_size=60)


@pytest.fixture(scope="module", params=[True, False], ids=["byte-fallback", "unk"])
def model_path(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm_bpe")
    corpus = head_lines(TRAIN, 400_000, folder / "corpus.txt")
    return train_spm(folder, corpus, "bpe", 800, byte_fallback=request.param)


def test_hand_checked_merges_by_score_then_leftmost():
    pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("▁a", 0.0), ("ab", -1.0), ("▁ab", -2.0), ("a", -3.0), ("b", -4.0), ("▁", -5.0)]
    tok = SentencePieceBPETokenizer(pieces, byte_fallback=False)
    assert [tok.id_to_piece(i) for i in tok.encode("ab b")] == ["▁ab", "▁", "b"]
    assert tok.encode("xy") == [8, 0]  # ▁ then one <unk> for the run "xy"


def test_ids_equal_sentencepiece(model_path):
    processor = spm.SentencePieceProcessor(model_file=str(model_path))
    ours = SentencePieceBPETokenizer.from_sentencepiece(model_path)
    for line in sample_lines():
        assert ours.encode(line) == processor.encode(line), line
        assert ours.decode(ours.encode(line)) == processor.decode(processor.encode(line))


@given(TEXT)
@settings(max_examples=150, deadline=None)
def test_ids_equal_sentencepiece_on_any_text(tmp_path_factory, text):
    path = _hypothesis_model(tmp_path_factory)
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert SentencePieceBPETokenizer.from_sentencepiece(path).encode(text) == processor.encode(text)


def test_tokenizers_twin_gives_the_same_ids(model_path):
    ours = SentencePieceBPETokenizer.from_sentencepiece(model_path)
    twin = build_metaspace_backend(ours)
    for line in sample_lines():
        assert twin.encode(line).ids == ours.encode(line), line


def test_saved_model_loads_in_sentencepiece(model_path, tmp_path):
    ours = SentencePieceBPETokenizer.from_sentencepiece(model_path)
    processor = spm.SentencePieceProcessor(model_file=ours.save(tmp_path / "again.model"))
    assert processor.encode("Once upon a time, 漢.") == ours.encode("Once upon a time, 漢.")


def test_bad_pieces_are_clear_errors(model_path):
    with pytest.raises(ValueError, match="unk_token"):
        SentencePieceBPETokenizer([("a", 0.0)])
    with pytest.raises(ValueError, match="256 byte pieces"):
        SentencePieceBPETokenizer([("<unk>", 0.0), ("a", -1.0)], byte_fallback=True)
    with pytest.raises(ValueError, match="duplicate"):
        SentencePieceBPETokenizer([("<unk>", 0.0), ("a", -1.0), ("a", -2.0)], byte_fallback=False)
    with pytest.raises(ValueError, match="bpe model"):
        UnigramTokenizer.from_sentencepiece(model_path)


_CACHE: dict[str, object] = {}


def _hypothesis_model(factory):
    if "path" not in _CACHE:
        folder = factory.mktemp("spm_bpe_hypothesis")
        _CACHE["path"] = train_spm(folder, head_lines(TRAIN, 200_000, folder / "c.txt"), "bpe", 500, byte_fallback=True)
    return _CACHE["path"]
