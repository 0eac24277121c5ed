"""File outputs: atomic writes (implemented in `tokenization/atomic_files.py`, which remote-code folders
carry), JSON, a temp path for writers that take a file name (`atomic_output`), a staged folder renamed into
place (`staged_folder`), and the checks that keep a write to what we own (`check_input_file`,
`check_not_an_input`, `make_folders`).

The rule: modes are set only on files and folders we create, never through a symlink, never on what was
there; an output never replaces one of the command's own inputs."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .tokenization.atomic_files import DIR_MODE, FILE_MODE, write_bytes_atomic, write_text_atomic

_TEMP_MARK = "tinylm"  # in the name of every temp file and stage folder we write (`make_temp`)
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")  # numpy's short write (a full disk)
_NO_SPACE_TEXT = re.compile(r"No space left on device|os error 28")  # a full disk said by a Rust writer (safetensors)

__all__ = ["DIR_MODE", "FILE_MODE", "atomic_output", "check_input_file", "check_input_folder", "check_not_an_input", "check_ours_to_replace", "check_output_folder",
           "fsync_file", "make_folders", "make_temp", "no_space", "raise_no_space", "remove_stale_temps", "seal_folder", "staged_folder", "write_bytes_atomic",
           "write_json_atomic", "write_text_atomic"]


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write `obj` as indented JSON (with a final newline) to `path` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written file's data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path beside `path` for a writer that wants a file name (GGUF, ...); on success the file
    is fsynced, made 0644 and renamed onto `path`. On error the temp file is removed and `path` is untouched; a full
    disk is said as "no space left on <folder>".
    """
    path = Path(path)
    tmp = make_temp(path.parent, path.name, suffix=".tmp")
    try:
        yield Path(tmp)
        fsync_file(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        raise_no_space(err, path.parent, path.name)
        raise


def make_temp(folder: str | os.PathLike, name: str, *, directory: bool = False, suffix: str = "") -> Path:
    """A new empty temp file (or folder) in `folder` for writing output `name`, named `.NAME-tinylm-PID-*`: this
    process's id, so that a later run knows a stale one (`remove_stale_temps`) from one being written. Stale temps of
    `name` are removed first."""
    remove_stale_temps(folder, name)
    prefix = f".{name}-{_TEMP_MARK}-{os.getpid()}-"
    if directory:
        return Path(tempfile.mkdtemp(dir=folder, prefix=prefix, suffix=suffix))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
    os.close(fd)
    return Path(tmp)


def remove_stale_temps(folder: str | os.PathLike, name: str) -> list[Path]:
    """Remove the temp files and folders of output `name` in `folder` that a killed tinylm process left: named by
    `make_temp`, owned by this user, and whose writer is no longer running. A symlink is removed, never followed;
    nothing else is touched. Returns what was removed."""
    folder = Path(folder)
    pattern = re.compile(rf"\.{re.escape(name)}-{_TEMP_MARK}-(\d+)-")
    removed = []
    for entry in folder.iterdir() if folder.is_dir() else ():
        match = pattern.match(entry.name)
        if not match or _is_running(int(match.group(1))):
            continue
        info = os.lstat(entry)
        if info.st_uid != os.getuid():
            continue
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def _is_running(pid: int) -> bool:
    """Whether process `pid` exists (ours, or another user's)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def no_space(err: BaseException, where: str | os.PathLike, hint: str) -> BaseException:
    """For a full disk (or quota), an OSError saying "no space left on <where>" and what to do (`hint`); else `err`.

    Writers say it in their own ways: an OSError with ENOSPC/EDQUOT; numpy's `tofile` (behind GGUF and token files)
    a short write, "N requested and M written", with no errno; safetensors an error naming "os error 28"; `datasets`
    an error of its own raised from the OSError (so the causes of `err` are looked at too).
    """
    cause, seen = err, set()
    while cause is not None and id(cause) not in seen:
        if _is_full_disk(cause):
            return OSError(errno.ENOSPC, f"no space left on {where}: {hint}")
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return err


def _is_full_disk(err: BaseException) -> bool:
    return (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)) or (
        isinstance(err, OSError) and err.errno is None and bool(_SHORT_WRITE.search(str(err)))) or (
        isinstance(err, Exception) and bool(_NO_SPACE_TEXT.search(str(err))))


def raise_no_space(err: BaseException, where: str | os.PathLike, what: str) -> None:
    """Raise "no space left on <where>" (from `err`) when `err` is a full disk while writing `what`; else nothing."""
    converted = no_space(err, where, f"free some space (or write {what} elsewhere) and run again")
    if converted is not err:
        raise converted from err


def check_output_folder(path: str | os.PathLike) -> Path:
    """`path` as a folder to write into: an existing file there is a NotADirectoryError (nothing would be saved)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"output {path} is a file, not a folder: choose a folder path")
    return path


