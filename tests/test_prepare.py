"""`prepare_dataset` on the text a new user has: any UTF-8, JSONL, hostile text, a full disk."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import PACKAGE_DATA, shared_file
from tinylm_hf import EOS_TOKEN, prepare_dataset
from tinylm_hf.corpus import load_tokens, read_header, token_files
from tinylm_hf.tokenizer_training import build_hf_tokenizer, train_tokenizer

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


def test_json_lines_are_read_as_they_go(tmp_path):
    """A JSON-lines file is read one line at a time (never whole, nor copied into Arrow first): its first document
    comes before a later line is read."""
    from tinylm_hf.corpus import prepare

    (tmp_path / "rows.jsonl").write_text('{"text": "first"}\n{"text": \n', encoding="utf-8")
    documents, column = prepare._load_files([str(tmp_path / "rows.jsonl")], "text", tmp_path / "cache")
    read = iter(documents)
    assert next(read) == ("first", None) and column == "text"
    with pytest.raises(ValueError, match="rows.jsonl, line 2 is not valid JSON"):
        next(read)


def test_a_json_array_of_rows_prepares_as_its_json_lines(tmp_path, tok_dir):
    rows = [{"text": "One story."}, {"text": "Another, longer story."}, {"text": "A third."}]
    (tmp_path / "rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for name in ("rows.json", "rows.jsonl"):
        prepare_dataset(tok_dir, tmp_path / name.replace(".", "_"), input_files=[tmp_path / name], num_proc=1)
    for split in ("train.bin", "val.bin"):
        assert (tmp_path / "rows_json" / split).read_bytes() == (tmp_path / "rows_jsonl" / split).read_bytes()


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


def test_a_failing_tokenizing_thread_is_one_line_exit_2_and_earlier_outputs_stay(tmp_path, tok_dir, capsys,
                                                                                    monkeypatch):
    """Out of memory in a tokenizing thread (once, on a later block): one line naming it, nothing written lost."""
    import threading

    from conftest import run_cli_error
    from tinylm_hf.corpus import prepare

    out = tmp_path / "out"
    prepare_dataset(tok_dir, out, input_files=[_small_corpus(tmp_path)], num_workers=1)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    text = "\n\n".join(f"Story {i}: the cat sat on the mat and looked at the moon." * 40 for i in range(2000))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    calls, threads, real = [], set(), prepare.plain_encoder

    def failing_encoder(tokenizer):
        encode = real(tokenizer)

        def encode_or_fail(texts):
            calls.append(len(texts))
            threads.add(threading.get_ident())
            if len(calls) == 3:
                raise MemoryError
            return encode(texts)
        return encode_or_fail

    monkeypatch.setattr(prepare, "plain_encoder", failing_encoder)
    err = run_cli_error(["prepare", "--tokenizer", str(tok_dir), "--input", str(tmp_path / "big.txt"), "--out",
                         str(out), "--workers", "2"], capsys)
    assert "out of memory while tokenizing the train split; nothing was written" in err and err.count("\n") == 1
    assert threading.get_ident() not in threads  # the blocks were encoded on the worker threads
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# what is in out/ at each stage: the stage folder (made before the sources are read), a token file being written
STAGES = {"loading": ".prepare-*", "tokenizing": ".prepare-*/.train.bin-*"}


def start_prepare(tmp_path: Path, tok_dir: Path, workers: int, stage: str = "tokenizing") -> tuple[Any, Path]:
    """(`tinylm prepare --workers N` in a subprocess, once it is at `stage`, checked to start no process; its out
    folder)."""
    import subprocess
    import sys
    import time

    from tiny_runs import cli_env

    psutil = pytest.importorskip("psutil")
    text = "\n\n".join(f"Story {i}: the cat sat on the mat and looked at the moon." * 40 for i in range(6000))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tinylm_hf.cli", "prepare", "--tokenizer", str(tok_dir), "--input",
                             str(tmp_path / "big.txt"), "--out", str(out), "--workers", str(workers)], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not list(out.glob(STAGES[stage])):
        time.sleep(0.02)
    assert parent.children(recursive=True) == []  # threads, not processes: nothing to outlive a kill
    assert proc.poll() is None, proc.stdout.read().decode()
    return proc, out


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_terminated_prepare_leaves_no_stage(tmp_path, tok_dir, stage):
    """SIGTERM to `tinylm prepare` mid-run (loading its sources, or tokenizing): exit 143, no stage folder left, no
    output."""
    import os
    import signal

    proc, out = start_prepare(tmp_path, tok_dir, 2, stage)
    os.kill(proc.pid, signal.SIGTERM)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 143, output
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


def test_a_leading_byte_order_mark_is_no_token(tmp_path, tok_dir):
    text = "One story.\n\nAnother story.\n\nA third one, longer than the rest of them.\n"
    (tmp_path / "bom.txt").write_bytes("\ufeff".encode() + text.encode())
    (tmp_path / "plain.txt").write_text(text, encoding="utf-8")
    with_bom = prepare_dataset(tok_dir, tmp_path / "a", input_files=[tmp_path / "bom.txt"], num_proc=1)
    without = prepare_dataset(tok_dir, tmp_path / "b", input_files=[tmp_path / "plain.txt"], num_proc=1)
    assert with_bom["train"]["count"] == without["train"]["count"]
    assert load_tokens(tmp_path / "a" / "train.bin").tolist() == load_tokens(tmp_path / "b" / "train.bin").tolist()


def test_a_null_text_in_json_lines_is_refused_naming_the_row(tmp_path, tok_dir, capsys):
    from conftest import run_cli_error

    rows = [{"text": "hello"}, {"text": None}, {"text": "bye"}]
    (tmp_path / "n.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    err = run_cli_error(["prepare", "--tokenizer", str(tok_dir), "--input", str(tmp_path / "n.jsonl"),
                         "--out", str(tmp_path / "out"), "--num-proc", "1"], capsys)
    assert "row 2 of n.jsonl has no text in column 'text' (null)" in err
    assert not (tmp_path / "out").exists()


def test_a_null_row_of_a_dataset_is_refused_naming_the_row(tmp_path, tok_dir):
    data = tmp_path / "ds"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ["a", "b", None]))
    with pytest.raises(ValueError, match=r"row 3 of dataset .*ds has no text in column 'text' \(null\)"):
        prepare_dataset(tok_dir, tmp_path / "out", dataset=str(data), num_proc=1)


def test_input_and_val_input_globs_expand_as_in_train_tokenizer(tmp_path, tok_dir, monkeypatch):
    from tinylm_hf.cli import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in (("a.txt", "First.\n\nSecond.\n"), ("b.txt", "Third.\n\nFourth.\n"), ("v1.val", "Held.\n")):
        (corpus / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["prepare", "--tokenizer", str(tok_dir), "--input", "corpus/*.txt", "--val-data", "corpus/*.val",
                 "--out", "out", "--num-proc", "1"]) == 0
    source = read_header(tmp_path / "out" / "train.bin")["source"]
    assert source == {"input_files": ["a.txt", "b.txt"], "val_files": ["v1.val"]}


def test_a_dataset_folder_with_a_loading_script_is_one_line(tmp_path, tok_dir, capsys):
    from conftest import run_cli_error

    (tmp_path / "scripted").mkdir()
    (tmp_path / "scripted" / "scripted.py").write_text("import datasets\n")
    err = run_cli_error(["prepare", "--tokenizer", str(tok_dir), "--dataset", str(tmp_path / "scripted"),
                         "--out", str(tmp_path / "out")], capsys)
    assert "Dataset scripts are no longer supported" in err


def test_a_bad_masking_probability_is_refused_before_train_and_val_are_rewritten(tmp_path, capsys):
    from conftest import run_cli_error
    from tinylm_hf.tokenization.pretokenize import PAD_TOKEN

    tok = tmp_path / "tok"
    train_tokenizer([PACKAGE_DATA / "tinystories_valid_small.txt"], 320, [EOS_TOKEN, PAD_TOKEN, "<|mask|>"],
                    progress=False).save_pretrained(tok)
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.bin").write_bytes(b"earlier")
    (out / "train.json").write_text("{}")
    err = run_cli_error(["prepare", "--tokenizer", str(tok), "--input", str(PACKAGE_DATA / "tinystories_valid_small.txt"),
                         "--out", str(out), "--mlm-static", "--mlm-probability", "1.5"], capsys)
    assert "mlm_probability must be a probability" in err
    assert (out / "train.bin").read_bytes() == b"earlier" and sorted(p.name for p in out.iterdir()) == ["train.bin", "train.json"]


def test_a_sigkilled_prepare_leaves_its_stage_and_the_next_run_removes_it(tmp_path, tok_dir):
    """SIGKILL runs no cleanup: the stage folder left behind is removed by the next prepare into the same folder."""
    import os
    import signal

    proc, out = start_prepare(tmp_path, tok_dir, 3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert list(out.glob(".prepare-*"))  # a kill leaves its stage
    (tmp_path / "small.txt").write_text("One.\n\nTwo.\n\nThree.\n", encoding="utf-8")
    prepare_dataset(tok_dir, out, input_files=[tmp_path / "small.txt"], num_workers=1)
    assert sorted(p.name for p in out.iterdir()) == ["train.bin", "train.json", "val.bin", "val.json"]


def test_a_sigkilled_prepare_run_again_writes_the_bytes_of_an_uninterrupted_run(tmp_path, tok_dir):
    """Killed while its token file grows, prepare run again into the same folder writes what one run writes."""
    import os
    import signal

    proc, out = start_prepare(tmp_path, tok_dir, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    again = prepare_dataset(tok_dir, out, input_files=[tmp_path / "big.txt"], num_workers=2)
    once = prepare_dataset(tok_dir, tmp_path / "once", input_files=[tmp_path / "big.txt"], num_workers=2)
    assert again == once
    for name in ("train.bin", "val.bin", "train.json", "val.json"):
        assert (out / name).read_bytes() == (tmp_path / "once" / name).read_bytes(), name


def test_a_local_dataset_is_streamed_and_tokenized_as_the_same_text_file(tmp_path, tok_dir, monkeypatch):
    """A Parquet folder holding a text file's documents, one per row, is read with `streaming=True` (never copied
    into an Arrow cache) and gives the token files of the text file."""
    import datasets
    from datasets import Dataset

    from tinylm_hf.corpus.documents import split_documents

    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:60_000]
    (tmp_path / "stories.txt").write_text(text, encoding="utf-8")
    (tmp_path / "rows").mkdir()
    Dataset.from_dict({"text": split_documents(text)}).to_parquet(tmp_path / "rows" / "train.parquet")
    calls = []
    load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(k) or load(*a, **k))
    prepare_dataset(tok_dir, tmp_path / "from_rows", dataset=str(tmp_path / "rows"), num_workers=2)
    prepare_dataset(tok_dir, tmp_path / "from_file", input_files=[tmp_path / "stories.txt"], num_workers=2)
    assert [k.get("streaming") for k in calls] == [True]
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "from_rows" / name).read_bytes() == (tmp_path / "from_file" / name).read_bytes(), name


# (count, token_digest) of each split, as the process-pool prepare (datasets.map over worker processes) wrote them with
# GPT-2's files: the threads must write the same bytes
PROCESS_POOL_OUTPUTS = {
    "text": {"train": (550888, "4468f8d02e8895da"), "val": (30891, "3501d2b5bc9fc1d9")},
    "dataset": {"train": (25817, "a6aa97173ae56752"), "val": (6534, "8733c4aac92cebb0")},
    "jsonl": {"train": (23266, "333883a4157544dc"), "val": (2551, "83d2628d6f0a10d6")},
}


@pytest.mark.parametrize("workers", [1, 2])
def test_token_files_are_the_bytes_the_process_pool_wrote(tmp_path, workers):
    import shutil

    from tinylm_hf.tokenization.bpe.tokenization_tinylm import TinyLMTokenizer

    TinyLMTokenizer(vocab_file=str(shared_file("gpt2_vocab.json")),
                    merges_file=str(shared_file("gpt2_merges.txt"))).save_pretrained(tmp_path / "tok")
    (tmp_path / "rows").mkdir()
    shutil.copy(PACKAGE_DATA / "corpus_source_train.jsonl", tmp_path / "rows" / "train.jsonl")
    shutil.copy(PACKAGE_DATA / "corpus_source_validation.jsonl", tmp_path / "rows" / "validation.jsonl")
    runs = {"text": {"input_files": [PACKAGE_DATA / "tinystories_train_small.txt"]},
            "dataset": {"dataset": str(tmp_path / "rows")},
            "jsonl": {"input_files": [PACKAGE_DATA / "corpus_source_train.jsonl"], "val_fraction": 0.1}}
    for name, options in runs.items():
        headers = prepare_dataset(tmp_path / "tok", tmp_path / name, num_workers=workers, **options)
        assert {s: (h["count"], h["token_digest"]) for s, h in headers.items()} == PROCESS_POOL_OUTPUTS[name], name
        for split, header in headers.items():
            assert token_files.token_digest(load_tokens(tmp_path / name / f"{split}.bin")) == header["token_digest"]


def test_a_named_dataset_s_tokens_are_cached_by_content(tmp_path, tok_dir):
    """Rows kept in the `datasets` cache (a named dataset's) get their tokens cached beside them, found again by the
    rows' and the tokenizer's fingerprints; another tokenizer tokenizes afresh."""
    from datasets import Dataset, load_from_disk

    from tinylm_hf.corpus import prepare
    from tinylm_hf.tokenizer_loading import load_tokenizer

    Dataset.from_dict({"text": ["One story.", "Another, longer story.", "A third."]}).save_to_disk(tmp_path / "ds")
    rows = load_from_disk(str(tmp_path / "ds"))
    tok = load_tokenizer(tok_dir)
    eos = prepare.document_end_id(tok, str(tok_dir))
    options = {"tokenizer_dir": str(tok_dir), "column": "text", "eos_id": eos,
               "fingerprint": token_files.tokenizer_fingerprint(tok)}
    (tmp_path / "stage").mkdir()

    def tokenize(encode, options=options):
        return prepare._tokenize_split(rows, "train", tmp_path / "stage", np.dtype(np.uint16), {}, options, encode, 1)

    first = tokenize(prepare.plain_encoder(tok))
    assert len(list((tmp_path / "ds").glob(prepare.CACHE_PREFIX + "*.bin"))) == 1

    def refuse(texts):
        raise AssertionError("encoded again")
    assert tokenize(refuse) == first  # from the cache
    with pytest.raises(AssertionError, match="encoded again"):
        tokenize(refuse, {**options, "fingerprint": "another tokenizer"})


@pytest.mark.parametrize(("content", "problem"), [
    pytest.param('{"text": "hello"}\n{"text": "cut\n{"text": "bye"}\n', "line 2 is not valid JSON", id="malformed"),
    pytest.param('{"text": "hello"}\n{"text": "a \\ud800 b"}\n', "line 2 holds the lone surrogate escape \\ud800",
                 id="lone-surrogate"),
    pytest.param("", "holds no rows (it is empty)", id="empty"),
])
def test_a_bad_json_lines_input_is_one_line_naming_the_file_and_line(tmp_path, tok_dir, capsys, content, problem):
    """These were a `datasets` traceback (DatasetGenerationError; StopIteration for an empty file)."""
    from conftest import run_cli_error

    (tmp_path / "in.jsonl").write_text(content, encoding="utf-8")
    err = run_cli_error(["prepare", "--tokenizer", str(tok_dir), "--input", str(tmp_path / "in.jsonl"),
                         "--out", str(tmp_path / "out"), "--num-proc", "1"], capsys)
    assert f"input file {tmp_path / 'in.jsonl'}" in err and problem in err
    assert not (tmp_path / "out").exists()


def test_a_bad_json_line_in_a_dataset_folder_is_one_line_naming_it(tmp_path, tok_dir, capsys):
    from conftest import run_cli_error

    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "train.jsonl").write_text('{"text": "hello"}\n{"text": \n', encoding="utf-8")
    err = run_cli_error(["prepare", "--tokenizer", str(tok_dir), "--dataset", str(tmp_path / "ds"),
                         "--out", str(tmp_path / "out"), "--num-proc", "1"], capsys)
    assert f"data file {tmp_path / 'ds' / 'train.jsonl'}, line 2 is not valid JSON" in err
    assert not (tmp_path / "out").exists()
