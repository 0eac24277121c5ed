"""Encode throughput of `BPETokenizer` vs tiktoken with GPT-2's files, as one table of paired ratios.

    PYTHONPATH=. python scripts/bench_encode.py [--data ../shared/data] [--repeats 3] [--workers 2]

Every row runs on the same text, interleaved round-robin over `--repeats` rounds (the best round
counts), so machine load hits all rows alike. "cold" rows build a new `BPETokenizer` per run
(construction not timed), so no pre-token cache is reused. Ratios are against tiktoken's
single-thread `encode_ordinary`. Other encoders (e.g. the Hugging Face wrappers) join the table
through `bench_encoders(text, extra={"name": callable})`.
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tiktoken

try:
    from tinylm_hf.tokenization.bpe import BPETokenizer
    from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tinylm_hf.tokenization.bpe import BPETokenizer
    from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN

EOT = "<|endoftext|>"
BASELINE = "tiktoken encode_ordinary"
_GPT2: BPETokenizer | None = None
_DATA: Path | None = None


def load_gpt2(data: Path) -> BPETokenizer:
    """GPT-2's tokenizer from `gpt2_vocab.json` + `gpt2_merges.txt` in `data`."""
    return BPETokenizer.from_files(data / "gpt2_vocab.json", data / "gpt2_merges.txt", [EOT])


def make_tiktoken(tok: BPETokenizer) -> tiktoken.Encoding:
    """tiktoken's GPT-2 encoding built from the same ranks (no network)."""
    ranks = {token: i for i, token in tok.vocab.items() if i != tok.special_ids[EOT]}
    return tiktoken.Encoding("gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOT: tok.special_ids[EOT]})


def default_encoders(text: str, tok: BPETokenizer, workers: int) -> dict[str, Callable[[], object]]:
    """Zero-argument callables that each encode `text` once; a cold one builds its tokenizer first."""
    enc = make_tiktoken(tok)
    spans = tok._split_for_workers(text, 64)
    docs = [text[a:b] for a, b in spans]
    tmp = tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False)
    with tmp:
        tmp.write(text)
    atexit.register(os.unlink, tmp.name)

    def fresh() -> BPETokenizer:
        return BPETokenizer(tok.vocab, tok.merges, tok.special_tokens)

    return {
        BASELINE: lambda: enc.encode_ordinary(text),
        f"tiktoken encode_ordinary_batch ({workers} threads)":
            lambda: enc.encode_ordinary_batch(docs, num_threads=workers),
        "BPETokenizer.encode (cold)": _cold(fresh, lambda t: t.encode(text)),
        "BPETokenizer.encode (warm)": lambda: tok.encode(text),
        f"BPETokenizer.encode_batch ({workers} workers, cold)":
            _cold(fresh, lambda t: t.encode_batch(docs, num_workers=workers)),
        f"BPETokenizer.encode_file ({workers} workers, cold)":
            _cold(fresh, lambda t: t.encode_file(tmp.name, num_workers=workers)),
    }


class _cold:
    """A timed callable whose setup (building a fresh tokenizer) runs untimed before each call."""

    def __init__(self, setup: Callable[[], BPETokenizer], run: Callable[[BPETokenizer], object]):
        self.setup, self.run = setup, run


def bench_encoders(
    text: str,
    extra: dict[str, Callable[[str], object]] | None = None,
    *,
    repeats: int = 3,
    workers: int = 2,
    tokenizer: BPETokenizer | None = None,
) -> list[tuple[str, float, float, float, float]]:
    """Time every encoder on `text`; rows are (name, wall s, CPU s, MB/s, wall ratio vs tiktoken).

    Wall time is what counts; CPU seconds (all processes) show how much of it load took away.

    `extra` maps a row name to a callable taking the text (e.g. `lambda t: hf_tok(t)["input_ids"]`).
    """
    tok = tokenizer or _GPT2 or load_gpt2(_DATA or Path(os.environ.get("TINYLM_SHARED_DATA", "../shared/data")))
    runners: dict[str, Callable[[], object] | _cold] = default_encoders(text, tok, workers)
    for name, fn in (extra or {}).items():
        runners[name] = (lambda f: lambda: f(text))(fn)
    best = {name: float("inf") for name in runners}
    cpu = dict(best)
    for _ in range(repeats):
        for name, runner in runners.items():
            target = runner.setup() if isinstance(runner, _cold) else None
            start, start_cpu = time.perf_counter(), _cpu_seconds()
            runner.run(target) if isinstance(runner, _cold) else runner()
            best[name] = min(best[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], _cpu_seconds() - start_cpu)
    megabytes = len(text.encode("utf-8")) / 1e6
    return [(name, t, cpu[name], megabytes / t, best[BASELINE] / t) for name, t in best.items()]


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (worker pools are joined on exit)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def format_table(title: str, rows: list[tuple[str, float, float, float, float]]) -> str:
    """A Markdown table of one corpus's rows."""
    lines = [f"### {title}", "", "| encoder | wall s | CPU s | MB/s | vs tiktoken |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {n} | {t:.3f} | {c:.3f} | {mbs:.2f} | {r:.2f}x |" for n, t, c, mbs, r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    global _GPT2, _DATA
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("TINYLM_SHARED_DATA", "../shared/data")))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--novels-mb", type=float, default=10.0)
    args = parser.parse_args(argv)
    _DATA = args.data
    _GPT2 = load_gpt2(args.data)
    corpora = {
        "tinystories_train_small.txt": (args.data / "tinystories_train_small.txt").read_text(encoding="utf-8"),
        f"pd_novels_heldout.txt (first {args.novels_mb:g} MB)":
            (args.data / "pd_novels_heldout.txt").read_text(encoding="utf-8")[: int(args.novels_mb * 1e6)],
    }
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}, repeats: {args.repeats}\n")
    for title, text in corpora.items():
        print(format_table(title, bench_encoders(text, repeats=args.repeats, workers=args.workers)) + "\n")


if __name__ == "__main__":
    main()
