"""load_tokenizer: the one loader of tokenizer folders, with TinyLM's classes and never a folder's own code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinylm_hf import TinyLMTokenizer
from tinylm_hf.tokenizer_training import build_hf_tokenizer
from tinylm_hf.tokenizer_loading import load_tokenizer

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

EOT = "<|endoftext|>"


def save_bpe(folder: Path, merges: list[tuple[bytes, bytes]]) -> Path:
    vocab = {i: bytes([i]) for i in range(256)} | {256 + i: a + b for i, (a, b) in enumerate(merges)}
    build_hf_tokenizer(vocab, merges, [EOT]).save_pretrained(folder)
    return folder


def test_a_folder_loads_as_tinylm_class(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(save_bpe(tmp_path / "tok", [(b"a", b"b")]))
    assert type(tokenizer) is TinyLMTokenizer
    assert tokenizer("abab", add_special_tokens=False)["input_ids"] == [256, 256]


def test_a_folder_loads_once_per_process(tmp_path: Path) -> None:
    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    assert load_tokenizer(folder) is load_tokenizer(str(folder))


def test_a_retrained_folder_loads_afresh(tmp_path: Path) -> None:
    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    before = load_tokenizer(folder)
    save_bpe(folder, [(b"a", b"b"), (b"ab", b"c")])
    after = load_tokenizer(folder)
    assert after is not before and after("abc", add_special_tokens=False)["input_ids"] == [257]



def test_a_folder_written_again_with_its_old_sizes_and_times_loads_afresh(tmp_path: Path) -> None:
    # the loader knew a folder by its files' sizes and times: a folder trained again with files of the same sizes,
    # their times set back (`cp -p`, `touch -r`, a coarse clock), gave the old tokenizer
    import os

    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    times = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}
    before = load_tokenizer(folder)
    save_bpe(folder, [(b"b", b"a")])
    for p in folder.iterdir():
        assert p.stat().st_size == times[p.name][0]  # the same sizes
        os.utime(p, ns=(times[p.name][1], times[p.name][1]))
    after = load_tokenizer(folder)
    assert after is not before and after("ba", add_special_tokens=False)["input_ids"] == [256]

@pytest.mark.parametrize("kind, error, message", [("missing", FileNotFoundError, "does not exist"),
                                                  ("a file", NotADirectoryError, "is a file, not a folder")])
def test_no_folder_is_a_clear_error(tmp_path: Path, kind: str, error: type, message: str) -> None:
    path = tmp_path / "tok"
    if kind == "a file":
        path.write_text("not a folder")
    with pytest.raises(error, match=f"tokenizer folder {path} {message}"):
        load_tokenizer(path)


def test_a_folder_needing_its_own_code_is_refused_without_running_it(tmp_path: Path) -> None:
    folder = tmp_path / "foreign"
    folder.mkdir()
    config = {"tokenizer_class": "ForeignTokenizer", "auto_map": {"AutoTokenizer": ["foreign.ForeignTokenizer", None]}}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "foreign.py").write_text('from pathlib import Path\nPath(__file__).with_name("ran").write_text("yes")\n')
    with pytest.raises(ValueError, match="needs its own Python code to load.*--trust-remote-code"):
        load_tokenizer(folder)
    assert not (folder / "ran").exists()


# ------------------------------------------------------------------ tokenizer.json must be the twin
def test_a_tokenizer_json_from_another_tokenizer_is_refused(tmp_path: Path) -> None:
    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    other = save_bpe(tmp_path / "other", [(b"c", b"d")])
    (folder / "tokenizer.json").write_bytes((other / "tokenizer.json").read_bytes())
    with pytest.raises(ValueError, match=r"tokenizer.json disagrees with vocab.json, merges.txt \(model differ\).*"
                                         "delete tokenizer.json and save the tokenizer again"):
        load_tokenizer(folder)


def test_a_tokenizer_json_with_an_added_token_of_its_own_is_refused(tmp_path: Path) -> None:
    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    twin = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    twin["added_tokens"].append({**twin["added_tokens"][0], "id": 999, "content": "<|other|>"})
    (folder / "tokenizer.json").write_text(json.dumps(twin), encoding="utf-8")
    with pytest.raises(ValueError, match=r"\(added_tokens differ\)"):
        load_tokenizer(folder)


def test_a_tokenizer_json_that_is_not_json_is_refused(tmp_path: Path) -> None:
    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    (folder / "tokenizer.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer.json is not valid JSON"):
        load_tokenizer(folder)


@pytest.mark.parametrize("saved_by", ["slow", "fast"])
@pytest.mark.parametrize("algorithm, vocab_size", [("bpe", 400), ("wordpiece", 500), ("unigram", 500),
                                                   ("sentencepiece-bpe", 400)])
def test_every_family_saved_by_either_class_loads(tmp_path: Path, algorithm: str, vocab_size: int,
                                                  saved_by: str) -> None:
    from conftest import PACKAGE_DATA
    from tinylm_hf.tokenizer_training import train_tokenizer
    from tinylm_hf.tokenization.families import FAMILIES

    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:60_000]
    trained = train_tokenizer(iter([text]), vocab_size, algorithm=algorithm, progress=False)
    trained.save_pretrained(tmp_path / "slow")
    if saved_by == "fast":
        FAMILIES[algorithm].fast.from_pretrained(tmp_path / "slow").save_pretrained(tmp_path / "fast")
    assert load_tokenizer(tmp_path / saved_by).get_vocab() == trained.get_vocab()


def test_a_unigram_folder_saved_before_its_twin_cut_control_pieces_loads(tmp_path: Path) -> None:
    """Folders saved before the Unigram twin cut text that spells a control piece (metaspace_backend.text_cuts)."""
    from conftest import PACKAGE_DATA
    from tinylm_hf.tokenization.metaspace.backend import BYTE_PIECE_CUT
    from tinylm_hf.tokenizer_training import train_tokenizer

    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:60_000]
    trained = train_tokenizer(iter([text]), 500, algorithm="unigram", progress=False)
    trained.save_pretrained(tmp_path)
    twin = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    steps = twin["pre_tokenizer"]["pretokenizers"]
    assert len(steps) == 3 and steps[0]["pattern"] == {"Regex": BYTE_PIECE_CUT}
    for old in ([steps[0], steps[2]], [steps[2]]):  # with the byte-piece cut only, and with no cut
        twin["pre_tokenizer"] = old[0] if len(old) == 1 else {**twin["pre_tokenizer"], "pretokenizers": old}
        (tmp_path / "tokenizer.json").write_text(json.dumps(twin), encoding="utf-8")
        assert load_tokenizer(tmp_path).get_vocab() == trained.get_vocab()


def test_prepare_refuses_a_mixed_folder_with_exit_code_2(tmp_path: Path, capsys) -> None:
    from tinylm_hf.cli import main

    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    (folder / "tokenizer.json").write_bytes((save_bpe(tmp_path / "other", [(b"c", b"d")]) / "tokenizer.json").read_bytes())
    (tmp_path / "text.txt").write_text("abab cd\n", encoding="utf-8")
    code = main(["prepare", "--tokenizer", str(folder), "--input", str(tmp_path / "text.txt"), "--out",
                 str(tmp_path / "data"), "--num-proc", "1"])
    assert code == 2 and "disagrees with vocab.json, merges.txt" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_an_added_token_on_an_id_of_the_vocabulary_is_refused(tmp_path: Path) -> None:
    folder = save_bpe(tmp_path / "tok", [(b"a", b"b")])
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (entry,) = config["added_tokens_decoder"].values()
    config["added_tokens_decoder"]["65"] = {**entry, "content": "<|x|>"}  # id 65 is "A"
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match=r"added token '<\|x\|>' has id 65, which the vocabulary gives to 'A'"):
        load_tokenizer(folder)
