"""The training loop (`tinylm train`): nanoGPT's order, exact resume, DDP, and a `RunSummary` at the end.

`train` sets up, then runs a plain loop. Each step: learning rate from the step plan -> the step's
micro-batches from the seeded sampler -> `train_step` (forward, backward, clip, AdamW or Muon + AdamW) -> evaluation
every N steps -> checkpoint every N steps -> stop at the plan's end, when the time budget is spent, or
on Ctrl-C. Each concern is a named piece the loop calls:

- `distributed.DataParallel`: the ranks under torchrun, each rank's rows of a batch, DDP, the collectives;
- `objectives`: causal LM, masked LM, chat fine-tuning or text classification: the data, the model class, the
  micro-batches, the evaluation;
- `budget`: the step plan, and the `TimeBudget` that paces the learning rate by the share of `time_budget_s` used;
- `step.compile_for_training`: torch.compile and the loss compiled beside it;
- `interrupts.InterruptFlag`: Ctrl-C as a flag read between steps;
- `run.state.RunCheckpoints` and `TrainState`: checkpoints and exact resume; `metrics.RunLog`: the records.

The loop ends at a checkpoint and a summary; publishing (the Hugging Face folder, the card, the Hub,
exports) is `tinylm_hf.publish`'s job and reads the summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..fileio import check_input_folder
from ..runtime import autocast_context, resolve_device, set_threads
from .batches import StepBatches
from .budget import StepPlan, TimeBudget
from .config import TrainConfig, check_context_length
from .data import RunData, published_tokenizer
from .distributed import DataParallel
from .interrupts import InterruptFlag
from .memory import check_step_memory
from .metrics import RunLog, plot_losses
from .objectives import OBJECTIVE_CLASSES, Objective, open_objective
from .muon import MuonWithAdamW, param_groups_for_muon
from .optimizer import AdamW, param_groups_for_weight_decay
from .run.checkpoint import BEST_CHECKPOINT, find_latest_checkpoint, list_checkpoints, remove_orphaned_temp_files
from .run.folder import LOSS_PLOT, RunDirectory
from .run.state import RunCheckpoints, TrainState, setting_changes
from .run.summary import RunSummary, learning_rate_facts
from .step import NonFiniteLossError, StepResult, train_step

SUMMARY_FIELDS = {f.name for f in dataclasses.fields(RunSummary)}  # an evaluation's numbers with a field of their own


def train(config: TrainConfig) -> RunSummary:
    """Run (or resume) a training run; returns its `RunSummary` (also written to out_dir/summary.json)."""
    ddp = DataParallel.from_environment()
    device = prepare_device(config, ddp.local_rank)
    autocast = autocast_context(device, config.dtype)
    micro_size, rows = ddp.micro_batch_rows(config.batch_size, config.grad_accum_steps)
    check_init_from_model(config)
    if ddp.main and (note := config.schedule_note()):
        print(note)
    data = OBJECTIVE_CLASSES[config.objective].open_data(config)
    check_init_from_tokenizer(config, data)
    check_step_memory(config, data.vocab_size, micro_size // ddp.world, device)  # before a batch is allocated
    with open_run(config, ddp) as (run, run_id, resuming):
        objective = open_objective(config, data, main=ddp.main)  # in the run: sft saves its tokenizer there
        torch.manual_seed(config.seed)
        raw_model = build_model(config, data.vocab_size, data.eos_id, objective.model_options()).to(device)
        optimizer = build_optimizer(config, raw_model)
        sampler = torch.Generator().manual_seed(config.seed)
        checkpoints = RunCheckpoints(run, run_id, config, raw_model, optimizer, world_size=ddp.world, main=ddp.main,
                                     tokenizer_fingerprint=data.provenance.tokenizer_fingerprint, data=data.provenance,
                                     tokenizer=published_tokenizer(config, data), objective=objective)
        state = checkpoints.resume(sampler) if resuming else TrainState(StepPlan.of(config))
        # the weights stay raw_model's: checkpoints, evaluation and the gradient norm use it (the step loss is
        # compiled beside it: Objective.step_loss)
        model = torch.compile(raw_model) if config.compile else raw_model
        model = ddp.wrap(model, device)
        parameters = list(raw_model.parameters())
        step_batches = StepBatches(objective.micro_batch, sampler, grad_accum_steps=config.grad_accum_steps,
                                   size=micro_size, rows=rows, device=device, seed=config.seed)
        eval_batch_size = config.eval_batch_size or micro_size // ddp.world
        t_start = time.perf_counter()
        model.train()
        with InterruptFlag() as interrupt, RunLog(config, run.path, run_id, state.metrics, main=ddp.main,
                                                  total=state.plan.max_iters, initial=state.iteration) as log:
            budget = TimeBudget(config, first_iter=state.iteration, resuming=resuming, say=log.write)
            while state.iteration < state.plan.max_iters:
                t0 = time.perf_counter()
                budget.start_step()
                lr = budget.lr(state.iteration, state.plan)
                batches = step_batches.take(state.iteration, max_iters=state.plan.max_iters)
                with explain_non_finite_loss(run.checkpoints, state.iteration + 1):
                    result = train_step(model, optimizer, batches, lr=lr, grad_clip=config.grad_clip, autocast=autocast,
                                        no_sync=ddp.no_sync(model), all_reduce=ddp.all_reduce, parameters=parameters,
                                        overlap=step_batches.prefetch_next, step_loss=objective.step_loss())
                step_tokens = count_tokens(batches, ddp.world)
                state.advance(result.loss, step_tokens)
                dt = time.perf_counter() - t0
                own = objective.step_metrics(ddp.all_reduce)
                log.step(step_record(state, lr, result, step_tokens / max(dt, 1e-9), own),
                         last=state.iteration == state.plan.max_iters)
                out_of_time = budget.end_step(state.iteration, state.plan, dt, agree=ddp.agree_max(device))
                last = state.iteration == state.plan.max_iters or out_of_time
                if due(config.eval_every, state.iteration) or last:
                    if ddp.main:
                        with checkpoint_on_failure(checkpoints, state, step_batches, say=log.write):
                            evaluation = objective.evaluate(raw_model, eval_batch_size, device, autocast)
                        log.evaluation({"iter": state.iteration, "tokens": state.tokens, **evaluation})
                        if state.record_evaluation(evaluation, keep_best=config.keep_best):
                            checkpoints.save(state, step_batches.sampler_state, best=True)
                    ddp.barrier()
                stop = ddp.any(interrupt.requested, device)
                if due(config.checkpoint_every, state.iteration) or last or stop:
                    checkpoints.save(state, step_batches.sampler_state)
                    ddp.barrier()
                if stop:
                    log.write(f"interrupted: checkpoint saved at iteration {state.iteration}; continue with --resume")
                if stop or out_of_time:
                    break
        summary = summarize(config, run, run_id, state, data, objective, ddp,
                            interrupted=interrupt.requested, elapsed_s=time.perf_counter() - t_start)
        if ddp.main:
            summary.save()
            if config.plot and state.metrics:
                plot_losses(state.metrics, run.path / LOSS_PLOT)
        ddp.barrier()
        return summary


# ----------------------------------------------------------------------------- setup


def prepare_device(config: TrainConfig, local_rank: int) -> torch.device:
    """The run's device (this rank's GPU under torchrun), with torch's CPU threads and TF32 matmuls set."""
    device = resolve_device(config.device, local_rank)
    set_threads(config.threads)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return device


