"""`tinylm export-gguf`: a llama GGUF file, read back with gguf's own reader and checked against the HF weights."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import torch
from conftest import run_cli_error
from tiny_folders import make_tiny_folder, sentencepiece_folder

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

gguf = pytest.importorskip("gguf")

from tinylm_hf.cli import main  # noqa: E402
from tinylm_hf.publish import export_gguf, export_llama  # noqa: E402
from tinylm_hf.publish.export_gguf import check_byte_level_bpe, permute_for_gguf  # noqa: E402
from tinylm_hf.tokenization.bpe.gpt2_files import read_merges_txt  # noqa: E402

ROPE_THETA = 500000.0
RMS_EPS = 1e-6


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{"untied"|"tied": TinyLM folder} with a non-default rope_theta and rms_norm_eps."""
    root = tmp_path_factory.mktemp("gguf-src")
    return {
        name: make_tiny_folder(root / name, seed=int(tied), tie_word_embeddings=tied,
                               rope_theta=ROPE_THETA, rms_norm_eps=RMS_EPS)
        for name, tied in (("untied", False), ("tied", True))
    }


@pytest.fixture(scope="module")
def exported(folders, tmp_path_factory):
    """{(variant, dtype): GGUFReader} for every dtype, written through the command line."""
    root = tmp_path_factory.mktemp("gguf-out")
    readers = {}
    for variant, src in folders.items():
        for dtype in ("f32", "f16", "bf16", "q8_0"):
            out = root / f"{variant}-{dtype}.gguf"
            assert main(["export-gguf", str(src), str(out), "--dtype", dtype]) == 0
            readers[variant, dtype] = gguf.GGUFReader(out)
    return readers


def field(reader, key):
    return reader.fields[key].contents()


def hf_state(src):
    from safetensors.torch import load_file

    return load_file(src / "model.safetensors")


def test_hyperparameters_are_llama_keys(folders, exported):
    config = json.loads((folders["untied"] / "config.json").read_text())
    reader = exported["untied", "f16"]
    assert field(reader, "general.architecture") == "llama"
    assert field(reader, "general.file_type") == gguf.LlamaFileType.MOSTLY_F16
    expected = {
        "llama.vocab_size": config["vocab_size"],
        "llama.context_length": config["max_position_embeddings"],
        "llama.embedding_length": config["hidden_size"],
        "llama.block_count": config["num_hidden_layers"],
        "llama.feed_forward_length": config["intermediate_size"],
        "llama.attention.head_count": config["num_attention_heads"],
        "llama.attention.head_count_kv": config["num_attention_heads"],
        "llama.rope.dimension_count": config["hidden_size"] // config["num_attention_heads"],
    }
    assert {key: field(reader, key) for key in expected} == expected
    assert field(reader, "llama.rope.freq_base") == ROPE_THETA
    assert math.isclose(field(reader, "llama.attention.layer_norm_rms_epsilon"), RMS_EPS, rel_tol=1e-6)


def test_tokenizer_is_embedded_with_the_gpt2_pre_tokenizer(folders, exported):
    from transformers import AutoTokenizer

    src = folders["untied"]
    tokenizer = AutoTokenizer.from_pretrained(src)
    reader = exported["untied", "f32"]
    assert field(reader, "tokenizer.ggml.model") == "gpt2"
    assert field(reader, "tokenizer.ggml.pre") == "gpt-2"
    assert field(reader, "tokenizer.ggml.tokens") == tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    assert field(reader, "tokenizer.ggml.merges") == [f"{a} {b}" for a, b in read_merges_txt(src / "merges.txt")]
    eos = tokenizer.eos_token_id
    types = field(reader, "tokenizer.ggml.token_type")
    assert types[eos] == gguf.TokenType.CONTROL
    assert set(types[:eos] + types[eos + 1:]) == {gguf.TokenType.NORMAL}
    for key in ("bos_token_id", "eos_token_id", "padding_token_id"):
        assert field(reader, f"tokenizer.ggml.{key}") == eos
    assert field(reader, "tokenizer.ggml.add_bos_token") is False


