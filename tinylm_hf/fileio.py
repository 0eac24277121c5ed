"""File outputs: atomic writes (implemented in `tokenization/atomic_files.py`, which remote-code folders
carry), JSON, a temp path for writers that take a file name (`atomic_output`), and finishing a freshly
written folder (modes, fsync) before it is renamed into place."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .tokenization.atomic_files import DIR_MODE, FILE_MODE, write_bytes_atomic, write_text_atomic

__all__ = ["DIR_MODE", "FILE_MODE", "atomic_output", "check_output_folder", "fsync_file", "no_space", "seal_folder",
           "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


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
    is fsynced, made 0644 and renamed onto `path`. On error the temp file is removed and `path` is untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        fsync_file(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def no_space(err: OSError, where: str | os.PathLike, hint: str) -> OSError:
    """For a full disk, an OSError saying "no space left on <where>" and what to do (`hint`); else `err` itself."""
    if err.errno == errno.ENOSPC:
        return OSError(errno.ENOSPC, f"no space left on {where}: {hint}")
    return err


def check_output_folder(path: str | os.PathLike) -> Path:
    """`path` as a folder to write into: an existing file there is a NotADirectoryError (nothing would be saved)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"output {path} is a file, not a folder: choose a folder path")
    return path


def seal_folder(folder: str | os.PathLike) -> Path:
    """Make a freshly written folder final: 0755 folders, 0644 files, every file fsynced to disk.

    Call it on a temp folder before renaming it into place. Libraries that write through temp files
    (safetensors, tempfile.mkdtemp) leave 0600/0700 modes behind.
    """
    folder = Path(folder)
    os.chmod(folder, DIR_MODE)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), DIR_MODE)
        for name in files:
            path = os.path.join(root, name)
            os.chmod(path, FILE_MODE)
            fsync_file(path)
    return folder
