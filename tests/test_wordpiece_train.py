"""train_wordpiece: the same vocabulary as the naive oracle, from files, iterators and counts."""

from __future__ import annotations

import hashlib
import numpy as np
import pytest
from conftest import PACKAGE_DATA, shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_paths import kernel_path, modules_loaded_by  # noqa: F401
from naive_wordpiece import naive_train_wordpiece

from tinylm_hf.tokenization.jit import KERNELS_ENV, numba_installed
from tinylm_hf.tokenization.bpe import merges as bpe_merges
from tinylm_hf.tokenization.bpe.merges import learn_merges, learn_merges_reference

from tinylm_hf.tokenizer_training.word_counts import count_words
from tinylm_hf.tokenization.wordpiece.core import WordPieceTokenizer
from tinylm_hf.tokenization.wordpiece.train import (
    BERT_SPECIAL_TOKENS,
    WORDPIECE_SCORES,
    train_wordpiece,
)

SPECIALS = list(BERT_SPECIAL_TOKENS)


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def bundled_slice(chars: int) -> str:
    return (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:chars]


def oracle_for_file(path, vocab_size: int, specials: list[str], lowercase: bool = False) -> list[str]:
    counts = count_words(path, algorithm="wordpiece", special_tokens=specials, lowercase=lowercase)
    return naive_train_wordpiece(dict(counts), vocab_size, specials)


# ------------------------------------------------------------------------------- oracle equality
def test_hand_checked_example_pmi():
    # All four pairs score 1/4; (p, ##u) is the greatest pair. Then h ##u scores 3/9, and so on.
    vocab = train_wordpiece({"hug": 2, "hugs": 1, "pug": 1}, 10, ["[UNK]"], score="pmi", progress=False)
    assert vocab == ["[UNK]", "h", "p", "##g", "##s", "##u", "pu", "hu", "pug", "hug"]


def test_hand_checked_example_frequency_is_the_default():
    # ##u ##g occurs 4 times, then h ##ug 3 times; (hug, ##s) and (p, ##ug) tie at 1: p > hug.
    vocab = train_wordpiece({"hug": 2, "hugs": 1, "pug": 1}, 10, ["[UNK]"], progress=False)
    assert vocab == ["[UNK]", "h", "p", "##g", "##s", "##u", "##ug", "hug", "pug", "hugs"]


def test_hand_checked_example_likelihood():
    # N = 11 tokens: ##u ##g gains 4 log(4 * 11 / 16) = 4.05, h ##u 3 log(3 * 11 / 12) = 3.03.
    vocab = train_wordpiece({"hug": 2, "hugs": 1, "pug": 1}, 8, ["[UNK]"], score="likelihood", progress=False)
    assert vocab == ["[UNK]", "h", "p", "##g", "##s", "##u", "##ug", "hug"]


def test_unknown_score_raises_with_the_choices():
    with pytest.raises(ValueError, match="unknown WordPiece score 'bpe'.*'frequency', 'likelihood', 'pmi'"):
        train_wordpiece({"hug": 2}, 10, ["[UNK]"], score="bpe", progress=False)


@pytest.mark.parametrize("lowercase", [False, True], ids=["cased", "uncased"])
def test_bundled_slice_matches_oracle(tmp_path, lowercase):
    path = write(tmp_path, "t.txt", bundled_slice(30_000))
    assert train_wordpiece(path, 300, lowercase=lowercase, progress=False) == oracle_for_file(path, 300, SPECIALS, lowercase)


@pytest.mark.slow
def test_multilingual_matches_oracle():
    path = shared_file("multilingual_samples.txt")
    assert train_wordpiece(path, 2300, progress=False) == oracle_for_file(path, 2300, SPECIALS)


def test_corpus_en_slice_matches_oracle_with_other_prefix(tmp_path):
    path = write(tmp_path, "t.txt", shared_file("corpus.en").read_text(encoding="utf-8")[:25_000])
    counts = count_words(path, algorithm="wordpiece", special_tokens=["[UNK]"])
    ours = train_wordpiece(path, 300, ["[UNK]"], continuing_subword_prefix="@@", progress=False)
    assert ours == naive_train_wordpiece(dict(counts), 300, ["[UNK]"], prefix="@@")


@pytest.mark.slow
def test_tinystories_train_small_matches_oracle():
    path = shared_file("tinystories_train_small.txt")
    assert train_wordpiece(path, 1000, progress=False) == oracle_for_file(path, 1000, SPECIALS)


