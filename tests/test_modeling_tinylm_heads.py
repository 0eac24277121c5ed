"""The task heads: equal to Llama's heads holding the same weights (padded batches too), the encoder's mean
pooling, loading the decoder of a causal-LM or masked-LM folder, the Auto classes installed and as remote code,
and the text- and token-classification pipelines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    LlamaForQuestionAnswering,
    LlamaForSequenceClassification,
    LlamaForTokenClassification,
    pipeline,
)

from tinylm_hf import (
    TinyLMForMaskedLM,
    TinyLMForQuestionAnswering,
    TinyLMForSequenceClassification,
    TinyLMForTokenClassification,
    TinyLMModel,
    TinyLMTokenizerFast,
)
from tinylm_hf.modeling.modeling_tinylm_heads import HEADS_AUTO_MAP
from tiny_folders import load_with_log, make_tiny_folder, run_fresh
from tiny_models import left_pad_mask, llama_from, make_config, make_model, random_ids

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

TOL = 1e-5
PAD = 0  # make_config's pad_token_id; random_ids never draws it
HEADS = {
    "sequence": (TinyLMForSequenceClassification, LlamaForSequenceClassification, AutoModelForSequenceClassification),
    "token": (TinyLMForTokenClassification, LlamaForTokenClassification, AutoModelForTokenClassification),
    "qa": (TinyLMForQuestionAnswering, LlamaForQuestionAnswering, AutoModelForQuestionAnswering),
}
HEAD_KEYS = {"sequence": {"score.weight"}, "token": {"score.weight", "score.bias"},
             "qa": {"qa_outputs.weight", "qa_outputs.bias"}}
LENGTHS = {"unpadded": None, "right-padded": [9, 6, 2], "left-padded": [9, 6, 2]}


def make_head(head: str, seed: int = 0, **overrides):
    """A head on random weights, norms and biases moved off their initial values so that parity covers them."""
    torch.manual_seed(seed)
    model = HEADS[head][0](make_config(**overrides)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(0.1 * torch.randn_like(param))
    return model


def batch(padding: str, seed: int = 1) -> dict:
    """(3, 9) ids with pad ids where the mask is 0, and the position_ids both models are given when padded."""
    ids = random_ids(3, 9, seed=seed)
    if LENGTHS[padding] is None:
        return {"input_ids": ids}
    mask = left_pad_mask(LENGTHS[padding], 9)
    if padding == "right-padded":
        mask = mask.flip(-1)
    return {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask,
            "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}


def labels_for(head: str, inputs: dict) -> dict:
    real = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
    if head == "sequence":
        return {"labels": torch.tensor([1, 0, 1])}
    if head == "token":
        tags = torch.randint(0, 2, real.shape, generator=torch.Generator().manual_seed(3))
        return {"labels": tags.masked_fill(~real, -100)}
    first = real.int().argmax(-1)  # the first real token of each row
    return {"start_positions": first, "end_positions": first + 1}


PROBLEMS = ["regression", "single_label_classification", "multi_label_classification"]


def problem_labels(problem: str, batch: int) -> tuple[int, torch.Tensor]:
    """(num_labels, labels) of `batch` texts for a problem_type, as transformers tells them apart."""
    generator = torch.Generator().manual_seed(4)
    if problem == "regression":  # one float per text
        return 1, torch.randn(batch, generator=generator)
    if problem == "single_label_classification":  # one class id per text
        return 3, torch.randint(0, 3, (batch,), generator=generator)
    return 3, torch.randint(0, 2, (batch, 3), generator=generator).float()  # multi-hot floats


def outputs_of(head: str, out) -> list[torch.Tensor]:
    return [out.logits] if head != "qa" else [out.start_logits, out.end_logits]


# ---------------------------------------------------------------- equal to Llama's heads


@pytest.mark.parametrize("padding", list(LENGTHS))
@pytest.mark.parametrize("head", list(HEADS))
def test_logits_and_loss_match_llama(head: str, padding: str) -> None:
    model, inputs = make_head(head), batch(padding)
    targets = labels_for(head, inputs)
    llama = llama_from(model, "sdpa", HEADS[head][1])
    with torch.no_grad():
        ours = model(**{k: v for k, v in inputs.items() if k != "position_ids"}, **targets)  # positions by default
        theirs = llama(**inputs, **targets)
    real = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
    for mine, reference in zip(outputs_of(head, ours), outputs_of(head, theirs)):
        keep = slice(None) if head == "sequence" else real  # padded positions' outputs are nobody's answer
        torch.testing.assert_close(mine[keep], reference[keep], atol=TOL, rtol=0)
    if head != "qa" or padding != "left-padded":  # a left pad's logit enters QA's softmax, and pads may differ
        torch.testing.assert_close(ours.loss, theirs.loss, atol=TOL, rtol=0)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_sequence_problem_types_match_llama(problem: str) -> None:
    num_labels, labels = problem_labels(problem, 3)
    model = make_head("sequence", num_labels=num_labels)
    llama = llama_from(model, "eager", LlamaForSequenceClassification)
    inputs = batch("right-padded")
    with torch.no_grad():
        ours = model(**inputs, labels=labels)
        theirs = llama(**inputs, labels=labels)
    assert model.config.problem_type == llama.config.problem_type == problem
    torch.testing.assert_close(ours.logits, theirs.logits, atol=TOL, rtol=0)
    torch.testing.assert_close(ours.loss, theirs.loss, atol=TOL, rtol=0)


def test_left_padded_texts_classify_as_each_text_alone() -> None:
    model, inputs = make_head("sequence"), batch("left-padded")
    with torch.no_grad():
        padded = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        rows = zip(inputs["input_ids"], LENGTHS["left-padded"])
        alone = [model(input_ids=row[-n:][None]).logits[0] for row, n in rows]
    torch.testing.assert_close(padded, torch.stack(alone), atol=TOL, rtol=0)


def test_a_batch_without_a_pad_token_is_refused() -> None:
    model = make_head("sequence", pad_token_id=None)
    with pytest.raises(ValueError, match="without a pad token: set model.config.pad_token_id"):
        model(input_ids=random_ids(2, 5))
    ids = random_ids(1, 5)
    with torch.no_grad():  # a single text needs none: its last token is pooled
        torch.testing.assert_close(model(input_ids=ids).logits, model.score(model.model(ids).last_hidden_state[:, -1]))


def test_inputs_embeds_pool_the_last_position() -> None:
    model, ids = make_head("sequence"), random_ids(2, 6)
    with torch.no_grad():
        from_embeds = model(inputs_embeds=model.model.embed_tokens(ids)).logits
        torch.testing.assert_close(from_embeds, model(input_ids=ids).logits)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_loss_over_accumulated_halves_equals_the_full_batch_loss(problem: str) -> None:
    """Trainer under gradient accumulation passes num_items_in_batch and sums the halves' losses."""
    num_labels, labels = problem_labels(problem, 4)
    model, ids = make_head("sequence", num_labels=num_labels, problem_type=problem), random_ids(4, 6)
    items = torch.tensor((labels != -100).sum().item())
    with torch.no_grad():
        full = model(input_ids=ids, labels=labels).loss
        halves = sum(model(input_ids=ids[i : i + 2], labels=labels[i : i + 2], num_items_in_batch=items).loss
                     for i in (0, 2))
    torch.testing.assert_close(halves, full)


