"""The quickstart pipeline end to end on a slice of the bundled corpus (tiny sizes; the full run is `-m slow`)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from conftest import PACKAGE_DATA, REPO_ROOT
from tinylm_hf.chat_quickstart import CHAT_PROMPTS
from tinylm_hf.quickstart import PROMPTS, quickstart


def _slice(path, n_docs):
    docs = path.read_text(encoding="utf-8").split("<|endoftext|>")[:n_docs]
    return "<|endoftext|>".join(docs) + "<|endoftext|>\n"


def small_quickstart(tmp_path, max_new_tokens=8, **options):
    """The quickstart on 150 + 20 bundled stories with a tiny model (threads restored afterwards)."""
    (tmp_path / "train.txt").write_text(_slice(PACKAGE_DATA / "tinystories_train_small.txt", 150))
    (tmp_path / "val.txt").write_text(_slice(PACKAGE_DATA / "tinystories_valid_small.txt", 20))
    threads = torch.get_num_threads()
    try:
        return quickstart(tmp_path / "qs", train_file=tmp_path / "train.txt", val_file=tmp_path / "val.txt",
                          batch_size=4, context_length=32, max_new_tokens=max_new_tokens,
                          model_overrides={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                           "num_attention_heads": 2}, **options)
    finally:
        torch.set_num_threads(threads)


def test_quickstart_pipeline_small(tmp_path):
    result = small_quickstart(tmp_path, vocab_size=300, max_iters=8)
    assert result["iterations"] == 8 and math.isfinite(result["val_loss"])
    assert len(result["stories"]) == len(PROMPTS)
    assert all(story.startswith(prompt) for story, prompt in zip(result["stories"], PROMPTS))
    hf = tmp_path / "qs" / "hf"
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "vocab.json", "README.md"):
        assert (hf / name).is_file(), name
    card = (hf / "README.md").read_text()
    assert "train.txt" in card and "TinyStories" not in card  # the data used, not the bundled corpus
    assert str(tmp_path) not in card  # file names, never local paths


def test_stories_stop_at_a_short_context(tmp_path):
    # 40 new tokens after a prompt do not fit a 32-position model (generate refused them): each story stops there
    result = small_quickstart(tmp_path, vocab_size=300, max_iters=2, max_new_tokens=40)
    assert all(story.startswith(prompt) for story, prompt in zip(result["stories"], PROMPTS))


def test_quickstart_chat_small(tmp_path):
    result = small_quickstart(tmp_path, vocab_size=1000, max_iters=3, chat=True, chat_max_iters=2)
    chat = result["chat"]
    assert chat["objective"] == "sft" and chat["iterations"] == 2 and len(chat["replies"]) == len(CHAT_PROMPTS)
    folder = tmp_path / "qs" / "chat" / "hf"
    assert chat["hf_dir"] == str(folder) and (folder / "chat_template.jinja").is_file()
    assert json.loads((folder / "config.json").read_text())["max_position_embeddings"] == 256


@pytest.mark.slow
def test_full_quickstart_under_ten_minutes(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "quickstart", "--out", str(tmp_path / "qs")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "validation loss" in proc.stdout and "--- story 3 ---" in proc.stdout
