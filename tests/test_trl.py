"""TRL's trainers on a TinyLM chat folder with the tokenizer AutoTokenizer returns (docs/how-to/trl.md)."""

from __future__ import annotations

import pytest
from tiny_chats import make_chat_folder

pytest.importorskip("trl")

NAMES = ("Ben", "Lily", "Max", "Sue")


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory):
    return make_chat_folder(tmp_path_factory.mktemp("trl") / "chat", max_position_embeddings=128)


def common_args(tmp_path) -> dict:
    return dict(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, report_to=[],
                save_strategy="no", logging_steps=1, max_length=128, use_cpu=True)


def test_sft_trainer_learns_only_the_assistant_replies_and_their_end_token(chat_folder, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    chats = [[{"role": "user", "content": f"Tell me about {n}."}, {"role": "assistant", "content": f"{n} ran home."}]
             for n in NAMES]
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(chat_folder), processing_class=tokenizer,
        args=SFTConfig(assistant_only_loss=True, **common_args(tmp_path)),
        train_dataset=Dataset.from_list([{"messages": chat} for chat in chats]))
    batch = next(iter(trainer.get_train_dataloader()))
    learned = [tokenizer.decode([i for i, label in zip(ids.tolist(), labels.tolist()) if label != -100])
               for ids, labels in zip(batch["input_ids"], batch["labels"])]
    assert len(learned) == 2 and all(text in {f"{n} ran home.<|end|>" for n in NAMES} for text in learned)
    assert trainer.train().global_step == 2


def test_dpo_trainer_scores_the_replies_after_the_prompt(chat_folder, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    rows = [{"prompt": [{"role": "user", "content": f"Tell me about {n}."}],
             "chosen": [{"role": "assistant", "content": f"{n} ran home."}],
             "rejected": [{"role": "assistant", "content": "No."}]} for n in NAMES]
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(chat_folder), processing_class=tokenizer,
                         args=DPOConfig(**common_args(tmp_path)), train_dataset=Dataset.from_list(rows))
    batch = next(iter(trainer.get_train_dataloader()))  # chosen rows, then the same prompts' rejected rows
    completions = [tokenizer.decode([i for i, m in zip(ids.tolist(), mask.tolist()) if m])
                   for ids, mask in zip(batch["input_ids"], batch["completion_mask"])]
    # DPOTrainer counts every token after the prompt: the template's newline after <|end|> too
    assert completions[2:] == ["No.<|end|>\n"] * 2
    assert all(text in {f"{n} ran home.<|end|>\n" for n in NAMES} for text in completions[:2])
    assert trainer.train().global_step == 2
