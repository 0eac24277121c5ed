"""Preference tuning (DPO, Rafailov et al. 2023): a chat model learns to prefer the chosen completion of each pair.

The loss is DPO's sigmoid loss, `-log sigmoid(beta * ((log pi(c) - log ref(c)) - (log pi(r) - log ref(r))))`,
where `log pi(c)` sums the policy's log-probabilities of the chosen completion's tokens (every token after the
tokenized prompt, as TRL's `DPOTrainer` counts it: `corpus.preferences`) and `ref` is the frozen `init_from`
model. The reference's log-probabilities are computed once per run, before the first step (in float32, without
autocast), and kept with the pairs: they never change, so a resumed run recomputes the same values. Metrics are
TRL's: the loss, the rewards `beta * (log pi - log ref)` of chosen and rejected completions, the reward margin
(their difference) and the reward accuracy (the share of pairs whose chosen reward is the higher).

A micro-batch is `(input_ids, labels, attention_mask, ref_logps)`: the chosen rows first, then the rejected
rows of the same pairs (TRL's order), right-padded; labels are the input ids on completion tokens and -100
elsewhere. Pairs are drawn uniformly by the run's sampler, so a resumed run sees exactly the pairs of one
uninterrupted run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from ...corpus.preferences import PreferencePair, load_preferences, tokenize_preference
from ...corpus.token_files import token_digest, tokenizer_fingerprint
from ...modeling.loss_tinylm import IGNORE_INDEX
from ..config import TrainConfig
from ..data import RunData
from ..run.summary import DataProvenance
from .base import Objective
from .sections import PreferenceFields, PreferenceSection
from ..validation import sample_completion
from .sft import sample_chat_reply
from .sft_data import padding_id, split_validation

if TYPE_CHECKING:
    from ..run.summary import RunSummary

DEFAULT_BETA = PreferenceFields.dpo_beta
REWARD_LINES = (("val_reward_accuracy", "reward accuracy"), ("val_reward_margin", "reward margin"),
                ("val_rewards_chosen", "reward of the chosen completions"),
                ("val_rewards_rejected", "reward of the rejected completions"))  # the card's lines, in order
STEP_REWARDS = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins")  # TRL's log names
REFERENCE_BATCH_PAIRS = 8  # pairs per forward pass of the reference model


@dataclass
class TokenizedPairs:
    """Tokenized pairs and the reference model's log-probabilities of their completions (filled before step 1)."""

    pairs: list[PreferencePair]
    dropped: int = 0
    """Pairs left out because their prompt alone fills the context."""
    ref_chosen: torch.Tensor | None = None
    """float32, (n,): the reference's summed log-probability of each chosen completion."""
    ref_rejected: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def digest(self) -> str:
        """`token_digest` of the pairs' ids (each pair's three lengths, then its ids): what a resumed run knows its
        pairs by, whatever the file is called."""
        parts = [np.asarray([len(p.prompt), len(p.chosen), len(p.rejected), *p.prompt, *p.chosen, *p.rejected],
                            dtype=np.int64) for p in self.pairs]
        return token_digest(np.concatenate(parts))


@dataclass
class PreferenceData(RunData):
    """A preference run's data: the tokenizer of the `init_from` chat model and the tokenized pairs."""

    train_pairs: TokenizedPairs
    val_pairs: TokenizedPairs
    tokenizer: Any

    @property
    def pad_id(self) -> int:
        """The id padding rows hold (never a target, never attended to by a real token)."""
        return padding_id(self.tokenizer)


def tokenize_pairs(tokenizer: Any, rows: Sequence[dict[str, Any]], context_length: int) -> TokenizedPairs:
    """Tokenize `rows` as TRL does with `max_length=context_length`: long pairs keep their start, pairs whose
    prompt fills the context are left out."""
    pairs = [tokenize_preference(tokenizer, row, context_length) for row in rows]
    kept = [pair for pair in pairs if pair is not None]
    if not kept:
        raise ValueError(f"no preference pair's prompt fits context_length {context_length}: raise --context-length "
                         "(up to the model's max_position_embeddings) or shorten the prompts")
    return TokenizedPairs(kept, dropped=len(pairs) - len(kept))


