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
    with pytest.raises(ValueError, match="outside its header.s vocabulary \\(ids up to 999\\)"):
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