# Vocabularies that main learned at cd85d34, before words were counted by whitespace-separated chunks:
# sha256 of the tokens joined by newlines (first 16 hex digits).
@pytest.mark.parametrize(("source", "chars", "vocab_size", "lowercase", "digest"), [
    pytest.param("tinystories_train_small.txt", None, 8000, False, "cc356c04140d9cf6", id="tinystories-cased"),
    pytest.param("tinystories_train_small.txt", None, 8000, True, "b72b8287852f3edb", id="tinystories-uncased"),
    pytest.param("pd_novels_heldout.txt", 1_000_000, 4000, False, "f547318a6cc8462b", id="novels-cased"),
    pytest.param("pd_novels_heldout.txt", 1_000_000, 4000, True, "5bc377d1a5170832", id="novels-uncased"),
    pytest.param("multilingual_samples.txt", None, 3000, False, "ce3f13c9600999fb", id="multilingual-cased"),
    pytest.param("multilingual_samples.txt", None, 3000, True, "fd64badfd876acc2", id="multilingual-uncased"),
])
def test_vocab_on_real_text_equals_mains(tmp_path, source, chars, vocab_size, lowercase, digest):
    path = PACKAGE_DATA / source if (PACKAGE_DATA / source).is_file() else shared_file(source)
    if chars is not None:
        with open(path, encoding="utf-8") as f:
            path = write(tmp_path, "t.txt", f.read(chars))
    vocab = train_wordpiece(path, vocab_size, lowercase=lowercase, progress=False)
    assert hashlib.sha256("\n".join(vocab).encode("utf-8")).hexdigest()[:16] == digest


@pytest.mark.parametrize("score", WORDPIECE_SCORES)
@settings(max_examples=60, deadline=None)
@given(
    counts=st.dictionaries(st.text(alphabet="abcé#", min_size=1, max_size=6), st.integers(1, 5), min_size=1, max_size=12),
    extra=st.integers(0, 25),
)
def test_random_counts_match_oracle(score, counts, extra):
    specials = ["[UNK]"]
    size = 1 + len({w[0] for w in counts} | {"##" + c for w in counts for c in w[1:]}) + extra
    ours = train_wordpiece(counts, size, specials, score=score, progress=False)
    assert ours == naive_train_wordpiece(counts, size, specials, score=score)


@pytest.mark.parametrize("score", WORDPIECE_SCORES)
def test_each_score_matches_oracle_on_a_bundled_slice(tmp_path, score):
    path = write(tmp_path, "t.txt", bundled_slice(20_000))
    counts = count_words(path, algorithm="wordpiece", special_tokens=SPECIALS)
    ours = train_wordpiece(path, 400, score=score, progress=False)
    assert ours == naive_train_wordpiece(dict(counts), 400, SPECIALS, score=score)


# ------------------------------------------------------------- merge loop: the kernel and the reference
needs_numba = pytest.mark.skipif(not numba_installed(), reason="numba is not installed")


def both_paths(monkeypatch, counts: dict[str, int], num_merges: int, prefix: str = "##") -> list[tuple]:
    """(merges, token bytes) of WordPiece's merge loop, compiled and pure Python, from the first vocabulary."""
    monkeypatch.setenv(KERNELS_ENV, "1")
    monkeypatch.setattr(bpe_merges, "KERNEL_MIN_SYMBOLS", 0)
    tokens = sorted({w[0] for w in counts}) + sorted({prefix + c for w in counts for c in w[1:]})
    ids = {t: i for i, t in enumerate(tokens)}
    words = [[ids[w[0]]] + [ids[prefix + c] for c in w[1:]] for w in counts if len(w) > 1]
    freqs = [counts[w] for w in counts if len(w) > 1]
    symbols = np.array([s for w in words for s in w], dtype=np.int32)
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    prefix_length = len(prefix.encode("utf-8"))
    fast_bytes, slow_bytes = [t.encode("utf-8") for t in tokens], [t.encode("utf-8") for t in tokens]
    fast = learn_merges(symbols, lengths, freqs, fast_bytes, num_merges, prefix_length=prefix_length)
    slow = learn_merges_reference(words, freqs, slow_bytes, num_merges, prefix_length=prefix_length)
    return [(fast, fast_bytes), (slow, slow_bytes)]


