"""`prepare_dataset` on the text a new user has: any UTF-8, JSONL, hostile text, a full disk."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import PACKAGE_DATA, shared_file
from tinylm_hf import EOS_TOKEN, prepare_dataset
from tinylm_hf.corpus import load_tokens, read_header, token_files
from tinylm_hf.tokenization import build_hf_tokenizer, train_tokenizer

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tok")
    train_tokenizer([PACKAGE_DATA / "tinystories_valid_small.txt"], 320, progress=False).save_pretrained(d)
    return d


def _ids(tok_dir: Path, text: str) -> list[int]:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tok_dir)(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def test_plain_text_without_separators_is_split_at_blank_lines(tmp_path, tok_dir):
    src = shared_file("tiny_shakespeare.txt")
    text = src.read_text(encoding="utf-8")[:40_000]
    (tmp_path / "shakespeare.txt").write_text(text, encoding="utf-8")
    headers = prepare_dataset(tok_dir, tmp_path / "out", input_files=[tmp_path / "shakespeare.txt"], num_proc=1)
    assert headers["train"]["split_rules"] == {"blank_lines": headers["train"]["documents"]}
    assert headers["train"]["documents"] > 100
    assert headers["train"]["source"] == {"input_files": ["shakespeare.txt"], "val_carved": 0.05}
    total = headers["train"]["bytes"] + headers["val"]["bytes"]
    assert 0.05 <= headers["val"]["bytes"] / total < 0.07  # carved by size


def test_one_huge_line_becomes_fixed_size_pieces(tmp_path, tok_dir):
    line = " ".join(["the cat sat on the mat"] * 20_000)  # 460 KB, no newline
    (tmp_path / "line.txt").write_text(line, encoding="utf-8")
    headers = prepare_dataset(tok_dir, tmp_path / "out", input_files=[tmp_path / "line.txt"], num_proc=1)
    assert set(headers["train"]["split_rules"]) == {"fixed_size"}
    assert headers["train"]["documents"] + headers["val"]["documents"] >= 25


def test_document_text_is_plain_text_not_control_tokens(tmp_path, tok_dir):
    rows = [{"text": "A story that spells <|endoftext|> in the middle."}, {"text": "Another one."}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    (tmp_path / "v.jsonl").write_text(json.dumps({"text": "Held out <|endoftext|> too."}), encoding="utf-8")
    prepare_dataset(tok_dir, tmp_path / "out", input_files=[tmp_path / "a.jsonl"], val_files=[tmp_path / "v.jsonl"],
                    num_proc=1)
    eos = read_header(tmp_path / "out" / "train.bin")["eos_id"]
    train = load_tokens(tmp_path / "out" / "train.bin").tolist()
    assert train == _ids(tok_dir, rows[0]["text"]) + [eos] + _ids(tok_dir, rows[1]["text"]) + [eos]
    assert train.count(eos) == 2  # one per document: the spelled token is not one


def test_missing_text_column_is_an_error(tmp_path, tok_dir):
    (tmp_path / "a.jsonl").write_text(json.dumps({"story": "x"}) + "\n" + json.dumps({"story": "y"}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"text column 'text'.*story"):
        prepare_dataset(tok_dir, tmp_path / "out", input_files=[tmp_path / "a.jsonl"], num_proc=1)


def test_undecodable_input_is_an_error(tmp_path, tok_dir):
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait\n\nmore\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt is not UTF-8"):
        prepare_dataset(tok_dir, tmp_path / "out", input_files=[tmp_path / "latin1.txt"], num_proc=1)


def test_dtype_follows_the_largest_id_not_the_token_count(tmp_path):
    # 258 tokens, but the merged token " t" has id 70000: uint16 would wrap it silently
    vocab = {i: bytes([i]) for i in range(256)} | {70000: b" t"}
    tok = build_hf_tokenizer(vocab, [(b" ", b"t")], [EOS_TOKEN])
    tok.save_pretrained(tmp_path / "tok")
    (tmp_path / "a.txt").write_text("a t\n\nt t t\n\nat\n", encoding="utf-8")
    prepare_dataset(tmp_path / "tok", tmp_path / "out", input_files=[tmp_path / "a.txt"], num_proc=1)
    train = load_tokens(tmp_path / "out" / "train.bin")
    assert train.dtype == np.uint32 and 70000 in train.tolist()
    assert len(tok) < 65536


def test_full_disk_keeps_earlier_outputs_and_leaves_no_partial_files(tmp_path, tok_dir, monkeypatch):
    (tmp_path / "a.txt").write_text("one story\n\nanother story\n\na third\n", encoding="utf-8")
    out = tmp_path / "out"
    prepare_dataset(tok_dir, out, input_files=[tmp_path / "a.txt"], num_proc=1)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    class FullDisk:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(token_files, "open", FullDisk, raising=False)
    (tmp_path / "b.txt").write_text("new text\n\nmore new text\n", encoding="utf-8")
    with pytest.raises(OSError, match=f"no space left on {out}"):
        prepare_dataset(tok_dir, out, input_files=[tmp_path / "b.txt"], num_proc=1)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_killed_worker_is_a_clear_error_within_seconds(tmp_path, tok_dir):
    import os
    import signal
    import threading
    import time

    psutil = pytest.importorskip("psutil")
    text = "\n\n".join(f"Story {i}: the cat sat on the mat and looked at the moon." * 40 for i in range(6000))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    killed = []

    def kill_the_workers():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            children = psutil.Process().children(recursive=True)
            if len(children) >= 2:  # the pool is up: kill it mid-map
                time.sleep(0.5)
                for child in psutil.Process().children(recursive=True):
                    os.kill(child.pid, signal.SIGKILL)
                    killed.append(child.pid)
            time.sleep(0.05)

    threading.Thread(target=kill_the_workers, daemon=True).start()
    start = time.time()
    with pytest.raises(ChildProcessError, match="worker process died"):
        prepare_dataset(tok_dir, tmp_path / "out", input_files=[tmp_path / "big.txt"], num_proc=2)
    assert killed and time.time() - start < 60
    assert not (tmp_path / "out" / "train.bin").exists()


def test_a_terminated_prepare_leaves_no_worker_and_no_stage(tmp_path, tok_dir):
    """SIGTERM to `tinylm prepare` mid-tokenizing: exit 143, its worker processes gone, no stage folder left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tiny_runs import cli_env

    psutil = pytest.importorskip("psutil")
    text = "\n\n".join(f"Story {i}: the cat sat on the mat and looked at the moon." * 40 for i in range(6000))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tinylm_hf.cli", "prepare", "--tokenizer", str(tok_dir), "--input",
                             str(tmp_path / "big.txt"), "--out", str(out), "--num-proc", "2"], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    parent, workers = psutil.Process(proc.pid), []
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        workers = parent.children(recursive=True)
        if len(workers) >= 2 and list(out.glob(".prepare-*")):
            break
        time.sleep(0.05)
    assert len(workers) >= 2, proc.stdout.read().decode() if proc.poll() is not None else "no workers started"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGTERM)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 143, output
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers left alive: {alive}"
    assert not list(out.glob(".prepare-*")) and not (out / "train.bin").exists()


