"""`train_tokenizer` / `tinylm train-tokenizer` and `tinylm count-words`: every algorithm, every source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from conftest import PACKAGE_DATA
from tinylm_hf.cli import main
from tinylm_hf.tokenizer_training import count_words, train_tokenizer
from tinylm_hf.tokenization.bpe.train import train_bpe
from tinylm_hf.tokenization.sentencepiece_bpe.train import train_sentencepiece_bpe
from tinylm_hf.tokenization.unigram.train import train_unigram
from tinylm_hf.tokenization.wordpiece.train import BERT_SPECIAL_TOKENS, train_wordpiece

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

# AutoTokenizer returns each family's fast twin (tests/test_tokenization_tinylm_auto.py)
CASES = [("bpe", 400, "TinyLMTokenizerFast"), ("wordpiece", 500, "TinyLMWordPieceTokenizerFast"),
         ("unigram", 500, "TinyLMUnigramTokenizerFast"), ("sentencepiece-bpe", 400, "TinyLMSentencePieceBPETokenizerFast")]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[Path]:
    """Two shards of real stories, cut at a line boundary."""
    lines = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:1200]
    root = tmp_path_factory.mktemp("shards")
    paths = [root / "a.txt", root / "b.txt"]
    paths[0].write_text("".join(lines[:600]), encoding="utf-8")
    paths[1].write_text("".join(lines[600:]), encoding="utf-8")
    return paths


# Each family's one trainer entry, its test vocab_size and special tokens (the family's own defaults where it has them)
ENTRIES = {"bpe": (train_bpe, 400, ["<|endoftext|>"]), "wordpiece": (train_wordpiece, 500, list(BERT_SPECIAL_TOKENS)),
           "unigram": (train_unigram, 500, ["<|endoftext|>"]),
           "sentencepiece-bpe": (train_sentencepiece_bpe, 400, ["<|endoftext|>"])}


@pytest.mark.parametrize("algorithm", sorted(ENTRIES))
def test_one_trainer_entry_learns_the_same_model_from_a_path_texts_and_counts(shards, algorithm):
    """`train_<family>(input_path, ...)` takes a file, an iterable of texts or word counts (a Mapping) alike."""
    train, vocab_size, specials = ENTRIES[algorithm]
    text = shards[0].read_text(encoding="utf-8")
    counts = count_words(shards[0], algorithm=algorithm, special_tokens=specials)
    from_file = train(shards[0], vocab_size, specials, progress=False)
    assert train(str(shards[0]), vocab_size, specials, progress=False) == from_file
    assert train(iter([text]), vocab_size, specials, progress=False) == from_file
    assert train(counts, vocab_size, specials, progress=False) == from_file


@pytest.mark.parametrize("algorithm, vocab_size, class_name", CASES, ids=[c[0] for c in CASES])
def test_cli_saves_a_folder_auto_tokenizer_loads_as_our_class(tmp_path, shards, algorithm, vocab_size, class_name):
    assert main(["train-tokenizer", "--algorithm", algorithm, "--input", str(shards[0].parent / "*.txt"),
                 "--vocab-size", str(vocab_size), "--out", str(tmp_path / "tok"), "--no-progress"]) == 0
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert type(loaded).__name__ == class_name and len(loaded) == vocab_size
    text = "Once upon a time, Lily found a shiny red ball."
    assert loaded.decode(loaded(text, add_special_tokens=False)["input_ids"]).strip() == text


@pytest.mark.parametrize("algorithm, vocab_size", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_mask_and_pad_special_tokens_take_their_roles_in_every_family(tmp_path, shards, algorithm, vocab_size):
    """`--special-token "<|mask|>"` makes a tokenizer that masked-LM training accepts, whatever the family."""
    specials = ["<|endoftext|>", "<|pad|>", "<|mask|>"] if algorithm != "wordpiece" else \
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "<|pad|>", "<|mask|>"]
    assert main(["train-tokenizer", "--algorithm", algorithm, "--input", str(shards[0]), "--vocab-size", str(vocab_size),
                 "--out", str(tmp_path / "tok"), "--no-progress", *[f"--special-token={t}" for t in specials]]) == 0
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert (loaded.mask_token, loaded.pad_token) == ("<|mask|>", "<|pad|>")
    ids = loaded("a <|mask|> b", add_special_tokens=False)["input_ids"]
    assert ids.count(loaded.mask_token_id) == 1


@pytest.mark.parametrize("algorithm, vocab_size", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_summed_shard_counts_train_the_same_tokenizer(tmp_path, shards, algorithm, vocab_size):
    for i, shard in enumerate(shards):
        assert main(["count-words", "--algorithm", algorithm, "--input", str(shard),
                     "--out", str(tmp_path / f"c{i}.json")]) == 0
    assert main(["train-tokenizer", "--algorithm", algorithm, "--counts", str(tmp_path / "c0.json"),
                 str(tmp_path / "c1.json"), "--vocab-size", str(vocab_size), "--out", str(tmp_path / "from_counts"),
                 "--no-progress"]) == 0
    whole = train_tokenizer(shards, vocab_size, algorithm=algorithm, progress=False)
    from_counts = AutoTokenizer.from_pretrained(tmp_path / "from_counts")
    assert from_counts.get_vocab() == whole.get_vocab()


def test_counts_made_with_other_options_are_refused(tmp_path, shards, capsys):
    main(["count-words", "--algorithm", "wordpiece", "--input", str(shards[0]), "--out", str(tmp_path / "a.json")])
    main(["count-words", "--algorithm", "wordpiece", "--lowercase", "--input", str(shards[1]),
          "--out", str(tmp_path / "b.json")])
    code = main(["train-tokenizer", "--algorithm", "wordpiece", "--counts", str(tmp_path / "a.json"),
                 str(tmp_path / "b.json"), "--vocab-size", "500", "--out", str(tmp_path / "t")])
    assert code == 2 and "different options" in capsys.readouterr().err


def test_iterator_of_texts_trains_like_the_file(shards):
    texts = (story for shard in shards for story in shard.read_text(encoding="utf-8").split("<|endoftext|>"))
    from_iterator = train_tokenizer(texts, 400, algorithm="bpe", progress=False)
    from_files = train_tokenizer(shards, 400, algorithm="bpe", progress=False)
    # the trainer cuts special tokens out of the files, so the stories one by one count the same words
    assert from_iterator.get_vocab() == from_files.get_vocab()


def test_dataset_source_streams_a_local_dataset(tmp_path, shards):
    rows = [{"story": t} for t in shards[0].read_text(encoding="utf-8").split("<|endoftext|>") if t.strip()]
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert main(["train-tokenizer", "--algorithm", "unigram", "--dataset", str(tmp_path / "ds"), "--text-column",
                 "story", "--vocab-size", "500", "--out", str(tmp_path / "tok"), "--no-progress"]) == 0
    assert len(AutoTokenizer.from_pretrained(tmp_path / "tok")) == 500


@pytest.mark.parametrize("algorithm", ["bpe", "wordpiece"])
def test_count_words_of_a_streamed_parquet_folder_equal_those_of_the_file(tmp_path, shards, algorithm):
    """`count-words --dataset` streams a local Parquet folder (the stories one per row), counting what `--input`
    counts in the file they came from (the file's special tokens cut the same texts apart)."""
    from datasets import Dataset

    stories = [t for t in shards[0].read_text(encoding="utf-8").split("<|endoftext|>") if t.strip()]
    (tmp_path / "ds").mkdir()
    Dataset.from_dict({"story": stories}).to_parquet(tmp_path / "ds" / "train.parquet")
    specials = ["--special-token", "<|endoftext|>"]
    assert main(["count-words", "--algorithm", algorithm, "--dataset", str(tmp_path / "ds"), "--text-column", "story",
                 *specials, "--out", str(tmp_path / "streamed.json")]) == 0
    assert main(["count-words", "--algorithm", algorithm, "--input", str(shards[0]), *specials,
                 "--out", str(tmp_path / "file.json")]) == 0
    streamed, whole = (json.loads((tmp_path / f"{n}.json").read_text(encoding="utf-8")) for n in ("streamed", "file"))
    assert streamed == whole and streamed["counts"]


def test_unknown_algorithm_and_missing_glob_are_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown algorithm 'bpe2'"):
        train_tokenizer([PACKAGE_DATA / "tinystories_valid_small.txt"], 300, algorithm="bpe2")
    code = main(["train-tokenizer", "--input", str(tmp_path / "none*.txt"), "--vocab-size", "300",
                 "--out", str(tmp_path / "t")])
    assert code == 2 and "no input file matches" in capsys.readouterr().err


def test_byte_fallback_is_on_for_unigram_and_sentencepiece_bpe_unless_refused(tmp_path, shards, capsys):
    """Byte pieces in both sentencepiece-style families by default (a newline is not <unk>); --no-byte-fallback drops them."""
    def byte_pieces(algorithm, *flags):
        out = tmp_path / f"{algorithm}{''.join(flags)}"
        assert main(["train-tokenizer", "--algorithm", algorithm, "--input", str(shards[0]), "--vocab-size", "500",
                     "--out", str(out), "--no-progress", *flags]) == 0
        tok = AutoTokenizer.from_pretrained(out)
        return sum(token.startswith("<0x") for token in tok.get_vocab()), tok

    assert byte_pieces("sentencepiece-bpe")[0] == 256
    count, tok = byte_pieces("unigram")
    assert count == 256 and tok.convert_ids_to_tokens(tok("a\nb\tc", add_special_tokens=False)["input_ids"])[1] == "<0x0A>"
    assert tok.decode(tok("a\nb\tc", add_special_tokens=False)["input_ids"]) == "a\nb\tc"
    assert byte_pieces("unigram", "--no-byte-fallback")[0] == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:  # argparse's own usage error
        main(["train-tokenizer", "--algorithm", "unigram", "--input", str(shards[0]), "--vocab-size", "500",
              "--out", str(tmp_path / "x"), "--byte-fallback", "--no-byte-fallback"])
    assert exit_info.value.code == 2 and "not allowed with argument --byte-fallback" in capsys.readouterr().err


def _train_bpe_into(out: Path, shard: Path, vocab_size: int = 300) -> int:
    return main(["train-tokenizer", "--input", str(shard), "--vocab-size", str(vocab_size), "--out", str(out),
                 "--no-progress", "--num-workers", "1"])


def test_an_existing_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path, shards, capsys):
    """A private key in --out once became 0644 and scripts lost their execute bit: now nothing there changes."""
    out = tmp_path / "mine"
    out.mkdir(mode=0o700)
    (out / "id_key").write_text("secret")
    (out / "id_key").chmod(0o600)
    (out / "run.sh").write_text("#!/bin/sh\n")
    (out / "run.sh").chmod(0o700)
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o600)
    (out / "link").symlink_to(outside)
    assert _train_bpe_into(out, shards[0]) == 2
    assert "not a tokenizer's" in capsys.readouterr().err
    modes = {p.name: p.lstat().st_mode & 0o777 for p in (out, out / "id_key", out / "run.sh", outside)}
    assert modes == {"mine": 0o700, "id_key": 0o600, "run.sh": 0o700, "outside.txt": 0o600}
    assert sorted(p.name for p in out.iterdir()) == ["id_key", "link", "run.sh"]


