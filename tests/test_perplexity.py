"""Sliding-window perplexity / bits per byte against direct log-likelihoods from the model."""

from __future__ import annotations

import re

import json
import math

import pytest
from conftest import run_cli_error
import torch
from tiny_folders import BUNDLED_VALID, load_tiny_folder, make_tiny_folder

from tinylm_hf.cli import main
from tinylm_hf.corpus import split_documents
from tinylm_hf.evaluation.perplexity import evaluate_perplexity, make_windows

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_folder(tmp_path_factory.mktemp("ppl") / "model")


@pytest.fixture(scope="module")
def loaded(folder):
    return load_tiny_folder(folder)


@pytest.fixture(scope="module")
def docs():
    return split_documents(BUNDLED_VALID.read_text(encoding="utf-8"))[:3]


def _logprob_of_last(model, context: list[int], target: int) -> float:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([context])).logits[0, -1]
    return torch.log_softmax(logits.float(), -1)[target].item()


def test_short_text_equals_one_forward_pass(loaded):
    model, tok = loaded
    text = "Once upon a time there was a cat."
    ids = [tok.eos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) <= model.config.max_position_embeddings
    with torch.no_grad():
        loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
    result = evaluate_perplexity(model, tok, text, batch_size=2, show_progress=False)
    assert result["tokens"] == len(ids) - 1
    assert result["total_loglikelihood"] == pytest.approx(-loss * (len(ids) - 1), rel=1e-5)
    assert result["perplexity"] == pytest.approx(math.exp(loss), rel=1e-5)


def test_stride_one_gives_every_token_the_full_context(loaded, docs):
    model, tok = loaded
    ctx = model.config.max_position_embeddings
    text = docs[0][:300]
    ids = [tok.eos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > 2 * ctx
    expected = sum(_logprob_of_last(model, ids[max(0, t - ctx) : t], ids[t]) for t in range(1, len(ids)))
    result = evaluate_perplexity(model, tok, text, stride=1, batch_size=16, show_progress=False)
    assert result["total_loglikelihood"] == pytest.approx(expected, rel=1e-5)


def test_windows_score_each_position_once_within_the_context():
    for n, ctx, stride in [(1, 8, 8), (2, 8, 8), (50, 8, 8), (50, 8, 3), (9, 8, 8), (17, 8, 1)]:
        windows = make_windows(n, context_length=ctx, stride=stride)
        scored = [p for start, end, k in windows for p in range(end - k + 1, end + 1)]
        assert scored == list(range(1, n))
        assert all(0 < end - start <= ctx and k <= end - start for start, end, k in windows)


def test_batch_sizes_agree(loaded, docs):
    model, tok = loaded
    one = evaluate_perplexity(model, tok, docs, stride=16, batch_size=1, show_progress=False)
    four = evaluate_perplexity(model, tok, docs, stride=16, batch_size=4, show_progress=False)
    assert four["tokens"] == one["tokens"]
    assert four["total_loglikelihood"] == pytest.approx(one["total_loglikelihood"], rel=1e-5)


def test_texts_are_scored_independently_and_summed(loaded, docs):
    model, tok = loaded
    together = evaluate_perplexity(model, tok, docs[:2], show_progress=False)
    apart = [evaluate_perplexity(model, tok, d, show_progress=False) for d in docs[:2]]
    assert together["total_loglikelihood"] == pytest.approx(sum(r["total_loglikelihood"] for r in apart), rel=1e-6)
    assert together["bytes"] == sum(len(d.encode("utf-8")) for d in docs[:2])


def test_bits_per_byte_is_nats_over_ln2_over_bytes(loaded):
    model, tok = loaded
    text = "Ünïcode ✓ makes bytes and characters differ."
    result = evaluate_perplexity(model, tok, text, show_progress=False)
    assert result["bytes"] == len(text.encode("utf-8")) > len(text)
    assert result["bits_per_byte"] == pytest.approx(-result["total_loglikelihood"] / math.log(2) / result["bytes"])


def test_bad_stride_is_an_error(loaded):
    model, tok = loaded
    with pytest.raises(ValueError, match="stride"):
        evaluate_perplexity(model, tok, "hello", stride=model.config.max_position_embeddings + 1, show_progress=False)


def test_cli_writes_json_matching_the_function(folder, loaded, tmp_path, docs, capsys):
    model, tok = loaded
    data = tmp_path / "two_docs.txt"
    data.write_text("\n<|endoftext|>\n".join(docs[:2]) + "\n<|endoftext|>\n", encoding="utf-8")
    out = tmp_path / "eval.json"
    assert main(["eval", str(folder), "--input", str(data), "--stride", "16", "--batch-size", "4", "--out", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]
    expected = evaluate_perplexity(model, tok, docs[:2], stride=16, show_progress=False)
    assert summary["tokens"] == expected["tokens"]
    assert summary["total_loglikelihood"] == pytest.approx(expected["total_loglikelihood"], rel=1e-6)
    assert "bits_per_byte" in capsys.readouterr().out


def test_cli_dataset_reads_a_local_datasets_folder(folder, loaded, tmp_path, docs):
    model, tok = loaded
    data_dir = tmp_path / "stories"
    data_dir.mkdir()
    (data_dir / "validation.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[:2]))
    out = tmp_path / "eval.json"
    assert main(["eval", str(folder), "--dataset", str(data_dir), "--out", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]
    expected = evaluate_perplexity(model, tok, docs[:2], show_progress=False)
    assert summary["total_loglikelihood"] == pytest.approx(expected["total_loglikelihood"], rel=1e-6)


def test_cli_needs_exactly_one_source(folder, capsys):
    assert re.search("exactly one", run_cli_error(["eval", str(folder)], capsys))


def test_special_token_text_is_scored_as_plain_text(loaded):
    """`<|endoftext|>` inside a text is its characters, each scored: never a document boundary the text forged."""
    model, tok = loaded
    text = "A cat.<|endoftext|>A dog."
    plain = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert tok.eos_token_id not in plain
    assert evaluate_perplexity(model, tok, text, show_progress=False)["tokens"] == len(plain)