def test_embedding_rows_past_the_tokenizer_are_unused_tokens(tmp_path):
    from transformers import AutoTokenizer

    src = tmp_path / "padded"
    size = len(AutoTokenizer.from_pretrained(make_tiny_folder(tmp_path / "probe")))
    make_tiny_folder(src, vocab_size=size + 3)
    reader = gguf.GGUFReader(export_gguf(src, tmp_path / "padded.gguf"))
    assert field(reader, "tokenizer.ggml.tokens")[size:] == [f"[PAD{i}]" for i in range(size, size + 3)]
    assert field(reader, "tokenizer.ggml.token_type")[size:] == [gguf.TokenType.UNUSED] * 3


def expected_gguf_weights(src) -> dict[str, torch.Tensor]:
    """GGUF name -> the HF weight it must hold (q/k rows permuted), built by hand from the safetensors."""
    config = json.loads((src / "config.json").read_text())
    heads = config["num_attention_heads"]
    state = hf_state(src)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    if not config["tie_word_embeddings"]:
        names["lm_head.weight"] = "output.weight"
    per_layer = {
        "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    }
    for i in range(config["num_hidden_layers"]):
        for hf, ours in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{ours}.weight"
    expected = {}
    for hf, name in names.items():
        weight = state[hf].float()
        if ".q_proj." in hf or ".k_proj." in hf:
            weight = permute_for_gguf(weight, heads)
        expected[name] = weight
    return expected


STORED = {
    "f32": lambda w: w,
    "f16": lambda w: w.half().float(),
    "bf16": lambda w: w.bfloat16().float(),
}


@pytest.mark.parametrize("variant", ["untied", "tied"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "q8_0"])
def test_every_tensor_equals_the_hf_weight(folders, exported, variant, dtype):
    expected = expected_gguf_weights(folders[variant])
    reader = exported[variant, dtype]
    assert sorted(t.name for t in reader.tensors) == sorted(expected)
    for tensor in reader.tensors:
        want = expected[tensor.name]
        got = torch.from_numpy(np.array(gguf.quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float32))
        assert tuple(got.shape) == tuple(want.shape), tensor.name
        if want.dim() == 1:  # norms stay f32 whatever the dtype
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F32
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        elif dtype == "q8_0":
            assert tensor.tensor_type == gguf.GGMLQuantizationType.Q8_0
            # each block of 32 values is int8 times an f16 step (block max / 127): error <= half a step plus
            # the step's own f16 rounding (relative 2**-11) times up to 127
            step = want.reshape(-1, 32).abs().amax(dim=1, keepdim=True) / 127
            bound = step * (0.5 + 127 * 2**-11) + 1e-7
            assert ((got.reshape(-1, 32) - want.reshape(-1, 32)).abs() <= bound).all(), tensor.name
        else:
            assert tensor.tensor_type.name == dtype.upper()
            torch.testing.assert_close(got, STORED[dtype](want), rtol=0, atol=0)


def rope_hf(x: torch.Tensor, pos: int, theta: float) -> torch.Tensor:
    """HF Llama rotary embedding on one head vector: dims i and i + d/2 rotate together."""
    half = x.shape[-1] // 2
    angles = pos * theta ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    a, b = x[:half], x[half:]
    return torch.cat([a * angles.cos() - b * angles.sin(), b * angles.cos() + a * angles.sin()])


def rope_ggml(x: torch.Tensor, pos: int, theta: float) -> torch.Tensor:
    """llama.cpp's rotary embedding for llama (GGML_ROPE_TYPE_NORM): dims 2i and 2i+1 rotate together."""
    half = x.shape[-1] // 2
    angles = pos * theta ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    a, b = x[0::2], x[1::2]
    out = torch.empty_like(x)
    out[0::2], out[1::2] = a * angles.cos() - b * angles.sin(), b * angles.cos() + a * angles.sin()
    return out


def test_permuted_q_k_give_llama_cpp_the_same_attention_scores():
    torch.manual_seed(0)
    heads, head_dim, hidden = 4, 8, 32
    wq, wk = (torch.randn(heads * head_dim, hidden, dtype=torch.float64) for _ in range(2))
    x_q, x_k = torch.randn(hidden, dtype=torch.float64), torch.randn(hidden, dtype=torch.float64)
    pq, pk = permute_for_gguf(wq, heads), permute_for_gguf(wk, heads)
    for h in range(heads):
        rows = slice(h * head_dim, (h + 1) * head_dim)
        hf = rope_hf(wq[rows] @ x_q, 7, ROPE_THETA) @ rope_hf(wk[rows] @ x_k, 3, ROPE_THETA)
        ggml = rope_ggml(pq[rows] @ x_q, 7, ROPE_THETA) @ rope_ggml(pk[rows] @ x_k, 3, ROPE_THETA)
        assert torch.isclose(hf, ggml, rtol=1e-12, atol=1e-12)
        unpermuted = rope_ggml(wq[rows] @ x_q, 7, ROPE_THETA) @ rope_ggml(wk[rows] @ x_k, 3, ROPE_THETA)
        assert not torch.isclose(hf, unpermuted, rtol=1e-6, atol=1e-6)  # the permutation is needed


def test_unknown_dtype_is_refused_before_writing(folders, tmp_path):
    out = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match="unknown dtype 'q4_k'.*f32, f16, bf16, q8_0"):
        export_gguf(folders["untied"], out, dtype="q4_k")
    assert list(tmp_path.iterdir()) == []


