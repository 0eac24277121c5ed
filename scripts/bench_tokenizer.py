"""Benchmark tinylm_hf's tokenizer against its peers, side by side in one run.

(3) WordPiece: `train_wordpiece` vs `tokenizers`' WordPieceTrainer (BERT normaliser and pre-tokenizer,
same specials and vocab size; its trainer is BPE with another score, so the vocabularies differ and
only time and memory compare), run like (1); then `WordPieceTokenizer.encode` and our HF class vs
`tokenizers`' BERT WordPiece `encode` / `encode_batch` and the fast twin on the same vocab.txt (ids checked equal).

(1) Training: `train_bpe` vs `tokenizers`' BpeTrainer (ByteLevel pre-tokenizer with the GPT-2
regex, same special token, same vocab size). Each trainer runs in a fresh subprocess; wall time is
the training call alone, peak memory is the largest RSS of the subprocess plus the USS of its
workers (sampled every 20 ms) and the subprocess's own high-water mark (VmHWM, which, unlike
ru_maxrss, does not inherit the high-water mark of this script's process). Our side loads only the tokenization
modules (not the whole package, whose torch import would dominate memory).

    python scripts/bench_tokenizer.py [--quick] [--data ../shared/data] [--only-wordpiece | --only-bpe-train]
        [--skip-train | --skip-encode] [--hostile-mb 1]

The hostile row trains on `--hostile-mb` MB of random "ACGT" without any whitespace: one
pre-token of that many bytes (the merge loop keeps all words in one linked array, so a merge costs
its occurrences, not the word's length).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECIAL = "<|endoftext|>"
TRAIN_ROWS = [
    ("tinystories_train_small.txt", 10_000),
    ("pd_novels_heldout.txt", 10_000, 20_000_000),
    ("pd_novels_heldout.txt", 10_000),
    ("pd_novels_heldout.txt", 32_000),
]
QUICK_TRAIN_ROWS = [("tinystories_train_small.txt", 2_000)]

# The child's own peak RSS. Not ru_maxrss: Linux carries the high-water mark of the process that
# forked it across exec, so a child started after this script encoded 10 MB would report ours.
PEAK_CODE = """
def own_peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""

# Runs in a fresh interpreter: load tinylm_hf.tokenization.bpe.train without tinylm_hf/__init__.
OURS_CHILD = PEAK_CODE + """
import json, sys, time, types
root, path, vocab_size, special = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for name, sub in (("tinylm_hf", ""), ("tinylm_hf.tokenization", "/tokenization"),
                  ("tinylm_hf.tokenizer_training", "/tokenizer_training")):
    module = types.ModuleType(name)
    module.__path__ = [root + "/tinylm_hf" + sub]
    sys.modules[name] = module
from tinylm_hf.tokenization.bpe.train import train_bpe
start = time.perf_counter()
vocab, merges = train_bpe(path, vocab_size, [special], progress=False)
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "vocab": len(vocab),
                  "maxrss_kb": own_peak_kb()}))
"""

HF_CHILD = PEAK_CODE + """
import json, sys, time
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
path, vocab_size, special = sys.argv[2], int(sys.argv[3]), sys.argv[4]
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[special], show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
start = time.perf_counter()
tokenizer.train([path], trainer)
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "vocab": tokenizer.get_vocab_size(),
                  "maxrss_kb": own_peak_kb()}))
"""


WP_TRAIN_ROWS = [("tinystories_train_small.txt", 8_000, None), ("pd_novels_heldout.txt", 16_000, 10_000_000),
                 ("pd_novels_heldout.txt", 16_000, None)]
QUICK_WP_TRAIN_ROWS = [("tinystories_train_small.txt", 2_000, None)]

# Rows: (file, vocab size, characters or None for the whole file).
WP_OURS_CHILD = PEAK_CODE + """
import json, sys, time, types
root, path, vocab_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, sub in (("tinylm_hf", ""), ("tinylm_hf.tokenization", "/tokenization"),
                  ("tinylm_hf.tokenizer_training", "/tokenizer_training")):
    module = types.ModuleType(name)
    module.__path__ = [root + "/tinylm_hf" + sub]
    sys.modules[name] = module
from tinylm_hf.tokenization.wordpiece.train import train_wordpiece
start = time.perf_counter()
vocab = train_wordpiece(path, vocab_size, lowercase=True, progress=False)
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "vocab": len(vocab),
                  "maxrss_kb": own_peak_kb()}))
"""

