"""Benchmark TinyLMForCausalLM against transformers' LlamaForCausalLM (attn_implementation="sdpa").

Both models get the same config and the same weights (our state dict loads into Llama as is) and are
measured side by side in one run, alternating rounds so that machine load hits both alike:

- training step tokens/s: forward + backward + torch.optim.AdamW step (median over rounds);
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


def build_models(config: TinyLMConfig, device: str, dtype: torch.dtype, only: str | None = None) -> dict[str, torch.nn.Module]:
    """Our model and Llama with identical weights (or just the one named ``only``)."""
    torch.manual_seed(0)
    ours = TinyLMForCausalLM(config)
    if only == "tinylm":
        return {"tinylm": ours.to(device=device, dtype=dtype)}
    llama = LlamaForCausalLM._from_config(llama_config_for(config), attn_implementation="sdpa")
    llama.load_state_dict(ours.state_dict(), strict=True)
    if only == "llama":
        del ours
        return {"llama": llama.to(device=device, dtype=dtype)}
    return {"tinylm": ours.to(device=device, dtype=dtype), "llama": llama.to(device=device, dtype=dtype)}


def count_flops_per_token(config: TinyLMConfig, seq: int) -> float:
    """Training FLOPs per token: 6 * matmul params + 12 * layers * seq * hidden (attention scores/values)."""
    h, f, layers, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    matmul_params = layers * (4 * h * h + 3 * h * f) + v * h
    return 6 * matmul_params + 12 * layers * seq * h


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def make_train_step(model: torch.nn.Module, batch: int, seq: int, vocab: int, device: str, compile_: bool):
    """A closure running one forward + backward + AdamW step on a fixed random batch."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1)).to(device)
    forward = torch.compile(model) if compile_ else model

    def step() -> None:
        loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def time_rounds(steps: dict[str, callable], rounds: int, device: str) -> dict[str, list[float]]:
    """Seconds per call of each closure in every round, alternating models within a round."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            sync(device)
            start = time.perf_counter()
            step()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return times


def summarise(times: dict[str, list[float]], work: float) -> tuple[float, float, float]:
    """(our median rate, Llama's median rate, median of the per-round paired speed ratios ours/Llama)."""
    ratio = statistics.median(t_llama / t_ours for t_ours, t_llama in zip(times["tinylm"], times["llama"]))
    return work / statistics.median(times["tinylm"]), work / statistics.median(times["llama"]), ratio


def bench_training(models, config, args, device, compile_=False) -> tuple[float, float, float]:
    steps = {
        name: make_train_step(m, args.batch, args.seq, config.vocab_size, device, compile_) for name, m in models.items()
    }
    for step in steps.values():  # warm-up (and compilation)
        for _ in range(2 if compile_ else 1):
            step()
    return summarise(time_rounds(steps, args.rounds, device), args.batch * args.seq)


def bench_generate(models, config, args, device, batch: int) -> tuple[float, float, float]:
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


def measure_memory_child(name: str, args) -> None:
    """Subprocess body: peak-RSS (CPU) or peak-allocated (CUDA) growth of training steps, printed as JSON (MiB)."""
    import psutil

    config = TinyLMConfig.from_preset(args.preset, max_position_embeddings=max(args.seq, args.prompt_len + args.new_tokens))
    model = build_models(config, args.device, torch.float32, only=name)[name]
    step = make_train_step(model, args.batch, args.seq, config.vocab_size, args.device, compile_=False)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        for _ in range(2):
            step()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        base = psutil.Process().memory_info().rss
        for _ in range(2):
            step()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base  # ru_maxrss is KiB on Linux
    print(json.dumps({"peak_mib": peak / 2**20}))


def bench_memory(args) -> dict[str, float]:
    out = {}
    for name in ("tinylm", "llama"):
        cmd = [sys.executable, __file__, "--memory-child", name, "--preset", args.preset, "--device", args.device,
               "--batch", str(args.batch), "--seq", str(args.seq)]
        if args.quick:
            cmd.append("--quick")
        result = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "TQDM_DISABLE": "1"})
        out[name] = json.loads(result.stdout.strip().splitlines()[-1])["peak_mib"]
    return out


def print_table(rows: list[tuple[str, float, float, float]]) -> None:
    print(f"| {'measure':<48} | {'TinyLM':>10} | {'Llama':>10} | {'ratio':>7} |")
    print(f"|{'-' * 50}|{'-' * 12}|{'-' * 12}|{'-' * 9}|")
    for label, ours, llama, ratio in rows:
        print(f"| {label:<48} | {ours:>10.1f} | {llama:>10.1f} | {ratio:>7.2f} |")
    print("ratio: speed rows = median over rounds of the paired ratio Llama time / TinyLM time (> 1: TinyLM faster);")
    print("       memory row = TinyLM / Llama (< 1: TinyLM smaller)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="cpu-quickstart size, fewer rounds")
    parser.add_argument("--preset", default=None, help="TinyLMConfig preset (default cs336-tinystories, quick: cpu-quickstart)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--seq", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=None)
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
    if args.memory_child:
        measure_memory_child(args.memory_child, args)
        return
    torch.manual_seed(0)
    config = TinyLMConfig.from_preset(args.preset, max_position_embeddings=max(args.seq, args.prompt_len + args.new_tokens))
    print(f"# preset={args.preset} device={args.device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"batch={args.batch} seq={args.seq} rounds={args.rounds} (median) load_avg_1min={os.getloadavg()[0]:.1f}")
    models = build_models(config, args.device, torch.float32)
    rows = []
    rows.append(("train step tokens/s (fp32, fwd+bwd+AdamW)", *bench_training(models, config, args, args.device)))
    memory = bench_memory(args)
    kind = "peak alloc" if args.device.startswith("cuda") else "peak RSS growth"
    rows.append((f"train step {kind} MiB", memory["tinylm"], memory["llama"], memory["tinylm"] / memory["llama"]))
    for batch in (1, 8):
        rows.append((f"generate new tokens/s, KV cache, batch {batch}", *bench_generate(models, config, args, args.device, batch)))
    if args.device.startswith("cuda"):
        models = build_models(config, args.device, torch.bfloat16)
        ours, llama, ratio = bench_training(models, config, args, args.device, compile_=True)
        rows.append(("train tokens/s (bf16, torch.compile)", ours, llama, ratio))
        flops = count_flops_per_token(config, args.seq)
        mfu_ours, mfu_llama = (100 * r * flops / (args.peak_tflops * 1e12) for r in (ours, llama))
        rows.append(("train MFU % (bf16, torch.compile)", mfu_ours, mfu_llama, mfu_ours / mfu_llama))
    print_table(rows)


if __name__ == "__main__":
    main()