def test_token_classification_dropout_follows_the_config() -> None:
    assert make_head("token").dropout.p == 0.1  # Llama's default
    assert make_head("token", classifier_dropout=0.0).dropout.p == 0.0


# ---------------------------------------------------------------- a bidirectional (masked-LM) encoder


def test_encoder_classifies_the_mean_over_real_tokens() -> None:
    model, inputs = make_head("sequence", use_bidirectional_attention=True), batch("right-padded")
    mask = inputs["attention_mask"]
    with torch.no_grad():
        hidden = model.model(input_ids=inputs["input_ids"], attention_mask=mask).last_hidden_state
        expected = model.score(torch.stack([h[m.bool()].mean(0) for h, m in zip(hidden, mask)]))
        got = model(input_ids=inputs["input_ids"], attention_mask=mask).logits
    torch.testing.assert_close(got, expected, atol=TOL, rtol=0)


@pytest.mark.parametrize("padding", ["left-padded", "right-padded"])
def test_encoder_classification_ignores_padding(padding: str) -> None:
    model, inputs = make_head("sequence", use_bidirectional_attention=True), batch(padding)
    with torch.no_grad():
        padded = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        rows = zip(inputs["input_ids"], inputs["attention_mask"])
        alone = [model(input_ids=row[m.bool()][None]).logits[0] for row, m in rows]
    torch.testing.assert_close(padded, torch.stack(alone), atol=TOL, rtol=0)


