"""`tinylm generate`: greedy output equals model.generate, streaming, eos stop, prompt-length errors."""

from __future__ import annotations

import re

import pytest
from conftest import run_cli_error
import torch
from tiny_folders import load_tiny_folder, make_tiny_folder

from tinylm_hf.cli import main
from tinylm_hf.generation import generate_text

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_folder(tmp_path_factory.mktemp("gen") / "model")


@pytest.fixture(scope="module")
def loaded(folder):
    return load_tiny_folder(folder)


def test_greedy_equals_model_generate(loaded):
    model, tok = loaded
    ids = tok(PROMPT, return_tensors="pt")["input_ids"]
    direct = model.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=tok.eos_token_id)
    new_ids, text = generate_text(model, tok, PROMPT, max_new_tokens=10, temperature=0)
    assert new_ids == direct[0, ids.shape[1] :].tolist()
    assert text == tok.decode(new_ids, skip_special_tokens=True)


def test_cli_streams_the_greedy_continuation(folder, loaded, capsys):
    model, tok = loaded
    _, text = generate_text(model, tok, PROMPT, max_new_tokens=8, temperature=0)
    assert main(["generate", str(folder), "--prompt", PROMPT, "--max-new-tokens", "8", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.strip() == (PROMPT + text).strip()


def test_seeded_sampling_is_reproducible_and_seed_dependent(loaded):
    model, tok = loaded
    a = generate_text(model, tok, PROMPT, max_new_tokens=12, temperature=1.0, top_k=50, top_p=0.95, seed=3)
    b = generate_text(model, tok, PROMPT, max_new_tokens=12, temperature=1.0, top_k=50, top_p=0.95, seed=3)
    c = generate_text(model, tok, PROMPT, max_new_tokens=12, temperature=1.0, top_k=50, top_p=0.95, seed=4)
    assert a == b
    assert a != c


def test_stops_at_eos(folder, loaded):
    from transformers import AutoModelForCausalLM

    _, tok = loaded
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    assert tok.eos_token_id == 0
    with torch.no_grad():  # all logits equal: greedy argmax takes the first id, which is eos
        model.lm_head.weight.zero_()
    new_ids, text = generate_text(model, tok, PROMPT, max_new_tokens=10, temperature=0)
    assert new_ids == [tok.eos_token_id]
    assert text == ""


def test_prompt_longer_than_context_is_a_clear_error(folder, capsys):
    long_prompt = "word " * 200
    assert re.search("context is 32 tokens", run_cli_error(["generate", str(folder), "--prompt", long_prompt, "--max-new-tokens", "4"], capsys))
