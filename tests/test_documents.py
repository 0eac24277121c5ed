"""The one document splitter: separator lines, else blank lines, else fixed-size pieces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinylm_hf.corpus.documents import (
    choose_split_rule,
    choose_stream_split_rule,
    split_documents,
    split_fixed_size_stream,
    split_lines_stream,
)


def test_separator_on_its_own_line_splits():
    text = "first story\n<|endoftext|>\nsecond story\n  <|endoftext|>  \nthird\n"
    assert choose_split_rule(text) == "separator"
    assert split_documents(text) == ["first story", "second story", "third"]


def test_separator_inside_a_line_is_plain_text():
    text = "a line with <|endoftext|> inside\nand more\n"
    assert choose_split_rule(text) == "fixed_size"
    assert split_documents(text) == ["a line with <|endoftext|> inside\nand more"]


def test_blank_lines_split_when_there_is_no_separator():
    text = "First:\nHello there.\n\n\nSecond:\nGood day.\n \nThird.\n"
    assert choose_split_rule(text) == "blank_lines"
    assert split_documents(text) == ["First:\nHello there.", "Second:\nGood day.", "Third."]


def test_one_huge_line_is_cut_into_pieces_at_spaces():
    words = " ".join(f"w{i}" for i in range(5000))
    pieces = split_documents(words, piece_chars=1000)
    assert choose_split_rule(words) == "fixed_size"
    assert all(len(p) <= 1000 for p in pieces) and len(pieces) > 20
    assert "".join(pieces) == words  # cut at spaces, nothing lost
    assert all(p.endswith(" ") for p in pieces[:-1])


def test_text_without_whitespace_is_cut_hard():
    dna = "ACGT" * 1000
    pieces = split_documents(dna, piece_chars=1000)
    assert pieces == [dna[i : i + 1000] for i in range(0, 4000, 1000)]


def test_empty_documents_are_dropped():
    assert split_documents("\n<|endoftext|>\n\n<|endoftext|>\nonly\n") == ["only"]
    assert split_documents("") == []


def test_bad_rule_and_piece_size_are_errors():
    with pytest.raises(ValueError, match="split rule"):
        split_documents("x", rule="lines")
    with pytest.raises(ValueError, match="piece_chars"):
        split_documents("x", piece_chars=0)


# Text made of the characters the rules look at: separators, spaces, blank-line characters, newlines, a word.
_RULE_TEXT = st.lists(st.sampled_from(["<|endoftext|>", " ", "\t", "\r", "\f", "\n", "\n", "x", "ab cd", "\x1c"]),
                      max_size=40).map("".join)


def _pieces(text: str, sizes: list[int]) -> list[str]:
    """`text` in pieces of the given sizes (cycled), as a block reader gives it."""
    pieces, start, k = [], 0, 0
    while start < len(text):
        pieces.append(text[start : start + sizes[k % len(sizes)]])
        start, k = start + sizes[k % len(sizes)], k + 1
    return pieces


def _lines(text: str) -> list[str]:
    """The lines of `text`, each with its newline (the last perhaps without), as iterating a file gives them."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _line_pieces(text: str, limit: int) -> list[str]:
    """What `readline(limit)` gives over `text`."""
    return [piece for line in _lines(text) for piece in _pieces(line, [limit])]


@given(_RULE_TEXT, st.integers(1, 20))
def test_the_rule_chosen_line_by_line_is_the_whole_text_s(text, limit):
    text = text.replace("\r", "")  # files are read with universal newlines
    assert choose_stream_split_rule(_line_pieces(text, limit)) == choose_split_rule(text)


@given(_RULE_TEXT)
def test_documents_cut_line_by_line_are_the_whole_text_s(text):
    whole = text.replace("\r", "")  # files are read with universal newlines
    lines = _lines(whole)
    for rule in ("separator", "blank_lines"):
        assert list(split_lines_stream(lines, rule)) == split_documents(whole, rule=rule), rule


@given(_RULE_TEXT, st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(1, 8))
def test_fixed_size_pieces_cut_block_by_block_are_the_whole_text_s(text, sizes, piece_chars):
    blocks = _pieces(text, sizes)
    assert list(split_fixed_size_stream(blocks, piece_chars)) == split_documents(text, rule="fixed_size",
                                                                                 piece_chars=piece_chars)


def test_a_file_s_documents_read_as_they_go_are_those_of_its_whole_text(tmp_path):
    """The bundled stories (separator lines) and Shakespeare (blank lines), with Windows newlines and a byte-order
    mark, and a line of 200 KB (fixed-size pieces): read as prepare reads them (universal newlines)."""
    from conftest import PACKAGE_DATA, shared_file
    from tinylm_hf.corpus.sources import iter_file_documents

    stories = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:200_000]
    texts = {"stories.txt": stories, "windows.txt": "\ufeff" + stories.replace("\n", "\r\n"),
             "plays.txt": shared_file("tiny_shakespeare.txt").read_text(encoding="utf-8")[:100_000],
             "line.txt": " ".join(["the cat sat"] * 20_000)}
    for name, text in texts.items():
        (tmp_path / name).write_bytes(text.encode("utf-8"))
        whole = (tmp_path / name).read_text(encoding="utf-8-sig")
        rule = choose_split_rule(whole)
        assert list(iter_file_documents(tmp_path / name)) == [(doc, rule) for doc in split_documents(whole)], name
