"""train_unigram: sentencepiece's recipe; quality within 1% of sentencepiece's trainer."""

from __future__ import annotations

import pytest
import sentencepiece as spm

from sentencepiece_models import TRAIN, VALID, head_lines, train_spm
from tinylm_hf.tokenization.metaspace.train import count_metaspace_words
from tinylm_hf.tokenization.unigram.core import UnigramTokenizer
from tinylm_hf.tokenization.unigram.train import (
    _digamma,
    train_unigram,
)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    return head_lines(TRAIN, 200_000, tmp_path_factory.mktemp("unigram") / "c.txt")


def test_pieces_keep_every_character_and_fixed_ids(small_corpus):
    pieces = train_unigram(small_corpus, 500, ["<pad>"], progress=False)
    names = [p for p, _ in pieces]
    assert len(pieces) == 500 and names[:4] == ["<unk>", "<s>", "</s>", "<pad>"]
    chars = set(small_corpus.read_text(encoding="utf-8")) - {"\n", " "} | {"▁"}
    assert chars <= set(names)
    scores = [s for _, s in pieces[4:]]
    assert scores == sorted(scores, reverse=True) and all(s < 0 for s in scores)
    tok = UnigramTokenizer(pieces)
    assert tok.decode(tok.encode("Once upon a time, Lily smiled.")) == "Once upon a time, Lily smiled."


def test_byte_fallback_reserves_sentencepieces_byte_ids(small_corpus, tmp_path):
    """`byte_fallback=True`: ids 3..258 are the byte pieces (sentencepiece's layout), and a newline,
    which line-by-line training never sees, encodes as <0x0A> alike in ours and in sentencepiece."""
    from tinylm_hf.tokenization.metaspace.sentencepiece_model import BYTE_PIECES

    pieces = train_unigram(small_corpus, 500, byte_fallback=True, progress=False)
    names = [p for p, _ in pieces]
    assert len(pieces) == 500 and names[:3] == ["<unk>", "<s>", "</s>"] and tuple(names[3:259]) == BYTE_PIECES
    ours = UnigramTokenizer(pieces, byte_fallback=True)
    ours.save(tmp_path / "u.model")
    reference = spm.SentencePieceProcessor(model_file=str(tmp_path / "u.model"))
    text = "Once upon a time,\nLily saw 東京 🌍.\n\n"
    assert ours.encode(text) == reference.encode(text)
    assert ours.decode(ours.encode(text)) == text and "<0x0A>" in map(ours.id_to_piece, ours.encode(text))


def test_summed_shard_counts_equal_the_concatenated_text(small_corpus):
    lines = small_corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    first, second = "".join(lines[: len(lines) // 2]), "".join(lines[len(lines) // 2 :])
    whole = train_unigram(small_corpus, 400, progress=False)
    counts = count_metaspace_words([first]) + count_metaspace_words([second])
    assert train_unigram(counts, 400, progress=False) == whole
    assert train_unigram(iter(lines), 400, progress=False) == whole


def test_digamma_matches_its_series():
    # digamma(1) = -Euler-Mascheroni; digamma(x + 1) = digamma(x) + 1/x.
    values = _digamma(__import__("numpy").array([1.0, 2.5, 3.5]))
    assert abs(values[0] + 0.5772156649) < 1e-9 and abs(values[2] - values[1] - 1 / 2.5) < 1e-9


def test_bad_input_is_a_clear_error(small_corpus, tmp_path):
    with pytest.raises(ValueError, match="too small"):
        train_unigram(small_corpus, 20, progress=False)
    with pytest.raises(ValueError, match="shrinking_factor"):
        train_unigram(small_corpus, 400, shrinking_factor=1.5, progress=False)
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\n")
    with pytest.raises(ValueError, match="UTF-8"):
        train_unigram(tmp_path / "bad.txt", 400, progress=False)
    with pytest.raises(ValueError, match="no text"):
        train_unigram(["", "\n"], 400, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("vocab_size", [2000, 5000])
def test_tokens_per_byte_within_one_percent_of_sentencepiece(tmp_path, vocab_size):
    reference = spm.SentencePieceProcessor(model_file=str(train_spm(tmp_path, TRAIN, "unigram", vocab_size)))
    ours = UnigramTokenizer(train_unigram(TRAIN, vocab_size, progress=False))
    lines = VALID.read_text(encoding="utf-8").split("\n")
    theirs = sum(map(len, reference.encode(lines)))
    mine = sum(len(ours.encode(line)) for line in lines)
    assert abs(mine / theirs - 1) <= 0.01, (mine, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("vocab_size", [2000, 5000])
def test_byte_fallback_tokens_per_byte_within_one_percent_of_sentencepiece(tmp_path, vocab_size):
    model = train_spm(tmp_path, TRAIN, "unigram", vocab_size, byte_fallback=True)
    reference = spm.SentencePieceProcessor(model_file=str(model))
    ours = UnigramTokenizer(train_unigram(TRAIN, vocab_size, byte_fallback=True, progress=False), byte_fallback=True)
    text = VALID.read_text(encoding="utf-8")
    mine, theirs = len(ours.encode(text)), len(reference.encode(text))
    assert abs(mine / theirs - 1) <= 0.01, (mine, theirs)
