"""The transformers classes of TinyLM: TinyLMPreTrainedModel, TinyLMModel and TinyLMForCausalLM.

They wrap the plain-torch layers of ``layers.py`` in the Hugging Face contract (config, weight init,
KV cache, generation, save/load, auto classes). Parameter names are Llama's, so a TinyLM state dict
loads into ``transformers.LlamaForCausalLM`` as is.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ..compat import CACHE_NAME, INSTALLED_RELEASE, resolve_cache

import inspect
import math
from pathlib import Path

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.dynamic_module_utils import get_relative_import_files
from transformers.generation.continuous_batching.cache import PagedAttentionCache
from transformers.integrations import use_kernel_forward_from_hub
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask, packed_sequence_mask_function
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .configuration_tinylm import TinyLMConfig
from .layers import AttentionFunction, CausalSelfAttention, DecoderBlock, RMSNorm, RotaryEmbedding, SwiGLU
from .layers import compute_rope_tables
from .loss_tinylm import causal_lm_loss

# what save_pretrained writes into config.json's auto_map (beside what register_for_auto_class adds), so
# that a folder saved from either class loads with trust_remote_code through both auto classes
AUTO_MAP = {"AutoModel": "modeling_tinylm.TinyLMModel", "AutoModelForCausalLM": "modeling_tinylm.TinyLMForCausalLM"}
# the attention implementation that is our own code (layers.attend, with our masks): the reference every other
# implementation (transformers' ALL_ATTENTION_FUNCTIONS: sdpa, flex_attention, flash_attention_*, paged|eager, a
# registered function) is tested against
REFERENCE_ATTENTION = "eager"
# the heads TinyLM classes put on the decoder (language model, sequence and token scores, answer spans): the
# only weights a checkpoint may lack or leave over when loaded into another class (from_pretrained)
HEAD_PREFIXES = ("lm_head.", "score.", "qa_outputs.")


@use_kernel_forward_from_hub("RMSNorm")
class TinyLMRMSNorm(RMSNorm):
    """RMSNorm under the name transformers' kernel mapping knows ("RMSNorm"): ``use_kernels`` may swap its forward."""


@use_kernel_forward_from_hub("SwiGLUMLP")
class TinyLMMLP(SwiGLU):
    """The SwiGLU MLP under the name transformers' kernel mapping knows ("SwiGLUMLP")."""


