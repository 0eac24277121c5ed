"""TinyLMForMaskedLM: a causal-free run of our layers, Llama with a bidirectional mask, padding, save/load,
Auto classes installed and as remote code, and the fill-mask pipeline on a trained tiny model."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer, pipeline

from tiny_folders import BUNDLED_VALID, run_fresh, train_reference_bpe
from tiny_models import llama_from, make_config, random_ids
from tinylm_hf import MLMCollator, TinyLMConfig, TinyLMForMaskedLM, TinyLMTokenizer
from tinylm_hf.modeling.layers import apply_rotary, scaled_dot_product_attention

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)


def make_mlm(seed: int = 0, **overrides) -> TinyLMForMaskedLM:
    torch.manual_seed(seed)
    model = TinyLMForMaskedLM(make_config(**overrides)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model


def padding_mask(lengths: list[int], seq: int) -> torch.Tensor:
    return torch.stack([torch.arange(seq) < n for n in lengths]).long()


def manual_encoder_logits(model: TinyLMForMaskedLM, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The blocks composed by hand from their parts, attention over every real key (no causal mask)."""
    m = model.model
    h = m.embed_tokens(ids)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cos, sin = m.rotary_emb(positions)
    keys_ok = mask.bool()[:, None, None, :]  # (batch, 1, 1, seq)
    for layer in m.layers:
        attn = layer.self_attn
        x = layer.input_layernorm(h)
        shape = (*x.shape[:2], attn.num_heads, attn.head_dim)
        q = apply_rotary(attn.q_proj(x).view(shape), cos[:, :, None], sin[:, :, None]).transpose(1, 2)
        k = apply_rotary(attn.k_proj(x).view(shape), cos[:, :, None], sin[:, :, None]).transpose(1, 2)
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        out = scaled_dot_product_attention(q, k, v, keys_ok).transpose(1, 2).reshape(x.shape)
        h = h + attn.o_proj(out)
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return model.lm_head(m.norm(h))


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_encoder_equals_a_causal_free_run_of_the_layers(attn_implementation):
    model = make_mlm()
    model.config._attn_implementation = attn_implementation
    ids, mask = random_ids(3, 12), padding_mask([12, 9, 5], 12)
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask).logits
        manual = manual_encoder_logits(model, ids, mask)
    real = mask.bool()
    torch.testing.assert_close(ours[real], manual[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_equals_llama_with_a_bidirectional_mask(attn_implementation):
    model = make_mlm()
    llama = llama_from(model, attn_implementation)
    ids, mask = random_ids(2, 16), padding_mask([16, 11], 16)
    # transformers takes a ready 4D additive mask as is: 0 = attend, the dtype's minimum = masked
    additive = torch.zeros(2, 1, 16, 16).masked_fill(~mask.bool()[:, None, None, :], torch.finfo(torch.float32).min)
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask).logits
        ref = llama(input_ids=ids, attention_mask=additive).logits
    real = mask.bool()
    torch.testing.assert_close(ours[real], ref[real], rtol=1e-5, atol=1e-5)


def test_every_position_sees_the_whole_sequence_but_not_padding():
    model = make_mlm()
    ids = random_ids(1, 10)
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 100 + 1
    with torch.no_grad():
        assert not torch.allclose(model(input_ids=ids).logits[0, 0], model(input_ids=changed).logits[0, 0])
        padded = torch.cat([ids[:, :6], torch.zeros(1, 4, dtype=torch.long)], dim=1)
        alone = model(input_ids=ids[:, :6]).logits
        with_padding = model(input_ids=padded, attention_mask=padding_mask([6], 10)).logits[:, :6]
    torch.testing.assert_close(with_padding, alone, rtol=1e-5, atol=1e-5)


def test_labels_give_the_masked_token_loss():
    model = make_mlm()
    ids = random_ids(2, 8)
    labels = torch.full_like(ids, -100)
    labels[:, [1, 5]] = ids[:, [1, 5]]
    out = model(input_ids=ids, labels=labels)
    expected = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)
    assert out.loss.requires_grad


