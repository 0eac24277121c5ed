"""train_step: the host-work hook that overlaps the device, the compiled loss beside a compiled model, and one step
path: every objective's loss is a step loss, equal bit for bit to the step written out by hand."""

from __future__ import annotations

import pytest
import torch

from tinylm_hf.training import AdamW, compiled_cross_entropy, cross_entropy, train_step
from tiny_models import make_model, random_ids


def test_overlap_runs_once_before_the_weights_change():
    model = make_model().train()
    optimizer = AdamW(model.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    seen = []

    def overlap() -> None:
        seen.append(all(torch.equal(p, b) for p, b in zip(model.parameters(), before)))

    ids = random_ids(2, 9)
    train_step(model, optimizer, [(ids[:, :-1], ids[:, 1:])], lr=1e-2, grad_clip=1.0, overlap=overlap)
    assert seen == [True]
    assert not all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


def test_compiled_cross_entropy_equals_ours_in_value_and_gradient():
    logits = torch.randn(48, 517, generator=torch.Generator().manual_seed(0), requires_grad=True)
    targets = torch.randint(0, 517, (48,), generator=torch.Generator().manual_seed(1))
    targets[::5] = -100
    compiled = compiled_cross_entropy()(logits, targets, reduction="sum")
    eager = cross_entropy(logits, targets, reduction="sum")
    (compiled_grad,) = torch.autograd.grad(compiled, logits)
    (eager_grad,) = torch.autograd.grad(eager, logits)
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(compiled_grad, eager_grad)


def test_a_padded_micro_batch_passes_its_attention_mask_to_the_model():
    """An encoder mean-pools over the mask: the step's loss is the masked forward's, not the unmasked one's."""
    from tinylm_hf.modeling import TinyLMForSequenceClassification
    from tiny_models import make_config

    torch.manual_seed(0)
    model = TinyLMForSequenceClassification(make_config(num_labels=3, use_bidirectional_attention=True)).train()
    ids, labels = random_ids(2, 6), torch.tensor([0, 2])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    with torch.no_grad():
        masked = cross_entropy(model(input_ids=ids, attention_mask=mask).logits, labels)
        unmasked = cross_entropy(model(input_ids=ids).logits, labels)
    result = train_step(model, AdamW(model.parameters(), lr=1e-3), [(ids, labels, mask)], lr=1e-3)
    assert abs(float(masked) - float(unmasked)) > 1e-4
    assert result.loss == float(masked)


def labelled_batches(kind: str) -> tuple[torch.nn.Module, list[tuple[torch.Tensor, ...]]]:
    """A model and two micro-batches of unequal target counts, shaped as objective `kind` draws them."""
    from tinylm_hf.modeling import TinyLMForMaskedLM, TinyLMForSequenceClassification
    from tiny_models import make_config

    ids = random_ids(4, 9)
    if kind == "clm":
        return make_model().train(), [(ids[:2, :-1], ids[:2, 1:]), (ids[2:, :-1], ids[2:, 1:])]
    if kind == "sft":  # the prompt's tokens are not targets; the second batch's reply is shorter
        labels = ids[:, 1:].clone()
        labels[:2, :5], labels[2:, :7] = -100, -100
        return make_model().train(), [(ids[:2, :-1], labels[:2]), (ids[2:, :-1], labels[2:])]
    if kind == "mlm":  # masked positions only; the second batch masks none of its tokens
        torch.manual_seed(0)
        labels = torch.full_like(ids, -100)
        labels[:2, ::3] = ids[:2, ::3]
        return TinyLMForMaskedLM(make_config(use_bidirectional_attention=True)).train(), [(ids[:2], labels[:2]),
                                                                                          (ids[2:], labels[2:])]
    torch.manual_seed(0)  # "classification": padded rows with their attention mask
    model = TinyLMForSequenceClassification(make_config(num_labels=3, use_bidirectional_attention=True)).train()
    mask = torch.tensor([[1] * 9, [1] * 4 + [0] * 5, [1] * 7 + [0] * 2, [1] * 9])
    labels = torch.tensor([0, 2, 1, 1])
    return model, [(ids[:1], labels[:1], mask[:1]), (ids[1:], labels[1:], mask[1:])]


def cross_entropy_step_by_hand(model: torch.nn.Module, micro_batches) -> tuple[float, list[torch.Tensor]]:
    """The step's loss and gradients for a labelled objective, written out: each micro-batch's cross-entropy summed
    over its targets (labels of -100 left out), divided by the targets of the whole step, then backward."""
    n_targets = sum((batch[1] != -100).sum() for batch in micro_batches).clamp(min=1)
    loss_sum = None
    for batch in micro_batches:
        kwargs = {"attention_mask": batch[2]} if len(batch) == 3 else {}
        logits = model(input_ids=batch[0], **kwargs).logits
        loss = cross_entropy(logits, batch[1], reduction="sum") / n_targets
        loss.backward()
        loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return float(loss_sum), grads


def step_with_grads(model: torch.nn.Module, micro_batches, **kwargs) -> tuple[float, list[torch.Tensor]]:
    """`train_step`'s loss and the gradients it steps with (read before the optimizer, unclipped)."""
    grads: list[torch.Tensor] = []
    optimizer = AdamW(model.parameters(), lr=1e-3)
    result = train_step(model, optimizer, micro_batches, lr=1e-3, **kwargs,
                        overlap=lambda: grads.extend(p.grad.clone() for p in model.parameters()))
    return result.loss, grads


@pytest.mark.parametrize("kind", ["clm", "sft", "mlm", "classification"])
def test_the_cross_entropy_step_loss_is_the_step_by_hand_bit_for_bit(kind):
    """clm, sft, mlm and classification go through `LabelCrossEntropy` (the default step loss, and each objective's
    `step_loss()`): the same loss and gradients, bit for bit, as the summed cross-entropy over the step's targets."""
    from tinylm_hf.training.step import LabelCrossEntropy

    model, batches = labelled_batches(kind)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    expected_loss, expected_grads = cross_entropy_step_by_hand(model, batches)
    for step_loss in (None, LabelCrossEntropy()):
        model.load_state_dict(state)
        loss, grads = step_with_grads(model, batches, step_loss=step_loss)
        assert loss == expected_loss
        assert all(torch.equal(a, b) for a, b in zip(grads, expected_grads, strict=True))


def test_dpo_s_step_loss_is_the_mean_pair_loss_by_hand_bit_for_bit():
    """DPO's `PairLoss` through the step: the summed sigmoid loss of each micro-batch over the step's pairs."""
    from tinylm_hf.training.objectives.dpo import PairLoss, batch_terms

    model = make_model().train()
    ids = random_ids(6, 9)
    labels = ids.clone()
    labels[:, :4] = -100
    ref = torch.randn(6, generator=torch.Generator().manual_seed(2))
    # pairs are (chosen rows, rejected rows) of each micro-batch: 2 pairs, then 1
    batches = [(ids[:4], labels[:4], torch.ones_like(ids[:4]), ref[:4]), (ids[4:], labels[4:], torch.ones_like(ids[4:]), ref[4:])]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    loss_sum = None
    for batch in batches:
        loss = batch_terms(model, batch, 0.1, None)[0].sum() / torch.tensor(3)
        loss.backward()
        loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model.load_state_dict(state)
    loss, grads = step_with_grads(model, batches, step_loss=PairLoss(0.1))
    assert loss == float(loss_sum)
    assert all(torch.equal(a, b) for a, b in zip(grads, expected, strict=True))


def test_every_objective_but_dpo_scores_its_labels_with_the_base_step_loss():
    from tinylm_hf.training.objectives import OBJECTIVE_CLASSES
    from tinylm_hf.training.objectives.base import Objective

    own = {name for name, cls in OBJECTIVE_CLASSES.items() if cls.step_loss is not Objective.step_loss}
    assert own == {"dpo"}


@pytest.mark.parametrize("compile_", [False, True])
def test_the_base_step_loss_is_the_label_cross_entropy_compiled_beside_a_compiled_model(compile_):
    """The step has one path: the base objective's loss is a `LabelCrossEntropy` (made once), our cross-entropy or,
    when the run compiles its model, its compiled twin."""
    from types import SimpleNamespace

    from tinylm_hf.training.objectives.base import Objective
    from tinylm_hf.training.step import LabelCrossEntropy

    objective = SimpleNamespace(config=SimpleNamespace(compile=compile_), label_loss=None)
    step_loss = Objective.step_loss(objective)
    assert isinstance(step_loss, LabelCrossEntropy) and Objective.step_loss(objective) is step_loss
    assert (step_loss.loss_fn is None) is not compile_  # None: our cross_entropy
