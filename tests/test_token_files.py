"""The prepared-data format (corpus/token_files.py): a header that does not describe its token file is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tinylm_hf.corpus.token_files import load_tokens, token_dtype, write_tokens


def write(tmp_path: Path, ids: np.ndarray, **header: object) -> Path:
    path = tmp_path / "train.bin"
    write_tokens([ids], path, token_dtype(int(ids.max())), len(ids), {"vocab_size": 1000, **header})
    return path


def rewrite_header(path: Path, **changes: object) -> None:
    header_file = path.with_suffix(".json")
    header_file.write_text(json.dumps({**json.loads(header_file.read_text()), **changes}))


def test_a_true_header_loads(tmp_path: Path) -> None:
    ids = np.arange(0, 1000, 3)
    assert load_tokens(write(tmp_path, ids)).tolist() == ids.tolist()


def test_uint16_tokens_under_a_uint32_header_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, np.arange(0, 1000, 2))  # 500 uint16 ids: the size of 250 uint32 ids
    rewrite_header(path, dtype="uint32", count=250)
    with pytest.raises(ValueError, match="gives dtype uint32, but `tinylm prepare` stores ids up to 999 as uint16"):
        load_tokens(path)


def test_uint32_tokens_under_a_uint16_header_are_refused(tmp_path: Path) -> None:
    ids = np.array([70_000, 3, 5, 69_999])
    path = write(tmp_path, ids, vocab_size=70_001)
    rewrite_header(path, dtype="uint16", count=8)
    with pytest.raises(ValueError, match="too narrow for ids up to 70,000"):
        load_tokens(path)


@pytest.mark.parametrize("dtype", ["float64", "object", "int8", None], ids=str)
def test_a_dtype_no_token_file_has_is_refused(tmp_path: Path, dtype: object) -> None:
    path = write(tmp_path, np.arange(8))
    rewrite_header(path, dtype=dtype)
    with pytest.raises(ValueError, match="is not one of uint16, uint32, uint8"):
        load_tokens(path)


@pytest.mark.parametrize("count", [7, 9, -1, 4.0, "8", True, None], ids=repr)
def test_a_count_that_lies_is_refused(tmp_path: Path, count: object) -> None:
    path = write(tmp_path, np.arange(8))
    rewrite_header(path, count=count)
    with pytest.raises(ValueError, match="count|bytes but its header promises"):
        load_tokens(path)


def test_a_header_that_is_no_object_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, np.arange(8))
    path.with_suffix(".json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="a JSON object is expected"):
        load_tokens(path)


def test_ids_up_to_the_recorded_max_id_load_when_the_vocabulary_skips_ids(tmp_path: Path) -> None:
    path = write(tmp_path, np.array([3, 70_000, 5]), vocab_size=258, max_id=70_000)
    assert load_tokens(path).tolist() == [3, 70_000, 5]


def test_uint16_tokens_under_a_uint8_header_of_twice_the_count_are_refused(tmp_path: Path) -> None:
    """uint8 with the count doubled matches the file's size; it was accepted, and trained on bytes of the ids."""
    path = write(tmp_path, np.arange(0, 1000, 2))  # 500 uint16 ids: the size of 1,000 uint8 values
    rewrite_header(path, dtype="uint8", count=1000)
    with pytest.raises(ValueError, match="gives dtype uint8, which only 0/1 flag files"):
        load_tokens(path)


def test_uint16_tokens_under_a_uint32_header_of_ids_that_fit_are_refused(tmp_path: Path) -> None:
    """Pairs of small uint16 ids read as uint32 can stay inside the vocabulary: the dtype prepare picks decides."""
    path = write(tmp_path, np.array([5, 0, 7, 0, 999, 0]))  # as uint32: 5, 7, 999, all below vocab_size 1000
    rewrite_header(path, dtype="uint32", count=3)
    with pytest.raises(ValueError, match="stores ids up to 999 as uint16"):
        load_tokens(path)


@pytest.mark.parametrize(("changes", "problem"), [
    pytest.param({"vocab_size": 5000, "max_id": 999}, "vocab_size 5,000 is more ids than 0..max_id 999 hold",
                 id="vocab-size-above-max-id"),
    pytest.param({"eos_id": 1200, "max_id": 999}, "eos_id 1,200 is above max_id 999", id="eos-above-max-id"),
    pytest.param({"max_id": -3}, "max_id -3 is not an integer >= 0", id="negative-max-id"),
])
def test_a_header_whose_vocabulary_contradicts_itself_is_refused(tmp_path: Path, changes: dict, problem: str) -> None:
    path = write(tmp_path, np.arange(8))
    rewrite_header(path, **changes)
    with pytest.raises(ValueError, match=f"is corrupt \\({problem}\\)"):
        load_tokens(path)


def test_a_token_file_without_its_header_is_refused_naming_it(tmp_path: Path) -> None:
    path = write(tmp_path, np.arange(8))
    path.with_suffix(".json").unlink()
    with pytest.raises(FileNotFoundError, match="no header .*train.json beside .*train.bin; make the data with"):
        load_tokens(path)
