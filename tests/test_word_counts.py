"""count_words and the word-count files: the trainers' own splitting, and shards that sum to the whole."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import PACKAGE_DATA, shared_file
from naive_bpe import naive_counts

from tinylm_hf.tokenization.pretokenize import GPT4_PATTERN
from tinylm_hf.tokenization.wordpiece.core import pretokenize_bert
from tinylm_hf.tokenization import word_splitting
from tinylm_hf.tokenization.metaspace import train as metaspace_train
from tinylm_hf.tokenization.bpe.train import train_bpe
from tinylm_hf.tokenization.families import FAMILIES
from tinylm_hf.tokenizer_training.word_counts import count_words, load_word_counts, save_word_counts, sum_word_counts
from tinylm_hf.tokenization.wordpiece.train import train_wordpiece

EOT = "<|endoftext|>"
BERT = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def text() -> str:
    return (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:120_000]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------- splitting
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4"])
def test_bpe_counts_equal_the_oracle_counts(text, pattern):
    regex = {"gpt2": None, "gpt4": GPT4_PATTERN}[pattern]
    expected = naive_counts(text, [EOT]) if regex is None else naive_counts(text, [EOT], regex)
    assert count_words([text], special_tokens=[EOT], pattern=pattern) == expected


@pytest.mark.parametrize("lowercase", [False, True])
def test_wordpiece_counts_are_bert_words(lowercase):
    text = "Héllo, WORLD! 中文 [CLS] don't\x00stop"
    expected = Counter(pretokenize_bert(text.replace("[CLS]", " "), lowercase=lowercase))
    assert count_words([text], algorithm="wordpiece", special_tokens=["[CLS]"], lowercase=lowercase) == expected


# BERT word counts that main made at cd85d34, before words were counted by whitespace-separated chunks:
# sha256 of "word<TAB>count" lines in word order (first 16 hex digits).
@pytest.mark.parametrize(("source", "chars", "lowercase", "digest"), [
    pytest.param("tinystories_train_small.txt", None, False, "3d3a9e2af4f08a25", id="tinystories-cased"),
    pytest.param("tinystories_train_small.txt", None, True, "1942519425a665f5", id="tinystories-uncased"),
    pytest.param("pd_novels_heldout.txt", 1_000_000, False, "6dff5e8f6fcd2bce", id="novels-cased"),
    pytest.param("pd_novels_heldout.txt", 1_000_000, True, "1508ff825ef606bf", id="novels-uncased"),
    pytest.param("multilingual_samples.txt", None, False, "ba2bfbd102d34db1", id="multilingual-cased"),
    pytest.param("multilingual_samples.txt", None, True, "868a8350dc7400a8", id="multilingual-uncased"),
])
def test_wordpiece_counts_of_real_text_equal_mains(tmp_path, source, chars, lowercase, digest):
    path = PACKAGE_DATA / source if (PACKAGE_DATA / source).is_file() else shared_file(source)
    if chars is not None:
        with open(path, encoding="utf-8") as f:
            path = write(tmp_path, "t.txt", f.read(chars))
    counts = count_words(path, algorithm="wordpiece", special_tokens=BERT, lowercase=lowercase)
    lines = "\n".join(f"{word}\t{count}" for word, count in sorted(counts.items()))
    assert hashlib.sha256(lines.encode("utf-8")).hexdigest()[:16] == digest


def test_path_texts_and_mixed_inputs(tmp_path):
    path = write(tmp_path, "a.txt", "the cat sat")
    alone = count_words(path, algorithm="wordpiece")
    assert alone == Counter({"the": 1, "cat": 1, "sat": 1})
    assert count_words(str(path), algorithm="wordpiece") == alone
    assert count_words([path, "the dog"], algorithm="wordpiece") == alone + Counter({"the": 1, "dog": 1})
    assert count_words(iter(["a", "a"]), algorithm="wordpiece") == Counter({"a": 2})


@pytest.mark.parametrize("algorithm", ["bpe", "wordpiece"])
def test_file_read_in_small_blocks_equals_whole_text(monkeypatch, tmp_path, algorithm):
    body = "Ünïcödé wörds 中文 and<|endoftext|> more<|endoftext|>\n" * 400 + "tail without newline"
    path = write(tmp_path, "t.txt", body)
    monkeypatch.setattr(word_splitting, "READ_BYTES", 37)  # blocks end inside characters and specials
    assert count_words(path, algorithm=algorithm, special_tokens=[EOT]) == count_words(
        [body], algorithm=algorithm, special_tokens=[EOT]
    )


def test_block_cut_never_splits_a_special_token_holding_a_space(monkeypatch, tmp_path):
    body = "ab <sp ecial> cd " * 200
    path = write(tmp_path, "t.txt", body)
    monkeypatch.setattr(word_splitting, "READ_BYTES", 11)
    counts = count_words(path, algorithm="wordpiece", special_tokens=["<sp ecial>"])
    assert counts == Counter({"ab": 200, "cd": 200})


# ------------------------------------------------------------------------- BERT words counted by chunk
def bert_word_counts(texts: list[str], lowercase: bool) -> Counter:
    """The specification: every text normalised and split whole."""
    return sum((Counter(pretokenize_bert(text, lowercase=lowercase)) for text in texts), Counter())


def counted_by_chunk(texts: list[str], lowercase: bool) -> Counter:
    counter = word_splitting.BertWordCounter(lowercase)
    for text in texts:
        counter.add(text)
    return counter.counts()


# Characters where counting by chunk could go wrong: every whitespace of `str.split` (BERT removes \x0b \x0c
# \x1c-\x1f \x85), controls, CJK (BMP and astral), combining marks around spaces, capital sigma, punctuation.
TRICKY = (" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000\x00\u200b\ufffd"
          "a\u00e9e\u0301\u0316\u03a3\u0130,.!'\u4e2d\U00020000\U0001d400")


@pytest.mark.parametrize("lowercase", [False, True], ids=["cased", "uncased"])
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(TRICKY) | st.characters(), max_size=30), max_size=4))
def test_bert_words_counted_by_chunk_equal_words_of_whole_texts(texts, lowercase):
    assert counted_by_chunk(texts, lowercase) == bert_word_counts(texts, lowercase)


def test_whitespace_that_bert_removes_joins_its_neighbours():
    assert counted_by_chunk(["ab\x0bcd\x1ce f\x85g", "h i"], lowercase=False) == Counter(
        {"abcde": 1, "fg": 1, "h": 1, "i": 1})


def test_astral_cjk_chunks_are_split_around_each_ideograph():
    texts = ["x\U00020000y z\U00020001", "x\U00020000y"]
    expected = Counter({"x": 2, "\U00020000": 2, "y": 2, "z": 1, "\U00020001": 1})
    assert counted_by_chunk(texts, lowercase=True) == expected


def test_chunks_held_past_the_limit_are_counted_once(monkeypatch):
    texts = ["the cat, the dog.", "The cat sat; the end", "cat"]
    expected = counted_by_chunk(texts, lowercase=True)
    monkeypatch.setattr(word_splitting, "CHUNKS_HELD", 2)
    assert counted_by_chunk(texts, lowercase=True) == expected == bert_word_counts(texts, lowercase=True)


def test_wordpiece_file_counted_in_blocks_equals_whole_text(monkeypatch, tmp_path):
    body = "Ünïcödé wörds, 中文 and[SEP] more[SEP]\n" * 300 + "tail without newline"
    path = write(tmp_path, "t.txt", body)
    monkeypatch.setattr(word_splitting, "READ_BYTES", 37)  # blocks end inside characters and specials
    counts = count_words(path, algorithm="wordpiece", special_tokens=["[SEP]"])
    assert counts == count_words([body], algorithm="wordpiece", special_tokens=["[SEP]"])


def test_undecodable_byte_in_a_wordpiece_file_names_its_offset(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good words\n" * 50 + b"bad \xff byte\n" + b"more words\n" * 10)
    with pytest.raises(ValueError, match="near offset 554"):
        count_words(path, algorithm="wordpiece")


def test_unknown_algorithm_raises_listing_known_ones():
    with pytest.raises(ValueError, match=r"unknown algorithm 'unigramm'.*'bpe'.*'unigram'.*'wordpiece'"):
        count_words(["x"], algorithm="unigramm")


def test_family_table_is_open_to_new_algorithms(monkeypatch):
    row = word_splitting.WordSplitter(lambda pattern, lowercase: str.split, lambda text: text.rfind(" ") + 1 or -1)
    monkeypatch.setattr(word_splitting, "WHITESPACE_WORDS", row, raising=False)
    monkeypatch.setitem(FAMILIES, "whitespace", dataclasses.replace(FAMILIES["bpe"], name="whitespace",
                                                                    splitter="WHITESPACE_WORDS"))
    assert count_words(["a b a"], algorithm="whitespace") == Counter({"a": 2, "b": 1})


def test_non_text_items_raise():
    with pytest.raises(TypeError, match="item 1"):
        count_words(["ok", 3])
    with pytest.raises(TypeError):
        count_words(b"bytes")


def test_undecodable_file_raises(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"ok \xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        count_words(path, algorithm="wordpiece")


def test_a_file_s_counts_are_not_copied(tmp_path):
    made = Counter({"▁one": 1})
    splitter = dataclasses.replace(word_splitting.METASPACE_WORDS, count_file=lambda *options: made)
    assert word_splitting.count_split_words(write(tmp_path, "t.txt", "one"), splitter) is made


def test_saving_counts_holds_no_second_table_of_them(tmp_path):
    text = shared_file("pd_novels_heldout.txt").read_text(encoding="utf-8")[:3_000_000]
    tracemalloc.start()
    try:
        counts = metaspace_train.count_metaspace_words([text])
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        save_word_counts(counts, tmp_path / "c.json", algorithm="unigram")
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - held < 0.3 * size, f"saving held {(peak - held) / 1e6:.1f} MB beside {size / 1e6:.1f} MB of counts"


# ------------------------------------------------------------------------------------------- files
def test_save_load_round_trip_records_options(tmp_path):
    counts = Counter({"héllo": 3, "world": 1})
    path = save_word_counts(counts, tmp_path / "c.json", algorithm="bpe", pattern=GPT4_PATTERN, lowercase=True,
                            special_tokens=[EOT])  # fmt: skip
    loaded = load_word_counts(path)
    assert loaded.counts == counts
    assert loaded.options() == {"algorithm": "bpe", "pattern": "gpt4", "lowercase": None, "special_tokens": [EOT]}
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == "tinylm-word-counts"


def test_sum_refuses_counts_made_with_other_options(tmp_path):
    a = save_word_counts({"a": 1}, tmp_path / "a.json", algorithm="wordpiece", pattern="gpt2", lowercase=True,
                         special_tokens=BERT)  # fmt: skip
    b = save_word_counts({"a": 1}, tmp_path / "b.json", algorithm="wordpiece", pattern="gpt2", lowercase=False,
                         special_tokens=BERT)  # fmt: skip
    c = save_word_counts({"a": 2}, tmp_path / "c.json", algorithm="bpe", pattern="gpt2", lowercase=False,
                         special_tokens=BERT)  # fmt: skip
    with pytest.raises(ValueError, match="different options"):
        sum_word_counts([a, b])
    with pytest.raises(ValueError, match="different options"):
        sum_word_counts([a, c])
    assert sum_word_counts([a, a]).counts == Counter({"a": 2})


def test_options_an_algorithm_ignores_do_not_block_a_sum(tmp_path):
    a = save_word_counts({"a": 1}, tmp_path / "a.json", algorithm="wordpiece", pattern="gpt2", lowercase=False,
                         special_tokens=["[A]", "[B]"])  # fmt: skip
    b = save_word_counts({"b": 1}, tmp_path / "b.json", algorithm="wordpiece", pattern="gpt4", lowercase=False,
                         special_tokens=["[B]", "[A]"])  # fmt: skip
    assert sum_word_counts([a, b]).counts == Counter({"a": 1, "b": 1})


@pytest.mark.parametrize(
    ("content", "message"),
    [("not json", "not a word-count JSON"), ('{"format": "other"}', "not a word-count file"),
     ('{"format": "tinylm-word-counts", "version": 9}', "version 9"),
     ('{"format": "tinylm-word-counts", "version": 1, "algorithm": "bpe"}', "lacks"),
     ('{"format": "tinylm-word-counts", "version": 1, "algorithm": "bpe", "pattern": "gpt2", "lowercase": null, '
      '"special_tokens": [], "counts": {"a": -2}}', "non-negative")],
    ids=["not-json", "other-format", "version", "missing-keys", "negative-count"],
)  # fmt: skip
def test_corrupt_count_file_raises(tmp_path, content, message):
    path = tmp_path / "c.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_word_counts(path)


def test_sum_of_nothing_raises():
    with pytest.raises(ValueError, match="at least one"):
        sum_word_counts([])


# ------------------------------------------------------------------------- shards = concatenated text
def _shards(text: str, cut_after: str) -> tuple[str, str]:
    middle = text.index(cut_after, len(text) // 2) + len(cut_after)
    return text[:middle], text[middle:]


def test_bpe_shard_counts_sum_to_training_on_the_whole_text(tmp_path, text):
    first, second = _shards(text, EOT)  # a shard ends where a document ends
    paths = [write(tmp_path, "1.txt", first), write(tmp_path, "2.txt", second)]
    files = []
    for i, path in enumerate(paths):
        counts = count_words(path, special_tokens=[EOT])
        files.append(save_word_counts(counts, tmp_path / f"{i}.json", algorithm="bpe", pattern="gpt2", lowercase=False,
                                      special_tokens=[EOT]))  # fmt: skip
    total = sum_word_counts(files)
    whole = train_bpe(write(tmp_path, "all.txt", first + second), 400, [EOT], progress=False)
    assert train_bpe(total.counts, 400, [EOT], progress=False) == whole
    assert train_bpe([first, second], 400, [EOT], progress=False) == whole


@pytest.mark.parametrize("lowercase", [False, True])
def test_wordpiece_shard_counts_sum_to_training_on_the_whole_text(tmp_path, text, lowercase):
    first, second = _shards(text, "\n")
    files = []
    for i, shard in enumerate((first, second)):
        counts = count_words(write(tmp_path, f"{i}.txt", shard), algorithm="wordpiece", special_tokens=BERT,
                             lowercase=lowercase)  # fmt: skip
        files.append(save_word_counts(counts, tmp_path / f"{i}.json", algorithm="wordpiece", pattern="gpt2",
                                      lowercase=lowercase, special_tokens=BERT))  # fmt: skip
    total = sum_word_counts(files)
    whole = train_wordpiece(write(tmp_path, "all.txt", first + second), 500, lowercase=lowercase, progress=False)
    assert train_wordpiece(total, 500, progress=False) == whole


def test_from_counts_refuses_bpe_counts(tmp_path):
    path = save_word_counts({"ab": 1}, tmp_path / "c.json", algorithm="bpe", pattern="gpt2", lowercase=False,
                            special_tokens=[])  # fmt: skip
    with pytest.raises(ValueError, match="'bpe', not 'wordpiece'"):
        train_wordpiece(load_word_counts(path), 100, progress=False)


def test_train_bpe_from_iterator_of_one_text_equals_train_bpe(tmp_path, text):
    whole = train_bpe(write(tmp_path, "t.txt", text), 350, [EOT], progress=False)
    assert train_bpe(iter([text]), 350, [EOT], progress=False) == whole


def test_train_bpe_from_iterator_bad_input_raises():
    with pytest.raises(TypeError, match="iterable of strings"):
        train_bpe(b"text", 300, [EOT], progress=False)
    with pytest.raises(ValueError, match="no text"):
        train_bpe([EOT], 300, [EOT], progress=False)


def _counts_file(tmp_path: Path, counts: dict[str, int], algorithm: str = "bpe", specials=(EOT, "<|pad|>")) -> Path:
    body = {"format": "tinylm-word-counts", "version": 1, "algorithm": algorithm, "pattern": "gpt2",
            "lowercase": False, "special_tokens": list(specials), "counts": counts}
    return write(tmp_path, "c.json", json.dumps(body))


def test_train_tokenizer_refuses_empty_counts(tmp_path, capsys):
    # a counts file holding no words trained a 256-byte tokenizer and exited 0
    from conftest import run_cli_error

    counts = _counts_file(tmp_path, {})
    message = run_cli_error(["train-tokenizer", "--counts", str(counts), "--vocab-size", "300",
                             "--out", str(tmp_path / "tok")], capsys)
    assert "hold no words" in message and "count-words" in message
    assert not (tmp_path / "tok").exists()


@pytest.mark.parametrize(("algorithm", "specials", "word"), [
    pytest.param("bpe", (EOT, "<|pad|>"), EOT, id="bpe-eot"),
    pytest.param("bpe", (EOT, "<|pad|>"), " hi<|pad|>", id="bpe-inside-a-word"),
    pytest.param("wordpiece", BERT, "[SEP]", id="wordpiece-sep"),
])
def test_train_tokenizer_refuses_counts_of_special_token_text(tmp_path, capsys, algorithm, specials, word):
    # special tokens are cut out of text before counting: such a word came from counts made without them
    from conftest import run_cli_error

    counts = _counts_file(tmp_path, {word: 1000, "cat": 5}, algorithm=algorithm, specials=specials)
    message = run_cli_error(["train-tokenizer", "--counts", str(counts), "--algorithm", algorithm,
                             "--vocab-size", "300", "--out", str(tmp_path / "tok")], capsys)
    assert str(counts) in message and "special token" in message
    assert not (tmp_path / "tok").exists()


def test_an_empty_shard_among_others_still_sums(tmp_path):
    empty = save_word_counts(Counter(), tmp_path / "a.json", algorithm="bpe", special_tokens=[EOT])
    full = save_word_counts(Counter({"cat": 2}), tmp_path / "b.json", algorithm="bpe", special_tokens=[EOT])
    assert sum_word_counts([empty, full]).counts == Counter({"cat": 2})
