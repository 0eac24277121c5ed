"""Training benchmarks, peers side by side in one run (ratios are what to read on a busy machine).

Part (1), ``bench_optimizers``: one step of our AdamW against ``torch.optim.AdamW`` with
``foreach=True`` and ``fused=True``, on the same parameters (the shapes of a small Llama-style
model), with the optimizers taking turns so machine load hits all of them alike.

Part (2), ``bench_time_to_loss``: wall time to reach a common validation loss, our
``tinylm_hf.training.train`` against ``transformers.Trainer`` training a ``LlamaForCausalLM`` of the
same shape from the same initial weights, on the same batches (the bundled corpus tokenized once
with a vocab-1024 BPE), with the same hyper-parameters (AdamW, warm-up + cosine to min_lr, weight
decay, clip 1.0) and the same number of steps. Both sides are evaluated every few steps by the
same function on the same validation tokens; evaluation time is left out of the clocks. The
target is the worse of the two final losses; the sides take turns (twice each without --quick)
and the faster repeat counts; the ratio ours/Trainer should be <= 1.

Part (3), ``bench_presets``: training tokens/s (forward + backward + clip + our AdamW) and the
peak-RSS growth of a fresh subprocess per ``TinyLMConfig`` preset, at a small batch.

Part (4), ``bench_gpu`` (with ``--device cuda``): tokens/s, MFU and peak GPU memory of a training step,
ours beside transformers' Llama of the same shape, bf16 autocast, with and without ``torch.compile``.

    python scripts/bench_train.py            # all parts, full sizes
    python scripts/bench_train.py --quick    # smaller sizes, fewer steps
    python scripts/bench_train.py --part 2   # only one part (1 to 4; repeatable)
    python scripts/bench_train.py --device cuda --part 4   # the GPU rows
    python scripts/bench_train.py --threads 1  # on a busy shared CPU: intra-op threads that
                                               # wait on each other dominate small ops otherwise
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinylm_hf.training import AdamW, param_groups_for_weight_decay, train_step  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import read_peak_rss, reset_peak_rss  # noqa: E402  (one peak-RSS probe for both scripts)
PRESET_NAMES = ("cpu-quickstart", "cs336-tinystories", "gpt2-small")


def model_like_shapes(vocab: int, dim: int, hidden: int, layers: int) -> list[tuple[int, ...]]:
    """Parameter shapes of a Llama-style decoder with a tied head (embedding, attention, MLP)."""
    shapes: list[tuple[int, ...]] = [(vocab, dim)]
    for _ in range(layers):
        shapes += [(dim,), (dim, dim), (dim, dim), (dim, dim), (dim, dim)]  # norm, q, k, v, o
        shapes += [(dim,), (hidden, dim), (hidden, dim), (dim, hidden)]  # norm, gate, up, down
    shapes.append((dim,))  # final norm
    return shapes


def make_params(
    shapes: list[tuple[int, ...]], device: str = "cpu", seed: int = 0
) -> list[torch.nn.Parameter]:
    """Parameters with fixed random gradients, so a step costs exactly one optimizer update."""
    gen = torch.Generator().manual_seed(seed)
    params = []
    for shape in shapes:
        p = torch.nn.Parameter((torch.randn(shape, generator=gen) * 0.02).to(device))
        p.grad = (torch.randn(shape, generator=gen) * 1e-3).to(device)
        params.append(p)
    return params


def time_in_turns(
    steps: dict[str, Callable[[], None]], rounds: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds per call of each function, calling them in turn round after round."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return times


def bench_optimizers(quick: bool = False, device: str = "cpu") -> list[dict]:
    """Part (1): ms per AdamW step, ours vs torch foreach vs torch fused, same parameter shapes."""
    if quick:
        shapes, rounds, warmup = model_like_shapes(4096, 256, 688, 4), 10, 2
    else:
        shapes, rounds, warmup = model_like_shapes(10000, 512, 1376, 4), 30, 3
    hyper = {"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    optimizers = {
        "ours": AdamW(make_params(shapes, device), **hyper),
        "torch foreach": torch.optim.AdamW(make_params(shapes, device), foreach=True, **hyper),
        "torch fused": torch.optim.AdamW(make_params(shapes, device), fused=True, **hyper),
    }
    times = time_in_turns({n: o.step for n, o in optimizers.items()}, rounds, warmup)
    n_params = sum(torch.Size(s).numel() for s in shapes)
    ours = statistics.median(times["ours"])
    rows = []
    for name, samples in times.items():
        median = statistics.median(samples)
        rows.append(
            {
                "optimizer": name,
                "device": device,
                "params_M": round(n_params / 1e6, 2),
                "tensors": len(shapes),
                "ms_per_step": round(median * 1e3, 2),
                "ours_over_this": round(ours / median, 3),
            }
        )
    return rows


# ----------------------------------------------------------------------------- part (2)


def prepare_corpus(work: Path, vocab_size: int = 1024) -> Path:
    """Train a small BPE on the bundled TinyStories sample and tokenize it; returns the data folder."""
    from tinylm_hf.corpus import prepare_dataset
    from tinylm_hf.tokenizer_training import train_tokenizer

    train_file = REPO / "tinylm_hf" / "data" / "tinystories_train_small.txt"
    val_file = REPO / "tinylm_hf" / "data" / "tinystories_valid_small.txt"
    tok_dir = work / "tokenizer"
    train_tokenizer([train_file], vocab_size, progress=False).save_pretrained(tok_dir)
    prepare_dataset(tok_dir, work / "data", input_files=[train_file], val_files=[val_file], num_workers=1)
    return work / "data"


def first_time_at(curve: list[tuple[float, float]], target: float) -> float:
    """Seconds of the first (seconds, loss) evaluation at or below ``target`` (inf if none)."""
    return next((t for t, loss in curve if loss <= target), float("inf"))


def run_ours(config, eval_batches: int, eval_bs: int) -> list[tuple[float, float]]:
    """Our `train` with every evaluation recorded as (training seconds so far, val loss)."""
    import tinylm_hf.training.objectives.causal_lm as objectives
    from tinylm_hf.training import train

    real_evaluate = objectives.evaluate
    curve: list[tuple[float, float]] = []
    paused = [0.0]

    def timed_evaluate(model, data, batch_size, context_length, device, *args, **kwargs):
        elapsed = time.perf_counter() - start - paused[0]
        t0 = time.perf_counter()
        out = real_evaluate(model, data, eval_bs, context_length, device, eval_batches)
        paused[0] += time.perf_counter() - t0
        curve.append((elapsed, out["val_loss"]))
        return out

    objectives.evaluate = timed_evaluate
    try:
        start = time.perf_counter()
        train(config)
    finally:
        objectives.evaluate = real_evaluate
    return curve


def run_trainer(config, data_dir: Path, eval_batches: int, eval_bs: int) -> list[tuple[float, float]]:
    """`transformers.Trainer` on a LlamaForCausalLM with our initial weights, on our loop's batches."""
    from torch.utils.data import Dataset, SequentialSampler
    from transformers import LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

    from tinylm_hf.corpus import load_tokens, read_header
    from tinylm_hf.publish.export_llama import llama_config_from
    from tinylm_hf.training.batches import sample_starts
    from tinylm_hf.training.loop import build_model
    from tinylm_hf.training.validation import evaluate

    train_data, val_data = load_tokens(data_dir / "train.bin"), load_tokens(data_dir / "val.bin")
    header = read_header(data_dir / "train.bin")
    torch.manual_seed(config.seed)  # as train() does: the same initial weights
    ours = build_model(config, int(header["vocab_size"]), header.get("eos_id"))
    llama = LlamaForCausalLM(llama_config_from(ours.config.to_dict()))
    state = {k: v for k, v in ours.state_dict().items() if not k.endswith("rotary_emb.inv_freq")}
    llama.load_state_dict(state, strict=True)
    del ours

    # the windows our loop samples, in the same order (same generator, same seed)
    sampler = torch.Generator().manual_seed(config.seed)
    starts = torch.cat([sample_starts(len(train_data), config.batch_size, config.context_length, sampler)
                        for _ in range(config.max_iters)]).tolist()
    ctx = config.context_length

    class Windows(Dataset):
        def __len__(self) -> int:
            return len(starts)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            x = torch.from_numpy(train_data[starts[i] : starts[i] + ctx].astype("int64"))
            # Llama shifts labels itself: ctx - 1 of our ctx targets, the same tokens
            return {"input_ids": x, "labels": x}

    class InOrderTrainer(Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return SequentialSampler(self.train_dataset)

    curve: list[tuple[float, float]] = []
    paused = [0.0]

    class EvalEvery(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % config.eval_every == 0 or state.global_step == config.max_iters:
                elapsed = time.perf_counter() - start - paused[0]
                t0 = time.perf_counter()
                out = evaluate(model, val_data, eval_bs, ctx, torch.device("cpu"), eval_batches)
                paused[0] += time.perf_counter() - t0
                curve.append((elapsed, out["val_loss"]))

    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp, report_to=[], use_cpu=True, save_strategy="no", eval_strategy="no",
            logging_steps=config.log_every, disable_tqdm=True, max_steps=config.max_iters,
            per_device_train_batch_size=config.batch_size, learning_rate=config.max_lr,
            lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr": config.min_lr},
            warmup_steps=config.warmup_iters, weight_decay=config.weight_decay, adam_beta1=config.beta1,
            adam_beta2=config.beta2, adam_epsilon=config.eps, max_grad_norm=config.grad_clip,
            optim="adamw_torch", dataloader_num_workers=0, seed=config.seed,
        )  # fmt: skip
        trainer = InOrderTrainer(model=llama, args=args, train_dataset=Windows(), callbacks=[EvalEvery()])
        start = time.perf_counter()
        trainer.train()
    return curve


def bench_time_to_loss(quick: bool = False) -> list[dict]:
    """Part (2): seconds to reach a common validation loss, our `train` vs `transformers.Trainer`."""
    from tinylm_hf.training import TrainConfig

    steps, eval_every, repeats = (80, 10, 1) if quick else (240, 20, 2)
    eval_batches, eval_bs = (4, 32) if quick else (8, 64)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data_dir = prepare_corpus(work)
        config = TrainConfig(
            data_dir=str(data_dir), out_dir=str(work / "run"),
            model={"hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "max_position_embeddings": 64},
            batch_size=32, context_length=64, max_iters=steps, max_lr=3e-3, min_lr=3e-4,
            warmup_iters=steps // 10, weight_decay=0.1, grad_clip=1.0, eval_every=eval_every,
            checkpoint_every=0, log_every=10, device="cpu", dtype="float32", progress=False, plot=False,
            sample_tokens=0, overwrite=True, threads=torch.get_num_threads(),
        )  # fmt: skip
        # the sides take turns, twice each: the faster repeat is the one least hit by machine load
        runs: dict[str, list[list[tuple[float, float]]]] = {"ours (tinylm_hf train)": [],
                                                             "transformers Trainer (Llama)": []}
        for _ in range(repeats):
            runs["ours (tinylm_hf train)"].append(run_ours(config, eval_batches, eval_bs))
            runs["transformers Trainer (Llama)"].append(run_trainer(config, data_dir, eval_batches, eval_bs))
    target = max(curve[-1][1] for curves in runs.values() for curve in curves)
    reach = {name: min(first_time_at(c, target) for c in curves) for name, curves in runs.items()}
    ours_name = next(iter(runs))
    rows = []
    for name, curves in runs.items():
        rows.append(
            {
                "trainer": name,
                "steps": steps,
                "final_val_loss": round(curves[0][-1][1], 4),
                "target_loss": round(target, 4),
                "s_to_target": round(reach[name], 2),
                "s_total": round(min(c[-1][0] for c in curves), 2),
                "ours_over_this": round(reach[ours_name] / reach[name], 3),
            }
        )
    return rows


# ----------------------------------------------------------------------------- part (3)


def preset_child(preset: str, batch: int, seq: int, steps: int) -> None:
    """Subprocess body: tokens/s and peak-RSS growth of our training step on one preset, as JSON."""
    import psutil

    from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM

    torch.manual_seed(0)
    config = TinyLMConfig.from_preset(preset)
    model = TinyLMForCausalLM(config)
    model.train()
    optimizer = AdamW(param_groups_for_weight_decay(model, 0.1), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, config.vocab_size, (batch, seq), generator=gen)
    y = torch.randint(0, config.vocab_size, (batch, seq), generator=gen)

    def step() -> None:
        train_step(model, optimizer, [(x, y)], lr=1e-3, grad_clip=1.0)

    reset_peak_rss()
    base = psutil.Process().memory_info().rss
    step()  # the first step also allocates the optimizer state: counted in the peak, not timed
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    peak = read_peak_rss() - base
    n_params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"params": n_params, "s_per_step": statistics.median(times), "peak_mib": peak / 2**20}))


