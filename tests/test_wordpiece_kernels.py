"""The WordPiece encode kernel equals the pure-Python path: on every bundled corpus and on text over all of Unicode."""

from __future__ import annotations

import pickle

import pytest
from conftest import PACKAGE_DATA, SHARED_DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_paths import kernel_path  # noqa: F401

from tinylm_hf.tokenization.jit import KERNELS_ENV, numba_installed
from tinylm_hf.tokenization.wordpiece.core import WordPieceTokenizer, normalize_bert
from tinylm_hf.tokenization.wordpiece.train import train_wordpiece

pytestmark = pytest.mark.skipif(not numba_installed(), reason="numba is not installed")
ANY_CHARACTER = st.characters(exclude_categories=())  # every code point, lone surrogates included
CORPORA = ["tinystories_train_small.txt", "tinystories_valid_small.txt", "pd_novels_heldout.txt",
           "multilingual_samples.txt", "tiny_shakespeare.txt", "corpus.en", "tinystories_sample.txt"]


def read_corpus(name: str, chars: int = 3_000_000) -> str:
    path = PACKAGE_DATA / name
    if not path.is_file():
        if SHARED_DATA is None or not (SHARED_DATA / name).is_file():
            pytest.skip(f"{name} is not available")
        path = SHARED_DATA / name
    with open(path, encoding="utf-8") as f:
        return f.read(chars)


def kernel_ids(tok: WordPieceTokenizer, text: str) -> list[int]:
    """The kernel's ids, built here from the tokenizer's vocabulary and options."""
    from tinylm_hf.tokenization.wordpiece.kernels import WordPieceKernel

    kernel = WordPieceKernel(tok.token_to_id, tok.prefix, tok.unk_id, tok.max_input_chars_per_word)
    return kernel.encode(normalize_bert(text, lowercase=tok.lowercase))


def reference_ids(monkeypatch, tok: WordPieceTokenizer, text: str) -> list[int]:
    monkeypatch.setenv(KERNELS_ENV, "0")
    return tok.encode(text)


@pytest.fixture(scope="module", params=[(True, 8000), (False, 8000), (False, 300)],
                ids=["uncased-8000", "cased-8000", "cased-300"])
def tokenizer(request) -> WordPieceTokenizer:
    """A vocabulary trained on TinyStories and the multilingual sample, or (300) on TinyStories alone: most
    words fall back to short pieces, and other scripts are [UNK]."""
    lowercase, size = request.param
    texts = [read_corpus("tinystories_train_small.txt", 500_000)]
    if size > 300:
        texts.append(read_corpus("multilingual_samples.txt"))
    vocab = train_wordpiece(texts, size, lowercase=lowercase, progress=False)
    return WordPieceTokenizer(vocab, lowercase=lowercase)


@pytest.mark.parametrize("name", CORPORA)
def test_kernel_equals_reference_on_corpora(monkeypatch, tokenizer, name):
    text = read_corpus(name)
    assert kernel_ids(tokenizer, text) == reference_ids(monkeypatch, tokenizer, text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(ANY_CHARACTER, max_size=80),
       pieces=st.lists(st.text(ANY_CHARACTER, min_size=1, max_size=4), max_size=12),
       prefix=st.sampled_from(["##", "", "@@"]), max_chars=st.sampled_from([3, 100]), lowercase=st.booleans())
def test_kernel_equals_reference_on_any_text(monkeypatch, text, pieces, prefix, max_chars, lowercase):
    # A vocabulary of the text's own characters and pieces of it, so that matches, fallbacks and unknown
    # words all happen, over all of Unicode.
    words = normalize_bert(text, lowercase=lowercase).split()
    tokens = {c for w in words for c in w[:1]} | {prefix + c for w in words for c in w[1:]}
    tokens |= {p for p in pieces if not p.isspace()} | {prefix + p for p in pieces if not p.isspace()}
    vocab = ["[UNK]"] + sorted(t for t in tokens if t and t != "[UNK]" and not any(c.isspace() for c in t))
    tok = WordPieceTokenizer(vocab, lowercase=lowercase, continuing_subword_prefix=prefix,
                             max_input_chars_per_word=max_chars)
    assert kernel_ids(tok, text) == reference_ids(monkeypatch, tok, text)


def test_hand_checked_example_on_both_paths(kernel_path):
    tok = WordPieceTokenizer(["[UNK]", "un", "##aff", "##able", "aff", "!"], lowercase=True)
    assert tok.encode("Unaffable! Affable? unaffx") == [1, 2, 3, 5, 4, 3, 0, 0]


def test_the_kernel_runs_where_numba_is(monkeypatch):
    monkeypatch.setenv(KERNELS_ENV, "1")
    tok = WordPieceTokenizer(["[UNK]", "a", "##b"])
    assert tok.encode("ab") == [1, 2] and tok._kernel is not None


def test_a_pickled_tokenizer_encodes_alike(kernel_path):
    tok = WordPieceTokenizer(["[UNK]", "un", "##aff", "##able", "aff", "!"], lowercase=True)
    ids = tok.encode("Unaffable!")
    assert pickle.loads(pickle.dumps(tok)).encode("Unaffable!") == ids
