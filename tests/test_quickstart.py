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
    assert "\n# qs\n" in card and "# train\n" not in card  # named after the quickstart, not its train/ folder
    assert "Measured on val.txt." in card  # the validation file used, not the training file


def test_quickstart_trains_with_muon_and_scores_the_whole_validation_file(tmp_path, capsys):
    from tinylm_hf.training.validation import evaluate_whole_file
    from transformers import AutoModelForCausalLM

    result = small_quickstart(tmp_path, vocab_size=300, max_iters=4)
    assert result["train_config"]["optimizer"] == "muon"
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "qs" / "hf")
    whole = evaluate_whole_file(model, tmp_path / "qs" / "data", 32)
    assert result["whole_val_bpb"] == pytest.approx(whole["val_bpb"])
    assert f"{whole['val_bpb']:.3f} bits per byte, over the whole of val.txt" in capsys.readouterr().out


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


def test_a_typo_in_the_model_overrides_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown TinyLMConfig field 'hidden_sise'.*did you mean 'hidden_size'"):
        quickstart(tmp_path / "qs", model_overrides={"hidden_sise": 64})
    assert not (tmp_path / "qs").exists()


@pytest.mark.parametrize("flag", ["--max-iters", "--chat-max-iters"])
def test_zero_steps_is_refused_up_front(tmp_path, capsys, flag):
    """`--max-iters 0` once ran the whole time-budgeted job; it is refused before any work."""
    from conftest import run_cli_error

    err = run_cli_error(["quickstart", "--out", str(tmp_path / "qs"), flag, "0"], capsys)
    assert "at least 1 step" in err and not (tmp_path / "qs").exists()


@pytest.mark.parametrize("flags", [["--chat-max-iters", "5"], ["--chat-time-budget-s", "30"]], ids=["max-iters", "budget"])
def test_a_chat_flag_without_chat_is_refused_not_ignored(tmp_path, capsys, flags):
    """`--chat-max-iters 5` without `--chat` once ran the whole pretraining and no chat stage, without a word."""
    from conftest import run_cli_error

    err = run_cli_error(["quickstart", "--out", str(tmp_path / "qs"), *flags], capsys)
    assert f"{flags[0]} sets the chat fine-tuning stage, which runs only with --chat" in err
    assert not (tmp_path / "qs").exists()


def test_ctrl_c_keeps_the_checkpoint_publishes_nothing_and_exits_130(tmp_path):
    """Ctrl-C once published a 3-step model and exited 2; now it stops as `tinylm train` does, and the command it
    prints continues the run."""
    import signal
    import time

    from tiny_runs import cli_env, start_cli

    (tmp_path / "train.txt").write_text(_slice(PACKAGE_DATA / "tinystories_train_small.txt", 150))
    (tmp_path / "val.txt").write_text(_slice(PACKAGE_DATA / "tinystories_valid_small.txt", 20))
    out = tmp_path / "qs"
    proc = start_cli("quickstart", "--out", str(out), "--train-file", str(tmp_path / "train.txt"), "--val-data",
                     str(tmp_path / "val.txt"), "--vocab-size", "300", "--max-iters", "100000", "--batch-size", "2",
                     "--context-length", "16", "--threads", "1")
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None and not (out / "train" / "metrics.jsonl").is_file():
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 130, output
    assert not (out / "hf").exists() and list((out / "train" / "checkpoints").glob("ckpt_*.pt"))
    assert "--resume" in output and (out / "train_config.json").is_file()
    step = json.loads((out / "train" / "summary.json").read_text())["iterations"]
    resumed = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "train", "--config", str(out / "train_config.json"),
                              "--resume", "--max-iters", str(step + 2), "--warmup-iters", "1", "--eval-iters", "2",
                              "--publish", "none"],
                             cwd=REPO_ROOT, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout


@pytest.mark.slow
def test_quickstart_then_quickstart_chat_in_one_folder_trains_on_the_new_tokenizers_ids(tmp_path):
    # the README's sequence, each a fresh process: prepare reused the first run's ids (datasets knew the tokenizer by
    # its folder's path), so the chat base was pretrained on ids of the old tokenizer under the new one's header.
    # Whether the old code's cache hit depended on datasets' hash of the map function (it hit with one worker after
    # the folder was deleted); test_prepare's retrained-in-place test pins the cause on every machine.
    from tiny_runs import cli_env
    from tinylm_hf.corpus import load_tokens, read_header, tokenizer_fingerprint
    from tinylm_hf.tokenizer_loading import load_tokenizer

    (tmp_path / "train.txt").write_text(_slice(PACKAGE_DATA / "tinystories_train_small.txt", 150))
    (tmp_path / "val.txt").write_text(_slice(PACKAGE_DATA / "tinystories_valid_small.txt", 20))
    common = ["--out", str(tmp_path / "qs"), "--train-file", str(tmp_path / "train.txt"), "--val-data",
              str(tmp_path / "val.txt"), "--max-iters", "1", "--batch-size", "2", "--context-length", "32",
              "--max-new-tokens", "2", "--threads", "1"]
    for extra in (["--vocab-size", "300"], ["--vocab-size", "1000", "--chat", "--chat-max-iters", "1"]):
        done = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "quickstart", *common, *extra], cwd=REPO_ROOT,
                              env=cli_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data, tokenizer = tmp_path / "qs" / "data", load_tokenizer(tmp_path / "qs" / "tokenizer")
    assert read_header(data / "train.bin")["tokenizer_fingerprint"] == tokenizer_fingerprint(tokenizer)
    ids = load_tokens(data / "train.bin")
    assert int(ids.max()) >= 300  # the first run's tokenizer had ids below 300 only
    start = tokenizer.decode(ids[:40].tolist())
    assert (tmp_path / "train.txt").read_text().startswith(start)  # the ids read back as the text they came from


def test_the_tokenizer_folder_is_replaced_whole(tmp_path):
    # saving over the folder kept an earlier chat run's chat_template.jinja beside a plain tokenizer
    from tinylm_hf import EOS_TOKEN
    from tinylm_hf.quickstart import save_tokenizer_folder
    from tinylm_hf.tokenizer_training import train_tokenizer
    from tinylm_hf.tokenization.chat_template import CHAT_TOKENS, add_chat_tokens
    from tinylm_hf.tokenizer_loading import load_tokenizer

    text = PACKAGE_DATA / "tinystories_valid_small.txt"
    chat = train_tokenizer([text], 300, [EOS_TOKEN, *CHAT_TOKENS], progress=False)
    add_chat_tokens(chat)
    save_tokenizer_folder(chat, tmp_path / "tok")
    save_tokenizer_folder(train_tokenizer([text], 300, [EOS_TOKEN], progress=False), tmp_path / "tok")
    assert not (tmp_path / "tok" / "chat_template.jinja").exists()
    assert load_tokenizer(tmp_path / "tok").chat_template is None


def test_a_folder_that_is_not_a_tokenizer_is_never_replaced(tmp_path):
    from tinylm_hf.quickstart import save_tokenizer_folder

    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a tokenizer folder"):
        save_tokenizer_folder(object(), tmp_path / "tok")
    assert (tmp_path / "tok" / "notes.txt").read_text() == "mine"
