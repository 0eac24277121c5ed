"""Atomic file writes for the package's outputs (headers, metrics, cards, task files).

A temp file in the same folder, then `os.replace`: a reader (or a run killed mid-write) sees the old
file or the new one, never half of one. The tokenizer files keep their own writer in
`tokenization/bpe.py`, since those files are copied alone into saved folders for remote code.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 text to `path` atomically (the parent folder must exist)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write `obj` as indented JSON (with a final newline) to `path` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2) + "\n")
