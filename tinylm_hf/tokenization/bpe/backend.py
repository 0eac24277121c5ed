"""Build a `tokenizers` ByteLevel BPE equal to `BPETokenizer` (GPT-2 pattern), and the init kwargs both BPE
classes share.

Shared by `TinyLMTokenizer` (which writes the result as `tokenizer.json` next to its own files so any
fast-tokenizer consumer can load the folder) and `TinyLMTokenizerFast` (which runs on it).
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from ..pretokenize import GPT2_PATTERN, resolve_pattern


def check_fast_pattern(pattern: str) -> None:
    """`tokenizers`' ByteLevel pre-tokenizer hard-codes GPT-2's regex: any other pattern cannot be mirrored."""
    if resolve_pattern(pattern) != GPT2_PATTERN:
        raise ValueError(
            f"the fast tokenizer (tokenizer.json) supports only pattern='gpt2', got {pattern!r}; "
            "use TinyLMTokenizer for other pre-tokenization patterns"
        )


def base_init_kwargs(
    errors: str,
    unk_token: str | None,
    bos_token: str | None,
    eos_token: str | None,
    pad_token: str | None,
    pattern: str,
    kwargs: dict,
    add_prefix_space: bool = False,
) -> dict:
    """Keyword arguments both TinyLM tokenizer classes pass to their transformers base `__init__`.

    They end up in `tokenizer_config.json`, so the slow and fast classes must agree on them; decoding
    keeps spaces as they are unless the caller asks otherwise.
    """
    kwargs.setdefault("clean_up_tokenization_spaces", False)
    return {
        "errors": errors,
        "unk_token": unk_token,
        "bos_token": bos_token,
        "eos_token": eos_token,
        "pad_token": pad_token,
        "pattern": pattern,
        "add_prefix_space": add_prefix_space,
        **kwargs,
    }


def build_byte_level_bpe(
    vocab: dict[str, int],
    merges: list[tuple[str, str]],
    added_tokens: dict[int, AddedToken] | None = None,
    add_prefix_space: bool = False,
) -> Tokenizer:
    """A ByteLevel BPE `Tokenizer` on GPT-2-format `vocab` (unicode string -> id) and `merges`.

    `added_tokens` (id -> token, e.g. `<|endoftext|>`) are matched on the raw text before
    pre-tokenization, longest first; each must land on its given id. `add_prefix_space` puts a space
    before each piece of text (between added tokens, or each word of pre-split input) that lacks one.
    """
    tokenizer = Tokenizer(models.BPE(vocab=dict(vocab), merges=[tuple(m) for m in merges], fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    # In id order, so that tokens missing from the vocab get the same new ids as on the slow side.
    for index, token in sorted((added_tokens or {}).items()):
        if token.special:
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(token.content) != index:
            raise ValueError(
                f"added token {token.content!r} should have id {index} but got "
                f"{tokenizer.token_to_id(token.content)}: added-token ids must follow the vocab without gaps"
            )
    return tokenizer
