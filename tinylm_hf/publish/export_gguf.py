"""Export a TinyLM folder as one GGUF file that llama.cpp (and Ollama, LM Studio) load without a patch.

The file is written with `gguf`, llama.cpp's own Python writer, with the keys and tensor layout of
llama.cpp's `convert_hf_to_gguf.py` for a Llama model (architecture `llama`):
- the weights are the plain Llama export's (`build_llama_model`: strict name check, tied embeddings
  stored once), renamed with gguf's own HF -> GGUF tensor map; the q and k projections get
  llama.cpp's row permutation (HF's rotary pairs are the two halves of a head, llama.cpp's are
  adjacent rows);
- a byte-level BPE tokenizer is embedded as a `gpt2` vocabulary: tokens, token types, merges,
  special ids, and `tokenizer.ggml.pre = "gpt-2"`, the pre-tokenizer llama.cpp uses for GPT-2's regex.
  llama.cpp's converter guesses that name by hashing the token ids of known vocabularies, so it
  refuses any newly trained one; we know our regex, so we name it.
- a chat model's template is written as `tokenizer.chat_template` (without transformers' `{% generation %}`
  markers, which other Jinja engines reject; llama.cpp's own formatting knows it as `phi3`), and its
  end-of-turn token `<|end|>` as llama.cpp's eot and eos token, so llama.cpp stops where transformers does.
- a sentencepiece tokenizer (`tokenizer.model`) is embedded with its pieces, scores and piece types,
  as llama.cpp's converter reads them with `sentencepiece`: SentencePiece BPE (Llama 2's kind) as a
  `llama` vocabulary (merges by score, byte fallback), Unigram as a `t5` one (llama.cpp's Viterbi
  tokenizer, which has no byte fallback: a Unigram model with byte pieces is refused). llama.cpp
  normalises nothing, so models with a normaliser or extra-whitespace removal are refused too.
Norms and other 1-d tensors stay f32 whatever `dtype` says, as llama.cpp's converter keeps them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_output, check_not_an_input, make_folders
from ..tokenization.chat_template import end_of_turn_id, portable_chat_template
from ..tokenization.metaspace.sentencepiece_model import MODEL_FILE as SENTENCEPIECE_FILE
from ..tokenization.metaspace.sentencepiece_model import UNUSED, SentencePieceModel, read_sentencepiece_model
from ..tokenization.families import FAMILIES
from ..training.model_folder import check_folder_files, check_language_model
from .export_llama import build_llama_model, build_plain_tokenizer
from .folder import check_tokenizer_fits

logger = logging.getLogger(__name__)

DTYPES = ("f32", "f16", "bf16", "q8_0")  # storage of the weight matrices, as llama.cpp's --outtype
GGUF_PRE_TOKENIZER = "gpt-2"  # llama.cpp's name for GPT-2's pre-tokenization regex


def gguf_types(dtype: str) -> tuple[Any, Any]:
    """(GGMLQuantizationType of the matrices, LlamaFileType) for a `--dtype` name."""
    from gguf import GGMLQuantizationType, LlamaFileType

    table = {
        "f32": (GGMLQuantizationType.F32, LlamaFileType.ALL_F32),
        "f16": (GGMLQuantizationType.F16, LlamaFileType.MOSTLY_F16),
        "bf16": (GGMLQuantizationType.BF16, LlamaFileType.MOSTLY_BF16),
        "q8_0": (GGMLQuantizationType.Q8_0, LlamaFileType.MOSTLY_Q8_0),
    }
    return table[dtype]


def check_gguf_output(out: Path, src: Path, *, overwrite: bool) -> None:
    """Refuse an output path that is a folder, one of the input folder's files (its weights, ...), or an existing
    file unless `overwrite`."""
    check_not_an_input(out, [p for p in src.iterdir() if p.is_file()], flag="output")
    if out.is_dir():
        raise IsADirectoryError(f"output {out} is a folder; give a file path such as {out / 'model.gguf'}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (pass overwrite=True / --overwrite to replace it)")


def permute_for_gguf(weight: Any, n_head: int) -> Any:
    """Reorder a q/k projection's rows from HF's rotary layout (half-split) to llama.cpp's (interleaved pairs).

    Within each head, HF rotates row i with row i + head_dim/2; llama.cpp rotates rows 2i and 2i+1.
    Same as `LlamaModel.permute` in llama.cpp's convert_hf_to_gguf.py.
    """
    out_features = weight.shape[0]
    return (weight.reshape(n_head, 2, out_features // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2)
            .reshape(weight.shape))


def gguf_tensors(model: Any) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array) for every weight of a `LlamaForCausalLM`, q/k permuted, tied head dropped."""
    import gguf

    config = model.config
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    tensors = []
    for key, value in model.state_dict().items():
        if key == "lm_head.weight" and config.tie_word_embeddings:
            continue  # llama.cpp reuses token_embd when output.weight is absent
        weight = value.detach().float()
        if key.endswith("self_attn.q_proj.weight"):
            weight = permute_for_gguf(weight, config.num_attention_heads)
        elif key.endswith("self_attn.k_proj.weight"):
            weight = permute_for_gguf(weight, config.num_key_value_heads)
        name = names.get_name(key, try_suffixes=(".weight",))
        if name is None:
            raise ValueError(f"no GGUF name for the Llama weight {key!r}")
        tensors.append((name, weight.numpy()))
    return tensors


