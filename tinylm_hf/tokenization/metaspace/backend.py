"""Build a `tokenizers.Tokenizer` equal to a `UnigramTokenizer` or `SentencePieceBPETokenizer`.

The `tokenizer.json` twin of the sentencepiece-style HF classes: a normaliser that does what
`to_metaspace` does (`▁` prefix on every text segment, spaces to `▁`), a Metaspace pre-tokenizer
that cuts before each `▁` when no piece can cross such a cut, the Unigram or BPE model (BPE merges
derived from the pieces' scores, sentencepiece's merge priority), byte fallback, and a decoder
that undoes it all. Control and unknown pieces are special added tokens.

`tokenizers`' Unigram matches every vocabulary entry in text, where sentencepiece matches only normal pieces:
uncut, text that spells a byte piece ("<0x41>") or a control, unknown or unused piece ("<|end|>", "<unk>") would
become that piece, even with added tokens left unsplit (`split_special_tokens=True`). So a Unigram twin's
pre-tokenizer cuts inside such spellings (`text_cuts`), where no normal piece can cross the cut.

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

import re

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from .sentencepiece_model import CONTROL, SPACE_SYMBOL, UNKNOWN, UNUSED
from .core import MetaspaceTokenizer

# Where a Unigram twin cuts text that spells a byte piece ("<0x41>"): after its "<".
# (Exact unless a normal piece spans such a "<0".)
BYTE_PIECE_CUT = r"(?<=<)(?=0x[0-9A-F]{2}>)"


def build_metaspace_backend(core: MetaspaceTokenizer) -> Tokenizer:
    """The `tokenizers` twin of `core` (ids equal on any text)."""
    if core.model_type == "unigram":
        model = models.Unigram(list(zip(core.pieces, core.scores)), unk_id=core.unk_id, byte_fallback=core.byte_fallback)
    elif core.model_type == "bpe":
        model = models.BPE(
            vocab=dict(core.piece_to_id),
            merges=bpe_merges(core),
            unk_token=core.unk_token,
            byte_fallback=core.byte_fallback,
            fuse_unk=not core.byte_fallback,
        )
    else:
        raise ValueError(f"no tokenizers twin for model type {core.model_type!r}")
    tokenizer = Tokenizer(model)
    steps = []
    if core.remove_extra_whitespaces:
        steps += [normalizers.Replace(Regex("^ +| +$"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if core.add_dummy_prefix:
        steps.append(normalizers.Prepend(SPACE_SYMBOL))
    steps.append(normalizers.Replace(" ", SPACE_SYMBOL))
    tokenizer.normalizer = normalizers.Sequence(steps)
    cuts = [pre_tokenizers.Split(Regex(cut), "removed") for cut in text_cuts(core)]
    if not any(SPACE_SYMBOL in piece[1:] for piece in core.normal):
        cuts.append(pre_tokenizers.Metaspace(replacement=SPACE_SYMBOL, prepend_scheme="never", split=True))
    if cuts:
        tokenizer.pre_tokenizer = cuts[0] if len(cuts) == 1 else pre_tokenizers.Sequence(cuts)
    # Llama's decoder. ByteFallback turns a run of byte pieces holding any invalid byte into one U+FFFD per
    # piece, where sentencepiece replaces only the invalid bytes ([A, 0xE2, A] as byte pieces: three U+FFFD, not
    # "A\ufffdA"); the TinyLM fast classes decode such text again. A Replace decoder per byte piece would end the
    # runs at ASCII bytes, but made decoding 60x slower.
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace(SPACE_SYMBOL, " "), decoders.ByteFallback(), decoders.Fuse()]
        + ([decoders.Strip(content=" ", left=1, right=0)] if core.add_dummy_prefix else [])
    )
    specials = [AddedToken(p, special=True, normalized=False) for p, t in zip(core.pieces, core.types) if t in (CONTROL, UNKNOWN)]
    tokenizer.add_special_tokens(specials)
    return tokenizer


def text_cuts(core: MetaspaceTokenizer) -> list[str]:
    """The regexes (empty matches) where a Unigram twin cuts text that spells a piece sentencepiece never
    matches in text: `BYTE_PIECE_CUT` with byte fallback, then one cut inside each control, unknown or unused
    piece of two or more characters. A BPE twin needs none: only merges of normal pieces make its pieces."""
    if core.model_type != "unigram":
        return []
    cuts = [BYTE_PIECE_CUT] if core.byte_fallback else []
    unmatched = [p for p, t in zip(core.pieces, core.types) if t in (CONTROL, UNKNOWN, UNUSED) and len(p) > 1]
    if unmatched:
        normal = "\n".join(core.normal)  # every normal piece, to look pairs of characters up in
        spots = [(piece, _cut_at(piece, normal)) for piece in unmatched]
        cuts.append("|".join(f"(?<={re.escape(p[:at])})(?={re.escape(p[at:])})" for p, at in spots))
    return cuts


def _cut_at(piece: str, normal: str) -> int:
    """Where to cut `piece`: between the first two neighbouring characters that no normal piece holds together
    (there no normal piece can cross the cut, so the cut changes no segmentation), else after its first one."""
    return next((at for at in range(1, len(piece)) if piece[at - 1:at + 1] not in normal), 1)


def bpe_merges(core: MetaspaceTokenizer) -> list[tuple[str, str]]:
    """Merges for `tokenizers`' BPE: every split of every piece into two pieces, best score first.

    sentencepiece joins any adjacent pair whose concatenation is a piece, preferring higher scores;
    a merge list ordered by the joined piece's score (then id) gives the same priority.
    """
    normal = core.normal
    ranked = sorted((i for p, i in normal.items() if len(p) > 1), key=lambda i: (-core.scores[i], i))
    merges = []
    for index in ranked:
        piece = core.pieces[index]
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece))]
        splits = [(a, b) for a, b in splits if a in normal and b in normal]
        merges += sorted(splits, key=lambda ab: (normal[ab[0]], normal[ab[1]]))
    return merges

