"""train_step: the host-work hook that overlaps the device, and the compiled loss beside a compiled model."""

from __future__ import annotations

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