# ---------------------------------------------------------------- loading a pretrained TinyLM folder


@pytest.fixture(scope="module")
def causal_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("causal") / "lm"
    make_model(seed=5).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("encoder") / "mlm"
    torch.manual_seed(6)
    TinyLMForMaskedLM(make_config()).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("head", list(HEADS))
def test_head_loads_the_decoder_of_a_causal_lm_folder_and_reports_its_new_weights(causal_folder, head: str) -> None:
    model, info, log = load_with_log(HEADS[head][2], causal_folder)
    assert type(model) is HEADS[head][0]
    assert set(info["missing_keys"]) == HEAD_KEYS[head] and set(info["unexpected_keys"]) == {"lm_head.weight"}
    assert all(key in log for key in HEAD_KEYS[head])
    weight = dict(model.named_parameters())[sorted(HEAD_KEYS[head])[-1]]
    assert abs(weight.std().item() - model.config.initializer_range) < 0.25 * model.config.initializer_range
    lm = make_model(seed=5)
    for name, param in lm.model.state_dict().items():
        assert torch.equal(model.model.state_dict()[name], param), name


@pytest.mark.parametrize("head", list(HEADS))
def test_head_loads_a_masked_lm_encoder_and_stays_bidirectional(encoder_folder, head: str) -> None:
    model, info, _ = load_with_log(HEADS[head][2], encoder_folder)
    assert model.config.use_bidirectional_attention and set(info["missing_keys"]) == HEAD_KEYS[head]
    ids = random_ids(1, 6)
    with torch.no_grad():  # the first token sees the last one: attention goes both ways
        first = model.model(ids).last_hidden_state[0, 0]
        changed = model.model(torch.cat([ids[:, :-1], ids[:, -1:] % 50 + 2], dim=1)).last_hidden_state[0, 0]
    assert not torch.allclose(first, changed)


def test_a_checkpoint_with_another_layer_count_is_still_refused(causal_folder) -> None:
    with pytest.raises(ValueError, match="num_hidden_layers"):
        TinyLMForSequenceClassification.from_pretrained(causal_folder, num_hidden_layers=1)


def test_labels_survive_save_and_load(causal_folder, tmp_path: Path) -> None:
    id2label = {0: "tinystories", 1: "shakespeare", 2: "novel"}
    label2id = {name: i for i, name in id2label.items()}  # transformers 5 does not derive it from id2label
    model = AutoModelForSequenceClassification.from_pretrained(causal_folder, id2label=id2label, label2id=label2id)
    assert model.num_labels == 3 and model.score.out_features == 3
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert loaded.config.id2label == id2label and loaded.config.label2id == label2id
    ids = random_ids(2, 7)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model.eval()(ids).logits)


# ---------------------------------------------------------------- saved folders and remote code


def test_a_saved_head_maps_every_head_and_copies_their_code(causal_folder, tmp_path: Path) -> None:
    TinyLMForTokenClassification.from_pretrained(causal_folder).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert HEADS_AUTO_MAP.items() <= auto_map.items()
    assert auto_map["AutoModelForCausalLM"] == "modeling_tinylm.TinyLMForCausalLM"
    assert all((tmp_path / f"{ref.rsplit('.', 1)[0]}.py").is_file() for ref in auto_map.values())


