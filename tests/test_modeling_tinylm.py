"""TinyLM transformers classes: parity with LlamaForCausalLM, generation, save/load, remote code, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, DynamicCache
from transformers.testing_utils import set_model_for_less_flaky_test

from tinylm_hf import BPETokenizer, TinyLMTokenizer, train_bpe
from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMModel
from tinylm_hf.compat import CACHE_NAME
from conftest import env_without_tinylm
from tiny_models import VOCAB, left_pad_mask, llama_from, make_config, make_model, random_ids

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

ENDOFTEXT = "<|endoftext|>"

@pytest.fixture(scope="module")
def model() -> TinyLMForCausalLM:
    return make_model()


# ---------------------------------------------------------------- parity with transformers Llama


@pytest.mark.parametrize("llama_attn", ["eager", "sdpa"])
@pytest.mark.parametrize("ours_attn", ["eager", "sdpa"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 17), (3, 8), (2, 64)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_logits_match_llama(model, shape, ours_attn, llama_attn) -> None:
    llama = llama_from(model, llama_attn)
    model.config._attn_implementation = ours_attn
    ids = random_ids(*shape)
    with torch.no_grad():
        ours, theirs = model(ids).logits, llama(ids).logits
    model.config._attn_implementation = "sdpa"
    assert (ours - theirs).abs().max() < 1e-5


@pytest.mark.parametrize("llama_attn", ["eager", "sdpa"])
def test_left_padded_logits_match_llama_on_real_tokens(model, llama_attn) -> None:
    ids, mask = random_ids(3, 12), left_pad_mask([12, 7, 3], 12)
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ours = model(ids, attention_mask=mask).logits
        theirs = llama_from(model, llama_attn)(ids, attention_mask=mask, position_ids=position_ids).logits
    real = mask.bool()
    assert (ours[real] - theirs[real]).abs().max() < 1e-5


def test_norm_epsilon_set_as_transformers_suites_set_it_keeps_parity_with_llama() -> None:
    model, ids = make_model(seed=2), random_ids(2, 9)
    llama = llama_from(model, "eager")
    with torch.no_grad():
        before = model(ids).logits
        for net in (model, llama):
            set_model_for_less_flaky_test(net)  # every RMSNorm's variance_epsilon = 1.0
        ours, theirs = model(ids).logits, llama(ids).logits
    assert (ours - before).abs().max() > 1e-3
    assert (ours - theirs).abs().max() < 1e-5


def test_tied_embeddings_match_llama() -> None:
    model = make_model(seed=1, tie_word_embeddings=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    ids = random_ids(2, 9)
    with torch.no_grad():
        assert (model(ids).logits - llama_from(model, "sdpa")(ids).logits).abs().max() < 1e-5


def test_loss_matches_llama(model) -> None:
    ids = random_ids(2, 16)
    labels = ids.clone()
    labels[0, :5] = -100
    with torch.no_grad():
        ours = model(ids, labels=labels).loss
        theirs = llama_from(model, "sdpa")(ids, labels=labels).loss
    torch.testing.assert_close(ours, theirs)


def test_loss_is_shifted_cross_entropy_ignoring_minus_100(model) -> None:
    ids = random_ids(2, 10)
    labels = ids.clone()
    labels[1, 3:6] = -100
    with torch.no_grad():
        out = model(ids, labels=labels)
    logits, targets = out.logits[:, :-1], labels[:, 1:]
    keep = targets != -100
    torch.testing.assert_close(out.loss, F.cross_entropy(logits[keep], targets[keep]))


# ---------------------------------------------------------------- forward options


def test_inputs_embeds_equal_input_ids(model) -> None:
    ids = random_ids(2, 6)
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
        torch.testing.assert_close(model(inputs_embeds=embeds).logits, model(ids).logits)


def test_logits_to_keep_returns_the_last_positions(model) -> None:
    ids = random_ids(2, 6)
    with torch.no_grad():
        full, last = model(ids).logits, model(ids, logits_to_keep=2).logits
    assert last.shape == (2, 2, VOCAB)
    torch.testing.assert_close(last, full[:, -2:])


def test_bare_model_returns_hidden_states_and_cache(model) -> None:
    out = model.model(random_ids(2, 5), use_cache=True)
    assert out.last_hidden_state.shape == (2, 5, 32)
    cache = getattr(out, CACHE_NAME)
    assert isinstance(cache, DynamicCache) and cache.get_seq_length() == 5


def test_step_by_step_cached_decoding_equals_full_forward(model) -> None:
    ids = random_ids(2, 10)
    with torch.no_grad():
        full = model(ids).logits
        cache = DynamicCache(config=model.config)
        out = model(ids[:, :4], cache=cache, use_cache=True)
        steps = [out.logits]
        for t in range(4, 10):
            steps.append(model(ids[:, t : t + 1], cache=getattr(out, CACHE_NAME), use_cache=True).logits)
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-5


def test_cached_chunk_with_padding_equals_full_forward(model) -> None:
    ids, mask = random_ids(2, 10), left_pad_mask([10, 6], 10)
    with torch.no_grad():
        full = model(ids, attention_mask=mask).logits
        out = model(ids[:, :7], attention_mask=mask[:, :7], use_cache=True)
        rest = model(ids[:, 7:], attention_mask=mask, cache=getattr(out, CACHE_NAME)).logits
    real = mask.bool()[:, 7:]
    assert (rest[real] - full[:, 7:][real]).abs().max() < 1e-5


# ---------------------------------------------------------------- generate


def test_greedy_generation_with_cache_equals_without(model) -> None:
    prompt = random_ids(2, 5)
    kwargs = dict(max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None)
    with_cache = model.generate(prompt, use_cache=True, **kwargs)
    without = model.generate(prompt, use_cache=False, **kwargs)
    assert with_cache.shape == (2, 17)
    assert torch.equal(with_cache, without)


def test_left_padded_batch_generates_like_each_prompt_alone(model) -> None:
    prompts = [random_ids(1, 7, seed=3)[0], random_ids(1, 3, seed=4)[0]]
    ids = torch.zeros(2, 7, dtype=torch.long)
    ids[0], ids[1, 4:] = prompts[0], prompts[1]
    mask = left_pad_mask([7, 3], 7)
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
    batch = model.generate(ids, attention_mask=mask, **kwargs)[:, 7:]
    for row, prompt in enumerate(prompts):
        alone = model.generate(prompt.unsqueeze(0), **kwargs)[0, len(prompt) :]
        assert torch.equal(batch[row], alone)


def test_sampling_with_temperature_top_p_top_k_runs(model) -> None:
    torch.manual_seed(0)
    out = model.generate(
        random_ids(3, 4), do_sample=True, temperature=0.8, top_p=0.9, top_k=20, max_new_tokens=10, pad_token_id=0
    )
    assert out.shape[0] == 3 and 4 < out.shape[1] <= 14
    assert int(out.min()) >= 0 and int(out.max()) < VOCAB


# ---------------------------------------------------------------- save / load


def test_save_writes_safetensors_and_reloads_identically(model, tmp_path: Path) -> None:
    model.save_pretrained(tmp_path)
    files = {p.name for p in tmp_path.iterdir()}
    assert "model.safetensors" in files and not any(f.endswith((".bin", ".pt", ".pkl")) for f in files)
    assert {"configuration_tinylm.py", "modeling_tinylm.py", "layers.py", "loss_tinylm.py"} <= files
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert set(auto_map) == {"AutoConfig", "AutoModel", "AutoModelForCausalLM"}
    loaded = TinyLMForCausalLM.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded.model.rotary_emb.cos_cached, model.model.rotary_emb.cos_cached)
    ids = random_ids(2, 9)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_auto_classes_load_without_trust_remote_code_when_imported(model, tmp_path: Path) -> None:
    model.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), TinyLMConfig)
    assert isinstance(AutoModel.from_pretrained(tmp_path), TinyLMModel)
    assert isinstance(AutoModelForCausalLM.from_pretrained(tmp_path), TinyLMForCausalLM)


def test_tied_model_saves_and_reloads_tied(tmp_path: Path) -> None:
    make_model(seed=2, tie_word_embeddings=True).save_pretrained(tmp_path)
    loaded = TinyLMForCausalLM.from_pretrained(tmp_path)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight


def make_tokenizer(corpus: Path, vocab_size: int, workdir: Path) -> TinyLMTokenizer:
    """Our byte-level BPE tokenizer trained on a slice of the bundled corpus."""
    sample = workdir / "sample.txt"
    sample.write_text("\n".join(corpus.read_text(encoding="utf-8").splitlines()[:1500]), encoding="utf-8")
    vocab, merges = train_bpe(sample, vocab_size, [ENDOFTEXT], num_workers=1, progress=False)
    vocab_path, merges_path = BPETokenizer(vocab, merges, [ENDOFTEXT]).save(workdir / "bpe")
    return TinyLMTokenizer(str(vocab_path), str(merges_path))


REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer, pipeline
    folder = sys.argv[1]
    try:
        import tinylm_hf
        importable = True
    except ImportError:
        importable = False
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    bare = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    saved = torch.load(folder + "/expected.pt")
    with torch.no_grad():
        logits = model(saved["ids"]).logits
        hidden = bare(saved["ids"]).last_hidden_state
    generated = model.generate(saved["ids"][:1, :4], max_new_tokens=5, do_sample=False)
    text = pipeline("text-generation", model=folder, trust_remote_code=True)(
        "Once upon a time", max_new_tokens=5, do_sample=False
    )[0]["generated_text"]
    print(json.dumps({
        "importable": importable,
        "config_class": type(config).__name__,
        "model_class": type(model).__name__,
        "model_module": type(model).__module__,
        "bare_class": type(bare).__name__,
        "logits_equal": bool(torch.equal(logits, saved["logits"])),
        "hidden_equal": bool(torch.equal(hidden, saved["hidden"])),
        "generated_shape": list(generated.shape),
        "tokenizer_len": len(tokenizer),
        "tokenizer_class": type(tokenizer).__name__,
        "tokenizer_module": type(tokenizer).__module__,
        "text": text,
    }))
    """
)


