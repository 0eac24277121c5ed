"""A run folder keeps working across releases: one written by an earlier tinylm resumes exactly and publishes.

tests/fixtures/old_run is the run folder (checkpoint, run.json, summary.json) that the code before the run
package `tinylm_hf/training/run/` (commit 43efa26) wrote for `tiny_runs.tiny_config` with `OLD_MODEL` and a 12-step
cosine, stopped after 4 steps. tests/fixtures/expected_old_run.json holds what that code measured: the losses of
the uninterrupted 12-step run (which that code's resume of this folder repeated exactly), and the last-position
logits of the model it published from the 4-step checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from tiny_runs import losses, tiny_config, write_byte_dataset
from tinylm_hf.publish import publish_run
from tinylm_hf.training import train
from tinylm_hf.training.run.checkpoint import read_checkpoint
from tinylm_hf.training.run.summary import RunSummary

FIXTURES = Path(__file__).parent / "fixtures"
OLD_MODEL = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 1}
EXPECTED = json.loads((FIXTURES / "expected_old_run.json").read_text(encoding="utf-8"))


@pytest.fixture
def old_run(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "old_run", tmp_path / "run"))


@pytest.fixture
def data(tmp_path) -> Path:
    return write_byte_dataset(tmp_path / "data")  # the same bytes and tokenizer the old run trained on


def test_the_old_checkpoint_reads_as_a_record(old_run):
    checkpoint = read_checkpoint(old_run / "checkpoints" / "ckpt_00000004.pt")
    assert (checkpoint.iteration, checkpoint.objective, checkpoint.run_id) == (4, "clm", "83c3f870052a")
    assert checkpoint.tinylm_config().hidden_size == OLD_MODEL["hidden_size"]
    assert [m["iter"] for m in checkpoint.metrics if "loss" in m] == [1, 2, 3, 4]


def test_an_old_run_resumes_as_the_uninterrupted_run_went_on(old_run, data):
    summary = train(tiny_config(data, old_run, model=dict(OLD_MODEL), cosine_cycle_iters=12, resume=True))
    assert summary.iterations == 12 and summary.run_id == "83c3f870052a"
    got, expected = losses(old_run), {int(it): loss for it, loss in EXPECTED["losses"].items()}
    assert sorted(got) == sorted(expected)
    torch.testing.assert_close(torch.tensor([got[it] for it in sorted(got)]),
                               torch.tensor([expected[it] for it in sorted(got)]), rtol=1e-5, atol=1e-5)


def test_an_old_run_publishes_the_model_it_saved(old_run, data):
    from transformers import AutoModelForCausalLM

    summary = dataclasses.replace(RunSummary.load(old_run), out_dir=str(old_run),
                                  checkpoint=str(old_run / "checkpoints" / "ckpt_00000004.pt"), best_checkpoint=None)
    folder = publish_run(summary, tokenizer_dir=data / "tokenizer")
    model = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        logits = model(torch.tensor([list(EXPECTED["input"].encode())])).logits[0, -1]
    torch.testing.assert_close(logits, torch.tensor(EXPECTED["last_logits"]), rtol=1e-5, atol=1e-5)


def test_a_summary_describes_an_objectives_own_numbers():
    """DPO's reward numbers (val_metrics) and a classifier's baseline reach the few lines a command ends with."""
    dpo = RunSummary("r", "runs/dpo", 4, 512, 256, 2, 0.6, val_loss=0.69, best_val_loss=0.65, elapsed_s=3,
                     val_metrics={"val_reward_accuracy": 0.75, "val_reward_margin": 0.0123}, objective="dpo")
    assert dpo.describe().splitlines()[1] == ("validation: loss 0.6900 (best 0.6500), reward_accuracy 0.75, "
                                              "reward_margin 0.0123")
    none = RunSummary("r", "runs/x", 1, 8, 8, 1, 2.0)
    assert none.describe().splitlines()[1] == "validation: none (no evaluation ran)"
