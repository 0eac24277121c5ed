"""The training loop (`tinylm train`): nanoGPT's order, with exact resume, DDP and a Hugging Face folder at the end.

Each step: learning rate from `cosine_lr` -> micro-batches from `get_batch`'s sampler (gradient
accumulation) -> forward, our `cross_entropy` -> backward -> `clip_grad_norm` -> our AdamW step ->
evaluation every N steps -> checkpoint every N steps. Under `torchrun` every rank draws the same
global batch from the same seeded sampler and keeps its own slice, so N ranks see different rows
and together compute exactly the gradient of a 1-process run with the same global batch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch

from ..fileio import write_text_atomic
from .checkpoint import find_latest_checkpoint, load_training_state, save_training_state
from .config import TrainConfig, add_config_arguments, config_from_args
from .data import batch_from_starts, iter_eval_batches, load_tokens, read_header, sample_starts
from .functional import clip_grad_norm, cross_entropy
from .optimizer import AdamW, param_groups_for_weight_decay
from .schedule import cosine_lr


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the last good checkpoint is left untouched."""


# ----------------------------------------------------------------------------- setup


def _distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank), initialising the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, 0
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0"))


def _resolve_device(name: str, local_rank: int) -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank)
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    return device


def _autocast(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    if dtype == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    else:
        bf16 = dtype == "bfloat16"
    if bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def build_model(config: TrainConfig, vocab_size: int, eos_id: int | None) -> torch.nn.Module:
    """A TinyLMForCausalLM from `init_from`, or a preset/overrides sized to the tokenizer and context."""
    from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM

    if config.init_from:
        if not Path(config.init_from).is_dir():
            raise FileNotFoundError(f"init_from folder {config.init_from} does not exist")
        model = TinyLMForCausalLM.from_pretrained(config.init_from)
    else:
        overrides = dict(config.model)
        overrides.setdefault("vocab_size", vocab_size)
        if eos_id is not None:
            overrides.setdefault("eos_token_id", eos_id)
            overrides.setdefault("bos_token_id", eos_id)
        if config.preset:
            model_config = TinyLMConfig.from_preset(config.preset, **overrides)
        else:
            model_config = TinyLMConfig(**overrides)
        if model_config.max_position_embeddings < config.context_length:
            model_config.max_position_embeddings = config.context_length
        model = TinyLMForCausalLM(model_config)
    if model.config.vocab_size < vocab_size:
        raise ValueError(f"model vocab_size {model.config.vocab_size} is smaller than the data's {vocab_size}")
    if model.config.max_position_embeddings < config.context_length:
        raise ValueError(
            f"context_length {config.context_length} exceeds max_position_embeddings "
            f"{model.config.max_position_embeddings} of {config.init_from}"
        )
    return model


# ----------------------------------------------------------------------------- evaluation


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    data: Any,
    batch_size: int,
    context_length: int,
    device: torch.device,
    max_batches: int | None = None,
    bytes_per_token: float | None = None,
    autocast: contextlib.AbstractContextManager | None = None,
) -> dict[str, float]:
    """Mean loss over (the first `max_batches` of) the sequential validation batches, with perplexity and bits/byte."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i, (x, y) in enumerate(iter_eval_batches(data, batch_size, context_length)):
        if max_batches is not None and i >= max_batches:
            break
        x, y = x.to(device), y.to(device)
        with autocast or contextlib.nullcontext():
            logits = model(input_ids=x).logits
        total += float(cross_entropy(logits, y, reduction="sum"))
        count += y.numel()
    model.train(was_training)
    loss = total / max(count, 1)
    out = {"val_loss": loss, "val_perplexity": math.exp(min(loss, 700.0))}
    if bytes_per_token:
        out["val_bpb"] = loss / math.log(2) / bytes_per_token
    return out


# ----------------------------------------------------------------------------- outputs


def _append_jsonl(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")


def _rewrite_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in records))


def plot_losses(metrics: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Training and validation loss against tokens seen, as a PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(m["tokens"], m["loss"]) for m in metrics if "loss" in m]
    val = [(m["tokens"], m["val_loss"]) for m in metrics if "val_loss" in m]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if train:
        ax.plot(*zip(*train), label="train", linewidth=1)
    if val:
        ax.plot(*zip(*val), "o-", label="validation")
    ax.set_xlabel("tokens")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title("TinyLM training")
    ax.grid(alpha=0.3)
    ax.legend()
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def _model_card(
    folder: Path, config: TrainConfig, summary: dict[str, Any], model: torch.nn.Module, source: Any
) -> str:
    try:  # the ecosystem's filler, when present, renders repo-top model_card.md
        from tinylm_hf.hub import render_model_card  # type: ignore[attr-defined]

        card = render_model_card(folder, model=model, training=summary, train_config=config.to_dict(),
                                 data_source=source)
        return str(card)
    except (ImportError, OSError, KeyError, TypeError, ValueError):
        pass
    n_params = sum(p.numel() for p in model.parameters())
    val = summary.get("final_val_loss")
    val_text = f"{val:.4f}" if isinstance(val, float) else "n/a"
    return (
        "---\nlibrary_name: transformers\ntags:\n- tinylm\n- causal-lm\n- from-scratch\n---\n\n"
        "# TinyLM\n\nA small Llama-style language model trained from scratch with "
        "[tinylm_hf](https://github.com/) (hand-written BPE tokenizer, model, AdamW and training loop).\n\n"
        "## Training\n\n"
        f"- training data: `{json.dumps(source)}`\n"
        f"- parameters: {n_params:,}\n"
        f"- steps: {summary.get('iterations')}\n"
        f"- tokens seen: {summary.get('tokens'):,}\n"
        f"- batch size x context: {config.batch_size} x {config.context_length}\n"
        f"- learning rate: {config.max_lr} -> {config.min_lr} (cosine, {config.warmup_iters} warm-up steps)\n"
        f"- final validation loss: {val_text}\n\n"
        "## Use\n\n```python\nimport tinylm_hf  # registers TinyLM with the Auto classes\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(PATH)\nmodel = AutoModelForCausalLM.from_pretrained(PATH)\n```\n"
    )


def export_hf(
    model: torch.nn.Module, tokenizer_dir: str | None, out: Path, config: TrainConfig, summary: dict[str, Any],
    source: Any,
) -> Path:
    """Write a Hugging Face folder: model + tokenizer `save_pretrained`, generation_config.json, README.md."""
    from transformers import AutoTokenizer, GenerationConfig

    import tinylm_hf  # noqa: F401  (registers the tokenizer class with AutoTokenizer)

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    eos = model.config.eos_token_id
    if tokenizer_dir and Path(tokenizer_dir).is_dir():
        tok = AutoTokenizer.from_pretrained(tokenizer_dir)
        tok.save_pretrained(out)
        eos = tok.eos_token_id if tok.eos_token_id is not None else eos
    GenerationConfig(
        bos_token_id=model.config.bos_token_id, eos_token_id=eos, pad_token_id=eos,
        do_sample=True, temperature=0.8, top_k=50, max_new_tokens=200,
    ).save_pretrained(out)
    write_text_atomic(out / "README.md", _model_card(out, config, summary, model, source))
    return out


# ----------------------------------------------------------------------------- the loop


def train(config: TrainConfig) -> dict[str, Any]:
    """Run (or resume) a training run; returns a summary (iterations, tokens, final losses, paths)."""
    rank, world, local_rank = _distributed()
    master = rank == 0
    device = _resolve_device(config.device, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    autocast = _autocast(device, config.dtype)

    per_step = config.grad_accum_steps * world
    if config.batch_size % per_step:
        raise ValueError(
            f"batch_size {config.batch_size} must be divisible by grad_accum_steps * world_size = {per_step}"
        )
    micro_global = config.batch_size // config.grad_accum_steps  # rows per micro-step over all ranks
    micro = micro_global // world  # rows per micro-step on this rank

    data_dir = Path(config.data_dir)
    train_data = load_tokens(data_dir / "train.bin")
    val_data = load_tokens(data_dir / "val.bin")
    train_header, val_header = read_header(data_dir / "train.bin"), read_header(data_dir / "val.bin")
    bytes_per_token = val_header.get("bytes", 0) / max(val_header["count"], 1) or None
    tokenizer_dir = config.tokenizer_dir or train_header.get("tokenizer")

    torch.manual_seed(config.seed)
    model = build_model(config, int(train_header.get("vocab_size", 0)), train_header.get("eos_id"))
    model.to(device)
    optimizer = AdamW(
        param_groups_for_weight_decay(model, config.weight_decay),
        lr=config.max_lr, betas=(config.beta1, config.beta2), eps=config.eps, weight_decay=config.weight_decay,
    )
    sampler = torch.Generator().manual_seed(config.seed)

    out_dir = Path(config.out_dir)
    ckpt_dir = out_dir / "checkpoints"
    metrics_path = out_dir / "metrics.jsonl"
    if master:
        out_dir.mkdir(parents=True, exist_ok=True)
    metrics: list[dict[str, Any]] = []
    start_iter, tokens_seen = 0, 0
    if config.resume:
        latest = find_latest_checkpoint(ckpt_dir)
        if latest is None:
            if master:
                print(f"no checkpoint in {ckpt_dir}: starting from scratch")
        else:
            state = load_training_state(latest, model=model, optimizer=optimizer, generator=sampler)
            start_iter = int(state["iteration"])
            metrics = [m for m in state["metrics"] if m.get("iter", 0) <= start_iter]
            tokens_seen = int(state["extra"].get("tokens", start_iter * config.batch_size * config.context_length))
            if master:
                print(f"resumed from {latest} at iteration {start_iter}")
    if master:
        _rewrite_jsonl(metrics_path, metrics)

    raw_model = model
    if config.compile:
        model = torch.compile(model)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    interrupted = {"flag": False}

    def on_sigint(signum: int, frame: Any) -> None:
        interrupted["flag"] = True

    previous_handler = None
    with contextlib.suppress(ValueError):  # not in the main thread: leave SIGINT alone
        previous_handler = signal.signal(signal.SIGINT, on_sigint)

    def save(iteration: int) -> Path | None:
        if not master:
            return None
        return save_training_state(
            ckpt_dir, model=raw_model, optimizer=optimizer, iteration=iteration, generator=sampler,
            train_config=config.to_dict(), model_config=raw_model.config.to_dict(), metrics=metrics,
            extra={"tokens": tokens_seen, "world_size": world}, keep_last=config.keep_last,
        )

    def barrier() -> None:
        if world > 1:
            torch.distributed.barrier()

    from tqdm.auto import tqdm

    bar = tqdm(total=config.max_iters, initial=start_iter, desc="train", unit="step",
               disable=not (master and config.progress), dynamic_ncols=True)
    eval_bs = config.eval_batch_size or micro
    last_eval: dict[str, float] = {}
    last_loss = float("nan")
    t_start = time.perf_counter()
    it = start_iter
    model.train()
    try:
        while it < config.max_iters:
            t0 = time.perf_counter()
            lr = cosine_lr(it, config.max_lr, config.min_lr, config.warmup_iters, config.cycle_iters)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss_sum = torch.zeros((), device=device)
            for m in range(config.grad_accum_steps):
                starts = sample_starts(len(train_data), micro_global, config.context_length, sampler)
                x, y = batch_from_starts(train_data, starts[rank * micro : (rank + 1) * micro],
                                         config.context_length, device)
                sync = contextlib.nullcontext()
                if world > 1 and m < config.grad_accum_steps - 1:
                    sync = model.no_sync()
                with sync:
                    with autocast:
                        logits = model(input_ids=x).logits
                    loss = cross_entropy(logits, y) / config.grad_accum_steps
                    loss.backward()
                loss_sum += loss.detach()
            if world > 1:
                torch.distributed.all_reduce(loss_sum)
                loss_sum /= world
            step_loss = float(loss_sum)
            if not math.isfinite(step_loss):
                latest = find_latest_checkpoint(ckpt_dir)
                raise NonFiniteLossError(
                    f"loss is {step_loss} at iteration {it + 1}: stopping without updating the weights. "
                    f"Last good checkpoint: {latest or 'none'}. Try a lower max_lr, a grad_clip, or float32."
                )
            grad_norm = None
            if config.grad_clip:
                grad_norm = float(clip_grad_norm(raw_model.parameters(), config.grad_clip))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            it += 1
            tokens_seen += config.batch_size * config.context_length
            last_loss = step_loss
            dt = time.perf_counter() - t0
            tok_s = config.batch_size * config.context_length / max(dt, 1e-9)
            if it % config.log_every == 0 or it == config.max_iters:
                record = {"iter": it, "tokens": tokens_seen, "loss": step_loss, "lr": lr, "tok_per_s": tok_s}
                if grad_norm is not None:
                    record["grad_norm"] = grad_norm
                metrics.append(record)
                if master:
                    _append_jsonl(metrics_path, record)
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}")

            last = it == config.max_iters
            if (config.eval_every and it % config.eval_every == 0) or last:
                if master:
                    last_eval = evaluate(raw_model, val_data, eval_bs, config.context_length, device,
                                         config.eval_iters, bytes_per_token, autocast)
                    record = {"iter": it, "tokens": tokens_seen, **last_eval}
                    metrics.append(record)
                    _append_jsonl(metrics_path, record)
                    bar.write(f"iter {it}: val loss {last_eval['val_loss']:.4f}, "
                              f"ppl {last_eval['val_perplexity']:.2f}" +
                              (f", bpb {last_eval['val_bpb']:.3f}" if "val_bpb" in last_eval else ""))
                barrier()
            stop = interrupted["flag"]
            if world > 1:
                flag = torch.tensor([1.0 if stop else 0.0], device=device)
                torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
                stop = bool(flag.item())
            if (config.checkpoint_every and it % config.checkpoint_every == 0) or last or stop:
                save(it)
                barrier()
            if config.hf_export_every and it % config.hf_export_every == 0 and not last and master:
                export_hf(raw_model, tokenizer_dir, out_dir / "hf", config,
                          {"iterations": it, "tokens": tokens_seen, **_final(last_eval)}, train_header.get("source"))
            if stop:
                if master:
                    bar.write(f"interrupted: checkpoint saved at iteration {it}; continue with --resume")
                break
    finally:
        bar.close()
        if previous_handler is not None:
            signal.signal(signal.SIGINT, previous_handler)

    summary = {
        "iterations": it,
        "tokens": tokens_seen,
        "final_train_loss": last_loss,
        **_final(last_eval),
        "interrupted": interrupted["flag"],
        "elapsed_s": time.perf_counter() - t_start,
        "out_dir": str(out_dir),
        "world_size": world,
    }
    if master and not interrupted["flag"] and it >= config.max_iters:
        summary["hf_dir"] = str(export_hf(raw_model, tokenizer_dir, out_dir / "hf", config, summary,
                                          train_header.get("source")))
    if master and config.plot and metrics:
        plot_losses(metrics, out_dir / "loss.png")
    if world > 1:
        torch.distributed.barrier()
    return summary


def _final(last_eval: dict[str, float]) -> dict[str, float]:
    return {("final_" + k if k == "val_loss" else k): v for k, v in last_eval.items()}


# ----------------------------------------------------------------------------- CLI


def add_train_parser(subparsers: Any) -> None:
    """`tinylm train --config FILE.yaml [--flag value ...]`."""
    p = subparsers.add_parser("train", help="train a TinyLM model on data made by `tinylm prepare`")
    p.add_argument("--config", default=None, help="YAML or JSON file of TrainConfig fields")
    add_config_arguments(p)
    p.set_defaults(func=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    config = config_from_args(args, args.config)
    summary = train(config)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(summary, indent=2))
    return 0
