"""transformers.Trainer + DataCollatorForLanguageModeling(mlm=False) fine-tunes a saved TinyLM folder."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_folders import BUNDLED_VALID, make_tiny_folder

from tinylm_hf.corpus import split_documents

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)


def test_trainer_fine_tunes_a_tinylm_folder(tmp_path):
    from datasets import Dataset
    from transformers import (AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer,
                              TrainingArguments)

    folder = make_tiny_folder(tmp_path / "model")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    docs = split_documents(BUNDLED_VALID.read_text(encoding="utf-8"))[:8]
    data = Dataset.from_dict({"text": docs}).map(
        lambda b: tok(b["text"], truncation=True, max_length=model.config.max_position_embeddings),
        batched=True, remove_columns=["text"],
    )
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=12, per_device_train_batch_size=4, learning_rate=3e-3,
        warmup_steps=0, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=0,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      data_collator=DataCollatorForLanguageModeling(tok, mlm=False))
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 12 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert "model.embed_tokens.weight" in changed and "lm_head.weight" in changed
    trainer.save_model(str(tmp_path / "tuned"))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "tuned")
    assert torch.equal(reloaded.lm_head.weight, model.lm_head.weight)