def test_unknown_dtype_on_the_command_line_exits_2(folders, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["export-gguf", str(folders["untied"]), str(tmp_path / "m.gguf"), "--dtype", "q4"])
    assert exit_info.value.code == 2 and "invalid choice: 'q4'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_kept_unless_overwrite(folders, tmp_path):
    out = tmp_path / "m.gguf"
    out.write_bytes(b"keep me")
    with pytest.raises(FileExistsError, match="already exists.*overwrite"):
        export_gguf(folders["untied"], out)
    assert out.read_bytes() == b"keep me"
    export_gguf(folders["untied"], out, overwrite=True)
    assert gguf.GGUFReader(out).fields["general.architecture"].contents() == "llama"
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"] and oct(out.stat().st_mode & 0o777) == "0o644"


def test_output_that_is_a_folder_is_refused(folders, tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder"):
        export_gguf(folders["untied"], tmp_path)


def test_failure_while_writing_leaves_no_file(folders, tmp_path, monkeypatch):
    out = tmp_path / "m.gguf"
    out.write_bytes(b"old")

    def fail(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", fail)
    with pytest.raises(OSError, match="disk full"):
        export_gguf(folders["untied"], out, overwrite=True)
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["m.gguf"]


def corrupt(src, tmp_path, name, content: bytes | None):
    """A copy of `src` with file `name` replaced by `content` (None: removed)."""
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    if content is None:
        (bad / name).unlink()
    else:
        (bad / name).write_bytes(content)
    return bad


@pytest.mark.parametrize("name,content,error,match", [
    pytest.param("config.json", None, FileNotFoundError, "config.json", id="missing-config"),
    pytest.param("config.json", b"{\"vocab_size\": ", ValueError, "config.json .* not valid JSON", id="corrupt-config"),
    pytest.param("model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{}", ValueError, "truncated",
                 id="truncated-weights"),
    pytest.param("tokenizer.json", b"{\"model\": ", ValueError, "tokenizer.json .* not valid JSON",
                 id="corrupt-tokenizer-json"),
    pytest.param("tokenizer_config.json", b"[", ValueError, "tokenizer_config.json .* not valid JSON",
                 id="corrupt-tokenizer-config"),
    pytest.param("merges.txt", None, FileNotFoundError, "merges.txt", id="missing-merges"),
])
def test_bad_folder_is_a_clear_error_before_writing(folders, tmp_path, name, content, error, match):
    src = corrupt(folders["untied"], tmp_path, name, content)
    if name == "merges.txt":
        (src / "tokenizer.json").unlink()
    out = tmp_path / "out" / "m.gguf"
    with pytest.raises(error, match=match):
        export_gguf(src, out)
    assert not out.parent.exists()


def test_tokenizer_with_another_pattern_is_refused(folders, tmp_path):
    from tinylm_hf import TinyLMTokenizer

    src = corrupt(folders["untied"], tmp_path, "tokenizer.json", None)
    TinyLMTokenizer(str(src / "vocab.json"), str(src / "merges.txt"), pattern="gpt4").save_pretrained(src)
    with pytest.raises(ValueError, match="pattern 'gpt4'.*only GPT-2's pattern"):
        export_gguf(src, tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()


GPT2_BACKEND = {
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "continuing_subword_prefix": None},
}


@pytest.mark.parametrize("change,problem", [
    pytest.param({"normalizer": {"type": "NFC"}}, "a normalizer", id="normalizer"),
    pytest.param({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}}, "pre-tokenizer",
                 id="prefix-space"),
    pytest.param({"pre_tokenizer": {"type": "Metaspace"}}, "pre-tokenizer", id="metaspace"),
    pytest.param({"model": {"type": "WordPiece"}}, "model WordPiece", id="wordpiece"),
])
def test_tokenizers_llama_cpp_would_misread_are_refused(change, problem):
    check_byte_level_bpe(GPT2_BACKEND)
    with pytest.raises(ValueError, match=f"needs a GPT-2-style byte-level BPE tokenizer; this one has {problem}"):
        check_byte_level_bpe({**GPT2_BACKEND, **change})



def test_sentencepiece_bpe_is_embedded_as_a_llama_vocabulary(tmp_path):
    """Pieces, scores and types as sentencepiece itself reads the folder's tokenizer.model (llama.cpp's converter's source)."""
    spm = pytest.importorskip("sentencepiece")
    src = sentencepiece_folder(tmp_path / "spbpe", "sentencepiece-bpe")
    assert main(["export-gguf", str(src), str(tmp_path / "m.gguf")]) == 0
    reader = gguf.GGUFReader(tmp_path / "m.gguf")
    sp = spm.SentencePieceProcessor(model_file=str(src / "tokenizer.model"))
    n = sp.vocab_size()

    def kind(i):
        return (gguf.TokenType.UNKNOWN if sp.IsUnknown(i) else gguf.TokenType.CONTROL if sp.IsControl(i)
                else gguf.TokenType.BYTE if sp.IsByte(i) else gguf.TokenType.NORMAL)

    rows = n + 8
    assert field(reader, "tokenizer.ggml.model") == "llama"
    assert field(reader, "tokenizer.ggml.tokens") == [sp.IdToPiece(i) for i in range(n)] + [f"[PAD{i}]" for i in range(n, rows)]
    assert np.allclose(field(reader, "tokenizer.ggml.scores"), [sp.GetScore(i) for i in range(n)] + [-10000.0] * 8)
    assert field(reader, "tokenizer.ggml.token_type") == [kind(i) for i in range(n)] + [gguf.TokenType.UNUSED] * 8
    assert gguf.TokenType.BYTE in field(reader, "tokenizer.ggml.token_type")  # byte fallback pieces
    assert field(reader, "tokenizer.ggml.add_space_prefix") is True
    assert (field(reader, "tokenizer.ggml.bos_token_id"), field(reader, "tokenizer.ggml.eos_token_id"),
            field(reader, "tokenizer.ggml.unknown_token_id")) == (sp.bos_id(), sp.eos_id(), sp.unk_id())
    assert "tokenizer.ggml.merges" not in reader.fields


def test_unigram_is_embedded_as_llama_cpp_unigram_vocabulary(tmp_path):
    """A Unigram model becomes llama.cpp's `t5` (Viterbi) tokenizer, its log-probabilities as scores."""
    spm = pytest.importorskip("sentencepiece")
    src = sentencepiece_folder(tmp_path / "unigram", "unigram", extra_rows=0)
    assert main(["export-gguf", str(src), str(tmp_path / "m.gguf")]) == 0
    reader = gguf.GGUFReader(tmp_path / "m.gguf")
    sp = spm.SentencePieceProcessor(model_file=str(src / "tokenizer.model"))
    assert field(reader, "tokenizer.ggml.model") == "t5"
    assert field(reader, "tokenizer.ggml.tokens") == [sp.IdToPiece(i) for i in range(sp.vocab_size())]
    assert np.allclose(field(reader, "tokenizer.ggml.scores"), [sp.GetScore(i) for i in range(sp.vocab_size())])
    assert field(reader, "tokenizer.ggml.remove_extra_whitespaces") is False


@pytest.mark.parametrize("change,problem", [
    pytest.param({"model_type": "unigram", "byte_fallback": True}, "byte fallback in a Unigram model", id="unigram-bytes"),
    pytest.param({"model_type": "word"}, "model type 'word'", id="word"),
    pytest.param({"normalizer_name": "nmt_nfkc", "has_charsmap": True}, "normalisation 'nmt_nfkc'", id="nfkc"),
    pytest.param({"remove_extra_whitespaces": True}, "remove_extra_whitespaces", id="extra-spaces"),
])
def test_sentencepiece_models_llama_cpp_would_misread_are_refused(change, problem):
    """llama.cpp normalises nothing and its Unigram tokenizer maps unknown characters to <unk>, never to bytes."""
    from tinylm_hf.publish.export_gguf import check_llama_cpp_sentencepiece
    from tinylm_hf.tokenization.metaspace.sentencepiece_model import SentencePieceModel

    plain = dict(pieces=[("<unk>", 0.0, 2), ("▁a", -1.0, 1)], model_type="bpe", normalizer_name="identity",
                 remove_extra_whitespaces=False)
    check_llama_cpp_sentencepiece(SentencePieceModel(**plain))
    with pytest.raises(ValueError, match=f"segments alike; this one has {problem}"):
        check_llama_cpp_sentencepiece(SentencePieceModel(**{**plain, **change}))


# Runs llama.cpp's own converter on an exported Llama folder, answering its pre-tokenizer hash check with
# "gpt-2" (it refuses any newly trained vocabulary otherwise): argv = folder, out file, outtype.
PATCHED_CONVERTER = """
import sys
try:
    import conversion.base as where  # llama.cpp after the converter was split into a package
except ImportError:
    import convert_hf_to_gguf as where
where.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
import convert_hf_to_gguf
sys.argv = ["convert_hf_to_gguf.py", sys.argv[1], "--outfile", sys.argv[2], "--outtype", sys.argv[3]]
convert_hf_to_gguf.main()
"""
# keys that legitimately differ: the name (ours: the folder's) and a size label
KEYS_ALLOWED_TO_DIFFER = {"general.name", "general.size_label"}


@pytest.fixture(scope="module")
def llama_cpp_converter(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """(python, env) that run llama.cpp's convert_hf_to_gguf.py, from the llama-cpp-python source package."""
    root = tmp_path_factory.mktemp("llama-cpp")
    download = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "llama-cpp-python",
         "-d", str(root)], capture_output=True, text=True, timeout=900)
    if download.returncode != 0:
        pytest.skip(f"pip could not download llama-cpp-python's source: {download.stderr[-500:]}")
    wanted = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
    with tarfile.open(next(root.glob("llama_cpp_python-*.tar.gz"))) as tar:
        members = [m for m in tar.getmembers()
                   if "/vendor/llama.cpp/" in m.name and m.name.split("/vendor/llama.cpp/", 1)[1].startswith(wanted)]
        tar.extractall(root, members=members, filter="data")
    llama_cpp = next(root.glob("llama_cpp_python-*/vendor/llama.cpp"))
    env = {**os.environ, "PYTHONPATH": f"{llama_cpp}{os.pathsep}{llama_cpp / 'gguf-py'}"}
    return sys.executable, env


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["untied", "tied"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "q8_0"])
def test_file_equals_llama_cpp_converter_output(folders, llama_cpp_converter, tmp_path, variant, dtype):
    python, env = llama_cpp_converter
    llama = export_llama(folders[variant], tmp_path / "llama")
    theirs_path = tmp_path / "theirs.gguf"
    convert = subprocess.run([python, "-c", PATCHED_CONVERTER, str(llama), str(theirs_path), dtype],
                             env=env, capture_output=True, text=True, timeout=900)
    assert convert.returncode == 0, convert.stderr[-4000:]
    ours = gguf.GGUFReader(export_gguf(folders[variant], tmp_path / "ours.gguf", dtype=dtype))
    theirs = gguf.GGUFReader(theirs_path)
    keys = {k for k in set(ours.fields) | set(theirs.fields) if not k.startswith("GGUF.")} - KEYS_ALLOWED_TO_DIFFER
    assert keys <= set(ours.fields) and keys <= set(theirs.fields)
    for key in sorted(keys):
        assert ours.fields[key].contents() == theirs.fields[key].contents(), key
    mine, other = {t.name: t for t in ours.tensors}, {t.name: t for t in theirs.tensors}
    assert sorted(mine) == sorted(other)
    for name, tensor in mine.items():
        assert tensor.tensor_type == other[name].tensor_type, name
        assert np.array_equal(np.asarray(tensor.data), np.asarray(other[name].data)), name


