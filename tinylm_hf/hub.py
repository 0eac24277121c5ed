"""Publishing a saved TinyLM folder: check it, fill the model card, upload it with `huggingface_hub`.

The model card template is `tinylm_hf/templates/model_card.md` (shipped as package data); the
repository's top-level `model_card.md` is a byte-identical copy for readers, kept equal by a test.
Every check runs before anything is sent, so a broken folder never reaches the Hub.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import struct
from pathlib import Path
from typing import Any

from huggingface_hub import CommitOperationAdd, EvalResult, HfApi, ModelCard, ModelCardData

from .fileio import write_text_atomic

TEMPLATE_PATH = Path(__file__).resolve().parent / "templates" / "model_card.md"
REPO_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
EVAL_RESULTS_FILE = "eval_results.json"
# Files a pushed model repository holds; checkpoints, optimizer state and logs stay local.
UPLOAD_PATTERNS = (
    "config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
    "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
    "added_tokens.json", "chat_template.jinja", "*.py", "README.md", EVAL_RESULTS_FILE,
)
TINYSTORIES_DESCRIPTION = (
    "[TinyStories](https://huggingface.co/datasets/roneneldan/TinyStories) (Eldan and Li, 2023): "
    "short English stories written by GPT-3.5 and GPT-4 with the vocabulary of a 3-4 year old child. "
    "Documents are separated by the `<|endoftext|>` token."
)


def check_repo_id(repo_id: str) -> str:
    """Return `repo_id` if it is `owner/name`, else raise ValueError naming the problem."""
    if not isinstance(repo_id, str) or not REPO_ID_PATTERN.match(repo_id) or ".." in repo_id or "--" in repo_id:
        raise ValueError(
            f"repo id {repo_id!r} is not of the form 'owner/name' (letters, digits, '-', '_', '.'; "
            "e.g. 'alice/tinylm-stories')"
        )
    return repo_id


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


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path.name} in {path.parent} is not valid JSON ({err})") from None


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors weights (save the model with save_pretrained)")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        for name in sorted(set(_read_json(index)["weight_map"].values())):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder} lacks the weight shard {name} named in {index.name}")
    return files


def count_parameters(folder: str | os.PathLike) -> int:
    """Number of stored weights in the folder's safetensors files (tied weights counted once)."""
    total = 0
    for path in _weight_files(Path(folder)):
        for key, tensor in read_safetensors_header(path).items():
            if key != "__metadata__":
                total += math.prod(tensor["shape"])
    return total


def validate_folder(folder: str | os.PathLike, *, load: bool = True) -> dict[str, Any]:
    """Check a saved model folder is complete and loadable; return its config as a dict.

    Checks, in order: config.json, safetensors present and not truncated, tokenizer files, the
    tokenizer's vocabulary fits the model's `vocab_size`, and (with `load`) that the model and
    tokenizer load with the Auto classes and give finite logits.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} does not exist")
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json (is it a folder written by save_pretrained?)")
    config = _read_json(folder / "config.json")
    if "vocab_size" not in config:
        raise ValueError(f"{folder}/config.json has no vocab_size")
    for path in _weight_files(folder):
        read_safetensors_header(path)
    if not (folder / "tokenizer_config.json").is_file() or not (
        (folder / "tokenizer.json").is_file() or (folder / "vocab.json").is_file()
    ):
        raise FileNotFoundError(
            f"{folder} lacks tokenizer files (tokenizer_config.json and tokenizer.json or vocab.json); "
            "save the tokenizer into the same folder"
        )
    if load:
        _check_loads(folder, config["vocab_size"])
    return config


def _check_loads(folder: Path, vocab_size: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"the tokenizer in {folder} has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{vocab_size}: token ids would fall outside the embedding (tokenizer and model do not match)"
        )
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    except Exception as err:
        raise ValueError(f"the model in {folder} does not load: {err}") from err
    ids = tokenizer("Once upon a time", add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    if logits.shape[-1] != vocab_size or not torch.isfinite(logits).all():
        raise ValueError(f"the model in {folder} gives non-finite or mis-shaped logits {tuple(logits.shape)}")


def _eval_results(results: dict[str, Any] | None, model_name: str) -> list[EvalResult] | None:
    if not results:
        return None
    dataset = str(results.get("dataset", "TinyStories validation"))
    return [
        EvalResult(
            task_type="text-generation", dataset_type=str(results.get("dataset_type", dataset)),
            dataset_name=dataset, metric_type=metric, metric_name=metric.replace("_", " "),
            metric_value=round(float(results[metric]), 4),
        )
        for metric in ("perplexity", "bits_per_byte", "cross_entropy")
        if metric in results
    ]


def _training_text(training: dict[str, Any] | None, train_config: dict[str, Any] | None, data_source: Any) -> str:
    """Bullet list describing a training run from the loop's summary and TrainConfig dict."""
    lines = []
    if data_source is not None:
        lines.append(f"- training data source: `{json.dumps(data_source, default=str)}`")
    training, cfg = training or {}, train_config or {}
    labels = {"iterations": "optimizer steps", "tokens": "tokens seen", "final_train_loss": "final training loss",
              "final_val_loss": "final validation loss", "val_perplexity": "validation perplexity",
              "val_bpb": "validation bits per byte", "elapsed_s": "wall-clock seconds", "world_size": "processes"}
    for key, label in labels.items():
        value = training.get(key)
        if isinstance(value, float):
            lines.append(f"- {label}: {value:.4f}")
        elif isinstance(value, int):
            lines.append(f"- {label}: {value:,}")
    if cfg:
        lines.append(
            f"- batch size x context x accumulation: {cfg.get('batch_size')} x {cfg.get('context_length')} x "
            f"{cfg.get('grad_accum_steps', 1)}; AdamW (weight decay {cfg.get('weight_decay')}), learning rate "
            f"{cfg.get('max_lr')} -> {cfg.get('min_lr')} (cosine, {cfg.get('warmup_iters')} warm-up steps), "
            f"gradient clip {cfg.get('grad_clip')}, seed {cfg.get('seed')}, dtype {cfg.get('dtype')}"
        )
    head = "Trained from scratch with `tinylm train` (hand-written AdamW, cosine schedule with warm-up, gradient clipping)."
    return head + ("\n\n" + "\n".join(lines) if lines else "")


