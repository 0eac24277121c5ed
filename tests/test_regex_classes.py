"""regex_classes: letters, numbers and whitespace as the fast twin (`tokenizers`) and tiktoken have them, so the slow
BPE class (kernels and reference) tokenizes every assigned code point as the fast twin and tiktoken do."""

from __future__ import annotations

import json

import pytest
import regex
import tiktoken
from tokenizers import Regex, pre_tokenizers

from conftest import shared_file
from tinylm_hf.tokenization.bpe.core import BPETokenizer
from tinylm_hf.tokenization.bpe.backend import build_byte_level_bpe
from tinylm_hf.tokenization.bpe.byte_unicode import token_to_unicode
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN
from tinylm_hf.tokenization.regex_classes import LETTER, NUMBER, WHITESPACE

EOT = "<|endoftext|>"
# Every code point Unicode (as the installed `regex` knows it) assigns, but surrogates and private use.
ASSIGNED = [c for c in range(0x110000) if regex.match(r"[^\p{Cn}\p{Cs}\p{Co}]", chr(c))]


def points(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    return {c for first, last in ranges for c in range(first, last + 1)}


@pytest.mark.parametrize("pattern, ranges", [(r"\p{L}", LETTER), (r"\p{N}", NUMBER), (r"\s", WHITESPACE)],
                         ids=["letter", "number", "whitespace"])
def test_table_is_the_fast_twins_class_on_every_code_point(pattern: str, ranges) -> None:
    every = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    kept = {ord(char) for piece, _ in split.pre_tokenize_str("".join(map(chr, every))) for char in piece}
    assert points(ranges) == set(every) - kept


def test_letters_new_in_unicode_17_are_not_letters_here() -> None:
    assert 0x1C89 in points(LETTER)  # Unicode 16.0
    assert 0x10940 not in points(LETTER)  # Unicode 17.0, as the issue's "\U00010940's"


@pytest.fixture(scope="module")
def peers() -> dict:
    """GPT-2's files as our slow class's core (kernels, reference), the `tokenizers` twin and tiktoken."""
    vocab_path, merges_path = shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt")
    kernels, reference = (BPETokenizer.from_files(vocab_path, merges_path, [EOT]) for _ in range(2))
    reference._kernel_pattern = None
    merges = [(token_to_unicode(a), token_to_unicode(b)) for a, b in kernels.merges]
    fast = build_byte_level_bpe(json.loads(vocab_path.read_text(encoding="utf-8")), merges)
    ranks = {token: i for i, token in kernels.vocab.items() if i != kernels.special_ids[EOT]}
    tik = tiktoken.Encoding("gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    return {"kernels": kernels.encode_ordinary, "reference": reference.encode_ordinary,
            "fast": lambda text: fast.encode(text).ids, "tiktoken": tik.encode_ordinary}


@pytest.mark.parametrize("slow", ["kernels", pytest.param("reference", marks=pytest.mark.slow)])
def test_slow_equals_fast_and_tiktoken_on_every_assigned_code_point(peers, slow: str) -> None:
    lines = [f"{c}'s {c}{c}1 x{c}.\n" for c in map(chr, ASSIGNED)]
    for start in range(0, len(lines), 20_000):
        text = "".join(lines[start : start + 20_000])
        expected = peers["tiktoken"](text)
        assert peers["fast"](text) == expected
        if peers[slow](text) != expected:
            bad = next(line for line in lines[start : start + 20_000] if peers[slow](line) != peers["tiktoken"](line))
            pytest.fail(f"U+{ord(bad[0]):04X}: {peers[slow](bad)} != tiktoken's {peers['tiktoken'](bad)}")
