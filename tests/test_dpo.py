"""`tinylm dpo`: a chat model preference-tuned with DPO in the training loop (exact resume included), equal to TRL's
DPOTrainer on the same pairs, and published as a chat model."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from conftest import error_lines
from tiny_chats import make_chat_folder
from tiny_runs import kill_then_resume, losses, run_two_gloo_ranks
from tinylm_hf.cli import main
from tinylm_hf.corpus.conversations import load_story_chats

pytestmark = pytest.mark.contract  # a published transformers folder

RUN = ["--max-iters", "6", "--batch-size", "4", "--context-length", "128", "--warmup-iters", "1", "--eval-every", "3",
       "--checkpoint-every", "2", "--threads", "1", "--device", "cpu", "--progress", "false", "--plot", "false",
       "--seed", "3", "--max-lr", "1e-2"]


def story_pairs(count: int, split: str = "train") -> list[dict]:
    """Conversational pairs: the reply's first sentence to its own prompt (chosen) and another story's (rejected)."""
    chats = load_story_chats(split)[: count + 1]
    replies = [messages[-1]["content"].split(". ")[0] + "." for messages in chats]
    return [{"prompt": chats[i][:-1], "chosen": [{"role": "assistant", "content": replies[i]}],
             "rejected": [{"role": "assistant", "content": replies[i + 1]}]} for i in range(count)]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pairs")
    return write_rows(folder / "pairs.jsonl", story_pairs(16)), write_rows(folder / "valid.jsonl", story_pairs(8, "validation"))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_chat_folder(tmp_path_factory.mktemp("base") / "chat", max_position_embeddings=128)


@pytest.fixture(scope="module")
def tuned(base, pairs, tmp_path_factory):
    out = tmp_path_factory.mktemp("dpo") / "run"
    train, valid = pairs
    assert main(["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(base), "--out-dir",
                 str(out), *RUN]) == 0
    return out


def evaluations(run):
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "val_loss" in r]


def test_the_sigmoid_loss_is_trls_formula():
    from tinylm_hf.training.objectives.dpo import dpo_loss

    pc, pr, rc, rr = torch.tensor([-3.0, -8.0]), torch.tensor([-5.0, -2.0]), torch.tensor([-4.0, -7.0]), \
        torch.tensor([-4.5, -2.5])
    losses_, chosen, rejected = dpo_loss(pc, pr, rc, rr, beta=0.1)
    expected = [-math.log(1 / (1 + math.exp(-0.1 * ((a - c) - (b - d))))) for a, b, c, d in zip(pc, pr, rc, rr)]
    torch.testing.assert_close(losses_, torch.tensor(expected))
    torch.testing.assert_close(chosen, 0.1 * (pc - rc))
    torch.testing.assert_close(rejected, 0.1 * (pr - rr))
    assert float(dpo_loss(pc, pr, pc, pr, beta=0.1)[0].mean()) == pytest.approx(math.log(2))


def test_the_first_step_loss_is_ln_2(tuned):
    assert losses(tuned)[1] == pytest.approx(math.log(2), abs=1e-5)


def test_rewards_move_towards_the_chosen_replies(tuned):
    first, last = evaluations(tuned)[0], evaluations(tuned)[-1]
    assert {"val_reward_accuracy", "val_reward_margin", "val_rewards_chosen", "val_rewards_rejected"} <= set(last)
    assert last["val_reward_margin"] == pytest.approx(last["val_rewards_chosen"] - last["val_rewards_rejected"])
    assert losses(tuned)[6] < losses(tuned)[1]
    assert first["iter"] == 3 and last["iter"] == 6 and isinstance(last["sample"], str)


def test_the_loss_equals_trls_dpo_trainer(tuned, base, pairs):
    """TRL's DPOTrainer.evaluate() on the published policy against its init: the same loss and reward margin."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    rows = [json.loads(line) for line in pairs[1].read_text().splitlines()]
    policy = AutoModelForCausalLM.from_pretrained(tuned / "hf", dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    args = DPOConfig(output_dir=str(tuned / "trl"), beta=0.1, max_length=128, per_device_eval_batch_size=len(rows),
                     report_to="none", use_cpu=True, bf16=False)
    trainer = DPOTrainer(model=policy, ref_model=reference, args=args, train_dataset=Dataset.from_list(rows),
                         eval_dataset=Dataset.from_list(rows), processing_class=AutoTokenizer.from_pretrained(tuned / "hf"))
    theirs = trainer.evaluate()
    ours = evaluations(tuned)[-1]
    assert ours["val_loss"] == pytest.approx(theirs["eval_loss"], abs=1e-4)
    assert ours["val_reward_margin"] == pytest.approx(theirs["eval_rewards/margins"], abs=1e-4)
    assert ours["val_reward_accuracy"] == pytest.approx(theirs["eval_rewards/accuracies"], abs=1e-6)


def test_pairs_tokenize_as_trls(base, pairs, tmp_path):
    """prompt/chosen/rejected ids as DPOTrainer makes them: the completion holds `<|end|>` and the newline after it."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from tinylm_hf.corpus.preferences import load_preferences, tokenize_preference

    tokenizer = AutoTokenizer.from_pretrained(base)
    rows = load_preferences(pairs[0])
    plain = [{"prompt": "Once upon a time", "chosen": " a cat sat.", "rejected": " a dog ran."}]
    model = AutoModelForCausalLM.from_pretrained(base)
    for data, max_length in ((rows, 128), (plain, 7)):  # 7: the plain completions are cut
        args = DPOConfig(output_dir=str(tmp_path), max_length=max_length, report_to="none", use_cpu=True)
        trainer = DPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(data),
                             processing_class=tokenizer)
        theirs = [(r["prompt_ids"], r["chosen_ids"], r["rejected_ids"]) for r in trainer.train_dataset]
        ours = [tokenize_preference(tokenizer, row, max_length) for row in data]
        ours = [(p.prompt, p.chosen, p.rejected) for p in ours if p is not None]
        cut = [(p, c[: max_length - len(p)], r[: max_length - len(p)]) for p, c, r in theirs]  # TRL's collator cuts
        assert cut == ours and len(ours) >= len(data) - 2
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    pair = tokenize_preference(tokenizer, rows[0])
    assert pair.chosen[-2] == end and tokenizer.decode(pair.chosen[-1:]) == "\n"


def test_a_resumed_run_repeats_the_uninterrupted_one(base, pairs, tuned, tmp_path):
    from safetensors.torch import load_file

    train, valid = pairs
    split = ["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(base), "--out-dir",
             str(tmp_path / "split"), *RUN]
    assert main([*split, "--max-iters", "4", "--cosine-cycle-iters", "6"]) == 0
    assert main([*split, "--cosine-cycle-iters", "6", "--resume"]) == 0
    assert losses(tmp_path / "split") == losses(tuned)
    resumed, whole = load_file(tmp_path / "split" / "hf" / "model.safetensors"), load_file(tuned / "hf" / "model.safetensors")
    assert all(torch.equal(resumed[name], whole[name]) for name in whole)


def test_a_killed_run_resumes_to_the_uninterrupted_one(base, pairs, tmp_path):
    train, valid = pairs
    argv = ["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(base), *RUN,
            "--max-iters", "80", "--eval-every", "0", "--publish", "none"]
    kill_then_resume(argv, tmp_path / "killed", max_iters=80)
    assert main([*argv, "--out-dir", str(tmp_path / "whole")]) == 0
    assert losses(tmp_path / "killed") == losses(tmp_path / "whole")


def test_each_rank_draws_its_share_of_the_one_process_pairs(base, pairs, tmp_path):
    from tinylm_hf.training.config import TrainConfig
    from tinylm_hf.training.objectives import OBJECTIVE_CLASSES, open_objective

    config = TrainConfig(objective="dpo", preferences=str(pairs[0]), init_from=str(base), out_dir=str(tmp_path),
                         context_length=128)
    objective = open_objective(config, OBJECTIVE_CLASSES["dpo"].open_data(config), main=False)

    def draw(rows):
        x, _, mask, ref = objective.micro_batch(torch.Generator().manual_seed(0), 4, rows, torch.device("cpu"), (3, 0, 0))
        return [x[i][mask[i] == 1].tolist() for i in range(len(x))], ref

    whole, halves = draw(slice(0, 4)), [draw(slice(0, 2)), draw(slice(2, 4))]
    chosen = [row for rows, _ in halves for row in rows[:2]]
    assert chosen == whole[0][:4] and [row for rows, _ in halves for row in rows[2:]] == whole[0][4:]
    assert torch.equal(torch.cat([ref[:2] for _, ref in halves]), whole[1][:4])


def test_two_gloo_ranks_train_as_one_process(base, pairs, tuned, tmp_path):
    train, valid = pairs
    proc = run_two_gloo_ranks(tmp_path, "-m", "tinylm_hf.cli", "dpo", "--data", str(train), "--val-data", str(valid),
                              "--init-from", str(base), "--out-dir", str(tmp_path / "ddp"), *RUN)
    assert json.loads((tmp_path / "ddp" / "summary.json").read_text())["world_size"] == 2
    ddp, single = losses(tmp_path / "ddp"), losses(tuned)
    assert ddp.keys() == single.keys() == set(range(1, 7))
    np.testing.assert_allclose(list(ddp.values()), list(single.values()), rtol=1e-5)
    for ranks, one in zip(evaluations(tmp_path / "ddp"), evaluations(tuned), strict=True):
        assert ranks["val_loss"] == pytest.approx(one["val_loss"], rel=1e-5)
        assert ranks["val_reward_margin"] == pytest.approx(one["val_reward_margin"], rel=1e-4, abs=1e-6)


def test_a_bfloat16_run_follows_the_float32_one_and_keeps_float32_weights(base, pairs, tuned, tmp_path):
    train, valid = pairs
    out = tmp_path / "bf16"
    assert main(["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(base), "--out-dir",
                 str(out), *RUN, "--max-iters", "2", "--dtype", "bfloat16"]) == 0
    bf16, fp32 = losses(out), losses(tuned)
    # the reference's log-probabilities are float32 (dpo.py): at step 0 the policy differs from them by bfloat16's error
    assert bf16[1] == pytest.approx(math.log(2), abs=1e-2) and bf16[1] != fp32[1]
    assert bf16[2] != fp32[2] and bf16[2] == pytest.approx(fp32[2], rel=5e-2)  # autocast ran, to bfloat16's digits
    from safetensors.torch import load_file

    assert {t.dtype for t in load_file(out / "hf" / "model.safetensors").values()} == {torch.float32}


def test_the_published_folder_is_a_chat_model(tuned):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = tuned / "hf"
    assert (hf / "chat_template.jinja").is_file()
    model, tokenizer = AutoModelForCausalLM.from_pretrained(hf), AutoTokenizer.from_pretrained(hf)
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    assert json.loads((hf / "generation_config.json").read_text())["eos_token_id"] == [end, tokenizer.eos_token_id]
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    assert model.generate(**ids, max_new_tokens=3, do_sample=False).shape[1] > ids["input_ids"].shape[1]
    card = (hf / "README.md").read_text()
    assert "Preference-tuned from `chat` with `tinylm dpo`" in card and re.search(r"on \d+ preference pairs of pairs.jsonl", card)


def test_the_card_states_the_last_evaluations_rewards(tuned):
    last = evaluations(tuned)[-1]
    card = (tuned / "hf" / "README.md").read_text()
    assert f"- validation reward accuracy: {last['val_reward_accuracy']:.4g}" in card
    assert f"- validation reward margin: {last['val_reward_margin']:.4g}" in card
    assert re.search(r"type: reward_accuracy\n\s+value: [0-9.]+\n\s+name: reward accuracy", card)  # the model-index result


def test_a_bad_row_is_one_line_naming_file_and_line(base, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "a", "chosen": "b", "rejected": "c"}) + "\n" + '{"prompt": "a"}\n')
    assert main(["dpo", "--data", str(bad), "--init-from", str(base), "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{bad}, line 2" in err and '"chosen"' in err and len(error_lines(err)) == 1
    assert not (tmp_path / "run").exists()


def test_dpo_needs_its_pairs_and_a_model(base, tmp_path, capsys):
    assert main(["dpo", "--init-from", str(base), "--out-dir", str(tmp_path / "run")]) == 2
    assert "objective dpo needs preferences" in capsys.readouterr().err


def test_a_resume_on_other_pairs_is_refused_with_one_line(base, pairs, tmp_path, capsys):
    # it continued silently on the other pairs, its card naming them for every step
    train, valid = pairs
    run = ["dpo", "--val-data", str(valid), "--init-from", str(base), "--out-dir", str(tmp_path / "run"), *RUN,
           "--publish", "none"]
    assert main([*run, "--data", str(train), "--max-iters", "2", "--eval-every", "0"]) == 0
    other = write_rows(tmp_path / "other.jsonl", story_pairs(17)[1:])
    capsys.readouterr()
    assert main([*run, "--data", str(other), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "changed since the run" in err and len(error_lines(err)) == 1


def test_a_resume_scores_against_the_reference_the_run_started_with(base, pairs, tuned, tmp_path):
    # the reference log-probabilities were computed again from --init-from, which had been trained again meanwhile
    import shutil

    from safetensors.torch import load_file, save_file

    start = shutil.copytree(base, tmp_path / "start")
    train, valid = pairs
    split = ["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(start), "--out-dir",
             str(tmp_path / "split"), *RUN, "--cosine-cycle-iters", "6"]
    assert main([*split, "--max-iters", "4", "--publish", "none"]) == 0
    weights = load_file(start / "model.safetensors")
    save_file({name: t * 0.5 for name, t in weights.items()}, start / "model.safetensors", metadata={"format": "pt"})
    assert main([*split, "--resume", "--publish", "none"]) == 0
    assert losses(tmp_path / "split") == losses(tuned)
    assert evaluations(tmp_path / "split")[-1]["val_loss"] == evaluations(tuned)[-1]["val_loss"]


def test_the_reference_log_probabilities_show_progress(base, pairs, tmp_path, capsys):
    # five silent minutes on a large pair file
    train, valid = pairs
    assert main(["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(base), "--out-dir",
                 str(tmp_path / "run"), *RUN, "--max-iters", "1", "--eval-every", "0", "--progress", "true",
                 "--publish", "none"]) == 0
    assert re.search(r"reference log-probabilities: 100%.*21/21", capsys.readouterr().err)


def plain_pairs(count: int, split: str = "train") -> list[dict]:
    """Plain-string pairs (no chat template needed): a story's opening words, its next sentence and another's."""
    return [{"prompt": row["prompt"][-1]["content"][:40], "chosen": " " + row["chosen"][0]["content"],
             "rejected": " " + row["rejected"][0]["content"]} for row in story_pairs(count, split)]


def test_plain_pairs_over_a_base_model_train_evaluate_and_publish(tmp_path):
    # the first evaluation's sample asked for a chat template: the run died after training, with no checkpoint
    from tiny_folders import make_tiny_folder

    base = make_tiny_folder(tmp_path / "base", max_position_embeddings=128)
    train = write_rows(tmp_path / "plain.jsonl", plain_pairs(16))
    out = tmp_path / "run"
    assert main(["dpo", "--data", str(train), "--init-from", str(base), "--out-dir", str(out), *RUN,
                 "--max-iters", "3"]) == 0
    last = evaluations(out)[-1]
    assert last["iter"] == 3 and isinstance(last["sample"], str) and last["sample_prompt"]
    assert (out / "hf" / "model.safetensors").is_file()
    card = (out / "hf" / "README.md").read_text(encoding="utf-8")
    assert "Preference-tuned" in card and "with a chat template" not in card  # a base model, tuned, is no chat model


def test_a_schedule_that_cannot_decay_is_said_in_one_line(base, pairs, tmp_path, capsys):
    # the tutorial's --max-lr 1e-4 equalled the default --min-lr 1e-4: its rate never decayed, silently
    train, valid = pairs
    run = ["dpo", "--data", str(train), "--val-data", str(valid), "--init-from", str(base), *RUN, "--max-iters", "2",
           "--eval-every", "0", "--publish", "none"]
    assert main([*run, "--out-dir", str(tmp_path / "flat"), "--max-lr", "1e-4", "--min-lr", "1e-4"]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "stays constant" in line]
    assert len(said) == 1 and "--min-lr" in said[0]
    assert main([*run, "--out-dir", str(tmp_path / "decays"), "--max-lr", "1e-4"]) == 0  # min_lr: a tenth of it
    assert "stays constant" not in capsys.readouterr().out
    assert main([*run, "--out-dir", str(tmp_path / "below"), "--max-lr", "5e-5", "--min-lr", "1e-4"]) == 2
    err = capsys.readouterr().err.strip()
    assert "pass a lower --min-lr" in err and len(error_lines(err)) == 1


def test_the_dpo_tutorial_schedule_decays():
    from conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "tutorials" / "chat.md").read_text(encoding="utf-8")
    command = re.search(r"tinylm dpo (.*?)\ntinylm chat", text, re.S).group(1)
    lr = dict(re.findall(r"--(max-lr|min-lr) (\S+)", command))
    assert float(lr["min-lr"]) < float(lr["max-lr"])


def test_every_step_records_trls_rewards(tuned):
    # only evaluations had the rewards; TRL logs them at every logging step
    steps = [r for r in map(json.loads, (tuned / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    names = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins")
    assert len(steps) == 6 and all(set(names) <= set(r) for r in steps)
    assert all(steps[0][name] == pytest.approx(0.0, abs=1e-6) for name in names)  # the policy is its reference
    for r in steps:
        assert r["rewards/margins"] == pytest.approx(r["rewards/chosen"] - r["rewards/rejected"], abs=1e-6)
        assert 0.0 <= r["rewards/accuracies"] <= 1.0
    assert steps[-1]["rewards/margins"] > 0


def test_the_step_rewards_are_trls_definitions():
    from tinylm_hf.training.objectives.dpo import PairLoss

    loss = PairLoss(beta=0.1)
    chosen, rejected = torch.tensor([0.3, -0.2, 0.5]), torch.tensor([0.1, 0.4, -0.5])
    loss.rewards = [(chosen[:2], rejected[:2]), (chosen[2:], rejected[2:])]  # two micro-batches of one step
    assert loss.take_rewards() == pytest.approx({
        "rewards/chosen": float(chosen.mean()), "rewards/rejected": float(rejected.mean()),
        "rewards/accuracies": 2 / 3, "rewards/margins": float((chosen - rejected).mean())})
    assert loss.take_rewards() == {}  # taken once


def test_loss_png_plots_the_rewards_beside_the_loss(tuned, tmp_path):
    from tinylm_hf.training.metrics import plot_losses

    records = [json.loads(line) for line in (tuned / "metrics.jsonl").read_text().splitlines()]
    plain = [{k: v for k, v in r.items() if not k.startswith("rewards/")} for r in records]
    plot_losses(records, tmp_path / "rewards.png")
    plot_losses(plain, tmp_path / "plain.png")
    width = lambda path: int.from_bytes(path.read_bytes()[16:20], "big")  # the PNG header's width  # noqa: E731
    assert width(tmp_path / "rewards.png") > 1.5 * width(tmp_path / "plain.png")
