"""UnigramTokenizer: ids equal to sentencepiece's and to tokenizers' Unigram model."""

from __future__ import annotations

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from sentencepiece_models import TRAIN, head_lines, sample_lines, train_spm
from tinylm_hf.tokenization.metaspace.backend import build_metaspace_backend
from tinylm_hf.tokenization.unigram.core import UnigramTokenizer

TEXT = st.text(alphabet=st.sampled_from(list("the cat sat on a mat. ▁漢é")), max_size=60)


@pytest.fixture(scope="module", params=[False, True], ids=["unk", "byte-fallback"])
def model_path(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm_unigram")
    corpus = head_lines(TRAIN, 150_000, folder / "corpus.txt")
    return train_spm(folder, corpus, "unigram", 600, byte_fallback=request.param)


def test_viterbi_ties_keep_the_earliest_starting_last_piece():
    pieces = [("<unk>", 0.0), ("▁", -2.0), ("▁a", -1.0), ("b", -2.5), ("a", -3.0), ("ab", -1.5)]
    tok = UnigramTokenizer(pieces)
    assert [tok.id_to_piece(i) for i in tok.encode("ab")] == ["▁", "ab"]  # ties ▁a+b at -3.5


def test_unknown_runs_become_one_unk_scored_below_every_piece():
    tok = UnigramTokenizer([("<unk>", 0.0), ("▁", -1.0), ("a", -2.0)])
    assert tok.unk_score == -12.0
    assert tok.encode("xya") == [1, 0, 2]


def test_ids_equal_sentencepiece(model_path):
    processor = spm.SentencePieceProcessor(model_file=str(model_path))
    ours = UnigramTokenizer.from_sentencepiece(model_path)
    for line in sample_lines():
        assert ours.encode(line) == processor.encode(line), line
        assert ours.decode(ours.encode(line)) == processor.decode(processor.encode(line))


def test_ids_equal_tokenizers_unigram_given_the_same_pieces(model_path):
    ours = UnigramTokenizer.from_sentencepiece(model_path)
    plain = Tokenizer(models.Unigram(list(zip(ours.pieces, ours.scores)), unk_id=ours.unk_id, byte_fallback=ours.byte_fallback))
    plain.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    twin = build_metaspace_backend(ours)
    for line in sample_lines():
        assert twin.encode(line).ids == ours.encode(line), line
        if not line.startswith((" ", "▁")) and "\n" not in line:  # tokenizers' Metaspace adds no second ▁
            assert plain.encode(line).ids == ours.encode(line), line


def test_the_twin_reads_a_control_piece_spelled_in_text_as_the_core_does():
    """tokenizers' Unigram matches "<|end|>" itself; the twin cuts inside it where no normal piece crosses: not
    after the "<" (the normal piece "<|" crosses there) but after "<|"."""
    pieces = [("<unk>", 0.0), ("<|end|>", 0.0), ("▁", -2.0), ("a", -3.0), ("<|", -1.0), ("end", -2.0),
              *[(c, -4.0) for c in "<|end>"]]
    core = UnigramTokenizer(pieces, special_tokens=["<|end|>"])
    twin = build_metaspace_backend(core)
    twin.encode_special_tokens = True
    for text in ["a<|end|>", "<|end|><|end|>a", "<<|end|>"]:
        assert twin.encode(text).ids == core.encode(text), text
    assert [core.id_to_piece(i) for i in core.encode("a<|end|>")] == ["▁", "a", "<|", "end", "|", ">"]
    twin.encode_special_tokens = False
    assert twin.encode("a<|end|>").ids == [2, 3, 1]  # split out as an added token first: the control id


@given(TEXT)
@settings(max_examples=150, deadline=None)
def test_ids_equal_sentencepiece_on_any_text(tmp_path_factory, text):
    path = _hypothesis_model(tmp_path_factory)
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert UnigramTokenizer.from_sentencepiece(path).encode(text) == processor.encode(text)


_CACHE: dict[str, object] = {}


def _hypothesis_model(factory):
    if "path" not in _CACHE:
        folder = factory.mktemp("spm_unigram_hypothesis")
        _CACHE["path"] = train_spm(folder, head_lines(TRAIN, 100_000, folder / "c.txt"), "unigram", 400)
    return _CACHE["path"]