def encode_tensor(name: str, data: np.ndarray, qtype: Any) -> tuple[np.ndarray, Any]:
    """(stored array, GGML type) of one tensor: 1-d tensors and norms stay f32, as in llama.cpp's converter.

    A matrix whose rows do not split into q8_0's 32-value blocks falls back to f16, as llama.cpp does.
    """
    import gguf

    if data.ndim <= 1 or name.endswith("_norm.weight"):
        qtype = gguf.GGMLQuantizationType.F32
    try:
        return gguf.quants.quantize(data, qtype), qtype
    except gguf.QuantError as err:
        logger.warning("%s: %s; storing it as f16", name, err)
        return gguf.quants.quantize(data, gguf.GGMLQuantizationType.F16), gguf.GGMLQuantizationType.F16


def gguf_vocab(tokenizer: Any, vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) of a byte-level BPE `PreTrainedTokenizerFast`, `vocab_size` rows long.

    Tokens are the GPT-2 byte-to-unicode strings llama.cpp's `gpt2` vocabulary expects; special added
    tokens are CONTROL, other added tokens USER_DEFINED, ids with no token (embedding rows past the
    tokenizer) UNUSED `[PAD<id>]`, as llama.cpp's converter writes them.
    """
    from gguf import TokenType

    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    check_byte_level_bpe(backend)
    model = backend["model"]
    by_id = {index: token for token, index in tokenizer.get_vocab().items()}
    added = tokenizer.added_tokens_decoder  # id -> AddedToken
    tokens, types = [], []
    for index in range(vocab_size):
        if index not in by_id:
            tokens.append(f"[PAD{index}]")
            types.append(TokenType.UNUSED)
        elif index in added:
            tokens.append(by_id[index])
            types.append(TokenType.CONTROL if added[index].special else TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[index])
            types.append(TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, [int(t) for t in types], merges


def check_byte_level_bpe(backend: dict[str, Any]) -> None:
    """A tokenizer.json dict must be what llama.cpp's `gpt2` + `gpt-2` reproduce: byte-level BPE on GPT-2's regex."""
    model, pre = backend.get("model") or {}, backend.get("pre_tokenizer") or {}
    problems = []
    if model.get("type") != "BPE" or model.get("dropout") or model.get("continuing_subword_prefix"):
        problems.append(f"model {model.get('type')} (need plain BPE)")
    if backend.get("normalizer") is not None:
        problems.append("a normalizer")
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) or pre.get("add_prefix_space"):
        problems.append(f"pre-tokenizer {pre} (need ByteLevel with GPT-2's regex and no prefix space)")
    if problems:
        raise ValueError(
            f"GGUF export needs a GPT-2-style byte-level BPE tokenizer; this one has {', '.join(problems)}"
        )


def sentencepiece_vocab(model: SentencePieceModel, vocab_size: int) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) of a sentencepiece model for llama.cpp's `llama` / `t5` vocabulary.

    Pieces, scores and types are the `.model` file's (sentencepiece's type numbers are GGUF's); ids with
    no piece (embedding rows past the tokenizer) are UNUSED `[PAD<id>]` with score -10000, as
    llama.cpp's converter writes them.
    """
    check_llama_cpp_sentencepiece(model)
    tokens, scores, types = [], [], []
    for index in range(vocab_size):
        piece, score, kind = model.pieces[index] if index < len(model.pieces) else (f"[PAD{index}]", -10000.0, UNUSED)
        tokens.append(piece)
        scores.append(float(score))
        types.append(int(kind))
    return tokens, scores, types


def sentencepiece_family(model: SentencePieceModel) -> Any:
    """The `FAMILIES` entry whose core writes sentencepiece models of `model`'s type, or None."""
    return next((f for f in FAMILIES.values() if getattr(f.core, "model_type", None) == model.model_type), None)


def llama_cpp_tokenizer(model: SentencePieceModel) -> str | None:
    """llama.cpp's tokenizer for a sentencepiece model, its family's (`FAMILIES`): "llama" merges by score
    (SentencePiece BPE, with byte fallback), "t5" is its Unigram (Viterbi) tokenizer; None for another type."""
    family = sentencepiece_family(model)
    return None if family is None else family.llama_cpp