@pytest.fixture(scope="module")
def remote_result(tmp_path_factory, bundled_train_path: Path) -> dict:
    """Save model + tokenizer, then load the folder in a fresh process where tinylm_hf is not importable."""
    folder = tmp_path_factory.mktemp("remote") / "tinylm"
    tokenizer = make_tokenizer(bundled_train_path, vocab_size=300, workdir=folder.parent)
    eos = tokenizer.eos_token_id
    model = make_model(seed=5, vocab_size=len(tokenizer), pad_token_id=eos, eos_token_id=eos, bos_token_id=eos)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    ids = torch.randint(2, len(tokenizer), (2, 8), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        expected = {"ids": ids, "logits": model(ids).logits, "hidden": model.model(ids).last_hidden_state}
    torch.save(expected, folder / "expected.pt")
    script = folder.parent / "load_remote.py"
    script.write_text(REMOTE_SCRIPT)
    env = env_without_tinylm(folder.parent, TQDM_DISABLE="1")
    result = subprocess.run(
        [sys.executable, str(script), str(folder)],
        cwd=folder.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_remote_process_cannot_import_tinylm_hf(remote_result) -> None:
    assert remote_result["importable"] is False


def test_remote_code_loads_through_auto_classes(remote_result) -> None:
    assert remote_result["config_class"] == "TinyLMConfig"
    assert remote_result["model_class"] == "TinyLMForCausalLM"
    assert remote_result["model_module"].startswith("transformers_modules")
    assert remote_result["bare_class"] == "TinyLMModel"


def test_remote_code_loads_our_tokenizer(remote_result) -> None:
    assert remote_result["tokenizer_class"].startswith("TinyLMTokenizer")
    assert remote_result["tokenizer_module"].startswith("transformers_modules")
    assert remote_result["tokenizer_len"] == 300


def test_remote_code_gives_identical_outputs(remote_result) -> None:
    assert remote_result["logits_equal"] and remote_result["hidden_equal"]


def test_remote_code_generates_and_runs_the_pipeline(remote_result) -> None:
    assert remote_result["generated_shape"] == [1, 9]
    assert remote_result["text"].startswith("Once upon a time") and len(remote_result["text"]) > len("Once upon a time")


# ---------------------------------------------------------------- training features


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    ids = random_ids(2, 12)
    grads = []
    for checkpointing in (False, True):
        model = make_model(seed=7).train()
        if checkpointing:  # transformers 5.23 renamed gradient_checkpointing_enable (the old name is deprecated)
            enable = getattr(model, "activation_checkpointing_enable", None)
            if enable is not None:
                enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            assert all(layer.gradient_checkpointing for layer in model.model.layers)
        model(ids, labels=ids).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, msg=name)


def test_init_scales_residual_projections_by_depth() -> None:
    model = TinyLMForCausalLM(make_config(hidden_size=256, num_attention_heads=4, num_hidden_layers=8))
    std = model.config.initializer_range
    layer = model.model.layers[0]
    assert abs(layer.self_attn.q_proj.weight.std().item() - std) < 0.1 * std
    residual = std / (2 * 8) ** 0.5
    assert abs(layer.self_attn.o_proj.weight.std().item() - residual) < 0.1 * residual
    assert abs(layer.mlp.down_proj.weight.std().item() - residual) < 0.1 * residual
    assert torch.equal(layer.input_layernorm.weight, torch.ones(256))


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_resize_token_embeddings_after_adding_tokens(bundled_train_path: Path, tmp_path: Path, tie: bool) -> None:
    tokenizer = make_tokenizer(bundled_train_path, vocab_size=280, workdir=tmp_path)
    model = make_model(seed=8, vocab_size=len(tokenizer), tie_word_embeddings=tie)
    old_embeddings = model.get_input_embeddings().weight.detach().clone()
    tokenizer.add_special_tokens({"extra_special_tokens": ["<|user|>", "<|assistant|>"]})
    model.resize_token_embeddings(len(tokenizer))
    assert model.config.vocab_size == len(tokenizer) == old_embeddings.shape[0] + 2
    assert model.lm_head.weight.shape[0] == len(tokenizer)
    torch.testing.assert_close(model.get_input_embeddings().weight[: old_embeddings.shape[0]], old_embeddings)
    ids = torch.tensor([tokenizer.convert_tokens_to_ids(["<|user|>", "<|assistant|>"])])
    with torch.no_grad():
        assert model(ids).logits.shape == (1, 2, len(tokenizer))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad_id", [VOCAB, -1], ids=["too-large", "negative"])
def test_token_ids_outside_the_vocabulary_raise(model, bad_id: int) -> None:
    ids = random_ids(1, 4)
    ids[0, 2] = bad_id
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(ids)


def test_sequence_longer_than_max_position_embeddings_raises(model) -> None:
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(random_ids(1, 65))


def test_cache_plus_new_tokens_longer_than_max_position_embeddings_raises(model) -> None:
    with torch.no_grad():
        out = model(random_ids(1, 60), use_cache=True)
        with pytest.raises(ValueError, match="max_position_embeddings"):
            model(random_ids(1, 5), cache=getattr(out, CACHE_NAME))


def test_position_ids_beyond_max_position_embeddings_raise(model) -> None:
    with pytest.raises(ValueError, match="position_ids"):
        model(random_ids(1, 3), position_ids=torch.tensor([[0, 1, 64]]))


def test_attention_mask_of_the_wrong_shape_raises(model) -> None:
    with pytest.raises(ValueError, match="attention_mask"):
        model(random_ids(2, 5), attention_mask=torch.ones(2, 4, dtype=torch.long))


def test_both_or_neither_input_ids_and_inputs_embeds_raise(model) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        model()


@pytest.mark.parametrize(
    "override", [{"vocab_size": 120}, {"num_hidden_layers": 3}, {"num_hidden_layers": 1}, {"intermediate_size": 64}]
)
def test_config_that_disagrees_with_the_weights_raises(model, tmp_path: Path, override: dict) -> None:
    model.save_pretrained(tmp_path)
    with pytest.raises((ValueError, RuntimeError)):
        TinyLMForCausalLM.from_pretrained(tmp_path, config=make_config(**override))