class TinyLMAttention(CausalSelfAttention):
    """CausalSelfAttention with the cache update transformers' attention functions expect (a paged cache included)."""

    config: TinyLMConfig  # set by the decoder layer: flash attention reads the model's config from the module

    def update_cache(self, cache, k: torch.Tensor, v: torch.Tensor, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        return update_kv_cache(cache, k, v, self.layer_idx, kwargs)


def update_kv_cache(
    cache, key: torch.Tensor, value: torch.Tensor, layer_idx: int, kwargs: dict
) -> tuple[torch.Tensor, torch.Tensor]:
    """Update ``cache`` as the installed transformers expects, returning the keys/values attention reads.

    transformers >= 5.24 has the model update every cache, a paged one with the attention kwargs (its read/write
    indices, updated in place for the attention function). Before, a paged cache travelled to the attention
    function in its kwargs, which updated it there.
    """
    if INSTALLED_RELEASE >= (5, 24):
        return cache.update(key, value, layer_idx, kwargs=kwargs)
    if isinstance(cache, PagedAttentionCache):
        kwargs["cache"] = cache
        return key, value
    return cache.update(key, value, layer_idx)


class TinyLMDecoderLayer(GradientCheckpointingLayer, DecoderBlock):
    """A DecoderBlock that transformers can gradient-checkpoint, with parts named as transformers' kernels expect."""

    norm_class = TinyLMRMSNorm
    attention_class = TinyLMAttention
    mlp_class = TinyLMMLP

    def __init__(self, config: TinyLMConfig, layer_idx: int) -> None:
        DecoderBlock.__init__(
            self,
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
            rms_norm_eps=config.rms_norm_eps,
            layer_idx=layer_idx,
        )
        self.self_attn.config = config


class TinyLMPreTrainedModel(PreTrainedModel):
    """Weight init and the class-level switches transformers reads (checkpointing, attention functions, tying).

    Attention: "eager" is our own (``layers.attend``); every other ``attn_implementation`` transformers offers
    (sdpa, flex_attention, flash_attention_*, the paged ones of continuous batching, a function registered with
    ``AttentionInterface``) is looked up in ``ALL_ATTENTION_FUNCTIONS`` and called per layer, as in Llama.
    """

    config_class = TinyLMConfig
    config: TinyLMConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["TinyLMDecoderLayer"]
    _skip_keys_device_placement = [CACHE_NAME]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True

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
        """Load as transformers does, but decoder weights missing from or left over in the checkpoint are an error,
        and hub kernels are off unless ``use_kernels=True`` or a ``kernel_config`` asks for them.

        transformers would silently re-initialise missing weights (a config with more layers than the
        checkpoint) or drop extra ones (fewer layers): both are wrong answers, not a loaded model. Only a head
        (``HEAD_PREFIXES``) may be absent (a ``TinyLMModel`` or causal-LM checkpoint loaded into
        ``TinyLMForCausalLM`` or a task head: the head is initialised, and reported in the log and in
        ``output_loading_info``) or left over (the reverse).
        """
        want_info = kwargs.pop("output_loading_info", False)
        # transformers >= 5.25 turns hub kernels on unless told: a download from the Hub at load time (on a GPU),
        # and a refusal where `kernels` is not installed. Ours stay off unless asked for (use_kernels=True or a
        # kernel_config), as on every earlier release.
        kwargs.setdefault("use_kernels", kwargs.get("kernel_config") is not None)
        model, info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        missing = sorted(k for k in info.get("missing_keys", ()) if not _is_head_weight(k))
        unexpected = sorted(k for k in info.get("unexpected_keys", ()) if not _is_head_weight(k))
        if missing or unexpected:
            raise ValueError(
                f"the checkpoint does not match the config of {cls.__name__}: "
                f"missing weights {missing[:8]}{'...' if len(missing) > 8 else ''}, "
                f"unexpected weights {unexpected[:8]}{'...' if len(unexpected) > 8 else ''}; "
                "check num_hidden_layers and the other sizes in config.json"
            )
        return (model, info) if want_info else model

    def save_pretrained(self, save_directory, *args, **kwargs) -> None:
        """Save as transformers does, with every Auto class the folder's code serves in ``auto_map``.

        ``AutoModel`` and, for a causal decoder, ``AutoModelForCausalLM`` (a bidirectional masked-LM model is
        no causal LM; its own class adds ``AutoModelForMaskedLM``), plus what the class adds (``_auto_map``).
        Entries the loaded config carried over from another class's folder stay only when this save writes
        their file (a classifier loaded from a masked-LM folder does not write ``modeling_tinylm_mlm.py``).
        The code is the import closure of the classes ``auto_map`` names, built by ``remote_code.py``.
        """
        from ..remote_code import building_remote_code, remote_ref, write_remote_code

        copied = saved_modules(type(self))
        carried = getattr(self.config, "auto_map", None) or {}
        carried = {a: ref for a, ref in carried.items() if not isinstance(ref, str) or auto_map_module(ref) in copied}
        auto_map = {**self._auto_map(), **carried}
        auto_class = type(self)._auto_class
        with building_remote_code(type(self), type(self.config)) as build:
            if build:  # what transformers' copying would add: the saved class and its config
                auto_map.update({auto_class: remote_ref(type(self))} if auto_class else {})
                auto_map["AutoConfig"] = remote_ref(type(self.config))
            self.config.auto_map = auto_map
            saved = super().save_pretrained(save_directory, *args, **kwargs)
        if build:
            write_remote_code(save_directory, [ref for ref in auto_map.values() if isinstance(ref, str)])
        return saved

    def _auto_map(self) -> dict[str, str]:
        """The ``auto_map`` entries a folder saved from this class needs (subclasses add theirs)."""
        return {"AutoModel": AUTO_MAP["AutoModel"]} if self.config.use_bidirectional_attention else dict(AUTO_MAP)


def saved_modules(cls: type) -> set[str]:
    """Names of the modules a saved folder holds for ``cls``: its import closure (``remote_code.py``), or, for a
    class loaded from a folder's own code, the files transformers copies (the class's own and its siblings)."""
    from ..remote_code import is_packaged, remote_code_files, remote_ref

    if is_packaged(cls):
        return {Path(name).stem for name in remote_code_files([remote_ref(cls)])}
    path = inspect.getfile(cls)
    return {Path(file).stem for file in [path, *get_relative_import_files(path)]}


def auto_map_module(ref: str) -> str:
    """The module an ``auto_map`` value names: ``"modeling_tinylm.TinyLMModel"`` -> ``"modeling_tinylm"``.

    A Hub prefix (``"user/repo--modeling_tinylm.TinyLMModel"``) is dropped.
    """
    return ref.split("--")[-1].rsplit(".", 1)[0]


def _is_head_weight(key: str) -> bool:
    return key.startswith(HEAD_PREFIXES)


class TinyLMModel(TinyLMPreTrainedModel):
    """The bare decoder: embeddings -> pre-norm blocks -> final RMSNorm; returns BaseModelOutputWithPast."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(TinyLMDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = TinyLMRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta)
        for layer in self.layers:
            layer.self_attn.is_causal = not config.use_bidirectional_attention
        self.gradient_checkpointing = False
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | int | list[int] | None = None,
        return_dict: bool | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast | tuple:
        """Run the decoder; ``attention_mask`` (batch, past + seq) marks real tokens with 1, padding with 0.

        ``output_hidden_states`` (True, or the indices of the states to keep) adds ``hidden_states``: the
        embeddings, then each layer's output, the last one after the final norm (``num_hidden_layers + 1``
        tensors, None where not selected). ``output_attentions`` adds each layer's attention weights
        (batch, heads, seq, past + seq), computed by the eager path. Unset options default to the config's.
        The KV cache comes as ``cache`` (transformers >= 5.24) or ``past_key_values`` (before), and goes
        back under the installed release's field name.
        """
        cache = resolve_cache(cache, past_key_values)
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        keep_states = _hidden_state_selection(
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states,
            self.config.num_hidden_layers + 1,
        )
        # value checks read tensors back (a device sync, a graph break): skipped while torch.compile traces
        checking = not torch.compiler.is_compiling()
        if inputs_embeds is None:
            if checking:
                self._check_token_ids(input_ids)
            inputs_embeds = self.embed_tokens(input_ids)
        causal = not self.config.use_bidirectional_attention
        if not causal and (use_cache or cache is not None):
            raise ValueError("a bidirectional (masked-LM) TinyLM has no KV cache: pass use_cache=False and no cache")
        if use_cache is None:  # a training forward keeps no cache unless asked to
            use_cache = causal and self.config.use_cache and not self.training
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        reference = self.config._attn_implementation == REFERENCE_ATTENTION or output_attentions
        position_ids, mask = self._positions_and_mask(inputs_embeds, attention_mask, position_ids, cache, reference)
        rope = self.rotary_emb(position_ids, dtype=inputs_embeds.dtype)
        if not reference:
            kwargs = {**kwargs, "position_ids": position_ids}  # flash attention finds packed sequences from them
        hidden_states, all_hidden_states, all_attentions = self._run_layers(
            inputs_embeds, rope, mask, cache, output_attentions, keep_states, kwargs
        )
        outputs = BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
            **{CACHE_NAME: cache if use_cache else None},
        )
        return_dict = self.config.return_dict if return_dict is None else return_dict
        return outputs if return_dict else outputs.to_tuple()

    def _positions_and_mask(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        cache: Cache | None,
        reference: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Position ids (given, or counted past the cache and any left padding) and the attention mask.

        The mask is ours (boolean, True = attend; None = plain causal) for the ``reference`` attention, else
        what transformers builds for the configured implementation (`_interface_mask`).
        """
        batch, seq = inputs_embeds.shape[:2]
        causal = not self.config.use_bidirectional_attention
        checking = not torch.compiler.is_compiling()
        past_len, kv_len = _cache_lengths(cache, seq)
        # a paged cache packs several requests into one row: its positions, not the row's length, must fit
        if past_len + seq > self.config.max_position_embeddings and not isinstance(cache, PagedAttentionCache):
            raise ValueError(
                f"sequence of {past_len + seq} tokens (past {past_len} + new {seq}) is longer than "
                f"max_position_embeddings={self.config.max_position_embeddings}"
            )
        sequence_ids = None  # which packed sequence each token belongs to, when rows pack several
        if position_ids is None:
            padding_mask = attention_mask if attention_mask is not None and attention_mask.dim() == 2 else None
            position_ids = _default_position_ids(padding_mask, past_len, seq, inputs_embeds.device)
        elif checking:
            self._check_position_ids(position_ids)
            if attention_mask is None and past_len == 0 and not isinstance(cache, PagedAttentionCache):
                sequence_ids = _packed_sequence_ids(position_ids, batch)
        if reference:
            if sequence_ids is not None:
                attention_mask = _packed_sequences_mask(sequence_ids, causal)
            mask = _build_attention_mask(
                attention_mask, batch, past_len, seq, inputs_embeds.device, checking, kv_len, causal=causal
            )
        else:
            mask = self._interface_mask(
                inputs_embeds, attention_mask, cache, position_ids, sequence_ids, past_len, kv_len
            )
        return position_ids, mask

    def _run_layers(
        self,
        hidden_states: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        cache: Cache | None,
        output_attentions: bool,
        keep_states: set[int] | None,
        kwargs: dict,
    ) -> tuple[torch.Tensor, tuple | None, tuple | None]:
        """The blocks, then the final norm: (last hidden state, the kept hidden states, the attention weights)."""
        attention = attention_function(self.config._attn_implementation)
        states, attentions = [], []  # filled only when asked for
        for layer in self.layers:
            if keep_states is not None:
                states.append(hidden_states)
            hidden_states = layer(
                hidden_states,
                rope,
                mask,
                cache=cache,
                attn_implementation=attention,
                output_attentions=output_attentions,
                **kwargs,
            )
            if output_attentions:
                hidden_states, probs = hidden_states
                attentions.append(probs)
        hidden_states = self.norm(hidden_states)
        states.append(hidden_states)
        kept = None if keep_states is None else tuple(h if i in keep_states else None for i, h in enumerate(states))
        return hidden_states, kept, tuple(attentions) if output_attentions else None

    def _interface_mask(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Cache | None,
        position_ids: torch.Tensor,
        sequence_ids: torch.Tensor | None,
        past_len: int,
        kv_len: int,
    ):
        """The mask transformers' attention functions expect, built by transformers for the configured implementation.

        A tensor, a flex BlockMask or None (plain causal, or what flash and paged attention find in their kwargs).
        A 4D mask passes as given (a paged cache's, or a static cache's from ``generate``).
        """
        batch, seq = inputs_embeds.shape[:2]
        if attention_mask is not None and attention_mask.dim() == 2:
            _check_padding_mask(attention_mask, batch, past_len + seq)
        elif attention_mask is not None and not isinstance(cache, PagedAttentionCache):
            _check_4d_mask(attention_mask, batch, seq, kv_len)
        packed = None if sequence_ids is None else packed_sequence_mask_function(sequence_ids)
        if self.config.use_bidirectional_attention:
            return create_bidirectional_mask(self.config, inputs_embeds, attention_mask, and_mask_function=packed)
        return create_causal_mask(
            self.config, inputs_embeds, attention_mask, position_ids=position_ids, and_mask_function=packed,
            **{CACHE_NAME: cache},
        )

    def _check_position_ids(self, position_ids: torch.Tensor) -> None:
        if position_ids.numel() == 0:
            return
        if int(position_ids.min()) < 0 or int(position_ids.max()) >= self.config.max_position_embeddings:
            raise ValueError(
                f"position_ids must lie in [0, max_position_embeddings={self.config.max_position_embeddings})"
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


def _hidden_state_selection(output_hidden_states: bool | int | list[int] | None, count: int) -> set[int] | None:
    """Indices (0..count-1) of the hidden states to return, or None for none; negative indices count from the end."""
    if output_hidden_states is None or output_hidden_states is False:
        return None
    if output_hidden_states is True:
        return set(range(count))
    indices = [output_hidden_states] if isinstance(output_hidden_states, int) else list(output_hidden_states)
    return {i % count for i in indices if -count <= i < count}


def _packed_sequence_ids(position_ids: torch.Tensor, batch: int) -> torch.Tensor | None:
    """(batch, seq) index of the packed sequence each token belongs to, or None when no row packs several.

    Padding-free batches (e.g. ``DataCollatorWithFlattening``) pass no attention_mask, only position_ids
    that start again at each sequence; tokens must not attend across those boundaries (as in Llama).
    """
    position_ids = position_ids.expand(batch, -1)
    starts = torch.diff(position_ids, prepend=position_ids[:, :1] - 1, dim=-1) != 1
    sequence_ids = starts.cumsum(-1)
    return sequence_ids if bool((sequence_ids[:, -1] > 0).any()) else None


def _packed_sequences_mask(sequence_ids: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Block-causal (batch, 1, seq, seq) mask from `_packed_sequence_ids`; block-diagonal when not ``causal``."""
    same = sequence_ids[:, :, None] == sequence_ids[:, None, :]  # (batch, seq, seq)
    return (same & torch.ones_like(same[0]).tril())[:, None] if causal else same[:, None]


def attention_function(attn_implementation: str) -> str | AttentionFunction:
    """What the layers call: our own attention for "eager", else transformers' function registered under the name."""
    if attn_implementation == REFERENCE_ATTENTION:
        return attn_implementation
    return ALL_ATTENTION_FUNCTIONS[attn_implementation]


def _cache_lengths(cache: Cache | None, seq: int) -> tuple[int, int]:
    """(tokens already cached, length of the keys attention will see): past + seq, or a static cache's full size."""
    if cache is None or isinstance(cache, PagedAttentionCache):  # a paged cache's requests come with positions
        return 0, seq
    past_len = int(cache.get_seq_length())
    return past_len, int(cache.get_mask_sizes(seq, 0)[0])


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
    kv_len: int | None = None,
    *,
    causal: bool = True,
) -> torch.Tensor | None:
    """Boolean (batch, 1, seq, kv_len) mask, True = attend; None when plain causal attention is enough.

    ``kv_len`` is the key length the cache hands attention: past + seq, or more for a static cache
    (whose unfilled slots the causal part masks out). Not ``causal`` (a bidirectional encoder): only
    padding keys are masked, as a (batch, 1, 1, kv_len) mask, and None means no mask at all.
    """
    real_len = past_len + seq
    kv_len = real_len if kv_len is None else kv_len
    if attention_mask is not None and attention_mask.dim() == 4:
        return _mask_from_4d(attention_mask, batch, seq, kv_len)
    if attention_mask is not None:
        _check_padding_mask(attention_mask, batch, real_len)
        if skip_all_ones and bool(attention_mask.all()):
            attention_mask = None
    if attention_mask is None and kv_len == real_len:
        return None
    if not causal:
        # a row of padding only would see nothing (NaN): let it see everything (its output is ignored)
        key_ok = attention_mask.bool()[:, None, None, :]  # (batch, 1, 1, kv_len)
        return key_ok | ~key_ok.any(dim=-1, keepdim=True)
    allowed = torch.ones(seq, kv_len, dtype=torch.bool, device=device).tril(diagonal=past_len)
    if attention_mask is None:
        return allowed[None, None]  # (1, 1, seq, kv_len)
    key_ok = attention_mask.bool()
    if kv_len > real_len:
        key_ok = torch.nn.functional.pad(key_ok, (0, kv_len - real_len), value=False)
    mask = allowed & key_ok[:, None, None, :]  # (batch, 1, seq, kv_len)
    # a padding query before any real token sees nothing: let it see everything (its output is ignored) to avoid NaN
    return mask | ~mask.any(dim=-1, keepdim=True)


def _check_padding_mask(attention_mask: torch.Tensor, batch: int, real_len: int) -> None:
    if attention_mask.shape != (batch, real_len):
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, "
            f"expected (batch, past + seq) = {(batch, real_len)}"
        )