@needs_numba
@pytest.mark.parametrize(("source", "chars", "num_merges", "lowercase"), [
    ("tinystories_train_small.txt", None, 6000, True),
    ("tinystories_valid_small.txt", None, 3000, False),
    ("pd_novels_heldout.txt", 3_000_000, 12_000, False),
    ("multilingual_samples.txt", None, 2000, False),
    ("tiny_shakespeare.txt", None, 5000, True),
    ("corpus.en", None, 3000, False),
])
def test_kernel_equals_reference_on_corpora(monkeypatch, tmp_path, source, chars, num_merges, lowercase):
    path = PACKAGE_DATA / source if (PACKAGE_DATA / source).is_file() else shared_file(source)
    with open(path, encoding="utf-8") as f:
        path = write(tmp_path, "t.txt", f.read(chars))
    counts = dict(count_words(path, algorithm="wordpiece", special_tokens=SPECIALS, lowercase=lowercase))
    fast, slow = both_paths(monkeypatch, counts, num_merges)
    assert fast == slow
    first = len({w[0] for w in counts}) + len({c for w in counts for c in w[1:]})
    assert len(fast[1]) == first + num_merges  # the merges made that many new tokens


@needs_numba
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.dictionaries(st.text(min_size=1, max_size=8) | st.text(alphabet="ab#", min_size=1, max_size=6),
                              st.integers(1, 5), min_size=1, max_size=10),
       prefix=st.sampled_from(["##", "", "\u2581"]), extra=st.integers(0, 30))
def test_kernel_equals_reference_and_oracle_on_any_text(monkeypatch, counts, prefix, extra):
    # Text over all of Unicode (UTF-8 order is code point order: the tie-break holds for every character);
    # "ab#" words make joins that already exist ("#" + "###b" -> "##b").
    fast, slow = both_paths(monkeypatch, counts, extra, prefix)
    assert fast == slow
    size = 1 + len({w[0] for w in counts}) + len({prefix + c for w in counts for c in w[1:]}) + extra
    vocab = train_wordpiece(counts, size, ["[UNK]"], continuing_subword_prefix=prefix, progress=False)
    assert vocab == naive_train_wordpiece(counts, size, ["[UNK]"], prefix=prefix)


@needs_numba
def test_a_pair_made_again_by_a_join_that_exists_merges_again(monkeypatch):
    # (###, ###) -> ####, then # + #### joins to ###, which exists: "####" becomes "### ###", the first pair anew.
    fast, slow = both_paths(monkeypatch, {"###": 1, "####": 1}, 2)
    assert fast == slow
    assert [tuple(pair) for pair in fast[0]] == [(1, 1), (0, 2), (1, 1)]


def test_a_join_that_exists_keeps_its_id(kernel_path):
    # (###, ##b) ties (#, ###) at 2 and is greater: ###b. Then # + ###b joins to ##b, already a token:
    # the merge is made, no token is added, and no pair is left.
    vocab = train_wordpiece({"##b": 2}, 10, [], progress=False)
    assert vocab == ["#", "###", "##b", "###b"] == naive_train_wordpiece({"##b": 2}, 10, [])


# --------------------------------------------------------------------------------- vocabulary layout
def test_layout_specials_then_alphabet_then_merges(tmp_path):
    path = write(tmp_path, "t.txt", "ab ba abc [CLS] cab")
    vocab = train_wordpiece(path, 12, progress=False)
    assert vocab[:5] == SPECIALS
    assert vocab[5:11] == ["a", "b", "c", "##a", "##b", "##c"]
    assert len(vocab) == 12 and len(set(vocab)) == 12


def test_special_tokens_are_cut_out_before_counting(tmp_path):
    path = write(tmp_path, "t.txt", "x[MASK]y " * 50)
    vocab = train_wordpiece(path, 20, progress=False)
    assert "M" not in vocab and "##A" not in vocab  # the special's letters never reach the alphabet
    assert "x" in vocab and "y" in vocab


def test_stops_early_when_no_pair_is_left(tmp_path):
    path = write(tmp_path, "t.txt", "ab ab")
    assert train_wordpiece(path, 100, ["[UNK]"], progress=False) == ["[UNK]", "a", "##b", "ab"]


def test_trained_vocab_encodes_its_corpus_without_unknown(tmp_path):
    text = bundled_slice(50_000)
    vocab = train_wordpiece(write(tmp_path, "t.txt", text), 800, lowercase=True, progress=False)
    tok = WordPieceTokenizer(vocab, lowercase=True)
    ids = tok.encode(text)
    assert vocab.index("[UNK]") not in ids
    assert len(ids) < 0.8 * len(text.replace(" ", ""))  # merges were learned: fewer tokens than characters


def test_file_iterator_and_counts_give_the_same_vocab(tmp_path):
    text = bundled_slice(40_000)
    path = write(tmp_path, "t.txt", text)
    from_file = train_wordpiece(path, 500, progress=False)
    lines = (line for line in text.splitlines(keepends=True))  # a generator: consumed once
    assert train_wordpiece(lines, 500, progress=False) == from_file
    counts = count_words(path, algorithm="wordpiece", special_tokens=SPECIALS)
    assert train_wordpiece(counts, 500, progress=False) == from_file


