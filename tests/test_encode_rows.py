"""encode_rows: dataset rows to plain-text ids in blocks over threads, equal to `encode_plain` for every family."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from datasets import Dataset

from conftest import PACKAGE_DATA
from kernel_paths import kernel_path  # noqa: F401
from tinylm_hf.corpus.documents import split_documents
from tinylm_hf.corpus.encode_rows import encode_rows, plain_encoder, row_blocks, text_lengths, with_end_ids
from tinylm_hf.tokenizer_training import train_tokenizer
from tinylm_hf.tokenization.plain_text import encode_plain
from tinylm_hf.tokenization.families import FAMILIES

END = 3


@pytest.fixture(scope="module")
def stories() -> list[str]:
    """TinyStories documents, then text that spells special tokens and other scripts (plain text all)."""
    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:60_000]
    return split_documents(text) + ["spells <|endoftext|> and [SEP] and </s> <unk> <|pad|> inside", "",
                                    "日本語のテキスト, ελληνικά, emoji 🙂 and tabs\t\tend"]


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, object]:
    """A small tokenizer of each family, trained on the bundled TinyStories slice."""
    text = PACKAGE_DATA / "tinystories_valid_small.txt"
    return {name: train_tokenizer([text], 400, algorithm=name, progress=False) for name in FAMILIES}


def _expected(tokenizer, texts: list[str]) -> list[int]:
    return [i for ids in encode_plain(tokenizer, texts) for i in ids + [END]]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_gives_encode_plain_ids_with_an_end_after_each_row(tokenizers, stories, family, kernel_path):
    tokenizer = tokenizers[family]
    rows = Dataset.from_dict({"text": stories})
    chars, _ = text_lengths(rows, "text")
    blocks = row_blocks(chars, 4000)
    ids = np.concatenate(list(encode_rows(rows, "text", blocks, plain_encoder(tokenizer), END, workers=2)))
    assert ids.tolist() == _expected(tokenizer, stories)


def test_a_rust_tokenizer_encodes_through_encode_plain_on_the_threads(tokenizers, stories, tmp_path):
    """A foreign or fast tokenizer (here the `tokenizers` twin) runs `encode_plain` from several threads at once."""
    from transformers import AutoTokenizer

    tokenizers["bpe"].save_pretrained(tmp_path)
    fast = AutoTokenizer.from_pretrained(tmp_path)
    assert fast.is_fast
    rows = Dataset.from_dict({"text": stories * 4})
    blocks = row_blocks(text_lengths(rows, "text")[0], 2000)
    ids = np.concatenate(list(encode_rows(rows, "text", blocks, plain_encoder(fast), END, workers=3)))
    assert ids.tolist() == _expected(tokenizers["bpe"], stories * 4)


def test_byte_level_bpe_encodes_through_its_core_on_the_worker_threads(tokenizers, stories, monkeypatch):
    tokenizer = tokenizers["bpe"]
    threads, encode_batch = set(), tokenizer.core.encode_batch

    def recording(texts, num_workers=None):
        threads.add(threading.get_ident())
        return encode_batch(texts, num_workers)

    monkeypatch.setattr(tokenizer.core, "encode_batch", recording)
    rows = Dataset.from_dict({"text": stories})
    blocks = row_blocks(text_lengths(rows, "text")[0], 2000)
    list(encode_rows(rows, "text", blocks, plain_encoder(tokenizer), END, workers=2))
    assert threads and threading.get_ident() not in threads


def test_a_plain_added_token_takes_the_tokenizer_s_own_path(tokenizers, stories):
    """A non-special added token matches inside text (as in `tokenizers`): the core alone would not see it."""
    import copy

    tokenizer = copy.deepcopy(tokenizers["bpe"])
    tokenizer.add_tokens(["the cat"])
    texts = ["the cat sat", "a dog and the cat"]
    rows = Dataset.from_dict({"text": texts})
    ids = np.concatenate(list(encode_rows(rows, "text", [(0, 2)], plain_encoder(tokenizer), END, workers=1)))
    assert ids.tolist() == _expected(tokenizer, texts)
    assert tokenizer.convert_tokens_to_ids("the cat") in ids.tolist()


def test_text_lengths_are_characters_and_utf8_bytes_of_the_selected_rows() -> None:
    rows = Dataset.from_dict({"text": ["abc", "日本", "", "🙂x"]}).select([1, 3, 0])
    chars, nbytes = text_lengths(rows, "text")
    assert chars.tolist() == [2, 2, 3] and nbytes.tolist() == [6, 5, 3]


def test_row_blocks_hold_at_least_the_block_size_and_cover_every_row() -> None:
    assert row_blocks(np.array([3, 3, 3, 10, 1]), 5) == [(0, 2), (2, 4), (4, 5)]
    assert row_blocks(np.array([100]), 5) == [(0, 1)]
    assert row_blocks(np.zeros(0, dtype=np.int64), 5) == []


def test_with_end_ids_puts_the_end_after_every_text_including_empty_ones() -> None:
    assert with_end_ids([[5, 6], [], [7]], 0).tolist() == [5, 6, 0, 0, 7, 0]
    assert with_end_ids([], 0).tolist() == []


def test_rows_are_read_only_a_few_blocks_ahead_of_the_writer() -> None:
    """Memory is bounded by the block size: a block of rows is read when a thread is free to take it."""
    reads = []

    class Rows:  # a table that counts the blocks read from it
        def __getitem__(self, rows: slice) -> dict[str, list[str]]:
            reads.append(rows.start)
            return {"text": ["ab"] * (rows.stop - rows.start)}

    blocks = [(first, first + 1) for first in range(100)]
    ids = encode_rows(Rows(), "text", blocks, lambda texts: [[1]] * len(texts), END, workers=2)
    assert next(ids).tolist() == [1, END] and len(reads) <= 5
    assert len(list(ids)) == 99 and len(reads) == 100
