"""Measure fine-tuning on the bundled corpus-source task: a pretrained TinyLM against the same shape on random weights.

Which corpus does a 32-word passage come from (TinyStories, Shakespeare, a 19th-century novel)? Each row
fine-tunes a `TinyLMForSequenceClassification` with `transformers.Trainer` (one fixed recipe, chosen before
looking at the test split) and prints its validation and test accuracy beside the majority-class baseline:

    python scripts/finetune_corpus_source.py --init-from runs/quickstart/hf

Rows: the pretrained decoder fine-tuned in full, the pretrained decoder with PEFT LoRA (rank 8 on every
projection, the score head trained in full), and the same config on random weights (what pretraining adds).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments

from tinylm_hf import TinyLMForSequenceClassification, load_corpus_source_task
from tinylm_hf.corpus.source_task import SOURCE_LABELS

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load_classifier(folder: Path, pretrained: bool, seed: int) -> TinyLMForSequenceClassification:
    """The folder's decoder with a new 3-way head, or (not pretrained) the same config on random weights."""
    id2label = dict(enumerate(SOURCE_LABELS))
    labels = {"id2label": id2label, "label2id": {name: i for i, name in id2label.items()}}
    torch.manual_seed(seed)
    if pretrained:
        return TinyLMForSequenceClassification.from_pretrained(folder, **labels)
    config = TinyLMForSequenceClassification.config_class.from_pretrained(folder, **labels)
    return TinyLMForSequenceClassification(config)


def with_lora(model):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=16, target_modules=LORA_TARGETS))


def fine_tune(model, task, tokenizer, args: argparse.Namespace, out: Path) -> tuple[float, float, float]:
    """(validation accuracy, test accuracy, seconds) after args.epochs epochs of Trainer."""
    training = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=16, num_train_epochs=args.epochs, learning_rate=args.lr,
        warmup_steps=10, weight_decay=0.01, report_to=[], save_strategy="no", logging_strategy="no",
        use_cpu=True, disable_tqdm=True, seed=args.seed,
    )
    trainer = Trainer(model=model, args=training, train_dataset=task["train"],
                      data_collator=DataCollatorWithPadding(tokenizer))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    accuracy = {split: accuracy_on(trainer, task[split]) for split in ("validation", "test")}
    return accuracy["validation"], accuracy["test"], seconds


def accuracy_on(trainer: Trainer, split) -> float:
    predictions = trainer.predict(split)
    return float((predictions.predictions.argmax(-1) == predictions.label_ids).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init-from", type=Path, required=True, help="a TinyLM causal-LM folder (a run's hf/)")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-length", type=int, default=128, help="tokens kept per passage")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.init_from)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    def tokenize(rows):
        return tokenizer(rows["text"], truncation=True, max_length=args.max_length)

    task = load_corpus_source_task().map(tokenize, batched=True, remove_columns=["text"])
    majority = np.bincount(task["train"]["label"]).argmax()
    baseline = float((np.asarray(task["test"]["label"]) == majority).mean())
    rows = [("pretrained, full fine-tune", True, False), ("pretrained, LoRA r=8", True, True),
            ("random weights, full fine-tune", False, False)]
    print(f"init: {args.init_from}  epochs {args.epochs:g}  lr {args.lr:g}  seed {args.seed}  "
          f"threads {args.threads}  majority-class baseline (test) {baseline:.3f}")
    print(f"| {'model':<32} | {'validation':>10} | {'test':>6} | {'test - baseline':>15} | {'train s':>7} |")
    print(f"| {'-' * 32} | {'-' * 9}: | {'-' * 5}: | {'-' * 14}: | {'-' * 6}: |")
    with tempfile.TemporaryDirectory() as out:
        for name, pretrained, lora in rows:
            model = load_classifier(args.init_from, pretrained, args.seed)
            model.config.pad_token_id = tokenizer.pad_token_id
            model = with_lora(model) if lora else model
            validation, test, seconds = fine_tune(model, task, tokenizer, args, Path(out))
            print(f"| {name:<32} | {validation:>10.3f} | {test:>6.3f} | {test - baseline:>+15.3f} | {seconds:>7.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