def bench_presets(quick: bool = False, presets: tuple[str, ...] = PRESET_NAMES) -> list[dict]:
    """Part (3): tokens/s and peak-RSS growth of our training step per preset (one subprocess each)."""
    batch, seq, steps = (2, 128, 2) if quick else (4, 256, 3)
    env = {**os.environ, "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    rows = []
    for preset in presets:
        cmd = [sys.executable, __file__, "--preset-child", preset, "--batch", str(batch), "--seq", str(seq),
               "--steps", str(steps)]  # fmt: skip
        if torch.get_num_threads() != os.cpu_count():
            cmd += ["--threads", str(torch.get_num_threads())]
        result = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        out = json.loads(result.stdout.strip().splitlines()[-1])
        rows.append(
            {
                "preset": preset,
                "params_M": round(out["params"] / 1e6, 2),
                "batch x seq": f"{batch} x {seq}",
                "ms_per_step": round(out["s_per_step"] * 1e3, 1),
                "tokens_per_s": round(batch * seq / out["s_per_step"]),
                "peak_rss_growth_MiB": round(out["peak_mib"], 1),
            }
        )
    return rows


# ----------------------------------------------------------------------------- part (4)

# (preset, batch, seq, vocab_size override, compile modes); 50304 = 50257 padded to a multiple of 64 (nanoGPT's
# choice): with 50257 rows the vocabulary matmuls fall back to slow unaligned GEMM kernels
GPU_CASES = [
    ("gpt2-small", 16, 1024, None, (True, False)),
    ("gpt2-small", 32, 1024, 50304, (True,)),
    ("gpt2-small", 64, 1024, 50304, (True,)),
    ("cs336-tinystories", 128, 256, None, (True, False)),
]


def bench_gpu(presets: tuple[str, ...], rounds: int, peak_tflops: float) -> list[dict]:
    """Part (4): training tokens/s, MFU and peak memory on the GPU, ours vs transformers' Llama (sdpa).

    Float32 weights with bfloat16 autocast, as `tinylm train --device cuda` runs (default dtype auto),
    with and without `torch.compile` (ours then also compiles its loss, as `--compile` does); the same
    weights, batch and our AdamW on both sides, steps taken in turns. MFU = training FLOPs per token x
    tokens/s / `peak_tflops` (the GPU's dense bf16 peak).
    """
    from bench_model import build_models, count_flops_per_token, make_train_step, summarise, time_rounds

    from tinylm_hf.modeling import TinyLMConfig

    torch.backends.cuda.matmul.allow_tf32 = True  # as the training loop sets it
    rows = []
    for preset, batch, seq, vocab, compile_modes in GPU_CASES:
        if preset not in presets:
            continue
        overrides = {"max_position_embeddings": seq, **({"vocab_size": vocab} if vocab else {})}
        config = TinyLMConfig.from_preset(preset, **overrides)
        flops = count_flops_per_token(config, seq)
        for compile_ in compile_modes:
            torch._dynamo.reset()
            models = build_models(config, "cuda", torch.float32)
            steps = {name: make_train_step(m, batch, seq, config.vocab_size, "cuda", compile_, bf16_autocast=True)
                     for name, m in models.items()}  # fmt: skip
            peak = {}
            for name, step in steps.items():  # warm-up (compilation) and peak memory, one model at a time
                torch.cuda.reset_peak_memory_stats()
                for _ in range(3 if compile_ else 2):
                    step()
                torch.cuda.synchronize()
                peak[name] = torch.cuda.max_memory_allocated() / 2**30
            ours, llama, ratio, _ = summarise(time_rounds(steps, rounds, "cuda"), batch * seq)
            for name, rate in (("ours (TinyLMForCausalLM)", ours), ("transformers Llama (sdpa)", llama)):
                rows.append({
                    "preset": preset, "vocab": config.vocab_size, "batch x seq": f"{batch} x {seq}",
                    "compile": compile_, "model": name, "tokens_per_s": round(rate),
                    "MFU_%": round(100 * rate * flops / (peak_tflops * 1e12), 1),
                    "peak_GiB": round(peak["tinylm" if name.startswith("ours") else "llama"], 2),
                    "llama_time_over_ours": round(ratio, 3),
                })  # fmt: skip
            del models, steps
            torch.cuda.empty_cache()
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    """A GitHub-markdown table of ``rows`` (dicts with the same keys)."""
    print(f"\n### {title}\n")
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "|".join("---" for _ in keys) + "|")
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda: part 1 on the GPU, and part 4)")
    gpu_presets = sorted({case[0] for case in GPU_CASES})
    parser.add_argument("--gpu-presets", nargs="+", default=gpu_presets, choices=gpu_presets,
                        help="part 4: presets to measure on the GPU")
    parser.add_argument("--rounds", type=int, default=10, help="part 4: timed steps per model")
    parser.add_argument("--peak-tflops", type=float, default=989.0,
                        help="part 4: the GPU's dense bf16 peak for MFU (989: H100/H200 SXM)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--part", type=int, action="append", choices=(1, 2, 3, 4),
                        help="run only these parts (4 needs --device cuda)")
    parser.add_argument("--preset-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, default=256, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.preset_child:
        preset_child(args.preset_child, args.batch, args.seq, args.steps)
        return {}
    parts = set(args.part or ((1, 2, 3, 4) if args.device.startswith("cuda") else (1, 2, 3)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    results: dict[str, list[dict]] = {}
    if 1 in parts:
        results["optimizer step (1)"] = bench_optimizers(quick=args.quick, device=args.device)
    if 2 in parts:
        results["time to a common validation loss (2)"] = bench_time_to_loss(quick=args.quick)
    if 3 in parts:
        results["training step per preset, CPU float32 (3)"] = bench_presets(quick=args.quick)
    if 4 in parts:
        if not torch.cuda.is_available():
            parser.error("part 4 needs a CUDA GPU (--device cuda)")
        results[f"training step on {torch.cuda.get_device_name()}, bf16 autocast (4)"] = bench_gpu(
            tuple(args.gpu_presets), args.rounds, args.peak_tflops)
    for title, rows in results.items():
        print_table(title, rows)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