def check_init_from_model(config: TrainConfig) -> None:
    """`init_from` must hold a language model unless the objective trains a task head: a classifier folder (`tinylm
    finetune`) never saved its language-model head, so a run from it would start from random predictions."""
    from .model_folder import TASK_HEAD_SUFFIXES, check_language_model_folder

    if config.init_from and not OBJECTIVE_CLASSES[config.objective].model_class().__name__.endswith(TASK_HEAD_SUFFIXES):
        check_language_model_folder(config.init_from, f"--init-from needs a language model for objective "
                                                      f"{config.objective}: use the model it was fine-tuned from")


def check_init_from_tokenizer(config: TrainConfig, data: RunData) -> None:
    """`init_from` must hold a model of the data's tokenizer (the fingerprint its config.json records, else that of
    its tokenizer files): token ids of another tokenizer would mean other words to it. Checked before the run
    folder is touched."""
    from ..corpus.token_files import tokenizer_fingerprint
    from ..tokenizer_loading import load_tokenizer

    folder = Path(config.init_from or "")
    if not config.init_from or not (folder / "config.json").is_file() or getattr(data, "extended", False):
        return  # nothing to load (build_model says so), or the data's tokenizer is this model's own plus chat tokens
    try:
        recorded = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("tokenizer_fingerprint")
    except (ValueError, AttributeError):
        return  # not a config.json: from_pretrained names the problem
    if recorded is None and (folder / "tokenizer_config.json").is_file():
        recorded = tokenizer_fingerprint(load_tokenizer(folder))
    expected = data.provenance.tokenizer_fingerprint
    if recorded and expected and recorded != expected:
        raise ValueError(
            f"--init-from {folder} holds a model of another tokenizer than the one that made the data "
            f"({data.provenance.tokenizer_dir}; fingerprint {recorded} vs {expected}): its token ids would mean "
            "other words to it; prepare the data with the model's tokenizer, or train a new model"
        )


