"""The transformers classes of TinyLM: TinyLMPreTrainedModel, TinyLMModel and TinyLMForCausalLM.

They wrap the plain-torch layers of ``layers.py`` in the Hugging Face contract (config, weight init,
KV cache, generation, save/load, auto classes). Parameter names are Llama's, so a TinyLM state dict
loads into ``transformers.LlamaForCausalLM`` as is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_tinylm import TinyLMConfig
from .layers import DecoderBlock, RMSNorm, RotaryEmbedding, compute_rope_tables


class TinyLMDecoderLayer(GradientCheckpointingLayer, DecoderBlock):
    """A DecoderBlock that transformers can gradient-checkpoint."""

    def __init__(self, config: TinyLMConfig, layer_idx: int) -> None:
        DecoderBlock.__init__(
            self,
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
            rms_norm_eps=config.rms_norm_eps,
            layer_idx=layer_idx,
        )


class TinyLMPreTrainedModel(PreTrainedModel):
    """Weight init and the class-level switches transformers reads (checkpointing, SDPA, tying)."""

    config_class = TinyLMConfig
    config: TinyLMConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["TinyLMDecoderLayer"]
    _skip_keys_device_placement = ["past_key_values"]
    _supports_sdpa = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """GPT-2/Llama init: N(0, initializer_range), residual projections scaled by 1/sqrt(2 * layers)."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            if getattr(module, "is_residual_projection", False):
                std = std / math.sqrt(2 * self.config.num_hidden_layers)
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, RMSNorm):
            init.ones_(module.weight)
        elif isinstance(module, RotaryEmbedding):
            # from_pretrained builds on the meta device: non-persistent buffers must be recomputed here
            cos, sin = compute_rope_tables(
                module.head_dim, module.max_position_embeddings, module.theta, device=module.cos_cached.device
            )
            init.copy_(module.cos_cached, cos)
            init.copy_(module.sin_cached, sin)

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """Load as transformers does, but weights missing from or left over in the checkpoint are an error.

        transformers would silently re-initialise missing weights (a config with more layers than the
        checkpoint) or drop extra ones (fewer layers): both are wrong answers, not a loaded model.
        """
        want_info = kwargs.pop("output_loading_info", False)
        model, info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        missing = sorted(info.get("missing_keys", ()))
        # a TinyLMModel loaded from a TinyLMForCausalLM checkpoint legitimately leaves the head out
        unexpected = sorted(k for k in info.get("unexpected_keys", ()) if not k.startswith("lm_head."))
        if missing or unexpected:
            raise ValueError(
                f"the checkpoint does not match the config of {cls.__name__}: "
                f"missing weights {missing[:8]}{'...' if len(missing) > 8 else ''}, "
                f"unexpected weights {unexpected[:8]}{'...' if len(unexpected) > 8 else ''}; "
                "check num_hidden_layers and the other sizes in config.json"
            )
        return (model, info) if want_info else model

    def save_pretrained(self, save_directory, *args, **kwargs) -> None:
        """Save as transformers does, with an ``AutoModel`` entry in ``auto_map`` for remote code."""
        auto_map = dict(getattr(self.config, "auto_map", None) or {})
        auto_map.setdefault("AutoModel", "modeling_tinylm.TinyLMModel")
        self.config.auto_map = auto_map
        return super().save_pretrained(save_directory, *args, **kwargs)


