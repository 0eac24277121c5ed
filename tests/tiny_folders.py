"""Builders for tiny saved TinyLM folders (model + tokenizer) shared by the ecosystem tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from conftest import env_without_tinylm

REPO_ROOT = Path(__file__).resolve().parents[1]
BUNDLED_VALID = REPO_ROOT / "tinylm_hf" / "data" / "tinystories_valid_small.txt"
ENDOFTEXT = "<|endoftext|>"


def train_reference_bpe(folder: Path, vocab_size: int = 384) -> None:
    """Write GPT-2-format vocab.json + merges.txt trained with the `tokenizers` library (a reference BPE)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[ENDOFTEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    text = BUNDLED_VALID.read_text(encoding="utf-8")[:200_000]
    tok.train_from_iterator([doc for doc in text.split(ENDOFTEXT) if doc.strip()], trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.model.save(str(folder))


def make_tiny_folder(folder: Path, *, seed: int = 0, scale: float | None = 0.2, masked_lm: bool = False,
                     **overrides) -> Path:
    """Save a randomly initialised tiny TinyLMForCausalLM (TinyLMForMaskedLM with `masked_lm`) and its TinyLMTokenizer
    into `folder`; the weights are drawn from N(0, `scale`), or initialised as the model does with None."""
    from tinylm_hf import TinyLMConfig, TinyLMForCausalLM, TinyLMForMaskedLM, TinyLMTokenizer

    files = folder.parent / f"{folder.name}-bpe"
    train_reference_bpe(files)
    tokenizer = TinyLMTokenizer(vocab_file=str(files / "vocab.json"), merges_file=str(files / "merges.txt"))
    eos = tokenizer.eos_token_id
    settings = dict(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=32, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
    )
    settings.update(overrides)
    torch.manual_seed(seed)
    model = (TinyLMForMaskedLM if masked_lm else TinyLMForCausalLM)(TinyLMConfig(**settings))
    # Larger-than-default weights so logits are far from uniform and comparisons are meaningful.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1 and scale is not None:
                p.normal_(0.0, scale)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def sentencepiece_folder(folder: Path, algorithm: str, extra_rows: int = 8) -> Path:
    """A tiny TinyLM whose tokenizer is `algorithm` (sentencepiece-bpe / unigram), trained on the bundled text."""
    from tinylm_hf import TinyLMConfig, TinyLMForCausalLM
    from tinylm_hf.tokenizer_training import train_tokenizer

    text = BUNDLED_VALID.read_text(encoding="utf-8")[:100_000] + "\nÆsir 東京 🌍"
    # llama.cpp's Unigram tokenizer has no byte fallback: export-gguf needs it off
    tokenizer = train_tokenizer(iter([text]), 400, algorithm=algorithm, progress=False,
                                byte_fallback=False if algorithm == "unigram" else None)
    torch.manual_seed(0)
    model = TinyLMForCausalLM(TinyLMConfig(
        vocab_size=len(tokenizer) + extra_rows, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, max_position_embeddings=32, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def load_tiny_folder(folder: Path):
    """(model in eval mode, tokenizer) loaded from a saved folder through the Auto classes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def load_with_log(loader, folder: Path, **kwargs) -> tuple:
    """(model, loading info, transformers' log text) of ``loader.from_pretrained(folder)`` (a class or Auto class)."""
    import logging

    from transformers.utils import logging as hf_logging

    logger = hf_logging.get_logger("transformers.modeling_utils")
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger.addHandler(handler)
    try:
        model, info = loader.from_pretrained(folder, output_loading_info=True, **kwargs)
    finally:
        logger.removeHandler(handler)
    return model, info, "\n".join(records)


def run_fresh(code: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    """Run Python code in a fresh process where tinylm_hf is NOT importable, offline."""
    env = env_without_tinylm(cwd, HF_HOME=str(cwd / "hf_home"))
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"fresh process failed:\nSTDOUT:\n{result.stdout}\nSTDERR:\n{result.stderr[-4000:]}")
    return result

