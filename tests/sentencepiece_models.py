"""sentencepiece models trained on the fly for tests (small corpora, seconds; never downloaded)."""

from __future__ import annotations

from pathlib import Path

import sentencepiece as spm

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "tinylm_hf" / "data"
TRAIN = PACKAGE_DATA / "tinystories_train_small.txt"
VALID = PACKAGE_DATA / "tinystories_valid_small.txt"


def train_spm(folder: Path, corpus: Path, model_type: str, vocab_size: int, **options) -> Path:
    """Train a sentencepiece model with identity normalisation and full character coverage."""
    prefix = folder / f"{model_type}_{vocab_size}"
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        model_type=model_type,
        vocab_size=vocab_size,
        normalization_rule_name="identity",
        character_coverage=1.0,
        remove_extra_whitespaces=False,
        num_threads=2,
        minloglevel=2,
        **options,
    )
    return prefix.with_suffix(".model")


def head_lines(path: Path, num_bytes: int, out: Path) -> Path:
    """The first whole lines of `path` up to about `num_bytes`, written to `out`."""
    data = path.read_bytes()[:num_bytes]
    out.write_bytes(data[: data.rfind(b"\n") + 1])
    return out


def sample_lines(limit: int = 400) -> list[str]:
    """Held-out lines plus edge cases: leading/trailing/double spaces, tabs, ▁, non-Latin text."""
    lines = VALID.read_text(encoding="utf-8").split("\n")[:limit]
    return lines + ["", " ", "  two  spaces ", " lead", "tab\there", "a\u2581b", "\u2581x", "é漢字 Жω!", "x\ny"]