class TinyLMModel(TinyLMPreTrainedModel):
    """The bare decoder: embeddings -> pre-norm blocks -> final RMSNorm; returns BaseModelOutputWithPast."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(TinyLMDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta)
        self.gradient_checkpointing = False
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        """Run the decoder; ``attention_mask`` (batch, past + seq) marks real tokens with 1, padding with 0."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        # value checks read tensors back (a device sync, a graph break): skipped while torch.compile traces
        checking = not torch.compiler.is_compiling()
        if inputs_embeds is None:
            if checking:
                self._check_token_ids(input_ids)
            inputs_embeds = self.embed_tokens(input_ids)
        batch, seq = inputs_embeds.shape[:2]
        if use_cache is None:  # a training forward keeps no cache unless asked to
            use_cache = self.config.use_cache and not self.training
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        past_len = past_key_values.get_seq_length() if past_key_values is not None else 0
        if past_len + seq > self.config.max_position_embeddings:
            raise ValueError(
                f"sequence of {past_len + seq} tokens (past {past_len} + new {seq}) is longer than "
                f"max_position_embeddings={self.config.max_position_embeddings}"
            )
        if position_ids is None:
            position_ids = _default_position_ids(attention_mask, past_len, seq, inputs_embeds.device)
        elif checking and position_ids.numel():
            if int(position_ids.min()) < 0 or int(position_ids.max()) >= self.config.max_position_embeddings:
                raise ValueError(
                    f"position_ids must lie in [0, max_position_embeddings={self.config.max_position_embeddings})"
                )
        mask = _build_attention_mask(attention_mask, batch, past_len, seq, inputs_embeds.device, checking)
        rope = self.rotary_emb(position_ids, dtype=inputs_embeds.dtype)
        attn_implementation = "eager" if self.config._attn_implementation == "eager" else "sdpa"
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(
                hidden_states,
                rope,
                mask,
                past_key_values=past_key_values if use_cache else None,
                attn_implementation=attn_implementation,
            )
        return BaseModelOutputWithPast(
            last_hidden_state=self.norm(hidden_states),
            past_key_values=past_key_values if use_cache else None,
        )

    def _check_token_ids(self, input_ids: torch.Tensor) -> None:
        if input_ids.numel() == 0:
            return
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.config.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"input_ids contain token id {bad} outside the vocabulary [0, {self.config.vocab_size}); "
                "resize_token_embeddings after adding tokens to the tokenizer"
            )


def _default_position_ids(
    attention_mask: torch.Tensor | None, past_len: int, seq: int, device: torch.device
) -> torch.Tensor:
    """Positions past_len..past_len+seq-1, or, with a padding mask, counted from each row's first real token."""
    if attention_mask is None:
        return torch.arange(past_len, past_len + seq, device=device).unsqueeze(0)
    position_ids = attention_mask.long().cumsum(-1) - 1
    return position_ids.clamp(min=0)[:, -seq:]


def _build_attention_mask(
    attention_mask: torch.Tensor | None,
    batch: int,
    past_len: int,
    seq: int,
    device: torch.device,
    skip_all_ones: bool = True,
) -> torch.Tensor | None:
    """Boolean (batch, 1, seq, past + seq) mask, True = attend; None when plain causal attention is enough."""
    kv_len = past_len + seq
    if attention_mask is not None:
        if attention_mask.shape != (batch, kv_len):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}, "
                f"expected (batch, past + seq) = {(batch, kv_len)}"
            )
        if skip_all_ones and bool(attention_mask.all()):
            attention_mask = None
    if attention_mask is None:
        return None
    key_ok = attention_mask.bool()[:, None, None, :]  # (batch, 1, 1, kv_len)
    causal = torch.ones(seq, kv_len, dtype=torch.bool, device=device).tril(diagonal=past_len)
    mask = causal & key_ok  # (batch, 1, seq, kv_len)
    # a padding query before any real token sees nothing: let it see everything (its output is ignored) to avoid NaN
    return mask | ~mask.any(dim=-1, keepdim=True)


class TinyLMForCausalLM(TinyLMPreTrainedModel, GenerationMixin):
    """TinyLMModel plus a language-model head (optionally tied to the embeddings) and the shifted CE loss."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.model = TinyLMModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """Logits for every (or the last ``logits_to_keep``) position; ``labels`` (-100 = ignore) adds the loss.

        ``labels`` are the input ids themselves: the shift (predict token t+1 from position t) happens here.
        """
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
        )
        hidden_states = outputs.last_hidden_state
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden_states[:, keep, :])
        loss = None
        if labels is not None:
            loss = shifted_cross_entropy(logits, labels, kwargs.get("num_items_in_batch"))
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=outputs.past_key_values)


def shifted_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | torch.Tensor | None = None
) -> torch.Tensor:
    """Mean CE of logits[:, t] against labels[:, t + 1], ignoring -100 (shifting labels avoids copying logits)."""
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels have shape {tuple(labels.shape)}, expected {tuple(logits.shape[:-1])}")
    shift_labels = F.pad(labels, (0, 1), value=-100)[:, 1:].to(logits.device)
    logits = logits.float()
    reduction = "mean" if num_items_in_batch is None else "sum"
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), shift_labels.reshape(-1), ignore_index=-100, reduction=reduction
    )
    if num_items_in_batch is not None:
        loss = loss / num_items_in_batch
    return loss