def seal_folder(folder: str | os.PathLike) -> Path:
    """Make a freshly written folder final: 0755 folders, 0644 files, every file fsynced to disk.

    Call it only on a temp folder we made (`staged_folder`, `tempfile.mkdtemp`) before renaming it into
    place: libraries that write through temp files (safetensors, mkdtemp) leave 0600/0700 modes behind.
    Symlinks are left alone (never followed), so nothing outside the folder changes.
    """
    folder = Path(folder)
    os.chmod(folder, DIR_MODE)
    for root, dirs, files in os.walk(folder):  # os.walk does not descend into symlinked folders
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                os.chmod(path, DIR_MODE)
            elif stat.S_ISREG(mode):
                os.chmod(path, FILE_MODE)
                fsync_file(path)
    return folder


def make_folders(path: str | os.PathLike) -> Path | None:
    """Create `path` and any missing parents with mode 0755; folders that exist keep their mode. Returns the topmost
    folder it created (None when `path` existed), so that a failed command can remove what it made."""
    path = Path(path)
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, DIR_MODE)
    return missing[-1] if missing else None


@contextmanager
def staged_folder(out: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Yield an empty temp folder beside `out` to write a whole output folder into; on success it is sealed
    (`seal_folder`) and renamed onto `out`. On any error, a signal turned exception included, the temp folder
    is removed and `out` is untouched.

    `out` must not exist, or be an empty folder, or (with `replace`) be a folder the caller has checked is
    its own earlier output: that one is replaced whole, in two renames (a kill between them leaves the old
    folder beside, named `.OUT.old-*`, and never a mix of old and new files).
    """
    out = Path(out)
    make_folders(out.parent)
    tmp = make_temp(out.parent, out.name, directory=True)
    try:
        yield tmp
        seal_folder(tmp)
        if out.is_dir() and not out.is_symlink() and any(out.iterdir()):
            if not replace:
                raise FileExistsError(f"{out} is not empty: choose a new or empty folder")
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)  # onto an empty folder, or a new name
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise_no_space(err, out.parent, out.name)
        raise


def check_ours_to_replace(out: str | os.PathLike, marker: str, what: str) -> Path:
    """`out` if replacing it destroys only an earlier output of ours: absent, an empty folder, or a folder holding
    `marker` (a model folder's config.json); anything else (a file, a symlink, another folder) is a FileExistsError."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return out
    if out.is_symlink() or not out.is_dir() or (any(out.iterdir()) and not (out / marker).is_file()):
        raise FileExistsError(f"{out} is not {what} (no {marker}): it is never replaced; choose another output path")
    return out


def check_input_file(path: str | os.PathLike, what: str = "input file", hint: str = "") -> Path:
    """`path` if it is a readable file; else FileNotFoundError or IsADirectoryError saying which (and `hint`)."""
    path = Path(path)
    tail = f"; {hint}" if hint else ""
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a directory, not a file{tail}")
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist{tail}")
    return path


def check_input_folder(path: str | os.PathLike, what: str = "folder", hint: str = "") -> Path:
    """`path` if it is a folder; else FileNotFoundError or NotADirectoryError saying which (and `hint`)."""
    path = Path(path)
    tail = f"; {hint}" if hint else ""
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{what} {path} is a file, not a folder{tail}")
    if not path.is_dir():
        raise FileNotFoundError(f"{what} {path} does not exist{tail}")
    return path


def check_not_an_input(out: str | os.PathLike, inputs: Iterable[str | os.PathLike], flag: str = "--out") -> Path:
    """`out` unless it is (the same file as) one of `inputs`: writing it would replace the input."""
    out = Path(out)
    for source in inputs:
        if out.exists() and Path(source).exists() and os.path.samefile(out, source):
            raise ValueError(f"{flag} {out} is one of the inputs ({source}): writing it would replace that input; "
                             "choose another output path")
    return out
