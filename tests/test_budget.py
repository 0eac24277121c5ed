"""The time budget (training/budget.py) on a fake clock: the learning rate follows the share of the budget used,
plans stay smooth under bursty load, and the run ends when the budget does."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tinylm_hf.training.budget import CALIBRATION_STEPS, StepPlan, TimeBudget
from tinylm_hf.training.config import TrainConfig


class FakeClock:
    """A clock the test advances by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def bursty(period_s: float = 90.0, slow_s: float = 1.0, fast_s: float = 0.15) -> Callable[[float], float]:
    """Step times of a machine that others load for the first half of every `period_s` seconds."""
    return lambda now: slow_s if (now % period_s) < period_s / 2 else fast_s


def budget_config(**kw) -> TrainConfig:
    values = dict(data_dir="d", out_dir="o", max_iters=10_000, warmup_iters=500, max_lr=1e-3, min_lr=1e-4,
                  time_budget_s=360.0)
    return TrainConfig(**{**values, **kw})


def simulate(config: TrainConfig, step_s: Callable[[float], float], *, agree=None):
    """Run the loop's calls to the budget; (rows of (step, lr, budget used after it), messages, the final plan)."""
    clock, messages = FakeClock(), []
    budget = TimeBudget(config, first_iter=0, resuming=False, say=messages.append, clock=clock)
    plan, it, rows = StepPlan.of(config), 0, []
    while it < plan.max_iters:
        budget.start_step()
        lr = budget.lr(it, plan)
        clock.now += step_s(clock.now)
        it += 1
        out_of_time = budget.end_step(it, plan, step_s(clock.now), agree=agree)
        rows.append((it, lr, budget.planner.used()))
        if out_of_time:
            break
    return rows, messages, plan


def test_under_bursty_load_the_run_uses_the_whole_budget():
    """Re-planning from the latest tenth of the budget once stopped this run at 243 s of 360."""
    rows, _, _ = simulate(budget_config(), bursty())
    *_, (_, _, used_before_last) = rows[:-1]
    assert used_before_last < 360.0 <= rows[-1][2]  # stops at the first step past the budget, not before


def test_under_bursty_load_the_learning_rate_falls_to_min_lr_at_the_budget_end():
    rows, _, _ = simulate(budget_config(), bursty())
    rates = [lr for _, lr, _ in rows]
    peak = rates.index(max(rates))
    assert max(rates) == pytest.approx(1e-3)
    assert all(b <= a for a, b in zip(rates[peak:], rates[peak + 1:]))  # never rises after the warm-up
    assert rates[-1] < 1e-4 + 0.01 * (1e-3 - 1e-4)  # the last step runs at about min_lr
    half = next(lr for _, lr, used in rows if used >= 180.0)
    assert 0.45e-3 < half < 0.65e-3  # half the budget, about half the decay: the cosine spans the time


def test_under_bursty_load_the_planned_steps_stay_smooth():
    _, messages, _ = simulate(budget_config(), bursty())
    planned = [int(m.split("about ")[1].split()[0]) for m in messages]
    assert len(planned) >= 5
    later = planned[2:]  # after the first fifth of the budget
    assert max(later) < 1.4 * min(later), planned  # once 345 -> 2061 -> 864 here


def test_a_machine_that_speeds_up_near_the_end_still_trains_to_the_budget():
    """This run once stopped at 302 s of 360, its last plan made from slow steps."""
    rows, _, plan = simulate(budget_config(), lambda now: 1.0 if now < 300 else 0.05)
    assert rows[-1][2] >= 360.0 and plan.max_iters >= rows[-1][0]
    assert rows[-1][1] < 1.1e-4


def test_the_first_plan_fixes_the_warmup_share():
    rows, messages, plan = simulate(budget_config(), lambda now: 1.0)
    first = int(messages[0].split("about ")[1].split()[0])
    assert first == (CALIBRATION_STEPS + 1) + int((360.0 - CALIBRATION_STEPS) / 1.0)
    assert plan.warmup_iters == round(500 * first / 10_000)
    rates = [lr for _, lr, _ in rows]
    assert rates[plan.warmup_iters] == pytest.approx(1e-3) and rates[plan.warmup_iters - 1] < 1e-3


def test_the_steps_asked_for_cap_the_run_and_its_schedule():
    rows, _, plan = simulate(budget_config(max_iters=100, warmup_iters=5), lambda now: 0.01)
    assert rows[-1][0] == 100 == plan.max_iters and rows[-1][2] < 360.0
    assert rows[-1][1] < 1.1e-4  # the cosine ran over the steps, ending near min_lr


def test_ranks_use_the_agreed_progress():
    """Under DDP every rank takes the largest progress of all ranks: the same rate, the same last step."""
    ahead = simulate(budget_config(), lambda now: 1.0, agree=lambda p: min(1.0, p + 0.25))[0]
    alone = simulate(budget_config(), lambda now: 1.0)[0]
    assert len(ahead) < len(alone)
    assert ahead[100][1] < alone[100][1]
