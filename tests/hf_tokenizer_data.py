"""Test helpers shared by the Hugging Face tokenizer tests: GPT-2 folders and corpus slices."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import PACKAGE_DATA, SHARED_DATA, shared_file
from naive_bpe import naive_counts, naive_train

from tinylm_hf.tokenization.bpe.core import BPETokenizer
from tinylm_hf.tokenization.bpe.gpt2_files import load_merges_txt

ENDOFTEXT = "<|endoftext|>"

# (file, characters read; None = whole file) for the default run; kept small to stay fast.
CORPUS_SLICES = [
    ("tinystories_sample.txt", None),
    ("multilingual_samples.txt", None),
    ("corpus.en", 60_000),
    ("tiny_shakespeare.txt", 60_000),
    ("tinystories_valid_small.txt", 80_000),
    ("pd_novels_heldout.txt", 60_000),
]
# Whole files (and a 5 MB novels slice) for `-m slow`.
CORPUS_FULL = [
    ("tinystories_train_small.txt", None),
    ("tinystories_valid_small.txt", None),
    ("tiny_shakespeare.txt", None),
    ("corpus.en", None),
    ("pd_novels_heldout.txt", 5_000_000),
]

WHITESPACE_CASES = [
    "",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\t \t",
    " \r\n ",
    "a  b   c",
    "trailing   ",
    "   leading",
    "\u00a0non-breaking\u3000ideographic space",
    "line\n  indented\n\tTabbed\n",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    " <|endoftext|> ",
    "\n<|endoftext|>\n",
    "a<|endoftext|>b",
    "<|endoftext",
    "<|endoftext|",
    "|endoftext|>",
    "<<|endoftext|>>",
    "don't you'll we've I'M",
    "numbers 1234567 3.14159",
    "émoji 😀👍🏽 and 中文 한국어",
]


def read_slice(name: str, chars: int | None) -> str:
    """The first `chars` characters of a shared-data file (the whole file for None); skips if missing."""
    with open(shared_file(name), encoding="utf-8") as f:
        return f.read() if chars is None else f.read(chars)


def copy_gpt2_files(directory: Path) -> Path:
    """GPT-2's own vocab.json + merges.txt copied into `directory`."""
    assert SHARED_DATA is not None
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SHARED_DATA / "gpt2_vocab.json", directory / "vocab.json")
    shutil.copy(SHARED_DATA / "gpt2_merges.txt", directory / "merges.txt")
    return directory


def write_small_gpt2_files(directory: Path, num_merges: int = 2000) -> Path:
    """GPT-2 cut to its first `num_merges` merges, ids renumbered (bytes 0..255, merges, then eos).

    Many words stay partly unmerged with such a vocabulary, which exercises the merge-rank order, and
    the ids differ from GPT-2's, which exercises the id mapping.
    """
    assert SHARED_DATA is not None
    merges = load_merges_txt(SHARED_DATA / "gpt2_merges.txt")[:num_merges]
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in merges:
        vocab[len(vocab)] = a + b
    vocab[len(vocab)] = ENDOFTEXT.encode()
    BPETokenizer(vocab, merges, [ENDOFTEXT]).save(directory)
    return directory


def train_naive_bpe(text: str, vocab_size: int, special_tokens: list[str]) -> BPETokenizer:
    """An obviously-correct (slow) BPE trainer, so the HF tests also run without ../shared/data.

    Merges take ids 256.. and the special tokens go after them (the BPETokenizer convention).
    """
    vocab, merges = naive_train(naive_counts(text, special_tokens), vocab_size - len(special_tokens), [])
    return BPETokenizer(vocab, merges, special_tokens)


def write_source_files(directory: Path) -> Path:
    """GPT-2's files when ../shared/data is there, else a 400-token BPE trained on the bundled corpus."""
    if SHARED_DATA is not None:
        return copy_gpt2_files(directory)
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:30_000]
    train_naive_bpe(text, 400, [ENDOFTEXT]).save(directory)
    return directory


def read_bundled(chars: int) -> str:
    """The first `chars` characters of the bundled TinyStories validation slice (always present)."""
    with open(PACKAGE_DATA / "tinystories_valid_small.txt", encoding="utf-8") as f:
        return f.read(chars)