def test_retraining_replaces_an_earlier_tokenizer_folder_whole(tmp_path, shards):
    out = tmp_path / "tok"
    assert _train_bpe_into(out, shards[0], 300) == 0
    assert _train_bpe_into(out, shards[1], 320) == 0
    assert len(AutoTokenizer.from_pretrained(out)) == 320
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o644} and out.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no stage left beside


def test_a_failed_save_leaves_the_earlier_tokenizer_intact(tmp_path, shards, monkeypatch, capsys):
    """A full disk mid-save (or a kill) never leaves old and new files mixed: the save goes to a stage beside."""
    import errno

    from tinylm_hf.tokenization.bpe.tokenization_tinylm import TinyLMTokenizer

    out = tmp_path / "tok"
    assert _train_bpe_into(out, shards[0], 300) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(self, save_directory, *args, **kwargs):
        (Path(save_directory) / "vocab.json").write_text("{half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(TinyLMTokenizer, "save_vocabulary", full_disk)
    assert _train_bpe_into(out, shards[1], 320) == 2
    assert "no space left on" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("algorithm", [c[0] for c in CASES])
@pytest.mark.parametrize("payload", [bytes(range(256)) * 8, "Café, naïve façade.\n".encode("latin-1") * 50],
                         ids=["binary", "latin-1"])
def test_a_file_that_is_not_utf8_is_refused_by_every_family(tmp_path, capsys, algorithm, payload):
    """Byte-level BPE once trained silently on binary or Latin-1 files (U+FFFD for every bad byte)."""
    from conftest import run_cli_error

    (tmp_path / "data.txt").write_bytes(payload)
    err = run_cli_error(["train-tokenizer", "--algorithm", algorithm, "--input", str(tmp_path / "data.txt"),
                         "--vocab-size", "400", "--out", str(tmp_path / "tok"), "--no-progress"], capsys)
    assert "not UTF-8" in err or "not valid UTF-8" in err
    assert not (tmp_path / "tok").exists()


def test_wordpiece_score_flag_picks_the_merge_rule(tmp_path, shards):
    from tinylm_hf.tokenizer_training.word_counts import count_words
    from tinylm_hf.tokenization.wordpiece.train import BERT_SPECIAL_TOKENS, train_wordpiece

    assert main(["train-tokenizer", "--algorithm", "wordpiece", "--wordpiece-score", "pmi", "--input", str(shards[0]),
                 "--vocab-size", "500", "--out", str(tmp_path / "tok"), "--no-progress"]) == 0
    counts = count_words(shards[0], algorithm="wordpiece", special_tokens=list(BERT_SPECIAL_TOKENS))
    pmi = train_wordpiece(counts, 500, list(BERT_SPECIAL_TOKENS), score="pmi", progress=False)
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert [token for token, _ in sorted(loaded.get_vocab().items(), key=lambda item: item[1])] == pmi


def test_wordpiece_score_of_another_family_is_refused(tmp_path, shards, capsys):
    code = main(["train-tokenizer", "--algorithm", "bpe", "--wordpiece-score", "likelihood", "--input",
                 str(shards[0]), "--vocab-size", "300", "--out", str(tmp_path / "t")])
    assert code == 2 and "applies to algorithm 'wordpiece' only" in capsys.readouterr().err


# ------------------------------------------------------------------------ pad tokens, every family
@pytest.fixture(scope="module")
def default_folders(shards, tmp_path_factory) -> dict[str, Path]:
    """Each family trained with its default special tokens and saved."""
    root = tmp_path_factory.mktemp("defaults")
    for algorithm, vocab_size, _ in CASES:
        train_tokenizer([shards[0]], vocab_size, algorithm=algorithm, progress=False).save_pretrained(root / algorithm)
    return {algorithm: root / algorithm for algorithm, _, _ in CASES}


def end_of_text_id(tok) -> int:
    return tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id  # WordPiece ends with [SEP]


@pytest.mark.parametrize("algorithm", [c[0] for c in CASES])
def test_every_family_pads_with_a_token_apart_from_its_end_of_text(default_folders, algorithm):
    from tinylm_hf.tokenization.families import FAMILIES

    slow = AutoTokenizer.from_pretrained(default_folders[algorithm])
    fast = FAMILIES[algorithm].fast.from_pretrained(default_folders[algorithm])
    assert slow.pad_token_id is not None and slow.pad_token_id != end_of_text_id(slow)
    assert (fast.pad_token, fast.pad_token_id) == (slow.pad_token, slow.pad_token_id)
    batch = ["a b", "Once upon a time, Lily found a shiny red ball."]
    assert fast(batch, padding=True)["input_ids"] == slow(batch, padding=True)["input_ids"]


@pytest.mark.parametrize("algorithm", [c[0] for c in CASES])
def test_the_language_model_collator_keeps_the_end_of_text_label(default_folders, algorithm):
    from transformers import DataCollatorForLanguageModeling

    tok = AutoTokenizer.from_pretrained(default_folders[algorithm])
    end = end_of_text_id(tok)
    rows = [tok(text, add_special_tokens=False)["input_ids"] + [end] for text in ("a b", "Once upon a time, Lily.")]
    batch = DataCollatorForLanguageModeling(tok, mlm=False)([{"input_ids": row} for row in rows])
    labels = batch["labels"].tolist()
    assert labels[0][: len(rows[0])] == rows[0] and set(labels[0][len(rows[0]):]) == {-100}
    assert labels[1] == rows[1]


@pytest.mark.parametrize("algorithm", [c[0] for c in CASES])
def test_batched_generation_with_left_padding_equals_one_at_a_time(default_folders, algorithm):
    import torch
    from tiny_models import make_model

    tok = AutoTokenizer.from_pretrained(default_folders[algorithm], padding_side="left")
    model = make_model(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=end_of_text_id(tok))
    prompts = ["Once upon a time", "a"]
    options = {"max_new_tokens": 4, "do_sample": False, "pad_token_id": tok.pad_token_id}
    with torch.no_grad():
        batched = model.generate(**tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False), **options)
        single = model.generate(**tok(prompts[1:], return_tensors="pt", add_special_tokens=False), **options)
    assert batched[1, -4:].tolist() == single[0, -4:].tolist()


