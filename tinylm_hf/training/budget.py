"""The run's step plan (steps, warm-up, cosine end) and the time budget that paces it while it runs.

Without `time_budget_s` the plan is the config's. With one, `TimeBudget` times each step on the
budget's clock; the learning rate follows the share of the budget used (after a warm-up in steps), so
the cosine reaches min_lr at the budget's end however the machine's speed changes, and the run stops
when the budget is spent. `BudgetPlanner` estimates the steps that fit from the mean step time (for the
progress bar, the log and a checkpoint's plan); no estimate ends the run early.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .config import TrainConfig
from .schedule import cosine_lr, cosine_lr_by_progress

CALIBRATION_STEPS = 4  # steps timed (after one warm-up step) before the first plan for time_budget_s
REPLAN_EVERY = 0.1  # say the plan again after every tenth of the budget


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
    """`cosine_lr` of the plan; a decay that starts before step 0 (negative `warmup_iters`, as plans of earlier
    versions saved) is the same cosine with every step index shifted by that much."""
    shift = min(0, warmup_iters)
    return cosine_lr(it - shift, config.max_lr, config.min_lr, warmup_iters - shift, cycle_iters - shift)


@dataclass
class BudgetPlanner:
    """Paces a run of `time_budget_s`: the share of the budget used, the warm-up, and the steps that fit.

    Steps are timed on the budget's clock (wall time, or this process's CPU time). After one warm-up step and
    `CALIBRATION_STEPS` timed ones the first plan fixes the warm-up (its share of the steps asked for, of the steps
    that fit). The estimate of the steps that fit uses the mean time of every step since the budget started: a
    burst of load moves it a little, not to the burst's speed. It is only an estimate: the learning rate follows
    `progress` (the larger of the budget's share used and the steps' share of max_iters), and a plan is extended
    whenever the run reaches it with budget left, so the run ends when the budget does.
    """

    budget_s: float
    clock: Callable[[], float]
    asked: tuple[int, int, int]  # (max_iters, warmup_iters, cosine_cycle_iters) of the config
    follow_max_iters: bool  # the cosine ends at the budget's end (no cosine_cycle_iters was given)
    replan: bool = True  # False: only keep the time (a resumed run keeps the plan its checkpoint saved)
    start: float = field(init=False)
    next_plan_at: float = 0.0  # budget used at which to plan again (0: after the calibration steps)
    warmup_iters: int | None = None  # fixed by the first plan
    decay_start: float | None = None  # progress when the warm-up ended
    planned: int | None = None  # max_iters of the last plan
    timed_s: float = 0.0  # the steps' time since the budget started (the first step excluded)
    steps_timed: int = 0

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """Start the budget now (the loop calls it after the first step: warm-up and compilation)."""
        self.start = self.clock()

    def used(self) -> float:
        """Budget used so far, in seconds of its clock."""
        return self.clock() - self.start

    def progress(self, it: int, used: float) -> float:
        """Share of the run done after step `it` with `used` seconds of the budget gone: of the budget, or of the
        max_iters asked for if the steps run out first."""
        return max(used / self.budget_s, it / self.asked[0])

    @property
    def decay_end(self) -> float:
        """The progress at which the cosine reaches min_lr: the end, or cosine_cycle_iters' share of max_iters."""
        return 1.0 if self.follow_max_iters else min(1.0, self.asked[2] / self.asked[0])

    def lr(self, it: int, progress: float, config: TrainConfig, plan: StepPlan) -> float:
        """The learning rate of step `it` (0-based) at `progress`: the plan's until the first plan, by progress after."""
        if self.decay_start is None:
            return plan.lr(it, config)
        return cosine_lr_by_progress(it, progress, config.max_lr, config.min_lr, self.warmup_iters or 0,
                                     self.decay_start, self.decay_end)

    def after_step(self, it: int, step_s: float, progress: float) -> tuple[int, int, int] | None:
        """Record step `it` (1-based) of `step_s` seconds at `progress`; a new (max_iters, warmup_iters,
        cycle_iters) when it is time to plan: after the calibration steps, every `REPLAN_EVERY` of the budget, and
        whenever the run reaches its plan's end with budget left."""
        self.steps_timed += 1
        if self.steps_timed == 1 or not self.replan:
            return None  # the first step pays for allocator warm-up
        self.timed_s += step_s
        if self.warmup_iters is not None and self.decay_start is None and it >= self.warmup_iters:
            self.decay_start = progress
        used = self.used()
        if self.steps_timed - 1 < CALIBRATION_STEPS:
            return None
        at_end = self.planned is not None and it >= self.planned
        if used < self.next_plan_at and not at_end:
            return None
        self.next_plan_at = used + REPLAN_EVERY * self.budget_s
        return self._plan(it, used, progress)

    def _plan(self, it: int, used: float, progress: float) -> tuple[int, int, int]:
        max_asked, warmup_asked, _ = self.asked
        mean_step_s = self.timed_s / (self.steps_timed - 1)
        fits = it + int(max(0.0, self.budget_s - used) / max(mean_step_s, 1e-9))
        max_iters = min(max_asked, max(it + 1, fits))
        if self.warmup_iters is None:
            self.warmup_iters = min(warmup_asked, round(warmup_asked * max_iters / max_asked))
            if it >= self.warmup_iters:
                self.decay_start = progress
        self.planned = max_iters
        cycle = max(self.warmup_iters, min(max_iters, round(self.decay_end * max_iters)))
        return max_iters, self.warmup_iters, cycle


