"""The transformers model contract, checked the way ModelTesterMixin / GenerationTesterMixin check it.

Tiny configs, and LlamaForCausalLM holding the same weights as the reference: hidden states, attention
weights, tuple outputs, the loss's shift_labels / num_items_in_batch, loading a bare-model checkpoint into
the LM class, and every generate mode returning what Llama returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, DynamicCache

from tinylm_hf.modeling import TinyLMForCausalLM, TinyLMModel
from tinylm_hf.compat import CACHE_NAME
from tiny_folders import load_with_log
from tiny_models import left_pad_mask, llama_from, make_config, make_model, random_ids

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

TOL = 1e-5
PADDING = {"unpadded": None, "left-padded": [9, 6, 2]}


@pytest.fixture(scope="module")
def model() -> TinyLMForCausalLM:
    return make_model(seed=11)


def inputs(padding: str) -> dict:
    """(3, 9) ids, with a left-padding mask and Llama's matching position_ids when padded."""
    ids = random_ids(3, 9, seed=12)
    if PADDING[padding] is None:
        return {"input_ids": ids}
    mask = left_pad_mask(PADDING[padding], 9)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}


def real_rows(batch: dict) -> torch.Tensor:
    """Boolean (batch, seq): the positions holding real tokens (padded positions may differ from Llama)."""
    return batch.get("attention_mask", torch.ones_like(batch["input_ids"])).bool()


def forward_both(model: TinyLMForCausalLM, attn: str, batch: dict, **kwargs):
    model.config._attn_implementation = attn
    try:
        with torch.no_grad():
            ours = model(**{k: v for k, v in batch.items() if k != "position_ids"}, **kwargs)
            theirs = llama_from(model, "eager" if kwargs.get("output_attentions") else attn)(**batch, **kwargs)
    finally:
        model.config._attn_implementation = "sdpa"
    return ours, theirs


# ---------------------------------------------------------------- hidden states


@pytest.mark.parametrize("padding", list(PADDING))
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_hidden_states_match_llama(model, attn: str, padding: str) -> None:
    batch = inputs(padding)
    ours, theirs = forward_both(model, attn, batch, output_hidden_states=True)
    assert len(ours.hidden_states) == len(theirs.hidden_states) == model.config.num_hidden_layers + 1
    real = real_rows(batch)
    for mine, llama in zip(ours.hidden_states, theirs.hidden_states):
        assert (mine[real] - llama[real]).abs().max() < TOL


def test_hidden_states_start_at_the_embeddings_and_end_after_the_final_norm(model) -> None:
    ids = random_ids(2, 5)
    with torch.no_grad():
        out = model.model(ids, output_hidden_states=True)
    torch.testing.assert_close(out.hidden_states[0], model.model.embed_tokens(ids))
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)


def test_output_hidden_states_from_the_config() -> None:
    model = make_model(seed=13)
    model.config.output_hidden_states = True
    with torch.no_grad():
        assert len(model(random_ids(1, 4)).hidden_states) == 3
        assert model(random_ids(1, 4), output_hidden_states=False).hidden_states is None


def test_output_hidden_states_can_select_indices(model) -> None:
    ids = random_ids(2, 5)
    with torch.no_grad():
        every = model(ids, output_hidden_states=True).hidden_states
        some = model(ids, output_hidden_states=[0, -1]).hidden_states
    assert some[1] is None and len(some) == len(every)
    assert torch.equal(some[0], every[0]) and torch.equal(some[2], every[2])


# ---------------------------------------------------------------- attentions


@pytest.mark.parametrize("padding", list(PADDING))
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_attentions_match_llama_eager(model, attn: str, padding: str) -> None:
    batch = inputs(padding)
    ours, theirs = forward_both(model, attn, batch, output_attentions=True)
    assert len(ours.attentions) == model.config.num_hidden_layers
    real = real_rows(batch)
    for mine, llama in zip(ours.attentions, theirs.attentions):
        assert mine.shape == (3, model.config.num_attention_heads, 9, 9)
        assert (mine.transpose(1, 2)[real] - llama.transpose(1, 2)[real]).abs().max() < TOL


