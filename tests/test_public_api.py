"""The public names and signatures that the issues promise (hidden acceptance checks call them)."""

from __future__ import annotations

import inspect

import pytest

import tinylm_hf
from tinylm_hf import training

SIGNATURES = [
    (tinylm_hf.train_bpe, ["input_path", "vocab_size", "special_tokens", "num_workers", "pattern", "progress"]),
    (tinylm_hf.train_bpe_from_counts, ["counts", "vocab_size", "special_tokens"]),
    (tinylm_hf.BPETokenizer, ["vocab", "merges", "special_tokens"]),
    (tinylm_hf.BPETokenizer.from_files, ["vocab_path", "merges_path", "special_tokens"]),
    (tinylm_hf.softmax, ["x", "dim"]),
    (tinylm_hf.scaled_dot_product_attention, ["q", "k", "v", "mask"]),
    (tinylm_hf.cosine_lr, ["it", "max_lr", "min_lr", "warmup_iters", "cosine_cycle_iters"]),
    (tinylm_hf.clip_grad_norm, ["parameters", "max_l2_norm"]),
    (tinylm_hf.cross_entropy, ["logits", "targets"]),
    (tinylm_hf.get_batch, ["data", "batch_size", "context_length", "device"]),
    (tinylm_hf.save_checkpoint, ["model", "optimizer", "iteration", "out"]),
    (tinylm_hf.load_checkpoint, ["src", "model", "optimizer"]),
    (tinylm_hf.AdamW, ["params", "lr", "betas", "eps", "weight_decay"]),
    (training.train, ["config"]),
]


@pytest.mark.parametrize("fn,names", SIGNATURES, ids=[getattr(f, "__qualname__", str(f)) for f, _ in SIGNATURES])
def test_signature_starts_with_the_promised_parameters(fn, names):
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    assert params[: len(names)] == names


def test_tokenizer_methods_exist():
    for name in ("encode", "decode", "encode_iterable", "save"):
        assert callable(getattr(tinylm_hf.BPETokenizer, name))