def test_a_folder_saved_without_a_pad_token_still_loads(shards, tmp_path):
    train_tokenizer([shards[0]], 500, [], algorithm="unigram", progress=False).save_pretrained(tmp_path / "old")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "old")
    assert loaded.pad_token is None and loaded("a b")["input_ids"]


def test_the_mask_token_advice_works_and_a_lone_mask_token_is_refused(tmp_path, shards, capsys):
    from conftest import run_cli_error
    from tinylm_hf.training.objectives.masking import MLMCollator

    err = run_cli_error(["train-tokenizer", "--input", str(shards[0]), "--vocab-size", "300", "--special-token",
                         "<|mask|>", "--out", str(tmp_path / "lone"), "--no-progress"], capsys)
    assert "'<|mask|>' would be the eos/pad/bos/unk token" in err and not (tmp_path / "lone").exists()
    assert main(["train-tokenizer", "--input", str(shards[0]), "--vocab-size", "300", "--masked-lm",
                 "--out", str(tmp_path / "mlm"), "--no-progress"]) == 0
    tok = AutoTokenizer.from_pretrained(tmp_path / "mlm")
    assert (tok.eos_token, tok.pad_token, tok.mask_token) == ("<|endoftext|>", "<|pad|>", "<|mask|>")
    MLMCollator(tok)  # the masked-LM objective takes it


