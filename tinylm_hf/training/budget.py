"""The run's step plan (steps, warm-up, cosine end) and the time budget that re-plans it while it runs.

Without `time_budget_s` the plan is the config's. With one, `TimeBudget` times each step on the
budget's clock and `BudgetPlanner` fits the plan into the budget, again and again as the machine's
speed changes; the run stops when the budget is spent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .config import TrainConfig
from .schedule import cosine_lr

CALIBRATION_STEPS = 4  # steps timed (after one warm-up step) before the first plan for time_budget_s
REPLAN_EVERY = 0.1  # re-plan after every tenth of the budget, so that load changing mid-run moves the plan
BUDGET_MARGIN = 1.05  # plan 5% slack for the evaluations and checkpoints still to come


@dataclass
class StepPlan:
    """How many steps the run takes and the shape of its learning-rate schedule (a time budget re-plans it)."""

    max_iters: int
    warmup_iters: int  # negative after a lengthening re-plan: the decay then starts before step 0
    cycle_iters: int  # the step at which the cosine reaches min_lr

    @classmethod
    def of(cls, config: TrainConfig) -> StepPlan:
        """The plan the config asks for."""
        return cls(config.max_iters, config.warmup_iters, config.cycle_iters)

    def lr(self, it: int, config: TrainConfig) -> float:
        """The learning rate of step `it` (0-based)."""
        return _scheduled_lr(it, config, self.warmup_iters, self.cycle_iters)

    def as_list(self) -> list[int]:
        """[max_iters, warmup_iters, cycle_iters], as checkpoints store it (`budget_schedule`)."""
        return [self.max_iters, self.warmup_iters, self.cycle_iters]


def _scheduled_lr(it: int, config: TrainConfig, warmup_iters: int, cycle_iters: int) -> float:
    """`cosine_lr` of the plan; a decay stretched to start before step 0 (negative `warmup_iters`, a
    lengthened time-budget plan) is the same cosine with every step index shifted by that much."""
    shift = min(0, warmup_iters)
    return cosine_lr(it - shift, config.max_lr, config.min_lr, warmup_iters - shift, cycle_iters - shift)


@dataclass
class BudgetPlanner:
    """Fits the schedule (max_iters, warm-up, cosine end) into `time_budget_s`, and keeps fitting it.

    Steps are timed on the budget's clock (wall time, or this process's CPU time). After one warm-up
    step and `CALIBRATION_STEPS` timed ones, and again after every `REPLAN_EVERY` of the budget, the
    budget still left over the median step time since the last plan gives the steps still to run (at
    most the max_iters asked for). Re-planning is what makes a busy machine train the steps its budget
    really allows: the first steps' speed is a poor guess when other programs come and go. The warm-up
    is fixed by the first plan; the cosine ends at the planned last step.

    A plan that lengthens the run after the warm-up never raises the learning rate: the decay keeps the
    rate it has reached and stretches over the steps now left (its start moves back, before step 0 if
    need be, so that this step keeps its cosine progress; see `_scheduled_lr`). Shortening ends the
    cosine sooner, as planned.
    """

    budget_s: float
    clock: Callable[[], float]
    asked: tuple[int, int, int]  # (max_iters, warmup_iters, cosine_cycle_iters) of the config
    follow_max_iters: bool  # the cosine ends at max_iters (no cosine_cycle_iters was given)
    replan: bool = True  # False: only keep the time (a resumed run keeps the plan its checkpoint saved)
    start: float = field(init=False)
    next_plan_at: float = 0.0  # budget used at which to plan again (0: after the calibration steps)
    warmup_iters: int | None = None  # fixed by the first plan
    schedule: tuple[int, int] | None = None  # (warm-up end, cosine end) of the last plan
    step_times: list[float] = field(default_factory=list)  # since the last plan (the first step excluded)
    steps_timed: int = 0

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """Start the budget now (the loop calls it after the first step: warm-up and compilation)."""
        self.start = self.clock()

    def used(self) -> float:
        """Budget used so far, in seconds of its clock."""
        return self.clock() - self.start

    def after_step(self, it: int, step_s: float) -> tuple[int, int, int] | None:
        """Record a step's time; a new (max_iters, warmup_iters, cycle_iters) when it is time to plan."""
        self.steps_timed += 1
        if self.steps_timed == 1 or not self.replan:
            return None  # the first step pays for allocator warm-up
        self.step_times.append(step_s)
        used = self.used()
        if len(self.step_times) < CALIBRATION_STEPS or used < self.next_plan_at:
            return None
        step_s = float(np.median(self.step_times))
        self.step_times = []
        self.next_plan_at = used + REPLAN_EVERY * self.budget_s
        max_asked, warmup_asked, cycle_asked = self.asked
        max_iters = min(max_asked, max(it + 1, it + int((self.budget_s - used) / (step_s * BUDGET_MARGIN))))
        if self.warmup_iters is None:
            self.warmup_iters = min(warmup_asked, round(warmup_asked * max_iters / max_asked))
        cycle = max(max_iters if self.follow_max_iters else min(cycle_asked, max_iters), self.warmup_iters)
        warmup = self.warmup_iters
        if self.schedule is not None:
            warmup, cycle = _stretch_decay(it, *self.schedule, cycle)
        self.schedule = (warmup, cycle)
        return max_iters, warmup, cycle


