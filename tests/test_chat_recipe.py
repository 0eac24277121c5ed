"""From raw text to a model you can talk to, every step through the `tinylm` CLI: a chat tokenizer, pretraining,
`tinylm sft` on conversations, then the same prompt ids through `tinylm chat`, `pipeline("text-generation")` and
llama.cpp formatting the GGUF export with its own template (tiny sizes; the real recipe, `tinylm quickstart --chat`,
is tested in test_chat_quickstart.py)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from conftest import PACKAGE_DATA
from tinylm_hf.cli import main
from tinylm_hf.corpus.conversations import STORY_CHATS

pytestmark = pytest.mark.contract  # pipeline("text-generation") with messages

TINY_MODEL = json.dumps({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                         "max_position_embeddings": 256})
STEPS = ["--batch-size", "4", "--warmup-iters", "1", "--eval-every", "0", "--eval-iters", "2", "--threads", "1",
         "--progress", "false", "--plot", "false", "--sample-tokens", "0"]
MESSAGES = [{"role": "user", "content": "Tell me a story about a little dog named Max."}]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    """The folder where the recipe ran: tok/, data/, base/, chat/ (chat/hf the chat model)."""
    root = tmp_path_factory.mktemp("recipe")
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:400_000]
    (root / "stories.txt").write_text(text, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["train-tokenizer", "--input", "stories.txt", "--vocab-size", "1024", "--chat", "--out", "tok",
                     "--no-progress"]) == 0
        assert main(["prepare", "--tokenizer", "tok", "--input", "stories.txt", "--out", "data", "--num-proc", "1"]) == 0
        assert main(["train", "--data-dir", "data", "--out-dir", "base", "--model", TINY_MODEL, "--context-length", "64",
                     "--max-iters", "3", *STEPS]) == 0
        assert main(["sft", "--data", str(STORY_CHATS["validation"]), "--init-from", "base/hf", "--out-dir", "chat",
                     "--context-length", "256", "--max-iters", "3", *STEPS]) == 0
    finally:
        os.chdir(cwd)
    return root


def chat_prompt_ids(folder: Path) -> list[int]:
    from tinylm_hf.chat import ChatSession
    from tinylm_hf.publish import load_folder

    session = ChatSession(*load_folder(folder), temperature=0)
    session.messages += MESSAGES
    return session.prompt_ids()


def test_the_chat_model_answers_through_tinylm_chat(recipe, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(MESSAGES[0]["content"] + "\n"))
    assert main(["chat", str(recipe / "chat" / "hf"), "--max-new-tokens", "8", "--threads", "1", "--seed", "0"]) == 0
    assert f"you> {MESSAGES[0]['content']}\nmodel> " in capsys.readouterr().out


def test_pipeline_with_messages_uses_the_same_prompt_ids(recipe):
    from transformers import pipeline

    folder = recipe / "chat" / "hf"
    ids = chat_prompt_ids(folder)
    out = pipeline("text-generation", model=str(folder))(MESSAGES, max_new_tokens=4, do_sample=False,
                                                         return_tensors=True)
    assert list(out[0]["generated_token_ids"][: len(ids)]) == ids


def test_llama_cpp_formats_and_tokenizes_the_gguf_to_the_same_prompt_ids(recipe, tmp_path):
    llama_cpp = pytest.importorskip("cyllama.llama.llama_cpp")
    folder = recipe / "chat" / "hf"
    assert main(["export-gguf", str(folder), str(tmp_path / "chat.gguf"), "--dtype", "f32"]) == 0
    llama_cpp.disable_logging()
    llama_cpp.ggml_backend_load_all()
    model = llama_cpp.LlamaModel(str(tmp_path / "chat.gguf"), llama_cpp.LlamaModelParams())
    messages = [llama_cpp.LlamaChatMessage(role=m["role"], content=m["content"]) for m in MESSAGES]
    text = model.chat_apply_template(model.get_default_chat_template(), messages, True)
    assert model.get_vocab().tokenize(text, True, True) == chat_prompt_ids(folder)


def test_the_card_says_what_the_chat_model_was_fine_tuned_from_and_on(recipe):
    card = (recipe / "chat" / "hf" / "README.md").read_text(encoding="utf-8")
    assert "Fine-tuned from `base` with `tinylm sft`" in card and "tinystories_chats_valid.jsonl" in card
    assert "### The base model `base`" in card and "stories.txt" in card  # the base card's own record