def open_preference_data(config: TrainConfig) -> PreferenceData:
    """Load the `init_from` model's tokenizer and the pairs of a dpo run, tokenized, before any model is built."""
    from ...tokenizer_loading import load_tokenizer

    folder = config.tokenizer_dir or config.init_from
    tokenizer = load_tokenizer(folder)
    train = load_preferences(config.preferences)
    val = load_preferences(config.val_preferences) if config.val_preferences else None
    if val is None:
        train, val = split_validation(train)
    if any(not isinstance(row["prompt"], str) for row in train + val) and not tokenizer.chat_template:
        raise ValueError(f"the tokenizer in {folder} has no chat template for the conversational pairs: start from a "
                         "chat model (`tinylm sft` or `tinylm quickstart --chat`)")
    train_pairs = tokenize_pairs(tokenizer, train, config.context_length)
    val_pairs = tokenize_pairs(tokenizer, val, config.context_length)
    provenance = DataProvenance(
        input_files=[os.path.basename(config.preferences)],
        val_files=[os.path.basename(config.val_preferences)] if config.val_preferences else [],
        train_tokens=sum(pair_tokens(p) for p in train_pairs.pairs), val_tokens=sum(pair_tokens(p) for p in val_pairs.pairs),
        documents=len(train_pairs), tokenizer_dir=str(folder), tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        token_digest=f"{train_pairs.digest()}+{val_pairs.digest()}",
    )
    return PreferenceData(provenance=provenance, vocab_size=len(tokenizer), eos_id=tokenizer.eos_token_id,
                          train_pairs=train_pairs, val_pairs=val_pairs, tokenizer=tokenizer)


def pair_tokens(pair: PreferencePair) -> int:
    """Tokens of a pair's two sequences."""
    return 2 * len(pair.prompt) + len(pair.chosen) + len(pair.rejected)


