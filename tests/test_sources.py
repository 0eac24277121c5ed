"""corpus/sources.py: the one rule for reading a user's text file (UTF-8, a leading BOM dropped, a bad byte named
with its file and line), the one expansion of `--input` globs, and datasets refused in one line."""

from __future__ import annotations

import json

import pytest

from tinylm_hf.corpus.sources import check_text_column, check_utf8_file, expand_inputs, iter_lines, load_named_dataset, read_text

BOM = "\ufeff".encode()


def test_a_leading_byte_order_mark_is_dropped_by_every_reader(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(BOM + "Hello\n\ufeffkept inside\n".encode())
    assert read_text(path) == "Hello\n\ufeffkept inside\n"
    assert [line for _, line in iter_lines(path)] == ["Hello\n", "\ufeffkept inside\n"]
    assert check_utf8_file(path) == path


@pytest.mark.parametrize("reader", [read_text, lambda p: list(iter_lines(p)), check_utf8_file],
                         ids=["read_text", "iter_lines", "check_utf8_file"])
def test_a_latin1_byte_is_named_with_its_file_line_and_offset(tmp_path, reader):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"abc\ncaf\xe9\n")
    with pytest.raises(ValueError, match=r"latin1.txt is not UTF-8 text: byte 0xE9 at offset 7 \(line 2\)"):
        reader(path)


def test_a_character_cut_by_the_end_of_the_file_is_named(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_bytes("ok\né".encode()[:-1])
    with pytest.raises(ValueError, match=r"cut.txt is not UTF-8 text: byte 0xC3 at offset 3 \(line 2\)"):
        check_utf8_file(path)


def test_globs_expand_in_order_and_a_glob_matching_nothing_is_named(tmp_path):
    for name in ("b.txt", "a.txt", "c.md"):
        (tmp_path / name).write_text("x")
    assert expand_inputs([str(tmp_path / "*.txt")]) == [tmp_path / "a.txt", tmp_path / "b.txt"]
    with pytest.raises(FileNotFoundError, match=r"no input file matches .*\*.json"):
        expand_inputs([str(tmp_path / "*.json")])
    with pytest.raises(FileNotFoundError, match="input file .*none.txt does not exist"):
        expand_inputs([str(tmp_path / "none.txt")])


def test_a_dataset_folder_with_a_loading_script_is_one_line(tmp_path):
    folder = tmp_path / "scripted"
    folder.mkdir()
    (folder / "scripted.py").write_text("import datasets\n")
    with pytest.raises(ValueError, match="dataset .*scripted does not load: Dataset scripts are no longer supported"):
        load_named_dataset(str(folder))


def test_a_null_or_non_text_column_is_refused_naming_the_row(tmp_path):
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [{"text": "a", "n": 1}, {"text": None, "n": 2}]))
    rows = load_named_dataset("json", data_files=str(tmp_path / "d.jsonl"), split="train")
    with pytest.raises(ValueError, match=r"row 2 of d.jsonl has no text in column 'text' \(null\)"):
        check_text_column(rows, "text", "d.jsonl")
    with pytest.raises(ValueError, match="column 'n' of d.jsonl holds int64, not text"):
        check_text_column(rows, "n", "d.jsonl")


def test_a_surrogate_pair_is_a_character_and_a_lone_surrogate_is_refused():
    from tinylm_hf.corpus.sources import parse_json_text

    assert parse_json_text('{"text": "\\ud83d\\ude00"}', "x") == {"text": "\U0001F600"}
    with pytest.raises(ValueError, match=r"^rows.jsonl, line 3 holds the lone surrogate escape \\ude00"):
        parse_json_text('{"text": ["ok", {"\\ude00": 1}]}', "rows.jsonl, line 3")
