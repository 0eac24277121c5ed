"""Tiny TinyLM models and their LlamaForCausalLM twins (same weights), shared by the modeling tests."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMPreTrainedModel

VOCAB = 101


def make_config(**overrides) -> TinyLMConfig:
    sizes = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=72,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
    )
    return TinyLMConfig(**{**sizes, **overrides})


def make_model(seed: int = 0, **overrides) -> TinyLMForCausalLM:
    torch.manual_seed(seed)
    model = TinyLMForCausalLM(make_config(**overrides)).eval()
    with torch.no_grad():  # norms start at 1: perturb them so that parity also covers their weights
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model


def llama_from(model: TinyLMPreTrainedModel, attn_implementation: str, llama_class: type = LlamaForCausalLM):
    """A `llama_class` (LlamaForCausalLM, or a Llama task head) holding `model`'s weights, config mapped field by field.

    Llama's question-answering class keeps its decoder under `transformer.` (its old name); ours is `model.`.
    """
    c = model.config
    llama_config = LlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_attention_heads,
        max_position_embeddings=c.max_position_embeddings,
        rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta,
        tie_word_embeddings=c.tie_word_embeddings,
        pad_token_id=c.pad_token_id,
        id2label=c.id2label,
        problem_type=c.problem_type,
    )
    llama = llama_class._from_config(llama_config, attn_implementation=attn_implementation).eval()
    prefix = f"{llama_class.base_model_prefix}."
    state = {prefix + k[len("model."):] if k.startswith("model.") else k: v for k, v in model.state_dict().items()}
    llama.load_state_dict(state, strict=True)
    return llama


def random_ids(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(2, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def left_pad_mask(lengths: list[int], seq: int) -> torch.Tensor:
    return torch.stack([torch.arange(seq) >= seq - n for n in lengths]).long()