@pytest.mark.slow
def test_sentencepiece_bpe_tokenizer_equals_llama_cpp_converter_output(llama_cpp_converter, tmp_path):
    """llama.cpp's converter reads an exported Llama folder's tokenizer.model with sentencepiece: same vocabulary."""
    pytest.importorskip("sentencepiece")
    python, env = llama_cpp_converter
    src = sentencepiece_folder(tmp_path / "spbpe", "sentencepiece-bpe")
    llama = export_llama(src, tmp_path / "llama")
    convert = subprocess.run([python, "-c", PATCHED_CONVERTER, str(llama), str(tmp_path / "theirs.gguf"), "f32"],
                             env=env, capture_output=True, text=True, timeout=900)
    assert convert.returncode == 0, convert.stderr[-4000:]
    ours = gguf.GGUFReader(export_gguf(src, tmp_path / "ours.gguf", dtype="f32"))
    theirs = gguf.GGUFReader(tmp_path / "theirs.gguf")
    keys = {k for k in theirs.fields if k.startswith("tokenizer.")}
    assert {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"} <= keys
    for key in sorted(keys):
        assert ours.fields[key].contents() == theirs.fields[key].contents(), key


# ----------------------------------------------------------------------------- chat models

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story about a cat."},
        {"role": "assistant", "content": "Once upon a time, a cat sat."}, {"role": "user", "content": "More!"}]