@pytest.mark.parametrize("source", ["text-file", "dataset-folder"])
def test_every_special_token_spelled_in_a_document_is_plain_text(tmp_path, tok_dir, source):
    """Text files and `datasets` rows too: a document ends only where its structure says, by an id prepare appends."""
    from transformers import AutoTokenizer

    specials = AutoTokenizer.from_pretrained(tok_dir).all_special_tokens
    docs = [f"Story {i} spells {token} inside." for i, token in enumerate(specials)] + ["A plain one."]
    if source == "text-file":
        (tmp_path / "a.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
        options = {"input_files": [tmp_path / "a.txt"], "val_files": [tmp_path / "a.txt"]}
    else:
        (tmp_path / "rows").mkdir()
        (tmp_path / "rows" / "train.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        (tmp_path / "rows" / "validation.jsonl").write_text(json.dumps({"text": docs[0]}) + "\n")
        options = {"dataset": str(tmp_path / "rows")}
    prepare_dataset(tok_dir, tmp_path / "out", num_proc=1, **options)
    eos = read_header(tmp_path / "out" / "train.bin")["eos_id"]
    train = load_tokens(tmp_path / "out" / "train.bin").tolist()
    assert train == [i for d in docs for i in _ids(tok_dir, d) + [eos]]


def _small_corpus(tmp_path: Path) -> Path:
    text = tmp_path / "corpus.txt"
    text.write_text((PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:60_000],
                    encoding="utf-8")
    return text


def test_a_tokenizer_trained_again_in_place_tokenizes_afresh(tmp_path):
    # `datasets` keyed its cache by the tokenizer folder's path: the second run reused the first run's ids under the
    # new tokenizer's header (max id 299 under a vocab-400 header)
    import shutil

    text, tok = _small_corpus(tmp_path), tmp_path / "tok"
    train_tokenizer([text], 300, progress=False).save_pretrained(tok)
    first = prepare_dataset(tok, tmp_path / "a", input_files=[text], num_proc=1)
    shutil.rmtree(tok)
    train_tokenizer([text], 400, progress=False).save_pretrained(tok)
    second = prepare_dataset(tok, tmp_path / "b", input_files=[text], num_proc=1)
    assert second["train"]["tokenizer_fingerprint"] != first["train"]["tokenizer_fingerprint"]
    ids = load_tokens(tmp_path / "b" / "train.bin")
    assert int(ids.max()) > 299 and len(ids) < first["train"]["count"]
    doc = text.read_text(encoding="utf-8").split("\n\n")[0]
    assert list(ids[: len(_ids(tok, doc))]) == _ids(tok, doc)


def test_an_input_file_rewritten_with_its_old_time_is_read_again(tmp_path, tok_dir):
    import os

    text = _small_corpus(tmp_path)
    prepare_dataset(tok_dir, tmp_path / "a", input_files=[text], num_proc=1)
    stat = text.stat()
    text.write_text("A new story about a frog.\n\nAnd a second one, about a bird.\n", encoding="utf-8")
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as `cp -p`, `rsync -t` or `tar x` leave it
    headers = prepare_dataset(tok_dir, tmp_path / "b", input_files=[text], num_proc=1)
    assert headers["train"]["documents"] + headers["val"]["documents"] == 2


def test_the_tokenize_cache_key_is_the_tokenizer_content_not_its_folder(tmp_path, tok_dir):
    from datasets import Dataset

    from tinylm_hf.corpus.prepare import tokenize_cache_key

    rows = Dataset.from_dict({"text": ["one story", "another"]})
    options = {"tokenizer_dir": str(tok_dir), "column": "text", "eos_id": 0, "fingerprint": "abc"}
    moved = {**options, "tokenizer_dir": str(tmp_path / "elsewhere")}
    retrained = {**options, "fingerprint": "def"}
    assert tokenize_cache_key(rows, options) == tokenize_cache_key(rows, moved)
    assert tokenize_cache_key(rows, options) != tokenize_cache_key(rows, retrained)
    assert tokenize_cache_key(rows, options) != tokenize_cache_key(rows, {**options, "eos_id": 1})


def test_the_header_records_the_digest_of_its_tokens(tmp_path, tok_dir):
    text = _small_corpus(tmp_path)
    headers = prepare_dataset(tok_dir, tmp_path / "a", input_files=[text], num_proc=1)
    for split in ("train", "val"):
        assert headers[split]["token_digest"] == token_files.token_digest(load_tokens(tmp_path / "a" / f"{split}.bin"))


def test_a_refused_prepare_leaves_no_output_folder_behind(tmp_path, tok_dir):
    with pytest.raises(ValueError, match="text column"):
        prepare_dataset(tok_dir, tmp_path / "new", input_files=[PACKAGE_DATA / "corpus_source_test.jsonl"],
                        text_column="nope", num_proc=1)
    assert not (tmp_path / "new").exists()


def test_a_worker_refuses_a_tokenizer_that_changed_while_prepare_ran(tok_dir):
    from tinylm_hf.corpus.prepare import _tokenize
    from tinylm_hf.tokenizer_loading import load_tokenizer

    fingerprint = token_files.tokenizer_fingerprint(load_tokenizer(tok_dir))
    assert _tokenize({"text": ["a cat"]}, str(tok_dir), "text", 0, fingerprint)["n_tokens"][0] > 1
    with pytest.raises(ValueError, match="changed while prepare ran"):
        _tokenize({"text": ["a cat"]}, str(tok_dir), "text", 0, "0123456789abcdef")
