"""MLMCollator: the five masking strategies measured on real text with three tokenizer families.

Seeded, large samples: the chosen fraction, the 80/10/10 split, special tokens and padding never
chosen, whole words, the n-gram and span length distributions, static vs dynamic across epochs, and
bad input. Word boundaries in the checks are recomputed here from the token strings (independently
of the collator's tables).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import BertTokenizerFast, PreTrainedTokenizerFast

from conftest import PACKAGE_DATA
from tiny_folders import train_reference_bpe
from tinylm_hf import MLMCollator
from tinylm_hf.tokenization import (
    TinyLMTokenizer,
    TinyLMUnigramTokenizer,
    TinyLMWordPieceTokenizer,
    UnigramTokenizer,
)
from tinylm_hf.tokenization.wordpiece.core import write_vocab_txt
from tinylm_hf.tokenizer_training import train_unigram, train_wordpiece
from tinylm_hf.training.objectives.masking import (
    STRATEGIES,
    boundary_style,
    ngram_length_distribution,
    span_length_distribution,
)

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

TEXT = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")
SEQ = 128


def _byte_level(tmp) -> TinyLMTokenizer:
    train_reference_bpe(tmp / "bpe", vocab_size=600)
    tok = TinyLMTokenizer(vocab_file=str(tmp / "bpe" / "vocab.json"), merges_file=str(tmp / "bpe" / "merges.txt"))
    tok.add_special_tokens({"mask_token": "<|mask|>", "pad_token": "<|pad|>"})
    return tok


def _wordpiece(tmp) -> BertTokenizerFast:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=600, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(TEXT[:300_000].split("<|endoftext|>"), trainer)
    return BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                             sep_token="[SEP]", mask_token="[MASK]")


def _our_wordpiece(tmp) -> TinyLMWordPieceTokenizer:
    corpus = tmp / "corpus.txt"
    corpus.write_text(TEXT[:60_000], encoding="utf-8")
    vocab = write_vocab_txt(train_wordpiece(corpus, 500, progress=False), tmp / "vocab.txt")
    return TinyLMWordPieceTokenizer(vocab_file=str(vocab))


def _unigram(tmp) -> TinyLMUnigramTokenizer:
    corpus = tmp / "corpus.txt"
    corpus.write_text(TEXT[:60_000], encoding="utf-8")
    path = UnigramTokenizer(train_unigram(corpus, 400, progress=False)).save(tmp / "unigram.model")
    tok = TinyLMUnigramTokenizer(vocab_file=path)
    tok.add_special_tokens({"mask_token": "<mask>", "pad_token": "<pad>"})
    return tok


FAMILIES = {  # name -> (builder, the word-boundary style it uses)
    "byte_level": (_byte_level, "byte_level"),
    "wordpiece": (_wordpiece, "wordpiece"),
    "tinylm_wordpiece": (_our_wordpiece, "wordpiece"),
    "sentencepiece": (_unigram, "sentencepiece"),
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    """(style name, tokenizer, rows of real text (n, SEQ), with one special token inside each row)."""
    build, style = FAMILIES[request.param]
    tok = build(tmp_path_factory.mktemp(request.param))
    ids = tok(TEXT[:400_000], add_special_tokens=False)["input_ids"]
    rows = np.asarray(ids[: len(ids) // SEQ * SEQ]).reshape(-1, SEQ)[:1500].copy()
    special = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
    rows[:, 40] = special  # a document boundary inside every row
    return style, tok, rows


def _word_starts(tok, rows: np.ndarray, style: str) -> np.ndarray:
    """Word starts recomputed from token strings: '##' continues, 'Ġ'/'▁' (or a preceding newline) starts."""
    tokens = np.asarray(tok.convert_ids_to_tokens(list(range(len(tok)))), dtype=object)[rows]
    special = np.isin(rows, tok.all_special_ids)
    if style == "wordpiece":
        starts = ~np.vectorize(lambda t: t.startswith("##"))(tokens)
    else:
        marker = "Ġ" if style == "byte_level" else "▁"
        starts = np.vectorize(lambda t: t.startswith(marker) or t.startswith("Ċ"))(tokens)
        after_newline = np.vectorize(lambda t: t.endswith("Ċ"))(tokens)
        starts[:, 1:] |= after_newline[:, :-1]
    starts[:, 0] = True
    starts[:, 1:] |= special[:, :-1]
    return starts & ~special


def _collate(collator: MLMCollator, rows: np.ndarray, epochs: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    inputs, labels = [], []
    for _ in range(epochs):
        for first in range(0, len(rows), 64):
            batch = collator([{"input_ids": r} for r in rows[first : first + 64].tolist()])
            inputs.append(batch["input_ids"].numpy())
            labels.append(batch["labels"].numpy())
    return np.concatenate(inputs), np.concatenate(labels), np.concatenate([rows] * epochs)


def _runs(chosen_words: list[np.ndarray]) -> np.ndarray:
    """Lengths of the runs of chosen words that touch neither end of their row."""
    lengths = []
    for words in chosen_words:
        padded = np.concatenate([[False], words, [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(padded))
        for start, end in zip(edges[::2], edges[1::2]):
            if start > 0 and end < len(words):
                lengths.append(end - start)
    return np.asarray(lengths)


def _chosen_words(chosen: np.ndarray, starts: np.ndarray, maskable: np.ndarray) -> list[np.ndarray]:
    return [c[s] for c, s, m in zip(chosen, starts, maskable)]


# ----------------------------------------------------------------------------- every strategy


def test_boundary_style_comes_from_the_tokenizer(family):
    style, tok, _ = family
    assert boundary_style(tok) == style


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_chosen_fraction_split_and_no_special_tokens(family, strategy):
    _, tok, rows = family
    # runs of words vary the per-row count far more than single tokens: more epochs for the same precision
    epochs = 12 if strategy in ("ngram", "span") else 3
    inputs, labels, originals = _collate(MLMCollator(tok, strategy, seed=1), rows, epochs=epochs)
    chosen = labels != -100
    special = np.isin(originals, tok.all_special_ids)
    assert not (chosen & special).any()
    assert (labels[chosen] == originals[chosen]).all()
    assert (inputs[~chosen] == originals[~chosen]).all()
    assert abs(chosen.sum() / (~special).sum() - 0.15) < 0.005
    masked = inputs[chosen] == tok.mask_token_id
    kept = inputs[chosen] == originals[chosen]
    assert abs(masked.mean() - 0.8) < 0.01
    assert abs(kept.mean() - 0.1) < 0.01
    assert abs((~masked & ~kept).mean() - 0.1) < 0.01
    assert not np.isin(inputs[chosen & (inputs != tok.mask_token_id)], tok.all_special_ids).any()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_padding_is_never_chosen(family, strategy):
    _, tok, rows = family
    collator = MLMCollator(tok, strategy, seed=2)
    examples = [{"input_ids": r[: 20 + i % 100]} for i, r in enumerate(rows[:400].tolist())]
    batch = collator(examples)
    padding = batch["attention_mask"] == 0
    assert padding.any()
    assert (batch["labels"][padding] == -100).all()
    assert (batch["input_ids"][padding] == tok.pad_token_id).all()


@pytest.mark.parametrize("strategy", ["whole_word", "ngram", "span"])
def test_words_are_chosen_whole(family, strategy):
    style, tok, rows = family
    _, labels, originals = _collate(MLMCollator(tok, strategy, seed=3), rows)
    chosen = labels != -100
    starts = _word_starts(tok, originals, style)
    word = np.cumsum(starts, axis=1)
    maskable = ~np.isin(originals, tok.all_special_ids)
    for c, w, m in zip(chosen, word, maskable):
        ids_all = np.unique(w[m & c])
        ids_none = np.unique(w[m & ~c])
        assert not np.intersect1d(ids_all, ids_none).size


@pytest.mark.parametrize("strategy,expected", [
    ("span", span_length_distribution(0.2, 10)),
    ("ngram", ngram_length_distribution(3)),
])
def test_run_lengths_follow_the_specification(family, strategy, expected):
    style, tok, rows = family
    _, labels, originals = _collate(MLMCollator(tok, strategy, seed=4), rows, epochs=4)
    starts = _word_starts(tok, originals, style)
    maskable = ~np.isin(originals, tok.all_special_ids)
    lengths = _runs(_chosen_words(labels != -100, starts, maskable))
    observed = np.bincount(lengths, minlength=len(expected) + 1)[1:] / len(lengths)
    mean = float(np.arange(1, len(expected) + 1) @ expected)
    assert lengths.max() <= len(expected)
    assert abs(lengths.mean() - mean) < 0.05 * mean
    np.testing.assert_allclose(observed, expected, atol=0.02)


def test_span_mean_is_spanberts():
    lengths = np.arange(1, 11)
    assert abs(float(lengths @ span_length_distribution(0.2, 10)) - 3.8) < 0.01  # "about 3.8 words"


def test_dynamic_masks_differ_between_epochs_static_ones_do_not(family):
    _, tok, rows = family
    for strategy in ("dynamic", "whole_word", "ngram", "span"):
        collator = MLMCollator(tok, strategy, seed=5)
        first, second = _collate(collator, rows[:200]), _collate(collator, rows[:200])
        assert (first[1] != second[1]).any(), strategy
    static = MLMCollator(tok, "static", seed=5)
    first, second = _collate(static, rows[:200]), _collate(static, rows[200:400][::-1])
    again = _collate(static, rows[:200])
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    # the mask follows the sequence, not its batch or padding
    alone = static([{"input_ids": rows[7, :50].tolist()}, {"input_ids": rows[3].tolist()}])  # row 3 padded less
    np.testing.assert_array_equal(alone["labels"][1].numpy(), first[1][3])
    assert not np.array_equal(first[1], second[1])


def test_seeded_collators_repeat():
    tok = BertTokenizerFast(tokenizer_object=_wordpiece_tiny(), mask_token="[MASK]", pad_token="[PAD]")
    rows = [[5, 6, 7, 8, 9, 10] * 10] * 8
    for strategy in STRATEGIES:
        a = MLMCollator(tok, strategy, seed=9)(rows)
        b = MLMCollator(tok, strategy, seed=9)(rows)
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"]), strategy


def _wordpiece_tiny() -> Tokenizer:
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[MASK]", "a", "b", "c", "##d", "e", "##f", "g", "h"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def test_wordpiece_words_by_the_continuation_prefix():
    tok = BertTokenizerFast(tokenizer_object=_wordpiece_tiny(), mask_token="[MASK]", pad_token="[PAD]")
    collator = MLMCollator(tok, "whole_word", mlm_probability=0.5, seed=0)
    rows = np.asarray([[5, 6, 7, 8, 3, 4] * 20] * 200)  # words: "c##d", "e##f", "a", "b"
    _, labels = collator.mask_tokens(rows)
    chosen = labels != -100
    assert (chosen[:, 0::6] == chosen[:, 1::6]).all() and (chosen[:, 2::6] == chosen[:, 3::6]).all()
    assert (chosen[:, 4::6] != chosen[:, 5::6]).any()


# ----------------------------------------------------------------------------- Trainer and bad input


def test_trainer_trains_a_masked_lm_with_the_collator(tmp_path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from tinylm_hf import TinyLMConfig, TinyLMForMaskedLM

    tok = _byte_level(tmp_path)
    ids = tok(TEXT[:40_000], add_special_tokens=False)["input_ids"]
    data = Dataset.from_dict({"input_ids": [ids[i : i + 32] for i in range(0, len(ids) - 32, 32)]})
    torch.manual_seed(0)
    model = TinyLMForMaskedLM(TinyLMConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=30, per_device_train_batch_size=16,
                             learning_rate=3e-3, report_to=[], save_strategy="no", logging_steps=10,
                             use_cpu=True, seed=0, remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data.select(range(32)),
                      data_collator=MLMCollator(tok, "span", seed=0))
    losses = [r["loss"] for r in trainer.train() and trainer.state.log_history if "loss" in r]
    assert losses[-1] < losses[0]
    assert np.isfinite(trainer.evaluate()["eval_loss"])


def test_bad_input_names_the_fix():
    tok = PreTrainedTokenizerFast(tokenizer_object=_wordpiece_tiny(), pad_token="[PAD]")
    with pytest.raises(ValueError, match="no mask token.*add_special_tokens"):
        MLMCollator(tok)
    tok.add_special_tokens({"mask_token": "[MASK]"})
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match="mlm_probability must be a probability strictly between 0 and 1"):
            MLMCollator(tok, mlm_probability=bad)
    with pytest.raises(ValueError, match="unknown masking strategy 'spans'.*span"):
        MLMCollator(tok, "spans")
    with pytest.raises(ValueError, match="at most 1"):
        MLMCollator(tok, mask_replace_prob=0.9, random_replace_prob=0.2)
    tok.pad_token = None
    with pytest.raises(ValueError, match="no pad token"):
        MLMCollator(tok)([[3, 4], [3]])


def test_a_mask_token_that_is_also_the_end_of_text_is_refused():
    tok = PreTrainedTokenizerFast(tokenizer_object=_wordpiece_tiny(), pad_token="[PAD]", mask_token="[MASK]",
                                  eos_token="[MASK]")
    with pytest.raises(ValueError, match="mask token '\\[MASK\\]' is also its eos token.*--masked-lm"):
        MLMCollator(tok)
