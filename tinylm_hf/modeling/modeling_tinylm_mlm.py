"""TinyLMForMaskedLM: the TinyLM blocks as a bidirectional encoder with a masked-language-model head.

The encoder is ``TinyLMModel`` with ``config.use_bidirectional_attention = True``: the same hand-written
layers, every token attending to every other (padding keys still masked), no KV cache. The head is a
bias-free linear map to the vocabulary (tied to the embeddings when ``tie_word_embeddings``), named
``lm_head`` as in the causal model, so the state-dict keys are the causal model's and Llama's.
Saved folders carry this file flat beside ``modeling_tinylm.py`` (``remote_code.py``).
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ..compat import require_supported_transformers  # noqa: F401

import torch
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput

from .configuration_tinylm import TinyLMConfig
from .loss_tinylm import masked_lm_loss
from .modeling_tinylm import TinyLMModel, TinyLMPreTrainedModel


class TinyLMForMaskedLM(TinyLMPreTrainedModel):
    """TinyLMModel attending both ways plus a vocabulary head; ``labels`` (-100 = not masked) add the loss.

    The config passed in is switched to ``use_bidirectional_attention=True`` and ``use_cache=False``
    (masked-LM prediction needs both directions and keeps no cache).
    """

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: TinyLMConfig) -> None:
        config.use_bidirectional_attention = True
        config.use_cache = False
        super().__init__(config)
        self.model = TinyLMModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | int | list[int] | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> MaskedLMOutput | tuple:
        """Logits (batch, seq, vocab) for every position; ``labels`` (batch, seq) add the masked-token loss.

        ``labels`` hold the original token at the masked positions and -100 elsewhere (what
        ``MLMCollator`` returns); no shift. ``num_items_in_batch`` (from ``Trainer``) is honoured.
        ``attention_mask`` (batch, seq) marks real tokens with 1 and padding with 0.
        """
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        logits = self.lm_head(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = masked_lm_loss(logits, labels, num_items_in_batch=kwargs.get("num_items_in_batch"))
        result = MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        return_dict = self.config.return_dict if return_dict is None else return_dict
        return result if return_dict else result.to_tuple()
