"""`quickstart`: the whole pipeline on the bundled TinyStories slice, on the CPU, in minutes.

1. train a byte-level BPE tokenizer (`train_tokenizer`) and save it as a Hugging Face tokenizer folder;
2. tokenize the corpus (`prepare_dataset`: train.bin / val.bin);
3. train a small TinyLM (`cpu-quickstart` preset) with our loop for a time budget;
4. publish the run as a Hugging Face folder, reload it with `AutoTokenizer` /
   `AutoModelForCausalLM` and print a few stories.
With `chat`, the tokenizer also learns the chat tokens, and `chat_quickstart` adds two steps: fine-tuning on
the bundled story conversations (the objective of `tinylm sft`) and the chat model's replies to a few requests.
Re-running it into the same folder starts afresh: every stage is done again and replaces its output whole (no
file of an earlier tokenizer, such as a chat template, outlives it; `prepare_dataset` never reuses earlier ids). Ctrl-C during training keeps the checkpoint, publishes
nothing, writes the run's settings to `train_config.json` and says how `tinylm train --resume` continues it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .chat_quickstart import CHAT_CONTEXT, fine_tune_stories, stop_interrupted
from .corpus import prepare_dataset
from .corpus.sources import PACKAGE_DATA
from .fileio import check_ours_to_replace, staged_folder
from .modeling.configuration_tinylm import check_overrides
from .publish import publish_run
from .runtime import set_threads
from .tokenization import EOS_TOKEN
from .tokenization.chat_template import CHAT_TOKENS, add_chat_tokens
from .tokenizer_loading import load_tokenizer
from .tokenizer_training import train_tokenizer
from .training import TrainConfig, train

PROMPTS = ("Once upon a time", "Lily and Ben went to the park.", "The little dog")
MAX_ITERS_CAP = 3000  # the schedule's horizon when the time budget decides the step count
OPTIMIZERS = {  # TrainConfig values of each --optimizer: rates chosen by scripts/sweep_quickstart.py
    "adamw": {"optimizer": "adamw", "max_lr": 3e-3, "min_lr": 3e-4},
    "muon": {"optimizer": "muon", "muon_lr": 0.02, "max_lr": 6e-3, "min_lr": 6e-4},
}
DEFAULT_OPTIMIZER = "muon"
CHAT_BUDGET_S = 120.0  # seconds of chat fine-tuning when neither its budget nor its step count is given
CHAT_BATCH_SIZE = 8  # with `chat`: 8 x CHAT_CONTEXT tokens, the default recipe's 2,048 tokens a step


def check_options(train_budget_s: float | None, preset: str, model_overrides: dict[str, Any] | None,
                  **step_counts: int | None) -> None:
    """The quickstart's own values, checked before the tokenizer is trained: a budget that is not a positive
    number of seconds, step counts below 1 and model overrides that are not TinyLMConfig's are refused."""
    if train_budget_s is None or not train_budget_s > 0:
        raise ValueError(f"the training budget must be a positive number of seconds, got {train_budget_s!r}")
    for name, value in step_counts.items():
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1 step, got {value}; leave it out to train for the time budget")
    check_overrides(model_overrides or {}, preset=preset)


def check_chat_options(chat: bool, chat_budget_s: float | None, chat_max_iters: int | None) -> float:
    """The chat stage's budget (`CHAT_BUDGET_S` unless given); its budget or step count without `chat` is refused,
    since the stage would not run."""
    if not chat and (chat_budget_s is not None or chat_max_iters is not None):
        given = "--chat-time-budget-s" if chat_budget_s is not None else "--chat-max-iters"
        raise ValueError(f"{given} sets the chat fine-tuning stage, which runs only with --chat: add --chat, or drop "
                         f"{given}")
    return CHAT_BUDGET_S if chat_budget_s is None else chat_budget_s