def test_a_classifier_from_an_encoder_names_no_file_it_did_not_copy(encoder_folder, tmp_path: Path) -> None:
    TinyLMForSequenceClassification.from_pretrained(encoder_folder).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert "AutoModelForMaskedLM" not in auto_map and "AutoModelForCausalLM" not in auto_map
    assert all((tmp_path / f"{ref.rsplit('.', 1)[0]}.py").is_file() for ref in auto_map.values())


def test_every_head_loads_as_remote_code_without_tinylm_hf(causal_folder, tmp_path: Path) -> None:
    inputs = batch("left-padded")
    folders, expected = {}, {}
    for head, (head_class, _, _) in HEADS.items():
        folders[head] = str(tmp_path / head)
        model = head_class.from_pretrained(causal_folder).eval()
        model.save_pretrained(folders[head])
        with torch.no_grad():
            out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        expected[head] = [t.tolist() for t in outputs_of(head, out)]
    code = textwrap.dedent(f"""
        import json, torch
        from transformers import (AutoModelForQuestionAnswering, AutoModelForSequenceClassification,
                                  AutoModelForTokenClassification)
        ids, mask = torch.tensor({inputs["input_ids"].tolist()}), torch.tensor({inputs["attention_mask"].tolist()})
        folders = {folders!r}
        result = {{}}
        for head, auto in [("sequence", AutoModelForSequenceClassification), ("token", AutoModelForTokenClassification),
                           ("qa", AutoModelForQuestionAnswering)]:
            model = auto.from_pretrained(folders[head], trust_remote_code=True).eval()
            assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
            with torch.no_grad():
                out = model(input_ids=ids, attention_mask=mask)
            result[head] = [t.tolist() for t in ([out.logits] if head != "qa" else [out.start_logits, out.end_logits])]
        print(json.dumps(result))
    """)
    got = json.loads(run_fresh(code, tmp_path).stdout.strip().splitlines()[-1])
    for head, tensors in expected.items():
        for mine, theirs in zip(tensors, got[head]):
            assert (torch.tensor(mine) - torch.tensor(theirs)).abs().max().item() < TOL, head


# ---------------------------------------------------------------- pipelines


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("pipelines") / "lm", max_position_embeddings=64)


def test_text_classification_pipeline_runs_and_batches_like_single_texts(tiny_folder) -> None:
    texts = ["Once upon a time, there was a little cat.", "Hi", "Lily and Ben played in the park all day long."]
    classify = pipeline("text-classification", model=str(tiny_folder), top_k=None)
    assert type(classify.model) is TinyLMForSequenceClassification
    one_by_one = [classify(text)[0] for text in texts]  # one text in: a list holding its list of scores
    batched = classify(texts, batch_size=3)
    for single, in_batch in zip(one_by_one, batched):
        assert {p["label"] for p in in_batch} == {"LABEL_0", "LABEL_1"}
        for a, b in zip(sorted(single, key=lambda p: p["label"]), sorted(in_batch, key=lambda p: p["label"])):
            assert abs(a["score"] - b["score"]) < TOL


def test_token_classification_pipeline_tags_words_with_character_offsets(tiny_folder) -> None:
    text = "Lily and Ben went to the park."
    fast = TinyLMTokenizerFast.from_pretrained(tiny_folder)  # the offsets come from a fast tokenizer
    tagger = pipeline("token-classification", model=str(tiny_folder), tokenizer=fast, aggregation_strategy="simple")
    assert type(tagger.model) is TinyLMForTokenClassification
    groups = tagger(text)
    assert groups and all(text[g["start"] : g["end"]].strip() == g["word"].strip() for g in groups)
    assert "".join(text[g["start"] : g["end"]] for g in groups) == text
