"""Peak memory of the corpus commands at two corpus sizes: bounded memory means the larger peak stays near the smaller.

Each command runs as `python -m tinylm_hf.cli ...` in a fresh process; its peak is the largest resident size of its
whole process tree (the RSS of the process and every descendant, summed, polled every 20 ms) or the process's own
high-water mark (`ru_maxrss` from `wait4`, which catches a spike between two polls), whichever is larger. The peer
(`tokenizers`' BpeTrainer, same file, special token and vocabulary size) runs the same way, for scale.

    python scripts/bench_memory.py --small /work/bigcorpus/corpus_100mb.txt --large /work/bigcorpus/corpus_1000mb.txt \\
        [--commands bpe,prepare,count-words,count-words:wordpiece,wordpiece,unigram,sentencepiece-bpe,peer-bpe,
                    peer-sentencepiece-bpe,peer-unigram]
        [--vocab-size 32000] [--tokenizer FOLDER]

`bpe`, `wordpiece`, `unigram`, `sentencepiece-bpe` are `train-tokenizer --algorithm NAME`; `count-words:NAME` counts
that family's words (`count-words` alone: bpe's); `prepare` tokenizes with `--tokenizer` (default: the bpe trained on
`--small` in this run). `peer-sentencepiece-bpe` and `peer-unigram` are sentencepiece's trainer with the settings
that family's trainer matches (identity normalisation, full character coverage, the family's byte fallback).

It prints one Markdown row per command and size (wall s, peak MB), then the ratio large/small per command, and the
slope (MB of peak per GB of text) that the docs extrapolate to 10 GB and 100 GB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECIAL = "<|endoftext|>"
POLL_S = 0.02

PEER_BPE = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
path, vocab_size, special = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[special], show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train([path], trainer)
print(tok.get_vocab_size())
"""

# sentencepiece's trainer with the settings the tinylm_hf trainers match (`bench_sentencepiece.py`'s), 2 threads.
PEER_SENTENCEPIECE = """
import io, sys
import sentencepiece as spm
path, vocab_size, special, model_type, byte_fallback = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
spm.SentencePieceTrainer.train(input=path, model_writer=io.BytesIO(), model_type=model_type, vocab_size=vocab_size,
    byte_fallback=byte_fallback == "1", normalization_rule_name="identity", character_coverage=1.0,
    remove_extra_whitespaces=False, control_symbols=[special], num_threads=2, minloglevel=2)
"""


def tree_rss(process: psutil.Process) -> int:
    """The RSS of a process and all its descendants, summed (bytes); 0 once it is gone."""
    total = 0
    try:
        for member in [process, *process.children(recursive=True)]:
            try:
                total += member.memory_info().rss
            except psutil.NoSuchProcess:
                pass
    except psutil.NoSuchProcess:
        pass
    return total


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak MB of the process tree) of one command; a failing command is an error with its output."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    log = tempfile.TemporaryFile()
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    process, peak = psutil.Process(child.pid), 0
    while True:
        finished, status, usage = os.wait4(child.pid, os.WNOHANG)
        if finished:
            break
        peak = max(peak, tree_rss(process))
        time.sleep(POLL_S)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        log.seek(0)
        raise RuntimeError(f"{' '.join(argv)} failed ({child.returncode}):\n{log.read().decode()[-3000:]}")
    return wall, max(peak, usage.ru_maxrss * 1024) / 1e6


def command(name: str, corpus: Path, work: Path, args: argparse.Namespace) -> list[str]:
    """The command line of benchmark `name` on `corpus`, writing into `work`."""
    cli = [sys.executable, "-m", "tinylm_hf.cli"]
    if name == "peer-bpe":
        return [sys.executable, "-c", PEER_BPE, str(corpus), str(args.vocab_size), SPECIAL]
    if name in ("peer-sentencepiece-bpe", "peer-unigram"):  # sentencepiece, as our family of that name trains
        family = name.removeprefix("peer-")
        return [sys.executable, "-c", PEER_SENTENCEPIECE, str(corpus), str(args.vocab_size), SPECIAL,
                "bpe" if family == "sentencepiece-bpe" else "unigram", str(int(family_byte_fallback(family)))]
    if name == "prepare":
        return [*cli, "prepare", "--tokenizer", str(args.tokenizer), "--input", str(corpus), "--workers",
                str(args.workers), "--out", str(work / "prepared")]
    if name.startswith("count-words"):  # count-words:ALGORITHM (default bpe)
        algorithm = name.partition(":")[2] or "bpe"
        return [*cli, "count-words", "--algorithm", algorithm, "--input", str(corpus), "--special-token", SPECIAL,
                "--out", str(work / "counts.json")]
    specials = [flag for token in family_special_tokens(name) for flag in ("--special-token", token)]
    return [*cli, "train-tokenizer", "--algorithm", name, "--input", str(corpus), "--vocab-size",
            str(args.vocab_size), *specials, "--num-workers", str(args.workers), "--no-progress",
            "--out", str(work / "tokenizer")]


def family(algorithm: str):
    """The family called `algorithm` in tinylm_hf's table (imported here: the bpe-only runs do not need it)."""
    sys.path.insert(0, str(REPO_ROOT))
    from tinylm_hf.tokenization.families import FAMILIES

    return FAMILIES[algorithm]


def family_byte_fallback(algorithm: str) -> bool:
    """Whether the family's trainer makes byte pieces by default (sentencepiece is given the same)."""
    return bool(family(algorithm).byte_fallback)


def family_special_tokens(algorithm: str) -> list[str]:
    """The corpus's separator, after the family's own special tokens where it needs them (WordPiece's `[UNK]`)."""
    return [SPECIAL] if algorithm == "bpe" else [*family(algorithm).special_tokens, SPECIAL]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=Path, required=True, help="the smaller corpus (a prefix of --large)")
    parser.add_argument("--large", type=Path, required=True)
    parser.add_argument("--commands", default="bpe,prepare,peer-bpe")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="tokenizer folder for prepare (default: the bpe trained on --small in this run)")
    args = parser.parse_args()
    names = args.commands.split(",")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB")
    print("| command | corpus MB | wall s | peak MB |")
    print("|---|---:|---:|---:|")
    peaks: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp:
        work = Path(tmp)
        for name in names:
            for corpus in (args.small, args.large):
                if name == "prepare" and args.tokenizer is None:
                    args.tokenizer = work / "prepare_tokenizer"
                    subprocess.run(command("bpe", args.small, work, args)[:-1] + [str(args.tokenizer)], check=True,
                                   cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                                   stdout=subprocess.DEVNULL)
                wall, peak = measure(command(name, corpus, work, args))
                for leftover in ("tokenizer", "prepared"):
                    shutil.rmtree(work / leftover, ignore_errors=True)
                peaks.setdefault(name, []).append(peak)
                print(f"| {name} | {corpus.stat().st_size / 1e6:.0f} | {wall:.1f} | {peak:.0f} |", flush=True)
    gb = (args.large.stat().st_size - args.small.stat().st_size) / 1e9
    for name, (small, large) in peaks.items():
        print(f"{name}: large/small {large / small:.2f}x, slope {(large - small) / gb:.0f} MB per GB of text")


if __name__ == "__main__":
    main()
