"""Export a TinyLM folder as a plain `LlamaForCausalLM` folder that needs neither remote code nor tinylm_hf.

TinyLM's config fields and state-dict names are Llama's, so the export maps the config onto a
`LlamaConfig`, loads the weights into a `LlamaForCausalLM` with `strict=True` (any name mismatch
is an error, not a silent re-initialisation), and writes the tokenizer as a plain
`PreTrainedTokenizerFast` (`tokenizer.json`: GPT-2-regex byte-level BPE). The folder is written
into a temporary sibling and renamed into place, so a failed export leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

PROBE_TEXT = "Once upon a time, a little cat said: \"Hello!\" 123 <|endoftext|> The end.\n\n  Ünïcode ✓"


def llama_config_from(config: dict[str, Any]) -> Any:
    """The `LlamaConfig` equivalent of a TinyLM config.json dict."""
    from transformers import LlamaConfig

    heads = config["num_attention_heads"]
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
        tie_word_embeddings=config.get("tie_word_embeddings", False),
        hidden_act="silu",
        attention_bias=False,
        mlp_bias=False,
        initializer_range=config.get("initializer_range", 0.02),
        bos_token_id=config.get("bos_token_id"),
        eos_token_id=config.get("eos_token_id"),
        pad_token_id=config.get("pad_token_id"),
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
    """A `LlamaForCausalLM` holding the TinyLM folder's weights (strict name check)."""
    from transformers import LlamaForCausalLM

    config_path = src / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{src} has no config.json")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    llama_config = llama_config_from(config)
    model = LlamaForCausalLM(llama_config)
    state = {k: v for k, v in _load_state_dict(src).items() if not k.endswith("rotary_emb.inv_freq")}
    if llama_config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    expected = set(model.state_dict())
    if llama_config.tie_word_embeddings:
        expected.discard("lm_head.weight")
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise ValueError(
            f"the weights in {src} do not map onto LlamaForCausalLM: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    model.load_state_dict(state, strict=not llama_config.tie_word_embeddings)
    if llama_config.tie_word_embeddings:
        model.tie_weights()
    dtype = next(iter(state.values())).dtype
    return model.to(dtype).eval()


def build_plain_tokenizer(src: Path) -> Any:
    """A plain `PreTrainedTokenizerFast` equivalent to the folder's tokenizer (same ids, same specials)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    source = AutoTokenizer.from_pretrained(src, trust_remote_code=True)
    if (src / "tokenizer.json").is_file():
        backend = Tokenizer.from_file(str(src / "tokenizer.json"))
    elif (src / "vocab.json").is_file() and (src / "merges.txt").is_file():
        vocab = json.loads((src / "vocab.json").read_text(encoding="utf-8"))
        lines = (src / "merges.txt").read_text(encoding="utf-8").splitlines()
        merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
        backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        backend.decoder = decoders.ByteLevel()
    else:
        raise FileNotFoundError(f"{src} has neither tokenizer.json nor vocab.json + merges.txt")
    specials = {name: getattr(source, name) for name in ("bos_token", "eos_token", "unk_token", "pad_token")}
    plain = PreTrainedTokenizerFast(
        tokenizer_object=backend, model_max_length=source.model_max_length,
        **{k: str(v) for k, v in specials.items() if v is not None},
    )
    for text in (PROBE_TEXT, "<|endoftext|>Hi"):
        want = source(text, add_special_tokens=False)["input_ids"]
        got = plain(text, add_special_tokens=False)["input_ids"]
        if want != got:
            raise ValueError(f"the exported tokenizer disagrees with the source on {text!r}: {got} vs {want}")
    return plain


def export_llama(src_dir: str | os.PathLike, out_dir: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a plain `LlamaForCausalLM` folder (config, safetensors, fast tokenizer) for a TinyLM folder.

    The result loads with `AutoModelForCausalLM` / `AutoTokenizer` without `trust_remote_code`
    and without tinylm_hf, and gives the same logits and token ids.
    """
    src, out = Path(src_dir), Path(out_dir)
    if not src.is_dir():
        raise FileNotFoundError(f"model folder {src} does not exist")
    if out.exists() and not overwrite and any(out.iterdir()):
        raise FileExistsError(f"{out} already exists and is not empty (pass overwrite=True / --overwrite)")
    model = build_llama_model(src)
    tokenizer = build_plain_tokenizer(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _run_export(args: argparse.Namespace) -> int:
    out = export_llama(args.dir, args.out, overwrite=args.overwrite)
    print(f"wrote a LlamaForCausalLM folder to {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    return 0


def add_export_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `tinylm export-llama DIR OUT`."""
    parser = subparsers.add_parser("export-llama", help="write a plain LlamaForCausalLM folder (no remote code)")
    parser.add_argument("dir", help="TinyLM folder written by save_pretrained")
    parser.add_argument("out", help="output folder (must not exist or be empty)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.set_defaults(func=_run_export)
