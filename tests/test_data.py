"""Batches, the evaluation iterator, and `tinylm prepare` on real text with a real tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import PACKAGE_DATA, shared_file
from tinylm_hf.corpus import load_tokens, prepare_dataset
from tinylm_hf.training import get_batch, iter_eval_batches

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)


def test_get_batch_shapes_and_shift():
    data = np.arange(100, dtype=np.uint16)
    x, y = get_batch(data, batch_size=8, context_length=10, device="cpu")
    assert x.shape == y.shape == (8, 10)
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(y, x + 1)  # arange data: the shift by one is +1


def test_get_batch_reaches_every_start_and_no_other():
    data = np.arange(30, dtype=np.int64)
    ctx = 7
    starts = set()
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        x, _ = get_batch(data, 16, ctx, "cpu", generator=gen)
        starts.update(x[:, 0].tolist())
    assert starts == set(range(len(data) - ctx))


def test_get_batch_deterministic_under_seeded_generator():
    data = np.random.default_rng(0).integers(0, 1000, 5000)
    a = get_batch(data, 4, 32, "cpu", generator=torch.Generator().manual_seed(3))
    b = get_batch(data, 4, 32, "cpu", generator=torch.Generator().manual_seed(3))
    c = get_batch(data, 4, 32, "cpu", generator=torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_get_batch_too_short_data_raises():
    with pytest.raises(ValueError, match="context_length"):
        get_batch(np.arange(10), 2, 10, "cpu")


def test_get_batch_bad_device_raises_torch_error():
    with pytest.raises((RuntimeError, AssertionError)):
        get_batch(np.arange(100), 2, 4, "cuda:99")


@pytest.mark.parametrize("n,bs,ctx", [(101, 3, 10), (100, 4, 10), (57, 2, 8), (12, 5, 11)])
def test_eval_batches_cover_every_target_once(n, bs, ctx):
    data = np.arange(n, dtype=np.int64)
    xs, ys = [], []
    for x, y in iter_eval_batches(data, bs, ctx):
        assert x.shape == y.shape and x.shape[0] <= bs and x.shape[1] <= ctx
        assert torch.equal(y, x + 1)
        ys.extend(y.flatten().tolist())
    assert sorted(ys) == list(range(1, n))


@pytest.fixture(scope="module")
def gpt2_tokenizer_dir(tmp_path_factory) -> Path:
    vocab, merges = shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt")
    d = tmp_path_factory.mktemp("gpt2tok")
    shutil.copy(vocab, d / "vocab.json")
    shutil.copy(merges, d / "merges.txt")
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>",
         "unk_token": "<|endoftext|>"}))
    return d


def _documents(path: Path) -> list[str]:
    return [d.strip("\n") for d in path.read_text(encoding="utf-8").split("<|endoftext|>") if d.strip()]


def test_prepare_text_matches_direct_tokenization(tmp_path, gpt2_tokenizer_dir):
    from transformers import AutoTokenizer

    docs = _documents(PACKAGE_DATA / "tinystories_valid_small.txt")[:60]
    src = tmp_path / "corpus.txt"
    src.write_text("\n<|endoftext|>\n".join(docs) + "\n<|endoftext|>\n", encoding="utf-8")
    headers = prepare_dataset(gpt2_tokenizer_dir, tmp_path / "out", input_files=[src], val_fraction=0.1, num_proc=2)

    tok = AutoTokenizer.from_pretrained(gpt2_tokenizer_dir)
    expected = [t for d in docs for t in tok(d)["input_ids"] + [tok.eos_token_id]]
    train, val = load_tokens(tmp_path / "out" / "train.bin"), load_tokens(tmp_path / "out" / "val.bin")
    assert train.dtype == np.uint16  # GPT-2's 50257 ids fit
    assert np.concatenate([train, val]).tolist() == expected
    # validation is carved by size: the fewest trailing documents holding 10% of the characters
    assert headers["val"]["documents"] + headers["train"]["documents"] == 60
    chars = [len(d) for d in docs]
    n_val = headers["val"]["documents"]
    assert sum(chars[-n_val:]) >= 0.1 * sum(chars) > sum(chars[-n_val + 1:])
    assert headers["train"]["bytes"] + headers["val"]["bytes"] == sum(len(d.encode()) for d in docs)
    saved = json.loads((tmp_path / "out" / "train.json").read_text())
    assert saved["count"] == len(train) and saved["dtype"] == "uint16" and "source" in saved


def test_prepare_jsonl_with_val_files(tmp_path, gpt2_tokenizer_dir):
    from transformers import AutoTokenizer

    rows = [{"story": f"Story number {i} is short."} for i in range(10)]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "b.jsonl").write_text(json.dumps({"story": "A held-out story."}))
    prepare_dataset(gpt2_tokenizer_dir, tmp_path / "out", input_files=[tmp_path / "a.jsonl"],
                    text_column="story", val_files=[tmp_path / "b.jsonl"], num_proc=1)
    tok = AutoTokenizer.from_pretrained(gpt2_tokenizer_dir)
    val = load_tokens(tmp_path / "out" / "val.bin")
    assert val.tolist() == tok("A held-out story.")["input_ids"] + [tok.eos_token_id]
    assert len(load_tokens(tmp_path / "out" / "train.bin")) == sum(len(tok(r["story"])["input_ids"]) + 1 for r in rows)


def test_prepare_cli_and_missing_input(tmp_path, gpt2_tokenizer_dir, capsys):
    from tinylm_hf.cli import main

    code = main(["prepare", "--tokenizer", str(gpt2_tokenizer_dir), "--input", str(tmp_path / "nope.txt"),
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "nope.txt" in err and "Traceback" not in err
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        main(["prepare", "--debug", "--tokenizer", str(gpt2_tokenizer_dir), "--input", str(tmp_path / "nope.txt"),
              "--out", str(tmp_path / "o")])


def test_load_tokens_without_header_raises(tmp_path):
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "x.bin")
    with pytest.raises(FileNotFoundError, match="header"):
        load_tokens(tmp_path / "x.bin")


@pytest.mark.parametrize("header", [
    [1, 2], {"count": 4}, {"dtype": "uint16"}, {"dtype": "float64", "count": 4}, {"dtype": "uint16", "count": "4"},
    {"dtype": "uint16", "count": -1}, {"dtype": "uint16", "count": 4, "eos_id": "256"},
], ids=["list", "no-dtype", "no-count", "float-dtype", "count-string", "count-negative", "eos-string"])
def test_a_malformed_header_is_one_clear_error(tmp_path, header):
    """Headers without a key, or with one of the wrong type, were a KeyError / TypeError deep in a reader."""
    import json

    (tmp_path / "train.bin").write_bytes(b"\0" * 8)
    (tmp_path / "train.json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match=r"header .*train.json is corrupt \(.*\); re-run `tinylm prepare`"):
        load_tokens(tmp_path / "train.bin")


def test_a_malformed_header_stops_train_with_one_line(tmp_path, capsys):
    import json

    from conftest import run_cli_error
    from tiny_runs import write_byte_dataset

    data = write_byte_dataset(tmp_path / "data", n_bytes=4000)
    header = json.loads((data / "val.json").read_text())
    del header["count"]
    (data / "val.json").write_text(json.dumps(header))
    err = run_cli_error(["train", "--data-dir", str(data), "--out-dir", str(tmp_path / "run"), "--max-iters", "1",
                         "--warmup-iters", "1"], capsys)
    assert "val.json is corrupt (count None is not an integer >= 0)" in err
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_missing_tokenizer_folder_is_refused_before_the_first_step(tmp_path):
    # the run trained every step, then publishing said the tokenizer folder was missing
    from tiny_runs import tiny_config, write_byte_dataset
    from tinylm_hf.training import train

    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    shutil.rmtree(data / "tokenizer")
    with pytest.raises(FileNotFoundError, match="tokenizer folder .* is missing.*pass --tokenizer-dir"):
        train(tiny_config(data, tmp_path / "run", max_iters=4))
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "metrics.jsonl").exists()