WP_HF_CHILD = PEAK_CODE + """
import json, sys, time
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
path, vocab_size = sys.argv[2], int(sys.argv[3])
tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, show_progress=False,
                                    special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
start = time.perf_counter()
tokenizer.train([path], trainer)
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "vocab": tokenizer.get_vocab_size(),
                  "maxrss_kb": own_peak_kb()}))
"""


def _tree_memory(process: psutil.Process) -> int:
    """Bytes held by a process tree: the root's RSS plus each descendant's unique set size.

    Forked workers share the parent's pages; counting their USS (not RSS) avoids counting the
    shared interpreter once per worker.
    """
    try:
        total = process.memory_info().rss
        children = process.children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            total += child.memory_full_info().uss
        except psutil.Error:
            pass
    return total


def run_child(code: str, path: Path, vocab_size: int) -> dict:
    """Run one trainer in a fresh interpreter: its wall time, CPU seconds (with workers, and
    with interpreter start-up) and peak memory in MB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = before.ru_utime + before.ru_stime
    argv = [sys.executable, "-c", code, str(REPO_ROOT), str(path), str(vocab_size), SPECIAL]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="true")
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    watched = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        peak = max(peak, _tree_memory(watched))
        time.sleep(0.02)
    out, err = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"trainer subprocess failed:\n{err}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(out.strip().splitlines()[-1])
    result["cpu"] = usage.ru_utime + usage.ru_stime - cpu_before
    result["peak_mb"] = max(peak, result["maxrss_kb"] * 1024) / 2**20
    return result


def bench_train(data_dir: Path, rows: list[tuple], ours_code: str = OURS_CHILD,
                theirs_code: str = HF_CHILD) -> list[dict]:
    """Our trainer vs the peer on each (file, vocab size[, characters]) row, run back to back.

    A row with a character count trains both on that many characters of the file (written to a
    temporary file first, untimed).
    """
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, vocab_size, *chars in rows:
            path = data_dir / name
            if not path.is_file():
                print(f"skipping {name}: not found in {data_dir}", file=sys.stderr)
                continue
            label = name
            if chars and chars[0] is not None:
                label = f"{name} ({chars[0] / 1e6:g}M chars)"
                with open(data_dir / name, encoding="utf-8") as f:
                    path = Path(tmp) / f"{chars[0]}-{name}"
                    path.write_text(f.read(chars[0]), encoding="utf-8")
            ours = run_child(ours_code, path, vocab_size)
            theirs = run_child(theirs_code, path, vocab_size)
            results.append({"file": label, "mb": path.stat().st_size / 1e6, "vocab_size": vocab_size,
                            "ours": ours, "theirs": theirs})
    return results


def write_python_sources(path: Path, megabytes: float) -> Path:
    """About `megabytes` MB of real text any machine has: the installed packages' `.py` files (this
    interpreter's site-packages, then its standard library), sorted by path and concatenated, each
    followed by the special token; files that are not UTF-8 are left out."""
    import site
    import sysconfig

    roots = [Path(p) for p in site.getsitepackages()] + [Path(sysconfig.get_paths()["stdlib"])]
    limit = int(megabytes * 1e6)
    written = 0
    with open(path, "wb") as out:
        for root in roots:
            for source in sorted(root.rglob("*.py")):
                try:
                    data = source.read_bytes()
                    data.decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                out.write(data + SPECIAL.encode())
                written += len(data) + len(SPECIAL)
                if written >= limit:
                    return path
    return path


def write_hostile_file(directory: Path, megabytes: float) -> Path:
    """A file of random "ACGT" without whitespace (seeded, so every run trains on the same text)."""
    path = directory / f"acgt_{megabytes:g}mb.txt"
    rng = random.Random(0)
    path.write_text("".join(rng.choices("ACGT", k=int(megabytes * 1e6))), encoding="ascii")
    return path


def print_train_table(results: list[dict], title: str | None = None, note: str | None = None) -> None:
    print(title or "(1) BPE training: tinylm_hf.train_bpe vs tokenizers BpeTrainer "
          f"(GPT-2 regex, special {SPECIAL!r}, {psutil.cpu_count()} CPUs)")
    width = max([28] + [len(row["file"]) + 2 for row in results])
    header = (f"{'corpus':<{width}}{'MB':>6}{'vocab':>7}{'ours s':>9}{'tok s':>8}{'wall ratio':>12}"
              f"{'ours MB':>9}{'tok MB':>8}{'mem ratio':>11}{'ours cpu':>10}{'tok cpu':>9}{'cpu ratio':>11}")
    print(header)
    print("-" * len(header))
    for row in results:
        ours, theirs = row["ours"], row["theirs"]
        print(f"{row['file']:<{width}}{row['mb']:>6.1f}{row['vocab_size']:>7}"
              f"{ours['wall']:>9.2f}{theirs['wall']:>8.2f}{ours['wall'] / theirs['wall']:>11.2f}x"
              f"{ours['peak_mb']:>9.0f}{theirs['peak_mb']:>8.0f}"
              f"{ours['peak_mb'] / theirs['peak_mb']:>10.2f}x{ours['cpu']:>10.1f}{theirs['cpu']:>9.1f}"
              f"{ours['cpu'] / theirs['cpu']:>10.2f}x")
    print(note or "wall ratio = ours / tokenizers (<= 1.0 means train_bpe is as fast or faster); "
          "mem ratio = peak memory ours / tokenizers; cpu = CPU seconds of the whole subprocess")


def bench_wordpiece_encode(data: Path, *, repeats: int, novels_mb: float, vocab_size: int) -> None:
    """(3b) WordPiece encoding vs tokenizers' BERT WordPiece on one vocab trained here, ids checked equal: the core
    `WordPieceTokenizer` and our HF class beside `tokenizers` and the fast twin (an HF class over `tokenizers`)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from tinylm_hf.tokenization.wordpiece.tokenization_tinylm_wordpiece import TinyLMWordPieceTokenizer
    from tinylm_hf.tokenization.wordpiece.tokenization_tinylm_wordpiece_fast import TinyLMWordPieceTokenizerFast
    from tinylm_hf.tokenization.wordpiece.core import WordPieceTokenizer, write_vocab_txt
    from tinylm_hf.tokenization.wordpiece.train import train_wordpiece

    vocab = train_wordpiece(data / "tinystories_train_small.txt", vocab_size, lowercase=True, progress=False)
    reference = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    reference.normalizer = normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file = str(write_vocab_txt(vocab, Path(tmp) / "vocab.txt"))
        slow = TinyLMWordPieceTokenizer(vocab_file, do_lower_case=True)
        fast = TinyLMWordPieceTokenizerFast(vocab_file=vocab_file, do_lower_case=True)
    with open(data / "pd_novels_heldout.txt", encoding="utf-8") as f:
        novels = f.read(int(novels_mb * 1e6))
    corpora = {"tinystories_train_small.txt": (data / "tinystories_train_small.txt").read_text(encoding="utf-8"),
               f"pd_novels_heldout.txt (first {novels_mb:g} MB)": novels}
    print(f"(3b) WordPiece encoding, uncased, vocab {vocab_size} trained on TinyStories; best of {repeats}; "
          "tokenizers runs with its default threads (TOKENIZERS_PARALLELISM unset); CPU s counts every thread")
    print("| corpus | encoder | wall s | CPU s | MB/s | wall vs tokenizers | CPU vs tokenizers |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for title, text in corpora.items():
        megabytes = len(text.encode("utf-8")) / 1e6
        lines = text.split("\n")
        runners = {
            "tokenizers encode": lambda: reference.encode(text).ids,
            "tokenizers encode_batch (lines)": lambda: reference.encode_batch(lines),
            "TinyLMWordPieceTokenizerFast (the fast twin)": lambda: fast(text, add_special_tokens=False)["input_ids"],
            "WordPieceTokenizer.encode (cold)": lambda: WordPieceTokenizer(vocab, lowercase=True).encode(text),
            "TinyLMWordPieceTokenizer (ours, HF class)": lambda: slow(text, add_special_tokens=False)["input_ids"],
        }
        expected = reference.encode(text).ids
        for name in ("TinyLMWordPieceTokenizerFast (the fast twin)", "WordPieceTokenizer.encode (cold)",
                     "TinyLMWordPieceTokenizer (ours, HF class)"):
            if runners[name]() != expected:
                raise RuntimeError(f"{name}: ids differ from tokenizers on {title}")
        best = {name: min((_timed_cpu(fn) for _ in range(repeats)), key=lambda t: t[0]) for name, fn in runners.items()}
        wall0, cpu0 = best["tokenizers encode"]
        for name, (wall, cpu) in best.items():
            print(f"| {title} | {name} | {wall:.3f} | {cpu:.3f} | {megabytes / wall:.2f} | "
                  f"{wall0 / wall:.2f}x | {cpu0 / cpu:.2f}x |")


def _timed_cpu(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, every thread) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def _default_data_dir() -> Path:
    env = os.environ.get("TINYLM_SHARED_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=_default_data_dir(), help="folder of the corpora")
    parser.add_argument("--quick", action="store_true", help="one small row per table (smoke run)")
    parser.add_argument("--repeats", type=int, default=3, help="encode rounds (best counts)")
    parser.add_argument("--novels-mb", type=float, default=10.0, help="size of the novels slice to encode")
    parser.add_argument("--skip-train", action="store_true", help="only the encode tables")
    parser.add_argument("--only-wordpiece", action="store_true", help="only section (3), WordPiece")
    parser.add_argument("--only-bpe-train", action="store_true", help="only the byte-level BPE training table (1), its first two rows")
    parser.add_argument("--skip-encode", action="store_true", help="only the training tables")
    parser.add_argument("--hostile-mb", type=float, default=1.0,
                        help="size of the whitespace-free row (0: none; tokenizers takes over 12 minutes on 5 MB)")
    parser.add_argument("--hostile-vocab", type=int, default=1000, help="vocab size of the whitespace-free row")
    parser.add_argument("--scale-mb", type=float, default=0,
                        help="add a row on this many MB of the installed Python sources to the BPE and "
                             "WordPiece training tables (e.g. 200; minutes)")
    args = parser.parse_args(argv)
    if not args.skip_train and not args.only_bpe_train:
        rows = QUICK_WP_TRAIN_ROWS if args.quick else WP_TRAIN_ROWS
        results = bench_train(args.data, rows, WP_OURS_CHILD, WP_HF_CHILD)
        if args.scale_mb > 0 and not args.quick:
            with tempfile.TemporaryDirectory() as tmp:
                path = write_python_sources(Path(tmp) / f"python_sources_{args.scale_mb:g}mb.txt", args.scale_mb)
                results += bench_train(path.parent, [(path.name, 32_000)], WP_OURS_CHILD, WP_HF_CHILD)
        print_train_table(results, "(3a) WordPiece training: tinylm_hf.train_wordpiece vs tokenizers WordPieceTrainer "
                          f"(uncased BERT normaliser, 5 BERT specials, {psutil.cpu_count()} CPUs)",
                          "wall and cpu ratio = ours / tokenizers; mem ratio = peak memory ours / tokenizers; both merge "
                          "by pair frequency but break ties differently, so their vocabularies may differ")
        print()
    if not args.skip_encode and not args.only_bpe_train:
        bench_wordpiece_encode(args.data, repeats=1 if args.quick else args.repeats,
                               novels_mb=1.0 if args.quick else args.novels_mb,
                               vocab_size=2_000 if args.quick else 8_000)
        print()
    if args.only_wordpiece:
        return 0
    if not args.skip_train:
        rows = QUICK_TRAIN_ROWS if args.quick else TRAIN_ROWS[:2] if args.only_bpe_train else TRAIN_ROWS
        results = bench_train(args.data, rows)
        if args.hostile_mb > 0:
            with tempfile.TemporaryDirectory() as tmp:
                path = write_hostile_file(Path(tmp), args.hostile_mb)
                results += bench_train(path.parent, [(path.name, args.hostile_vocab)])
        if args.scale_mb > 0:
            with tempfile.TemporaryDirectory() as tmp:
                path = write_python_sources(Path(tmp) / f"python_sources_{args.scale_mb:g}mb.txt", args.scale_mb)
                results += bench_train(path.parent, [(path.name, 10_000)])
        print_train_table(results)
        print()
    if args.skip_encode or args.only_bpe_train:
        return 0
    bench_encode_tables(args.data, repeats=1 if args.quick else args.repeats,
                        novels_mb=1.0 if args.quick else args.novels_mb)
    return 0


def bench_encode_tables(data: Path, *, repeats: int, novels_mb: float) -> None:
    """Part (2): encode throughput with GPT-2's files, our encoders and HF wrappers beside tiktoken."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_encode
    from tinylm_hf import TinyLMTokenizer, TinyLMTokenizerFast

    vocab, merges = data / "gpt2_vocab.json", data / "gpt2_merges.txt"
    slow = TinyLMTokenizer(vocab_file=str(vocab), merges_file=str(merges))
    with tempfile.TemporaryDirectory() as tmp:
        slow.save_pretrained(tmp)
        fast = TinyLMTokenizerFast.from_pretrained(tmp)
    extra = {
        "TinyLMTokenizer (warm: same text again)": lambda t: slow(t)["input_ids"],
        "TinyLMTokenizerFast": lambda t: fast(t)["input_ids"],
    }
    corpora = bench_encode.read_corpora(data, novels_mb)
    bench_encode._DATA = data
    for title, text in corpora.items():
        rows = bench_encode.bench_encoders(text, extra, repeats=repeats)
        print(bench_encode.format_table(title, rows) + "\n")


if __name__ == "__main__":
    sys.exit(main())