def check_llama_cpp_sentencepiece(model: SentencePieceModel) -> None:
    """A `.model` must be one llama.cpp's tokenizers reproduce: byte pieces only where llama.cpp's tokenizer for its
    family reads them (`FAMILIES`), no normalisation."""
    problems = []
    family = sentencepiece_family(model)
    if llama_cpp_tokenizer(model) is None:
        problems.append(f"model type {model.model_type!r}")
    elif model.byte_fallback and not family.llama_cpp_byte_pieces:
        readers = [f.name for f in FAMILIES.values() if f.llama_cpp_byte_pieces]
        problems.append(f"byte fallback in a {family.title} model (llama.cpp's {family.title} tokenizer has none: "
                        f"train it with --no-byte-fallback, or use --algorithm {' or '.join(readers)})")
    if model.has_charsmap or model.normalizer_name not in ("", "identity"):
        problems.append(f"normalisation {model.normalizer_name!r} (llama.cpp applies none)")
    if model.remove_extra_whitespaces:
        problems.append("remove_extra_whitespaces (llama.cpp keeps every space)")
    if not model.escape_whitespaces:
        problems.append("spaces kept as spaces (llama.cpp writes them as ▁)")
    if problems:
        raise ValueError(f"GGUF export of a sentencepiece tokenizer needs it to be exactly what llama.cpp "
                         f"segments alike; this one has {', '.join(problems)}")


def add_metadata(writer: Any, config: Any, tokenizer: Any, vocab_size: int, file_type: Any, name: str,
                 sentencepiece: SentencePieceModel | None = None) -> None:
    """The llama hyperparameters and the embedded tokenizer, under the keys llama.cpp reads.

    `sentencepiece`: the folder's sentencepiece model, embedded instead of a byte-level vocabulary.
    """
    import gguf

    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(name)
    writer.add_file_type(file_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_vocab_size(vocab_size)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)

    if sentencepiece is None:
        tokens, types, merges = gguf_vocab(tokenizer, vocab_size)
        writer.add_tokenizer_model(FAMILIES["bpe"].llama_cpp)
        writer.add_tokenizer_pre(GGUF_PRE_TOKENIZER)
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
    else:
        tokens, scores, types = sentencepiece_vocab(sentencepiece, vocab_size)
        writer.add_tokenizer_model(llama_cpp_tokenizer(sentencepiece))
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_add_space_prefix(sentencepiece.add_dummy_prefix)
        writer.add_remove_extra_whitespaces(sentencepiece.remove_extra_whitespaces)
    end_of_turn = end_of_turn_id(tokenizer)  # a chat model's text ends with its turn: llama.cpp's eot and eos
    for setter, token_id in ((writer.add_bos_token_id, tokenizer.bos_token_id),
                             (writer.add_eos_token_id, tokenizer.eos_token_id if end_of_turn is None else end_of_turn),
                             (writer.add_unk_token_id, tokenizer.unk_token_id),
                             (writer.add_pad_token_id, tokenizer.pad_token_id)):
        if token_id is not None:
            setter(token_id)
    # TinyLM prompts are encoded without bos/eos (`tinylm generate`, the tokenizer's default)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    if isinstance(tokenizer.chat_template, str):
        writer.add_chat_template(portable_chat_template(tokenizer.chat_template))
    if end_of_turn is not None:
        writer.add_eot_token_id(end_of_turn)


def export_gguf(
    src_dir: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    dtype: str = "f16",
    overwrite: bool = False,
    trust_remote_code: bool = False,
) -> Path:
    """Write a TinyLM folder as one GGUF file (architecture `llama`, tokenizer embedded) for llama.cpp.

    `dtype` is the storage of the weight matrices: "f32", "f16", "bf16" or "q8_0" (norms stay f32).
    Everything is checked before the file is written, and it is written to a temp file renamed into place.
    """
    import gguf

    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    src, out = Path(src_dir), Path(out_path)
    config = check_folder_files(src)
    check_language_model(config, src, "GGUF carries a language model for llama.cpp; export the task head with "
                                      "export-llama instead")
    check_gguf_output(out, src, overwrite=overwrite)
    tokenizer = build_plain_tokenizer(src, trust_remote_code=trust_remote_code)  # checks it made the data
    model = build_llama_model(src)
    vocab_size = model.config.vocab_size
    check_tokenizer_fits(tokenizer, vocab_size, src)
    sentencepiece = read_sentencepiece_model(src / SENTENCEPIECE_FILE) if (src / SENTENCEPIECE_FILE).is_file() else None
    if sentencepiece is not None:
        check_llama_cpp_sentencepiece(sentencepiece)
    qtype, file_type = gguf_types(dtype)
    tensors = [(name, *encode_tensor(name, data, qtype)) for name, data in gguf_tensors(model)]
    make_folders(out.parent)
    with atomic_output(out) as tmp:
        writer = gguf.GGUFWriter(tmp, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
        try:
            add_metadata(writer, model.config, tokenizer, vocab_size, file_type, src.resolve().name, sentencepiece)
            for name, data, tensor_type in tensors:
                writer.add_tensor(name, data, raw_dtype=tensor_type)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
            writer.close()
        except BaseException:
            _close_quietly(writer)  # a failed write (a full disk) leaves no open file behind
            raise
    return out


def _close_quietly(writer: Any) -> None:
    """Close a GGUFWriter's files after a failed write; their flush may fail again, which is not news."""
    for handle in writer.fout or []:
        with contextlib.suppress(OSError):
            handle.close()
    writer.fout = None
