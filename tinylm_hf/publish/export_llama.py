"""Export a TinyLM folder as a plain Llama folder that needs neither remote code nor tinylm_hf.

TinyLM's config fields and state-dict names are Llama's, so the export maps the config onto a
`LlamaConfig`, loads the weights into the Llama class of the folder's TinyLM class (`LLAMA_CLASSES`:
`LlamaForCausalLM`, or the task head's `LlamaForSequenceClassification` / `...ForTokenClassification` /
`...ForQuestionAnswering`, whose decoder Llama names `transformer`) with a strict name check (any
mismatch is an error, not a silent re-initialisation), and writes the tokenizer as a plain
`PreTrainedTokenizerFast` (`tokenizer.json`; a sentencepiece tokenizer also keeps its `tokenizer.model`,
from which llama.cpp's converter takes the scores, as for Llama 2), with the chat template and the folder's
`generation_config.json` (where a chat model stops). The folder is written
into a temporary sibling and renamed into place, so a failed export leaves nothing half-written.

The folder reads the same under transformers 5 and 4 (4.57 checked): transformers 5 writes a tokenizer
class 4.x does not know (`TokenizersBackend`), 4.x's fast tokenizer returns `token_type_ids` unless told
the model's input names (and `generate` rejects them), and 4.x reads `rope_theta` only at the top level
of config.json (5 keeps it in `rope_parameters`; 4.x silently falls back to 10000). `make_portable`
writes all three, and says whether the tokenizer adds bos/eos tokens (readers that rebuild the tokenizer
from `tokenizer.model` add a bos token unless told).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..corpus.token_files import check_tokenizer_fingerprint
from ..fileio import check_ours_to_replace, make_folders, make_temp, raise_no_space, seal_folder, write_json_atomic
from ..tokenization.bpe.backend import build_byte_level_bpe
from ..tokenization.bpe.gpt2_files import MERGES_FILE, VOCAB_FILE, read_merges_txt, read_vocab_json
from ..tokenization.metaspace.sentencepiece_model import MODEL_FILE as SENTENCEPIECE_FILE
from ..tokenization.pretokenize import GPT2_PATTERN, resolve_pattern
from ..tokenizer_loading import load_tokenizer
from ..training.model_folder import check_folder_files, read_json

# the TinyLM class a folder was saved from (config.json's "architectures") -> the Llama class that runs it
LLAMA_CLASSES = {
    "TinyLMForCausalLM": "LlamaForCausalLM",
    "TinyLMForSequenceClassification": "LlamaForSequenceClassification",
    "TinyLMForTokenClassification": "LlamaForTokenClassification",
    "TinyLMForQuestionAnswering": "LlamaForQuestionAnswering",
}
# what a task head reads from the config beyond the decoder's shape (labels, loss, token-classification head)
TASK_FIELDS = ("id2label", "label2id", "problem_type", "classifier_dropout", "token_classification_bias")
PROBE_TEXT = "Once upon a time, a little cat said: \"Hello!\" 123 <|endoftext|> The end.\n\n  Ünïcode ✓"
CHAT_PROBE = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "A story?"},
              {"role": "assistant", "content": "Once."}]
# The tokenizer class and input names both transformers 4.x and 5.x read the same way.
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
MODEL_INPUT_NAMES = ["input_ids", "attention_mask"]
GENERATION_CONFIG_FILE = "generation_config.json"


def check_output_outside(src: Path, out: Path) -> None:
    """Refuse an output that is the input folder or contains it (replacing it would delete the input)."""
    src_resolved, out_resolved = src.resolve(), out.resolve()
    if out_resolved == src_resolved or out_resolved in src_resolved.parents:
        raise ValueError(f"output {out} contains the input folder {src}: writing there would delete the input; "
                         "choose an output outside it")


def llama_class_name(config: dict[str, Any]) -> str:
    """The Llama class for a TinyLM config.json dict: its task head's, else `LlamaForCausalLM`."""
    architectures = config.get("architectures") or ["TinyLMForCausalLM"]
    return LLAMA_CLASSES.get(architectures[0], "LlamaForCausalLM")


