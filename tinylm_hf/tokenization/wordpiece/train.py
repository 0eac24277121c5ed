"""WordPiece training: merge the pair with the best score, with incremental updates.

Words are BERT words (`word_splitting.BERT_WORDS`). A word starts as its
characters, every character after the first carrying the continuing-subword prefix ("##"):
"hug" -> h ##u ##g. Each step merges the pair (a, b) with the greatest score, by one of three rules
(`WORDPIECE_SCORES`; freq: occurrences in the corpus' current segmentation, N: their total):

    "frequency"   freq(ab)                                               (the default)
    "likelihood"  freq(ab) * log(freq(ab) * N / (freq(a) * freq(b)))
    "pmi"         freq(ab) / (freq(a) * freq(b))

"frequency" is BPE's rule, the one `tokenizers`' WordPieceTrainer uses; it compresses held-out text as
well as `tokenizers` does. "likelihood" is Schuster & Nakajima's original WordPiece: the gain in the
training text's log-likelihood under a unigram model of the pieces (0.5-1.2% more tokens on English).
"pmi" (the rule of Hugging Face's course) ranks pairs by pointwise mutual information alone: it
prefers rare pairs of rare pieces, never learns "the" in 4,096 pieces of English, and takes 2-2.6x
the tokens. Tokens per byte of each: docs/benchmarks/tokenizers.md (scripts/bench_wordpiece_scores.py).

Ties break to the lexicographically greatest (a, b) (Python string order); a + b drops b's prefix
(h + ##u -> hu, ##u + ##g -> ##ug). A merged string already in the vocabulary keeps its id.
Vocabulary ids: the special tokens in the given order, the alphabet (first characters sorted by code
point, then "##" characters sorted), then one id per new token in merge order.

"frequency" is the BPE trainers' merge loop (`bpe_merges.learn_merges` with WordPiece's joins: a compiled
kernel where numba is installed and the words hold `KERNEL_MIN_SYMBOLS` characters or more). The other
rules keep their own loop here (`pair_merges.merge_words`: words as id lists, a pair -> words index, a
max-heap with stale entries skipped). One difference from BPE: merging (a, b) lowers freq(a) and freq(b),
which *raises* the pmi and likelihood scores of every other pair holding a or b. Rather than re-score
those pairs at once, the merge pushes one entry per token holding an upper bound on the scores of all
its pairs (`_Scores.bound_entry`); only when that bound reaches the top are the token's pairs (a token
-> pairs index finds them) scored again. A falling N lowers every likelihood score, so an entry whose
N is old is pushed again when it reaches the top. pmi scores compare exactly (integer
cross-multiplication on ties of the float score); likelihood scores are one float expression, the
same in the test oracle.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

from ..pretokenize import check_special_tokens
from .core import BERT_SPECIAL_TOKENS, CONTINUING_SUBWORD_PREFIX, WordPieceTokenizer
from ..bpe.merges import learn_merges, learn_merges_reference, runs_kernel
from ..pair_merges import PAIR_MASK, PAIR_SHIFT, merge_words, progress_bar
from ..training_source import TrainingSource, read_training_source
from ..word_splitting import BERT_WORDS, WordCounts, count_split_words, iter_texts
from ..families import FAMILIES

# Inverting code points (c -> MAX - c, 3 bytes each) plus a terminator above every inverted code
# point turns "greatest (a, b)" into "smallest bytes", which is what a min-heap pops first.
_MAX_CODE = 0xFFFFFF
_END = b"\xff\xff\xff"
WORDPIECE_SCORES = ("frequency", "likelihood", "pmi")  # the merge rules, by name
DEFAULT_WORDPIECE_SCORE = FAMILIES["wordpiece"].score
# The heap is rebuilt from live pairs once it holds 4x their number plus this many entries.
COMPACT_SLACK = 100_000
# Below this many symbols (and while numba is not loaded) the frequency rule merges in pure Python: numba and
# its compiled code cost ~120 MB more than the reference's objects at 0.5M and 1.5M symbols (40 and 100 MB
# of text), for 5-15% less CPU, and `tokenizers` needs 76-192 MB there (docs/benchmarks/tokenizers.md).
KERNEL_MIN_SYMBOLS = 4_000_000


def train_wordpiece(
    input_path: TrainingSource,
    vocab_size: int,
    special_tokens: Sequence[str] | None = BERT_SPECIAL_TOKENS,
    *,
    lowercase: bool = False,
    continuing_subword_prefix: str = CONTINUING_SUBWORD_PREFIX,
    progress: bool = True,
    score: str = DEFAULT_WORDPIECE_SCORE,
) -> list[str]:
    """Train WordPiece; return the vocabulary in id order (a BERT vocab.txt).

    `input_path` is a UTF-8 text file (a `str` or `os.PathLike`), word counts (a `Mapping` or `WordCounts`
    from `count_words(..., algorithm="wordpiece")`, e.g. summed shards) or an iterable of texts (a list, a
    generator, a `datasets` column). Special tokens are cut out of the text before pre-tokenization.
    `lowercase` lower-cases and strips accents, as BERT's uncased models (and `WordPieceTokenizer(lowercase=True)`)
    do. `score` names the merge rule (`WORDPIECE_SCORES`: "frequency", "likelihood" or "pmi"; module docstring).

    Texts are counted one at a time (memory grows with the distinct words, not the data); each text is
    pre-tokenized on its own, so no word spans two texts. Counts give what a file whose BERT words have these
    counts gives; their keys are words already normalised (`lowercase` is ignored: lowercasing happened when
    counting).

    >>> train_wordpiece({"hug": 2, "hugs": 1, "pug": 1}, 10, ["[UNK]"], progress=False)
    ['[UNK]', 'h', 'p', '##g', '##s', '##u', '##ug', 'hug', 'pug', 'hugs']
    >>> train_wordpiece({"hug": 2, "hugs": 1, "pug": 1}, 10, ["[UNK]"], score="pmi", progress=False)
    ['[UNK]', 'h', 'p', '##g', '##s', '##u', 'pu', 'hu', 'pug', 'hug']
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    check_wordpiece_score(score)
    counts = read_training_source(
        input_path,
        count_file=lambda path: count_split_words(path, BERT_WORDS, special_tokens=specials, lowercase=lowercase),
        count_texts=lambda texts: count_split_words(iter_texts(texts), BERT_WORDS, special_tokens=specials,
                                                    lowercase=lowercase),
        check_counts=_check_counts,
        nothing="words outside the special tokens",
        counts_types=(Mapping, WordCounts),
    )
    return _train(counts, vocab_size, specials, continuing_subword_prefix, score, progress)