@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory):
    """(chat model folder, its f32 GGUF export)."""
    from tiny_chats import make_chat_folder

    root = tmp_path_factory.mktemp("gguf-chat")
    src = make_chat_folder(root / "chat", max_position_embeddings=64)
    return src, export_gguf(src, root / "chat.gguf", dtype="f32")


@pytest.fixture(scope="module")
def llama_cpp():
    """llama.cpp's own C API through the cyllama wheel (not a dependency: skipped without it)."""
    module = pytest.importorskip("cyllama.llama.llama_cpp")
    module.disable_logging()
    module.ggml_backend_load_all()
    return module


def test_chat_template_and_end_of_turn_are_llama_cpp_keys(chat_gguf):
    from transformers import AutoTokenizer

    from tinylm_hf.tokenization.chat_template import CHAT_TOKENS, portable_chat_template

    src, out = chat_gguf
    tokenizer = AutoTokenizer.from_pretrained(src)
    reader = gguf.GGUFReader(out)
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    assert field(reader, "tokenizer.chat_template") == portable_chat_template()
    assert field(reader, gguf.Keys.Tokenizer.EOT_ID) == field(reader, gguf.Keys.Tokenizer.EOS_ID) == end
    types = field(reader, "tokenizer.ggml.token_type")
    assert {types[tokenizer.convert_tokens_to_ids(t)] for t in CHAT_TOKENS} == {gguf.TokenType.CONTROL}


