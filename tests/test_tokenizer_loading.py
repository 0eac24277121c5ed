"""load_tokenizer: the one loader of tokenizer folders, with TinyLM's classes and never a folder's own code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinylm_hf import TinyLMTokenizer
from tinylm_hf.tokenization import build_hf_tokenizer
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


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_no_folder_is_a_clear_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "tok"
    if kind == "a file":
        path.write_text("not a folder")
    with pytest.raises(FileNotFoundError, match=f"tokenizer folder {path} does not exist"):
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