class TimeBudget:
    """The loop's side of `time_budget_s`: times each step, paces the learning rate, says when time is up.

    The budget starts after the run's first step (allocator warm-up, and compilation under `compile`).
    Under DDP the ranks agree on the progress (`agree`: the maximum over ranks), so that every rank uses the
    same learning rate and stops at the same step. A resumed run keeps the plan its checkpoint saved (its
    learning rate by steps) and only keeps the time. Without `time_budget_s` the plan is the config's and time
    is never up.
    """

    def __init__(self, config: TrainConfig, *, first_iter: int, resuming: bool, say: Callable[[str], None],
                 clock: Callable[[], float] | None = None) -> None:
        self.config = config
        self.first_iter = first_iter
        self.say = say  # messages for people (the main process's console)
        default_clock = time.process_time if config.time_budget_clock == "process" else time.perf_counter
        self.clock = clock or default_clock
        self.planner = None
        if config.time_budget_s is not None:
            self.planner = BudgetPlanner(config.time_budget_s, self.clock,
                                         (config.max_iters, config.warmup_iters, config.cycle_iters),
                                         follow_max_iters=config.cosine_cycle_iters is None, replan=not resuming)
        self.step_start = 0.0
        self.progress = 0.0  # after the latest step, as every rank agreed

    def start_step(self) -> None:
        """Note the clock as a step begins."""
        self.step_start = self.clock()

    def lr(self, it: int, plan: StepPlan) -> float:
        """The learning rate of step `it` (0-based)."""
        if self.planner is None:
            return plan.lr(it, self.config)
        return self.planner.lr(it, self.progress, self.config, plan)

    def end_step(self, it: int, plan: StepPlan, step_s: float,
                 agree: Callable[[float], float] | None = None) -> bool:
        """After step `it` (1-based, `step_s` wall seconds long): update the progress (agreed over ranks by
        `agree`), re-plan `plan` in place when due; True when the budget is spent before the plan's last step."""
        if self.planner is None:
            return False
        if it == self.first_iter + 1:  # the budget starts after the first step: warm-up and compilation
            self.planner.restart()
            if self.config.compile:
                self.say(f"first step (compilation) took {step_s:.0f}s, not counted in the time budget")
        progress = self.planner.progress(it, self.planner.used())
        self.progress = agree(progress) if agree is not None else progress
        new_plan = self.planner.after_step(it, self.clock() - self.step_start, self.progress)
        if new_plan is not None:
            if new_plan[0] != plan.max_iters:
                self.say(f"{self.planner.used():.0f}s of the {self.config.time_budget_s:.0f}s budget used "
                         f"({self.config.time_budget_clock} clock): about {new_plan[0]} steps fit")
            plan.max_iters, plan.warmup_iters, plan.cycle_iters = new_plan
        return self.progress >= 1.0 and it < plan.max_iters
