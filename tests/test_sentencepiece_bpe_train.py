"""train_sentencepiece_bpe: the same vocabulary as sentencepiece's BPE trainer, on the numba kernel and on the
pure-Python reference."""

from __future__ import annotations

from collections import Counter

import pytest

from kernel_paths import kernel_path
from sentencepiece_models import TRAIN, head_lines, train_spm
from tinylm_hf.tokenization.metaspace.sentencepiece_model import read_sentencepiece_model
from tinylm_hf.tokenization.metaspace.train import count_metaspace_words
from tinylm_hf.tokenization.sentencepiece_bpe.core import SentencePieceBPETokenizer
from tinylm_hf.tokenization.sentencepiece_bpe.train import (
    _symbol_words,
    train_sentencepiece_bpe,
)


@pytest.fixture(autouse=True)
def both_paths(kernel_path):
    """Every test runs on the numba kernels and on the pure-Python references."""


def test_hand_checked_ties_go_to_fewer_characters_then_smaller_bytes():
    # ▁a (4), aa (4), ▁aa... : (▁,a) 3+1=4 and (a,a) 2+2=4 tie; both 2 characters; "aa" < "▁a" in UTF-8.
    pieces = train_sentencepiece_bpe({"▁aaa": 2, "▁a": 1, "▁ab": 1}, 9, byte_fallback=False, progress=False)
    assert [p for p, _ in pieces][3:5] == ["aa", "▁a"]
    assert [s for _, s in pieces] == [0.0, 0.0, 0.0, -0.0, -1.0, -2.0, -3.0, -4.0, -5.0]


@pytest.mark.parametrize(
    ("vocab_size", "byte_fallback", "specials"),
    [(1000, True, None), (3000, False, ["<pad>", "<mask>"])],
    ids=["byte-fallback-1000", "specials-3000"],
)
def test_vocabulary_equals_sentencepiece_on_the_bundled_corpus(tmp_path, vocab_size, byte_fallback, specials):
    reference = train_spm(tmp_path, TRAIN, "bpe", vocab_size, byte_fallback=byte_fallback, control_symbols=specials or [])
    expected = [(p, s) for p, s, _ in read_sentencepiece_model(reference).pieces]
    assert train_sentencepiece_bpe(TRAIN, vocab_size, specials, byte_fallback=byte_fallback, progress=False) == expected


def test_summed_shard_counts_equal_the_concatenated_text(tmp_path):
    lines = TRAIN.read_text(encoding="utf-8").splitlines(keepends=True)[:3000]
    first, second = "".join(lines[:1000]), "".join(lines[1000:])
    (tmp_path / "all.txt").write_text(first + second, encoding="utf-8")
    counts = count_metaspace_words([first]) + count_metaspace_words([second])
    whole = train_sentencepiece_bpe(tmp_path / "all.txt", 700, progress=False)
    assert train_sentencepiece_bpe(counts, 700, progress=False) == whole
    assert train_sentencepiece_bpe(iter(lines), 700, progress=False) == whole


def test_trained_pieces_encode_with_byte_fallback(tmp_path):
    corpus = head_lines(TRAIN, 100_000, tmp_path / "c.txt")
    tok = SentencePieceBPETokenizer(train_sentencepiece_bpe(corpus, 500, progress=False))
    text = "Once upon a time 漢 😀"
    assert tok.decode(tok.encode(text)) == text
    assert "<0xE6>" in [tok.id_to_piece(i) for i in tok.encode("漢")]


def test_bad_input_is_a_clear_error(tmp_path):
    corpus = head_lines(TRAIN, 20_000, tmp_path / "c.txt")
    with pytest.raises(ValueError, match="too small"):
        train_sentencepiece_bpe(corpus, 100, progress=False)
    with pytest.raises(ValueError, match="too large"):
        train_sentencepiece_bpe(corpus, 100_000, progress=False)
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        train_sentencepiece_bpe(tmp_path / "empty.txt", 400, progress=False)
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ValueError, match="UTF-8"):
        train_sentencepiece_bpe(tmp_path / "latin1.txt", 400, progress=False)
    with pytest.raises(ValueError, match="non-negative"):
        train_sentencepiece_bpe(Counter({"▁a": -1}), 400, progress=False)
    with pytest.raises(TypeError, match="single string"):
        train_sentencepiece_bpe(b"some text", 400)


def test_words_become_alphabet_ids_with_one_id_outside_it():
    chars = ["▁", "a", "\U0001f600", "b"]
    symbols, lengths, freqs = _symbol_words(Counter({"▁a\U0001f600": 2, "▁": 7, "b\tb": 3}), chars)
    # "▁" alone holds no pair and is left out; the tab, outside the alphabet, gets id len(chars).
    assert (symbols.tolist(), lengths.tolist(), freqs.tolist()) == ([0, 1, 2, 3, 4, 3], [3, 3], [2, 3])


def test_training_from_counts_leaves_the_callers_counts_as_they_were():
    counts = Counter(count_metaspace_words([TRAIN.read_text(encoding="utf-8")[:20_000]]))
    before = dict(counts)
    train_sentencepiece_bpe(counts, 300, byte_fallback=False, progress=False)
    assert dict(counts) == before
