"""`push_folder`: check a saved TinyLM folder, fill its model card, upload it with `huggingface_hub` in one commit.

Every check runs before anything is sent, so a broken folder never reaches the Hub; a dry run
checks and lists, and changes nothing on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..tokenization.families import FAMILIES
from .folder import validate_folder
from .model_card import EVAL_RESULTS_FILE, facts_from_existing_card, read_eval_results, render_model_card

# Files a pushed model repository holds; checkpoints, optimizer state and logs stay local.
UPLOAD_PATTERNS = (
    "config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
    "tokenizer_config.json", *dict.fromkeys(name for family in FAMILIES.values() for name in family.files),
    "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "*.py", "README.md", EVAL_RESULTS_FILE,
)


def check_repo_id(repo_id: str) -> str:
    """Return `repo_id` if it is a valid `owner/name` Hub id (huggingface_hub's own rules), else raise ValueError."""
    problem = None
    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        problem = "it must have exactly one '/' between owner and name"
    else:
        try:
            validate_repo_id(repo_id)
        except HFValidationError as err:
            problem = str(err).splitlines()[0]
    if problem:
        raise ValueError(
            f"repo id {repo_id!r} is not a valid 'owner/name' Hub id: {problem} "
            "(letters, digits, '-', '_', '.'; e.g. 'alice/tinylm-stories')"
        )
    return repo_id


def list_upload_files(folder: str | os.PathLike) -> list[str]:
    """The files of `folder` that a push uploads (model, tokenizer, code, card), sorted."""
    folder = Path(folder)
    return sorted({p.name for pattern in UPLOAD_PATTERNS for p in folder.glob(pattern) if p.is_file()})


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
    commit_message: str = "Upload TinyLM model",
    trust_remote_code: bool = False,
    **facts: Any,
) -> list[str]:
    """Check the folder, render its card for `repo_id`, and upload both in a single commit.

    The card is uploaded in the same commit as the tokenizer files, so nothing (in particular
    `tokenizer.push_to_hub`, which writes its own README) overwrites it; the folder's own README.md
    is left as it is. Returns the uploaded file names; with `dry_run` nothing is sent or written.
    """
    check_repo_id(repo_id)
    folder = Path(folder)
    validate_folder(folder, trust_remote_code=trust_remote_code)
    kept = facts_from_existing_card(folder)
    if read_eval_results(folder) is not None:  # measured on these weights (results of others are refused)
        kept.pop("eval_results", None)
    card = str(render_model_card(folder, repo_id=repo_id, **{**kept, **facts}))
    files = sorted(set(list_upload_files(folder)) | {"README.md"})
    if dry_run:
        return files
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name))
                  for name in files if name != "README.md"]
    operations.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")))
    try:
        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        if revision is not None:
            api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
        api.create_commit(repo_id, operations, commit_message=commit_message, revision=revision, repo_type="model")
    except Exception as err:  # every local check passed: what fails here is the Hub, the network or the token
        raise hub_error(err, repo_id) from err
    return files


def hub_error(err: Exception, repo_id: str) -> ConnectionError:
    """One line for a failed upload: what the Hub (or the HTTP client) said, and what to check."""
    detail = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return ConnectionError(f"could not upload to {repo_id} ({type(err).__name__}: {detail}); check the network "
                           "connection, HF_ENDPOINT and your token (`hf auth login`), then push again")