def pair_rows(data: TokenizedPairs, indices: Sequence[int], pad_id: int,
              device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """(input_ids, labels, attention_mask, ref_logps) of the pairs `indices`: chosen rows, then rejected rows."""
    pairs = [data.pairs[i] for i in indices]
    sequences = [(p.prompt, p.chosen) for p in pairs] + [(p.prompt, p.rejected) for p in pairs]
    width = max(len(prompt) + len(completion) for prompt, completion in sequences)
    x = np.full((len(sequences), width), pad_id, dtype=np.int64)
    y = np.full((len(sequences), width), IGNORE_INDEX, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, (prompt, completion) in enumerate(sequences):
        n, m = len(prompt), len(prompt) + len(completion)
        x[row, :m] = prompt + completion
        y[row, n:m] = completion
        mask[row, :m] = 1
    index = torch.as_tensor(list(indices), dtype=torch.long)
    ref = torch.zeros(len(sequences)) if data.ref_chosen is None else \
        torch.cat([data.ref_chosen[index], data.ref_rejected[index]])
    return tuple(t.to(device) for t in (torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(mask), ref))


def iter_pair_batches(data: TokenizedPairs, batch_size: int, pad_id: int) -> Iterator[tuple[torch.Tensor, ...]]:
    """Every pair once, in order, `batch_size` pairs at a time (CPU tensors)."""
    for first in range(0, len(data), batch_size):
        yield pair_rows(data, range(first, min(first + batch_size, len(data))), pad_id, "cpu")


def sequence_logps(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(rows,) the summed log-probability of each row's labelled tokens (labels unshifted: -100 is not scored)."""
    targets = labels[:, 1:]  # (rows, T-1): the token each position predicts
    token_logps = -F.cross_entropy(logits[:, :-1].float().transpose(1, 2), targets, ignore_index=IGNORE_INDEX,
                                   reduction="none")
    return token_logps.sum(dim=1)


def dpo_loss(chosen_logps: torch.Tensor, rejected_logps: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(per-pair sigmoid loss, chosen rewards, rejected rewards), TRL's definitions (rewards detached)."""
    chosen_ratio, rejected_ratio = chosen_logps - ref_chosen, rejected_logps - ref_rejected
    losses = -F.logsigmoid(beta * (chosen_ratio - rejected_ratio))
    return losses, beta * chosen_ratio.detach(), beta * rejected_ratio.detach()


def batch_terms(model: torch.nn.Module, batch: Sequence[torch.Tensor], beta: float,
                autocast: contextlib.AbstractContextManager | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`dpo_loss` of one micro-batch `(input_ids, labels, attention_mask, ref_logps)`."""
    input_ids, labels, attention_mask, ref = batch
    with autocast or contextlib.nullcontext():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    chosen, rejected = sequence_logps(logits, labels).chunk(2)
    ref_chosen, ref_rejected = ref.chunk(2)
    return dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta)


class PairLoss:
    """DPO's loss as the step asks for it (`base.StepLoss`): summed over a micro-batch's pairs. It keeps the pairs'
    rewards until `take_rewards` asks for the step's."""

    def __init__(self, beta: float) -> None:
        self.beta = beta
        self.rewards: list[tuple[torch.Tensor, torch.Tensor]] = []  # (chosen, rejected) of each micro-batch, detached

    def count(self, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.tensor(batch[0].shape[0] // 2)

    def __call__(self, model: torch.nn.Module, batch: Sequence[torch.Tensor],
                 autocast: contextlib.AbstractContextManager) -> torch.Tensor:
        losses, chosen, rejected = batch_terms(model, batch, self.beta, autocast)
        self.rewards.append((chosen, rejected))
        return losses.sum()

    def take_rewards(self, all_reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
        """TRL's per-step reward metrics over the pairs of the micro-batches since the last call (then forgotten),
        each a mean over pairs, averaged over DDP ranks by `all_reduce`: `rewards/chosen` and `rewards/rejected`
        (beta * (policy log-prob - reference log-prob)), `rewards/accuracies` (the share with chosen > rejected) and
        `rewards/margins` (chosen - rejected)."""
        if not self.rewards:
            return {}
        chosen = torch.cat([c for c, _ in self.rewards]).float()
        rejected = torch.cat([r for _, r in self.rewards]).float()
        self.rewards = []
        means = torch.stack([chosen.mean(), rejected.mean(), (chosen > rejected).float().mean(),
                             (chosen - rejected).mean()])
        if all_reduce is not None:
            means = all_reduce(means)
        return dict(zip(STEP_REWARDS, means.tolist()))


@torch.no_grad()
def evaluate_pairs(model: torch.nn.Module, batches: Iterator[Sequence[torch.Tensor]], beta: float,
                   device: torch.device, autocast: contextlib.AbstractContextManager | None = None) -> dict[str, float]:
    """`val_loss` and TRL's reward metrics over every pair of `batches`, each a mean over pairs."""
    was_training = model.training
    model.eval()
    losses, chosen, rejected = [], [], []
    try:
        for batch in batches:
            loss, chosen_rewards, rejected_rewards = batch_terms(model, [t.to(device) for t in batch], beta, autocast)
            losses.append(loss.float().cpu())
            chosen.append(chosen_rewards.float().cpu())
            rejected.append(rejected_rewards.float().cpu())
    finally:
        model.train(was_training)
    loss_t, chosen_t, rejected_t = torch.cat(losses), torch.cat(chosen), torch.cat(rejected)
    return {"val_loss": float(loss_t.mean()), "val_reward_accuracy": float((chosen_t > rejected_t).float().mean()),
            "val_reward_margin": float((chosen_t - rejected_t).mean()), "val_rewards_chosen": float(chosen_t.mean()),
            "val_rewards_rejected": float(rejected_t.mean())}


@torch.no_grad()
def reference_logps(model: torch.nn.Module, data: TokenizedPairs, pad_id: int, device: torch.device, *,
                    progress: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The frozen reference's (chosen, rejected) summed completion log-probabilities of every pair (float32, CPU);
    `progress` (a tqdm bar) counts the pairs done."""
    model.eval()
    chosen, rejected = [], []
    for input_ids, labels, attention_mask, _ in iter_pair_batches(data, REFERENCE_BATCH_PAIRS, pad_id):
        logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
        c, r = sequence_logps(logits, labels.to(device)).float().cpu().chunk(2)
        chosen.append(c)
        rejected.append(r)
        if progress is not None:
            progress.update(len(c))
    return torch.cat(chosen), torch.cat(rejected)


class DirectPreferenceOptimization(Objective):
    """Preference tuning of a chat model (TinyLMForCausalLM from `init_from`) on TRL-format preference pairs."""

    section = PreferenceSection
    published_as = "chat model"
    data: PreferenceData

    @classmethod
    def open_data(cls, config: TrainConfig) -> PreferenceData:
        """The tokenizer and the tokenized pairs (`TrainConfig` checked the section when it was made)."""
        return open_preference_data(config)

    @classmethod
    def open(cls, config: TrainConfig, data: RunData, *, main: bool) -> DirectPreferenceOptimization:
        if not isinstance(data, PreferenceData):
            raise TypeError("objective dpo trains on preference pairs: load them with "
                            "DirectPreferenceOptimization.open_data")
        if main:
            train, val = data.train_pairs, data.val_pairs
            print(f"dpo: {len(train)} training and {len(val)} validation pairs, beta {config.dpo_beta}; "
                  f"{train.dropped + val.dropped} whose prompt fills the context left out")
        objective = cls(config, data)
        objective.main = main
        return objective

    @staticmethod
    def model_class() -> type:
        from ...modeling import TinyLMForCausalLM

        return TinyLMForCausalLM

    pair_loss: PairLoss | None = None

    def step_loss(self) -> PairLoss:
        if self.pair_loss is None:
            self.pair_loss = PairLoss(self.config.dpo_beta)
        return self.pair_loss

    def step_metrics(self, all_reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
        """TRL's reward metrics of the step just done (`PairLoss.take_rewards`)."""
        return self.step_loss().take_rewards(all_reduce)

    main = True  # the process that shows progress

    def prepare_reference(self, device: torch.device) -> None:
        """Compute the reference's log-probabilities of every pair once, with the frozen `init_from` model (a
        resumed run has them from its checkpoint: `restore_state`), showing the pairs done."""
        from tqdm.auto import tqdm

        if self.data.train_pairs.ref_chosen is not None:
            return
        reference = self.model_class().from_pretrained(self.config.init_from).to(device)
        total = len(self.data.train_pairs) + len(self.data.val_pairs)
        with tqdm(total=total, desc="reference log-probabilities", unit="pair", file=sys.stderr,
                  disable=not (self.main and self.config.progress)) as progress:
            for pairs in (self.data.train_pairs, self.data.val_pairs):
                pairs.ref_chosen, pairs.ref_rejected = reference_logps(reference, pairs, self.data.pad_id, device,
                                                                       progress=progress)
        del reference

    def checkpoint_state(self) -> dict[str, Any]:
        """The reference's log-probabilities of every pair: a resumed run scores against the reference the run
        started with, even when the `init_from` folder was trained again meanwhile."""
        train, val = self.data.train_pairs, self.data.val_pairs
        if train.ref_chosen is None:
            return {}
        return {"ref_train_chosen": train.ref_chosen, "ref_train_rejected": train.ref_rejected,
                "ref_val_chosen": val.ref_chosen, "ref_val_rejected": val.ref_rejected}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Take the reference log-probabilities a checkpoint saved (`checkpoint_state`); a checkpoint from before
        they were saved has none, and they are computed from `init_from` again."""
        if not state:
            return
        train, val = self.data.train_pairs, self.data.val_pairs
        train.ref_chosen, train.ref_rejected = state["ref_train_chosen"], state["ref_train_rejected"]
        val.ref_chosen, val.ref_rejected = state["ref_val_chosen"], state["ref_val_rejected"]

    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        self.prepare_reference(device)
        indices = torch.randint(0, len(self.data.train_pairs), (size,), generator=sampler)
        return pair_rows(self.data.train_pairs, indices[rows].tolist(), self.data.pad_id, device)

    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        """DPO loss and reward metrics on every validation pair (and a sampled reply to `sample_prompt`)."""
        self.prepare_reference(device)
        batches = iter_pair_batches(self.data.val_pairs, max(batch_size, 1), self.data.pad_id)
        result: dict[str, Any] = evaluate_pairs(model, batches, self.config.dpo_beta, device, autocast)
        return {**result, **self.sample(model)}

    def sample(self, model: torch.nn.Module) -> dict[str, Any]:
        """An evaluation's sample: a chat model's reply to `sample_prompt` sent as the user's message; a model whose
        tokenizer has no chat template (plain-string pairs over a base model) continues `sample_prompt` (default: the
        first validation pair's prompt) as plain text."""
        tokenizer, config = self.data.tokenizer, self.config
        if tokenizer.chat_template:
            return sample_chat_reply(model, tokenizer, config)
        if not config.sample_tokens:
            return {}
        prompt = config.sample_prompt or tokenizer.decode(self.data.val_pairs.pairs[0].prompt)
        return {"sample_prompt": prompt, "sample": sample_completion(model, tokenizer, prompt, config.sample_tokens)}

    @classmethod
    def describe_objective(cls, summary: RunSummary) -> str:
        return ("direct preference optimization: the chosen completion of each pair made more likely than the "
                "rejected one, relative to the starting model")

    @classmethod
    def describe_training(cls, summary: RunSummary, lines: list[str], *, base: str | None, optimizer: str,
                          run_lines: list[str]) -> str:
        """What the chat model was preference-tuned from and on."""
        beta = summary.train_config.get("dpo_beta", DEFAULT_BETA)
        head = (f"Preference-tuned{f' from `{base}`' if base else ''} "
                f"with `tinylm dpo` (DPO's sigmoid loss, beta {beta}, against the frozen starting model; {optimizer}, "
                f"cosine schedule with warm-up) on {summary.data.documents:,} preference pairs of {summary.data.name}.")
        rewards = [f"- validation {words}: {summary.val_metrics[name]:.4g}" for name, words in REWARD_LINES
                   if name in summary.val_metrics]
        return head + "\n\n" + "\n".join([*lines, *rewards])

    @classmethod
    def card_results(cls, summary: RunSummary) -> dict[str, Any] | None:
        """The reward accuracy of the last evaluation: the share of validation pairs whose chosen completion the
        tuned model rewards above the rejected one (a DPO loss is no language-modelling metric)."""
        accuracy = summary.val_metrics.get("val_reward_accuracy")
        return {} if accuracy is None else {"reward_accuracy": accuracy, "dataset": summary.data.validation_name}
