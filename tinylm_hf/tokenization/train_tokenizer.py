"""Train a tokenizer and wrap it as a Hugging Face tokenizer: the library call behind `tinylm train-tokenizer`."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

from .bpe import BPETokenizer
from .bpe_train import count_pretokens, train_bpe, train_bpe_from_counts
from .pretokenize import EOS_TOKEN, check_special_tokens, resolve_pattern
from .tokenization_tinylm import TinyLMTokenizer

PAD_TOKEN = "<|pad|>"
MASK_TOKEN = "<|mask|>"  # becomes the mask token (masked-LM pretraining) when given


def build_hf_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    *,
    pattern: str = "gpt2",
) -> TinyLMTokenizer:
    """A `TinyLMTokenizer` over trained `vocab`/`merges`, with every special token registered as special.

    `EOS_TOKEN` (else the first special token) becomes eos, bos and unk; `PAD_TOKEN` becomes pad when
    given, else pad is eos; `MASK_TOKEN` becomes the mask token when given.
    """
    special_tokens = check_special_tokens(special_tokens)
    if not special_tokens:
        raise ValueError(f'at least one special token is needed to serve as eos/pad, e.g. "{EOS_TOKEN}"')
    eos = EOS_TOKEN if EOS_TOKEN in special_tokens else special_tokens[0]
    pad = PAD_TOKEN if PAD_TOKEN in special_tokens else eos
    mask = {"mask_token": MASK_TOKEN} if MASK_TOKEN in special_tokens else {}
    extra = [s for s in special_tokens if s not in (eos, pad, MASK_TOKEN)]
    bpe = BPETokenizer(vocab, merges, special_tokens, pattern=pattern)  # gives missing specials their ids
    return TinyLMTokenizer(
        vocab=bpe.vocab, merges=bpe.merges, unk_token=eos, bos_token=eos, eos_token=eos, pad_token=pad,
        pattern=pattern, extra_special_tokens=extra, **mask,
    )


def train_tokenizer(
    input_paths: Sequence[str | os.PathLike],
    vocab_size: int,
    special_tokens: Sequence[str] = (EOS_TOKEN,),
    *,
    pattern: str = "gpt2",
    num_workers: int | None = None,
    progress: bool = True,
) -> TinyLMTokenizer:
    """Train byte-level BPE on text files and return it as a `TinyLMTokenizer` (save it with `save_pretrained`)."""
    paths = [os.fspath(p) for p in input_paths]
    if not paths:
        raise ValueError("no input files given")
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"input file {path} does not exist")
    specials = check_special_tokens(list(special_tokens))
    if len(paths) == 1:
        vocab, merges = train_bpe(paths[0], vocab_size, specials, num_workers=num_workers, pattern=pattern,
                                  progress=progress)
    else:  # pre-token counts summed over the files train exactly as one concatenated file would
        counts: Counter[str] = Counter()
        for path in paths:
            counts.update(count_pretokens(path, specials, resolve_pattern(pattern), num_workers=num_workers))
        vocab, merges = train_bpe_from_counts(counts, vocab_size, specials, progress=progress)
    return build_hf_tokenizer(vocab, merges, specials, pattern=pattern)
