"""Benchmark the sentencepiece-style tokenizers (Unigram, SentencePiece BPE) against their peers.

(1) Training: `train_unigram` vs `sentencepiece` (unigram) vs `tokenizers`' UnigramTrainer, and
`train_sentencepiece_bpe` vs `sentencepiece` (bpe, byte fallback) vs `tokenizers`' BpeTrainer
(Metaspace pre-tokenizer, byte fallback). Identity normalisation, character_coverage=1.0, same
vocab size. Each trainer runs in a fresh subprocess (wall time of the training call, peak memory
of the process tree; see bench_tokenizer.run_child).
(2) Encoding: throughput of our encoders vs `sentencepiece` and vs the `tokenizers` twin
(`encode_batch`, which uses both cores) on one model trained by sentencepiece.

    python scripts/bench_sentencepiece.py [--quick] [--data ../shared/data] [--novels-mb 5] [--repeats 3]
        [--family unigram|sentencepiece-bpe] [--no-tokenizers] [--no-encoding]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tokenizer import REPO_ROOT, run_child  # noqa: E402

PRELUDE = """
import json, resource, sys, time, types
root, path, vocab_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
def report(start, size):
    print(json.dumps({"wall": time.perf_counter() - start, "vocab": size,
                      "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
# Our trainers without tinylm_hf/__init__ (whose torch import would dominate memory).
OURS = PRELUDE + """
for name, sub in (("tinylm_hf", ""), ("tinylm_hf.tokenization", "/tokenization")):
    module = types.ModuleType(name)
    module.__path__ = [root + "/tinylm_hf" + sub]
    sys.modules[name] = module
from tinylm_hf.tokenization.{module} import {function}
start = time.perf_counter()
pieces = {function}(path, vocab_size, progress=False)
report(start, len(pieces))
"""
SPM = PRELUDE + """
import sentencepiece as spm, io
start = time.perf_counter()
out = io.BytesIO()
spm.SentencePieceTrainer.train(input=path, model_writer=out, model_type="{model_type}", vocab_size=vocab_size,
    byte_fallback={byte_fallback}, normalization_rule_name="identity", character_coverage=1.0,
    remove_extra_whitespaces=False, num_threads=2, minloglevel=2)
report(start, vocab_size)
"""
HF = PRELUDE + """
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
tokenizer = Tokenizer(models.{model}())
tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
trainer = trainers.{trainer}(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False{extra})
start = time.perf_counter()
tokenizer.train([path], trainer)
report(start, tokenizer.get_vocab_size())
"""
def fill(template: str, **values: str) -> str:
    """Substitute {name} fields without touching the JSON braces in the template."""
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


FAMILIES = {
    "unigram": {
        "ours": fill(OURS, module="unigram.train", function="train_unigram"),
        "sentencepiece": fill(SPM, model_type="unigram", byte_fallback="False"),
        "tokenizers": fill(HF, model="Unigram", trainer="UnigramTrainer", extra=', unk_token="<unk>"'),
    },
    "sentencepiece-bpe": {
        "ours": fill(OURS, module="sentencepiece_bpe.train", function="train_sentencepiece_bpe"),
        "sentencepiece": fill(SPM, model_type="bpe", byte_fallback="True"),
        "tokenizers": fill(HF, model="BPE", trainer="BpeTrainer", extra=""),
    },
}


def novels_slice(data: Path, megabytes: float, folder: Path) -> Path:
    raw = (data / "pd_novels_heldout.txt").read_bytes()[: int(megabytes * 1e6)]
    out = folder / f"novels_{megabytes:g}mb.txt"
    out.write_bytes(raw[: raw.rfind(b"\n") + 1])
    return out


def bench_training(corpora: list[tuple[Path, int]], families: list[str], repeats: int, peers: list[str]) -> None:
    """Each row: the trainers run back to back (ours first, then the peers), `repeats` times.

    The machine is shared, so each repeat's ratio pairs two runs taken seconds apart; the table
    shows the median of each trainer and the median (min-max) of the per-repeat ratios.
    """
    names = ["ours", *peers]
    print(f"(1) training: median wall seconds / peak MB of {repeats} paired repeats, each trainer in a fresh subprocess")
    print(f"{'family':<18}{'corpus':<28}{'vocab':>6}" + "".join(f"{n:>16}" for n in names)
          + f"{'ours/spm (min-max)':>24}{'mem ours/spm':>14}{'cpu ours/spm':>14}")
    for family in families:
        children = FAMILIES[family]
        for path, vocab_size in corpora:
            runs: dict[str, list[dict]] = {n: [] for n in names}
            for _ in range(repeats):
                for name in names:
                    runs[name].append(run_child(children[name], path, vocab_size))
            ratios = sorted(o["wall"] / s["wall"] for o, s in zip(runs["ours"], runs["sentencepiece"]))
            mem = statistics.median(r["peak_mb"] for r in runs["ours"]) / statistics.median(r["peak_mb"] for r in runs["sentencepiece"])
            # CPU seconds of the whole subprocess (interpreter start included; sentencepiece's 2 threads summed)
            cpu = statistics.median(o["cpu"] / s["cpu"] for o, s in zip(runs["ours"], runs["sentencepiece"]))
            cells = "".join(f"{statistics.median(r['wall'] for r in runs[n]):>9.2f}s/{statistics.median(r['peak_mb'] for r in runs[n]):>5.0f}"
                            for n in names)
            spread = f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"
            print(f"{family:<18}{path.name:<28}{vocab_size:>6}{cells}{spread:>24}{mem:>13.2f}x{cpu:>13.2f}x", flush=True)


def bench_encoding(train: Path, texts: dict[str, Path], folder: Path, repeats: int) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    import sentencepiece as spm

    from tinylm_hf.tokenization.metaspace.backend import build_metaspace_backend
    from tinylm_hf.tokenization.sentencepiece_bpe.core import SentencePieceBPETokenizer
    from tinylm_hf.tokenization.unigram.core import UnigramTokenizer

    print("\n(2) encoding throughput, MB/s (best of %d); model trained by sentencepiece on %s, vocab 4000" % (repeats, train.name))
    print(f"{'family':<18}{'text':<28}{'ours':>8}{'sentencepiece':>15}{'tokenizers':>12}{'ours/tok':>10}{'same ids':>10}")
    for family, cls, model_type in (("unigram", UnigramTokenizer, "unigram"), ("sentencepiece-bpe", SentencePieceBPETokenizer, "bpe")):
        prefix = folder / model_type
        spm.SentencePieceTrainer.train(input=str(train), model_prefix=str(prefix), model_type=model_type, vocab_size=4000,
                                       byte_fallback=True, normalization_rule_name="identity", character_coverage=1.0,
                                       remove_extra_whitespaces=False, num_threads=2, minloglevel=2)
        processor = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
        ours = cls.from_sentencepiece(f"{prefix}.model")
        twin = build_metaspace_backend(ours)
        for name, path in texts.items():
            lines = path.read_text(encoding="utf-8").split("\n")
            megabytes = path.stat().st_size / 1e6
            speeds, outputs = {}, {}
            for runner, encode in (("ours", lambda: [ours.encode(line) for line in lines]),
                                   ("sentencepiece", lambda: processor.encode(lines)),
                                   ("tokenizers", lambda: [e.ids for e in twin.encode_batch(lines)])):
                best = float("inf")
                for _ in range(repeats):
                    start = time.perf_counter()
                    outputs[runner] = encode()
                    best = min(best, time.perf_counter() - start)
                speeds[runner] = megabytes / best
            same = outputs["ours"] == outputs["sentencepiece"] == outputs["tokenizers"]
            print(f"{family:<18}{name:<28}{speeds['ours']:>8.2f}{speeds['sentencepiece']:>15.2f}"
                  f"{speeds['tokenizers']:>12.2f}{speeds['ours'] / speeds['tokenizers']:>9.2f}x{str(same):>10}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO_ROOT.parent / "shared" / "data")
    parser.add_argument("--novels-mb", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true", help="TinyStories only, one encoding repeat")
    parser.add_argument("--repeats", type=int, default=3, help="paired training runs per row")
    parser.add_argument("--family", choices=sorted(FAMILIES), action="append", help="train only these (repeatable)")
    parser.add_argument("--no-tokenizers", action="store_true", help="leave out tokenizers' trainers (faster)")
    parser.add_argument("--no-encoding", action="store_true", help="skip the encoding table (2)")
    args = parser.parse_args(argv)
    tinystories = REPO_ROOT / "tinylm_hf" / "data" / "tinystories_train_small.txt"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpora = [(tinystories, 4000)]
        texts = {"tinystories_valid_small.txt": REPO_ROOT / "tinylm_hf" / "data" / "tinystories_valid_small.txt"}
        if not args.quick and (args.data / "pd_novels_heldout.txt").is_file():
            novels = novels_slice(args.data, args.novels_mb, folder)
            corpora.append((novels, 8000))
            texts[novels.name] = novels
        peers = ["sentencepiece"] + ([] if args.no_tokenizers else ["tokenizers"])
        bench_training(corpora, args.family or list(FAMILIES), args.repeats, peers)
        if not args.no_encoding:
            bench_encoding(tinystories, texts, folder, 1 if args.quick else 3)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