def test_a_template_saved_with_a_final_newline_still_exports_the_end_of_turn(chat_gguf, tmp_path):
    """An editor's final newline renders the same chats: the file is still a chat model's, eos and eot <|end|>."""
    import shutil

    from transformers import AutoTokenizer

    src = shutil.copytree(chat_gguf[0], tmp_path / "edited")
    template = src / "chat_template.jinja"
    template.write_text(template.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    reader = gguf.GGUFReader(export_gguf(src, tmp_path / "chat.gguf", dtype="f32"))
    end = AutoTokenizer.from_pretrained(src).convert_tokens_to_ids("<|end|>")
    assert field(reader, gguf.Keys.Tokenizer.EOT_ID) == field(reader, gguf.Keys.Tokenizer.EOS_ID) == end


def test_a_sentencepiece_model_without_the_chat_tokens_is_refused(tmp_path):
    pytest.importorskip("sentencepiece")
    from transformers import AutoTokenizer

    from tinylm_hf.tokenization.chat_template import add_chat_tokens

    src = sentencepiece_folder(tmp_path / "spbpe", "sentencepiece-bpe")  # 8 spare embedding rows
    tokenizer = AutoTokenizer.from_pretrained(src)
    add_chat_tokens(tokenizer)
    tokenizer.save_pretrained(src)
    with pytest.raises(ValueError, match="the chat tokens are not in the exported vocabulary.*--chat"):
        export_gguf(src, tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()


def test_llama_cpp_formats_the_chat_as_apply_chat_template(chat_gguf, llama_cpp):
    from transformers import AutoTokenizer

    src, out = chat_gguf
    tokenizer = AutoTokenizer.from_pretrained(src)
    model = llama_cpp.LlamaModel(str(out), llama_cpp.LlamaModelParams())
    messages = [llama_cpp.LlamaChatMessage(role=m["role"], content=m["content"]) for m in CHAT]
    text = model.chat_apply_template(model.get_default_chat_template(), messages, True)  # llama.cpp's phi3
    assert text == tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = model.get_vocab().tokenize(text, True, True)  # as llama.cpp reads a prompt: bos if the file asks, specials
    assert ids == tokenizer.apply_chat_template(CHAT, add_generation_prompt=True)["input_ids"]


def test_llama_cpp_ends_generation_at_the_end_of_turn(chat_gguf, llama_cpp):
    from transformers import AutoTokenizer

    src, out = chat_gguf
    tokenizer = AutoTokenizer.from_pretrained(src)
    vocab = llama_cpp.LlamaModel(str(out), llama_cpp.LlamaModelParams()).get_vocab()
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    assert vocab.token_eot() == vocab.token_eos() == end
    assert vocab.is_eog(end) and vocab.is_eog(tokenizer.eos_token_id)


def test_a_terminated_export_leaves_no_temp_file(folders, tmp_path, monkeypatch, capsys):
    """SIGTERM mid-write (a kill, a scheduler's limit) removes the temp file; the old output stays as it was."""
    import signal

    out = tmp_path / "model.gguf"
    out.write_bytes(b"the previous export")

    def killed_mid_write(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", killed_mid_write)
    assert main(["export-gguf", str(folders["untied"]), str(out), "--overwrite"]) == 143
    assert "terminated" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"] and out.read_bytes() == b"the previous export"


def test_a_full_disk_at_the_write_boundary_says_no_space(folders, tmp_path, monkeypatch, capsys):
    """numpy's own short write on a full device (/dev/full), at the point GGUFWriter writes the tensors."""
    out = tmp_path / "m.gguf"
    out.write_bytes(b"old")

    def write_to_a_full_disk(self, *args, **kwargs):
        with open("/dev/full", "wb") as full:
            np.zeros(100_000, dtype=np.float32).tofile(full)

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", write_to_a_full_disk)
    err = run_cli_error(["export-gguf", str(folders["untied"]), str(out), "--overwrite"], capsys)
    assert f"no space left on {tmp_path}" in err and "requested" not in err
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["m.gguf"]


KILLED_MID_WRITE = """
import sys, time, gguf
from tinylm_hf.cli import main
def stall(self, *a, **k):
    print("writing", flush=True)
    time.sleep(600)
gguf.GGUFWriter.write_tensors_to_file = stall
main(sys.argv[1:])
"""


def test_a_sigkilled_export_leaves_a_temp_file_that_the_next_export_removes(folders, tmp_path):
    from tiny_runs import cli_env

    out = tmp_path / "m.gguf"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MID_WRITE, "export-gguf", str(folders["untied"]), str(out)],
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout.readline().decode().strip() == "writing"
    proc.kill()
    proc.wait()
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".m.gguf-tinylm-") and left[0].endswith(".tmp")  # a kill runs nothing
    assert main(["export-gguf", str(folders["untied"]), str(out)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]
