"""Build a `tokenizers` BERT WordPiece equal to `WordPieceTokenizer`, and the init kwargs both HF classes share.

Shared by `TinyLMWordPieceTokenizer` (which writes `tokenizer.json` next to `vocab.txt` so fast-tokenizer
consumers can load the folder) and `TinyLMWordPieceTokenizerFast` (which runs on it).
Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from .core import CONTINUING_SUBWORD_PREFIX


def build_bert_wordpiece(
    vocab: dict[str, int],
    *,
    lowercase: bool,
    unk_token: str,
    cls_token: str | None,
    sep_token: str | None,
    max_input_chars_per_word: int = 100,
    added_tokens: dict[int, AddedToken] | None = None,
) -> Tokenizer:
    """BertNormalizer + BertPreTokenizer + WordPiece + `[CLS] A [SEP] (B [SEP])` template + WordPiece decoder.

    `added_tokens` (id -> token) must land on their given ids, as on the slow side.
    """
    tokenizer = Tokenizer(
        models.WordPiece(
            vocab=dict(vocab),
            unk_token=unk_token,
            max_input_chars_per_word=max_input_chars_per_word,
            continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX,
        )
    )
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUING_SUBWORD_PREFIX, cleanup=True)
    for index, token in sorted((added_tokens or {}).items()):
        (tokenizer.add_special_tokens if token.special else tokenizer.add_tokens)([token])
        if tokenizer.token_to_id(token.content) != index:
            raise ValueError(f"added token {token.content!r} should have id {index}, got {tokenizer.token_to_id(token.content)}")
    if cls_token is not None and sep_token is not None:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls_token}:0 $A:0 {sep_token}:0",
            pair=f"{cls_token}:0 $A:0 {sep_token}:0 $B:1 {sep_token}:1",
            special_tokens=[(cls_token, vocab[cls_token]), (sep_token, vocab[sep_token])],
        )
    return tokenizer


def wordpiece_init_kwargs(
    do_lower_case: bool,
    max_input_chars_per_word: int,
    special: dict[str, str | None],
    kwargs: dict,
) -> dict:
    """Keyword arguments both WordPiece classes pass to their transformers base `__init__`.

    They end up in `tokenizer_config.json`, so the slow and fast classes must agree on them:
    `[CLS] A [SEP] B [SEP]` with token type ids 0 then 1, and decoding as `tokenizers` decodes.
    """
    kwargs.setdefault("clean_up_tokenization_spaces", False)
    kwargs.setdefault("special_tokens_pattern", "cls_sep")
    kwargs.setdefault("token_type_ids_pattern", "bert_style")
    return {"do_lower_case": do_lower_case, "max_input_chars_per_word": max_input_chars_per_word, **special, **kwargs}
