"""Data parallelism: two gloo ranks under torchrun match a 1-process run with the same global batch;
one process is rank 0 of 1 and wraps nothing."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from conftest import REPO_ROOT
from tiny_runs import losses, run_two_gloo_ranks, tiny_config, write_byte_dataset
from tinylm_hf.training.distributed import DataParallel
from tinylm_hf.training.loop import train


@pytest.mark.parametrize(("grad_accum_steps", "optimizer"), [(1, "adamw"), (2, "adamw"), (2, "muon")])
def test_two_gloo_ranks_match_one_process(tmp_path, grad_accum_steps, optimizer):
    data = write_byte_dataset(tmp_path / "data")
    options = dict(batch_size=8, grad_accum_steps=grad_accum_steps, max_iters=6, eval_every=3, checkpoint_every=3,
                   optimizer=optimizer)
    cfg = tiny_config(data, tmp_path / "ddp", **options)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    proc = run_two_gloo_ranks(tmp_path, "-m", "tinylm_hf.cli", "train", "--config", str(tmp_path / "cfg.json"))
    assert json.loads((tmp_path / "ddp" / "summary.json").read_text())["world_size"] == 2

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(tiny_config(data, tmp_path / "single", **options))
    finally:
        torch.set_num_threads(threads)
    ddp, single = losses(tmp_path / "ddp"), losses(tmp_path / "single")
    assert ddp.keys() == single.keys() == set(range(1, 7))
    np.testing.assert_allclose(list(ddp.values()), list(single.values()), rtol=1e-5)
    # only rank 0 wrote: one metrics line per step and eval, checkpoints from one writer
    rows = (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 6 + 2
    assert (tmp_path / "ddp" / "hf" / "model.safetensors").is_file()


RANKS_AFTER_MUON = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM
from tinylm_hf.training import MuonWithAdamW, param_groups_for_muon

dist.init_process_group("gloo")
torch.manual_seed(0)
raw = TinyLMForCausalLM(TinyLMConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, max_position_embeddings=16))
model = DistributedDataParallel(raw)
start = torch.cat([p.detach().flatten() for p in raw.parameters()])
optimizer = MuonWithAdamW(param_groups_for_muon(raw, 0.1), lr=3e-3, muon_lr=0.02)
gen = torch.Generator().manual_seed(dist.get_rank())  # each rank its own rows
for _ in range(5):
    ids = torch.randint(0, 64, (2, 16), generator=gen)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
flat = torch.cat([p.detach().flatten() for p in raw.parameters()])
gathered = [torch.empty_like(flat) for _ in range(2)]
dist.all_gather(gathered, flat)
print(f"rank {dist.get_rank()}: ranks equal {torch.equal(*gathered)}, moved {not torch.equal(flat, start)}")
dist.destroy_process_group()
"""


def test_muon_keeps_the_ranks_identical(tmp_path):
    """Each rank orthogonalises the same averaged gradient: after steps on different rows, the weights are equal."""
    (tmp_path / "ranks.py").write_text(RANKS_AFTER_MUON)
    proc = run_two_gloo_ranks(tmp_path, str(tmp_path / "ranks.py"))
    assert proc.stdout.count("ranks equal True, moved True") == 2, proc.stdout


def test_one_process_is_rank_zero_of_one_and_wraps_nothing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ddp = DataParallel.from_environment()
    assert (ddp.rank, ddp.world, ddp.main) == (0, 1, True)
    model, cpu = torch.nn.Linear(2, 2), torch.device("cpu")
    assert ddp.wrap(model, cpu) is model and ddp.no_sync(model) is None and ddp.all_reduce is None
    assert ddp.any(True, cpu) and not ddp.any(False, cpu)


def test_each_rank_keeps_its_rows_of_a_micro_step():
    assert DataParallel(rank=1, world=2).micro_batch_rows(8, 2) == (4, slice(2, 4))
    assert DataParallel().micro_batch_rows(8, 2) == (4, slice(0, 4))
    with pytest.raises(ValueError, match=r"batch_size 6 must be divisible by grad_accum_steps \* world_size = 4"):
        DataParallel(rank=0, world=2).micro_batch_rows(6, 2)


def test_two_gloo_ranks_under_a_time_budget_agree_on_the_rate_and_the_last_step(tmp_path):
    """Each rank times its own steps; they share the largest progress, so they stop at the same step (a rank
    stopping alone would leave the other waiting in a collective until torchrun's timeout)."""
    data = write_byte_dataset(tmp_path / "data")
    cfg = tiny_config(data, tmp_path / "ddp", batch_size=8, max_iters=100_000, warmup_iters=10, eval_every=0,
                      checkpoint_every=0, time_budget_s=3.0)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    proc = run_two_gloo_ranks(tmp_path, "-m", "tinylm_hf.cli", "train", "--config", str(tmp_path / "cfg.json"),
                              "--publish", "none")
    assert json.loads((tmp_path / "ddp" / "summary.json").read_text())["world_size"] == 2
    assert 5 < max(losses(tmp_path / "ddp")) < 100_000


def test_two_gloo_ranks_resume_a_run_that_died_before_its_first_checkpoint_afresh(tmp_path):
    # the main process starts afresh in such a folder; the other rank looked for a checkpoint to resume
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    cfg = tiny_config(data, tmp_path / "ddp", batch_size=8, max_iters=2, eval_every=0, resume=True)
    (tmp_path / "ddp").mkdir()
    (tmp_path / "ddp" / "run.json").write_text(json.dumps({"run_id": "died0000000"}))  # what a run that died left
    (tmp_path / "ddp" / "metrics.jsonl").write_text(json.dumps({"iter": 1, "tokens": 128, "loss": 5.5}) + "\n")
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    proc = run_two_gloo_ranks(tmp_path, "-m", "tinylm_hf.cli", "train", "--config", str(tmp_path / "cfg.json"))
    assert "starting afresh" in proc.stdout
    assert json.loads((tmp_path / "ddp" / "summary.json").read_text())["iterations"] == 2
