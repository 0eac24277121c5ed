"""Task heads on the TinyLM decoder: classify a text, tag its tokens, find an answer span, as Llama does.

``TinyLMForSequenceClassification``, ``TinyLMForTokenClassification`` and ``TinyLMForQuestionAnswering``
behave as ``LlamaForSequenceClassification`` / ``...ForTokenClassification`` / ``...ForQuestionAnswering``
(transformers' ``GenericFor*`` classes) and use their names: the decoder is ``model``, the heads are
``score`` (bias-free for sequences, with a bias for tokens) and ``qa_outputs`` (start and end logits), and the
losses are transformers' own (``self.loss_function``; ``problem_type`` regression / single-label / multi-label
is chosen from ``num_labels`` and the labels' dtype, as there). Each head loads the decoder of a causal-LM or
masked-LM TinyLM folder; the head itself starts from ``initializer_range`` and transformers' load report names it.

Pooling a sequence: a causal decoder's last real token is the only one that has read the whole text, so it is
the one classified (the rightmost token that is not ``pad_token_id``, as Llama; with left or right padding).
A bidirectional (masked-LM) encoder has no such token: every position has read everything, and none was trained
to summarise the text (TinyLM's masked-LM objective has no next-sentence task, so even the [CLS] that a WordPiece
tokenizer puts first only ever learnt to predict masked tokens, and byte-level BPE puts no special token first),
so it is mean-pooled over the attention mask, as sentence-transformers pools encoders. Mean pooling also gives
the same answer for any padding side (tested).

Llama's question-answering class keeps its decoder under the old name ``transformer``; TinyLM's is ``model`` in
every class, so a causal-LM folder loads into it (``export-llama`` renames the keys for Llama).

Saved folders carry this file flat beside ``modeling_tinylm.py`` (``remote_code.py``).
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ..compat import CACHE_NAME

import torch
from torch import nn
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutputWithPast,
    TokenClassifierOutput,
)
from transformers.utils import logging

from .configuration_tinylm import TinyLMConfig
from .loss_tinylm import IGNORE_INDEX
from .modeling_tinylm import TinyLMModel, TinyLMPreTrainedModel

logger = logging.get_logger(__name__)

# what save_pretrained adds to config.json's auto_map, so a folder saved from any head loads through all three
HEADS_AUTO_MAP = {
    "AutoModelForSequenceClassification": "modeling_tinylm_heads.TinyLMForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_tinylm_heads.TinyLMForTokenClassification",
    "AutoModelForQuestionAnswering": "modeling_tinylm_heads.TinyLMForQuestionAnswering",
}
DEFAULT_CLASSIFIER_DROPOUT = 0.1  # Llama's token-classification dropout when the config names none


class TinyLMTaskModel(TinyLMPreTrainedModel):
    """The decoder (``model``, causal or bidirectional as the config says) that a task head sits on."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.model = TinyLMModel(config)

    def _auto_map(self) -> dict[str, str]:
        return {**super()._auto_map(), **HEADS_AUTO_MAP}

    def _decode(self, input_ids, attention_mask, position_ids, inputs_embeds, options: dict) -> BaseModelOutputWithPast:
        """The decoder's output; ``options`` (a head's keyword arguments: ``cache``, ``use_cache``,
        ``output_attentions``, ``output_hidden_states``, ...) go on to ``TinyLMModel.forward``, as in Llama."""
        return self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          inputs_embeds=inputs_embeds, **options, return_dict=True)

    def _return(self, result, return_dict: bool | None):
        return_dict = self.config.return_dict if return_dict is None else return_dict
        return result if return_dict else result.to_tuple()


