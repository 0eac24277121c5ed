"""Encode throughput of `BPETokenizer` vs tiktoken and `tokenizers` with GPT-2's files, as tables of paired ratios.

    PYTHONPATH=. python scripts/bench_encode.py [--data ../shared/data] [--repeats 3] [--workers 2]
        [--novels-mb 3] [--file-mb 40] [--only corpora,file,hostile,jit]

Every row runs on the same text, interleaved round-robin over `--repeats` rounds (the best round
counts), so machine load hits all rows alike. "cold" rows build a new `BPETokenizer` per run and
its kernel tables (untimed, as tiktoken's construction is), so nothing encoded before is reused.
Ratios are against tiktoken's single-thread `encode_ordinary`, by wall time and by CPU time (what
counts on a loaded machine). Other encoders (e.g. the Hugging Face wrappers) join the table through
`bench_encoders(text, extra={"name": callable})`.

More tables: "file" times `encode_file` with 1..`--workers` threads on the first `--file-mb` MB of
pd_novels_heldout.txt beside tiktoken's single thread; "hostile" encodes runs of random "ACGT" without
whitespace (one pre-token each) at 20k..100k characters, with each encoder's growth
time(80k) / time(20k) (linear: 4); "jit" times the first encode in a fresh process, without and with
numba's on-disk cache.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import subprocess

import tiktoken

try:
    from tinylm_hf.tokenization.bpe.core import BPETokenizer
    from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tinylm_hf.tokenization.bpe.core import BPETokenizer
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


def fresh_tokenizer(tok: BPETokenizer) -> BPETokenizer:
    """A new tokenizer on `tok`'s files with its kernel tables built (an empty encode builds them)."""
    fresh = BPETokenizer(tok.vocab, tok.merges, tok.special_tokens)
    fresh.encode("")
    return fresh


def make_fast_twin(tok: BPETokenizer):
    """The `tokenizers` ByteLevel BPE on the same files (what TinyLMTokenizerFast runs)."""
    from tinylm_hf.tokenization.bpe.backend import build_byte_level_bpe
    from tinylm_hf.tokenization.bpe.byte_unicode import token_to_unicode

    vocab = {token_to_unicode(token): i for i, token in tok.vocab.items() if i != tok.special_ids[EOT]}
    return build_byte_level_bpe(vocab, [(token_to_unicode(a), token_to_unicode(b)) for a, b in tok.merges])


