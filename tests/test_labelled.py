"""Labelled text files: reading a text and a label column (JSON lines, JSON, CSV), naming the labels, holding out a
validation share, and the one-line errors for files that cannot be used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import PACKAGE_DATA
from tinylm_hf.corpus.labelled import LabelledFile, LabelSet, hold_out, majority_accuracy, read_labelled


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_bundled_task_reads_with_integer_labels():
    labelled = read_labelled(PACKAGE_DATA / "corpus_source_train.jsonl", "text", "label")
    assert labelled.name == "corpus_source_train.jsonl" and len(labelled.texts) == 600
    assert sorted(set(labelled.labels)) == [0, 1, 2] and all(isinstance(t, str) for t in labelled.texts)


def test_csv_reads_quoted_texts_and_integer_labels(tmp_path):
    (tmp_path / "d.csv").write_text('review,stars\n"good, really",5\nbad,1\n', encoding="utf-8")
    labelled = read_labelled(tmp_path / "d.csv", "review", "stars")
    assert labelled.texts == ["good, really", "bad"] and labelled.labels == [5, 1]


def test_string_labels_are_named_by_themselves_in_sorted_order():
    labels = LabelSet.of(LabelledFile("d.jsonl", ["a", "b", "c"], ["spam", "ham", "spam"]), "label")
    assert labels.names == ["ham", "spam"]
    assert labels.encode(LabelledFile("v.jsonl", ["x", "y"], ["spam", "ham"])).tolist() == [1, 0]


def test_integer_labels_are_numbered_in_order_unless_names_are_given():
    labelled = LabelledFile("d.jsonl", ["a", "b", "c"], [7, 3, 7])
    plain = LabelSet.of(labelled, "label")
    assert plain.names == ["3", "7"] and plain.encode(labelled).tolist() == [1, 0, 1]
    named = LabelSet.of(LabelledFile("d.jsonl", ["a", "b"], [2, 0]), "label", ["neg", "neutral", "pos"])
    assert named.names == ["neg", "neutral", "pos"] and named.ids == {0: 0, 1: 1, 2: 2}


@pytest.mark.parametrize("labels, names, message", [
    (["x", "x"], None, r"label column 'label' of d.jsonl holds one class \('x'\)"),
    ([0, 3], ["a", "b"], r"d.jsonl has label 3, outside the ids 0..1 that --label-names names"),
    (["x", "y"], ["a", "b"], "--label-names names integer labels, but the labels of d.jsonl are strings"),
], ids=["one-class", "id-outside-names", "names-for-strings"])
def test_labels_that_cannot_train_a_classifier_are_errors(labels, names, message):
    with pytest.raises(ValueError, match=message):
        LabelSet.of(LabelledFile("d.jsonl", ["t"] * len(labels), labels), "label", names)


def test_a_validation_label_unknown_to_training_is_an_error():
    labels = LabelSet.of(LabelledFile("t.jsonl", ["a", "b"], ["x", "y"]), "label")
    with pytest.raises(ValueError, match="v.jsonl has label.s. z that the training data does not have"):
        labels.encode(LabelledFile("v.jsonl", ["c"], ["z"]))


@pytest.mark.parametrize("content, message", [
    ("", "holds no labelled examples"),
    ("\n\n", "holds no labelled examples"),
    ('{"text": "a", "label": 1}\n{bad\n', "d.jsonl, line 2 is not valid JSON"),
    ('{"txt": "a", "label": 1}\n', r"has no column 'text' \(its columns: txt, label\); name the right one with "
                                    "--text-column"),
    ('{"text": "a", "lab": 1}\n', "has no column 'label' .*--label-column"),
    ('{"text": "a", "label": 1}\n{"text": "b", "label": "x"}\n', "mix strings and integers"),
    ('{"text": "a", "label": 0.5}\n', "row 1 of d.jsonl has label 0.5 .* must be strings or integers"),
    ('{"text": "a", "label": 1}\n{"text": "b"}\n', "row 2 of d.jsonl has label None"),
    ('{"text": "  ", "label": 1}\n', "row 1 of d.jsonl has no text"),
], ids=["empty", "blank-lines", "bad-json", "no-text-column", "no-label-column", "mixed-kinds", "float-label",
        "missing-label", "blank-text"])
def test_a_file_that_cannot_be_used_is_one_clear_error(tmp_path, content, message):
    (tmp_path / "d.jsonl").write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as caught:
        read_labelled(tmp_path / "d.jsonl", "text", "label")
    assert "\n" not in str(caught.value)


def test_a_missing_file_or_an_unknown_format_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="labelled data file .*nope.jsonl does not exist"):
        read_labelled(tmp_path / "nope.jsonl", "text", "label")
    (tmp_path / "d.txt").write_text("a\n")
    with pytest.raises(ValueError, match="must be a .jsonl, .json or .csv file"):
        read_labelled(tmp_path / "d.txt", "text", "label")


def test_hold_out_takes_the_share_of_every_label_and_the_same_examples_every_time():
    labels = np.array([0] * 50 + [1] * 30 + [2] * 1)
    train, held = hold_out(labels, 0.1)
    assert np.bincount(labels[held], minlength=3).tolist() == [5, 3, 0]  # a lone example is never held out
    assert sorted([*train, *held]) == list(range(len(labels)))
    again_train, again_held = hold_out(labels, 0.1)
    assert np.array_equal(held, again_held) and np.array_equal(train, again_train)


def test_hold_out_keeps_one_of_each_label_for_training_and_holds_one_out():
    train, held = hold_out(np.array([0, 0, 1, 1]), 0.01)
    assert len(held) == 2 and len(train) == 2


def test_majority_accuracy_answers_the_most_common_training_label():
    assert majority_accuracy(np.array([1, 1, 0]), np.array([1, 0, 0, 0])) == 0.25


def test_json_lines_with_string_labels_read(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}])
    labelled = read_labelled(path, "text", "label")
    assert labelled.labels == ["pos", "neg"] and LabelSet.of(labelled, "label").names == ["neg", "pos"]


def test_csv_cells_are_the_strings_the_file_holds(tmp_path):
    (tmp_path / "d.csv").write_text("text,label\na,NA\nb,None\nc,01\nd,1\ne,nan\n", encoding="utf-8")
    labelled = read_labelled(tmp_path / "d.csv", "text", "label")
    assert labelled.labels == ["NA", "None", "01", "1", "nan"]
    assert LabelSet.of(labelled, "label").names == ["01", "1", "NA", "None", "nan"]  # five classes, none merged


def test_an_empty_csv_label_is_refused_naming_the_row(tmp_path):
    (tmp_path / "d.csv").write_text("text,label\na,x\nb,\n", encoding="utf-8")
    with pytest.raises(ValueError, match="row 2 of d.csv has label '' in column 'label': give every row a label"):
        read_labelled(tmp_path / "d.csv", "text", "label")


@pytest.mark.parametrize("suffix, content", [
    (".jsonl", '{"text": "caf\xe9", "label": 1}\n'),
    (".csv", "text,label\ncaf\xe9,1\n"),
    (".json", '[{"text": "caf\xe9", "label": 1}]'),
], ids=["jsonl", "csv", "json"])
def test_a_latin1_file_is_refused_naming_it(tmp_path, suffix, content):
    (tmp_path / f"d{suffix}").write_bytes(content.encode("latin-1"))
    with pytest.raises(ValueError, match=rf"d\{suffix} is not UTF-8 text: byte 0xE9"):
        read_labelled(tmp_path / f"d{suffix}", "text", "label")


@pytest.mark.parametrize("suffix, content", [
    (".jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n'),
    (".csv", "text,label\na,x\nb,y\n"),
], ids=["jsonl", "csv"])
def test_a_leading_byte_order_mark_is_dropped(tmp_path, suffix, content):
    (tmp_path / f"d{suffix}").write_bytes("\ufeff".encode() + content.encode())
    labelled = read_labelled(tmp_path / f"d{suffix}", "text", "label")
    assert labelled.texts == ["a", "b"] and labelled.labels == ["x", "y"]


@pytest.mark.parametrize(("name", "content", "where"), [
    ("d.jsonl", '{"text": "a", "label": 1}\n{"text": "b \\ud800", "label": 0}\n', "d.jsonl, line 2"),
    ("d.json", '[{"text": "a \\udfff", "label": 1}]', "d.json, its text"),
], ids=["jsonl", "json"])
def test_a_lone_surrogate_is_refused_naming_the_file_and_line(tmp_path, name, content, where):
    """JSON's `\\ud800` escape is no character: it was read into the texts, and failed at tokenization."""
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=f"{where} holds the lone surrogate escape"):
        read_labelled(tmp_path / name, "text", "label")