def quickstart(
    out_dir: str | Path = "runs/quickstart",
    train_file: str | Path | None = None,
    val_file: str | Path | None = None,
    vocab_size: int = 2048,
    max_iters: int | None = None,
    train_budget_s: float = 360.0,
    batch_size: int | None = None,
    context_length: int | None = None,
    preset: str = "cpu-quickstart",
    model_overrides: dict[str, Any] | None = None,
    max_new_tokens: int = 120,
    seed: int = 1337,
    threads: int | None = None,
    chat: bool = False,
    chat_budget_s: float | None = None,
    chat_max_iters: int | None = None,
    optimizer: str = DEFAULT_OPTIMIZER,
) -> dict[str, Any]:
    """Run the pipeline end to end; returns the run summary's fields plus the generated stories.

    Batches default to 16 x 128 tokens, 8 x 256 with `chat`, which fine-tunes for `chat_budget_s` seconds (default
    120; or `chat_max_iters` steps; either without `chat` is refused) and adds the chat run's fields, folder and replies as "chat". `optimizer` is "muon" (Muon
    for the block matrices, AdamW for the rest) or "adamw". The final weights are scored on the whole validation file
    ("whole_val_loss", "whole_val_bpb")."""
    check_options(train_budget_s, preset, model_overrides, max_iters=max_iters, chat_max_iters=chat_max_iters)
    chat_budget_s = check_chat_options(chat, chat_budget_s, chat_max_iters)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    out = Path(out_dir)
    threads = set_threads(threads)
    batch_size = batch_size or (CHAT_BATCH_SIZE if chat else 16)
    context_length = context_length or (CHAT_CONTEXT if chat else 128)
    steps = 6 if chat else 4
    train_file = Path(train_file or PACKAGE_DATA / "tinystories_train_small.txt")
    val_file = Path(val_file or PACKAGE_DATA / "tinystories_valid_small.txt")
    t0 = time.perf_counter()

    print(f"[1/{steps}] training a {vocab_size}-token BPE tokenizer on {train_file.name}")
    tokenizer = train_tokenizer([train_file], vocab_size, [EOS_TOKEN, *(CHAT_TOKENS if chat else ())], progress=False)
    if chat:
        add_chat_tokens(tokenizer)
    tok_dir = save_tokenizer_folder(tokenizer, out / "tokenizer")
    print(f"      done in {time.perf_counter() - t0:.0f}s -> {tok_dir}")

    print(f"[2/{steps}] tokenizing the corpus (datasets)")
    headers = prepare_dataset(tok_dir, out / "data", input_files=[train_file], val_files=[val_file])
    print(f"      train {headers['train']['count']:,} tokens, val {headers['val']['count']:,} tokens "
          f"({time.perf_counter() - t0:.0f}s)")

    positions = max(context_length, CHAT_CONTEXT) if chat else context_length
    overrides = {"vocab_size": vocab_size, "max_position_embeddings": positions, **(model_overrides or {})}
    iters = max_iters or MAX_ITERS_CAP
    budget = None if max_iters else train_budget_s
    print(f"[3/{steps}] training a {preset} TinyLM on the CPU with {optimizer} ({threads} thread(s)): "
          + (f"{max_iters} steps" if max_iters else f"as many steps as fit in {train_budget_s:.0f}s"))
    config = TrainConfig(
        data_dir=str(out / "data"), tokenizer_dir=str(tok_dir), out_dir=str(out / "train"), preset=preset,
        model=overrides, batch_size=batch_size, context_length=context_length, max_iters=iters, time_budget_s=budget,
        **OPTIMIZERS[optimizer], warmup_iters=max(1, iters // 20), weight_decay=0.1, grad_clip=1.0,
        eval_every=max(1, iters // 8), eval_iters=20, checkpoint_every=max(1, iters // 8), keep_last=1,
        device="cpu", dtype="float32", seed=seed, threads=threads, overwrite=True,
    )
    if (summary := train(config)).interrupted:
        return stop_interrupted(out / "train_config.json", config, summary.iterations)
    hf_dir = publish_run(summary, out / "hf", name=out.resolve().name)  # the card names the quickstart, not its train/
    print(f"      {summary.iterations:,} steps in {time.perf_counter() - t0:.0f}s")

    print(f"[4/{steps}] reloading {hf_dir} with AutoTokenizer / AutoModelForCausalLM and generating")
    stories = tell_stories(hf_dir, seed=seed, max_new_tokens=max_new_tokens)
    for i, story in enumerate(stories, 1):
        print(f"\n--- story {i} ---\n{story}")
    whole = score_whole_validation(hf_dir, out / "data", context_length, headers["val"]["count"], val_file.name)
    print(f"total {time.perf_counter() - t0:.0f}s for {summary.iterations:,} steps ({summary.tokens:,} training tokens)")
    print(f"model folder: {hf_dir}")
    result = {**summary.to_dict(), **whole, "hf_dir": str(hf_dir), "stories": stories}
    if chat:
        result["chat"] = fine_tune_stories(out, hf_dir, budget_s=chat_budget_s, max_iters=chat_max_iters, seed=seed,
                                           threads=threads, max_new_tokens=max_new_tokens, first_step=5)
    return {**result, "total_s": time.perf_counter() - t0}


def score_whole_validation(hf_dir: Path, data_dir: Path, context_length: int, tokens: int, name: str) -> dict[str, float]:
    """The published model's loss and bits per byte over the whole validation file (every window of val.bin, not
    the training loop's 20-batch estimate), printed; as {"whole_val_loss", "whole_val_bpb"}."""
    from transformers import AutoModelForCausalLM

    from .training.validation import evaluate_whole_file

    scores = evaluate_whole_file(AutoModelForCausalLM.from_pretrained(hf_dir), data_dir, context_length)
    print(f"\nvalidation loss {scores['val_loss']:.3f} (perplexity {scores['val_perplexity']:.1f}), "
          f"{scores['val_bpb']:.3f} bits per byte, over the whole of {name} ({tokens:,} tokens)")
    return {"whole_val_loss": scores["val_loss"], "whole_val_bpb": scores["val_bpb"]}


def save_tokenizer_folder(tokenizer: Any, folder: Path) -> Path:
    """Save `tokenizer` as `folder`, replacing an earlier tokenizer folder there whole (saving over it would keep
    the files the new tokenizer does not write, such as an earlier chat template); anything else there is refused."""
    from .registration import register

    check_ours_to_replace(folder, "tokenizer_config.json", "a tokenizer folder")
    register()  # the folder carries its tokenizer code (auto_map), as `tinylm train-tokenizer` writes it
    with staged_folder(folder, replace=True) as stage:
        tokenizer.save_pretrained(stage)
    return folder


def tell_stories(hf_dir: Path, *, seed: int, max_new_tokens: int) -> list[str]:
    """Each of `PROMPTS` continued by the model in `hf_dir` (sampled: temperature 0.7, top-k 40), prompt included.

    A story stops at the model's context (`max_position_embeddings`) if `max_new_tokens` would run past it."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(hf_dir)
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    torch.manual_seed(seed)
    stories = []
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")
        room = model.config.max_position_embeddings - ids["input_ids"].shape[1]
        with torch.no_grad():
            gen = model.generate(**ids, max_new_tokens=min(max_new_tokens, room), do_sample=True, temperature=0.7,
                                 top_k=40, pad_token_id=tokenizer.eos_token_id)
        stories.append(tokenizer.decode(gen[0], skip_special_tokens=True))
    return stories