def _check_4d_mask(attention_mask: torch.Tensor, batch: int, seq: int, kv_len: int) -> None:
    if attention_mask.shape[0] not in (1, batch) or tuple(attention_mask.shape[1:]) != (1, seq, kv_len):
        raise ValueError(
            f"a 4D attention_mask must have shape (batch, 1, seq, kv_len) = {(batch, 1, seq, kv_len)}, "
            f"got {tuple(attention_mask.shape)}"
        )


def _mask_from_4d(attention_mask: torch.Tensor, batch: int, seq: int, kv_len: int) -> torch.Tensor:
    """A ready-made (batch, 1, seq, kv_len) mask, as generate passes with a static cache.

    Boolean (True = attend) or transformers' additive float form (0 = attend, a large negative number = masked).
    """
    _check_4d_mask(attention_mask, batch, seq, kv_len)
    mask = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
    return mask | ~mask.any(dim=-1, keepdim=True)


class TinyLMForCausalLM(TinyLMPreTrainedModel, GenerationMixin):
    """TinyLMModel plus a language-model head (optionally tied to the embeddings) and the shifted CE loss."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: TinyLMConfig) -> None:
        if config.use_bidirectional_attention:
            raise ValueError(
                "this config has use_bidirectional_attention=True: it is a masked-LM encoder, not a causal LM; "
                "load it with AutoModelForMaskedLM / TinyLMForMaskedLM"
            )
        super().__init__(config)
        self.model = TinyLMModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | int | list[int] | None = None,
        return_dict: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast | tuple:
        """Logits for every (or the last ``logits_to_keep``) position; ``labels`` (-100 = ignore) adds the loss.

        ``labels`` are the input ids themselves: the shift (predict token t+1 from position t) happens in
        the loss. ``shift_labels`` (already shifted targets) and ``num_items_in_batch`` are honoured as
        keyword arguments, as ``Trainer`` passes them. Other options as in ``TinyLMModel.forward``.
        """
        shift_labels, num_items_in_batch = kwargs.pop("shift_labels", None), kwargs.pop("num_items_in_batch", None)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=resolve_cache(cache, past_key_values),
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,  # for the attention function (continuous batching's paged-cache indices)
        )
        hidden_states = outputs.last_hidden_state
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden_states[:, keep, :])
        loss = None
        if labels is not None or shift_labels is not None:
            loss = causal_lm_loss(logits, labels, shift_labels=shift_labels, num_items_in_batch=num_items_in_batch)
        result = CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **{CACHE_NAME: getattr(outputs, CACHE_NAME)},
        )
        return_dict = self.config.return_dict if return_dict is None else return_dict
        return result if return_dict else result.to_tuple()
