"""Unigram's seed pieces (`unigram/seeds.py`): the memory they hold per character of the words."""

from __future__ import annotations

import tracemalloc

import numpy as np

from conftest import PACKAGE_DATA
from tinylm_hf.tokenization.metaspace.train import count_characters, count_metaspace_words
from tinylm_hf.tokenization.unigram.seeds import position_dtype, seed_pieces
from tinylm_hf.tokenization.unigram.train import _clean_words


def test_seed_pieces_peak_memory_per_character() -> None:
    # int64 arrays per character and np.unique's copies held ~125 bytes a character here (over 100 on 100 MB of
    # code, issue 38); int32 positions and names, freed level by level, hold under 60.
    with open(PACKAGE_DATA / "tinystories_train_small.txt", encoding="utf-8") as f:
        words = _clean_words(count_metaspace_words([f.read()]))
    chars = count_characters(words)
    tracemalloc.start()
    try:
        seed_pieces(words, chars, 16, 1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / sum(map(len, words)) < 90


def test_positions_fall_back_to_int64_past_int32() -> None:
    assert position_dtype(2**31 - 17, 16) is np.int32
    assert position_dtype(2**31 - 16, 16) is np.int64
