"""Evaluation during training: the classifier's scores (loss, accuracy, macro-F1) on a padded validation set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tinylm_hf.modeling import TinyLMForSequenceClassification
from tinylm_hf.training.functional import cross_entropy
from tinylm_hf.training.validation import evaluate_classifier, macro_f1
from tiny_models import make_config, random_ids


def test_macro_f1_by_hand():
    # label 0: TP 1, FP 1, FN 1 -> 0.5; label 1: TP 1, FP 0, FN 1 -> 2/3; label 2 (only predicted): TP 0, FP 1 -> 0
    predictions, labels = np.array([0, 0, 1, 2]), np.array([0, 1, 1, 0])
    assert macro_f1(predictions, labels) == pytest.approx((0.5 + 2 / 3 + 0) / 3)


def test_macro_f1_equals_scikit_learns():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        labels, predictions = rng.integers(0, 4, 50), rng.integers(0, 5, 50)
        assert macro_f1(predictions, labels) == pytest.approx(metrics.f1_score(labels, predictions, average="macro"))


def test_classifier_scores_every_padded_batch_as_one_unpadded_text_at_a_time():
    torch.manual_seed(0)
    model = TinyLMForSequenceClassification(make_config(num_labels=3)).eval()
    texts = [random_ids(1, n)[0] for n in (5, 9, 3, 7, 8)]
    labels = torch.tensor([0, 1, 2, 1, 0])
    with torch.no_grad():
        logits = torch.cat([model(input_ids=t[None]).logits for t in texts])
    batches = []
    for part in ([0, 1], [2, 3, 4]):
        width = max(len(texts[i]) for i in part)
        ids = torch.stack([torch.cat([texts[i], torch.zeros(width - len(texts[i]), dtype=torch.long)]) for i in part])
        mask = torch.stack([(torch.arange(width) < len(texts[i])).long() for i in part])
        batches.append((ids, labels[part], mask))
    scores = evaluate_classifier(model, batches, torch.device("cpu"))
    predictions = logits.argmax(-1).numpy()
    assert scores["val_loss"] == pytest.approx(float(cross_entropy(logits, labels)), abs=1e-5)
    assert scores["val_accuracy"] == pytest.approx(float(np.mean(predictions == labels.numpy())))
    assert scores["val_macro_f1"] == pytest.approx(macro_f1(predictions, labels.numpy()))


def test_whole_file_evaluation_scores_every_window_in_bits_per_byte(tmp_path):
    """Every context-length window of val.bin, each scored once, the loss turned into bits per byte by the
    header's bytes per token: not the training loop's sample of batches."""
    import json
    import math

    from tinylm_hf.modeling import TinyLMForCausalLM
    from tinylm_hf.training.validation import evaluate_whole_file

    ids = np.random.default_rng(0).integers(0, 64, size=8 * 16 + 1).astype(np.uint16)
    ids.tofile(tmp_path / "val.bin")
    (tmp_path / "val.json").write_text(json.dumps({"dtype": "uint16", "count": len(ids), "bytes": 3 * len(ids)}))
    torch.manual_seed(0)
    model = TinyLMForCausalLM(make_config(vocab_size=64)).eval()
    x = torch.from_numpy(ids[:-1].astype(np.int64)).view(8, 16)
    y = torch.from_numpy(ids[1:].astype(np.int64)).view(8, 16)
    with torch.no_grad():
        expected = float(cross_entropy(model(input_ids=x).logits, y, reduction="sum")) / y.numel()
    scores = evaluate_whole_file(model, tmp_path, 16, batch_size=3)
    assert scores["val_loss"] == pytest.approx(expected, rel=1e-5)
    assert scores["val_bpb"] == pytest.approx(expected / math.log(2) / 3, rel=1e-5)