@contextlib.contextmanager
def open_run(config: TrainConfig, ddp: DataParallel) -> Iterator[tuple[RunDirectory, str | None, bool]]:
    """(the run's folder, its run id, whether a previous run is resumed), the folder locked by the main process
    until the `with` ends."""
    run = RunDirectory(config.out_dir)
    if ddp.main:
        run.lock()
    run_id, resuming = None, True
    try:
        if ddp.main:
            run_id, resuming = run.start(resume=config.resume, overwrite=config.overwrite)
            remove_orphaned_temp_files(run.checkpoints)
        ddp.barrier()
        if not ddp.main:  # resuming as the main process decided: a run with no checkpoint starts afresh (`start`)
            run_id, resuming = run.run_id(), config.resume and bool(list_checkpoints(run.checkpoints))
        yield run, run_id, resuming
    except BaseException:
        if ddp.main and not resuming:
            run.abandon(run_id)  # a start that failed before its first step leaves the folder as it was
        raise
    finally:
        run.unlock()


def build_model(config: TrainConfig, vocab_size: int, eos_id: int | None,
                options: dict[str, Any] | None = None) -> torch.nn.Module:
    """The objective's model (TinyLMForCausalLM, TinyLMForMaskedLM for mlm, ...) from `init_from`, or a
    preset/overrides sized to the tokenizer and context; `options` are config values the objective decides."""
    from ..modeling import TinyLMConfig

    model_class = OBJECTIVE_CLASSES[config.objective].model_class()
    if config.init_from:
        check_input_folder(config.init_from, "init_from folder")
        model = model_class.from_pretrained(config.init_from, **(options or {}))
    else:
        overrides = {**config.model, **(options or {})}
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
    grows = config.init_from and OBJECTIVE_CLASSES[config.objective].extends_vocabulary
    if model.config.vocab_size < vocab_size and grows:
        model.resize_token_embeddings(vocab_size)  # rows for the tokens added to the model's tokenizer (chat tokens)
    if model.config.vocab_size < vocab_size:
        raise ValueError(f"model vocab_size {model.config.vocab_size} is smaller than the data's {vocab_size}")
    check_context_length(config.context_length, model.config.max_position_embeddings)
    return model


