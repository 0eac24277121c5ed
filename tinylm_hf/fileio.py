"""Atomic file writes for the package's outputs (headers, metrics, cards, task files).

A temp file in the same folder, then `os.replace`: a reader (or a run killed mid-write) sees the old
file or the new one, never half of one; the data is fsynced before the rename, and files are
0644 whatever the temp file's mode. The tokenizer files keep their own writer in
`tokenization/gpt2_files.py`, since those files are copied alone into saved folders for remote code.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

FILE_MODE = 0o644
DIR_MODE = 0o755


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 text to `path` atomically (the parent folder must exist)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write `obj` as indented JSON (with a final newline) to `path` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


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
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return folder
