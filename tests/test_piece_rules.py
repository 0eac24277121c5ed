"""piece_rules: which pieces a sentencepiece-style trainer may create, and judging a joined piece by its parts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tinylm_hf.tokenization.piece_rules import is_valid_piece, join_shapes, piece_shape


def test_piece_rules_follow_sentencepiece():
    assert is_valid_piece("▁the") and is_valid_piece("▁,") and is_valid_piece("12,")
    assert not is_valid_piece("a,")  # Latin + Common
    assert not is_valid_piece("a▁")  # ▁ only first
    assert not is_valid_piece("a" * 17)
    assert is_valid_piece("e\u0301x")  # a combining mark takes the script before it


@given(st.text(alphabet=st.sampled_from(list("ab1,▁Жω\u0301あ漢")), min_size=1, max_size=9), st.text(alphabet=st.sampled_from(list("ab1,▁Жω\u0301あ漢")), min_size=1, max_size=9))
@settings(max_examples=200, deadline=None)
def test_joining_shapes_equals_checking_the_joined_piece(left, right):
    if is_valid_piece(left) and is_valid_piece(right):
        joined = join_shapes(piece_shape(left), piece_shape(right))
        assert (joined is not None) == is_valid_piece(left + right)