def test_attentions_under_sdpa_leave_the_logits_unchanged(model) -> None:
    ids = random_ids(2, 6)
    with torch.no_grad():
        plain, with_attn = model(ids), model(ids, output_attentions=True)
    assert model.config._attn_implementation == "sdpa"
    assert (plain.logits - with_attn.logits).abs().max() < TOL


def test_output_attentions_from_the_config() -> None:
    model = make_model(seed=14)
    model.config._attn_implementation = "eager"
    model.config.output_attentions = True
    with torch.no_grad():
        assert len(model(random_ids(1, 4)).attentions) == 2


def test_attentions_with_a_cache_span_past_and_new_keys(model) -> None:
    ids = random_ids(2, 6)
    with torch.no_grad():
        past = getattr(model(ids[:, :4], use_cache=True), CACHE_NAME)
        out = model(ids[:, 4:], cache=past, output_attentions=True)
    assert out.attentions[0].shape == (2, 4, 2, 6)
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(2, 4, 2))


def test_hidden_states_and_attentions_keep_their_gradients() -> None:
    model = make_model(seed=15).train()
    out = model(random_ids(2, 5), output_hidden_states=True, output_attentions=True)
    out.hidden_states[0].retain_grad()
    out.attentions[0].retain_grad()
    out.logits.flatten()[0].backward()
    assert out.hidden_states[0].grad is not None and out.attentions[0].grad is not None


# ---------------------------------------------------------------- return_dict


def test_return_dict_false_returns_llamas_tuple(model) -> None:
    ids = random_ids(2, 6)
    kwargs = dict(labels=ids, output_hidden_states=True, output_attentions=True, use_cache=True)
    ours, theirs = forward_both(model, "sdpa", {"input_ids": ids}, return_dict=False, **kwargs)
    assert isinstance(ours, tuple) and len(ours) == len(theirs) == 5
    for index in (0, 1):  # loss, logits
        assert (ours[index] - theirs[index]).abs().max() < TOL
    assert isinstance(ours[2], DynamicCache)
    assert len(ours[3]) == len(theirs[3]) and len(ours[4]) == len(theirs[4])


def test_return_dict_from_the_config() -> None:
    model = make_model(seed=16)
    model.config.return_dict = False
    with torch.no_grad():
        out, bare = model(random_ids(1, 4)), model.model(random_ids(1, 4))
    assert isinstance(out, tuple) and out[0].shape == (1, 4, model.config.vocab_size)
    assert isinstance(bare, tuple) and bare[0].shape == (1, 4, model.config.hidden_size)


# ---------------------------------------------------------------- loss


def test_loss_honours_shift_labels_like_llama(model) -> None:
    ids = random_ids(2, 8)
    shift_labels = random_ids(2, 8, seed=17)
    shift_labels[0, :3] = -100
    ours, theirs = forward_both(model, "sdpa", {"input_ids": ids}, labels=ids, shift_labels=shift_labels)
    torch.testing.assert_close(ours.loss, theirs.loss)
    with torch.no_grad():
        assert model(ids, labels=ids).loss != ours.loss
        # labels do not count once shift_labels are given
        assert torch.equal(model(ids, labels=ids.flip(-1), shift_labels=shift_labels).loss, ours.loss)


def test_loss_honours_num_items_in_batch_like_llama(model) -> None:
    ids = random_ids(2, 8)
    ours, theirs = forward_both(model, "sdpa", {"input_ids": ids}, labels=ids, num_items_in_batch=torch.tensor(40))
    torch.testing.assert_close(ours.loss, theirs.loss)
    with torch.no_grad():
        torch.testing.assert_close(ours.loss * 40 / 14, model(ids, labels=ids).loss)


# ---------------------------------------------------------------- loading


