"""The chat half of `tinylm quickstart --chat`: fine-tune the quickstart's model on the bundled story conversations
(the objective of `tinylm sft`), publish the chat model and print its replies to a few requests.

5. fine-tune the published model on `corpus.conversations.STORY_CHATS` (its validation conversations held out)
   with the training loop for a time budget, and publish it as a chat model folder;
6. reload that folder and answer each of `CHAT_PROMPTS` in a fresh conversation (`chat.ChatSession`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .corpus.conversations import STORY_CHATS
from .fileio import write_json_atomic
from .publish import publish_run
from .training import TrainConfig, train
from .training.objectives.sections import SFTSection

# requests of the kinds the conversations hold, with characters none of them names
CHAT_PROMPTS = (
    "Tell me a story about a little dog named Max.",
    "Can you tell me a story about Zoe?",
    "Please tell me a story about a brave frog named Hop.",
)
CHAT_CONTEXT = 256  # the bundled conversations fit it with a 2k-token vocabulary
MAX_ITERS_CAP = 1000  # the schedule's horizon when the time budget decides the step count


def fine_tune_stories(out: Path, base_dir: Path, *, budget_s: float = 120.0, max_iters: int | None = None,
                      seed: int = 1337, threads: int | None = None, max_new_tokens: int = 120,
                      first_step: int = 5) -> dict[str, Any]:
    """Fine-tune the model in `base_dir` into `out/chat` and answer `CHAT_PROMPTS`; returns the chat run's
    summary fields, its folder (`hf_dir`) and the `replies`."""
    from transformers import AutoConfig

    if not max_iters and not budget_s > 0:
        raise ValueError(f"the fine-tuning budget must be a positive number of seconds, got {budget_s!r}")
    t0 = time.perf_counter()
    last = first_step + 1
    iters = max_iters or MAX_ITERS_CAP
    print(f"[{first_step}/{last}] fine-tuning on {STORY_CHATS['train'].name} (loss on the assistant's turns only): "
          + (f"{max_iters} steps" if max_iters else f"as many steps as fit in {budget_s:.0f}s"))
    context = min(CHAT_CONTEXT, AutoConfig.from_pretrained(base_dir).max_position_embeddings)
    config = TrainConfig(
        objective=SFTSection.name, conversations=str(STORY_CHATS["train"]),
        val_conversations=str(STORY_CHATS["validation"]),
        init_from=str(base_dir), out_dir=str(out / "chat"), batch_size=8, context_length=context, max_iters=iters,
        time_budget_s=None if max_iters else budget_s, max_lr=1e-3, min_lr=1e-4, warmup_iters=max(1, iters // 20),
        eval_every=max(1, iters // 4), eval_iters=10, checkpoint_every=max(1, iters // 4), keep_last=1,
        sample_prompt=CHAT_PROMPTS[0], sample_tokens=32, device="cpu", dtype="float32", seed=seed, threads=threads,
        overwrite=True,
    )
    summary = train(config)
    if summary.interrupted:
        return stop_interrupted(out / "chat_config.json", config, summary.iterations)
    hf_dir = publish_run(summary, name=f"{out.resolve().name}-chat")
    print(f"      {summary.iterations:,} steps in {time.perf_counter() - t0:.0f}s; validation loss on the assistant's "
          f"tokens {summary.val_loss:.3f} -> {hf_dir}")
    print(f"[{last}/{last}] reloading {hf_dir} and asking for stories (tinylm chat {hf_dir})")
    replies = answer(hf_dir, CHAT_PROMPTS, seed=seed, max_new_tokens=max_new_tokens)
    for prompt, reply in zip(CHAT_PROMPTS, replies):
        print(f"\nyou> {prompt}\nmodel> {reply}")
    return {**summary.to_dict(), "hf_dir": str(hf_dir), "replies": replies, "total_s": time.perf_counter() - t0}


def stop_interrupted(settings_file: Path, config: TrainConfig, iterations: int) -> dict[str, Any]:
    """After Ctrl-C in training: publish nothing, keep the run's settings in `settings_file`, say how to continue."""
    settings = write_json_atomic(settings_file, {**config.to_dict(), "overwrite": False})
    print(f"interrupted at step {iterations}: the checkpoint is kept in {config.out_dir}; nothing was published. "
          f"Continue with `tinylm train --config {settings} --resume` (a new quickstart starts afresh)")
    return {"interrupted": True, "iterations": iterations, "out_dir": config.out_dir, "config_file": str(settings)}


def answer(folder: Path, prompts: tuple[str, ...], *, seed: int, max_new_tokens: int) -> list[str]:
    """The chat model's reply to each prompt, each in a fresh conversation (sampled: temperature 0.7, top-k 40)."""
    from .chat import ChatSession
    from .publish import load_folder

    model, tokenizer = load_folder(folder)
    session = ChatSession(model.eval(), tokenizer, max_new_tokens=max_new_tokens, temperature=0.7, top_k=40, seed=seed)
    replies = []
    for prompt in prompts:
        session.reset()
        replies.append(session.reply(prompt))
    return replies
