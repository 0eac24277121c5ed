"""A saved model folder's files (config.json, safetensors weights, tokenizer files), read and checked without
loading a model: what a run starts from (`init_from`), what it publishes into its hf/ folder, and what publishing,
serving and the exports read before they load or send anything.

It belongs to training, below publishing: a run reads model folders too (the model to fine-tune, a classifier that
is no language model), and knows where it keeps its own (`HF_DIR`), which the hints here name. Publishing reads runs
and folders through it; training never imports publishing.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from ..fileio import check_input_folder
from ..tokenization.bpe.gpt2_files import MERGES_FILE, VOCAB_FILE
from ..tokenization.tokenization_tinylm_base import TOKENIZER_FILE
from ..tokenization.families import FAMILIES
from .run.folder import HF_DIR

# A tokenizer folder holds tokenizer.json or the first file of a family's core (vocab.json, vocab.txt, ...).
TOKENIZER_FILES = (TOKENIZER_FILE, *dict.fromkeys(family.core.files[0] for family in FAMILIES.values()))
# the classes of task heads (config.json's "architectures"): a body with a task head, and no language-model head
TASK_HEAD_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; invalid JSON is a ValueError naming the file."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path.name} in {path.parent} is not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path.name} in {path.parent} must hold a JSON object")
    return value


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """Parse a safetensors header and check the file holds every byte the header promises."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path.name} is truncated: {size} bytes, too short for a safetensors header")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > size - 8:
            raise ValueError(f"{path.name} is truncated or corrupt: header of {header_len} bytes in a {size}-byte file")
        try:
            header = json.loads(f.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path.name} is corrupt: its header is not valid JSON ({err})") from None
    data_end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + data_end > size:
        raise ValueError(
            f"{path.name} is truncated: the header needs {8 + header_len + data_end} bytes, the file has {size}"
        )
    return header


def weight_files(folder: Path) -> list[Path]:
    """The folder's safetensors files (every shard an index names must exist)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors weights (save the model with save_pretrained)")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        for name in sorted(set(read_json(index).get("weight_map", {}).values())):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder} lacks the weight shard {name} named in {index.name}")
    return files


def check_folder_files(folder: str | os.PathLike) -> dict[str, Any]:
    """Check config.json, the weights and the tokenizer files are present and intact; return the config."""
    folder = check_input_folder(folder, "model folder")
    if not (folder / "config.json").is_file():
        hint = f"a run's model folder is {folder / HF_DIR}" if (folder / HF_DIR / "config.json").is_file() else \
            "is it a folder written by save_pretrained?"
        raise FileNotFoundError(f"{folder} has no config.json ({hint})")
    config = read_json(folder / "config.json")
    if "vocab_size" not in config:
        raise ValueError(f"{folder}/config.json has no vocab_size")
    for path in weight_files(folder):
        read_safetensors_header(path)
    if not (folder / "tokenizer_config.json").is_file() or not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"{folder} lacks tokenizer files (tokenizer_config.json and one of {', '.join(TOKENIZER_FILES)}); "
            "save the tokenizer into the same folder"
        )
    for name in ("tokenizer_config.json", TOKENIZER_FILE, VOCAB_FILE):
        if (folder / name).is_file():
            read_json(folder / name)
    only_gpt2_files = (folder / VOCAB_FILE).is_file() and not (folder / TOKENIZER_FILE).is_file()
    if only_gpt2_files and not (folder / MERGES_FILE).is_file():
        raise FileNotFoundError(f"{folder} has {VOCAB_FILE} but no {MERGES_FILE}: the tokenizer is incomplete")
    return config


def task_head(config: dict[str, Any]) -> str | None:
    """The class of the task head a folder's config.json dict names (`TinyLMForSequenceClassification`, ...), or
    None for a language model."""
    architectures = config.get("architectures") or []
    name = str(architectures[0]) if isinstance(architectures, list) and architectures else ""
    return name if name.endswith(TASK_HEAD_SUFFIXES) else None


def check_language_model(config: dict[str, Any], folder: Any, fix: str) -> None:
    """Refuse a folder holding a task head (a `tinylm finetune` classifier, ...) where a language model is needed:
    its language-model head was never saved, so every token it predicted would come from random weights. `fix`
    says what to do instead."""
    head = task_head(config)
    if head is not None:
        raise ValueError(f"{folder} holds a {head}, a classification head (a task head): its language-model "
                         f"head was never saved, so it cannot predict tokens; {fix}")


def check_language_model_folder(folder: str | os.PathLike, fix: str) -> None:
    """`check_language_model` on a local folder's config.json (a folder without one is left to its loader)."""
    path = Path(folder) / "config.json"
    if path.is_file():
        check_language_model(read_json(path), folder, fix)


def model_folder_name(folder: str | os.PathLike) -> str:
    """A model folder's name for cards and summaries: its own, or its run's for a run's hf/ folder (never a path)."""
    path = Path(folder).resolve()
    return path.parent.name if path.name == HF_DIR else path.name
