"""Our Muon against torch.optim.Muon, and MuonWithAdamW (Muon for block matrices, AdamW for the rest) against the
pair of torch optimizers the speedrun records use."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinylm_hf.training import AdamW, Muon, MuonWithAdamW, param_groups_for_muon
from tinylm_hf.training.muon import zeropower_via_newtonschulz

VOCAB = 17


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 3 * dim, bias=False)  # wide
        self.down = nn.Linear(3 * dim, dim, bias=False)  # tall

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(F.gelu(self.up(self.norm(h))))


class TinyNet(nn.Module):
    """An embedding, two blocks (norms, wide and tall matrices) in `layers`, a final norm and a head."""

    def __init__(self, dim: int = 12) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.layers = nn.ModuleList(Block(dim) for _ in range(2))
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))


def make_model(seed: int = 0) -> TinyNet:
    torch.manual_seed(seed)
    return TinyNet()


def block_matrices(model: TinyNet) -> list[nn.Parameter]:
    return [p for layer in model.layers for p in (layer.up.weight, layer.down.weight)]


def train_steps(model: nn.Module, optimizers: list[torch.optim.Optimizer], steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, VOCAB, (4, 9), generator=gen)
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1)).backward()
        for optimizer in optimizers:
            optimizer.step()


def assert_same_params(a: nn.Module, b: nn.Module, atol: float) -> None:
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa, pb, atol=atol, rtol=0.0, msg=f"parameter {name} differs")


def with_only_block_grads(model: TinyNet) -> TinyNet:
    for name, p in model.named_parameters():
        p.requires_grad_("layers" in name and p.dim() == 2)
    return model


MUON_KWARGS = [
    pytest.param({}, id="defaults"),
    pytest.param({"lr": 0.02, "weight_decay": 0.0}, id="lr0.02-no-decay"),
    pytest.param({"lr": 0.01, "nesterov": False, "momentum": 0.9}, id="plain-momentum"),
    pytest.param({"lr": 0.02, "adjust_lr_fn": "match_rms_adamw"}, id="match-rms-adamw"),
    pytest.param({"lr": 0.02, "ns_steps": 3, "ns_coefficients": (2.0, -1.5, 0.5), "eps": 1e-5}, id="other-ns"),
]


@pytest.mark.parametrize("kwargs", MUON_KWARGS)
def test_matches_torch_muon_over_300_steps(kwargs: dict) -> None:
    ours, theirs = with_only_block_grads(make_model()), with_only_block_grads(make_model())
    train_steps(ours, [Muon(block_matrices(ours), **kwargs)], 300, seed=1)
    train_steps(theirs, [torch.optim.Muon(block_matrices(theirs), **kwargs)], 300, seed=1)
    assert_same_params(ours, theirs, atol=1e-5)


def test_bitwise_equal_to_torch_muon() -> None:
    ours, theirs = with_only_block_grads(make_model()), with_only_block_grads(make_model())
    train_steps(ours, [Muon(block_matrices(ours), lr=0.02)], 100, seed=2)
    train_steps(theirs, [torch.optim.Muon(block_matrices(theirs), lr=0.02)], 100, seed=2)
    assert_same_params(ours, theirs, atol=0.0)


def test_newton_schulz_orthogonalises() -> None:
    """Five quintic steps leave every singular value of a random matrix in about (0.5, 1.5), for wide and tall."""
    gen = torch.Generator().manual_seed(3)
    for shape in ((16, 48), (48, 16)):
        out = zeropower_via_newtonschulz(torch.randn(shape, generator=gen), (3.4445, -4.7750, 2.0315), 5, 1e-7)
        assert out.dtype == torch.bfloat16 and out.shape == shape
        singular = torch.linalg.svdvals(out.float())
        assert 0.5 < singular.min() and singular.max() < 1.5, singular


def test_muon_refuses_non_matrices() -> None:
    with pytest.raises(ValueError, match="2-D"):
        Muon([nn.Parameter(torch.zeros(4))])


def test_muon_state_dict_has_torch_layout_and_loads_into_torch() -> None:
    ours, theirs = with_only_block_grads(make_model()), with_only_block_grads(make_model())
    ours_opt = Muon(block_matrices(ours), lr=0.02)
    train_steps(ours, [ours_opt], 5, seed=4)
    assert set(ours_opt.state_dict()["state"][0]) == {"momentum_buffer"}
    theirs.load_state_dict(ours.state_dict())
    theirs_opt = torch.optim.Muon(block_matrices(theirs), lr=0.02)
    theirs_opt.load_state_dict(copy.deepcopy(ours_opt.state_dict()))  # torch keeps the tensors it is given
    train_steps(ours, [ours_opt], 50, seed=5)
    train_steps(theirs, [theirs_opt], 50, seed=5)
    assert_same_params(ours, theirs, atol=0.0)


def test_groups_put_block_matrices_on_muon_and_the_rest_on_adamw() -> None:
    model = make_model()
    hidden, other, flat = param_groups_for_muon(model, weight_decay=0.1)
    assert hidden["use_muon"] and not other["use_muon"] and not flat["use_muon"]
    assert {id(p) for p in hidden["params"]} == {id(p) for p in block_matrices(model)}
    assert {id(p) for p in other["params"]} == {id(model.embed_tokens.weight), id(model.lm_head.weight)}
    assert all(p.dim() == 1 for p in flat["params"]) and flat["weight_decay"] == 0.0


def test_muon_with_adamw_equals_torch_muon_beside_torch_adamw() -> None:
    """One MuonWithAdamW object = torch.optim.Muon on the block matrices + torch.optim.AdamW on the rest."""
    ours, theirs = make_model(), make_model()
    ours_opt = MuonWithAdamW(param_groups_for_muon(ours, 0.1), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1,
                             muon_lr=0.02)
    hidden, *rest = param_groups_for_muon(theirs, 0.1)
    reference = [torch.optim.Muon(hidden["params"], lr=0.02, weight_decay=0.1),
                 torch.optim.AdamW([{"params": g["params"], "weight_decay": g["weight_decay"]} for g in rest],
                                   lr=3e-3, betas=(0.9, 0.95), foreach=True)]
    train_steps(ours, [ours_opt], 300, seed=6)
    train_steps(theirs, reference, 300, seed=6)
    assert_same_params(ours, theirs, atol=1e-5)


def test_muon_with_adamw_adamw_part_is_our_adamw() -> None:
    ours, theirs = make_model(), make_model()
    for model in (ours, theirs):
        for layer in model.layers:
            layer.requires_grad_(False)
    groups = [g for g in param_groups_for_muon(ours, 0.1)]
    train_steps(ours, [MuonWithAdamW(groups, lr=1e-2, weight_decay=0.1)], 100, seed=7)
    theirs_groups = [{k: v for k, v in g.items() if k != "use_muon"} for g in param_groups_for_muon(theirs, 0.1)]
    train_steps(theirs, [AdamW(theirs_groups, lr=1e-2, weight_decay=0.1)], 100, seed=7)
    assert_same_params(ours, theirs, atol=0.0)


@pytest.mark.parametrize("fresh", [False, True], ids=["same-optimizer", "fresh-optimizer"])
def test_muon_with_adamw_state_dict_round_trip_continues_identically(fresh: bool) -> None:
    def make(model: nn.Module) -> MuonWithAdamW:
        return MuonWithAdamW(param_groups_for_muon(model, 0.1), lr=3e-3, muon_lr=0.02)

    straight = make_model()
    straight_opt = make(straight)
    train_steps(straight, [straight_opt], 100, seed=8)
    saved_model, saved_opt = copy.deepcopy(straight.state_dict()), copy.deepcopy(straight_opt.state_dict())
    train_steps(straight, [straight_opt], 100, seed=9)

    resumed = make_model(seed=99)
    resumed.load_state_dict(saved_model)
    resumed_opt = make(resumed)
    if not fresh:
        train_steps(resumed, [resumed_opt], 2, seed=10)  # state to be overwritten
        resumed.load_state_dict(saved_model)
    resumed_opt.load_state_dict(saved_opt)
    train_steps(resumed, [resumed_opt], 100, seed=9)
    assert_same_params(straight, resumed, atol=0.0)


def test_muon_with_adamw_needs_marked_groups() -> None:
    with pytest.raises(ValueError, match="use_muon"):
        MuonWithAdamW([{"params": list(make_model().parameters())}])


def test_muon_with_adamw_refuses_a_vector_in_a_muon_group() -> None:
    with pytest.raises(ValueError, match="2-D"):
        MuonWithAdamW([{"params": [nn.Parameter(torch.zeros(3))], "use_muon": True}])


def test_muon_takes_torch_muons_keyword_arguments_and_defaults() -> None:
    import inspect

    ours, theirs = inspect.signature(Muon).parameters, inspect.signature(torch.optim.Muon).parameters
    assert list(ours) == list(theirs)
    assert all(ours[name].default == theirs[name].default for name in ours)
