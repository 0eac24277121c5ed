"""Where a run stands (`TrainState`), and the run's checkpoints that save it and restore it exactly (`RunCheckpoints`).

A checkpoint holds the weights, the optimizer, every random stream (the batch sampler as it was
before the next step's batches were drawn) and the state below in its `extra` entry, so that a
resumed run repeats the uninterrupted one bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..budget import StepPlan
from ..config import TrainConfig
from .checkpoint import BEST_CHECKPOINT, Checkpoint, newest_loadable_state, restore_training_state, save_training_state
from .folder import RunDirectory
from .summary import DataProvenance

if TYPE_CHECKING:
    from ..objectives.base import Objective


@dataclass
class TrainState:
    """A run's progress after its latest step: what a checkpoint keeps beside the weights, and the summary reports."""

    plan: StepPlan
    iteration: int = 0
    """Optimizer steps done."""
    tokens: int = 0
    """Training tokens seen."""
    loss: float | None = None
    """Training loss of the latest step."""
    best_val_loss: float = math.inf
    """Lowest validation loss so far (tracked with `keep_best`)."""
    metrics: list[dict[str, Any]] = field(default_factory=list)
    """Every metrics record so far (metrics.jsonl's lines)."""
    last_eval: dict[str, Any] = field(default_factory=dict)
    """The latest evaluation record."""

    def advance(self, loss: float, tokens: int) -> None:
        """Count a finished step that trained on `tokens` tokens with loss `loss`."""
        self.iteration += 1
        self.tokens += tokens
        self.loss = loss

    def record_evaluation(self, result: dict[str, Any], *, keep_best: bool) -> bool:
        """Keep `result` as the latest evaluation; True when it is a new best (counted only under `keep_best`)."""
        self.last_eval = result
        if keep_best and result["val_loss"] < self.best_val_loss:
            self.best_val_loss = result["val_loss"]
            return True
        return False


RUN_TOKENIZER_DIR = "tokenizer"  # in checkpoints/: the tokenizer the run publishes, saved with its first checkpoint
RESUMED_MODEL_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "max_position_embeddings", "rope_theta", "tie_word_embeddings", "use_bidirectional_attention")
"""The TinyLMConfig fields a resumed run must share with its checkpoint: every one changes the model."""
CHANGEABLE_SETTINGS = ("batch_size", "grad_accum_steps", "max_iters", "time_budget_s", "max_lr", "min_lr",
                       "warmup_iters", "cosine_cycle_iters", "muon_lr", "muon_momentum", "weight_decay", "beta1",
                       "beta2", "eps", "grad_clip", "dtype", "masking", "mlm_probability", "dpo_beta")
"""The TrainConfig fields a resumed run may change: from the resumed step on the run trains with the new value, and
its metrics.jsonl records the change (a `changed` record), which the summary lists."""