def llama_config_from(config: dict[str, Any]) -> Any:
    """The `LlamaConfig` equivalent of a TinyLM config.json dict (causal models only), task fields included."""
    from transformers import LlamaConfig

    if config.get("use_bidirectional_attention"):
        raise ValueError("this folder holds a masked-LM encoder (use_bidirectional_attention=True): Llama and "
                         "llama.cpp would run it with causal attention, which it was not trained with; "
                         "only causal TinyLM models can be exported")
    heads = config["num_attention_heads"]
    language_model = llama_class_name(config) == "LlamaForCausalLM"
    return LlamaConfig(
        vocab_size=config["vocab_size"],
        hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=config.get("num_key_value_heads") or heads,
        head_dim=config["hidden_size"] // heads,
        max_position_embeddings=config["max_position_embeddings"],
        rms_norm_eps=config.get("rms_norm_eps", 1e-5),
        rope_theta=config.get("rope_theta", 10000.0),
        tie_word_embeddings=language_model and config.get("tie_word_embeddings", False),  # a task head has no lm_head
        hidden_act="silu",
        attention_bias=False,
        mlp_bias=False,
        initializer_range=config.get("initializer_range", 0.02),
        bos_token_id=config.get("bos_token_id"),
        eos_token_id=config.get("eos_token_id"),
        pad_token_id=config.get("pad_token_id"),
        **{name: config[name] for name in TASK_FIELDS if config.get(name) is not None},
    )