def _check_counts(counts: Mapping[str, int] | WordCounts) -> dict[str, int]:
    """Word counts (a `Mapping`, or `WordCounts` made for WordPiece) with their zero counts and empty words left out."""
    if isinstance(counts, WordCounts):
        if counts.algorithm != "wordpiece":
            raise ValueError(f"these word counts were made for algorithm {counts.algorithm!r}, not 'wordpiece'")
        counts = counts.counts
    for word, count in counts.items():
        if not isinstance(word, str):
            raise TypeError(f"words must be str, got {word!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count of word {word!r} must be a non-negative int, got {count!r}")
    return {word: count for word, count in counts.items() if word and count}


def train_wordpiece_tokenizer(counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *,
                              byte_fallback: bool | None = None, score: str = DEFAULT_WORDPIECE_SCORE,
                              progress: bool = False) -> WordPieceTokenizer:
    """The WordPiece family's trainer: a `WordPieceTokenizer` learned from BERT word counts (`count_words`).

    It lower-cases as the counts did; a word it cannot cover becomes `[UNK]`, so `byte_fallback` is no
    option here (it is ignored). `score` is the merge rule (`WORDPIECE_SCORES`).
    """
    vocab = train_wordpiece(counts, vocab_size, special_tokens, score=score, progress=progress)
    return WordPieceTokenizer(vocab, lowercase=bool(counts.lowercase), special_tokens=special_tokens)