def _results_from_training(training: dict[str, Any] | None) -> dict[str, Any] | None:
    if not training or "val_perplexity" not in training:
        return None
    results = {"perplexity": training["val_perplexity"], "dataset": "TinyStories validation (held-out tokens)"}
    if "final_val_loss" in training:
        results["cross_entropy"] = training["final_val_loss"]
    if "val_bpb" in training:
        results["bits_per_byte"] = training["val_bpb"]
    return results


def render_model_card(folder: str | os.PathLike, **facts: Any) -> ModelCard:
    """Fill the model card template for a saved folder with `huggingface_hub.ModelCard`.

    Architecture facts come from the folder's config.json. `eval_results` (a dict with
    `perplexity`, `bits_per_byte`, `cross_entropy`, `dataset`) defaults to the folder's
    eval_results.json (written by `tinylm eval --out`), else to the training summary's validation
    metrics. Facts the training loop passes: `training` (its summary dict), `train_config`
    (TrainConfig as a dict), `data_source`, `model` (for the parameter count). Others: `repo_id`,
    `model_name`, `license`, `datasets`, `tags`, `dataset_description`, `dataset_license`,
    `training_description`, `evaluation_description`.
    """
    folder = Path(folder)
    config = _read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    tok_config = _read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    repo_id = facts.pop("repo_id", None) or f"your-name/{folder.resolve().name}"
    model_name = facts.pop("model_name", None) or repo_id.split("/")[-1]
    training, train_config = facts.pop("training", None), facts.pop("train_config", None)
    data_source, model = facts.pop("data_source", None), facts.pop("model", None)
    results = facts.pop("eval_results", None)
    if results is None and (folder / EVAL_RESULTS_FILE).is_file():
        results = _read_json(folder / EVAL_RESULTS_FILE).get("summary")
    if results is None:
        results = _results_from_training(training)
    card_data = ModelCardData(
        library_name="transformers", pipeline_tag="text-generation", language="en",
        license=facts.pop("license", "mit"), datasets=facts.pop("datasets", ["roneneldan/TinyStories"]),
        tags=["tinylm", "custom_code", "llama-compatible", *facts.pop("tags", [])],
        model_name=model_name, eval_results=_eval_results(results, model_name),
    )
    if model is not None:
        num_parameters = f"{sum(p.numel() for p in {id(p): p for p in model.parameters()}.values()):,}"
    else:
        try:
            num_parameters = f"{count_parameters(folder):,}"
        except (FileNotFoundError, ValueError):
            num_parameters = "unknown"
    eval_text = "Not evaluated yet."
    if results:
        eval_text = "| metric | value |\n|---|---|\n" + "\n".join(
            f"| {k} | {results[k]:.4f} |" for k in ("perplexity", "bits_per_byte", "cross_entropy") if k in results
        ) + f"\n\nMeasured on {results.get('dataset', 'TinyStories validation')}."
    values = {key: config.get(key, "unknown") for key in (
        "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
        "max_position_embeddings", "rope_theta", "tie_word_embeddings", "vocab_size")}
    values |= {
        "model_name": model_name, "repo_id": repo_id, "num_parameters": num_parameters,
        "eos_token": tok_config.get("eos_token", "<|endoftext|>"),
        "dataset_description": TINYSTORIES_DESCRIPTION,
        "dataset_license": "CDLA-Sharing-1.0 (Community Data License Agreement - Sharing, version 1.0)",
        "training_description": _training_text(training, train_config, data_source),
        "evaluation_description": eval_text,
    }
    values |= facts
    return ModelCard.from_template(card_data, template_str=TEMPLATE_PATH.read_text(encoding="utf-8"), **values)