def default_encoders(text: str, tok: BPETokenizer, workers: int) -> dict[str, Callable[[], object]]:
    """Zero-argument callables that each encode `text` once; a cold one builds its tokenizer first."""
    enc = make_tiktoken(tok)
    fast = make_fast_twin(tok)
    docs = list(tok._iter_independent_pieces([text], max(1, len(text) // 64)))
    tmp = tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False)
    with tmp:
        tmp.write(text)
    atexit.register(os.unlink, tmp.name)
    fresh = lambda: fresh_tokenizer(tok)  # noqa: E731
    return {
        BASELINE: lambda: enc.encode_ordinary(text),
        "tokenizers ByteLevel BPE encode (the fast twin)": lambda: fast.encode(text).ids,
        f"tiktoken encode_ordinary_batch ({workers} threads)":
            lambda: enc.encode_ordinary_batch(docs, num_threads=workers),
        "BPETokenizer.encode_ordinary (cold)": _cold(fresh, lambda t: t.encode_ordinary(text)),
        "BPETokenizer.encode (cold)": _cold(fresh, lambda t: t.encode(text)),
        f"BPETokenizer.encode_batch ({workers} threads, cold)":
            _cold(fresh, lambda t: t.encode_batch(docs, num_workers=workers)),
        f"BPETokenizer.encode_file ({workers} threads, cold)":
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

    Wall time is what counts on a quiet machine; CPU seconds (all threads) on a loaded one.

    `extra` maps a row name to a callable taking the text (e.g. `lambda t: hf_tok(t)["input_ids"]`).
    """
    tok = tokenizer or _GPT2 or load_gpt2(_DATA or Path(os.environ.get("TINYLM_SHARED_DATA", "../shared/data")))
    runners: dict[str, Callable[[], object] | _cold] = default_encoders(text, tok, workers)
    for name, fn in (extra or {}).items():
        runners[name] = (lambda f: lambda: f(text))(fn)
    best, cpu = time_round_robin(runners, repeats)
    megabytes = len(text.encode("utf-8")) / 1e6
    return [(name, t, cpu[name], megabytes / t, best[BASELINE] / t) for name, t in best.items()]


def time_round_robin(runners: dict[str, Callable[[], object] | _cold], repeats: int) -> tuple[dict, dict]:
    """Best wall and CPU seconds per runner over `repeats` rounds, every runner once per round."""
    best = {name: float("inf") for name in runners}
    cpu = dict(best)
    for _ in range(repeats):
        for name, runner in runners.items():
            target = runner.setup() if isinstance(runner, _cold) else None
            start, start_cpu = time.perf_counter(), _cpu_seconds()
            runner.run(target) if isinstance(runner, _cold) else runner()
            best[name] = min(best[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], _cpu_seconds() - start_cpu)
    return best, cpu


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (worker pools are joined on exit)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def format_table(title: str, rows: list[tuple[str, float, float, float, float]]) -> str:
    """A Markdown table of one corpus's rows: wall ratio, and CPU ratio (what counts on a loaded machine)."""
    baseline_cpu = rows[0][2]
    lines = [f"### {title}", "", "| encoder | wall s | CPU s | MB/s | vs tiktoken (wall) | vs tiktoken (CPU) |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {n} | {t:.3f} | {c:.3f} | {mbs:.2f} | {r:.2f}x | {baseline_cpu / c:.2f}x |" for n, t, c, mbs, r in rows]
    return "\n".join(lines)


def bench_file(path: Path, tok: BPETokenizer, *, max_workers: int, repeats: int) -> list[tuple]:
    """encode_file with 1..max_workers threads (cold) vs tiktoken's single thread on a whole file."""
    enc = make_tiktoken(tok)
    text = path.read_text(encoding="utf-8")
    runners: dict[str, Callable[[], object] | _cold] = {BASELINE: lambda: enc.encode_ordinary(text)}
    for workers in range(1, max_workers + 1):
        runners[f"BPETokenizer.encode_file ({workers} thread{'s' if workers > 1 else ''}, cold)"] = _cold(
            lambda: fresh_tokenizer(tok), (lambda w: lambda t: t.encode_file(path, num_workers=w))(workers))
    best, cpu = time_round_robin(runners, repeats)
    megabytes = path.stat().st_size / 1e6
    return [(name, t, cpu[name], megabytes / t, best[BASELINE] / t) for name, t in best.items()]


def bench_hostile(tok: BPETokenizer, sizes: tuple[int, ...] = (20_000, 40_000, 80_000, 100_000),
                  repeats: int = 3) -> str:
    """A Markdown table: one whitespace-free "ACGT" run per size, ours vs tiktoken (best CPU time of `repeats`)."""
    enc = make_tiktoken(tok)
    fresh = fresh_tokenizer(tok)
    rng = random.Random(0)
    rows, times = [], {"ours": {}, "tiktoken": {}}
    for size in sizes:
        text = "".join(rng.choices("ACGT", k=size))
        best = {"ours": float("inf"), "tiktoken": float("inf")}
        for _ in range(repeats):
            for name, encode in (("ours", fresh.encode), ("tiktoken", enc.encode_ordinary)):
                start = time.process_time()
                ids = encode(text)
                best[name] = min(best[name], time.process_time() - start)
            if ids != fresh.encode(text):
                raise AssertionError(f"ids differ from tiktoken's on {size} characters")
        for name in best:
            times[name][size] = best[name]
        rows.append(f"| {size:,} | {best['ours']:.4f} | {best['tiktoken']:.4f} | {best['ours'] / best['tiktoken']:.2f}x |")
    lines = ['### hostile input: one run of random "ACGT" (no whitespace)', "",
             "| characters | ours CPU s | tiktoken CPU s | ours / tiktoken |", "|---:|---:|---:|---:|", *rows]
    if 20_000 in sizes and 80_000 in sizes:
        growth = {name: t[80_000] / t[20_000] for name, t in times.items()}
        lines += ["", f"growth time(80k) / time(20k): ours {growth['ours']:.2f}, tiktoken {growth['tiktoken']:.2f} "
                      f"(linear: 4; ours / tiktoken {growth['ours'] / growth['tiktoken']:.2f})"]
    return "\n".join(lines)


JIT_PROBE = """
import time
start = time.perf_counter()
from tinylm_hf.tokenization.bpe.core import BPETokenizer
tok = BPETokenizer.from_files({vocab!r}, {merges!r}, ["<|endoftext|>"])
built = time.perf_counter()
tok.encode("Hello world")
print(built - start, time.perf_counter() - built)
"""


def bench_jit(data: Path) -> str:
    """A Markdown table: loading GPT-2 and its first encode in a fresh process, without then with numba's cache."""
    probe = JIT_PROBE.format(vocab=str(data / "gpt2_vocab.json"), merges=str(data / "gpt2_merges.txt"))
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = os.environ | {"NUMBA_CACHE_DIR": cache}
        for label in ("no cache (first run: compiles and writes the cache)", "with the cache"):
            done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
            load, first = map(float, done.stdout.split())
            rows.append(f"| {label} | {load:.2f} | {first:.2f} |")
    return "\n".join(["### first encode in a fresh process (GPT-2's files)", "",
                      "| numba cache | import + load files s | first encode s |", "|---|---:|---:|", *rows])


def main(argv: list[str] | None = None) -> None:
    global _GPT2, _DATA
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("TINYLM_SHARED_DATA", "../shared/data")))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--novels-mb", type=float, default=3.0)
    parser.add_argument("--file-mb", type=float, default=40.0, help="size of the novels file for encode_file")
    parser.add_argument("--only", default="corpora,file,hostile,jit", help="tables to run, comma-separated")
    args = parser.parse_args(argv)
    tables = set(args.only.split(","))
    _DATA = args.data
    _GPT2 = load_gpt2(args.data)
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}, repeats: {args.repeats}\n")
    if "corpora" in tables:
        for title, text in read_corpora(args.data, args.novels_mb).items():
            rows = bench_encoders(text, repeats=args.repeats, workers=args.workers)
            print(format_table(title, rows) + "\n")
    if "file" in tables:
        path = args.data / "pd_novels_heldout.txt"
        if args.file_mb * 1e6 < path.stat().st_size:
            tmp = tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False)
            with tmp:
                tmp.write(path.read_text(encoding="utf-8")[: int(args.file_mb * 1e6)])
            atexit.register(os.unlink, tmp.name)
            path = Path(tmp.name)
        rows = bench_file(path, _GPT2, max_workers=args.workers, repeats=max(1, args.repeats - 1))
        print(format_table(f"encode_file on pd_novels_heldout.txt ({path.stat().st_size / 1e6:.1f} MB)", rows) + "\n")
    if "hostile" in tables:
        print(bench_hostile(_GPT2, repeats=args.repeats) + "\n")
    if "jit" in tables:
        print(bench_jit(args.data) + "\n")


def read_corpora(data: Path, novels_mb: float) -> dict[str, str]:
    """The encode corpora: TinyStories' training file, a slice of the novels, the multilingual samples."""
    with open(data / "pd_novels_heldout.txt", encoding="utf-8") as f:
        novels = f.read(int(novels_mb * 1e6))
    return {
        "tinystories_train_small.txt": (data / "tinystories_train_small.txt").read_text(encoding="utf-8"),
        f"pd_novels_heldout.txt (first {novels_mb:g} MB)": novels,
        "multilingual_samples.txt": (data / "multilingual_samples.txt").read_text(encoding="utf-8"),
    }


if __name__ == "__main__":
    main()
