"""The training loop (`tinylm train`): nanoGPT's order, exact resume, DDP, and a `RunSummary` at the end.

Each step: learning rate from `cosine_lr` -> micro-batches from the seeded sampler -> `train_step`
(forward, backward, clip, AdamW) -> evaluation every N steps -> checkpoint every N steps. Under
`torchrun` every rank draws the same global batch from the same seeded sampler and keeps its own
slice, so N ranks together compute exactly the gradient of a 1-process run with the same batch.
The next step's batch is cut while the device still works on this one (train_step's `overlap`).
The loop ends at a checkpoint and a summary; publishing (the Hugging Face folder, the card, the
Hub, exports) is `tinylm_hf.publish`'s job and reads the summary.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..corpus.token_files import load_tokens, read_header
from ..runtime import autocast_context, resolve_device, set_threads
from .batches import batch_from_starts, sample_starts
from .checkpoint import (
    BEST_CHECKPOINT,
    find_latest_checkpoint,
    newest_loadable_state,
    remove_orphaned_temp_files,
    restore_training_state,
    save_training_state,
)
from .config import TrainConfig
from .masking import MLMCollator
from .metrics import Console, MetricsLog, Tracker, plot_losses, rewrite_metrics
from .optimizer import AdamW, param_groups_for_weight_decay
from .run_dir import RunDirectory
from .schedule import cosine_lr
from .mlm_data import StaticMasks, iter_mlm_eval_batches, mask_windows, static_windows
from .step import NonFiniteLossError, compiled_cross_entropy, train_step
from .summary import DataProvenance, RunSummary
from .validation import evaluate, evaluate_masked_lm, sample_completion

CALIBRATION_STEPS = 4  # steps timed (after one warm-up step) before the first plan for time_budget_s
REPLAN_EVERY = 0.1  # re-plan after every tenth of the budget, so that load changing mid-run moves the plan
BUDGET_MARGIN = 1.05  # plan 5% slack for the evaluations and checkpoints still to come


# ----------------------------------------------------------------------------- setup


def _distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank), initialising the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, 0
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0"))


def is_main_process() -> bool:
    """True in a single process and on rank 0 under torchrun: the process that writes shared outputs."""
    return int(os.environ.get("RANK", "0")) == 0


def wait_for_all_ranks() -> None:
    """Under torchrun, hold every rank until all arrive (so no rank exits while another still writes)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


@dataclass
class TrainingData:
    """The prepared token arrays and what their headers say."""

    train: np.ndarray
    val: np.ndarray
    provenance: DataProvenance
    vocab_size: int
    eos_id: int | None
    bytes_per_token: float | None