def _stretch_decay(it: int, warmup: int, cycle: int, new_cycle: int) -> tuple[int, int]:
    """(decay start, cosine end) moving the cosine end from `cycle` to `new_cycle` at step `it` without
    raising the learning rate: in the decay, a later end also moves the decay's start back (below 0 if
    need be) so that step `it` keeps its progress p = (it - warmup) / (cycle - warmup)."""
    if new_cycle <= cycle or it <= warmup:
        return warmup, new_cycle  # shorter, or still warming up: the rate does not depend on the end yet
    if it >= cycle:
        return warmup, cycle  # the decay is over: extra steps stay at min_lr
    progress = (it - warmup) / (cycle - warmup)
    # floor: a start a little earlier puts the step a little further on, so the rate can only fall
    return math.floor((it - progress * new_cycle) / (1.0 - progress)), new_cycle


class TimeBudget:
    """The loop's side of `time_budget_s`: times each step, re-plans the `StepPlan`, says when time is up.

    The budget starts after the run's first step (allocator warm-up, and compilation under `compile`).
    A resumed run keeps the plan its checkpoint saved and only keeps the time. Without `time_budget_s`
    it never re-plans and time is never up.
    """

    def __init__(self, config: TrainConfig, *, first_iter: int, resuming: bool, say: Callable[[str], None]) -> None:
        self.config = config
        self.first_iter = first_iter
        self.say = say  # messages for people (the main process's console)
        self.clock = time.process_time if config.time_budget_clock == "process" else time.perf_counter
        self.planner = None
        if config.time_budget_s is not None:
            self.planner = BudgetPlanner(config.time_budget_s, self.clock,
                                         (config.max_iters, config.warmup_iters, config.cycle_iters),
                                         follow_max_iters=config.cosine_cycle_iters is None, replan=not resuming)
        self.step_start = 0.0

    def start_step(self) -> None:
        """Note the clock as a step begins."""
        self.step_start = self.clock()

    def end_step(self, it: int, plan: StepPlan, step_s: float) -> bool:
        """After step `it` (1-based, `step_s` wall seconds long): re-plan `plan` in place when due; True when
        the budget is spent before the plan's last step."""
        if self.planner is None:
            return False
        if it == self.first_iter + 1:  # the budget starts after the first step: warm-up and compilation
            self.planner.restart()
            if self.config.compile:
                self.say(f"first step (compilation) took {step_s:.0f}s, not counted in the time budget")
        new_plan = self.planner.after_step(it, self.clock() - self.step_start)
        if new_plan is not None:
            if new_plan[0] != plan.max_iters:
                self.say(f"{self.planner.used():.0f}s of the {self.config.time_budget_s:.0f}s budget used "
                         f"({self.config.time_budget_clock} clock): planning {new_plan[0]} steps")
            plan.max_iters, plan.warmup_iters, plan.cycle_iters = new_plan
        return self.planner.used() > self.config.time_budget_s and it < plan.max_iters