def check_wordpiece_score(score: str) -> str:
    """`score` if it names a merge rule (`WORDPIECE_SCORES`), else a ValueError listing them."""
    if score not in WORDPIECE_SCORES:
        raise ValueError(f"unknown WordPiece score {score!r}: choose one of {', '.join(map(repr, WORDPIECE_SCORES))}")
    return score


def _check_vocab_size(vocab_size: int, specials: list[str]) -> None:
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    if vocab_size < len(specials) + 1:
        raise ValueError(f"vocab_size={vocab_size} cannot hold {len(specials)} special tokens and an alphabet")


# ------------------------------------------------------------------------------------------ merges
class _Score:
    """freq(ab) / (freq(a) * freq(b)) as exact integers; "less" means a *greater* score (min-heap)."""

    __slots__ = ("count", "denominator")

    def __init__(self, count: int, denominator: int) -> None:
        self.count, self.denominator = count, denominator

    def __eq__(self, other: object) -> bool:
        return self.count * other.denominator == other.count * self.denominator  # type: ignore[attr-defined]

    def __lt__(self, other: _Score) -> bool:
        return self.count * other.denominator > other.count * self.denominator


def _invert(token: str) -> bytes:
    return b"".join((_MAX_CODE - ord(c) - 1).to_bytes(3, "big") for c in token) + _END


def _train(counts: Mapping[str, int], vocab_size: int, specials: list[str], prefix: str, score: str,
           progress: bool) -> list[str]:
    # 1. Vocabulary: specials, then the alphabet (first characters, then prefixed others).
    tokens = list(specials)
    alphabet = sorted({word[0] for word in counts}) + sorted(prefix + c for c in set("".join(w[1:] for w in counts)))
    tokens += [t for t in alphabet if t not in set(specials)]
    if vocab_size < len(tokens):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the corpus alphabet has {len(tokens) - len(specials)} "
            f"tokens (first characters and {prefix!r}-characters) plus {len(specials)} special tokens = {len(tokens)}"
        )
    ids = {token: i for i, token in enumerate(tokens)}
    if score == "frequency":
        return _merge_by_frequency(counts, tokens, ids, vocab_size, prefix, progress)
    # 2. Words as id lists, deduplicated with counts; token frequencies over the corpus.
    words: list[list[int]] = []
    freqs: list[int] = []
    token_freq: defaultdict[int, int] = defaultdict(int)  # token id -> occurrences
    for word, count in counts.items():
        word_ids = [ids[word[0]]] + [ids[prefix + c] for c in word[1:]]
        for token in word_ids:
            token_freq[token] += count
        if len(word_ids) > 1:
            words.append(word_ids)
            freqs.append(count)
    _merge(words, freqs, tokens, ids, _Scores(score, token_freq), vocab_size, prefix, progress)
    return tokens


