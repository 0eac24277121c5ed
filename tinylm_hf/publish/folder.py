"""Loading and validating a saved model folder, and what the card reads of its weights (their digest and size).

Push, the model card and the exports check a folder's files first (`training.model_folder`), so a missing,
truncated or mismatched file is a clear error naming it before anything is written or sent. Folders are loaded
with the installed TinyLM classes (`tinylm_hf.registration`), never with the folder's own code, unless the caller
passes `trust_remote_code=True`.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

from ..tokenizer_loading import load_tokenizer, needs_remote_code_error
from ..training.model_folder import (check_folder_files, check_language_model, read_safetensors_header, task_head,
                                     weight_files)

CHAT_TEMPLATE_FILE = "chat_template.jinja"  # where save_pretrained writes a tokenizer's chat template
LANGUAGE_MODEL_FIX = "use the language model it was fine-tuned from, or load the head with its Auto class"


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