def _load_state_dict(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors weights")
    state: dict[str, Any] = {}
    for path in files:
        state.update(load_file(path))
    return state


def build_llama_model(src: Path) -> Any:
    """The Llama model (`LLAMA_CLASSES`) holding the TinyLM folder's weights (strict name check)."""
    import transformers

    config_path = src / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{src} has no config.json")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    llama_config = llama_config_from(config)
    model = getattr(transformers, llama_class_name(config))(llama_config)
    prefix = f"{model.base_model_prefix}."  # "transformer." for LlamaForQuestionAnswering, else "model."
    state = {prefix + k[len("model."):] if k.startswith("model.") else k: v
             for k, v in _load_state_dict(src).items() if not k.endswith("rotary_emb.inv_freq")}
    if llama_config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    expected = set(model.state_dict())
    if llama_config.tie_word_embeddings:
        expected.discard("lm_head.weight")
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise ValueError(
            f"the weights in {src} do not map onto {type(model).__name__}: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    model.load_state_dict(state, strict=not llama_config.tie_word_embeddings)
    if llama_config.tie_word_embeddings:
        model.tie_weights()
    dtype = next(iter(state.values())).dtype
    return model.to(dtype).eval()


def check_gpt2_pattern(pattern: str, src: Path) -> None:
    """Exports mirror GPT-2's pre-tokenization regex only (a tokenizer.json ByteLevel, llama.cpp's 'gpt-2')."""
    if resolve_pattern(pattern) != GPT2_PATTERN:
        raise ValueError(
            f"the tokenizer in {src} pre-tokenizes with pattern {pattern!r}; exports support only GPT-2's pattern "
            "('gpt2'), the one a Llama tokenizer.json and llama.cpp's 'gpt-2' pre-tokenizer reproduce"
        )


def build_plain_tokenizer(src: Path, *, trust_remote_code: bool = False) -> Any:
    """A plain `PreTrainedTokenizerFast` equivalent to the folder's tokenizer (same ids, same specials)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from ..tokenization.tokenization_tinylm_base import TinyLMCoreTokenizer

    source = load_tokenizer(src, trust_remote_code=trust_remote_code)
    check_tokenizer_fingerprint(source, read_json(src / "config.json").get("tokenizer_fingerprint"), folder=src,
                                made=f"the data the model in {src} was trained on")
    check_gpt2_pattern(getattr(source, "pattern", "gpt2"), src)
    if isinstance(source, TinyLMCoreTokenizer) and source.has_backend_twin():
        backend = source.to_backend_tokenizer()  # the current twin (a folder's tokenizer.json may be older)
    elif (src / "tokenizer.json").is_file():
        try:
            backend = Tokenizer.from_file(str(src / "tokenizer.json"))
        except Exception as err:  # `tokenizers` raises a bare Exception for a file it cannot read
            raise ValueError(f"tokenizer.json in {src} is not a valid tokenizers file ({err})") from None
    elif (src / VOCAB_FILE).is_file() and (src / MERGES_FILE).is_file():
        backend = build_byte_level_bpe(read_vocab_json(src / VOCAB_FILE), read_merges_txt(src / MERGES_FILE),
                                       source.added_tokens_decoder)
    else:
        raise FileNotFoundError(f"{src} has neither tokenizer.json nor vocab.json + merges.txt")
    specials = {name: getattr(source, name) for name in ("bos_token", "eos_token", "unk_token", "pad_token")}
    plain = PreTrainedTokenizerFast(
        tokenizer_object=backend, model_max_length=source.model_max_length, model_input_names=MODEL_INPUT_NAMES,
        chat_template=source.chat_template, **{k: str(v) for k, v in specials.items() if v is not None},
    )
    probes = {PROBE_TEXT: "", "<|endoftext|>Hi": ""}
    if source.chat_template:  # a chat model's role markers and end-of-turn token must survive the export
        probes[source.apply_chat_template(CHAT_PROBE, tokenize=False)] = (
            "; the chat tokens are not in the exported vocabulary: train the tokenizer with them "
            "(`tinylm train-tokenizer --chat`)")
    for text, hint in probes.items():
        want = source(text, add_special_tokens=False)["input_ids"]
        got = plain(text, add_special_tokens=False)["input_ids"]
        if want != got:
            raise ValueError(f"the exported tokenizer disagrees with the source on {text!r}: {got} vs {want}{hint}")
    return plain


def make_portable(folder: Path, tokenizer: Any) -> None:
    """Rewrite a saved Llama folder's config.json and tokenizer_config.json so transformers 4.x reads them like 5.x.

    `add_bos_token` / `add_eos_token` say what `tokenizer` does: readers that build their own tokenizer
    (llama.cpp's converter, a sentencepiece-based LlamaTokenizer) otherwise add a bos token by default.
    """
    config = read_json(folder / "config.json")
    config["rope_theta"] = config.get("rope_parameters", {}).get("rope_theta", config.get("rope_theta", 10000.0))
    write_json_atomic(folder / "config.json", config)
    tokenizer_config = read_json(folder / "tokenizer_config.json")
    tokenizer_config["tokenizer_class"] = PORTABLE_TOKENIZER_CLASS
    tokenizer_config["model_input_names"] = MODEL_INPUT_NAMES
    ids = tokenizer(PROBE_TEXT)["input_ids"]
    tokenizer_config["add_bos_token"] = tokenizer.bos_token_id is not None and ids[:1] == [tokenizer.bos_token_id]
    tokenizer_config["add_eos_token"] = tokenizer.eos_token_id is not None and ids[-1:] == [tokenizer.eos_token_id]
    write_json_atomic(folder / "tokenizer_config.json", tokenizer_config)


def export_llama(
    src_dir: str | os.PathLike, out_dir: str | os.PathLike, *, overwrite: bool = False, trust_remote_code: bool = False
) -> Path:
    """Write a plain Llama folder (config, safetensors, fast tokenizer) for a TinyLM folder.

    A causal LM becomes a `LlamaForCausalLM`, a task head its Llama twin (`LLAMA_CLASSES`). The result
    loads with the Auto classes (`AutoModelForCausalLM`, `AutoModelForSequenceClassification`, ...) and
    `AutoTokenizer` without `trust_remote_code` and without tinylm_hf, under transformers 4.x and 5.x,
    and gives the same logits and token ids.
    """
    src, out = Path(src_dir), Path(out_dir)
    check_folder_files(src)
    check_output_outside(src, out)
    if out.exists() and not overwrite and (out.is_file() or any(out.iterdir())):
        raise FileExistsError(f"{out} already exists and is not empty (pass overwrite=True / --overwrite)")
    check_ours_to_replace(out, "config.json", "a model folder")
    tokenizer = build_plain_tokenizer(src, trust_remote_code=trust_remote_code)
    model = build_llama_model(src)
    make_folders(out.parent)
    tmp = make_temp(out.parent, out.name, directory=True)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for name in (SENTENCEPIECE_FILE, GENERATION_CONFIG_FILE):  # scores for llama.cpp's converter; where to stop
            if (src / name).is_file():
                shutil.copyfile(src / name, tmp / name)
        make_portable(tmp, tokenizer)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        seal_folder(tmp)
        os.replace(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise_no_space(err, out.parent, out.name)
        raise
    return out