def _merge_by_frequency(counts: Mapping[str, int], tokens: list[str], ids: dict[str, int], vocab_size: int,
                        prefix: str, progress: bool) -> list[str]:
    """`tokens` followed by the tokens that merging the most frequent pair makes (`bpe_merges.learn_merges`)."""
    # 2. Words of two or more symbols as ids: the first character, then prefixed ones.
    continuing = {c: ids[prefix + c] for c in set("".join(w[1:] for w in counts))}.__getitem__
    long_words = [word for word in counts if len(word) > 1]
    words = [[ids[word[0]], *map(continuing, word[1:])] for word in long_words]
    freqs = [counts[word] for word in long_words]
    # 3. Merges; UTF-8 order is code point order, so the kernel's tie-break is the greatest (a, b) too.
    token_bytes = [t.encode("utf-8", "surrogatepass") for t in tokens]
    num_merges = vocab_size - len(tokens)
    prefix_length = len(prefix.encode("utf-8", "surrogatepass"))
    bar = progress_bar(num_merges, progress, "WordPiece merges")
    if runs_kernel(sum(map(len, words)), KERNEL_MIN_SYMBOLS):
        import numpy as np  # only here: small runs need neither numpy nor numba (20 MB and 90 MB)

        symbols = np.fromiter(chain.from_iterable(words), dtype=np.int32)
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        learn_merges(symbols, lengths, freqs, token_bytes, num_merges, prefix_length=prefix_length)
    else:
        learn_merges_reference(words, freqs, token_bytes, num_merges, prefix_length=prefix_length)
    new_tokens = [t.decode("utf-8", "surrogatepass") for t in token_bytes[len(tokens):]]
    if bar is not None:
        bar.update(len(new_tokens))
        bar.close()
    return tokens + new_tokens


class _Scores:
    """The merge rule `score` ("pmi" or "likelihood") over the token frequencies it reads (`freq`, kept up to
    date by the merge loop).

    A heap entry is (order, inverted pair, pair, state): `order` sorts the greatest score first, `state`
    holds what the score was computed from, so an entry is current while `state(pair)` still equals it.
    """

    def __init__(self, score: str, token_freq: defaultdict[int, int]) -> None:
        self.score = score
        self.freq = token_freq  # token id -> occurrences in the current segmentation
        self.total = sum(token_freq.values())  # N, for "likelihood"

    def state(self, count: int, left: int, right: int) -> tuple[int, int, int]:
        return (count, self.freq[left] * self.freq[right], self.total if self.score == "likelihood" else 0)

    def bound_entry(self, token: int) -> tuple:
        """An entry that pops no later than any pair holding `token`: a bound on all their scores.

        pmi: c(ty) <= f(y) and c(yt) <= f(y), so each such score is <= 1/f(t). likelihood: c <= f(t) and
        c <= f(y), so c*log(c*N/(f(t)f(y))) <= f(t)*log(N/f(t)), raised by 1e-9 against rounding. Its
        inverted pair b"" sorts it before a pair entry of an equal score; its state None marks it.
        """
        f = self.freq[token]
        if self.score == "pmi":
            return ((-1 / f, _Score(1, f)), b"", token, None)
        return (-f * math.log(self.total / f) * (1 + 1e-9), b"", token, None)

    def entries(self, pairs: Iterable[int], pair_counts: Mapping[int, int], inverted: list[bytes]) -> list[tuple]:
        """Heap entries of the live pairs among `pairs`, each `(order, inverted pair, pair, state(pair))`.

        This is the trainer's hottest code (every live pair of both merged tokens, at every merge).
        """
        shift, mask, freq, total = PAIR_SHIFT, PAIR_MASK, self.freq, self.total
        live = [(pair, count) for pair in pairs if (count := pair_counts.get(pair, 0)) > 0]
        out = []
        for pair, count in live:
            left, right = pair >> shift, pair & mask
            denominator = freq[left] * freq[right]
            if self.score == "pmi":
                order = (-count / denominator, _Score(count, denominator))
                state = (count, denominator, 0)
            else:
                order = -count * math.log(count * total / denominator)
                state = (count, denominator, total)
            out.append((order, inverted[left] + inverted[right], pair, state))
        return out


