"""`tinylm finetune`: a TinyLM folder fine-tuned on labelled texts by the training loop, published as a folder that
`pipeline("text-classification")` loads, resumed exactly, and refusing bad input in one line.

The bundled corpus-source task on a tiny TinyLM on random weights (2 layers, width 32, a 384-token BPE): 60 steps
of 16 passages reach 0.86 validation accuracy against the majority-class baseline of 1/3 (transformers 5.24).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import PACKAGE_DATA, run_cli_error
from tiny_folders import make_tiny_folder
from tiny_runs import kill_then_resume, losses
from tinylm_hf.cli import main
from tinylm_hf.corpus.source_task import SOURCE_LABELS
from tinylm_hf.training import RunSummary

TASK = [f"--data={PACKAGE_DATA / 'corpus_source_train.jsonl'}",
        f"--val-data={PACKAGE_DATA / 'corpus_source_validation.jsonl'}",
        "--label-names", ",".join(SOURCE_LABELS)]
SMALL = ["--context-length", "64", "--batch-size", "16", "--max-lr", "3e-3", "--threads", "1", "--plot", "false"]
MARGIN = 0.25  # validation accuracy required above the majority-class baseline (measured: +0.53)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A tiny causal TinyLM folder on random weights, as `tinylm train` would publish one."""
    return make_tiny_folder(tmp_path_factory.mktemp("base") / "causal", scale=None, max_position_embeddings=128)


@pytest.fixture(scope="module")
def finished(base, tmp_path_factory) -> Path:
    """The out-dir of a 60-step fine-tuning run on the bundled task."""
    out = tmp_path_factory.mktemp("finetune") / "cls"
    assert main(["finetune", "--task", "text-classification", *TASK, "--init-from", str(base), "--out-dir", str(out),
                 "--max-iters", "60", "--eval-every", "20", *SMALL]) == 0
    return out


def pipeline_predictions(folder: Path, texts: list[str]) -> list[str]:
    from transformers import pipeline

    classify = pipeline("text-classification", model=str(folder))
    return [result["label"] for result in classify(texts, truncation=True)]  # cut where training cut them


def validation_split() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in (PACKAGE_DATA / "corpus_source_validation.jsonl").read_text().splitlines()]
    return [row["text"] for row in rows], [SOURCE_LABELS[row["label"]] for row in rows]


def test_a_short_run_on_the_bundled_task_beats_the_majority_baseline(finished):
    summary = RunSummary.load(finished)
    assert summary.objective == "seq_cls" and summary.iterations == 60 and summary.task.labels == list(SOURCE_LABELS)
    assert summary.task.majority_accuracy == pytest.approx(1 / 3) and summary.task.validation_examples == 150
    assert summary.val_accuracy >= summary.task.majority_accuracy + MARGIN, summary.val_accuracy
    assert 0 < summary.val_macro_f1 <= 1


def test_the_published_folder_classifies_as_the_run_measured(finished):
    texts, labels = validation_split()
    predicted = pipeline_predictions(finished / "hf", texts)
    accuracy = float(np.mean(np.array(predicted) == np.array(labels)))
    assert abs(accuracy - RunSummary.load(finished).val_accuracy) <= 1 / len(texts)  # one near-tie may flip
    config = json.loads((finished / "hf" / "config.json").read_text())
    assert config["architectures"] == ["TinyLMForSequenceClassification"]
    assert config["id2label"] == {str(i): name for i, name in enumerate(SOURCE_LABELS)}


def test_the_published_tokenizer_reads_special_token_text_as_training_did(finished):
    """Training encodes `<|endoftext|>` inside a text as its characters: so does the published pipeline."""
    from transformers import AutoTokenizer

    from tinylm_hf.training.objectives.classification_data import tokenize

    tokenizer = AutoTokenizer.from_pretrained(finished / "hf")
    text = "a story <|endoftext|> about a cat"
    trained = tokenize(tokenizer, [text], np.array([0]), context_length=64).ids[0].tolist()
    assert tokenizer(text)["input_ids"] == trained and tokenizer.eos_token_id not in trained


def test_metrics_record_accuracy_and_macro_f1_at_every_evaluation(finished):
    rows = [json.loads(line) for line in (finished / "metrics.jsonl").read_text().splitlines()]
    evaluations = [row for row in rows if "val_loss" in row]
    assert [row["iter"] for row in evaluations] == [20, 40, 60]
    assert all({"val_accuracy", "val_macro_f1"} <= row.keys() and "val_perplexity" not in row for row in evaluations)
    assert sum("loss" in row for row in rows) == 60
    assert 0 < rows[0]["tokens"] <= 16 * 64 and rows[0]["tokens"] % 16 == 0  # 16 texts padded to the longest


