"""Benchmark TinyLMForCausalLM against transformers' LlamaForCausalLM (attn_implementation="sdpa").

Both models get the same config and the same weights (our state dict loads into Llama as is) and are
measured side by side in one run, alternating rounds so that machine load hits both alike:

- training step tokens/s: forward + backward + clip + our AdamW (median over rounds);
- peak memory of a training step: on CPU the peak-RSS growth (``ru_maxrss``) of a fresh subprocess per
  model over its RSS after building the model; on CUDA ``torch.cuda.max_memory_allocated``;
- ``generate()`` new tokens/s with the KV cache (greedy, fixed length) at batch 1 and batch 8;
- on CUDA also bf16 with ``torch.compile`` and model FLOPs utilisation (MFU) of the training step.

Usage: ``PYTHONPATH=. python scripts/bench_model.py [--quick] [--preset NAME] [--device cuda]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM  # noqa: E402

# dense bf16 peak FLOP/s used for MFU (H100/H200 SXM); override with --peak-tflops
DEFAULT_PEAK_TFLOPS = 989.0


def llama_config_for(config: TinyLMConfig) -> LlamaConfig:
    """The LlamaConfig describing the same network as ``config``."""
    return LlamaConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_attention_heads,
        max_position_embeddings=config.max_position_embeddings,
        rms_norm_eps=config.rms_norm_eps,
        rope_theta=config.rope_theta,
        tie_word_embeddings=config.tie_word_embeddings,
        attention_bias=False,
        mlp_bias=False,
    )


def build_models(
    config: TinyLMConfig, device: str, dtype: torch.dtype, only: str | None = None
) -> dict[str, torch.nn.Module]:
    """Our model and Llama with identical weights (or just the one named ``only``)."""
    torch.manual_seed(0)
    if only == "llama":  # alone (memory child): its own random init, nothing else ever allocated
        llama = LlamaForCausalLM._from_config(llama_config_for(config), attn_implementation="sdpa")
        return {"llama": llama.to(device=device, dtype=dtype)}
    ours = TinyLMForCausalLM(config)
    if only == "tinylm":
        return {"tinylm": ours.to(device=device, dtype=dtype)}
    llama = LlamaForCausalLM._from_config(llama_config_for(config), attn_implementation="sdpa")
    llama.load_state_dict(ours.state_dict(), strict=True)
    return {"tinylm": ours.to(device=device, dtype=dtype), "llama": llama.to(device=device, dtype=dtype)}


def count_flops_per_token(config: TinyLMConfig, seq: int) -> float:
    """Training FLOPs per token: 6 * matmul params + 12 * layers * seq * hidden (attention scores/values)."""
    h, f, layers, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    matmul_params = layers * (4 * h * h + 3 * h * f) + v * h
    return 6 * matmul_params + 12 * layers * seq * h


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def make_train_step(
    model: torch.nn.Module, batch: int, seq: int, vocab: int, device: str, compile_: bool, bf16_autocast: bool = False
):
    """A closure running one training step on a fixed random batch: forward + backward + clip 1.0 + our AdamW.

    TinyLM runs our `train_step` (our cross-entropy on the logits); Llama computes its own loss
    (``labels=``, transformers' cross-entropy). Both use our AdamW, so the row compares the models.
    ``bf16_autocast`` runs the forward under bfloat16 autocast over float32 weights, as `tinylm train` does.
    """
    import contextlib

    from tinylm_hf.training import (AdamW, clip_grad_norm, compiled_cross_entropy, cross_entropy,
                                    param_groups_for_weight_decay, train_step)

    model.train()
    optimizer = AdamW(param_groups_for_weight_decay(model, 0.1), lr=1e-4, weight_decay=0.1)
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1)).to(device)
    forward = torch.compile(model) if compile_ else model
    autocast = (
        torch.autocast(torch.device(device).type, dtype=torch.bfloat16) if bf16_autocast else contextlib.nullcontext()
    )
    if isinstance(model, TinyLMForCausalLM):
        targets = torch.roll(ids, -1, dims=1)
        loss_fn = compiled_cross_entropy() if compile_ else cross_entropy  # as `tinylm train --compile`
        return lambda: train_step(forward, optimizer, [(ids, targets)], lr=1e-4, grad_clip=1.0, autocast=autocast,
                                  loss_fn=loss_fn)

    def step() -> None:
        with autocast:
            loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        clip_grad_norm(list(model.parameters()), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def time_rounds(steps: dict[str, callable], rounds: int, device: str) -> dict[str, list[tuple[float, float]]]:
    """(wall seconds, process CPU seconds) per call of each closure in every round, alternating models."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            sync(device)
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            sync(device)
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return times


def summarise(times: dict[str, list[tuple[float, float]]], work: float) -> tuple[float, float, float, float]:
    """Median wall-clock rates of both models and the medians of the per-round paired speed ratios.

    Returns (our rate, Llama's rate, wall-time ratio, CPU-time ratio), ratios = Llama time / our time.
    On a shared machine the CPU-time ratio is the steadier one: waiting for a core costs wall time only.
    """
    ours, llama = times["tinylm"], times["llama"]
    wall_ratio = statistics.median(l[0] / o[0] for o, l in zip(ours, llama))
    cpu_ratio = statistics.median(l[1] / o[1] for o, l in zip(ours, llama))
    rate = lambda t: work / statistics.median(x[0] for x in t)  # noqa: E731
    return rate(ours), rate(llama), wall_ratio, cpu_ratio


def bench_training(models, config, args, device, compile_=False) -> tuple[float, float, float, float]:
    steps = {
        name: make_train_step(m, args.batch, args.seq, config.vocab_size, device, compile_)
        for name, m in models.items()
    }
    for step in steps.values():  # warm-up (and compilation)
        for _ in range(2 if compile_ else 1):
            step()
    return summarise(time_rounds(steps, args.rounds, device), args.batch * args.seq)


def bench_generate(models, config, args, device, batch: int) -> tuple[float, float, float, float]:
    prompt = torch.randint(0, config.vocab_size, (batch, args.prompt_len), generator=torch.Generator().manual_seed(2))
    prompt = prompt.to(device)
    new = args.new_tokens
    kwargs = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)

    def make(model):
        model.eval()

        def run() -> None:
            with torch.inference_mode():
                model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)

        return run

    runs = {name: make(m) for name, m in models.items()}
    for run in runs.values():
        run()
    return summarise(time_rounds(runs, args.rounds, device), batch * new)


def reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process (Linux >= 4.0; a no-op elsewhere).

    Without it the peak would include the parent's pages at fork time: ru_maxrss survives exec.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def read_peak_rss() -> int:
    """Peak RSS in bytes since the last reset_peak_rss (VmHWM), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def measure_memory_child(name: str, args) -> None:
    """Subprocess body: peak-RSS (CPU) or peak-allocated (CUDA) growth of training steps, printed as JSON (MiB)."""
    import psutil

    config = config_for(args)
    model = build_models(config, args.device, torch.float32, only=name)[name]
    step = make_train_step(model, args.batch, args.seq, config.vocab_size, args.device, compile_=False)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        for _ in range(2):
            step()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        reset_peak_rss()
        base = psutil.Process().memory_info().rss
        for _ in range(2):
            step()
        peak = read_peak_rss() - base
    print(json.dumps({"peak_mib": peak / 2**20}))


def measure_saved_activations(models, config, args, device) -> dict[str, float]:
    """MiB of activations autograd keeps for backward in one training forward (exact, unlike RSS)."""
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    out = {}
    for name, model in models.items():
        model.train()
        storages: dict[int, int] = {}  # data_ptr -> bytes; a storage saved by several ops counts once

        def pack(t: torch.Tensor) -> torch.Tensor:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(input_ids=ids.to(device), labels=ids.to(device)).loss
        del loss
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        out[name] = sum(n for ptr, n in storages.items() if ptr not in params) / 2**20
    return out


def bench_memory(args, repeats: int = 3) -> dict[str, float]:
    """Median over ``repeats`` fresh subprocesses per model, alternating models."""
    runs: dict[str, list[float]] = {"tinylm": [], "llama": []}
    for _ in range(repeats):
        for name, peaks in runs.items():
            peaks.append(run_memory_child(name, args))
    return {name: statistics.median(peaks) for name, peaks in runs.items()}


def run_memory_child(name: str, args) -> float:
    """Peak-memory growth (MiB) of training steps of one model, measured in a fresh subprocess."""
    cmd = [
        sys.executable, __file__, "--memory-child", name, "--preset", args.preset, "--device", args.device,
        "--batch", str(args.batch), "--seq", str(args.seq), "--prompt-len", str(args.prompt_len),
        "--new-tokens", str(args.new_tokens),
    ]  # fmt: skip
    env = {**os.environ, "TQDM_DISABLE": "1"}
    result = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_mib"]


def print_table(rows: list[tuple]) -> None:
    print(f"| {'measure':<46} | {'TinyLM':>9} | {'Llama':>9} | {'ratio (wall)':>12} | {'ratio (CPU)':>11} |")
    print(f"|{'-' * 48}|{'-' * 11}|{'-' * 11}|{'-' * 14}|{'-' * 13}|")
    for label, ours, llama, ratio, *cpu in rows:
        cpu_text = f"{cpu[0]:.2f}" if cpu else "-"
        print(f"| {label:<46} | {ours:>9.1f} | {llama:>9.1f} | {ratio:>12.2f} | {cpu_text:>11} |")
    print("speed ratios: median over rounds of the paired ratio Llama time / TinyLM time (> 1: TinyLM faster),")
    print("  on wall-clock time and on process CPU time; memory ratios: TinyLM / Llama (< 1: TinyLM smaller)")


def config_for(args: argparse.Namespace) -> TinyLMConfig:
    """The preset, with a context long enough for the training and generation shapes."""
    context = max(args.seq, args.prompt_len + args.new_tokens)
    return TinyLMConfig.from_preset(args.preset, max_position_embeddings=context)


def ratio_row(values: dict[str, float]) -> tuple[float, float, float]:
    """(ours, Llama's, ours / Llama's) for a memory row."""
    return values["tinylm"], values["llama"], values["tinylm"] / values["llama"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="cpu-quickstart size, fewer rounds")
    parser.add_argument(
        "--preset", default=None, help="TinyLMConfig preset (default cs336-tinystories, quick: cpu-quickstart)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--seq", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (1 on a busy machine)")
    parser.add_argument("--only-train", action="store_true", help="only the training-step row")
    parser.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS)
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.preset = args.preset or ("cpu-quickstart" if args.quick else "cs336-tinystories")
    args.batch = args.batch or (8 if args.quick else 4)
    args.seq = args.seq or (128 if args.quick else 256)
    args.rounds = args.rounds or (5 if args.quick else 5)
    args.new_tokens = args.new_tokens or (32 if args.quick else 64)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        measure_memory_child(args.memory_child, args)
        return
    torch.manual_seed(0)
    config = config_for(args)
    print(f"# preset={args.preset} device={args.device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"batch={args.batch} seq={args.seq} rounds={args.rounds} (median) load_avg_1min={os.getloadavg()[0]:.1f}")
    models = build_models(config, args.device, torch.float32)
    rows = []
    rows.append(("train step tokens/s (fp32, fwd+bwd+our AdamW)", *bench_training(models, config, args, args.device)))
    if args.only_train:
        print_table(rows)
        return
    memory = bench_memory(args)
    kind = "peak alloc" if args.device.startswith("cuda") else "peak RSS growth"
    rows.append((f"train step {kind} MiB", *ratio_row(memory)))
    saved = measure_saved_activations(models, config, args, args.device)
    rows.append(("activations saved for backward MiB", *ratio_row(saved)))
    for batch in (1, 8):
        gen = bench_generate(models, config, args, args.device, batch)
        rows.append((f"generate new tokens/s, KV cache, batch {batch}", *gen))
    if args.device.startswith("cuda"):
        models = build_models(config, args.device, torch.bfloat16)
        ours, llama, ratio, cpu_ratio = bench_training(models, config, args, args.device, compile_=True)
        rows.append(("train tokens/s (bf16, torch.compile)", ours, llama, ratio, cpu_ratio))
        flops = count_flops_per_token(config, args.seq)
        mfu_ours, mfu_llama = (100 * r * flops / (args.peak_tflops * 1e12) for r in (ours, llama))
        rows.append(("train MFU % (bf16, torch.compile)", mfu_ours, mfu_llama, mfu_ours / mfu_llama))
    print_table(rows)


if __name__ == "__main__":
    main()
