"""group_by_size: consecutive items in groups of about a given total size, nothing lost or reordered."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tinylm_hf.tokenization.grouping import group_by_size


def test_a_group_ends_as_soon_as_it_reaches_the_limit() -> None:
    assert list(group_by_size([1, 2, 3, 4, 5], lambda n: n, 5)) == [[1, 2, 3], [4, 5]]


def test_nothing_gives_no_group() -> None:
    assert list(group_by_size([], len, 10)) == []


@given(st.lists(st.text(max_size=5)), st.integers(min_value=1, max_value=12))
def test_groups_concatenate_to_the_items_and_only_the_last_is_short(items: list[str], limit: int) -> None:
    groups = list(group_by_size(items, len, limit))
    assert [item for group in groups for item in group] == items
    assert all(sum(map(len, group)) >= limit for group in groups[:-1])
