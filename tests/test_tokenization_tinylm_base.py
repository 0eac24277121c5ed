"""Added tokens in every TinyLM family: the slow class (hand-written core) gives the fast twin's ids and text.

The fast twin runs `tokenizers` (what `AutoTokenizer` returns), so it is the reference: each of the 32 flag
combinations of `AddedToken(single_word, lstrip, rstrip, normalized, special)`, added with `add_tokens` or
`add_special_tokens`, must encode (with and without `add_special_tokens`, with `split_special_tokens`) and decode
(with and without `skip_special_tokens`) alike, and still after `save_pretrained` by either class.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken

from conftest import PACKAGE_DATA
from tinylm_hf import tokenization
from tinylm_hf.tokenizer_training import train_tokenizer
from tinylm_hf.tokenization.plain_text import encode_plain

FAMILIES = ["bpe", "wordpiece", "unigram", "sentencepiece-bpe"]
FLAG_NAMES = ("single_word", "lstrip", "rstrip", "normalized", "special")
FLAGS = list(itertools.product([False, True], repeat=len(FLAG_NAMES)))
FLAG_IDS = ["".join(letter if on else "-" for letter, on in zip("SLRNP", flags)) for flags in FLAGS]  # "S-R-P"
ADDERS = ["add_tokens", "add_special_tokens"]
CORPUS = PACKAGE_DATA / "tinystories_valid_small.txt"
LINES = [line for line in CORPUS.read_text(encoding="utf-8").splitlines() if len(line) > 60][:3]
# X stands for the added token: at the start and end, beside punctuation, inside a word (single_word), between
# runs of spaces and other whitespace (lstrip/rstrip; "\x1c" is no space to `tokenizers`, "²" no word character),
# repeated, beside the family's own special tokens, and inside real sentences from the bundled corpus.
EDGE_TEXTS = [
    "X", "X at the start", "at the end X", "Once upon a time, X lived.", "say X. Then X!", "X,X.X!", "X X X",
    "XX", "in aXb word", "hello Xworld", "Xhello", "  X  spaced  ", "a\tX\nb", "a X\u3000X\x1cX\u00b2X_X\u0301",
    "<s>X</s> <unk>[CLS] X [SEP]<|endoftext|>", "\u00e9\u6f22\u5b57 X\U0001f600", "",
]
TEXTS = EDGE_TEXTS + [f"X{line}" for line in LINES] + [line[:40] + "X" + line[40:] for line in LINES] + [
    line.replace(" ", " X ", 2) for line in LINES]


def load_pair(folder: Path) -> tuple:
    """(slow, fast) TinyLM classes on `folder`."""
    name = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))["tokenizer_class"]
    slow_cls = getattr(tokenization, name)
    return slow_cls.from_pretrained(folder), getattr(tokenization, name + "Fast").from_pretrained(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A saved tokenizer of each family, trained on the bundled corpus."""
    text = CORPUS.read_text(encoding="utf-8")[:60_000]
    made = {}
    for family in FAMILIES:
        made[family] = tmp_path_factory.mktemp(family)
        train_tokenizer(iter([text]), 400, algorithm=family, progress=False).save_pretrained(made[family])
    return made


def add(tokenizer, token: AddedToken, adder: str) -> None:
    if adder == "add_tokens":
        tokenizer.add_tokens([token])
    else:
        tokenizer.add_special_tokens({"extra_special_tokens": [token]})


def flagged(content: str, flags: tuple[bool, ...]) -> AddedToken:
    return AddedToken(content, **dict(zip(FLAG_NAMES, flags)))


def mismatches(slow, fast, texts: list[str]) -> list[tuple]:
    """Where slow and fast differ: (text, call, slow's result, fast's result)."""
    found = []
    for text in texts:
        for options in ({}, {"add_special_tokens": False}, {"split_special_tokens": True}):
            ids, fast_ids = slow(text, **options)["input_ids"], fast(text, **options)["input_ids"]
            if ids != fast_ids:
                found.append((text, f"encode {options}", slow.convert_ids_to_tokens(ids),
                              fast.convert_ids_to_tokens(fast_ids)))
                continue
            for skip in (False, True):
                decoded, fast_decoded = slow.decode(ids, skip_special_tokens=skip), fast.decode(ids, skip_special_tokens=skip)
                if decoded != fast_decoded:
                    found.append((text, f"decode skip_special_tokens={skip}", decoded, fast_decoded))
    return found


