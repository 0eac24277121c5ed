"""Our AdamW against torch.optim.AdamW, and the weight-decay parameter groups."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinylm_hf.training import AdamW, param_groups_for_weight_decay
from tinylm_hf.training.optimizer import CPU_BLOCK_NUMEL



class TinyNet(nn.Module):
    """Embedding, norm, biased and unbiased linears, and a tied head: every kind of parameter."""

    def __init__(self, vocab: int = 17, dim: int = 12) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.embed(ids))
        h = h + self.down(F.gelu(self.up(h)))
        return self.head(h)


def make_model(seed: int = 0) -> TinyNet:
    torch.manual_seed(seed)
    return TinyNet()


def groups(model: nn.Module) -> list[dict]:
    """Two groups with their own lr and weight decay, to exercise per-group hyper-parameters."""
    decay, no_decay = param_groups_for_weight_decay(model, weight_decay=0.1)
    return [{**decay, "lr": 3e-3}, {**no_decay, "lr": 1e-3, "betas": (0.8, 0.99)}]


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, 17, (4, 9), generator=gen)
        optimizer.zero_grad(set_to_none=True)
        logits = model(ids[:, :-1])
        F.cross_entropy(logits.reshape(-1, 17), ids[:, 1:].reshape(-1)).backward()
        optimizer.step()


def assert_same_params(a: nn.Module, b: nn.Module, atol: float = 0.0) -> None:
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa, pb, atol=atol, rtol=0.0, msg=f"parameter {name} differs")


@pytest.mark.parametrize(
    "reference_kwargs",
    [pytest.param({}, id="default"), pytest.param({"foreach": False}, id="for-loop")],
)
def test_matches_torch_adamw_over_1000_steps(reference_kwargs: dict) -> None:
    ours, theirs = make_model(), make_model()
    train_steps(ours, AdamW(groups(ours)), 1000, seed=1)
    train_steps(theirs, torch.optim.AdamW(groups(theirs), **reference_kwargs), 1000, seed=1)
    assert_same_params(ours, theirs, atol=1e-6)


def test_bitwise_equal_to_torch_foreach_path() -> None:
    ours, theirs = make_model(), make_model()
    train_steps(ours, AdamW(groups(ours)), 200, seed=2)
    train_steps(theirs, torch.optim.AdamW(groups(theirs), foreach=True), 200, seed=2)
    assert_same_params(ours, theirs, atol=0.0)


def test_weight_decay_zero_matches_torch() -> None:
    ours, theirs = make_model(), make_model()
    train_steps(ours, AdamW(ours.parameters(), lr=1e-2, weight_decay=0.0), 100, seed=3)
    reference = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.0)
    train_steps(theirs, reference, 100, seed=3)
    assert_same_params(ours, theirs, atol=1e-6)


def test_mixed_dtypes_are_updated_like_torch() -> None:
    ours, theirs = make_model(), make_model()
    ours.up.double(), theirs.up.double()
    for model in (ours, theirs):
        model.up.register_forward_hook(lambda m, i, out: out.float())
        model.up.register_forward_pre_hook(lambda m, args: tuple(a.double() for a in args))
    train_steps(ours, AdamW(ours.parameters()), 50, seed=4)
    train_steps(theirs, torch.optim.AdamW(theirs.parameters(), foreach=True), 50, seed=4)
    assert ours.up.weight.dtype == torch.float64
    assert_same_params(ours, theirs, atol=0.0)


def test_parameters_without_grad_are_left_alone() -> None:
    model = make_model()
    frozen = nn.Parameter(torch.randn(3, 3))
    optimizer = AdamW([*model.parameters(), frozen], weight_decay=0.5)
    before = frozen.detach().clone()
    train_steps(model, optimizer, 3, seed=5)
    assert torch.equal(frozen, before)
    assert frozen not in optimizer.state


def test_state_dict_has_torch_layout() -> None:
    model = make_model()
    optimizer = AdamW(model.parameters())
    train_steps(model, optimizer, 3, seed=6)
    state = optimizer.state_dict()["state"][0]
    assert set(state) == {"step", "exp_avg", "exp_avg_sq"}
    assert state["step"].item() == 3.0


@pytest.mark.parametrize("fresh", [False, True], ids=["same-optimizer", "fresh-optimizer"])
def test_state_dict_round_trip_continues_identically(fresh: bool) -> None:
    straight = make_model()
    straight_opt = AdamW(groups(straight))
    train_steps(straight, straight_opt, 500, seed=7)
    saved_model = copy.deepcopy(straight.state_dict())
    saved_opt = copy.deepcopy(straight_opt.state_dict())
    train_steps(straight, straight_opt, 500, seed=8)

    resumed = make_model(seed=99)
    resumed.load_state_dict(saved_model)
    resumed_opt = AdamW(groups(resumed))
    if not fresh:
        train_steps(resumed, resumed_opt, 2, seed=9)  # state to be overwritten
        resumed.load_state_dict(saved_model)
    resumed_opt.load_state_dict(saved_opt)
    train_steps(resumed, resumed_opt, 500, seed=8)
    assert_same_params(straight, resumed, atol=0.0)


def test_loads_torch_adamw_state_and_continues_like_it() -> None:
    ours, theirs = make_model(), make_model()
    theirs_opt = torch.optim.AdamW(groups(theirs), foreach=True)
    train_steps(theirs, theirs_opt, 20, seed=10)
    ours.load_state_dict(theirs.state_dict())
    ours_opt = AdamW(groups(ours))
    ours_opt.load_state_dict(copy.deepcopy(theirs_opt.state_dict()))  # load shares tensors
    train_steps(theirs, theirs_opt, 20, seed=11)
    train_steps(ours, ours_opt, 20, seed=11)
    assert_same_params(ours, theirs, atol=0.0)


def test_torch_adamw_loads_our_state_and_continues_like_us() -> None:
    ours, theirs = make_model(), make_model()
    ours_opt = AdamW(groups(ours))
    train_steps(ours, ours_opt, 20, seed=13)
    theirs.load_state_dict(ours.state_dict())
    theirs_opt = torch.optim.AdamW(groups(theirs), foreach=True)
    theirs_opt.load_state_dict(copy.deepcopy(ours_opt.state_dict()))
    train_steps(theirs, theirs_opt, 20, seed=14)
    train_steps(ours, ours_opt, 20, seed=14)
    assert_same_params(ours, theirs, atol=0.0)


def test_step_returns_closure_loss() -> None:
    model = make_model()
    optimizer = AdamW(model.parameters())
    ids = torch.randint(0, 17, (2, 5))

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(ids).reshape(-1, 17), ids.reshape(-1))
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    assert loss is not None and loss.item() > 0
    assert len(optimizer.state) > 0


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"lr": -1e-3}, id="negative-lr"),
        pytest.param({"betas": (1.0, 0.999)}, id="beta1-one"),
        pytest.param({"betas": (0.9, -0.1)}, id="beta2-negative"),
        pytest.param({"betas": (0.9,)}, id="betas-not-a-pair"),
        pytest.param({"eps": -1e-8}, id="negative-eps"),
        pytest.param({"weight_decay": -0.1}, id="negative-weight-decay"),
        pytest.param({"amsgrad": True}, id="amsgrad"),
        pytest.param({"maximize": True}, id="maximize"),
    ],
)
def test_rejects_bad_hyperparameters(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        AdamW(make_model().parameters(), **kwargs)


def test_rejects_bad_hyperparameters_in_a_group() -> None:
    model = make_model()
    with pytest.raises(ValueError, match="learning rate"):
        AdamW([{"params": model.up.parameters(), "lr": -1.0}])


def test_rejects_tensor_lr() -> None:
    with pytest.raises(TypeError, match="lr"):
        AdamW(make_model().parameters(), lr=torch.tensor(1e-3))


def test_rejects_sparse_gradients() -> None:
    embed = nn.Embedding(10, 4, sparse=True)
    embed(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        AdamW(embed.parameters()).step()


def test_weight_decay_groups_split_matrices_from_norms_and_biases() -> None:
    model = make_model()
    decay, no_decay = param_groups_for_weight_decay(model, weight_decay=0.1)
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert ids(decay["params"]) == ids([model.embed.weight, model.up.weight, model.down.weight])
    assert ids(no_decay["params"]) == ids([model.norm.weight, model.norm.bias, model.up.bias])
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.1, 0.0)


def test_weight_decay_groups_skip_frozen_and_empty() -> None:
    model = nn.Linear(4, 4, bias=False)
    frozen = nn.Linear(4, 4)
    frozen.requires_grad_(False)
    groups_ = param_groups_for_weight_decay(nn.Sequential(model, frozen), weight_decay=0.2)
    assert len(groups_) == 1
    assert groups_[0]["params"] == [model.weight]


def test_large_and_non_contiguous_tensors_match_torch_bitwise() -> None:
    """Tensors bigger than one CPU block are cut into views; a transposed one is kept whole."""
    gen = torch.Generator().manual_seed(12)
    shapes = [(700, 400), (3,), (300, 300), (5, 7)]
    ours = [nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    ours.append(nn.Parameter(torch.randn(600, 500, generator=gen).t()))
    assert ours[0].numel() > CPU_BLOCK_NUMEL and ours[-1].numel() > CPU_BLOCK_NUMEL
    theirs = [nn.Parameter(p.detach().clone()) for p in ours]
    ours_opt = AdamW(ours, lr=1e-2, weight_decay=0.1)
    theirs_opt = torch.optim.AdamW(theirs, lr=1e-2, weight_decay=0.1, foreach=True)
    for _ in range(5):
        for a, b in zip(ours, theirs):
            grad = torch.randn(a.shape, generator=gen)
            a.grad, b.grad = grad.clone(), grad.clone()
        ours_opt.step()
        theirs_opt.step()
    assert not ours[-1].is_contiguous()
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
