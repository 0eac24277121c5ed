"""The one document splitter: separator lines, else blank lines, else fixed-size pieces."""

from __future__ import annotations

import pytest

from tinylm_hf.corpus.documents import choose_split_rule, split_documents


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
