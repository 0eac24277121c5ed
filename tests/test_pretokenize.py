"""pretokenize: patterns that cannot backtrack exponentially, checked wherever a pattern is resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinylm_hf.tokenization.bpe.core import BPETokenizer
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN, GPT4_PATTERN, check_pattern_backtracking, resolve_pattern
from tinylm_hf.tokenizer_loading import load_tokenizer
from tinylm_hf.tokenizer_training.train_tokenizer import build_hf_tokenizer

SAFE = [GPT2_PATTERN, GPT4_PATTERN, r"(?:\p{L}+)++", r"(?>\w+\s?)+", r"(ab)+", r"\p{N}{1,3}+", r"[(]a+[)]+",
        r"(?i)(?:x)+", r"[]a]+", r"(?=a+)b", r"\(a+\)+"]
EXPONENTIAL = [r"(a+)+$", r"(a|a)*$", r"(?:\p{L}+ ?)+", r"(a*)*b", r"((ab)*)+", r"(.*a){12}", r"(\w+\s?)*$",
               r"(?:a|ab)*?c", r"(?P<x>a+)+"]


@pytest.mark.parametrize("pattern", SAFE)
def test_patterns_without_nested_backtracking_pass(pattern):
    check_pattern_backtracking(pattern)


@pytest.mark.parametrize("pattern", EXPONENTIAL)
def test_nested_or_alternating_repeats_are_refused_with_the_fix(pattern):
    with pytest.raises(ValueError, match=r"can take exponential time: .*possessive \(\+\+ or \*\+\) or the group atomic"):
        resolve_pattern(pattern)


def test_a_tokenizer_with_such_a_pattern_is_refused_before_encoding():
    with pytest.raises(ValueError, match="exponential time"):
        BPETokenizer({i: bytes([i]) for i in range(256)}, [], pattern=r"(\w+\s?)*$")


def test_a_folder_whose_pattern_was_edited_to_such_a_shape_is_refused(tmp_path: Path):
    build_hf_tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["pattern"] = r"(\w+\s?)*$"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match="exponential time"):
        load_tokenizer(tmp_path)
