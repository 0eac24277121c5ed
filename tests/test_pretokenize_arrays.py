"""The array pre-tokenizer (BPE training's counting) equals the regex reference,
`compile_pretokenizer(GPT2_PATTERN).findall(text)`, on every shared corpus and on random text."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SHARED_DATA, shared_file
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN, compile_pretokenizer
from tinylm_hf.tokenization.pretokenize_arrays import (
    CLASS_TABLE,
    code_points,
    gpt2_starts,
    pretokenize_gpt2_arrays,
)

SHARED_FILES = sorted(p.name for p in SHARED_DATA.iterdir()) if SHARED_DATA else ["tinystories_sample.txt"]
# Characters where GPT-2's alternatives meet: spaces and other whitespace, apostrophes and the
# contraction letters (both cases), digits, other numbers, non-ASCII letters, marks, emoji, surrogates.
TRICKY = list(" \t\n\r\x0b\x0c\x85\xa0\u2009\u3000'\u2019sdmtlvreSDMTLVRE09\u00bd\u0663a\u00e9\u4e2d\u0301!?.\U0001f600\ud800\udfff")
any_char = st.characters(codec=None, categories=None)  # all of Unicode, lone surrogates included


@pytest.mark.parametrize("name", SHARED_FILES)
def test_equals_the_regex_on_every_shared_corpus(name: str) -> None:
    with open(shared_file(name), encoding="utf-8") as f:
        text = f.read(4_000_000)  # the novels whole: see the slow test
    assert pretokenize_gpt2_arrays(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@pytest.mark.slow
def test_equals_the_regex_on_all_of_the_novels() -> None:
    text = shared_file("pd_novels_heldout.txt").read_text(encoding="utf-8")
    assert pretokenize_gpt2_arrays(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@settings(max_examples=400, deadline=None)
@given(st.text(any_char, max_size=60))
def test_equals_the_regex_on_any_unicode(text: str) -> None:
    assert pretokenize_gpt2_arrays(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(st.sampled_from(TRICKY), max_size=40))
def test_equals_the_regex_where_alternatives_meet(text: str) -> None:
    assert pretokenize_gpt2_arrays(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(TRICKY), max_size=12), min_size=1, max_size=6))
def test_cuts_pretokenize_each_text_alone(texts: list[str]) -> None:
    joined = "".join(texts)
    cuts = np.cumsum([0] + [len(t) for t in texts])
    starts = gpt2_starts(code_points(joined), cuts).tolist()
    pieces = [joined[a:b] for a, b in zip(starts, starts[1:] + [len(joined)])]
    assert pieces == [p for t in texts for p in compile_pretokenizer(GPT2_PATTERN).findall(t)]


def test_lone_surrogates_are_their_own_code_points() -> None:
    assert code_points("a\ud800b").tolist() == [0x61, 0xD800, 0x62]
    assert pretokenize_gpt2_arrays("a\ud800 \udfffb") == compile_pretokenizer(GPT2_PATTERN).findall("a\ud800 \udfffb")


def test_empty_text_has_no_pretokens() -> None:
    assert pretokenize_gpt2_arrays("") == []
