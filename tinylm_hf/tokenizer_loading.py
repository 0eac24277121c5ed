"""`load_tokenizer`: the one way tinylm_hf loads a saved tokenizer folder (prepare, training, publishing, the
exports and the quickstart all call it).

A folder loads through `AutoTokenizer` with TinyLM's classes registered, so the installed classes run and
the folder's own code never does (unless `trust_remote_code=True`, for a folder whose tokenizer is not
TinyLM's). Where `AutoTokenizer` gives a TinyLM fast class (the default for other callers), the package
runs its slow twin instead: the hand-written core that prepare's throughput and the family's guarantees
are measured on (the two give the same ids; `tests/test_tokenization_tinylm_auto.py` checks it). A TinyLM folder's `tokenizer.json` (what fast-tokenizer consumers run) must be the twin of the
files the tokenizer was built from (`vocab.json`/`merges.txt`, `vocab.txt`, `tokenizer.model`): a folder
that mixes two tokenizers is refused, since its data, model and exports would disagree on the ids. A loaded tokenizer is kept for the rest of the process (each `datasets` worker process loads a
folder once), under the folder's absolute path and its files' sizes, times, inodes and change times: a re-trained
folder (even one whose files kept their sizes and times), or another folder of the same relative name, loads afresh.
"""

from __future__ import annotations

import json
import os
import struct
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
    # size and time of each file, and its inode and change time: a file written again keeps neither (its time can be
    # set back, as `cp -p` or `touch -r` do; its change time cannot)
    key = (str(path.resolve()), trust_remote_code,
           tuple((name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns) for name, st in files))
    if key not in _LOADED:
        tokenizer = _auto_tokenizer(path, trust_remote_code)
        check_tokenizer_json(tokenizer, path)
        _LOADED[key] = tokenizer
    return _LOADED[key]


def check_tokenizer_json(tokenizer: Any, folder: str | os.PathLike) -> None:
    """Refuse a TinyLM tokenizer whose folder's `tokenizer.json` is not the twin of the files it was built from."""
    from .tokenization.tokenization_tinylm_base import TOKENIZER_FILE, TinyLMCoreTokenizer

    path = Path(folder) / TOKENIZER_FILE
    if not isinstance(tokenizer, TinyLMCoreTokenizer) or not tokenizer.has_backend_twin() or not path.is_file():
        return
    sources = ", ".join(name for name in type(tokenizer).vocab_files_names.values() if name != TOKENIZER_FILE)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}): delete it and save the tokenizer again "
                         "(save_pretrained), or train the folder again") from None
    expected = json.loads(tokenizer.to_backend_tokenizer().to_str())
    if isinstance(saved, dict):  # the tokens tokenizer_config.json adds: both classes load them from there
        added = {(index, str(token)) for index, token in tokenizer.added_tokens_decoder.items()}
        saved, expected = _without_added(saved, added), _without_added(expected, added)
    keys = sorted(set(saved) | set(expected)) if isinstance(saved, dict) else ["the whole file"]
    cuts = _text_cuts(tokenizer)
    differ = [k for k in keys if _comparable(k, saved.get(k) if isinstance(saved, dict) else saved, cuts)
              != _comparable(k, expected.get(k), cuts)]
    if differ:
        raise ValueError(f"{path} disagrees with {sources} ({', '.join(differ)} differ): the folder mixes two "
                         f"tokenizers; train it again, or delete {TOKENIZER_FILE} and save the tokenizer again")


def _without_added(part: dict, added: set[tuple[int, str]]) -> dict:
    """tokenizer.json `part` without the added tokens in `added` ((id, text) pairs). The fast class writes the
    tokens added on top of a sentencepiece-style core into tokenizer.json; the slow class's twin is the core's."""
    tokens = part.get("added_tokens")
    if not isinstance(tokens, list):
        return part
    kept = [t for t in tokens if not (isinstance(t, dict) and (t.get("id"), t.get("content")) in added)]
    return {**part, "added_tokens": kept}


def _comparable(key: str, value: Any, cuts: set[str]) -> Any:
    """A tokenizer.json part as it behaves: an empty template is no post-processor, Unigram scores are float32s;
    the cuts a Unigram twin gained (`cuts`) are left out, so that folders saved without them still load (their ids
    differ only on text that spells a byte, control or unknown piece, "<0x41>", "<|end|>", with the special tokens
    left unsplit; the TinyLM classes build the twin from tokenizer.model, cuts included)."""
    if key == "pre_tokenizer":
        value = _without_cuts(value, cuts)
    if key == "post_processor" and isinstance(value, dict) and value.get("type") == "TemplateProcessing":
        if not value.get("special_tokens") and value.get("single") == [{"Sequence": {"id": "A", "type_id": 0}}]:
            return None
    if key == "model" and isinstance(value, dict) and value.get("type") == "Unigram":
        try:
            scores = [[piece, struct.unpack("<f", struct.pack("<f", score))[0]] for piece, score in value["vocab"]]
        except (KeyError, TypeError, ValueError, struct.error):
            return value  # malformed: compared as it is
        return {**value, "vocab": scores}
    return value


def _text_cuts(tokenizer: Any) -> set[str]:
    """The regexes of the cuts `tokenizer`'s twin makes inside text that spells a piece (`metaspace.backend.text_cuts`)."""
    from .tokenization.metaspace.backend import BYTE_PIECE_CUT, text_cuts
    from .tokenization.metaspace.core import MetaspaceTokenizer

    core = getattr(tokenizer, "core", None)
    return {BYTE_PIECE_CUT, *text_cuts(core)} if isinstance(core, MetaspaceTokenizer) else set()


def _without_cuts(part: Any, cuts: set[str]) -> Any:
    """A pre-tokenizer without the splits whose regex is one of `cuts` (a Sequence of one left is that one)."""
    if not isinstance(part, dict) or part.get("type") != "Sequence":
        return part
    steps = [step for step in part.get("pretokenizers", [])
             if not (isinstance(step, dict) and step.get("type") == "Split"
                     and step.get("pattern") in [{"Regex": cut} for cut in cuts])]
    return {**part, "pretokenizers": steps} if len(steps) > 1 else (steps[0] if steps else None)


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
    slow = _slow_twin(name)
    if slow is not None:
        return slow.from_pretrained(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except ValueError as err:
        if "trust_remote_code" in str(err):
            raise needs_remote_code_error(name) from None
        raise
    slow = _slow_class_of(type(tokenizer).__name__)
    return tokenizer if slow is None or isinstance(tokenizer, slow) else slow.from_pretrained(name)


def _slow_twin(folder: str | Path) -> type | None:
    """The TinyLM slow class that the local `folder`'s tokenizer_config.json names (itself or its fast twin)."""
    path = Path(folder) / "tokenizer_config.json"
    try:
        name = json.loads(path.read_text(encoding="utf-8")).get("tokenizer_class")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None  # no such file, or not a TinyLM one: AutoTokenizer says what is wrong
    return _slow_class_of(name) if isinstance(name, str) else None


def _slow_class_of(class_name: str) -> type | None:
    """The TinyLM slow tokenizer class called `class_name`, or whose fast twin is; None for any other name."""
    from .tokenization.families import FAMILIES

    return next((f.slow for f in FAMILIES.values() if class_name in (f.slow_name, f.fast_name)), None)
