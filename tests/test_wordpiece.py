"""WordPieceTokenizer: ids equal `tokenizers`' BERT WordPiece and `transformers.BertTokenizer`, on real text and fuzz."""

from __future__ import annotations

import pytest
from conftest import PACKAGE_DATA, SHARED_DATA
from hf_tokenizer_data import CORPUS_FULL, CORPUS_SLICES, read_slice
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import BertTokenizer

from tinylm_hf.tokenization.wordpiece import bert_unicode
from tinylm_hf.tokenization.wordpiece.core import (
    WordPieceTokenizer,
    load_vocab_txt,
    normalize_bert,
    pretokenize_bert,
    write_vocab_txt,
)
from tinylm_hf.tokenization.wordpiece.train import train_wordpiece

# Characters that exercise every step of BERT's normaliser: controls, odd spaces, CJK, accents and
# combining marks, final sigma, dotted I, astral letters and punctuation, tables that differ from
# Python's unicodedata (U+166D, U+111C9, U+2E43, U+0890, U+11938, U+1C89).
TRICKY = (
    "aZé\u0301\u0327ÅΣσςİıß\u00ad\u200b\x00\x0b\x1c\x85\ufffd\t\n\r \u00a0\u2028\u3000中文\u4e00\U00020000"
    "。、！？¿¡«»—–-'\".,;:!?()[]{}#@\U0001f600\U0001d400\U00010400\u166d\U000111c9\u2e43\u0890\U00011938"
    "\u1c89\ua7cb\u0130\u01c5\u1e9e\ufb01\u0345\u0640\u200d\U000e0041\U0010fffd"
)


def reference(vocab: list[str], lowercase: bool, max_chars: int = 100) -> Tokenizer:
    """The `tokenizers` pipeline BERT uses, on the same vocabulary."""
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=max_chars))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


@pytest.fixture(scope="module", params=[False, True], ids=["cased", "uncased"])
def setup(request, tmp_path_factory):
    """(lowercase, vocab, ours, tokenizers pipeline, BertTokenizer) on a vocab trained here."""
    lowercase = request.param
    texts = [(PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:300_000], TRICKY]
    if SHARED_DATA is not None:
        texts.append((SHARED_DATA / "multilingual_samples.txt").read_text(encoding="utf-8"))
    vocab = train_wordpiece(texts, 2500, lowercase=lowercase, progress=False)
    path = write_vocab_txt(vocab, tmp_path_factory.mktemp("vocab") / "vocab.txt")
    bert = BertTokenizer(vocab=str(path), do_lower_case=lowercase)
    return lowercase, vocab, WordPieceTokenizer(vocab, lowercase=lowercase), reference(vocab, lowercase), bert


def test_hand_checked_example():
    tok = WordPieceTokenizer(["[UNK]", "un", "##aff", "##able", "aff", "!"], lowercase=True)
    assert tok.tokenize("Unaffable! Affable?") == ["un", "##aff", "##able", "!", "aff", "##able", "[UNK]"]
    assert tok.encode("unaff") == [1, 2]
    assert tok.encode("unaffx") == [0]  # one uncovered piece makes the whole word unknown


@pytest.mark.parametrize(("name", "chars"), CORPUS_SLICES, ids=[n for n, _ in CORPUS_SLICES])
def test_ids_equal_tokenizers_and_bert_on_corpus(setup, name, chars):
    _, _, ours, ref, bert = setup
    text = read_slice(name, chars)
    ids = ours.encode(text)
    assert ids == ref.encode(text).ids
    assert ids == bert(text, add_special_tokens=False)["input_ids"]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "chars"), CORPUS_FULL, ids=[n for n, _ in CORPUS_FULL])
def test_ids_equal_tokenizers_on_full_corpus(setup, name, chars):
    _, _, ours, ref, _ = setup
    text = read_slice(name, chars)
    assert ours.encode(text) == ref.encode(text).ids


def test_ids_equal_tokenizers_on_tricky_characters(setup):
    _, _, ours, ref, _ = setup
    text = " ".join(TRICKY[i:] + TRICKY[:i] for i in range(len(TRICKY)))
    assert ours.encode(text) == ref.encode(text).ids


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60))
def test_ids_equal_tokenizers_on_any_text(setup, text):
    _, _, ours, ref, _ = setup
    assert ours.encode(text) == ref.encode(text).ids


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(TRICKY), max_size=40))
def test_ids_equal_tokenizers_on_tricky_text(setup, text):
    _, _, ours, ref, _ = setup
    assert ours.encode(text) == ref.encode(text).ids


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60), lowercase=st.booleans())
def test_normalize_and_split_equal_tokenizers(text, lowercase):
    norm = normalizers.BertNormalizer(lowercase=lowercase)
    assert normalize_bert(text, lowercase=lowercase) == norm.normalize_str(text)
    words = [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(norm.normalize_str(text))]
    assert pretokenize_bert(text, lowercase=lowercase) == words