@pytest.mark.parametrize("token", [" ", "\t", " <x>", "<x> "], ids=["space", "tab", "leading", "trailing"])
def test_a_special_token_with_outer_whitespace_is_refused(tmp_path, shards, capsys, token):
    from conftest import run_cli_error

    err = run_cli_error(["train-tokenizer", "--input", str(shards[0]), "--vocab-size", "300", "--special-token",
                         "<|endoftext|>", "--special-token", token, "--out", str(tmp_path / "tok"), "--no-progress"],
                        capsys)
    assert "starts or ends with whitespace" in err and "tokenizer_config.json" not in err


@pytest.mark.parametrize("algorithm", [c[0] for c in CASES])
def test_a_leading_byte_order_mark_is_no_text_in_every_family(tmp_path, shards, algorithm):
    """The rule of every reader of a user's text (corpus/sources.py): a BOM is dropped, so it counts as no word and
    trains no token."""
    text = shards[0].read_text(encoding="utf-8")
    (tmp_path / "bom.txt").write_bytes("\ufeff".encode() + text.encode())
    (tmp_path / "plain.txt").write_text(text, encoding="utf-8")
    for name in ("bom", "plain"):
        assert main(["count-words", "--algorithm", algorithm, "--input", str(tmp_path / f"{name}.txt"),
                     "--out", str(tmp_path / f"{name}.json")]) == 0
    counts = [json.loads((tmp_path / f"{name}.json").read_text())["counts"] for name in ("bom", "plain")]
    assert counts[0] == counts[1]
    vocab_size = dict((c[0], c[1]) for c in CASES)[algorithm]
    with_bom, without = (train_tokenizer([tmp_path / f"{name}.txt"], vocab_size, algorithm=algorithm, progress=False)
                         for name in ("bom", "plain"))
    assert with_bom.get_vocab() == without.get_vocab()