def write_model_card(folder: str | os.PathLike, **facts: Any) -> Path:
    """Render the card and write it atomically as the folder's README.md."""
    folder = Path(folder)
    return write_text_atomic(folder / "README.md", str(render_model_card(folder, **facts)))


def facts_from_existing_card(folder: str | os.PathLike) -> dict[str, Any]:
    """Training and evaluation facts kept from a TinyLM card already in the folder (e.g. by `tinylm train`).

    A push re-renders the card for its repo id; without this, the training run section and the
    validation results the training loop wrote would be lost.
    """
    path = Path(folder) / "README.md"
    if not path.is_file():
        return {}
    card = ModelCard.load(path)
    if "tinylm" not in (card.data.tags or []):
        return {}
    facts: dict[str, Any] = {}
    match = re.search(r"^## Training run\n(.*?)(?=^## )", card.text, flags=re.S | re.M)
    if match and match.group(1).strip():
        facts["training_description"] = match.group(1).strip()
    if card.data.eval_results:
        facts["eval_results"] = {r.metric_type: r.metric_value for r in card.data.eval_results}
        facts["eval_results"]["dataset"] = card.data.eval_results[0].dataset_name
    return facts


def list_upload_files(folder: str | os.PathLike) -> list[str]:
    """The files of `folder` that a push uploads (model, tokenizer, code, card), sorted."""
    folder = Path(folder)
    names = {p.name for pattern in UPLOAD_PATTERNS for p in folder.glob(pattern) if p.is_file()}
    return sorted(names)


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
    commit_message: str = "Upload TinyLM model",
    **facts: Any,
) -> list[str]:
    """Check the folder, write its card, and upload it to `repo_id` in a single commit.

    The card is written here and uploaded in the same commit as the tokenizer files, so nothing
    (in particular `tokenizer.push_to_hub`, which writes its own README) overwrites it. Returns the
    uploaded file names; with `dry_run` nothing is sent.
    """
    check_repo_id(repo_id)
    folder = Path(folder)
    validate_folder(folder)
    kept = facts_from_existing_card(folder)
    if (folder / EVAL_RESULTS_FILE).is_file():
        kept.pop("eval_results", None)
    write_model_card(folder, repo_id=repo_id, **{**kept, **facts})
    files = list_upload_files(folder)
    if dry_run:
        return files
    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    if revision is not None:
        api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in files]
    api.create_commit(repo_id, operations, commit_message=commit_message, revision=revision, repo_type="model")
    return files


def _run_push(args: argparse.Namespace) -> int:
    files = push_folder(args.dir, args.repo_id, private=args.private, revision=args.revision, dry_run=args.dry_run)
    target = f"{args.repo_id}" + (f"@{args.revision}" if args.revision else "")
    print(("Would upload" if args.dry_run else "Uploaded") + f" {len(files)} files to {target}:")
    for name in files:
        print(f"  {name}")
    return 0


def add_push_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `tinylm push DIR --repo-id USER/NAME [--private] [--revision R] [--dry-run]`."""
    parser = subparsers.add_parser("push", help="check a saved model folder, write its card, upload it to the Hub")
    parser.add_argument("dir", help="folder written by save_pretrained (model + tokenizer)")
    parser.add_argument("--repo-id", required=True, help="target repository, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--revision", default=None, help="branch to push to (created if missing)")
    parser.add_argument("--dry-run", action="store_true", help="check and list the files, upload nothing")
    parser.set_defaults(func=_run_push)