class RunCheckpoints:
    """The training checkpoints of one run: the newest intact one restored on resume, new ones saved by rank 0."""

    def __init__(self, run: RunDirectory, run_id: str | None, config: TrainConfig, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer, *, tokenizer_fingerprint: str | None, world_size: int,
                 main: bool, data: DataProvenance | None = None, tokenizer: Any = None,
                 objective: Objective | None = None) -> None:
        self.run, self.run_id, self.config = run, run_id, config
        self.model, self.optimizer = model, optimizer  # the plain model (no DDP or compile wrapper)
        self.tokenizer_fingerprint = tokenizer_fingerprint
        self.data = data  # the data the run trains on: its checkpoints record its digest and name
        self.tokenizer = tokenizer  # what the run publishes, loaded before the first step: kept beside the checkpoints
        self.world_size, self.main = world_size, main
        self.objective = objective  # what it computed that a resumed run reuses (`Objective.checkpoint_state`)

    def resume(self, sampler: torch.Generator) -> TrainState:
        """Restore the model, optimizer, random streams and `sampler` from the newest loadable checkpoint."""
        config = self.config
        path, saved, skipped = newest_loadable_state(self.run.checkpoints, self.run_id)
        extra = saved.extra
        self._check_same_tokenizer(extra.get("tokenizer_fingerprint"))
        self._check_same_data(extra.get("data"))
        self._check_same_model(path, saved)
        settings = group_settings(self.optimizer)  # the command's hyper-parameters, before the saved ones load
        restore_training_state(saved, model=self.model, optimizer=self.optimizer, generator=sampler)
        apply_group_settings(self.optimizer, settings)
        if self.objective is not None:
            self.objective.restore_state(extra.get("objective_state") or {})
        iteration = saved.iteration
        plan = StepPlan.of(config)
        if config.time_budget_s is not None and "budget_schedule" in extra:  # keep the plan the budget made
            plan = StepPlan(*extra["budget_schedule"])
        state = TrainState(
            plan, iteration=iteration,
            tokens=int(extra.get("tokens", iteration * config.batch_size * config.context_length)),
            best_val_loss=float(extra.get("best_val_loss", math.inf)),
            metrics=[m for m in saved.metrics if m.get("iter", 0) <= iteration],
        )
        changes = changed_settings(saved.train_config, config.to_dict())
        if changes:
            state.metrics.append({"iter": iteration, "tokens": state.tokens, "changed": changes})
        if self.main:
            for reason in skipped:
                print(f"skipped a checkpoint: {reason}")
            print(f"resumed from {path} at iteration {iteration} (run {self.run_id})")
            if changes:
                print(f"from iteration {iteration} on the run trains with {describe_changes(changes)}")
        return state

    def _check_same_tokenizer(self, fingerprint: str | None) -> None:
        if fingerprint and self.tokenizer_fingerprint and fingerprint != self.tokenizer_fingerprint:
            raise ValueError(
                f"the data in {self.config.data_dir or self.config.train_file} was made by another tokenizer than the "
                f"run in {self.run.path} "
                f"was trained on (fingerprint {self.tokenizer_fingerprint} vs {fingerprint}); resume with the "
                "same data, or start a new run"
            )

    def _check_same_data(self, saved: dict[str, Any] | None) -> None:
        """A resumed run trains on the data it started on (by content: `DataProvenance.token_digest`), so that its
        card and summary, which name the data, tell the truth about every step."""
        now = self.data
        if not saved or now is None or not saved.get("token_digest") or not now.token_digest:
            return  # a checkpoint from before runs recorded their data
        if saved["token_digest"] != now.token_digest:
            where = (self.config.data_dir or self.config.conversations or self.config.train_file
                     or self.config.preferences)
            raise ValueError(
                f"the data in {where} changed since the run in {self.run.path} started (it started on "
                f"{saved.get('name')}, {saved.get('train_tokens', 0):,} training tokens; now {now.name}, "
                f"{now.train_tokens:,}): resume with the data it started on, or pass --overwrite to start afresh"
            )

    def _check_same_model(self, path: Path, saved: Checkpoint) -> None:
        """A resumed run trains the objective, optimizer and model it was started with (a different --objective,
        --optimizer, --preset or --model would load the weights into another model or the optimizer's state into
        another optimizer, or fail deep inside torch)."""
        from ..objectives.registry import objective_class

        before = objective_class(saved.objective, saved.model_config).name
        if before != self.config.objective:
            raise ValueError(f"the run in {self.run.path} was started with objective {before}, not "
                             f"{self.config.objective}: resume with --objective {before}, or start a new run")
        optimizer = saved.train_config.get("optimizer", "adamw")
        if optimizer != self.config.optimizer:
            raise ValueError(f"the run in {self.run.path} was trained with optimizer {optimizer}, not "
                             f"{self.config.optimizer}: resume with --optimizer {optimizer}, or start a new run")
        saved_model, model = saved.model_config or {}, self.model.config.to_dict()
        changed = [f"{name} {saved_model[name]} -> {model.get(name)}" for name in RESUMED_MODEL_FIELDS
                   if name in saved_model and saved_model[name] != model.get(name)]
        if changed:
            raise ValueError(f"--resume would continue {path.name} of the run in {self.run.path} with another model "
                             f"({', '.join(changed)}): resume with the run's --preset/--model/--context-length, "
                             "or start a new run")

    def save(self, state: TrainState, sampler_state: torch.Tensor, *, best: bool = False) -> Path | None:
        """Write `state` as ckpt_<iteration>.pt (best.pt with `best`) on the main process; None elsewhere.

        `sampler_state` is the batch sampler's state before the next step's batches were drawn.
        """
        if not self.main:
            return None
        extra = {"tokens": state.tokens, "world_size": self.world_size, "best_val_loss": state.best_val_loss,
                 "loss": state.loss, "tokenizer_fingerprint": self.tokenizer_fingerprint}
        if self.data is not None:
            extra["data"] = {"token_digest": self.data.token_digest, "name": self.data.name,
                             "train_tokens": self.data.train_tokens}
        if self.config.time_budget_s is not None:
            extra["budget_schedule"] = state.plan.as_list()
        if self.objective is not None and (objective_state := self.objective.checkpoint_state()):
            extra["objective_state"] = objective_state
        sampler = torch.Generator()
        sampler.set_state(sampler_state)
        saved = save_training_state(
            self.run.checkpoints, model=self.model, optimizer=self.optimizer, iteration=state.iteration,
            generator=sampler, train_config=self.config.to_dict(), model_config=self.model.config.to_dict(),
            metrics=state.metrics, extra=extra, keep_last=self.config.keep_last, run_id=self.run_id,
            path=self.run.checkpoints / BEST_CHECKPOINT if best else None,
        )
        self._keep_tokenizer()
        return saved

    def _keep_tokenizer(self) -> None:
        """Save the tokenizer held since before the first step into checkpoints/ once: publishing falls back to it when
        the tokenizer folder was deleted while the run trained."""
        folder = self.run.checkpoints / RUN_TOKENIZER_DIR
        if self.tokenizer is None or folder.is_dir():
            return
        from ...fileio import staged_folder

        with staged_folder(folder) as stage:
            self.tokenizer.save_pretrained(stage)


