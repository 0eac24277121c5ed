"""The test oracle for WordPiece training: a naive, obviously-correct trainer (full recount per merge).

Same rules as tinylm_hf.tokenization.wordpiece.train: merge the pair with the greatest score,
ties to the greatest (a, b); a merged string already in the vocabulary keeps its id. Scores:
"pmi" freq(ab) / (freq(a) * freq(b)) exactly, "frequency" freq(ab), "likelihood"
freq(ab) * log(freq(ab) * N / (freq(a) * freq(b))) with N the current number of tokens.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
import math


def naive_train_wordpiece(
    counts: dict[str, int], vocab_size: int, special_tokens: list[str], prefix: str = "##", score: str = "frequency"
) -> list[str]:
    vocab = list(special_tokens)
    firsts = sorted({w[0] for w in counts})
    rest = sorted({prefix + c for w in counts for c in w[1:]})
    vocab += [t for t in firsts + rest if t not in special_tokens]
    words = Counter()
    for word, count in counts.items():
        words[(word[0],) + tuple(prefix + c for c in word[1:])] += count
    while len(vocab) < vocab_size:
        freq: Counter[str] = Counter()
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            for token in word:
                freq[token] += count
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        total = sum(freq.values())
        rules = {
            "pmi": lambda p: Fraction(pairs[p], freq[p[0]] * freq[p[1]]),
            "frequency": lambda p: pairs[p],
            "likelihood": lambda p: pairs[p] * math.log(pairs[p] * total / (freq[p[0]] * freq[p[1]])),
        }
        best = max(pairs, key=lambda p: (rules[score](p), p))
        a, b = best
        merged = a + (b[len(prefix):] if b.startswith(prefix) else b)
        if merged not in vocab:
            vocab.append(merged)
        new_words: Counter = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += count
        words = new_words
    return vocab