def _merge(
    words: list[list[int]],
    freqs: list[int],
    tokens: list[str],
    ids: dict[str, int],
    scores: _Scores,
    vocab_size: int,
    prefix: str,
    progress: bool,
) -> None:
    """Merge best-scoring pairs until `tokens` holds `vocab_size` entries or no pair is left."""
    shift, token_freq = PAIR_SHIFT, scores.freq
    # 3. Pair counts, the pair -> words index (entries may repeat or go stale, as in BPE), and the
    # token -> pairs index (pairs whose score rises when the token's frequency falls).
    pair_counts: defaultdict[int, int] = defaultdict(int)
    where: defaultdict[int, list[int]] = defaultdict(list)
    pairs_of: defaultdict[int, set[int]] = defaultdict(set)
    for index, word in enumerate(words):
        for left, right in zip(word, word[1:]):
            pair = (left << shift) | right
            pair_counts[pair] += freqs[index]
            where[pair].append(index)
    _index_pairs(pairs_of, pair_counts)
    inverted = [_invert(t) for t in tokens]

    # 4. Max-heap by (score, greatest pair). An entry is current if its state still holds; a stale
    # one is re-pushed with its current score (or dropped once its count is 0).
    heap = scores.entries(pair_counts, pair_counts, inverted)
    heapq.heapify(heap)
    risen: set[int] = set()  # tokens whose frequency fell since their pairs were last scored
    bar = progress_bar(vocab_size - len(tokens), progress, "WordPiece merges")
    # 5. Merge loop.
    while len(tokens) < vocab_size and heap:
        _, _, pair, state = heapq.heappop(heap)
        if state is None:  # a token's bound (`bound_entry`): now re-score its pairs if they rose
            if pair in risen:
                risen.discard(pair)
                for item in scores.entries(_live_pairs(pairs_of, pair_counts, (pair,)), pair_counts, inverted):
                    heapq.heappush(heap, item)
            continue
        left, right = pair >> shift, pair & PAIR_MASK
        count = pair_counts.get(pair, 0)
        if count == 0:
            continue
        if state != scores.state(count, left, right):
            heapq.heappush(heap, scores.entries((pair,), pair_counts, inverted)[0])
            continue
        merged = tokens[left] + (tokens[right][len(prefix) :] if tokens[right].startswith(prefix) else tokens[right])
        new_id = ids.get(merged)
        if new_id is None:
            new_id = ids[merged] = len(tokens)
            tokens.append(merged)
            inverted.append(_invert(merged))
            if bar is not None:
                bar.update(1)
        new_pairs, replaced = merge_words(words, freqs, where.pop(pair), left, right, new_id, pair_counts, where)
        del pair_counts[pair]
        token_freq[left] -= replaced
        token_freq[right] -= replaced
        token_freq[new_id] += replaced
        scores.total -= replaced
        for item in scores.entries(new_pairs, pair_counts, inverted):
            heapq.heappush(heap, item)
        _index_pairs(pairs_of, new_pairs)
        for token in {left, right}:  # a lower frequency moves the bound: push it again
            if token_freq[token] > 0:
                risen.add(token)
                heapq.heappush(heap, scores.bound_entry(token))
        if len(heap) > 4 * len(pair_counts) + COMPACT_SLACK:
            # Most entries are stale duplicates: rebuild from the live pairs to bound memory.
            heap = scores.entries(pair_counts, pair_counts, inverted)
            heapq.heapify(heap)
            risen.clear()
    if bar is not None:
        bar.close()


def _index_pairs(pairs_of: defaultdict[int, set[int]], pairs: Iterable[int]) -> None:
    """Add each pair to the token -> pairs index under both of its tokens."""
    for pair in pairs:
        pairs_of[pair >> PAIR_SHIFT].add(pair)
        pairs_of[pair & PAIR_MASK].add(pair)


def _live_pairs(pairs_of: defaultdict[int, set[int]], pair_counts: defaultdict[int, int],
                merged: tuple[int, int]) -> set[int]:
    """The live pairs holding a token of the merged pair: their scores rose (new pairs have final counts)."""
    live_pairs: set[int] = set()
    for token in set(merged):
        live = [p for p in pairs_of[token] if pair_counts.get(p, 0) > 0]
        if 2 * len(live) < len(pairs_of[token]):
            pairs_of[token] = set(live)  # drop pairs that died
        live_pairs.update(live)
    return live_pairs