def test_bare_model_checkpoint_loads_into_the_lm_class_with_a_new_head(tmp_path: Path) -> None:
    torch.manual_seed(18)
    bare = TinyLMModel(make_config())
    bare.save_pretrained(tmp_path)
    model, info, log = load_with_log(AutoModelForCausalLM, tmp_path)
    assert isinstance(model, TinyLMForCausalLM)
    assert set(info["missing_keys"]) == {"lm_head.weight"} and not info["unexpected_keys"]
    assert "lm_head.weight" in log
    std = model.lm_head.weight.std().item()
    assert abs(std - model.config.initializer_range) < 0.2 * model.config.initializer_range
    ids = random_ids(1, 5)
    with torch.no_grad():
        torch.testing.assert_close(model.model(ids).last_hidden_state, bare.eval()(ids).last_hidden_state)


def test_bare_model_checkpoint_loads_tied_without_anything_missing(tmp_path: Path) -> None:
    TinyLMModel(make_config(tie_word_embeddings=True)).save_pretrained(tmp_path)
    model, info = TinyLMForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and model.lm_head.weight is model.model.embed_tokens.weight


def test_lm_checkpoint_loaded_as_bare_model_reports_the_head_as_unexpected(model, tmp_path: Path) -> None:
    model.save_pretrained(tmp_path)
    _, info = TinyLMModel.from_pretrained(tmp_path, output_loading_info=True)
    assert set(info["unexpected_keys"]) == {"lm_head.weight"} and not info["missing_keys"]