def test_the_card_states_the_task_labels_data_and_how_it_was_measured(finished):
    card = (finished / "hf" / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card and "small text classifier fine-tuned from a TinyLM" in card
    assert "text classification into 3 labels: `tinystories`, `shakespeare`, `novel`" in card
    assert "`corpus_source_train.jsonl`: 600 labelled training examples" in card
    assert "validation: 150 examples (corpus_source_validation.jsonl)" in card
    assert "| accuracy |" in card and "| macro-F1 |" in card and "majority-class baseline" in card
    assert "CDLA-Sharing-1.0 for the TinyStories passages" in card and "Macro-F1\nis the unweighted mean" in card
    assert 'pipeline("text-classification"' in card and "perplexity" not in card.lower()


def test_a_resumed_run_equals_the_uninterrupted_one(base, tmp_path):
    def finetune(out: str, *extra: str) -> None:
        assert main(["finetune", *TASK, "--init-from", str(base), "--out-dir", str(tmp_path / out), *SMALL,
                     "--batch-size", "8", "--eval-every", "0", "--checkpoint-every", "4", "--warmup-iters", "2",
                     "--cosine-cycle-iters", "12", "--publish", "none", *extra]) == 0

    finetune("full", "--max-iters", "12")
    finetune("split", "--max-iters", "8")
    finetune("split", "--max-iters", "12", "--resume")
    assert losses(tmp_path / "split") == losses(tmp_path / "full")
    full, split = (torch.load(tmp_path / run / "checkpoints" / "ckpt_00000012.pt", weights_only=True)["model"]
                   for run in ("full", "split"))
    assert all(torch.equal(full[k], split[k]) for k in full)


def test_a_killed_run_resumes_to_the_uninterrupted_one(base, tmp_path):
    argv = ["finetune", *TASK, "--init-from", str(base), *SMALL, "--batch-size", "4", "--max-iters", "120",
            "--checkpoint-every", "5", "--eval-every", "0", "--publish", "none", "--progress", "false"]
    kill_then_resume(argv, tmp_path / "killed", max_iters=120)
    assert main([*argv, "--out-dir", str(tmp_path / "whole")]) == 0
    assert losses(tmp_path / "killed") == losses(tmp_path / "whole")


def test_a_masked_lm_encoder_fine_tunes_and_its_pipeline_pools_as_training_did(tmp_path):
    encoder = make_tiny_folder(tmp_path / "encoder", scale=None, masked_lm=True, max_position_embeddings=128)
    out = tmp_path / "cls"
    assert main(["finetune", *TASK, "--init-from", str(encoder), "--out-dir", str(out), *SMALL, "--max-iters", "10",
                 "--eval-every", "0"]) == 0
    config = json.loads((out / "hf" / "config.json").read_text())
    assert config["use_bidirectional_attention"] is True
    texts, labels = validation_split()
    accuracy = float(np.mean(np.array(pipeline_predictions(out / "hf", texts)) == np.array(labels)))
    assert abs(accuracy - RunSummary.load(out).val_accuracy) <= 1 / len(texts)


def test_string_labels_from_csv_name_themselves_and_validation_is_held_out(base, tmp_path):
    rows = [(f"a happy story number {i}", "pos") if i % 2 else (f"a sad story, number {i}", "neg") for i in range(40)]
    (tmp_path / "reviews.csv").write_text("review,mood\n" + "".join(f'"{t}",{m}\n' for t, m in rows), encoding="utf-8")
    out = tmp_path / "cls"
    assert main(["finetune", "--data", str(tmp_path / "reviews.csv"), "--text-column", "review", "--label-column",
                 "mood", "--init-from", str(base), "--out-dir", str(out), *SMALL, "--batch-size", "4",
                 "--max-iters", "5", "--warmup-iters", "1", "--validation-share", "0.25"]) == 0
    task = RunSummary.load(out).task
    assert task.labels == ["neg", "pos"] and (task.train_examples, task.validation_examples) == (30, 10)
    assert task.validation == "25% of each label of reviews.csv, held out"
    assert set(pipeline_predictions(out / "hf", ["a happy story"])) <= {"neg", "pos"}


@pytest.mark.parametrize("change, message", [
    ({"--text-column": "body"}, r"corpus_source_train.jsonl has no column 'body' .*--text-column"),
    ({"--data": "{one_class}"}, "holds one class .* at least two labels"),
    ({"--data": "{empty}"}, "empty.jsonl holds no labelled examples"),
    ({"--data": "{missing}"}, "labelled data file .*missing.jsonl does not exist"),
    ({"--init-from": "{not_tinylm}"}, "holds a 'gpt2' model, not a TinyLM"),
    ({"--init-from": "{run_dir}"}, "has no config.json .a run's model folder is .*hf"),
    ({"--label-names": "a,b"}, "has label 2, outside the ids 0..1"),
    ({"--validation-share": "1.5"}, "validation_share must be strictly between 0 and 1"),
], ids=["missing-column", "one-class", "empty-file", "missing-file", "not-a-tinylm", "run-folder", "too-few-names",
        "bad-share"])
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(base, tmp_path, capsys, change, message):
    (tmp_path / "one_class.jsonl").write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 1}\n')
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "gpt2").mkdir()
    for path in base.iterdir():
        (tmp_path / "gpt2" / path.name).write_bytes(path.read_bytes())
    config = json.loads((base / "config.json").read_text())
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    (tmp_path / "run" / "hf").mkdir(parents=True)
    (tmp_path / "run" / "hf" / "config.json").write_text("{}")
    places = {"one_class": tmp_path / "one_class.jsonl", "empty": tmp_path / "empty.jsonl", "missing":
              tmp_path / "missing.jsonl", "not_tinylm": tmp_path / "gpt2", "run_dir": tmp_path / "run"}
    flags = {"--data": str(PACKAGE_DATA / "corpus_source_train.jsonl"), "--init-from": str(base),
             **{flag: value.format(**places) for flag, value in change.items()}}
    argv = ["finetune", *[part for item in flags.items() for part in item], "--out-dir", str(tmp_path / "out"), *SMALL]
    assert re.search(message, run_cli_error(argv, capsys))
    assert not (tmp_path / "out").exists()


