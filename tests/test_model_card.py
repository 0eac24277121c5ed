"""The model card (publish/model_card.py) states only what the run did: its warm-up, its validation text, how each
number was measured, the masking it used, how the folder samples; and a licence field even when unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_folders import make_tiny_folder
from tinylm_hf.publish.model_card import render_model_card
from tinylm_hf.training.run.summary import DataProvenance, RunSummary, learning_rate_facts

QUICKSTART_CONFIG = {"max_lr": 3e-3, "min_lr": 3e-4, "warmup_iters": 150, "max_iters": 3000, "eval_iters": 20,
                     "weight_decay": 0.1, "grad_clip": 1.0, "seed": 1337, "dtype": "float32"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("card") / "model")


def summary(**changes) -> RunSummary:
    """A budgeted 63-step run whose config asked for 150 warm-up steps of 3000 (the quickstart's)."""
    records = [{"iter": i, "lr": 3e-3 * min(i - 1, 3) / 3} for i in range(1, 64)]  # warm-up re-planned to 3 steps
    values = dict(run_id="r", out_dir="/runs/quickstart/train", iterations=63, tokens=129_024, context_length=128,
                  batch_size=16, loss=2.5, val_loss=2.4, val_perplexity=11.0, val_bpb=1.2,
                  data=DataProvenance(input_files=["train.txt"], val_files=["valid.txt"], train_tokens=9000),
                  train_config=QUICKSTART_CONFIG, **learning_rate_facts(records))
    return RunSummary(**{**values, **changes})


def test_the_warm_up_stated_is_the_one_that_ran(folder):
    text = render_model_card(folder, summary()).text
    assert "warmed up over 3 step(s) to 0.003" in text and "150" not in text


def test_learning_rate_facts_read_the_steps_rates():
    records = [{"iter": 1, "lr": 0.0}, {"iter": 2, "lr": 0.5}, {"iter": 3, "lr": 1.0}, {"iter": 4, "lr": 0.7},
               {"iter": 4, "val_loss": 2.0}]
    assert learning_rate_facts(records) == {"warmup_iters": 2, "peak_lr": 1.0, "final_lr": 0.7}


def test_the_validation_file_named_is_the_one_used(folder):
    card = render_model_card(folder, summary())
    assert "Measured on valid.txt." in card.text and "train.txt (validation" not in card.text
    assert card.data.eval_results[0].dataset_name == "valid.txt"


def test_validation_carved_off_the_training_text_says_so(folder):
    data = DataProvenance(input_files=["train.txt"], val_carved=0.05)
    assert "Measured on 5% of train.txt held out from training." in render_model_card(folder, summary(data=data)).text


def test_numbers_of_the_training_loop_are_not_described_as_a_sliding_window(folder):
    card = render_model_card(folder, summary())
    assert "Measured by the training run at its last evaluation: the mean loss over the first 20 batches" in card.text
    assert "computed by `tinylm eval`" not in card.text
    assert card.data.eval_results[0].metric_config == "tinylm-train-validation"


def test_numbers_of_tinylm_eval_are_described_as_its_sliding_window(folder, tmp_path):
    import shutil

    copy = Path(shutil.copytree(folder, tmp_path / "model"))
    (copy / "eval_results.json").write_text(json.dumps({"summary": {"perplexity": 9.0, "dataset": "valid.txt"}}))
    card = render_model_card(copy, summary())
    assert "computed by `tinylm eval` over the whole text with a sliding window" in card.text
    assert "Measured by the training run" not in card.text


def test_the_card_has_a_licence_field_even_when_unknown(folder):
    assert render_model_card(folder, summary()).data.license == "unknown"
    assert render_model_card(folder, summary(), license="mit").data.license == "mit"


def test_a_masked_lm_card_claims_no_llama_export_and_states_its_masking_probability(tmp_path):
    encoder = make_tiny_folder(tmp_path / "encoder", masked_lm=True, use_bidirectional_attention=True)
    card = render_model_card(encoder, summary(objective="mlm", masking="dynamic",
                                              train_config={**QUICKSTART_CONFIG, "mlm_probability": 0.3}))
    assert "llama-compatible" not in card.data.tags and "can also be exported" not in card.text
    assert "30% of the tokens chosen" in card.text


def test_the_card_samples_as_the_generation_config_does(folder, tmp_path):
    import shutil

    from transformers import GenerationConfig

    copy = Path(shutil.copytree(folder, tmp_path / "model"))
    GenerationConfig(do_sample=True, temperature=0.8, top_k=50, max_new_tokens=200).save_pretrained(copy)
    text = render_model_card(copy, summary()).text
    assert "model.generate(**inputs, max_new_tokens=50)  # samples with temperature 0.8, top-k 50" in text
    assert '--prompt "Once upon a time" --temperature 0.8 --top-k 50`' in text and "top_p" not in text


def test_a_muon_run_names_its_optimizer_and_both_rates(folder):
    config = {**QUICKSTART_CONFIG, "optimizer": "muon", "muon_lr": 0.02, "muon_momentum": 0.95}
    text = render_model_card(folder, summary(train_config=config)).text
    assert "hand-written Muon for the matrices inside the blocks and AdamW for the embeddings, head and norms" in text
    assert "Muon on the block matrices (peak learning rate 0.02, momentum 0.95" in text
    assert "warmed up over 3 step(s) to 0.003" in text


def test_an_adamw_run_names_adamw_only(folder):
    text = render_model_card(folder, summary()).text
    assert "hand-written AdamW" in text and "Muon" not in text


def _evaluated_copy(folder: Path, tmp_path: Path, capsys) -> Path:
    """A copy of `folder` with the eval_results.json that `tinylm eval --out` writes into it."""
    import shutil

    from tinylm_hf.cli import main

    copy = Path(shutil.copytree(folder, tmp_path / "model"))
    text = tmp_path / "valid.txt"
    text.write_text("Once upon a time there was a cat. The cat sat on a mat and was happy.\n", encoding="utf-8")
    assert main(["eval", str(copy), "--input", str(text), "--out", str(copy / "eval_results.json")]) == 0
    capsys.readouterr()
    return copy


def test_eval_results_of_these_weights_are_reported(folder, tmp_path, capsys):
    copy = _evaluated_copy(folder, tmp_path, capsys)
    assert "computed by `tinylm eval`" in render_model_card(copy, summary()).text


def test_eval_results_of_other_weights_are_refused_never_reported(folder, tmp_path, capsys):
    # the card (and push) reported an eval_results.json because it was in the folder, whatever weights it measured
    from conftest import run_cli_error

    copy = _evaluated_copy(folder, tmp_path, capsys)
    other = make_tiny_folder(tmp_path / "other", seed=5)
    (copy / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes())  # the model replaced
    with pytest.raises(ValueError, match="measured on other weights"):
        render_model_card(copy, summary())
    message = run_cli_error(["push", str(copy), "--repo-id", "someone/model", "--dry-run"], capsys)
    assert "eval_results.json" in message and "tinylm eval" in message


def test_settings_a_resume_changed_are_stated_where_they_changed(folder):
    # the card stated only the last values, as if every step had used them
    config = {**QUICKSTART_CONFIG, "weight_decay": 0.05}
    text = render_model_card(folder, summary(train_config=config,
                                             setting_changes=["at step 40 weight_decay 0.1 -> 0.05"])).text
    assert "settings changed on resume (the values above are the last ones): at step 40 weight_decay 0.1 -> 0.05" in text
    assert "settings changed on resume" not in render_model_card(folder, summary()).text
