"""`tinylm prepare` vs `datasets.map` + the fast tokenizer on the same text file, side by side in one run.

    PYTHONPATH=. python scripts/bench_prepare.py [--data ../shared/data] [--mb 40] [--workers 2] [--repeats 2]
        [--input FILE]

Both sides turn the first `--mb` MB of pd_novels_heldout.txt (paragraphs: documents cut at blank lines)
into token ids with an end-of-text id after every document, written to a flat token file, with GPT-2's
vocabulary and merges (or `--input`: a text file as it is, its documents cut at its `<|endoftext|>` lines, as
`scripts/make_big_corpus.py` writes them):

- "tinylm prepare": `prepare_dataset(..., num_workers=W)` (loading, cutting documents, carving the
  validation split, tokenizing over W threads, writing train.bin / val.bin and their headers);
- "datasets.map + fast tokenizer": what a `datasets` user writes (as nanoGPT's prepare.py does):
  `load_dataset("text", sample_by="paragraph")`, `ds.map(fast_tokenizer(batch) + eos, batched=True,
  num_proc=W)`, then the ids concatenated into one uint16 file. The fast tokenizer is the folder's
  `tokenizer.json` (`tokenizers`' Rust BPE, the twin of ours: the same ids).

Each side runs in a fresh subprocess that imports its libraries first, untimed (transformers' AutoTokenizer, which
imports torch, datasets, numba); the timed work starts at the tokenizer's loading and includes loading the
JIT-compiled kernels from numba's cache. CPU time is the process's own plus that of the worker processes it waited for
(`datasets`' pool); peak MB is the largest resident size of the process or of one worker (VmHWM, ru_maxrss),
library imports included. Sides alternate over `--repeats` rounds; the best round of each counts, and the ratio
is ours / peer (below 1: ours is faster). numba's on-disk cache is warmed by an untimed first run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SEPARATOR = "<|endoftext|>"
REPO_ROOT = Path(__file__).resolve().parents[1]

CHILD_PRELUDE = """
import json, os, resource, sys, time
def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
def peak_mb():  # this process's peak RSS (VmHWM), and that of the largest worker process it waited for
    with open("/proc/self/status") as status:
        own = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
tok_dir, text, work, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
"""

OURS = CHILD_PRELUDE + """
import hashlib
import datasets, numba  # libraries, imported untimed as the peer's are
from transformers import AutoTokenizer  # (torch with it)
from tinylm_hf.corpus import prepare_dataset
t0, c0 = time.perf_counter(), cpu()
headers = prepare_dataset(tok_dir, work + "/out", input_files=[text], num_workers=workers)
wall, cpu_s = time.perf_counter() - t0, cpu() - c0
tokens = headers["train"]["count"] + headers["val"]["count"]
docs = headers["train"]["documents"] + headers["val"]["documents"]
digest = hashlib.sha256()
for split in ("train", "val"):  # read in blocks: the peak stays prepare's, not the token files'
    with open(f"{work}/out/{split}.bin", "rb") as token_file:
        for block in iter(lambda: token_file.read(1 << 20), b""):
            digest.update(block)
print(json.dumps({"wall": wall, "cpu": cpu_s, "tokens": tokens, "documents": docs, "digest": digest.hexdigest(),
                  "peak": peak_mb()}))
"""

PEER = CHILD_PRELUDE + """
import hashlib, re
import numpy as np
from datasets import load_dataset
from transformers import AutoTokenizer
t0, c0 = time.perf_counter(), cpu()
tok = AutoTokenizer.from_pretrained(tok_dir)
assert tok.is_fast, type(tok)
eos = tok.eos_token_id
raw = load_dataset("text", data_files=[text], sample_by="document", split="train", cache_dir=work + "/cache")
separator = re.compile(r"^[ \\t]*<\\|endoftext\\|>[ \\t]*\\r?$", flags=re.M)
def split(batch):
    return {"text": [d.strip("\\r\\n") for t in batch["text"] for d in separator.split(t) if d.strip()]}
ds = raw.map(split, batched=True, batch_size=1, remove_columns=["text"])
def encode(batch):
    ids = tok(batch["text"], add_special_tokens=False, split_special_tokens=True)["input_ids"]
    return {"ids": [doc + [eos] for doc in ids]}
tokenized = ds.map(encode, batched=True, num_proc=workers, remove_columns=["text"])
count, digest = 0, hashlib.sha256()
with open(work + "/train.bin", "wb") as out:
    for batch in tokenized.iter(batch_size=1024):
        ids = np.fromiter((t for doc in batch["ids"] for t in doc), dtype=np.uint16)
        out.write(ids.tobytes())
        digest.update(ids.tobytes())
        count += ids.size