class TinyLMForSequenceClassification(TinyLMTaskModel):
    """One score per label for a whole text: the last real token of a causal decoder, the mean of an encoder.

    ``labels`` (batch,) class ids, (batch,) floats with ``num_labels=1`` (regression) or (batch, num_labels)
    multi-hot floats add transformers' loss for ``config.problem_type``. Pooling a causal batch needs
    ``config.pad_token_id`` (the rightmost token that is not padding is pooled); an encoder's mean needs the
    ``attention_mask``.
    """

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutputWithPast | tuple:
        """Logits (batch, num_labels) of the pooled text, and the KV cache when the decoder keeps one.

        Keyword arguments (``cache``, ``use_cache``, ``output_attentions``, ``output_hidden_states``) go to
        ``TinyLMModel.forward``. ``num_items_in_batch`` (what ``Trainer`` passes under gradient accumulation)
        makes the loss this batch's share of the mean over the accumulated batch, for every ``problem_type``.
        """
        outputs = self._decode(input_ids, attention_mask, position_ids, inputs_embeds, kwargs)
        logits = self.score(self._pool(outputs.last_hidden_state, input_ids, attention_mask))
        loss = None if labels is None else self._loss(logits, labels, kwargs.get("num_items_in_batch"))
        result = SequenceClassifierOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **{CACHE_NAME: getattr(outputs, CACHE_NAME)},
        )
        return self._return(result, return_dict)

    def _pool(self, hidden_states: torch.Tensor, input_ids: torch.Tensor | None,
              attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(batch, hidden): the encoder's mean over real tokens, or the causal decoder's last real token."""
        if self.config.use_bidirectional_attention:
            return mean_over_mask(hidden_states, attention_mask)
        batch = hidden_states.shape[0]
        last = last_token_index(input_ids, self.config.pad_token_id, batch, type(self).__name__)
        return hidden_states[torch.arange(batch, device=hidden_states.device), last]

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch) -> torch.Tensor:
        loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config,
                                  num_items_in_batch=num_items_in_batch)
        if num_items_in_batch is not None and self.config.problem_type != "single_label_classification":
            # MSE and BCE are means over this batch's labels, and ignore num_items_in_batch: rescale them
            loss = loss * (labels != IGNORE_INDEX).sum() / num_items_in_batch
        return loss


def last_token_index(input_ids: torch.Tensor | None, pad_token_id: int | None, batch: int,
                     class_name: str) -> torch.Tensor | int:
    """Per row, the index of the rightmost token that is not ``pad_token_id`` (left or right padding).

    Llama's rule: without a pad token only a batch of one can be pooled (at its last position), and
    ``inputs_embeds`` are taken to be unpadded (their last position is pooled, with a warning).
    """
    if pad_token_id is None and batch != 1:
        raise ValueError(
            f"{class_name} cannot pool a batch of {batch} texts without a pad token: set model.config.pad_token_id "
            "(for example to the tokenizer's pad_token_id or eos_token_id)"
        )
    if pad_token_id is None:
        return -1
    if input_ids is None:
        logger.warning_once(
            f"{class_name} will not detect padding tokens in `inputs_embeds`: the last position of each row is pooled"
        )
        return -1
    real = (input_ids != pad_token_id).int()  # (batch, seq)
    positions = torch.arange(input_ids.shape[-1], device=input_ids.device, dtype=torch.int32)
    return (positions * real).argmax(-1)  # (batch,)


def mean_over_mask(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(batch, hidden): the mean of ``hidden_states`` (batch, seq, hidden) over the real tokens (all without a mask)."""
    if attention_mask is None:
        return hidden_states.mean(dim=1)
    weights = attention_mask.to(hidden_states.dtype).unsqueeze(-1)  # (batch, seq, 1)
    return (hidden_states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


def classifier_dropout(config: TinyLMConfig) -> float:
    """Llama's rule: ``classifier_dropout``, else ``hidden_dropout``, else 0.1 (set them in the config to change it)."""
    for name in ("classifier_dropout", "hidden_dropout"):
        if getattr(config, name, None) is not None:
            return getattr(config, name)
    return DEFAULT_CLASSIFIER_DROPOUT


class TinyLMForTokenClassification(TinyLMTaskModel):
    """One score per label for every token (named entities, part-of-speech tags, ...).

    Dropout, then a linear ``score`` with a bias (``config.token_classification_bias``), as Llama's.
    ``labels`` (batch, seq) class ids, -100 where a token is not scored, add the cross-entropy.
    """

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.score = nn.Linear(
            config.hidden_size, config.num_labels, bias=getattr(config, "token_classification_bias", True)
        )
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> TokenClassifierOutput | tuple:
        """Logits (batch, seq, num_labels); ``num_items_in_batch`` (from ``Trainer``) is honoured by the loss.

        Keyword arguments go to ``TinyLMModel.forward``; no KV cache is kept unless ``use_cache=True``.
        """
        outputs = self._decode(input_ids, attention_mask, position_ids, inputs_embeds, {"use_cache": False, **kwargs})
        logits = self.score(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            num_items_in_batch = kwargs.get("num_items_in_batch")
            loss = self.loss_function(logits, labels, self.config, num_items_in_batch=num_items_in_batch)
        result = TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        return self._return(result, return_dict)


class TinyLMForQuestionAnswering(TinyLMTaskModel):
    """Extractive question answering: a start and an end logit for every token (``qa_outputs``, with a bias).

    ``start_positions`` / ``end_positions`` (batch,) token indices add the mean of the two cross-entropies
    (positions outside the sequence are ignored), as in transformers.
    """

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> QuestionAnsweringModelOutput | tuple:
        """``start_logits`` and ``end_logits`` (batch, seq).

        Keyword arguments go to ``TinyLMModel.forward``; no KV cache is kept unless ``use_cache=True``.
        """
        outputs = self._decode(input_ids, attention_mask, position_ids, inputs_embeds, {"use_cache": False, **kwargs})
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).split(1, dim=-1)
        start_logits, end_logits = start_logits.squeeze(-1).contiguous(), end_logits.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self.loss_function(start_logits, end_logits, start_positions, end_positions,
                                      num_items_in_batch=kwargs.get("num_items_in_batch"))
        result = QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return self._return(result, return_dict)
