"""`generate_text` and `tinylm generate`: greedy output equals model.generate, streaming, eos stop,
prompt-length errors, sliding past the context, plain-text prompts."""

from __future__ import annotations

import re

import pytest
from conftest import run_cli_error
import torch
from tiny_folders import load_tiny_folder, make_tiny_folder

from tinylm_hf.cli import main
from tinylm_hf.generation import generate_text

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

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


def test_greedy_beyond_the_context_continues_from_the_last_half_window(loaded):
    model, tok = loaded
    ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    context = model.config.max_position_embeddings
    notices: list[str] = []
    new_ids, _ = generate_text(model, tok, PROMPT, max_new_tokens=context, temperature=0, notify=notices.append)
    first = new_ids[: context - len(ids)]
    expected_first = model.generate(torch.tensor([ids]), max_new_tokens=context - len(ids), do_sample=False,
                                    pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
    assert first == expected_first
    assert len(new_ids) == context and tok.eos_token_id not in new_ids  # these weights never pick eos greedily
    assert len(notices) >= 1 and f"context of {context} tokens full: sliding the window" in notices[0]


def test_special_token_text_in_a_prompt_is_plain_unless_allowed(loaded):
    model, tok = loaded
    prompt = "Hi<|endoftext|>"
    seen = []
    real_generate = model.generate

    def spy(*args, **kwargs):
        seen.append(kwargs["input_ids"][0].tolist())
        return real_generate(*args, **kwargs)

    model.generate = spy
    try:
        generate_text(model, tok, prompt, max_new_tokens=1, temperature=0)
        generate_text(model, tok, prompt, max_new_tokens=1, temperature=0, allow_special=True)
    finally:
        del model.generate
    plain, special = seen
    assert tok.eos_token_id not in plain and special[-1] == tok.eos_token_id


@pytest.fixture(scope="module")
def word_tokenizers():
    """{algorithm: tokenizer} trained on a little bundled text: the kinds whose pieces decode differently alone."""
    from tiny_folders import BUNDLED_VALID

    from tinylm_hf.tokenizer_training import train_tokenizer

    text = BUNDLED_VALID.read_text(encoding="utf-8")[:50_000]
    return {algorithm: train_tokenizer(iter([text]), 500, algorithm=algorithm, progress=False)
            for algorithm in ("sentencepiece-bpe", "wordpiece")}


@pytest.mark.parametrize("algorithm,prompt,continuation,expected", [
    ("sentencepiece-bpe", "She was", "happy", " happy"),  # "▁happy" alone decodes to "happy"
    ("wordpiece", "She was play", "##ing", "ing"),  # "##ing" alone decodes to "##ing"
])
def test_new_text_is_decoded_after_the_prompt(word_tokenizers, capsys, algorithm, prompt, continuation, expected):
    from tinylm_hf.generation import ContinuationStreamer, continuation_text

    tok = word_tokenizers[algorithm]
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    new_ids = (tok(continuation, add_special_tokens=False)["input_ids"] if algorithm != "wordpiece"
               else tok.convert_tokens_to_ids(["##i", "##n", "##g"]))
    assert continuation_text(tok, prompt_ids, new_ids) == expected
    streamer = ContinuationStreamer(tok, prompt_ids)
    streamer.put(torch.tensor([prompt_ids]))  # generate() passes its input first: skipped
    for token in new_ids:
        streamer.put(torch.tensor([token]))
    streamer.end()
    streamer.flush()
    assert capsys.readouterr().out == expected + "\n"


def test_streamer_holds_back_a_partial_character(loaded, capsys):
    """Byte-level tokens of one emoji arrive one by one: nothing prints until the character is whole."""
    from tinylm_hf.generation import ContinuationStreamer

    _, tok = loaded
    prompt_ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    emoji_ids = tok(" 🌍!", add_special_tokens=False)["input_ids"]
    assert len(emoji_ids) > 2  # the emoji's four bytes are not one token in this small vocabulary
    streamer = ContinuationStreamer(tok, prompt_ids)
    streamer.put(torch.tensor([prompt_ids]))
    printed = []
    for token in emoji_ids:
        streamer.put(torch.tensor([token]))
        printed.append(capsys.readouterr().out)
    streamer.flush()
    assert "".join(printed) + capsys.readouterr().out == " 🌍!\n"
    assert all("\ufffd" not in p for p in printed)