wall, cpu_s = time.perf_counter() - t0, cpu() - c0
print(json.dumps({"wall": wall, "cpu": cpu_s, "tokens": count, "documents": len(ds), "digest": digest.hexdigest(),
                  "peak": peak_mb()}))
"""


def write_corpus(source: Path, path: Path, mb: float, doc_kb: float) -> Path:
    """The first `mb` MB of `source` at `path`; with `doc_kb`, its paragraphs grouped into documents of about
    `doc_kb` KB between separator lines (else the novels are the documents: the file's own separator lines)."""
    data = source.read_bytes()[: int(mb * 1e6)]
    text = data.decode("utf-8", errors="ignore")
    if doc_kb:
        docs, group, size = [], [], 0
        for paragraph in re.split(r"\n\s*\n", text.replace(SEPARATOR, "")):
            group.append(paragraph)
            size += len(paragraph)
            if size >= doc_kb * 1000:
                docs.append("\n\n".join(group))
                group, size = [], 0
        text = f"\n{SEPARATOR}\n".join(docs + ["\n\n".join(group)])
    path.write_text(text, encoding="utf-8")
    return path


def make_gpt2_folder(data: Path, folder: Path) -> Path:
    """A TinyLM byte-level BPE folder of GPT-2's files (its `tokenizer.json` is the fast twin)."""
    code = ("import sys; from tinylm_hf.tokenization.bpe.tokenization_tinylm import TinyLMTokenizer; "
            "TinyLMTokenizer(vocab_file=sys.argv[1], merges_file=sys.argv[2]).save_pretrained(sys.argv[3])")
    run_python(code, str(data / "gpt2_vocab.json"), str(data / "gpt2_merges.txt"), str(folder))
    return folder


def run_python(code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "TQDM_DISABLE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def run_side(code: str, tok_dir: Path, text: Path, workers: int) -> dict:
    with tempfile.TemporaryDirectory(dir=text.parent) as work:
        return json.loads(run_python(code, str(tok_dir), str(text), work, str(workers)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO_ROOT.parent / "shared" / "data")
    parser.add_argument("--mb", type=float, default=40.0, help="MB of pd_novels_heldout.txt to prepare")
    parser.add_argument("--workers", type=int, default=2, help="threads (ours) and processes (datasets.map)")
    parser.add_argument("--doc-kb", type=float, default=4.0,
                        help="documents of about this many KB of paragraphs (0: the novels as documents)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--input", type=Path, default=None,
                        help="prepare this text file as it is (documents cut at its <|endoftext|> lines) instead")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        text = args.input.resolve() if args.input else write_corpus(
            args.data / "pd_novels_heldout.txt", tmp_path / "novels.txt", args.mb, args.doc_kb)
        tok_dir = make_gpt2_folder(args.data, tmp_path / "tok")
        run_side(OURS, tok_dir, text, args.workers)  # numba's cache, untimed
        best: dict[str, dict] = {}
        for _ in range(args.repeats):
            for name, code in (("tinylm prepare", OURS), ("datasets.map + fast tokenizer", PEER)):
                result = run_side(code, tok_dir, text, args.workers)
                if name not in best or result["wall"] < best[name]["wall"]:
                    best[name] = result
    peer = best["datasets.map + fast tokenizer"]
    shape = f"documents of ~{args.doc_kb:g} KB" if args.doc_kb else "the novels as documents"
    what = (f"{args.input} ({text.stat().st_size / 1e6:.0f} MB, its own documents)" if args.input
            else f"{args.mb:g} MB of pd_novels_heldout.txt ({shape})")
    print(f"{what}, {args.workers} workers, best of {args.repeats}, load average {os.getloadavg()[0]:.1f}")
    print(f"| {'side':<30} | wall s | CPU s | peak MB | tokens | documents | wall ratio | CPU ratio | same ids |")
    print(f"|{'-' * 32}|-------:|------:|--------:|-------:|----------:|-----------:|----------:|----------|")
    for name, r in best.items():
        same = "yes" if r["digest"] == peer["digest"] else "NO"
        print(f"| {name:<30} | {r['wall']:6.2f} | {r['cpu']:5.2f} | {r['peak']:7.0f} | {r['tokens']:,} | "
              f"{r['documents']:,} | {r['wall'] / peer['wall']:9.2f}x | {r['cpu'] / peer['cpu']:8.2f}x | {same:<8} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