def test_progress_bar_reports_merges(tmp_path, capsys):
    train_wordpiece(write(tmp_path, "t.txt", bundled_slice(5000)), 120, progress=True)
    assert "WordPiece merges" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- bad input
def test_vocab_too_small_for_alphabet_raises_with_sizes(tmp_path):
    path = write(tmp_path, "t.txt", "abc cab")
    with pytest.raises(ValueError, match=r"alphabet has 5 tokens .* 5 special tokens = 10"):
        train_wordpiece(path, 9, progress=False)


def test_vocab_smaller_than_specials_raises(tmp_path):
    with pytest.raises(ValueError, match="special tokens"):
        train_wordpiece(write(tmp_path, "t.txt", "a"), 3, progress=False)


def test_empty_file_raises(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        train_wordpiece(write(tmp_path, "t.txt", ""), 100, progress=False)


def test_file_without_words_raises(tmp_path):
    with pytest.raises(ValueError, match="no words"):
        train_wordpiece(write(tmp_path, "t.txt", " \n[CLS]\t\x00 "), 100, progress=False)


def test_undecodable_file_raises(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("hello wörld".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8.*offset 7"):
        train_wordpiece(path, 100, progress=False)


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        train_wordpiece(tmp_path / "nope.txt", 100, progress=False)


def test_iterator_of_non_strings_raises():
    with pytest.raises(TypeError, match="item 1"):
        train_wordpiece(["ok", b"bytes"], 100, progress=False)
    with pytest.raises(TypeError, match="iterable of strings"):
        train_wordpiece(b"a whole text", 100, progress=False)


def test_bad_counts_raise():
    with pytest.raises(ValueError, match="non-negative"):
        train_wordpiece({"a": -1}, 100, progress=False)
    with pytest.raises(ValueError, match="no word"):
        train_wordpiece({"a": 0}, 100, progress=False)


# ------------------------------------------------------------------- defaults a user would choose
def tokenizers_wordpiece_vocab(path, vocab_size: int) -> dict[str, int]:
    """What `tokenizers`' WordPieceTrainer learns from `path` (cased BERT normaliser and pre-tokenizer)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=None)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train([str(path)], trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                           show_progress=False))
    return tokenizer.get_vocab()


def held_out_tokens(vocab: dict[str, int], text: str) -> int:
    from tinylm_hf.tokenization.wordpiece.backend import build_bert_wordpiece

    pipeline = build_bert_wordpiece(vocab, lowercase=False, unk_token="[UNK]", cls_token=None, sep_token=None)
    return len(pipeline.encode(text, add_special_tokens=False).ids)


def test_default_score_learns_the_commonest_english_words():
    # The pmi rule learned neither "the" nor "is" nor "and" in 4,096 pieces of 2.4 MB of English.
    vocab = train_wordpiece(shared_file("tinystories_train_small.txt"), 4096, progress=False)
    assert {"the", "is", "and", "was"} <= set(vocab)


@pytest.mark.parametrize("name, held_name", [
    pytest.param("tinystories_train_small.txt", "tinystories_valid_small.txt", id="tinystories"),
    pytest.param("tiny_shakespeare.txt", None, id="shakespeare", marks=pytest.mark.slow),
    pytest.param("multilingual_samples.txt", None, id="multilingual"),
])
def test_default_score_compresses_held_out_text_as_well_as_tokenizers(tmp_path, name, held_name):
    # pmi took 2-2.6x the tokens of tokenizers' WordPieceTrainer; ties may break otherwise (0.1%).
    lines = shared_file(name).read_text(encoding="utf-8").splitlines(keepends=True)
    if held_name is None:  # every tenth line held out
        train, held = "".join(line for i, line in enumerate(lines) if i % 10 != 9), "".join(lines[9::10])
    else:
        train, held = "".join(lines), shared_file(held_name).read_text(encoding="utf-8")[:300_000]
    path = write(tmp_path, "train.txt", train)
    ours = {token: i for i, token in enumerate(train_wordpiece(path, 4096, progress=False))}
    assert held_out_tokens(ours, held) <= 1.001 * held_out_tokens(tokenizers_wordpiece_vocab(path, 4096), held)


def test_a_small_training_run_loads_neither_numba_nor_numpy():
    # Below KERNEL_MIN_SYMBOLS the reference merges word lists: numpy alone would add ~20 MB to a 26 MB run.
    code = ("from tinylm_hf.tokenization.wordpiece.train import train_wordpiece\n"
            "train_wordpiece({'hug': 2, 'hugs': 1, 'pug': 1}, 10, ['[UNK]'], progress=False)")
    assert modules_loaded_by(code) == []