@pytest.mark.parametrize("layers", [1, 3])
def test_bare_checkpoint_with_another_layer_count_still_raises(tmp_path: Path, layers: int) -> None:
    TinyLMModel(make_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        TinyLMForCausalLM.from_pretrained(tmp_path, config=make_config(num_hidden_layers=layers))


def test_bare_model_folder_maps_both_auto_classes(tmp_path: Path) -> None:
    TinyLMModel(make_config()).save_pretrained(tmp_path)
    config = AutoModelForCausalLM.from_pretrained(tmp_path).config
    assert config.auto_map["AutoModelForCausalLM"] == "modeling_tinylm.TinyLMForCausalLM"
    assert (tmp_path / "loss_tinylm.py").is_file()


# ---------------------------------------------------------------- attention masks


def test_4d_attention_mask_equals_the_2d_padding_mask(model) -> None:
    ids, mask = random_ids(2, 6), left_pad_mask([6, 3], 6)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    mask_4d = causal & mask.bool()[:, None, None, :]
    additive = torch.zeros(2, 1, 6, 6).masked_fill(~mask_4d, torch.finfo(torch.float32).min)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
        for custom in (mask_4d, additive):
            got = model(ids, attention_mask=custom, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
            assert (got - expected)[mask.bool()].abs().max() < TOL


def test_4d_attention_mask_of_the_wrong_shape_raises(model) -> None:
    with pytest.raises(ValueError, match="4D attention_mask"):
        model(random_ids(2, 6), attention_mask=torch.ones(2, 1, 6, 5, dtype=torch.bool))


# ---------------------------------------------------------------- generate, against Llama

GENERATE_OUTPUTS = dict(
    max_new_tokens=4,
    pad_token_id=0,
    eos_token_id=None,
    output_scores=True,
    output_logits=True,
    output_hidden_states=True,
    output_attentions=True,
    return_dict_in_generate=True,
)
MODES = {
    "greedy": {},
    "sample": {"do_sample": True, "top_k": 10, "num_return_sequences": 2},
    "beam-search": {"num_beams": 3, "num_return_sequences": 2},
    "beam-sample": {"num_beams": 2, "do_sample": True},
    "prompt-lookup": {"prompt_lookup_num_tokens": 2},
    "static-cache": {"cache_implementation": "static"},
    "no-cache": {"use_cache": False},
}


def assert_generate_outputs_match(ours, theirs) -> None:
    assert torch.equal(ours.sequences, theirs.sequences)
    for name in ("scores", "logits"):
        mine, llama = getattr(ours, name), getattr(theirs, name)
        assert len(mine) == len(llama)
        for a, b in zip(mine, llama):
            finite = torch.isfinite(b)
            assert torch.equal(torch.isfinite(a), finite) and (a[finite] - b[finite]).abs().max() < TOL
    for name in ("hidden_states", "attentions"):
        mine, llama = getattr(ours, name), getattr(theirs, name)
        assert len(mine) == len(llama)
        for step_a, step_b in zip(mine, llama):
            assert len(step_a) == len(step_b)
            for a, b in zip(step_a, step_b):
                assert a.shape == b.shape and (a - b).abs().max() < TOL


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_generate_outputs_match_llama(model, attn: str, mode: str) -> None:
    kwargs = MODES[mode]
    batch = 1 if "prompt_lookup_num_tokens" in kwargs else 2
    prompt = random_ids(batch, 6, seed=19)
    prompt[:, 3:5] = prompt[:, :2]  # a repeated n-gram for prompt lookup to find
    llama = llama_from(model, "eager")  # built first: its random init must not shift the sampling seed
    model.config._attn_implementation = attn
    try:
        torch.manual_seed(0)
        ours = model.generate(prompt, **GENERATE_OUTPUTS, **kwargs)
    finally:
        model.config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    theirs = llama.generate(prompt, **GENERATE_OUTPUTS, **kwargs)
    assert_generate_outputs_match(ours, theirs)


def test_assisted_decoding_matches_llama_assisted_by_llama(model) -> None:
    assistant = make_model(seed=20)
    prompt = random_ids(1, 6, seed=21)
    ours = model.generate(prompt, assistant_model=assistant, **GENERATE_OUTPUTS)
    theirs = llama_from(model, "eager").generate(
        prompt, assistant_model=llama_from(assistant, "eager"), **GENERATE_OUTPUTS
    )
    assert_generate_outputs_match(ours, theirs)
    greedy = model.generate(prompt, max_new_tokens=4, pad_token_id=0, eos_token_id=None)
    assert torch.equal(ours.sequences, greedy)


def test_left_padded_generation_matches_llama(model) -> None:
    ids, mask = random_ids(3, 9, seed=22), left_pad_mask([9, 6, 2], 9)
    kwargs = dict(max_new_tokens=5, pad_token_id=0, eos_token_id=None, output_scores=True, return_dict_in_generate=True)
    ours = model.generate(ids, attention_mask=mask, **kwargs)
    theirs = llama_from(model, "sdpa").generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(ours.sequences, theirs.sequences)
    assert max((a - b).abs().max() for a, b in zip(ours.scores, theirs.scores)) < TOL


def test_generate_from_inputs_embeds_matches_llama_and_input_ids(model) -> None:
    ids, mask = random_ids(2, 6, seed=23), left_pad_mask([6, 4], 6)
    embeds = model.get_input_embeddings()(ids).detach()
    kwargs = dict(max_new_tokens=4, pad_token_id=0, eos_token_id=None)
    ours = model.generate(inputs_embeds=embeds, attention_mask=mask, **kwargs)
    theirs = llama_from(model, "sdpa").generate(inputs_embeds=embeds, attention_mask=mask, **kwargs)
    assert torch.equal(ours, theirs)
    assert torch.equal(ours, model.generate(ids, attention_mask=mask, **kwargs)[:, 6:])


def test_generate_continues_from_a_cache(model) -> None:
    ids = random_ids(2, 5, seed=24)
    kwargs = dict(pad_token_id=0, eos_token_id=None)
    first = model.generate(ids, max_new_tokens=3, return_dict_in_generate=True, **kwargs)
    cache = {CACHE_NAME: getattr(first, CACHE_NAME)}
    resumed = model.generate(first.sequences, max_new_tokens=2, **cache, **kwargs)
    assert torch.equal(resumed, model.generate(ids, max_new_tokens=5, **kwargs))


def test_packed_sequences_with_restarting_position_ids_match_llama_and_each_alone(model) -> None:
    # padding-free batches: no attention_mask, positions restart at each packed sequence
    first, second = random_ids(1, 5, seed=25), random_ids(1, 4, seed=26)
    packed = torch.cat([first, second], dim=1)
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 3]])
    with torch.no_grad():
        ours = model(packed, position_ids=position_ids, use_cache=False).logits
        theirs = llama_from(model, "sdpa")(packed, position_ids=position_ids, use_cache=False).logits
        alone = torch.cat([model(first).logits, model(second).logits], dim=1)
    assert (ours - theirs).abs().max() < TOL
    assert (ours - alone).abs().max() < TOL
