"""Training objectives: each rank's rows are its slice of the one-process micro-batch, and the objectives
named by the config all exist; `StepBatches` draws a prefetched step again from a checkpoint's sampler state; and
no module outside `training/objectives/` and `commands/` spells an objective's name (the loop, the card writer and
the publisher ask the objective instead)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import tinylm_hf
from tiny_runs import byte_data, tiny_config, write_byte_dataset  # noqa: F401  (byte_data is a fixture)
from tinylm_hf.modeling import TinyLMForCausalLM, TinyLMForMaskedLM
from tinylm_hf.modeling.loss_tinylm import IGNORE_INDEX
from tinylm_hf.training.batches import StepBatches
from tinylm_hf.training.config import OBJECTIVES, TrainConfig
from tinylm_hf.training.data import open_data
from tinylm_hf.training.objectives import OBJECTIVE_CLASSES, Objective, open_objective

CPU = torch.device("cpu")
PACKAGE = Path(tinylm_hf.__file__).resolve().parent
OBJECTIVE_OWNERS = ("training/objectives/", "commands/")  # the modules that may name objectives


def objective_names_in(source: str) -> list[tuple[int, str]]:
    """(line, name) of every string constant of `source` that is an objective's name: a branch such as
    `if summary.objective == "sft"`, a default such as `.get("objective", "clm")`, a table key."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and node.value in OBJECTIVES]


@pytest.fixture(scope="module")
def mask_data(tmp_path_factory) -> Path:
    """Byte-level TinyStories data whose tokenizer has a mask token."""
    return write_byte_dataset(tmp_path_factory.mktemp("mask-bytes"), n_bytes=20_000, extra_special_tokens=("<|mask|>",))


def open_for(data: Path, tmp_path: Path, **kw) -> Objective:
    config = tiny_config(data, tmp_path / "run", **kw)
    return open_objective(config, open_data(config), main=True)


def test_every_objective_the_config_accepts_has_a_class():
    assert tuple(OBJECTIVE_CLASSES) == OBJECTIVES
    assert OBJECTIVE_CLASSES["clm"].model_class() is TinyLMForCausalLM
    assert OBJECTIVE_CLASSES["mlm"].model_class() is TinyLMForMaskedLM
    assert OBJECTIVE_CLASSES["sft"].model_class() is TinyLMForCausalLM


def test_the_name_finder_sees_branches_and_defaults():
    source = ('if summary.objective == "sft":\n    x = 1\n'
              'elif objective in ("mlm", "other"):\n    y = s.get("objective", "clm")\n')
    assert sorted(objective_names_in(source)) == [(1, "sft"), (3, "mlm"), (4, "clm")]
    assert objective_names_in('"""An sft run, an mlm run."""\nname = SFTSection.name\n') == []


def test_no_module_outside_objectives_and_commands_names_an_objective():
    named = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if not where.startswith(OBJECTIVE_OWNERS) and (found := objective_names_in(path.read_text(encoding="utf-8"))):
            named[where] = found
    assert named == {}, "ask the objective (training/objectives) instead of naming it"


def test_the_config_asks_the_runs_section_when_it_is_made():
    with pytest.raises(ValueError, match="objective dpo needs preferences"):
        TrainConfig(objective="dpo", init_from="some/chat-model")
    with pytest.raises(ValueError, match="dpo_beta must be a positive number"):
        TrainConfig(data_dir="data", dpo_beta=-1.0)  # a value given is a value checked, whatever the objective
    assert TrainConfig(objective="dpo", preferences="pairs.jsonl", init_from="m").dpo_beta == 0.1


def test_a_checkpoint_from_before_objectives_is_read_by_its_model():
    from tinylm_hf.training.objectives import CausalLM, MaskedLM, objective_class

    assert objective_class(None, {"use_bidirectional_attention": True}) is MaskedLM
    assert objective_class(None, {}) is CausalLM
    assert objective_class("mlm") is MaskedLM


def test_causal_targets_are_the_next_tokens(byte_data, tmp_path):
    objective = open_for(byte_data, tmp_path)
    x, y = objective.micro_batch(torch.Generator().manual_seed(0), 4, slice(0, 4), CPU, (7, 0, 0))
    assert x.shape == y.shape == (4, 16)
    assert torch.equal(x[:, 1:], y[:, :-1])


@pytest.mark.parametrize("objective,masking", [("clm", "dynamic"), ("mlm", "dynamic"), ("mlm", "span")])
def test_two_ranks_rows_make_the_one_process_micro_batch(mask_data, tmp_path, objective, masking):
    chosen = open_for(mask_data, tmp_path, objective=objective, masking=masking, context_length=32)

    def rows(part: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return chosen.micro_batch(torch.Generator().manual_seed(3), 8, part, CPU, (7, 2, 1))

    x, y = rows(slice(0, 8))
    (x0, y0), (x1, y1) = rows(slice(0, 4)), rows(slice(4, 8))
    assert torch.equal(torch.cat([x0, x1]), x) and torch.equal(torch.cat([y0, y1]), y)
    if objective == "mlm":
        assert (y == IGNORE_INDEX).any() and (y != IGNORE_INDEX).any()


def test_a_resumed_run_draws_the_prefetched_step_again(byte_data, tmp_path):
    objective = open_for(byte_data, tmp_path)

    def stream(sampler: torch.Generator) -> StepBatches:
        return StepBatches(objective.micro_batch, sampler, grad_accum_steps=2, size=4, rows=slice(0, 4), device=CPU,
                           seed=7)

    sampler = torch.Generator().manual_seed(1)
    batches = stream(sampler)
    batches.take(0, max_iters=3)
    saved = batches.sampler_state  # what a checkpoint after step 0 keeps: before the next step's draw
    batches.prefetch_next()
    prefetched = batches.take(1, max_iters=3)
    resumed = torch.Generator()
    resumed.set_state(saved)
    again = stream(resumed).take(1, max_iters=3)
    assert all(torch.equal(a, b) for pa, pb in zip(prefetched, again) for a, b in zip(pa, pb))
    batches.take(2, max_iters=3)
    before = sampler.get_state()
    batches.prefetch_next()  # after the last step: nothing to draw
    assert torch.equal(sampler.get_state(), before)


def test_two_ranks_rows_make_the_one_process_sft_micro_batch(tmp_path):
    from tiny_chats import make_chat_folder, write_short_chats
    from tinylm_hf.training.objectives import SupervisedFineTuning

    config = TrainConfig(objective="sft", conversations=str(write_short_chats(tmp_path / "c.jsonl")),
                         init_from=str(make_chat_folder(tmp_path / "m", max_position_embeddings=128)),
                         out_dir=str(tmp_path / "run"), context_length=128)
    objective = SupervisedFineTuning.open(config, SupervisedFineTuning.open_data(config), main=False)

    def rows(part: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return objective.micro_batch(torch.Generator().manual_seed(3), 8, part, CPU, (7, 2, 1))

    x, y = rows(slice(0, 8))
    (x0, y0), (x1, y1) = rows(slice(0, 4)), rows(slice(4, 8))
    assert torch.equal(torch.cat([x0, x1]), x) and torch.equal(torch.cat([y0, y1]), y)
    assert (y == IGNORE_INDEX).any() and (y != IGNORE_INDEX).any()
