"""Tokens per byte on held-out text: each WordPiece merge rule of `train_wordpiece` vs `tokenizers`' WordPieceTrainer.

Every rule trains on the same text as `tokenizers` (BERT normaliser and pre-tokenizer, cased, BERT's five
special tokens, the same vocabulary size); held-out text (never trained on) is then encoded by the same
`tokenizers` WordPiece pipeline over each vocabulary, so only the vocabularies differ. Fewer tokens per
byte is better; `ratio` is tokens over `tokenizers`' tokens (below 1: ours compresses better).
`[UNK]` counts the unknown tokens on held-out text (a word holding an unseen character is one `[UNK]`).

    python scripts/bench_wordpiece_scores.py [--data ../shared/data] [--vocab-size 4096] [--train-mb 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from tinylm_hf.tokenization.wordpiece.core import BERT_SPECIAL_TOKENS, BERT_UNK
from tinylm_hf.tokenization.wordpiece.backend import build_bert_wordpiece
from tinylm_hf.tokenization.wordpiece.train import WORDPIECE_SCORES, train_wordpiece

REPO_ROOT = Path(__file__).resolve().parents[1]
# corpus name -> (training file, held-out file or None: every tenth line of the training file is held out)
CORPORA = {
    "tinystories": ("tinystories_train_small.txt", "tinystories_valid_small.txt"),
    "novels": ("pd_novels_heldout.txt", None),
    "shakespeare": ("tiny_shakespeare.txt", None),
    "multilingual": ("multilingual_samples.txt", None),
}
HELD_OUT_BYTES = 1_000_000  # at most this much held-out text per corpus


def cut_at_line(text: str, chars: int) -> int:
    """The index just after the last newline before `chars` (or `chars` when there is none)."""
    end = text.rfind("\n", 0, chars)
    return chars if end < 0 else end + 1


def split_corpus(data: Path, train_name: str, held_name: str | None, train_bytes: int) -> tuple[str, str]:
    """(training text of at most ~`train_bytes`, held-out text) of one corpus.

    Without a held-out file, every tenth line is held out (so a multilingual file's held-out text is in
    the languages it trained on).
    """
    text = (data / train_name).read_text(encoding="utf-8")
    if held_name is None:
        lines = text.splitlines(keepends=True)
        text, held = "".join(lines[i] for i in range(len(lines)) if i % 10 != 9), "".join(lines[9::10])
    else:
        held = (data / held_name).read_text(encoding="utf-8")
    return text[: cut_at_line(text, train_bytes)], held[: cut_at_line(held, HELD_OUT_BYTES)]


def train_hf(path: Path, vocab_size: int) -> dict[str, int]:
    """The vocabulary `tokenizers`' WordPieceTrainer learns from `path`."""
    tokenizer = Tokenizer(models.WordPiece(unk_token=BERT_UNK))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=None)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(BERT_SPECIAL_TOKENS),
                                        show_progress=False)
    tokenizer.train([str(path)], trainer)
    return tokenizer.get_vocab()


def measure(vocab: dict[str, int], held: str) -> tuple[float, int]:
    """(tokens per byte, unknown tokens) of `held` encoded with `vocab`."""
    pipeline = build_bert_wordpiece(vocab, lowercase=False, unk_token=BERT_UNK, cls_token=None, sep_token=None)
    ids = pipeline.encode(held, add_special_tokens=False).ids
    return len(ids) / len(held.encode("utf-8")), ids.count(vocab[BERT_UNK])


def bench_corpus(name: str, data: Path, vocab_size: int, train_bytes: int, workdir: Path) -> list[str]:
    """One table row: the corpus, its sizes, then tokens/byte ([UNK]) of tokenizers and of each rule."""
    train_text, held = split_corpus(data, *CORPORA[name], train_bytes)
    path = workdir / f"{name}.txt"
    path.write_text(train_text, encoding="utf-8")
    hf_rate, hf_unk = measure(train_hf(path, vocab_size), held)
    cells = [name, f"{len(train_text.encode()) / 1e6:.2f}", f"{len(held.encode()) / 1e6:.2f}",
             f"{hf_rate:.4f} ({hf_unk})"]
    for score in WORDPIECE_SCORES:
        start = time.perf_counter()
        tokens = train_wordpiece(path, vocab_size, score=score, progress=False)
        seconds = time.perf_counter() - start
        rate, unk = measure({token: i for i, token in enumerate(tokens)}, held)
        cells.append(f"{rate:.4f} ({unk}) x{rate / hf_rate:.4f}, {seconds:.0f} s")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = os.environ.get("TINYLM_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data"
    parser.add_argument("--data", type=Path, default=Path(default_data), help="../shared/data or $TINYLM_SHARED_DATA")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--train-mb", type=float, default=3.0, help="training text per corpus, MB (at most)")
    parser.add_argument("--corpus", action="append", choices=list(CORPORA), help="only these (repeatable)")
    args = parser.parse_args()
    header = ["corpus", "train MB", "held-out MB", "tokenizers tok/B ([UNK])",
              *(f"{score} tok/B ([UNK]) ratio, train time" for score in WORDPIECE_SCORES)]
    print(f"vocab size {args.vocab_size}; tok/B: held-out tokens per UTF-8 byte (lower is better)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.corpus or CORPORA:
            row = bench_corpus(name, args.data, args.vocab_size, int(args.train_mb * 1e6), Path(workdir))
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