def group_settings(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """Each param group's hyper-parameters (everything but its parameters)."""
    return [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]


def apply_group_settings(optimizer: torch.optim.Optimizer, settings: list[dict[str, Any]]) -> None:
    """Set the param groups' hyper-parameters to `settings` (`group_settings` of the optimizer the command built):
    `load_state_dict` restores the saved run's values (weight decay, betas, Muon's momentum and rate), and a resumed
    run trains with the values it was started with now, as its summary and card state."""
    for group, values in zip(optimizer.param_groups, settings, strict=True):
        group.update(values)


def changed_settings(saved: dict[str, Any], now: dict[str, Any]) -> dict[str, list[Any]]:
    """The `CHANGEABLE_SETTINGS` whose value differs between a checkpoint's train config and the resuming one:
    name -> [before, after]."""
    return {name: [saved[name], now.get(name)] for name in CHANGEABLE_SETTINGS
            if name in saved and saved[name] != now.get(name)}


def describe_changes(changes: dict[str, list[Any]]) -> str:
    """`weight_decay 0.1 -> 0.05, beta2 0.95 -> 0.99`."""
    return ", ".join(f"{name} {before} -> {after}" for name, (before, after) in changes.items())


def setting_changes(records: list[dict[str, Any]]) -> list[str]:
    """The settings a run changed on resume, from its metrics records: `at step 4 weight_decay 0.1 -> 0.05`."""
    return [f"at step {r['iter']} {describe_changes(r['changed'])}" for r in records if r.get("changed")]