def test_a_null_row_of_a_dataset_is_refused_naming_it_as_prepare_does(tmp_path, capsys):
    from conftest import run_cli_error

    (tmp_path / "ds").mkdir()
    rows = [{"text": "Once upon a time."}, {"text": ""}, {"text": None}]
    (tmp_path / "ds" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    err = run_cli_error(["train-tokenizer", "--dataset", str(tmp_path / "ds"), "--vocab-size", "300", "--out",
                         str(tmp_path / "tok"), "--no-progress"], capsys)
    assert "row 3 of dataset" in err and "has no text in column 'text' (None)" in err


def test_a_bad_json_line_of_a_dataset_is_one_line_naming_the_file_and_line(tmp_path, capsys):
    """pyarrow's parse error named neither file nor line (and `datasets` logged a second line)."""
    from conftest import run_cli_error

    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "train.jsonl").write_text('{"text": "Once."}\n{"text": "a \\ud800"}\n', encoding="utf-8")
    err = run_cli_error(["train-tokenizer", "--dataset", str(tmp_path / "ds"), "--vocab-size", "300", "--out",
                         str(tmp_path / "tok"), "--no-progress"], capsys)
    assert f"data file {tmp_path / 'ds' / 'train.jsonl'}, line 2 holds the lone surrogate escape" in err
    assert not (tmp_path / "tok").exists()


def test_a_word_count_file_with_a_lone_surrogate_is_refused_naming_it(tmp_path, capsys):
    from conftest import run_cli_error

    (tmp_path / "a.txt").write_text("hello there\n", encoding="utf-8")
    assert main(["count-words", "--input", str(tmp_path / "a.txt"), "--out", str(tmp_path / "c.json")]) == 0
    body = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    body["counts"]["he\ud800"] = 2
    (tmp_path / "c.json").write_text(json.dumps(body), encoding="utf-8")  # ensure_ascii: the escape \\ud800
    err = run_cli_error(["train-tokenizer", "--counts", str(tmp_path / "c.json"), "--vocab-size", "300", "--out",
                         str(tmp_path / "tok"), "--no-progress"], capsys)
    assert "c.json' holds the word 'he\\ud800' with a lone surrogate escape" in err
