"""`tinylm sft`: a model folder fine-tuned on conversations with the training loop (exact resume included) and
published as a chat model: chat template, generation stopping at the end of the turn, a card saying how."""

from __future__ import annotations

import json
import re

import pytest
import torch

from tiny_chats import make_chat_folder, write_short_chats
from tiny_folders import make_tiny_folder
from tiny_runs import losses
from tinylm_hf.cli import main
from tinylm_hf.tokenization.chat_template import END_OF_TURN_TOKEN

pytestmark = pytest.mark.contract  # a published transformers folder

RUN = ["--max-iters", "6", "--batch-size", "4", "--context-length", "128", "--warmup-iters", "1", "--eval-every", "3",
       "--eval-iters", "2", "--checkpoint-every", "2", "--sample-tokens", "4", "--threads", "1", "--device", "cpu",
       "--progress", "false", "--plot", "false", "--seed", "3"]


@pytest.fixture(scope="module")
def chats(tmp_path_factory):
    return write_short_chats(tmp_path_factory.mktemp("chats") / "tinystories_chats_short.jsonl")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A tiny model whose tokenizer has no chat tokens yet."""
    return make_tiny_folder(tmp_path_factory.mktemp("base") / "base", max_position_embeddings=128)


@pytest.fixture(scope="module")
def tuned(base, chats, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft") / "chat"
    assert main(["sft", "--data", str(chats), "--init-from", str(base), "--out-dir", str(out), *RUN]) == 0
    return out


def test_the_published_folder_is_a_chat_model(tuned, base):
    from transformers import AutoTokenizer

    hf = tuned / "hf"
    tokenizer = AutoTokenizer.from_pretrained(hf)
    end = tokenizer.convert_tokens_to_ids(END_OF_TURN_TOKEN)
    assert (hf / "chat_template.jinja").is_file()
    config = json.loads((hf / "config.json").read_text())
    assert config["vocab_size"] == len(tokenizer) == len(AutoTokenizer.from_pretrained(base)) + 4
    assert json.loads((hf / "generation_config.json").read_text())["eos_token_id"] == [end, tokenizer.eos_token_id]


def test_the_card_says_how_and_on_what_it_was_fine_tuned(tuned):
    card = (tuned / "hf" / "README.md").read_text()
    assert "Fine-tuned from `base` with `tinylm sft`" in card
    assert re.search(r"on [\d,]+ conversations of tinystories_chats_short.jsonl \([\d,]+ tokens\)", card)
    assert "the next-token loss on the assistant's turns only" in card and 'pipeline("text-generation"' in card


def test_the_loss_is_on_assistant_tokens_and_falls(tuned):
    rows = [json.loads(line) for line in (tuned / "metrics.jsonl").read_text().splitlines()]
    evaluations = [r for r in rows if "val_loss" in r]
    assert len(evaluations) == 2 and "val_bpb" not in evaluations[0] and "sample" in evaluations[0]
    steps = losses(tuned)
    assert steps[6] < steps[1]


def test_a_resumed_run_repeats_the_uninterrupted_one(base, chats, tuned, tmp_path):
    split = ["sft", "--data", str(chats), "--init-from", str(base), "--out-dir", str(tmp_path / "split"), *RUN]
    assert main([*split, "--max-iters", "4", "--cosine-cycle-iters", "6"]) == 0
    assert main([*split, "--cosine-cycle-iters", "6", "--resume"]) == 0
    assert losses(tmp_path / "split") == losses(tuned)


def test_a_model_with_chat_tokens_keeps_its_vocabulary(chats, tmp_path):
    folder = make_chat_folder(tmp_path / "chatty", max_position_embeddings=128)
    out = tmp_path / "run"
    assert main(["sft", "--data", str(chats), "--init-from", str(folder), "--out-dir", str(out), *RUN,
                 "--max-iters", "2", "--eval-every", "0"]) == 0
    before = json.loads((folder / "config.json").read_text())["vocab_size"]
    assert json.loads((out / "hf" / "config.json").read_text())["vocab_size"] == before
    assert not (out / "chat_tokenizer").exists()


def test_missing_data_is_one_line_and_exit_2(base, tmp_path, capsys):
    assert main(["sft", "--init-from", str(base), "--out-dir", str(tmp_path / "run")]) == 2
    assert "objective sft needs conversations" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_sft_flags_leave_out_the_pretraining_data(capsys):
    with pytest.raises(SystemExit):
        main(["sft", "--data-dir", "x"])
    assert "unrecognized arguments: --data-dir" in capsys.readouterr().err


def test_fine_tuned_weights_load_and_answer(tuned):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tuned / "hf").eval()
    tokenizer = AutoTokenizer.from_pretrained(tuned / "hf")
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Tell me a story."}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1] and torch.isfinite(model(**ids).logits).all()


def test_a_resume_on_other_conversations_is_refused(base, chats, tmp_path, capsys):
    # the run continued on whatever the file held now, and its card named only the file
    from conftest import run_cli_error

    data = tmp_path / "chats.jsonl"
    data.write_text(chats.read_text(encoding="utf-8"), encoding="utf-8")
    split = ["sft", "--data", str(data), "--init-from", str(base), "--out-dir", str(tmp_path / "split"), *RUN]
    assert main([*split, "--max-iters", "2", "--publish", "none"]) == 0
    lines = data.read_text(encoding="utf-8").splitlines(keepends=True)
    data.write_text("".join(lines[len(lines) // 2:]), encoding="utf-8")  # the same name, other conversations
    message = run_cli_error([*split, "--resume"], capsys)
    assert "changed since the run" in message and "--overwrite" in message
