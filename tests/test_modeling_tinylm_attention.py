"""TinyLM through transformers' attention interface: every implementation transformers offers on this machine
gives the logits and greedy tokens of our own "eager" attention, and continuous batching serves each prompt.

What Llama itself cannot do on CPU is left out, and said where: `paged|eager` outside continuous batching
(no mask reaches it: it attends both ways, for Llama too), a registered function without a registered mask on
padded input (it gets no mask, as Llama's does), and flex attention's cached generation with a padding mask
(torch's compiler fails on it, for Llama too).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AttentionInterface, ContinuousBatchingConfig, GenerationConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from tinylm_hf.modeling import TinyLMForMaskedLM
from tiny_models import left_pad_mask, llama_from, make_config, make_model, random_ids

LENGTHS = [8, 5, 3]  # a left-padded batch of three prompts
NEW_TOKENS = 6
CALLS: list[int] = []  # the layer index of every call of the registered function


def counting_sdpa(module, query, key, value, attention_mask, **kwargs):
    """A user's attention function: transformers' sdpa, counting its calls."""
    CALLS.append(module.layer_idx)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("counting_sdpa", counting_sdpa)
AttentionMaskInterface.register("counting_sdpa", sdpa_mask)  # so that it sees padding, as sdpa does


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    return random_ids(3, 8), left_pad_mask(LENGTHS, 8)


def run_with(model, attn_implementation: str, fn):
    """fn(model) with ``attn_implementation`` switched on the way transformers does it, eager again after."""
    model.set_attn_implementation(attn_implementation)
    try:
        with torch.no_grad():
            return fn(model)
    finally:
        model.set_attn_implementation("eager")


def padded_logits(model, batch) -> torch.Tensor:
    ids, mask = batch
    return model(ids, attention_mask=mask).logits[mask.bool()]  # real tokens only


def greedy(model, batch) -> torch.Tensor:
    ids, mask = batch
    return model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)


IMPLEMENTATIONS = ["sdpa", "paged|sdpa", "counting_sdpa"]


@pytest.mark.parametrize("attn_implementation", IMPLEMENTATIONS)
def test_logits_match_eager(model, batch, attn_implementation) -> None:
    ids = batch[0]
    eager = run_with(model, "eager", lambda m: (m(ids).logits, padded_logits(m, batch)))
    other = run_with(model, attn_implementation, lambda m: (m(ids).logits, padded_logits(m, batch)))
    torch.testing.assert_close(other[0], eager[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(other[1], eager[1], atol=1e-4, rtol=0)


@pytest.mark.parametrize("attn_implementation", IMPLEMENTATIONS)
def test_greedy_tokens_match_eager(model, batch, attn_implementation) -> None:
    eager = run_with(model, "eager", lambda m: greedy(m, batch))
    assert torch.equal(run_with(model, attn_implementation, lambda m: greedy(m, batch)), eager)


def test_a_registered_function_is_called_once_per_layer(model, batch) -> None:
    CALLS.clear()
    run_with(model, "counting_sdpa", lambda m: m(batch[0]))
    assert CALLS == list(range(model.config.num_hidden_layers))


def test_eager_is_our_own_attention(model, batch) -> None:
    CALLS.clear()
    run_with(model, "eager", lambda m: m(batch[0]))
    assert CALLS == []
    assert model.config._attn_implementation == "eager"


def test_flex_attention_logits_match_eager_and_llama(model, batch) -> None:
    eager = run_with(model, "eager", lambda m: padded_logits(m, batch))
    flex = run_with(model, "flex_attention", lambda m: padded_logits(m, batch))
    torch.testing.assert_close(flex, eager, atol=1e-4, rtol=0)
    ids, mask = batch
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        llama = llama_from(model, "flex_attention")(ids, attention_mask=mask, position_ids=position_ids).logits
    torch.testing.assert_close(flex, llama[mask.bool()], atol=1e-4, rtol=0)


@pytest.mark.slow  # compiles a decoding kernel per shape (minutes on CPU)
def test_flex_attention_greedy_tokens_match_eager(model, batch) -> None:
    prompt = (batch[0][:1], batch[1][:1])  # unpadded: cached flex decoding with padding fails in torch for Llama too
    eager = run_with(model, "eager", lambda m: greedy(m, prompt))
    assert torch.equal(run_with(model, "flex_attention", lambda m: greedy(m, prompt)), eager)


@pytest.mark.parametrize(
    "attn_implementation", ["sdpa", "counting_sdpa", pytest.param("flex_attention", marks=pytest.mark.slow)]
)
def test_masked_lm_matches_eager(attn_implementation) -> None:
    torch.manual_seed(0)
    model = TinyLMForMaskedLM(make_config()).eval()
    ids, mask = random_ids(3, 8), left_pad_mask(LENGTHS, 8)
    eager = run_with(model, "eager", lambda m: m(ids, attention_mask=mask).logits[mask.bool()])
    other = run_with(model, attn_implementation, lambda m: m(ids, attention_mask=mask).logits[mask.bool()])
    torch.testing.assert_close(other, eager, atol=1e-4, rtol=0)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])  # eager runs as paged|eager
def test_continuous_batching_gives_each_prompt_its_own_greedy_output(model, attn_implementation) -> None:
    prompts = [random_ids(1, n, seed=n)[0].tolist() for n in (5, 9, 3, 12)]
    alone = [
        run_with(model, "eager", lambda m: m.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                                      pad_token_id=0)[0, len(p):].tolist())
        for p in prompts
    ]
    config = ContinuousBatchingConfig(num_blocks=32, max_batch_tokens=128, page_size=32)
    generation_config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=-1, pad_token_id=0)
    outputs = run_with(model, attn_implementation, lambda m: m.generate_batch(
        prompts, generation_config=generation_config, continuous_batching_config=config, warmup=False))
    by_prompt = {tuple(out.prompt_ids): out for out in outputs.values()}
    assert [by_prompt[tuple(p)].error for p in prompts] == [None] * len(prompts)
    assert [by_prompt[tuple(p)].generated_tokens for p in prompts] == alone


def test_continuous_batching_packs_more_tokens_than_the_context_when_each_request_fits() -> None:
    # four 20-token prompts in a 32-position model: the paged batch packs 80 tokens in one row (`tinylm serve
    # --continuous-batching` under concurrent clients); each request's positions fit, so each is served
    model = make_model(max_position_embeddings=32)
    prompts = [random_ids(1, 20, seed=n)[0].tolist() for n in range(4)]
    alone = [model.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, do_sample=False,
                            pad_token_id=0)[0, len(p):].tolist() for p in prompts]
    config = ContinuousBatchingConfig(num_blocks=32, max_batch_tokens=128, page_size=32)
    generation_config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=-1, pad_token_id=0)
    outputs = model.generate_batch(prompts, generation_config=generation_config, continuous_batching_config=config,
                                   warmup=False)
    by_prompt = {tuple(out.prompt_ids): out for out in outputs.values()}
    assert [by_prompt[tuple(p)].error for p in prompts] == [None] * len(prompts)
    assert [by_prompt[tuple(p)].generated_tokens for p in prompts] == alone
