"""The data of a text-classification run: tokenized as the pipeline tokenizes, padded with a mask, drawn in epochs
that follow from the step alone; and the seq_cls objective's micro-batches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import PACKAGE_DATA
from tiny_folders import make_tiny_folder
from tinylm_hf.training.batches import StepBatches
from tinylm_hf.training.objectives.classification_data import LabelledTokens, epoch_indices, open_classification_data
from tinylm_hf.training.config import TrainConfig
from tinylm_hf.training.objectives import SequenceClassification

CPU = torch.device("cpu")
TRAIN = str(PACKAGE_DATA / "corpus_source_train.jsonl")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("base") / "model", scale=None, max_position_embeddings=128)


def config_for(base: Path, tmp_path: Path, **kw) -> TrainConfig:
    values = dict(objective="seq_cls", init_from=str(base), train_file=TRAIN, out_dir=str(tmp_path / "run"),
                  context_length=48, batch_size=8, max_iters=4, warmup_iters=1, device="cpu", threads=1)
    return TrainConfig(**{**values, **kw})


def test_a_batch_is_right_padded_to_its_longest_text_with_a_mask():
    texts = LabelledTokens([np.array([5, 6, 7]), np.array([8]), np.array([9, 10])], np.array([2, 0, 1]))
    ids, labels, mask = texts.batch([1, 0], pad_id=99)
    assert ids.tolist() == [[8, 99, 99], [5, 6, 7]] and labels.tolist() == [0, 2]
    assert mask.tolist() == [[1, 0, 0], [1, 1, 1]]
    assert [b[0].shape[0] for b in texts.batches(2, pad_id=99)] == [2, 1]


def test_every_epoch_draws_each_example_once_in_an_order_the_seed_decides():
    draws = epoch_indices(7, 0, 21, seed=3)
    for epoch in range(3):
        assert sorted(draws[7 * epoch: 7 * (epoch + 1)].tolist()) == list(range(7))
    assert not np.array_equal(draws[:7], draws[7:14])
    assert np.array_equal(epoch_indices(7, 5, 9, seed=3), draws[5:14])  # any stretch, across epoch ends
    assert not np.array_equal(epoch_indices(7, 0, 7, seed=4), draws[:7])


def test_texts_are_tokenized_as_the_pipeline_does_and_cut_at_the_context(base, tmp_path):
    from transformers import AutoTokenizer

    data = open_classification_data(config_for(base, tmp_path, context_length=20))
    tokenizer = AutoTokenizer.from_pretrained(base)
    first = json.loads(Path(TRAIN).read_text(encoding="utf-8").splitlines()[0])["text"]
    assert len(data.val) == 60 and len(data.train) == 540 and data.task.validation.startswith("10% of each label")
    assert max(len(ids) for ids in data.train.ids) == 20
    assert any(np.array_equal(ids, tokenizer(first)["input_ids"][:20]) for ids in data.train.ids + data.val.ids)
    assert data.pad_id == tokenizer.eos_token_id  # the tokenizer has no pad token: pad with its end-of-text token
    assert data.model_options()["id2label"] == {0: "0", 1: "1", 2: "2"} and data.task.majority_accuracy == 1 / 3


def test_a_folder_that_is_not_a_tinylm_is_refused(base, tmp_path):
    folder = tmp_path / "bert"
    folder.mkdir()
    for path in base.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    config = json.loads((base / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(ValueError, match="holds a 'bert' model, not a TinyLM"):
        open_classification_data(config_for(folder, tmp_path))
    with pytest.raises(FileNotFoundError, match="has no config.json .a run's model folder is .*hf"):
        (tmp_path / "run-x" / "hf").mkdir(parents=True)
        (tmp_path / "run-x" / "hf" / "config.json").write_text("{}")
        open_classification_data(config_for(tmp_path / "run-x", tmp_path))


def test_a_context_longer_than_the_model_is_refused_before_reading_data(base, tmp_path):
    with pytest.raises(ValueError, match="context_length 256 exceeds the model's max_position_embeddings 128"):
        open_classification_data(config_for(base, tmp_path, context_length=256, train_file="none.jsonl"))


def test_two_ranks_rows_make_the_one_process_micro_batch(base, tmp_path):
    config = config_for(base, tmp_path, context_length=128)
    objective = SequenceClassification.open(config, open_classification_data(config), main=False)
    ids, labels, mask = objective.micro_batch(torch.Generator(), 8, slice(0, 8), CPU, (7, 2, 0))
    halves = [objective.micro_batch(torch.Generator(), 8, rows, CPU, (7, 2, 0)) for rows in (slice(0, 4), slice(4, 8))]
    for whole, (first, second) in zip((ids, labels, mask), zip(*halves)):
        assert torch.equal(torch.cat([first, second]), whole)
    assert mask[:, 0].all() and (mask.sum(1) < mask.shape[1]).any()  # right padding to the longest text


def test_the_steps_of_an_epoch_train_on_every_example_once(base, tmp_path):
    config = config_for(base, tmp_path, grad_accum_steps=2, batch_size=4)
    data = open_classification_data(config)
    objective = SequenceClassification.open(config, data, main=False)
    steps = StepBatches(objective.micro_batch, torch.Generator(), grad_accum_steps=2, size=2, rows=slice(0, 2),
                        device=CPU, seed=7)
    per_epoch = len(data.train) // 4  # 540 training examples, 4 a step
    seen = [tuple(ids[mask.bool()].tolist()) for step in range(per_epoch)
            for batch, _, masks in steps.take(step, max_iters=per_epoch) for ids, mask in zip(batch, masks)]
    assert sorted(seen) == sorted(tuple(ids.tolist()) for ids in data.train.ids)


def test_special_token_text_in_a_text_is_plain_text(base):
    from transformers import AutoTokenizer

    from tinylm_hf.training.objectives.classification_data import tokenize

    tokenizer = AutoTokenizer.from_pretrained(base)
    texts = tokenize(tokenizer, ["a good <|endoftext|> film<|pad|>"], np.array([0]), context_length=48)
    assert not set(texts.ids[0].tolist()) & set(tokenizer.all_special_ids)
    assert tokenizer.decode(texts.ids[0].tolist()) == "a good <|endoftext|> film<|pad|>"
