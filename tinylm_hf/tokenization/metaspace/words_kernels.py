"""Finding sentencepiece's words in UTF-8 bytes as a numba kernel: `metaspace_word_bounds`.

The reference is `train._words` (each non-empty line with the dummy prefix, cut before each `▁`). A word is `▁`
followed by a key that holds no `▁`: the keys of a line are its parts between spaces and literal `▁`s, empty parts
included (`a  b` -> `▁a`, `▁`, `▁b`). The kernel returns the keys' spans; `pretoken_counts_kernels.count_spans`
counts them. Imported only after `kernels_enabled()`.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit

_NEWLINE, _SPACE = 0x0A, 0x20
_META = (0xE2, 0x96, 0x81)  # `▁` (U+2581) in UTF-8


@njit()
def metaspace_word_bounds(data, text_bounds, most_words):
    """(starts, ends) of the words' keys in `data`, the UTF-8 bytes of texts data[text_bounds[t]:text_bounds[t+1]]
    holding at most `most_words` words.

    A text's end ends its last line; an empty line has no words."""
    starts = np.empty(most_words, dtype=np.int64)
    ends = np.empty(most_words, dtype=np.int64)
    found = 0
    for t in range(len(text_bounds) - 1):
        end = text_bounds[t + 1]
        line = key = i = text_bounds[t]
        while i < end:
            byte = data[i]
            step = 1
            if byte == _NEWLINE or byte == _SPACE or (
                    byte == _META[0] and i + 2 < end and data[i + 1] == _META[1] and data[i + 2] == _META[2]):
                if byte == _META[0]:
                    step = 3
                if byte != _NEWLINE or i > line:
                    starts[found], ends[found] = key, i
                    found += 1
                if byte == _NEWLINE:
                    line = i + 1
                key = i + step
            i += step
        if end > line:
            starts[found], ends[found] = key, end
            found += 1
    return starts[:found], ends[:found]
