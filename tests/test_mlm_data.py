"""Masked-LM training with our loop: `tinylm train --objective mlm`, exact resume, static masks from prepare."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tiny_runs import losses, tiny_config, write_byte_dataset
from tinylm_hf.cli import main
from tinylm_hf.tokenizer_loading import load_tokenizer
from tinylm_hf.training import train
from tinylm_hf.training.objectives.mlm_data import StaticMasks, write_static_masks

MASK = "<|mask|>"


@pytest.fixture(scope="module")
def mask_data(tmp_path_factory) -> Path:
    """Byte-level TinyStories data whose tokenizer has a mask token, with static masks stored beside it."""
    data = write_byte_dataset(tmp_path_factory.mktemp("mlm-bytes"), n_bytes=60_000, extra_special_tokens=(MASK,))
    write_static_masks(data, load_tokenizer(data / "tokenizer"), seed=3)
    return data


def test_train_cli_trains_an_encoder_and_publishes_it(mask_data, tmp_path):
    out = tmp_path / "run"
    flags = {"--data-dir": mask_data, "--out-dir": out, "--objective": "mlm", "--masking": "span",
             "--model": json.dumps({"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
                                    "num_attention_heads": 2}),
             "--batch-size": 4, "--context-length": 32, "--max-iters": 8, "--warmup-iters": 2, "--eval-every": 4,
             "--eval-iters": 2, "--checkpoint-every": 4, "--device": "cpu", "--progress": "false",
             "--plot": "false", "--threads": 1}
    assert main(["train", *[str(x) for kv in flags.items() for x in kv]]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objective"] == "mlm" and summary["masking"] == "span"
    assert 0 <= summary["val_accuracy"] <= 1 and summary["val_bpb"] is None
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if "val_loss" in line]
    assert [e["iter"] for e in evals] == [4, 8] and all("val_accuracy" in e for e in evals)
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(out / "hf")
    assert type(model).__name__ == "TinyLMForMaskedLM"
    card = (out / "hf" / "README.md").read_text()
    assert "masked language modelling (mlm) with span masking (SpanBERT" in card
    assert "pipeline_tag: fill-mask" in card


def test_resume_repeats_the_uninterrupted_run(mask_data, tmp_path):
    kw = dict(objective="mlm", masking="whole_word", context_length=32, cosine_cycle_iters=12, eval_every=0)
    train(tiny_config(mask_data, tmp_path / "full", **kw))
    train(tiny_config(mask_data, tmp_path / "split", **kw, max_iters=8))
    train(tiny_config(mask_data, tmp_path / "split", **kw, resume=True))
    assert losses(tmp_path / "split") == losses(tmp_path / "full")
    a = torch.load(tmp_path / "full" / "checkpoints" / "ckpt_00000012.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "split" / "checkpoints" / "ckpt_00000012.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_static_masks_are_stored_once_and_read_back(mask_data, tmp_path):
    tokens = np.fromfile(mask_data / "train.bin", dtype=np.uint16)
    masks = StaticMasks.open(mask_data, "train", tokens)
    chosen = np.asarray(masks.chosen, dtype=bool)
    specials = tokens >= 256
    assert abs(chosen.mean() / (~specials).mean() - 0.15) < 0.01 and not (chosen & specials).any()
    first, again = masks.window(tokens, 100, 64), masks.window(tokens, 100, 64)
    np.testing.assert_array_equal(first[0], again[0])
    write_static_masks(mask_data, load_tokenizer(mask_data / "tokenizer"), seed=3)  # same seed: same file
    np.testing.assert_array_equal(np.asarray(StaticMasks.open(mask_data, "train", tokens).masked), np.asarray(masks.masked))
    summary = train(tiny_config(mask_data, tmp_path / "static", objective="mlm", masking="static", context_length=32,
                                max_iters=4))
    assert summary.masking == "static" and summary.val_accuracy is not None


def test_static_masking_without_prepared_masks_names_the_fix(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000, extra_special_tokens=(MASK,))
    with pytest.raises(FileNotFoundError, match="prepare --mlm-static"):
        train(tiny_config(data, tmp_path / "run", objective="mlm", masking="static"))


def test_mlm_needs_a_mask_token(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    with pytest.raises(ValueError, match="no mask token"):
        train(tiny_config(data, tmp_path / "run", objective="mlm"))


def test_static_masks_of_a_reprepared_token_file_of_the_same_length_are_refused(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000, extra_special_tokens=(MASK,))
    write_static_masks(data, load_tokenizer(data / "tokenizer"))
    tokens = np.fromfile(data / "train.bin", dtype=np.uint16)
    np.roll(tokens, 7).tofile(data / "train.bin")  # prepared again: other tokens, the same count and header
    with pytest.raises(ValueError, match="were not made from this train.bin"):
        train(tiny_config(data, tmp_path / "run", objective="mlm", masking="static"))


def test_static_masks_of_another_masking_probability_are_refused(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000, extra_special_tokens=(MASK,))
    write_static_masks(data, load_tokenizer(data / "tokenizer"), mlm_probability=0.3)
    with pytest.raises(ValueError, match="mask 0.3 of the tokens, the run asks for mlm_probability 0.15"):
        train(tiny_config(data, tmp_path / "run", objective="mlm", masking="static"))
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run" / "checkpoints").glob("*.pt"))