def open_data(config: TrainConfig) -> TrainingData:
    """Open train.bin/val.bin and check they can feed `config` (before any model is built)."""
    data_dir = Path(config.data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data folder {data_dir} does not exist; make it with `tinylm prepare`")
    train, val = load_tokens(data_dir / "train.bin"), load_tokens(data_dir / "val.bin")
    train_header, val_header = read_header(data_dir / "train.bin"), read_header(data_dir / "val.bin")
    if train_header.get("tokenizer_fingerprint") != val_header.get("tokenizer_fingerprint"):
        raise ValueError(f"train.bin and val.bin in {data_dir} were made by different tokenizers; re-run prepare")
    for name, array in (("train.bin", train), ("val.bin", val)):
        if len(array) <= config.context_length:
            raise ValueError(
                f"{data_dir / name} has {len(array)} tokens, too few for context_length {config.context_length}: "
                "lower --context-length or prepare more text"
            )
    bytes_per_token = val_header.get("bytes", 0) / max(int(val_header["count"]), 1) or None
    return TrainingData(train, val, DataProvenance.from_headers(train_header, val_header),
                        int(train_header.get("vocab_size", 0)), train_header.get("eos_id"), bytes_per_token)


def build_model(config: TrainConfig, vocab_size: int, eos_id: int | None) -> torch.nn.Module:
    """A TinyLMForCausalLM (TinyLMForMaskedLM for objective mlm) from `init_from`, or a preset/overrides
    sized to the tokenizer and context."""
    from ..modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMForMaskedLM

    model_class = TinyLMForMaskedLM if config.objective == "mlm" else TinyLMForCausalLM
    if config.init_from:
        if not Path(config.init_from).is_dir():
            raise FileNotFoundError(f"init_from folder {config.init_from} does not exist")
        model = model_class.from_pretrained(config.init_from)
    else:
        overrides = dict(config.model)
        overrides.setdefault("vocab_size", vocab_size)
        if eos_id is not None:
            overrides.setdefault("eos_token_id", eos_id)
            overrides.setdefault("bos_token_id", eos_id)
        overrides.setdefault("max_position_embeddings", config.context_length)
        if config.preset:
            model_config = TinyLMConfig.from_preset(config.preset, **overrides)
        else:
            model_config = TinyLMConfig(**overrides)
        if model_config.max_position_embeddings < config.context_length and "max_position_embeddings" not in config.model:
            model_config.max_position_embeddings = config.context_length
        model = model_class(model_config)
    if model.config.vocab_size < vocab_size:
        raise ValueError(f"model vocab_size {model.config.vocab_size} is smaller than the data's {vocab_size}")
    if model.config.max_position_embeddings < config.context_length:
        raise ValueError(
            f"context_length {config.context_length} exceeds the model's max_position_embeddings "
            f"{model.config.max_position_embeddings}; lower --context-length or raise max_position_embeddings"
        )
    return model


def _load_sample_tokenizer(provenance: DataProvenance, config: TrainConfig) -> Any:
    tokenizer_dir = config.tokenizer_dir or provenance.tokenizer_dir
    if config.objective != "clm" or not config.sample_tokens or not tokenizer_dir or not Path(tokenizer_dir).is_dir():
        return None
    from ..corpus.prepare import load_tokenizer

    return load_tokenizer(tokenizer_dir)


# ----------------------------------------------------------------------------- the time budget


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


def _scheduled_lr(it: int, config: TrainConfig, warmup_iters: int, cycle_iters: int) -> float:
    """`cosine_lr` of the plan; a decay stretched to start before step 0 (negative `warmup_iters`, a
    lengthened time-budget plan) is the same cosine with every step index shifted by that much."""
    shift = min(0, warmup_iters)
    return cosine_lr(it - shift, config.max_lr, config.min_lr, warmup_iters - shift, cycle_iters - shift)


def _budget_clock(name: str) -> Callable[[], float]:
    return time.process_time if name == "process" else time.perf_counter


# ----------------------------------------------------------------------------- masked-LM data


@dataclass
class MaskedLMData:
    """What the mlm objective adds to the data: the collator, or the stored static masks of each split."""

    collator: MLMCollator
    train_masks: StaticMasks | None
    val_masks: StaticMasks | None


def open_masked_lm_data(config: TrainConfig, data: TrainingData) -> MaskedLMData:
    """The collator for `config.masking` (the data's tokenizer decides words and the mask token)."""
    from ..corpus.prepare import load_tokenizer

    tokenizer_dir = config.tokenizer_dir or data.provenance.tokenizer_dir
    if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
        raise FileNotFoundError(f"objective mlm needs the data's tokenizer folder ({tokenizer_dir}); pass --tokenizer-dir")
    tokenizer = load_tokenizer(tokenizer_dir)
    collator = MLMCollator(tokenizer, config.masking, mlm_probability=config.mlm_probability, seed=config.seed)
    if config.masking != "static":
        return MaskedLMData(collator, None, None)
    return MaskedLMData(collator, StaticMasks.open(config.data_dir, "train", data.train),
                        StaticMasks.open(config.data_dir, "val", data.val))


def _micro_batch(config: TrainConfig, data: TrainingData, mlm: MaskedLMData | None, starts: torch.Tensor,
                 rows: slice, device: torch.device, seed: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of this rank's rows: next tokens (clm), or masked inputs and labels (mlm).

    Dynamic masks are drawn for the whole global micro-batch from a generator seeded by `seed` (the
    run's seed, iteration and micro-step), so resumed and multi-process runs mask exactly as one
    uninterrupted process would.
    """
    if mlm is None:
        return batch_from_starts(data.train, starts[rows], config.context_length, device)
    if mlm.train_masks is not None:
        return static_windows(data.train, mlm.train_masks, starts[rows], config.context_length, device)
    x, _ = batch_from_starts(data.train, starts, config.context_length, "cpu")
    x, y = mask_windows(x, mlm.collator, np.random.default_rng(seed))
    return x[rows].to(device), y[rows].to(device)


# ----------------------------------------------------------------------------- the loop


def train(config: TrainConfig) -> RunSummary:
    """Run (or resume) a training run; returns its `RunSummary` (also written to out_dir/summary.json)."""
    rank, world, local_rank = _distributed()
    master = rank == 0
    device = resolve_device(config.device, local_rank)
    set_threads(config.threads)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    autocast = autocast_context(device, config.dtype)
    if config.batch_size % (config.grad_accum_steps * world):
        raise ValueError(f"batch_size {config.batch_size} must be divisible by grad_accum_steps * world_size = "
                         f"{config.grad_accum_steps * world}")
    micro_global = config.batch_size // config.grad_accum_steps  # rows per micro-step over all ranks
    micro = micro_global // world  # rows per micro-step on this rank
    data = open_data(config)

    run = RunDirectory(config.out_dir)
    if master:
        run.lock()
    try:
        if master:
            run_id, resuming = run.start(resume=config.resume, overwrite=config.overwrite)
            remove_orphaned_temp_files(run.checkpoints)
        if world > 1:
            torch.distributed.barrier()
        if not master:
            run_id, resuming = run.run_id(), config.resume
        return _train(config, data, run, run_id, resuming, device, autocast, micro_global, micro, rank, world)
    finally:
        run.unlock()


def _train(config: TrainConfig, data: TrainingData, run: RunDirectory, run_id: str | None, resuming: bool,
           device: torch.device, autocast: contextlib.AbstractContextManager, micro_global: int, micro: int,
           rank: int, world: int) -> RunSummary:
    master = rank == 0
    torch.manual_seed(config.seed)
    model = build_model(config, data.vocab_size, data.eos_id).to(device)
    optimizer = AdamW(param_groups_for_weight_decay(model, config.weight_decay), lr=config.max_lr,
                      betas=(config.beta1, config.beta2), eps=config.eps, weight_decay=config.weight_decay)
    sampler = torch.Generator().manual_seed(config.seed)
    tokenizer = _load_sample_tokenizer(data.provenance, config) if master else None
    mlm = open_masked_lm_data(config, data) if config.objective == "mlm" else None

    start_iter, tokens_seen, metrics, best_val = 0, 0, [], float("inf")
    max_iters, warmup_iters, cycle_iters = config.max_iters, config.warmup_iters, config.cycle_iters
    if resuming:
        path, state, skipped = newest_loadable_state(run.checkpoints, run_id)
        extra = state["extra"]
        fingerprint = extra.get("tokenizer_fingerprint")
        if fingerprint and data.provenance.tokenizer_fingerprint and fingerprint != data.provenance.tokenizer_fingerprint:
            raise ValueError(
                f"the data in {config.data_dir} was made by another tokenizer than the run in {run.path} was "
                f"trained on (fingerprint {data.provenance.tokenizer_fingerprint} vs {fingerprint}); resume with the "
                "same data, or start a new run"
            )
        restore_training_state(state, model=model, optimizer=optimizer, generator=sampler)
        start_iter = int(state["iteration"])
        metrics = [m for m in state["metrics"] if m.get("iter", 0) <= start_iter]
        tokens_seen = int(extra.get("tokens", start_iter * config.batch_size * config.context_length))
        best_val = float(extra.get("best_val_loss", float("inf")))
        if config.time_budget_s is not None and "budget_schedule" in extra:  # keep the plan the budget made
            max_iters, warmup_iters, cycle_iters = extra["budget_schedule"]
        if master:
            for reason in skipped:
                print(f"skipped a checkpoint: {reason}")
            print(f"resumed from {path} at iteration {start_iter} (run {run_id})")
    metrics_path = run.path / "metrics.jsonl"
    if master:
        rewrite_metrics(metrics_path, metrics)
    tracker = Tracker(config.report_to, run.path, run_id or "run", config.to_dict()) if master else None
    log = MetricsLog(metrics_path, metrics, tracker)

    raw_model = model
    loss_fn = None  # train_step's default, cross_entropy
    if config.compile:
        model = torch.compile(model)
        loss_fn = compiled_cross_entropy()
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
        torch.distributed.all_reduce(t)
        return t / world

    def save(iteration: int, *, best: bool = False) -> Path | None:
        if not master:
            return None
        extra = {"tokens": tokens_seen, "world_size": world, "best_val_loss": best_val, "loss": step_loss,
                 "tokenizer_fingerprint": data.provenance.tokenizer_fingerprint}
        if config.time_budget_s is not None:
            extra["budget_schedule"] = [max_iters, warmup_iters, cycle_iters]
        sampler_at_step = torch.Generator()
        sampler_at_step.set_state(sampler_state)
        return save_training_state(
            run.checkpoints, model=raw_model, optimizer=optimizer, iteration=iteration, generator=sampler_at_step,
            train_config=config.to_dict(), model_config=raw_model.config.to_dict(), metrics=log.records,
            extra=extra, keep_last=config.keep_last, run_id=run_id,
            path=run.checkpoints / BEST_CHECKPOINT if best else None,
        )

    def barrier() -> None:
        if world > 1:
            torch.distributed.barrier()

    interrupted = {"flag": False}
    previous_handler = None
    with contextlib.suppress(ValueError):  # not in the main thread: leave SIGINT alone
        previous_handler = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.update(flag=True))

    console = Console(max_iters, start_iter, enabled=master and config.progress)
    eval_bs = config.eval_batch_size or micro
    last_eval: dict[str, Any] = {}
    step_loss = None
    stopped_by_budget = False
    t_start = time.perf_counter()
    clock = _budget_clock(config.time_budget_clock)
    planner = None
    if config.time_budget_s is not None:
        planner = BudgetPlanner(config.time_budget_s, clock, (config.max_iters, config.warmup_iters, config.cycle_iters),
                                follow_max_iters=config.cosine_cycle_iters is None, replan=not resuming)
    it = start_iter

    def draw_batches(step: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The micro-batches of optimizer step `step` (0-based), from the sampler's next draws."""
        batches = []
        for i in range(config.grad_accum_steps):
            starts = sample_starts(len(data.train), micro_global, config.context_length, sampler)
            batches.append(_micro_batch(config, data, mlm, starts, slice(rank * micro, (rank + 1) * micro),
                                        device, (config.seed, step, i)))
        return batches

    # the next step's batches are drawn while the device works on this step (train_step's `overlap`);
    # a checkpoint keeps the sampler as it was before that draw, so a resumed run draws them again
    prefetched: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    sampler_state = sampler.get_state()
    model.train()
    try:
        while it < max_iters:
            t0, budget_t0 = time.perf_counter(), clock()
            lr = _scheduled_lr(it, config, warmup_iters, cycle_iters)
            batches = prefetched.pop(it, None) or draw_batches(it)
            sampler_state = sampler.get_state()

            def prefetch(step: int = it + 1) -> None:
                if step < max_iters:
                    prefetched[step] = draw_batches(step)

            try:
                result = train_step(
                    model, optimizer, batches, lr=lr, grad_clip=config.grad_clip, autocast=autocast,
                    no_sync=model.no_sync if world > 1 else None, all_reduce=all_reduce_mean if world > 1 else None,
                    parameters=list(raw_model.parameters()), loss_fn=loss_fn, overlap=prefetch,
                )
            except NonFiniteLossError as err:
                latest = find_latest_checkpoint(run.checkpoints)
                raise NonFiniteLossError(
                    f"{err} at iteration {it + 1}: stopped without updating the weights. Last good checkpoint "
                    f"(all saved weights are finite): {latest or 'none yet'}. Try a lower max_lr, a grad_clip, "
                    "or float32, then --resume."
                ) from None
            it += 1
            tokens_seen += config.batch_size * config.context_length
            step_loss = result.loss
            dt = time.perf_counter() - t0
            record = {"iter": it, "tokens": tokens_seen, "loss": step_loss, "lr": lr,
                      "grad_norm": result.grad_norm, "tok_per_s": config.batch_size * config.context_length / max(dt, 1e-9)}
            log.add(record, write=master and (it % config.log_every == 0 or it == max_iters))
            console.step(record)

            if planner is not None:
                if it == start_iter + 1:  # the budget starts after the first step: warm-up and compilation
                    planner.restart()
                    if config.compile and master:
                        console.write(f"first step (compilation) took {dt:.0f}s, not counted in the time budget")
                plan = planner.after_step(it, clock() - budget_t0)
                if plan is not None:
                    if master and plan[0] != max_iters:
                        console.write(f"{planner.used():.0f}s of the {config.time_budget_s:.0f}s budget used "
                                      f"({config.time_budget_clock} clock): planning {plan[0]} steps")
                    max_iters, warmup_iters, cycle_iters = plan
                stopped_by_budget = planner.used() > config.time_budget_s and it < max_iters

            last = it == max_iters or stopped_by_budget
            if (config.eval_every and it % config.eval_every == 0) or last:
                if master and mlm is not None:
                    last_eval = evaluate_masked_lm(
                        raw_model, iter_mlm_eval_batches(data.val, eval_bs, config.context_length, mlm.collator,
                                                         config.seed, mlm.val_masks),
                        device, config.eval_iters, autocast)
                elif master:
                    last_eval = evaluate(raw_model, data.val, eval_bs, config.context_length, device,
                                         config.eval_iters, data.bytes_per_token, autocast)
                if master:
                    if tokenizer is not None:
                        last_eval["sample"] = sample_completion(raw_model, tokenizer, config.sample_prompt,
                                                                config.sample_tokens)
                    log.add({"iter": it, "tokens": tokens_seen, **last_eval})
                    console.write(_eval_line(it, last_eval, config.sample_prompt))
                    if config.keep_best and last_eval["val_loss"] < best_val:
                        best_val = last_eval["val_loss"]
                        save(it, best=True)
                barrier()
            stop = interrupted["flag"]
            if world > 1:
                flag = torch.tensor([1.0 if stop else 0.0], device=device)
                torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
                stop = bool(flag.item())
            if (config.checkpoint_every and it % config.checkpoint_every == 0) or last or stop:
                save(it)
                barrier()
            if stop:
                if master:
                    console.write(f"interrupted: checkpoint saved at iteration {it}; continue with --resume")
                break
            if stopped_by_budget:
                break
    finally:
        console.close()
        if tracker is not None:
            tracker.close()
        if previous_handler is not None:
            signal.signal(signal.SIGINT, previous_handler)

    best_path = run.checkpoints / BEST_CHECKPOINT
    summary = RunSummary(
        run_id=run_id or "", out_dir=str(run.path), iterations=it, tokens=tokens_seen,
        context_length=config.context_length, batch_size=config.batch_size, loss=step_loss,
        val_loss=last_eval.get("val_loss"), val_perplexity=last_eval.get("val_perplexity"),
        val_bpb=last_eval.get("val_bpb"), val_accuracy=last_eval.get("val_accuracy"),
        best_val_loss=best_val if best_val < float("inf") else None,
        checkpoint=str(find_latest_checkpoint(run.checkpoints)) if master else None,
        best_checkpoint=str(best_path) if best_path.is_file() else None,
        interrupted=interrupted["flag"], elapsed_s=time.perf_counter() - t_start, world_size=world,
        data=data.provenance, train_config=config.to_dict(), objective=config.objective,
        masking=config.masking if mlm is not None else None,
    )
    if master:
        summary.save()
        if config.plot and log.records:
            plot_losses(log.records, run.path / "loss.png")
    barrier()
    return summary


def _eval_line(it: int, result: dict[str, Any], prompt: str) -> str:
    line = f"iter {it}: val loss {result['val_loss']:.4f}, ppl {result['val_perplexity']:.2f}"
    if "val_bpb" in result:
        line += f", bpb {result['val_bpb']:.3f}"
    if "val_accuracy" in result:
        line += f", masked-token accuracy {result['val_accuracy']:.3f}"
    if "sample" in result:
        line += f"\n  sample: {prompt!r} -> {result['sample']!r}"
    return line
