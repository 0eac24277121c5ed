"""`tinylm quickstart --chat`: the quickstart's model fine-tuned on the bundled story conversations answers
requests for stories (tiny sizes; the full recipe within minutes is `-m slow`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import PACKAGE_DATA, REPO_ROOT
from tinylm_hf.chat_quickstart import CHAT_PROMPTS
from tinylm_hf.quickstart import quickstart


def stories(path, n_docs: int) -> str:
    docs = path.read_text(encoding="utf-8").split("<|endoftext|>")[:n_docs]
    return "<|endoftext|>".join(docs) + "<|endoftext|>\n"


def test_quickstart_chat_small(tmp_path):
    (tmp_path / "train.txt").write_text(stories(PACKAGE_DATA / "tinystories_train_small.txt", 150))
    (tmp_path / "val.txt").write_text(stories(PACKAGE_DATA / "tinystories_valid_small.txt", 20))
    threads = torch.get_num_threads()
    try:
        result = quickstart(tmp_path / "qs", train_file=tmp_path / "train.txt", val_file=tmp_path / "val.txt",
                            vocab_size=1000, max_iters=3, batch_size=4, context_length=32, max_new_tokens=8,
                            model_overrides={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                             "num_attention_heads": 2}, chat=True, chat_max_iters=2)
    finally:
        torch.set_num_threads(threads)
    chat = result["chat"]
    assert chat["objective"] == "sft" and chat["iterations"] == 2 and len(chat["replies"]) == len(CHAT_PROMPTS)
    folder = tmp_path / "qs" / "chat" / "hf"
    assert chat["hf_dir"] == str(folder) and (folder / "chat_template.jinja").is_file()
    assert json.loads((folder / "config.json").read_text())["max_position_embeddings"] == 256


@pytest.mark.slow
def test_quickstart_chat_answers_with_stories_within_minutes(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "quickstart", "--chat", "--out", str(tmp_path / "qs")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    replies = [line.removeprefix("model> ") for line in proc.stdout.splitlines() if line.startswith("model> ")]
    assert len(replies) == 3
    story_words = ("Once", "day", "named", "happy", "play", "friend")
    assert sum(len(r.split()) >= 20 and any(w in r for w in story_words) for r in replies) >= 2, replies
