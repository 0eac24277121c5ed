"""Training benchmarks, peers side by side in one run (ratios are what to read on a busy machine).

Part (1), ``bench_optimizers``: one step of our AdamW against ``torch.optim.AdamW`` with
``foreach=True`` and ``fused=True``, on the same parameters (the shapes of a small Llama-style
model), with the optimizers taking turns so machine load hits all of them alike.

    python scripts/bench_train.py            # full sizes
    python scripts/bench_train.py --quick    # a smaller parameter set, fewer steps (seconds)
    python scripts/bench_train.py --threads 1  # on a busy shared CPU: intra-op threads that
                                               # wait on each other dominate small ops otherwise
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinylm_hf.training import AdamW  # noqa: E402


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
    parser.add_argument("--device", default="cpu", help="cpu or cuda (for part 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    results = {"optimizer step (1)": bench_optimizers(quick=args.quick, device=args.device)}
    for title, rows in results.items():
        print_table(title, rows)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