@pytest.mark.parametrize("adder", ADDERS)
@pytest.mark.parametrize("flags", FLAGS, ids=FLAG_IDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_slow_equals_fast_with_an_added_token(folders, family, flags, adder):
    slow, fast = load_pair(folders[family])
    for tokenizer in (slow, fast):
        add(tokenizer, flagged("<new>", flags), adder)
    assert mismatches(slow, fast, [t.replace("X", "<new>") for t in TEXTS]) == []


@pytest.mark.slow  # the "<new>" matrix above, and the hypothesis test, cover each flag in the default run
@pytest.mark.parametrize("flags", FLAGS, ids=FLAG_IDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_slow_equals_fast_with_a_word_like_added_token(folders, family, flags):
    """A token made of word characters ("tinylm"): single_word refuses it inside "tinylmword"."""
    slow, fast = load_pair(folders[family])
    for tokenizer in (slow, fast):
        tokenizer.add_tokens([flagged("tinylm", flags)])
    texts = [t.replace("X", "tinylm") for t in TEXTS] + ["tinylmword a tinylm", "re-tinylm_x tinylm2 tinylm."]
    assert mismatches(slow, fast, texts) == []


@pytest.mark.parametrize("content", ["Caf\u00e9", "\u00e9", "\u0120x", "\u00bf?"])
@pytest.mark.parametrize("family", FAMILIES)
def test_an_added_token_outside_ascii_decodes_as_its_text(folders, family, content):
    """Characters of GPT-2's byte alphabet ("é" stands for byte 0xE9 there) in an added token decode as themselves
    in both classes (`tokenizers`' ByteLevel decoder alone would read "Café" as b"Caf\\xe9": U+FFFD)."""
    slow, fast = load_pair(folders[family])
    for tokenizer in (slow, fast):
        tokenizer.add_tokens([content])
    texts = [t.replace("X", content) for t in TEXTS]
    assert mismatches(slow, fast, texts) == []
    text = f"{LINES[0]} {content}."
    assert content in fast.decode(fast(text, add_special_tokens=False)["input_ids"])


def test_a_token_normalised_to_nothing_cuts_the_text_as_the_fast_twin(folders):
    """BERT's clean-up deletes "\x01": normalised, the token is empty, matches nowhere yet cuts the text at each
    character in `tokenizers`; it never becomes an id."""
    slow, fast = load_pair(folders["wordpiece"])
    for tokenizer in (slow, fast):
        tokenizer.add_tokens([AddedToken("\x01", normalized=True), "ab"])
    texts = ["a\x01b c", "\x01", "abc dab", "hello  world, it is"]
    assert mismatches(slow, fast, texts) == []
    assert slow.convert_tokens_to_ids("\x01") not in slow("a\x01b c")["input_ids"]


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_cleans_up_spaces_as_the_fast_twin(folders, family):
    """`clean_up_tokenization_spaces=True`: transformers' fast classes leave a BPE model's text as it is (the clean-up
    is WordPiece's); the slow classes do the same."""
    slow, fast = load_pair(folders[family])
    ids = slow("Hi , there . I do not know !", add_special_tokens=False)["input_ids"]
    for forced in (False, True):
        for tokenizer in (slow, fast):
            tokenizer.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output = forced
        assert slow.decode(ids, clean_up_tokenization_spaces=True) == fast.decode(ids, clean_up_tokenization_spaces=True)


@pytest.mark.parametrize("family", FAMILIES)
def test_skip_special_tokens_drops_a_normalized_special_token(folders, family):
    """`tokenizers` compares a normalised special token's normalised string ("▁<new>") with the special tokens'
    contents, so `skip_special_tokens=True` kept it in the text; both classes drop it."""
    slow, fast = load_pair(folders[family])
    for tokenizer in (slow, fast):
        tokenizer.add_special_tokens({"extra_special_tokens": [AddedToken("<new>", special=True, normalized=True)]})
    ids = fast("a <new> b", add_special_tokens=False)["input_ids"]
    assert slow.convert_tokens_to_ids("<new>") in ids
    assert "new" not in slow.decode(ids, skip_special_tokens=True)
    assert "new" not in fast.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("saver", ["slow", "fast"])
@pytest.mark.parametrize("family", FAMILIES)
def test_slow_equals_fast_after_save_and_load(folders, family, saver, tmp_path):
    """Every flag combination at once (one token each), saved by either class and loaded by both."""
    slow, fast = load_pair(folders[family])
    tokens = [flagged(f"<t{i}>", flags) for i, flags in enumerate(FLAGS)]
    for tokenizer in (slow, fast):
        tokenizer.add_tokens(tokens[::2])
        tokenizer.add_special_tokens({"extra_special_tokens": tokens[1::2]})
    (slow if saver == "slow" else fast).save_pretrained(tmp_path)
    loaded_slow, loaded_fast = load_pair(tmp_path)
    texts = [t.replace("X", f"<t{i}>") for t in EDGE_TEXTS + LINES[:1] for i in range(0, len(tokens), 3)]
    texts += [" ".join(f"a<t{i}>b" for i in range(len(tokens)))]
    assert mismatches(loaded_slow, loaded_fast, texts) == []
    assert [loaded_slow(t)["input_ids"] for t in texts] == [slow(t)["input_ids"] for t in texts]


@pytest.mark.parametrize("family", FAMILIES)
def test_dataset_text_spelling_added_tokens_is_plain_text_alike_in_slow_and_fast(folders, family):
    """`encode_plain` (prepare, eval, chat contents): a special token spelled in text is its characters in both
    classes; a plain added token is vocabulary and matches in both."""
    slow, fast = load_pair(folders[family])
    for tokenizer in (slow, fast):
        tokenizer.add_tokens(["<|ctl|>", AddedToken("<|ctl2|>", special=True, normalized=True)], special_tokens=True)
        tokenizer.add_tokens(["tinylm", AddedToken("<word>", normalized=False)])
    text = f"{LINES[0]} <|ctl|> tinylm <word>{fast.all_special_tokens[0]}<|ctl2|> end"
    ids = encode_plain(slow, text)
    assert ids == encode_plain(fast, text)
    assert not set(ids) & (set(slow.all_special_ids) - {slow.unk_token_id})  # text no piece covers is [UNK]
    assert {slow.convert_tokens_to_ids("tinylm"), slow.convert_tokens_to_ids("<word>")} <= set(ids)


@pytest.mark.parametrize("family", FAMILIES)
def test_prepare_gives_the_fast_tokenizer_s_ids_with_added_tokens(folders, family, tmp_path):
    """`tinylm prepare` loads the slow class: its token files hold the fast twin's plain-text ids."""
    from tinylm_hf import prepare_dataset
    from tinylm_hf.corpus import load_tokens, read_header

    slow, fast = load_pair(folders[family])
    for tokenizer in (slow, fast):
        tokenizer.add_tokens([AddedToken("tinylm", single_word=True), AddedToken("<new>", lstrip=True, rstrip=True)])
    slow.save_pretrained(tmp_path / "tok")
    docs = [f"{line[:30]} tinylm <new> {line[30:]} atinylm" for line in LINES]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    prepare_dataset(tmp_path / "tok", tmp_path / "out", input_files=[tmp_path / "a.jsonl"],
                    val_files=[tmp_path / "a.jsonl"], num_proc=1)
    end = read_header(tmp_path / "out" / "train.bin")["eos_id"]
    assert load_tokens(tmp_path / "out" / "train.bin").tolist() == [i for d in docs for i in encode_plain(fast, d) + [end]]


_PAIRS: dict[tuple, tuple] = {}


def flagged_pair(folders: dict[str, Path], family: str, flags: tuple[bool, ...]) -> tuple:
    """(slow, fast) of `family` with "<n>" added with `flags` (built once per combination)."""
    if (family, flags) not in _PAIRS:
        pair = load_pair(folders[family])
        for tokenizer in pair:
            tokenizer.add_tokens([flagged("<n>", flags)])
        _PAIRS[family, flags] = pair
    return _PAIRS[family, flags]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(family=st.sampled_from(FAMILIES), flags=st.sampled_from(FLAGS),
       parts=st.lists(st.sampled_from(["<n>", " ", "  ", "a", "b", "ab", ".", ",", "\n", "\t", "\u3000", "\x1c",
                                       "\u00b2", "_", "\u0301", "\u00e9", "<", "n>", "<s>", "[CLS]"]), max_size=12))
def test_slow_equals_fast_on_any_text_around_an_added_token(folders, family, flags, parts):
    slow, fast = flagged_pair(folders, family, flags)
    assert mismatches(slow, fast, ["".join(parts)]) == []
