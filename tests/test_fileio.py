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


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temps_of_a_killed_writer_are_removed_and_nothing_else(tmp_path):
    from tinylm_hf.fileio import make_temp, remove_stale_temps

    dead, alive = _dead_pid(), os.getppid()
    (tmp_path / f".m.gguf-tinylm-{dead}-abc.tmp").write_bytes(b"half")
    (tmp_path / f".m.gguf-tinylm-{dead}-dir").mkdir()
    (tmp_path / f".m.gguf-tinylm-{dead}-dir" / "x").write_bytes(b"half")
    (tmp_path / "target").write_text("kept")
    (tmp_path / f".m.gguf-tinylm-{dead}-link").symlink_to(tmp_path / "target")
    kept = [f".m.gguf-tinylm-{alive}-live.tmp", f".other-tinylm-{dead}-x.tmp", ".m.gguf.abc.tmp", "m.gguf"]
    for name in kept:
        (tmp_path / name).write_bytes(b"x")
    temp = make_temp(tmp_path, "m.gguf", suffix=".tmp")  # sweeps first
    assert temp.name.startswith(f".m.gguf-tinylm-{os.getpid()}-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "target", temp.name])
    assert (tmp_path / "target").read_text() == "kept"
    assert remove_stale_temps(tmp_path, "m.gguf") == []  # its own temp: its writer runs


def test_a_short_write_of_a_full_disk_is_no_space(tmp_path):
    import errno

    import numpy as np

    from tinylm_hf.fileio import atomic_output

    out = tmp_path / "m.bin"
    out.write_bytes(b"old")
    with pytest.raises(OSError, match=f"no space left on {tmp_path}") as caught:
        with atomic_output(out):
            with open("/dev/full", "wb") as full:  # numpy reports ENOSPC as "N requested and 0 written", no errno
                np.zeros(100_000).tofile(full)
    assert caught.value.errno == errno.ENOSPC
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["m.bin"]