def build_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The run's optimizer: `AdamW` over every weight, or (`optimizer="muon"`) one `MuonWithAdamW` with Muon on the
    block matrices at `muon_lr` and AdamW on the rest at `max_lr`. A group's ``lr_scale`` is its peak rate over
    `max_lr`: `train_step` sets each group's rate to the schedule's times it."""
    adamw = {"lr": config.max_lr, "betas": (config.beta1, config.beta2), "eps": config.eps,
             "weight_decay": config.weight_decay}
    if config.optimizer == "adamw":
        return AdamW(param_groups_for_weight_decay(model, config.weight_decay), **adamw)
    groups = param_groups_for_muon(model, config.weight_decay)
    for group in groups:
        group["lr_scale"] = config.muon_lr / config.max_lr if group["use_muon"] else 1.0
    return MuonWithAdamW(groups, **adamw, muon_lr=config.muon_lr, momentum=config.muon_momentum)


# ----------------------------------------------------------------------------- the steps


@contextlib.contextmanager
def explain_non_finite_loss(checkpoints: Path, iteration: int) -> Iterator[None]:
    """Re-raise a `NonFiniteLossError` of step `iteration` (1-based) with the last good checkpoint and what to try."""
    try:
        yield
    except NonFiniteLossError as err:
        latest = find_latest_checkpoint(checkpoints)
        raise NonFiniteLossError(
            f"{err} at iteration {iteration}: stopped without updating the weights. Last good checkpoint "
            f"(all saved weights are finite): {latest or 'none yet'}. Try a lower max_lr, a grad_clip, "
            "or float32, then --resume."
        ) from None


@contextlib.contextmanager
def checkpoint_on_failure(checkpoints: RunCheckpoints, state: TrainState, step_batches: StepBatches, *,
                          say: Callable[[str], None]) -> Iterator[None]:
    """Save the steps done when what follows a step (an evaluation) fails, then re-raise: a run that dies after
    training leaves a state that `--resume` continues, not a folder with nothing to continue."""
    try:
        yield
    except Exception:
        path = checkpoints.save(state, step_batches.sampler_state)
        say(f"failed after iteration {state.iteration}: its checkpoint is saved ({path}); fix the cause below, then "
            "continue with --resume")
        raise


def step_record(state: TrainState, lr: float, result: StepResult, tok_per_s: float,
                objective_metrics: dict[str, float] | None = None) -> dict[str, Any]:
    """The metrics record of the step just done (with the objective's own numbers of it: DPO's rewards)."""
    return {"iter": state.iteration, "tokens": state.tokens, "loss": state.loss, "lr": lr,
            "grad_norm": result.grad_norm, "tok_per_s": tok_per_s, **(objective_metrics or {})}


def count_tokens(batches: list[tuple[torch.Tensor, ...]], world: int) -> int:
    """Input positions of a step over all ranks (padding included): each rank's micro-batches are alike in shape."""
    return world * sum(batch[0].numel() for batch in batches)


def due(every: int, it: int) -> bool:
    """True at every `every`-th step (never when `every` is 0)."""
    return bool(every) and it % every == 0


def summarize(config: TrainConfig, run: RunDirectory, run_id: str | None, state: TrainState, data: RunData,
              objective: Objective, ddp: DataParallel, *, interrupted: bool, elapsed_s: float) -> RunSummary:
    """The run's `RunSummary`: progress, the last evaluation, where the checkpoints are."""
    best_path = run.checkpoints / BEST_CHECKPOINT
    last_eval = state.last_eval
    return RunSummary(
        run_id=run_id or "", out_dir=str(run.path), iterations=state.iteration, tokens=state.tokens,
        context_length=config.context_length, batch_size=config.batch_size, loss=state.loss,
        val_loss=last_eval.get("val_loss"), val_perplexity=last_eval.get("val_perplexity"),
        val_bpb=last_eval.get("val_bpb"), val_accuracy=last_eval.get("val_accuracy"),
        val_macro_f1=last_eval.get("val_macro_f1"),
        val_metrics={k: v for k, v in last_eval.items()
                     if k.startswith("val_") and k not in SUMMARY_FIELDS and isinstance(v, (int, float))},
        best_val_loss=state.best_val_loss if state.best_val_loss < math.inf else None,
        checkpoint=str(find_latest_checkpoint(run.checkpoints)) if ddp.main else None,
        best_checkpoint=str(best_path) if best_path.is_file() else None,
        interrupted=interrupted, elapsed_s=elapsed_s, world_size=ddp.world,
        data=data.provenance, train_config=config.to_dict(), objective=config.objective, masking=objective.masking,
        task=objective.task, setting_changes=setting_changes(state.metrics), **learning_rate_facts(state.metrics),
    )
