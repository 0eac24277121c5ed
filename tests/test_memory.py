"""training/memory.py: a batch that cannot fit is refused before anything is allocated, naming its flag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO_ROOT, run_cli_error
from tiny_runs import byte_data, cli_env  # noqa: F401  (byte_data: a fixture)
from tinylm_hf.training.memory import meminfo_available, step_memory_bytes

SHAPE = {"vocab_size": 4096, "hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 4}


STEP = """
import resource, torch
from tinylm_hf import TinyLMConfig, TinyLMForCausalLM
torch.set_num_threads(1)
model = TinyLMForCausalLM(TinyLMConfig(**{shape}, num_attention_heads=4, max_position_embeddings=64))
optimizer = torch.optim.AdamW(model.parameters())
ids = torch.randint(0, {shape}["vocab_size"], (24, 64))
before = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()  # in use now, not the imports' peak
model(input_ids=ids, labels=ids).loss.backward()
optimizer.step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)
"""


def test_the_estimate_is_a_lower_bound_of_a_real_step():
    """In a fresh process: the step's peak memory exceeds what was in use before it (the weights) by more than the
    estimated activations."""
    out = subprocess.run([sys.executable, "-c", STEP.format(shape=SHAPE)], capture_output=True, text=True, check=True,
                         cwd=REPO_ROOT, env=cli_env())
    activations = step_memory_bytes(24, 64, SHAPE) - step_memory_bytes(0, 64, SHAPE)
    assert activations < int(out.stdout.split()[-1])


@pytest.mark.parametrize("command, flags", [
    ("train", ["--batch-size", "1000000000"]),
    ("train", ["--batch-size", "8", "--eval-batch-size", "1000000000"]),
], ids=["batch-size", "eval-batch-size"])
def test_a_batch_that_cannot_fit_is_refused_before_anything_is_written(byte_data, tmp_path, capsys, command, flags):
    err = run_cli_error([command, "--data-dir", str(byte_data), "--out-dir", str(tmp_path / "run"), "--max-iters", "1",
                         "--warmup-iters", "0", "--context-length", "16", "--threads", "1", *flags], capsys)
    assert f"{flags[-2]} 1000000000" in err and "GiB free" in err
    assert not (tmp_path / "run").exists()


def test_sft_and_finetune_refuse_it_too(tmp_path, capsys):
    import json

    from tiny_folders import make_tiny_folder

    folder = make_tiny_folder(tmp_path / "model")
    chats = tmp_path / "c.jsonl"
    chats.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"hi {i}"},
                                                      {"role": "assistant", "content": "hello"}]}) + "\n"
                             for i in range(8)))
    labelled = tmp_path / "l.jsonl"
    labelled.write_text("".join(json.dumps({"text": f"text {i}", "label": "ab"[i % 2]}) + "\n" for i in range(8)))
    common = ["--init-from", str(folder), "--batch-size", "1000000000", "--max-iters", "1", "--warmup-iters", "0",
              "--context-length", "32", "--threads", "1"]
    for command, data in (("sft", chats), ("finetune", labelled)):
        err = run_cli_error([command, "--data", str(data), "--out-dir", str(tmp_path / command), *common], capsys)
        assert "--batch-size 1000000000" in err and not (tmp_path / command).exists()


def test_free_memory_is_read_without_psutil():
    """psutil is not a runtime dependency (only `dev` brings it): the CPU's free memory comes from /proc/meminfo."""
    code = ('import sys, torch; sys.modules["psutil"] = None\n'
            'from tinylm_hf.training.memory import available_memory\n'
            'print(available_memory(torch.device("cpu")))')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, env=cli_env())
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 0  # the bytes MemAvailable says


def test_meminfo_gives_the_available_line_in_bytes_or_none(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683772 kB\nMemFree:        18138552 kB\nMemAvailable:   22884772 kB\n")
    assert meminfo_available(meminfo) == 22884772 * 1024
    meminfo.write_text("MemTotal:       24683772 kB\nMemFree:        18138552 kB\n")  # Linux before 3.14
    assert meminfo_available(meminfo) is None
    assert meminfo_available(tmp_path / "missing") is None  # not Linux: the check is skipped