def test_init_from_and_data_are_required(tmp_path, capsys):
    assert "needs init_from" in run_cli_error(["finetune", "--data", "x.jsonl", "--out-dir", str(tmp_path)], capsys)
    assert "needs train_file" in run_cli_error(["finetune", "--init-from", "x", "--out-dir", str(tmp_path)], capsys)


@pytest.mark.slow
def test_fine_tuning_the_quickstart_model_beats_the_baseline_on_the_test_split(tmp_path):
    """A measurement: the quickstart's model (200 steps) fine-tuned with the command's defaults (100 steps of 16,
    2.7 epochs), then the published folder's pipeline on the 150 test passages."""
    quickstart = tmp_path / "quickstart"
    assert main(["quickstart", "--out", str(quickstart), "--max-iters", "200", "--max-new-tokens", "8"]) == 0
    assert main(["finetune", *TASK, "--init-from", str(quickstart / "hf"), "--out-dir", str(tmp_path / "cls")]) == 0
    rows = [json.loads(line) for line in (PACKAGE_DATA / "corpus_source_test.jsonl").read_text().splitlines()]
    predicted = pipeline_predictions(tmp_path / "cls" / "hf", [row["text"] for row in rows])
    accuracy = float(np.mean([p == SOURCE_LABELS[row["label"]] for p, row in zip(predicted, rows)]))
    print(f"test accuracy {accuracy:.3f} (majority-class baseline 0.333)")
    assert accuracy >= 1 / 3 + 0.4, accuracy


def test_a_classifier_fine_tuned_again_on_other_labels_is_one_line(finished, tmp_path, capsys):
    data = tmp_path / "two.jsonl"
    data.write_text("".join(json.dumps({"text": f"text {i}", "label": ["a", "b"][i % 2]}) + "\n" for i in range(20)))
    err = run_cli_error(["finetune", f"--data={data}", "--init-from", str(finished / "hf"), "--out-dir",
                         str(tmp_path / "again"), "--max-iters", "2", "--warmup-iters", "1", *SMALL], capsys)
    assert "is a classifier of 3 labels (tinystories, shakespeare, novel) and the data has 2 (a, b)" in err
    assert not (tmp_path / "again").exists()


def test_push_dry_run_checks_a_classifier_folder_with_its_own_head(finished, capsys):
    assert main(["push", str(finished / "hf"), "--repo-id", "alice/classifier", "--dry-run"]) == 0
    assert "model.safetensors" in capsys.readouterr().out
