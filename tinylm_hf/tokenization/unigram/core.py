"""Unigram encoding: the Viterbi segmentation of each unit under the pieces' log-probabilities.

Exactly sentencepiece's `EncodeOptimized` (and `tokenizers`' Unigram): for each start position in
order, each piece starting there (shortest first) offers a path; a path replaces the best one
ending at the same place only when its score is strictly higher, so ties keep the path whose last
piece starts earliest. A character no piece covers is one `<unk>` node scored
`min(score) - 10`; runs of them become one `<unk>` (or bytes, with byte fallback).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

from ..metaspace.sentencepiece_model import UNK_PIECE
from ..metaspace.core import MetaspaceTokenizer

# sentencepiece's kUnkPenalty: an unknown character scores this much below the worst piece.
UNK_PENALTY = 10.0


class UnigramTokenizer(MetaspaceTokenizer):
    """Unigram language-model tokenizer (T5, ALBERT, XLNet), sentencepiece's defaults for spaces.

    >>> pieces = [("<unk>", 0.0), ("▁", -2.0), ("▁a", -1.0), ("b", -2.5), ("a", -3.0), ("ab", -1.5)]
    >>> tok = UnigramTokenizer(pieces)
    >>> [tok.id_to_piece(i) for i in tok.encode("ab")]  # ▁+ab and ▁a+b tie at -3.5: ab starts first
    ['▁', 'ab']
    """

    model_type = "unigram"

    def __init__(self, pieces, *, unk_token: str = UNK_PIECE, byte_fallback: bool = False, **kwargs) -> None:
        super().__init__(pieces, unk_token=unk_token, byte_fallback=byte_fallback, **kwargs)
        self._score = {p: self.scores[i] for p, i in self.normal.items()}
        self.max_piece_length = max(map(len, self._score), default=1)
        self.unk_score = min(self._score.values(), default=0.0) - UNK_PENALTY

    def _segment(self, unit: str) -> list[tuple[str, int]]:
        size = len(unit)
        score_of = self._score
        longest = self.max_piece_length
        best = [0.0] * (size + 1)  # best path score ending at each position
        start_of = [-1] * (size + 1)  # where the last piece of that path starts (-1: none yet)
        for start in range(size):
            base = best[start]
            single = False
            for end in range(start + 1, min(size, start + longest) + 1):
                score = score_of.get(unit[start:end])
                if score is None:
                    continue
                if end == start + 1:
                    single = True
                candidate = base + score
                if start_of[end] == -1 or candidate > best[end]:
                    best[end], start_of[end] = candidate, start
            if not single:
                candidate = base + self.unk_score
                if start_of[start + 1] == -1 or candidate > best[start + 1]:
                    best[start + 1], start_of[start + 1] = candidate, start
        pieces = []
        end = size
        while end > 0:
            start = start_of[end]
            piece = unit[start:end]
            pieces.append((piece, self.normal.get(piece, -1)))
            end = start
        pieces.reverse()
        return pieces