def test_no_kv_cache_and_no_causal_lm_on_an_encoder_config():
    model = make_mlm()
    assert model.config.use_bidirectional_attention and not model.config.use_cache
    with pytest.raises(ValueError, match="no KV cache"):
        model.model(input_ids=random_ids(1, 4), use_cache=True)
    from tinylm_hf import TinyLMForCausalLM

    with pytest.raises(ValueError, match="AutoModelForMaskedLM"):
        TinyLMForCausalLM(model.config)


def test_save_and_load_through_the_auto_class(tmp_path):
    model = make_mlm(tie_word_embeddings=True)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["use_bidirectional_attention"] is True
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_tinylm_mlm.TinyLMForMaskedLM"
    assert "AutoModelForCausalLM" not in config["auto_map"]
    assert (tmp_path / "modeling_tinylm_mlm.py").is_file()
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is TinyLMForMaskedLM
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
    ids = random_ids(2, 9)
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    with pytest.raises(ValueError, match="masked-LM encoder"):
        AutoModelForCausalLM.from_pretrained(tmp_path)


# ----------------------------------------------------------------------------- a trained tiny model


def tiny_tokenizer(folder) -> TinyLMTokenizer:
    train_reference_bpe(folder / "bpe", vocab_size=512)
    tok = TinyLMTokenizer(vocab_file=str(folder / "bpe" / "vocab.json"), merges_file=str(folder / "bpe" / "merges.txt"))
    tok.add_special_tokens({"mask_token": "<|mask|>"})
    return tok


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory) -> tuple:
    """A tiny encoder trained for 600 steps on TinyStories with dynamic masking, saved with its tokenizer."""
    from tinylm_hf.training import AdamW, train_step

    root = tmp_path_factory.mktemp("mlm")
    torch.set_num_threads(1)  # module fixtures run before the autouse one-thread fixture
    tok = tiny_tokenizer(root)
    ids = np.asarray(tok(BUNDLED_VALID.read_text(encoding="utf-8")[:300_000], add_special_tokens=False)["input_ids"])
    torch.manual_seed(0)
    model = TinyLMForMaskedLM(TinyLMConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=160,
                                           num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32,
                                           eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id))
    optimizer = AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    collator, rng = MLMCollator(tok, "dynamic", seed=0), np.random.default_rng(0)
    model.train()
    for _ in range(600):
        starts = rng.integers(0, len(ids) - 32, 32)
        masked, labels = collator.mask_tokens(np.stack([ids[s : s + 32] for s in starts]))
        train_step(model, optimizer, [(torch.from_numpy(masked), torch.from_numpy(labels))], lr=3e-3, grad_clip=1.0)
    model.eval()
    model.save_pretrained(root / "hf")
    tok.save_pretrained(root / "hf")
    return root / "hf", tok


@pytest.mark.slow  # 600 training steps: ~15 s on a free core
def test_fill_mask_pipeline_gives_sensible_top_k(trained_folder):
    folder, tok = trained_folder
    fill = pipeline("fill-mask", model=str(folder), tokenizer=str(folder), top_k=5)
    top = fill("Once upon a<|mask|>, there was a little girl.")
    assert [p["token_str"] for p in top][0] == " time"
    assert top[0]["score"] > 0.5
    assert all(p["sequence"].startswith("Once upon a") for p in top)


def test_remote_code_loads_without_tinylm(tmp_path):
    tok = tiny_tokenizer(tmp_path)
    folder = tmp_path / "hf"
    make_mlm(vocab_size=len(tok)).save_pretrained(folder)
    tok.save_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    ids = tok("One day, Tim went to the<|mask|>.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = model(input_ids=ids).logits[0, -2].topk(3).indices.tolist()
    code = textwrap.dedent(f"""
        import json, torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline
        model = AutoModelForMaskedLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        ids = tok("One day, Tim went to the<|mask|>.", return_tensors="pt")["input_ids"]
        with torch.no_grad():
            top = model(input_ids=ids).logits[0, -2].topk(3).indices.tolist()
        fill = pipeline("fill-mask", model=model, tokenizer=tok, top_k=3)
        print(json.dumps([top, [p["token"] for p in fill("One day, Tim went to the<|mask|>.")]]))
    """)
    top, piped = json.loads(run_fresh(code, folder.parent).stdout.strip().splitlines()[-1])
    assert top == expected == piped
