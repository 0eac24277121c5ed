"""cosine_lr at hand-checkable points and against the CS336 reference schedule."""

from __future__ import annotations

import pytest

from tinylm_hf.training import cosine_lr


def test_matches_cs336_reference_schedule() -> None:
    # expected values of the CS336 assignment-1 test (max 1.0, min 0.1, warm-up 7, cycle 21)
    expected = [
        0, 0.14285714285714285, 0.2857142857142857, 0.42857142857142855, 0.5714285714285714,
        0.7142857142857143, 0.8571428571428571, 1.0, 0.9887175604818206, 0.9554359905560885,
        0.9018241671106134, 0.8305704108364301, 0.7452476826029011, 0.6501344202803414, 0.55,
        0.44986557971965857, 0.3547523173970989, 0.26942958916356996, 0.19817583288938662,
        0.14456400944391146, 0.11128243951817937, 0.1, 0.1, 0.1, 0.1,
    ]  # fmt: skip
    actual = [cosine_lr(it, 1.0, 0.1, 7, 21) for it in range(25)]
    assert actual == pytest.approx(expected, abs=1e-12)


def test_warmup_rises_linearly_from_zero() -> None:
    assert cosine_lr(0, 6e-4, 6e-5, 100, 1000) == 0.0
    assert cosine_lr(25, 6e-4, 6e-5, 100, 1000) == pytest.approx(1.5e-4)
    assert cosine_lr(50, 6e-4, 6e-5, 100, 1000) == pytest.approx(3e-4)


def test_peak_midpoint_and_floor_of_the_cosine() -> None:
    assert cosine_lr(100, 6e-4, 6e-5, 100, 1000) == pytest.approx(6e-4)
    # half-way through the decay cos(pi/2) = 0: the average of max and min
    assert cosine_lr(550, 6e-4, 6e-5, 100, 1000) == pytest.approx(3.3e-4)
    assert cosine_lr(1000, 6e-4, 6e-5, 100, 1000) == pytest.approx(6e-5)
    assert cosine_lr(5000, 6e-4, 6e-5, 100, 1000) == 6e-5


def test_decay_is_monotone() -> None:
    values = [cosine_lr(it, 1.0, 0.0, 10, 200) for it in range(10, 260)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_no_warmup_starts_at_the_peak() -> None:
    assert cosine_lr(0, 1.0, 0.1, 0, 10) == 1.0
    assert cosine_lr(5, 1.0, 0.1, 0, 10) == pytest.approx(0.55)


def test_zero_length_decay_goes_from_peak_to_floor() -> None:
    assert cosine_lr(5, 1.0, 0.1, 5, 5) == 1.0
    assert cosine_lr(6, 1.0, 0.1, 5, 5) == 0.1


@pytest.mark.parametrize(
    "warmup, cycle",
    [pytest.param(-1, 10, id="negative-warmup"), pytest.param(10, 5, id="cycle-before-warmup")],
)
def test_rejects_inconsistent_lengths(warmup: int, cycle: int) -> None:
    with pytest.raises(ValueError):
        cosine_lr(0, 1.0, 0.1, warmup, cycle)