def _sweep(step: int) -> list[int]:
    """Code points (every `step`-th) where our normaliser or splitter disagrees with `tokenizers`."""
    norm_cased = normalizers.BertNormalizer(lowercase=False)
    norm_uncased = normalizers.BertNormalizer(lowercase=True)
    split = pre_tokenizers.BertPreTokenizer()
    bad = []
    for cp in range(0, 0x110000, step):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        text = "a" + chr(cp) + "b"
        for lowercase, norm in ((False, norm_cased), (True, norm_uncased)):
            expected = norm.normalize_str(text)
            if normalize_bert(text, lowercase=lowercase) != expected or pretokenize_bert(
                text, lowercase=lowercase
            ) != [w for w, _ in split.pre_tokenize_str(expected)]:
                bad.append(cp)
    return bad


def test_character_tables_match_tokenizers_on_a_sample_of_code_points():
    assert _sweep(97) == []


@pytest.mark.slow
def test_character_tables_match_tokenizers_on_every_code_point():
    assert _sweep(1) == []


def test_tables_differ_from_unicodedata_where_expected():
    """The generated tables are needed: Python's categories disagree with tokenizers on these."""
    import unicodedata

    assert unicodedata.category("\u166d") != "Po" and any(a <= 0x166D <= b for a, b in bert_unicode.PUNCTUATION)
    assert pretokenize_bert("a\u2e43b") == ["a\u2e43b"]  # Po since Unicode 10: not punctuation for BERT


def test_long_word_becomes_unknown_like_tokenizers(setup):
    _, vocab, _, _, _ = setup
    ours = WordPieceTokenizer(vocab, max_input_chars_per_word=5)
    ref = reference(vocab, False, max_chars=5)
    text = "a bb cccc ddddd eeeeee once upon a time"
    assert ours.encode(text) == ref.encode(text).ids
    assert ours.encode("eeeeee") == [vocab.index("[UNK]")]


def test_decode_equals_tokenizers_decoder(setup):
    _, _, ours, ref, _ = setup
    text = read_slice("tinystories_sample.txt", 2000) if SHARED_DATA else "Tom's dog ran. It didn't stop!"
    ids = ours.encode(text)
    assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False)


def test_special_tokens_option_matches_them_in_raw_text():
    tok = WordPieceTokenizer(["[UNK]", "[CLS]", "a", "[", "c", "##l", "##s", "]"], special_tokens=["[CLS]"])
    assert tok.encode("a[CLS]a [CLS]") == [2, 1, 2, 1]
    assert WordPieceTokenizer(tok.token_to_id).encode("[CLS] [cls]") == [3, 0, 7, 3, 4, 5, 6, 7]


def test_vocab_txt_round_trip(tmp_path, setup):
    _, vocab, ours, _, _ = setup
    path = ours.save(tmp_path / "vocab.txt")
    assert load_vocab_txt(path) == vocab
    assert WordPieceTokenizer.from_file(path).encode("Once upon a time") == WordPieceTokenizer(vocab).encode("Once upon a time")


# --------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"[UNK]\n\xff\xfe\n", "not UTF-8"),
        (b"[UNK]\na\na\n", "repeats line 2"),
        (b"[UNK]\n\na\n", "line 2"),
        (b"[UNK]\na b\n", "whitespace"),
    ],
    ids=["empty", "not-utf8", "duplicate", "blank-line", "space-in-token"],
)
def test_corrupt_vocab_txt_raises_naming_the_problem(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_vocab_txt(path)


def test_missing_unknown_token_raises():
    with pytest.raises(ValueError, match="unk_token"):
        WordPieceTokenizer(["a", "##b"])


def test_bad_vocab_type_and_ids_raise():
    with pytest.raises(TypeError, match="vocab"):
        WordPieceTokenizer("[UNK]")
    with pytest.raises(ValueError, match="0..len"):
        WordPieceTokenizer({"[UNK]": 0, "a": 2})


def test_decode_unknown_id_raises():
    with pytest.raises(ValueError, match="not in the vocabulary"):
        WordPieceTokenizer(["[UNK]"]).decode([5])
