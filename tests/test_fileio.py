"""fileio: staged folders, modes only on what we create, inputs never replaced."""

from __future__ import annotations

import os

import pytest

from tinylm_hf.fileio import check_input_file, check_not_an_input, make_folders, seal_folder, staged_folder


def test_seal_folder_never_follows_a_symlink(tmp_path):
    outside = tmp_path / "key"
    outside.write_text("secret")
    outside.chmod(0o600)
    stage = tmp_path / "stage"
    (stage / "sub").mkdir(parents=True)
    (stage / "sub" / "link").symlink_to(outside)
    (stage / "dirlink").symlink_to(tmp_path)
    (stage / "model.bin").write_bytes(b"x")
    (stage / "model.bin").chmod(0o600)
    seal_folder(stage)
    assert outside.stat().st_mode & 0o777 == 0o600
    assert (stage / "model.bin").stat().st_mode & 0o777 == 0o644


def test_make_folders_sets_modes_only_on_the_folders_it_creates(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    make_folders(mine / "a" / "b")
    assert mine.stat().st_mode & 0o777 == 0o700
    assert {(mine / "a").stat().st_mode & 0o777, (mine / "a" / "b").stat().st_mode & 0o777} == {0o755}


def test_a_staged_folder_refuses_a_non_empty_folder_and_cleans_up(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"), staged_folder(out) as stage:
        (stage / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_error_inside_a_staged_folder_leaves_no_stage(tmp_path):
    with pytest.raises(KeyboardInterrupt), staged_folder(tmp_path / "out") as stage:
        (stage / "half").write_text("x")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_a_directory_given_for_a_file_is_named_as_such(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        check_input_file(tmp_path, "input file")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_input_file(tmp_path / "missing.txt", "input file")


def test_an_output_that_is_an_input_is_refused(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("hello")
    os.symlink(text, tmp_path / "alias.txt")
    with pytest.raises(ValueError, match="one of the inputs"):
        check_not_an_input(tmp_path / "alias.txt", [text])
    assert check_not_an_input(tmp_path / "new.json", [text]) == tmp_path / "new.json"


def test_an_atomic_write_never_writes_through_a_planted_temp_link(tmp_path):
    from tinylm_hf.fileio import write_text_atomic

    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    victim.chmod(0o600)
    (tmp_path / f".out.json.{os.getpid()}.tmp").symlink_to(victim)
    with pytest.raises(OSError):
        write_text_atomic(tmp_path / "out.json", "{}")
    assert victim.read_text() == "mine" and victim.stat().st_mode & 0o777 == 0o600
