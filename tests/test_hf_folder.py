"""Publishing a run (publish/hf_folder.py) and exporting its folder ship only the tokenizer that made the data.

Each is refused with one line before anything is written: a tokenizer folder trained again after `prepare`, a
`--tokenizer-dir` naming another tokenizer, or tokenizer files swapped into a published folder. The other
tokenizer here has the same size (257 tokens), so only its fingerprint tells it apart.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tiny_runs import tiny_config, write_byte_dataset
from tinylm_hf import EOS_TOKEN
from tinylm_hf.publish import export_llama, publish_run
from tinylm_hf.publish.export_gguf import export_gguf
from tinylm_hf.tokenizer_training import build_hf_tokenizer
from tinylm_hf.training import train

REFUSED = "is not the one that made"


def save_other_tokenizer(folder: Path) -> Path:
    """A byte tokenizer of the data's size whose end-of-text token is spelt differently."""
    other = build_hf_tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|end_of_text|>"])
    other.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("provenance")
    data = write_byte_dataset(root / "data", n_bytes=20_000)
    summary = train(tiny_config(data, root / "run", max_iters=4, eval_every=0, checkpoint_every=0))
    return summary, publish_run(summary)


def test_the_tokenizer_that_made_the_data_is_published_with_its_fingerprint(run):
    summary, folder = run
    from tinylm_hf.training.model_folder import read_json

    assert read_json(folder / "config.json")["tokenizer_fingerprint"] == summary.data.tokenizer_fingerprint


def test_publishing_with_another_tokenizer_dir_is_refused(run, tmp_path):
    summary, _ = run
    other = save_other_tokenizer(tmp_path / "other")
    with pytest.raises(ValueError, match=REFUSED):
        publish_run(summary, tmp_path / "hf", tokenizer_dir=other)
    assert not (tmp_path / "hf").exists()


def test_publishing_after_the_tokenizer_folder_was_trained_again_is_refused(run, tmp_path):
    summary, _ = run
    retrained = tmp_path / "tokenizer"
    shutil.copytree(summary.data.tokenizer_dir, retrained)
    save_other_tokenizer(retrained)  # `train-tokenizer --out` the same folder, after prepare
    summary.data.tokenizer_dir = str(retrained)
    with pytest.raises(ValueError, match=REFUSED):
        publish_run(summary, tmp_path / "hf")


def test_training_with_another_tokenizer_dir_is_refused_before_any_step(run, tmp_path):
    summary, _ = run
    other = save_other_tokenizer(tmp_path / "other")
    config = tiny_config(Path(summary.train_config["data_dir"]), tmp_path / "run2", tokenizer_dir=str(other))
    with pytest.raises(ValueError, match=REFUSED):
        train(config)
    assert not (tmp_path / "run2" / "checkpoints").is_dir() or not any((tmp_path / "run2" / "checkpoints").iterdir())


@pytest.mark.parametrize("export", [
    pytest.param(lambda src, out: export_llama(src, out / "llama"), id="export-llama"),
    pytest.param(lambda src, out: export_gguf(src, out / "model.gguf"), id="export-gguf"),
])
def test_exporting_a_folder_whose_tokenizer_was_swapped_is_refused(run, tmp_path, export):
    _, folder = run
    swapped = tmp_path / "hf"
    shutil.copytree(folder, swapped)
    for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (swapped / name).unlink(missing_ok=True)
    save_other_tokenizer(swapped)
    with pytest.raises(ValueError, match=REFUSED):
        export(swapped, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_published_card_samples_as_the_published_generation_config(run):
    _, folder = run
    settings = json.loads((folder / "generation_config.json").read_text())
    card = (folder / "README.md").read_text()
    said = f"samples with temperature {settings['temperature']}, top-k {settings['top_k']}, from generation_config.json"
    assert settings["do_sample"] and said in card
    assert f"--temperature {settings['temperature']} --top-k {settings['top_k']}`" in card


def test_a_tokenizer_folder_deleted_while_the_run_trained_is_published_from_the_runs_copy(tmp_path):
    # the run trained every step, then publishing named the deleted folder and published nothing
    import threading

    from tinylm_hf.corpus import tokenizer_fingerprint
    from tinylm_hf.tokenizer_loading import load_tokenizer

    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    expected = tokenizer_fingerprint(load_tokenizer(data / "tokenizer"))
    first_checkpoint = threading.Event()
    config = tiny_config(data, tmp_path / "run", max_iters=8, checkpoint_every=2)

    def delete_after_the_first_checkpoint() -> None:  # "mid-run": the run is past its first step
        while not list((tmp_path / "run" / "checkpoints").glob("ckpt_*.pt")):
            first_checkpoint.wait(0.01)
        shutil.rmtree(data / "tokenizer")

    deleter = threading.Thread(target=delete_after_the_first_checkpoint, daemon=True)
    deleter.start()
    summary = train(config)
    deleter.join(timeout=30)
    assert not (data / "tokenizer").exists()
    hf = publish_run(summary)
    assert tokenizer_fingerprint(load_tokenizer(hf)) == expected


def test_a_missing_given_tokenizer_dir_is_still_refused(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    summary = train(tiny_config(data, tmp_path / "run", max_iters=2))
    with pytest.raises(FileNotFoundError, match="is missing"):
        publish_run(summary, tokenizer_dir=tmp_path / "nowhere")


@pytest.mark.parametrize("objective", ["clm", "mlm"])
def test_a_published_folder_is_what_its_objective_publishes(tmp_path, objective):
    import transformers

    from tinylm_hf.training.objectives import OBJECTIVE_CLASSES

    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000, extra_special_tokens=("<|mask|>",))
    summary = train(tiny_config(data, tmp_path / "run", max_iters=2, eval_every=0, checkpoint_every=0,
                                objective=objective))
    folder = publish_run(summary)
    kind = OBJECTIVE_CLASSES[objective].publishes()
    model = getattr(transformers, kind.auto_class).from_pretrained(folder)
    assert type(model) is OBJECTIVE_CLASSES[objective].model_class()
    assert (folder / "generation_config.json").is_file() == kind.generation_config
