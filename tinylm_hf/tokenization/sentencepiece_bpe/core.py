"""SentencePiece-style BPE encoding: merge the adjacent pair whose joined piece scores highest.

Exactly sentencepiece's `bpe_model.cc` rule: start from code points, repeatedly join the adjacent
pair whose concatenation is a piece with the highest score (ties: the leftmost pair), until no pair
joins. Characters no piece covers fall back to `<0x..>` byte pieces (or one `<unk>` a run).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

import heapq

from ..metaspace.sentencepiece_model import UNK_PIECE
from ..metaspace.core import MetaspaceTokenizer


class SentencePieceBPETokenizer(MetaspaceTokenizer):
    """SentencePiece BPE (Llama 2's tokenizer family): code points, `▁` for spaces, byte fallback.

    Examples:
        >>> pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("▁a", 0.0), ("ab", -1.0),
        ...           ("▁ab", -2.0), ("a", -3.0), ("b", -4.0), ("▁", -5.0)]
        >>> tok = SentencePieceBPETokenizer(pieces, byte_fallback=False)
        >>> [tok.id_to_piece(i) for i in tok.encode("ab b")]
        ['▁ab', '▁', 'b']
    """

    model_type = "bpe"

    def __init__(self, pieces, *, unk_token: str = UNK_PIECE, byte_fallback: bool = True, **kwargs) -> None:
        super().__init__(pieces, unk_token=unk_token, byte_fallback=byte_fallback, **kwargs)
        self._merge_score = {p: self.scores[i] for p, i in self.normal.items()}

    def _segment(self, unit: str) -> list[tuple[str, int]]:
        symbols = list(unit)  # symbols[i] == "" once merged into its left neighbour
        following = list(range(1, len(symbols) + 1))  # index of the next live symbol (len: none)
        preceding = list(range(-1, len(symbols) - 1))  # index of the previous live symbol (-1: none)
        score_of = self._merge_score
        # Agenda: (-score, left, right, joined length); the best score pops first, ties leftmost.
        agenda = []
        for i in range(len(symbols) - 1):
            score = score_of.get(symbols[i] + symbols[i + 1])
            if score is not None:
                agenda.append((-score, i, i + 1, 2))
        heapq.heapify(agenda)
        end = len(symbols)
        while agenda:
            _, left, right, size = heapq.heappop(agenda)
            a, b = symbols[left], symbols[right]
            if not a or not b or len(a) + len(b) != size:
                continue  # stale: one side was merged since
            symbols[left], symbols[right] = a + b, ""
            nxt = following[right]
            following[left] = nxt
            if nxt < end:
                preceding[nxt] = left
            prev = preceding[left]
            if prev >= 0:
                self._push(agenda, symbols, prev, left)
            if nxt < end:
                self._push(agenda, symbols, left, nxt)
        normal = self.normal
        return [(s, normal.get(s, -1)) for s in symbols if s]

    def _push(self, agenda: list, symbols: list[str], left: int, right: int) -> None:
        joined = symbols[left] + symbols[right]
        score = self._merge_score.get(joined)
        if score is not None:
            heapq.heappush(agenda, (-score, left, right, len(joined)))
