"""families: one table of the tokenizer families, each trainer returning its core tokenizer, each core saving and
loading a folder, and each Hugging Face class running its core."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from conftest import PACKAGE_DATA
from tinylm_hf.tokenization.families import FAMILIES, get_family
from tinylm_hf.tokenizer_training.word_counts import count_words, make_word_counts

NAMES = list(FAMILIES)
VOCAB_SIZES = {"bpe": 400, "wordpiece": 500, "unigram": 500, "sentencepiece-bpe": 400}
SAMPLE = "Once upon a time, Lily found a shiny red ball. She was very happy!"


@pytest.fixture(scope="module")
def cores() -> dict[str, object]:
    """Each family's core tokenizer, trained by the family's trainer on a slice of the bundled stories."""
    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:60_000]
    trained = {}
    for name, family in FAMILIES.items():
        specials = list(family.special_tokens)
        counts = make_word_counts(count_words([text], algorithm=name, special_tokens=specials), algorithm=name,
                                  special_tokens=specials)
        trained[name] = family.train(counts, VOCAB_SIZES[name], specials, byte_fallback=family.byte_fallback)
    return trained


def test_the_table_holds_the_four_families_in_order() -> None:
    assert NAMES == ["bpe", "wordpiece", "unigram", "sentencepiece-bpe"]


def test_an_unknown_family_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown algorithm 'bpee': choose one of 'bpe', 'sentencepiece-bpe', "
                                         "'unigram', 'wordpiece'"):
        get_family("bpee")


@pytest.mark.parametrize("name", NAMES)
def test_the_trainer_returns_the_core_tokenizer(cores, name: str) -> None:
    core = cores[name]
    assert type(core) is FAMILIES[name].core
    assert core.decode(core.encode(SAMPLE)) == SAMPLE


@pytest.mark.parametrize("name", NAMES)
def test_a_core_saves_its_files_into_a_folder_and_loads_them_back(cores, name: str, tmp_path: Path) -> None:
    core, family = cores[name], FAMILIES[name]
    core.save(tmp_path / "core")
    assert sorted(path.name for path in (tmp_path / "core").iterdir()) == sorted(family.core.files)
    loaded = family.core.load(tmp_path / "core")
    assert loaded.encode(SAMPLE) == core.encode(SAMPLE)


@pytest.mark.contract  # run again on every dependency floor (.ci/run)
@pytest.mark.parametrize("name", NAMES)
def test_the_slow_class_runs_the_core_and_saves_the_family_files(cores, name: str, tmp_path: Path) -> None:
    core, family = cores[name], FAMILIES[name]
    tokenizer = family.slow.from_core(core)
    ids = tokenizer(SAMPLE, add_special_tokens=False)["input_ids"]
    assert ids == core.encode(SAMPLE)
    tokenizer.save_pretrained(tmp_path)
    assert set(family.files) <= {path.name for path in tmp_path.iterdir()}
    reloaded = family.slow.from_pretrained(tmp_path)
    fast = AutoTokenizer.from_pretrained(tmp_path)  # registration reads the table: the fast twin is the default
    assert type(reloaded) is family.slow and type(fast) is family.fast
    assert reloaded(SAMPLE, add_special_tokens=False)["input_ids"] == ids
    assert fast(SAMPLE, add_special_tokens=False)["input_ids"] == ids


def every_token_starts_a_word(tokens: list, tokenizer: object) -> tuple[list[bool], list[bool]]:
    """A word rule for the test below: every token its own word, none ending a line."""
    return [True] * len(tokens), [False] * len(tokens)


def test_masking_reads_word_boundaries_from_the_family_table(monkeypatch) -> None:
    import dataclasses

    from conftest import REPO_ROOT
    from tinylm_hf.training.objectives.masking import boundary_style, word_boundary_tables

    tokenizer = AutoTokenizer.from_pretrained(REPO_ROOT / "tests" / "fixtures" / "saved_folders" / "model")
    assert not word_boundary_tables(tokenizer)[0].all()  # byte-level BPE: "Ġ" starts a word, "ed" does not
    rule = dataclasses.replace(FAMILIES["bpe"], word_rule="test_families:every_token_starts_a_word", word_style="own")
    monkeypatch.setitem(FAMILIES, "bpe", rule)
    starts, _ = word_boundary_tables(tokenizer)
    assert starts.all() and boundary_style(tokenizer) == "own"
