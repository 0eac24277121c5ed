"""Atomic file writes: the one implementation, here so that remote-code folders (which copy this
folder's files flat and cannot import the package) carry it too; `tinylm_hf.fileio` re-exports it.

A temp file in the same folder, fsynced, given the output mode, then `os.replace`: a reader, or a
run killed mid-write, sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o644
DIR_MODE = 0o755


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically (the parent folder must exist)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)  # never through a link
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), FILE_MODE)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 `text` to `path` atomically (the parent folder must exist)."""
    return write_bytes_atomic(path, text.encode("utf-8"))
