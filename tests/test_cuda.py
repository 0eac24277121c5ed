"""The GPU path: parity with Llama, our loss, bf16 + torch.compile training and exact resume on CUDA.

Skipped where torch sees no CUDA GPU (CI); run on a GPU machine with `python -m pytest tests/test_cuda.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tinylm_hf.modeling.loss_tinylm import cross_entropy
from tinylm_hf.training import train
from tiny_models import llama_from, make_model, random_ids
from tiny_runs import byte_data, losses, tiny_config  # noqa: F401  (byte_data is a fixture)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def exact_float32_matmuls():
    """TF32 matmuls (what training turns on) round to 10 mantissa bits: parity checks need full fp32."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_match_llama_on_cuda(attn):
    model = make_model().cuda()
    llama = llama_from(model.cpu(), attn).cuda()
    model.cuda().config._attn_implementation = attn
    ids = random_ids(3, 40).cuda()
    with torch.no_grad():
        assert (model(ids).logits - llama(ids).logits).abs().max() < 1e-5


def test_cross_entropy_matches_torch_on_cuda_in_bfloat16():
    gen = torch.Generator(device="cuda").manual_seed(0)
    logits = (torch.randn(300, 5003, device="cuda", generator=gen) * 4).bfloat16().requires_grad_()
    targets = torch.randint(0, 5003, (300,), device="cuda", generator=gen)
    targets[::7] = -100
    ours = cross_entropy(logits, targets)
    (ours_grad,) = torch.autograd.grad(ours, logits)
    theirs = F.cross_entropy(logits.float(), targets)
    (theirs_grad,) = torch.autograd.grad(theirs, logits)
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours_grad, theirs_grad)


def test_greedy_generation_matches_llama_on_cuda():
    model = make_model().cuda()
    llama = llama_from(model.cpu(), "sdpa").cuda()
    model.cuda()
    prompt = random_ids(2, 5).cuda()
    kwargs = dict(max_new_tokens=20, do_sample=False, pad_token_id=0, eos_token_id=model.config.eos_token_id,
                  attention_mask=torch.ones_like(prompt))
    assert torch.equal(model.generate(prompt, **kwargs), llama.generate(prompt, **kwargs))


def test_bfloat16_compiled_run_learns_on_cuda(byte_data, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    summary = train(tiny_config(byte_data, out, device="cuda", dtype="bfloat16", compile=True, max_iters=40,
                                eval_every=20, checkpoint_every=20, max_lr=1e-2))
    curve = losses(out)
    assert all(np.isfinite(list(curve.values())))
    assert np.mean([curve[i] for i in range(31, 41)]) < np.mean([curve[i] for i in range(1, 11)]) - 0.5
    state = torch.load(out / "checkpoints" / "ckpt_00000040.pt", weights_only=True, map_location="cpu")
    assert all(t.dtype == torch.float32 for t in state["model"].values())  # fp32 master weights under autocast
    assert summary.val_loss is not None and np.isfinite(summary.val_loss)


def test_resume_on_cuda_continues_the_same_run(byte_data, tmp_path):  # noqa: F811
    torch.backends.cudnn.deterministic = True
    train(tiny_config(byte_data, tmp_path / "full", device="cuda", cosine_cycle_iters=12))
    train(tiny_config(byte_data, tmp_path / "split", device="cuda", cosine_cycle_iters=12, max_iters=8))
    train(tiny_config(byte_data, tmp_path / "split", device="cuda", cosine_cycle_iters=12, resume=True))
    full, split = losses(tmp_path / "full"), losses(tmp_path / "split")
    assert full.keys() == split.keys()
    np.testing.assert_allclose(list(split.values()), list(full.values()), rtol=1e-6)
