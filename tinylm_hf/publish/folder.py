"""Reading and checking a saved model folder (config, safetensors, tokenizer) before anything uses it.

Push, the model card and the exports call these first, so a missing, truncated or mismatched file is
a clear error naming it before anything is written or sent. Folders are loaded with the installed
TinyLM classes (`tinylm_hf.registration`), never with the folder's own code, unless the caller
passes `trust_remote_code=True`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

from ..fileio import check_input_folder
from ..tokenization.bpe.gpt2_files import MERGES_FILE, VOCAB_FILE
from ..tokenization.tokenization_tinylm_base import TOKENIZER_FILE
from ..tokenizer_loading import load_tokenizer, needs_remote_code_error
from ..tokenization.families import FAMILIES
from ..training.run.folder import HF_DIR

# A tokenizer folder holds tokenizer.json or the first file of a family's core (vocab.json, vocab.txt, ...).
TOKENIZER_FILES = (TOKENIZER_FILE, *dict.fromkeys(family.core.files[0] for family in FAMILIES.values()))
CHAT_TEMPLATE_FILE = "chat_template.jinja"  # where save_pretrained writes a tokenizer's chat template
# the classes of task heads (config.json's "architectures"): a body with a task head, and no language-model head
TASK_HEAD_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
LANGUAGE_MODEL_FIX = "use the language model it was fine-tuned from, or load the head with its Auto class"


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


def weights_digest(folder: str | os.PathLike) -> str:
    """A short hash of the folder's weight files' contents: what a result measured on the model (eval_results.json)
    records, so that it is never reported beside other weights saved under the same folder name."""
    digest = hashlib.sha256()
    for path in weight_files(Path(folder)):
        with open(path, "rb") as fh:
            digest.update(path.name.encode("utf-8") + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()[:16]


def count_parameters(folder: str | os.PathLike) -> int:
    """Number of stored weights in the folder's safetensors files (tied weights counted once)."""
    total = 0
    for path in weight_files(Path(folder)):
        for key, tensor in read_safetensors_header(path).items():
            if key != "__metadata__":
                total += math.prod(tensor["shape"])
    return total


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


def load_folder(folder: str | os.PathLike, *, trust_remote_code: bool = False, auto_class: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) of a saved folder through the Auto classes (`auto_class`, default AutoModelForCausalLM),
    checked against each other.

    The tokenizer's vocabulary must fit the model's embedding; a folder holding a task head (a classifier) is
    refused as a language model (no `auto_class`), its language-model head was never saved; a folder whose code would have to run (a model type
    tinylm_hf does not provide) needs `trust_remote_code=True`.
    """
    from transformers import AutoModelForCausalLM

    from ..registration import register

    model_class = auto_class or AutoModelForCausalLM

    register()
    local = Path(folder).exists() or not _could_be_hub_repo(str(folder))
    if local:
        config = check_folder_files(folder)  # a local folder: say what is missing before transformers tries the Hub
        if auto_class is None:
            check_language_model(config, folder, LANGUAGE_MODEL_FIX)
    folder = Path(folder)
    tokenizer = load_tokenizer(folder, trust_remote_code=trust_remote_code, from_hub=not local)
    try:
        # use_kernels: off for any folder (a Llama export too), as TinyLM's classes are: transformers >= 5.25
        # would fetch hub kernels at load time, and refuse to load without `kernels` installed
        model = model_class.from_pretrained(folder, trust_remote_code=trust_remote_code, use_kernels=False)
    except ValueError as err:
        if "trust_remote_code" in str(err):
            raise needs_remote_code_error(folder) from None
        raise
    check_tokenizer_fits(tokenizer, model.config.vocab_size, folder)
    return model, tokenizer


def _could_be_hub_repo(name: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def check_tokenizer_fits(tokenizer: Any, vocab_size: int, where: Any) -> None:
    """Every id the tokenizer can produce must be a row of the model's embedding."""
    largest = max(tokenizer.get_vocab().values(), default=-1)
    if largest >= vocab_size:
        raise ValueError(
            f"the tokenizer in {where} has {len(tokenizer)} tokens (ids up to {largest}) but the model's vocab_size "
            f"is {vocab_size}: token ids would fall outside the embedding (tokenizer and model do not match)"
        )


def model_role(config: dict[str, Any]) -> str:
    """What a folder holds, from its config.json: "classifier" (a sequence-classification head on a TinyLM),
    "encoder" (a masked-LM encoder) or "decoder" (a causal language model)."""
    if any(str(name).endswith("ForSequenceClassification") for name in config.get("architectures") or ()):
        return "classifier"
    return "encoder" if config.get("use_bidirectional_attention") else "decoder"


AUTO_CLASSES = {"decoder": "AutoModelForCausalLM", "encoder": "AutoModelForMaskedLM",
                "classifier": "AutoModelForSequenceClassification"}  # model_role -> the Auto class it loads with


def validate_folder(folder: str | os.PathLike, *, load: bool = True, trust_remote_code: bool = False) -> dict[str, Any]:
    """Check a saved model folder is complete and (with `load`) loads, as the causal LM, masked LM or task head it
    is (a classifier with its own Auto class, never as a language model), and gives finite logits; return its config."""
    config = check_folder_files(folder)
    if load:
        import torch
        import transformers

        head, role = task_head(config), model_role(config)
        auto_class = getattr(transformers, "AutoModel" + head[head.index("For"):] if head else AUTO_CLASSES[role])
        model, tokenizer = load_folder(folder, trust_remote_code=trust_remote_code, auto_class=auto_class)
        ids = tokenizer("Once upon a time", add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=ids)[0]
        width = model.config.num_labels if role == "classifier" else None if head else config["vocab_size"]
        if (width is not None and logits.shape[-1] != width) or not torch.isfinite(logits).all():
            raise ValueError(f"the model in {folder} gives non-finite or mis-shaped logits {tuple(logits.shape)}")
    return config


def model_folder_name(folder: str | os.PathLike) -> str:
    """A model folder's name for cards and summaries: its own, or its run's for a run's hf/ folder (never a path)."""
    path = Path(folder).resolve()
    return path.parent.name if path.name == HF_DIR else path.name
