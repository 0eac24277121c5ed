"""`load_tokenizer`: the one way tinylm_hf loads a saved tokenizer folder (prepare, training, publishing, the
exports and the quickstart all call it).

A folder loads through `AutoTokenizer` with TinyLM's classes registered, so the installed classes run and
the folder's own code never does (unless `trust_remote_code=True`, for a folder whose tokenizer is not
TinyLM's). A loaded tokenizer is kept for the rest of the process (each `datasets` worker process loads a
folder once), under the folder's absolute path and its files' sizes and times: a re-trained folder, or
another folder of the same relative name, loads afresh.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_LOADED: dict[tuple, Any] = {}


def load_tokenizer(folder: str | os.PathLike, *, trust_remote_code: bool = False, from_hub: bool = False) -> Any:
    """The tokenizer saved in the local folder `folder`.

    With `from_hub`, a `folder` that does not exist locally is a Hub repository id (not kept: the Hub
    has its own cache).
    """
    path = Path(folder)
    if not path.is_dir():
        if from_hub and not path.exists():
            return _auto_tokenizer(str(folder), trust_remote_code)
        from .fileio import check_input_folder

        check_input_folder(path, "tokenizer folder")
    files = sorted((p.name, p.stat()) for p in path.iterdir() if p.is_file())
    key = (str(path.resolve()), trust_remote_code, tuple((name, st.st_size, st.st_mtime_ns) for name, st in files))
    if key not in _LOADED:
        _LOADED[key] = _auto_tokenizer(path, trust_remote_code)
    return _LOADED[key]


def needs_remote_code_error(folder: str | os.PathLike) -> ValueError:
    """What loading says when a folder's own code would have to run and `trust_remote_code` is off."""
    return ValueError(
        f"{folder} needs its own Python code to load; that code runs only if you pass "
        "--trust-remote-code (read the folder's *.py files first)"
    )


def _auto_tokenizer(name: str | Path, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    from .registration import register

    register()  # TinyLM's tokenizer classes for AutoTokenizer
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except ValueError as err:
        if "trust_remote_code" in str(err):
            raise needs_remote_code_error(name) from None
        raise
