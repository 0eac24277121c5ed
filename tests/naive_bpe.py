"""The test oracle for BPE training: a naive, obviously-correct trainer (full pair recount per merge).

Shared by tests/test_bpe_train.py (checks train_bpe against it) and tests/hf_tokenizer_data.py
(builds a small tokenizer folder without ../shared/data).
"""

from __future__ import annotations

import re
from collections import Counter

import regex

from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN


def naive_counts(text: str, special_tokens: list[str], pattern: str = GPT2_PATTERN) -> Counter[str]:
    """Pre-token counts of a whole text: split on the specials, then regex findall on each part."""
    parts = [text]
    if special_tokens:
        alternation = "|".join(re.escape(t) for t in sorted(special_tokens, key=len, reverse=True))
        parts = re.split(alternation, text)
    counts: Counter[str] = Counter()
    for part in parts:
        counts.update(regex.findall(pattern, part))
    return counts


def naive_train(
    counts: Counter[str], vocab_size: int, special_tokens: list[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Recount every pair each step; pick max by (count, (bytes_a, bytes_b)); merge left to right."""
    vocab = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    words = Counter()
    for token, count in counts.items():
        words[tuple(bytes([b]) for b in token.encode("utf-8"))] += count
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) < vocab_size:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        merged: Counter = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return vocab, merges
