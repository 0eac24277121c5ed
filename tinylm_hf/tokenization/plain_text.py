"""Text is plain text: control tokens come only from templates, never from a user's or a dataset's text.

Every place where text meets a tokenizer (prepare, eval, generate, finetune, sft, chat) encodes it here.
`encode_plain` encodes a special token's spelling inside text (`<|endoftext|>`, `<|end|>`) as the ordinary
characters it is, as tiktoken's `encode` does unless told otherwise and transformers does with
`split_special_tokens=True`; document boundaries and chat markers are ids our code places.

`encode_chat` renders a conversation with the tokenizer's chat template and encodes it so that the
template's markers are control tokens and each message's content is plain text. transformers'
`apply_chat_template` cannot tell the two apart (it encodes the rendered text as a whole, and
`split_special_tokens=True` would flatten the markers too), so the template is rendered once with a
stand-in for each content: what the template wrote is where its markers may be. The ids equal
`apply_chat_template`'s whenever no content spells a special token, since a tokenizer encodes the text
between two special tokens on its own. Each piece of text is encoded once (plus the few characters
before an assistant turn), so the cost is linear in the conversation's length, and encoding stops as
soon as a conversation exceeds `max_tokens`.

A tokenizer that would still forge a control token from plain text (`forged_special_tokens`: the Unigram
fast twin, whose model holds the control pieces) gets such text refused, with the token named, instead.
"""

from __future__ import annotations

import bisect
import contextlib
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_STAND_IN = "\ue000{}\ue001"  # private-use characters around a message's index: a content stand-in
_STAND_IN_RE = re.compile("\ue000(\\d+)\ue001")


def encode_plain(tokenizer: Any, text: str | list[str], *, add_special_tokens: bool = False,
                 **options: Any) -> list[int] | list[list[int]]:
    """The ids of `text` (or of each text) with special-token text encoded as plain text.

    `options` go to the tokenizer call (`truncation`, `max_length`); `add_special_tokens` adds what the
    tokenizer's own pattern adds (nothing, for TinyLM's causal tokenizers).

    >>> ids = encode_plain(tokenizer, "a<|endoftext|>")  # doctest: +SKIP (a byte-level BPE tokenizer)
    >>> tokenizer.eos_token_id in ids, tokenizer.decode(ids)  # doctest: +SKIP
    (False, 'a<|endoftext|>')
    """
    refuse_forged_text(tokenizer, [text] if isinstance(text, str) else text)
    return _plain_ids(tokenizer, text, add_special_tokens=add_special_tokens, **options)


def _plain_ids(tokenizer: Any, text: str | list[str], *, add_special_tokens: bool = False, **options: Any) -> Any:
    return tokenizer(text, add_special_tokens=add_special_tokens, split_special_tokens=True, **options)["input_ids"]


def refuse_forged_text(tokenizer: Any, texts: Sequence[str]) -> None:
    """Refuse text that spells a special token `tokenizer` would forge from plain text (`forged_special_tokens`)."""
    forged = forged_special_tokens(tokenizer)
    if not forged:
        return
    pattern = re.compile("|".join(map(re.escape, forged)))
    for text in texts:
        found = pattern.search(text)
        if found:
            raise ValueError(f"the text spells {found.group(0)!r}, which {type(tokenizer).__name__} encodes as its "
                             "control token even as plain text (its model holds the token as a piece): load the "
                             "slow class (use_fast=False), or remove it from the text")


_FORGED: weakref.WeakKeyDictionary[Any, tuple[tuple[str, ...], tuple[str, ...]]] = weakref.WeakKeyDictionary()
# tokenizer -> (its special tokens, those it forges): probed once per tokenizer and set of special tokens


def forged_special_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The special tokens that `tokenizer` encodes as their control id even with `split_special_tokens=True`.

    None for TinyLM's classes but one: the Unigram family's fast twin, whose `tokenizers.Unigram` model holds
    the control pieces as ordinary scored pieces, so its Viterbi search finds `<|end|>` in text. Such text
    is refused (`encode_plain`) rather than forged.
    """
    specials = tuple(special_token_texts(tokenizer))
    try:
        known = _FORGED.get(tokenizer)
    except TypeError:  # an unhashable tokenizer: probed every time
        known = None
    if known is not None and known[0] == specials:
        return known[1]
    unknown = tokenizer.unk_token_id
    forged = tuple(token for token in specials if (token_id := tokenizer.convert_tokens_to_ids(token)) != unknown
                   and token_id in _plain_ids(tokenizer, f"a{token}b"))
    with contextlib.suppress(TypeError):
        _FORGED[tokenizer] = (specials, forged)
    return forged


def special_token_texts(tokenizer: Any) -> list[str]:
    """The special tokens' spellings in `tokenizer`, longest first (the order a matcher must try them in)."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    specials = set(tokenizer.all_special_tokens) | {t.content for t in added.values() if t.special}
    return sorted(specials, key=lambda s: (-len(s), s))


@dataclass
class ChatIds:
    """A conversation's ids and its assistant mask (1 where the assistant speaks: `{% generation %}` spans)."""

    ids: list[int]
    mask: list[int]


def encode_chat(tokenizer: Any, messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool = False,
                max_tokens: int | None = None) -> ChatIds | None:
    """`messages` rendered by the tokenizer's chat template: markers as control tokens, contents as plain text.

    Returns None as soon as the ids pass `max_tokens` (the rest is never encoded). The mask is what
    transformers' `return_assistant_tokens_mask=True` gives a fast tokenizer: an edge of a `{% generation %}`
    span inside a piece of text falls after the tokens of the text before it, which must begin that
    piece's ids (a span edge inside a token is a ValueError).
    """
    refuse_forged_text(tokenizer, [str(m["content"]) for m in messages])
    pieces, edges = _render_pieces(tokenizer, messages, add_generation_prompt)
    ids: list[int] = []
    edge_tokens: list[int] = []  # tokens before each span edge, in the order of `edges`
    for start, text, marker in _segments(pieces, _marker_pattern(tokenizer)):
        if marker:
            while len(edge_tokens) < len(edges) and edges[len(edge_tokens)] <= start:
                edge_tokens.append(len(ids))
            ids.append(tokenizer.convert_tokens_to_ids(text))
        else:
            chunk = _plain_ids(tokenizer, text)
            while len(edge_tokens) < len(edges) and edges[len(edge_tokens)] < start + len(text):
                edge_tokens.append(len(ids) + _tokens_before(tokenizer, text, chunk, edges[len(edge_tokens)] - start))
            ids += chunk
        if max_tokens is not None and len(ids) > max_tokens:
            return None
    edge_tokens += [len(ids)] * (len(edges) - len(edge_tokens))
    mask = [0] * len(ids)
    for first, last in zip(edge_tokens[::2], edge_tokens[1::2]):
        mask[first:last] = [1] * (last - first)
    return ChatIds(ids, mask)


def _tokens_before(tokenizer: Any, text: str, ids: list[int], edge: int) -> int:
    """How many of `ids` (the plain tokens of `text`) come before character `edge`."""
    head = _plain_ids(tokenizer, text[:edge]) if edge > 0 else []
    if ids[: len(head)] != head:
        raise ValueError(f"the tokenizer merges text across a turn boundary of the chat template (at "
                         f"{text[:edge][-30:]!r}), so the assistant's tokens cannot be told apart; use a tokenizer "
                         "whose special tokens split the text")
    return len(head)


def _segments(pieces: list[tuple[str, bool]], markers: re.Pattern[str] | None) -> list[tuple[int, str, bool]]:
    """(start offset, text, is a marker): the rendered text cut at the markers the template wrote.

    Text between two markers is one segment, whether the template or a content wrote it: a tokenizer
    encodes it as one piece of text.
    """
    segments: list[tuple[int, str, bool]] = []
    chunk: list[str] = []
    position = chunk_start = 0
    for text, from_template in pieces:
        parts = markers.split(text) if from_template and markers else [text]
        for i, part in enumerate(parts):
            if i % 2:
                if chunk:
                    segments.append((chunk_start, "".join(chunk), False))
                segments.append((position, part, True))
                chunk, chunk_start = [], position + len(part)
            elif part:
                chunk.append(part)
            position += len(part)
    if chunk:
        segments.append((chunk_start, "".join(chunk), False))
    return segments


def _marker_pattern(tokenizer: Any) -> re.Pattern[str] | None:
    """A regex matching any special token (longest first), in a group so that `split` keeps the matches."""
    specials = special_token_texts(tokenizer)
    return re.compile("(" + "|".join(map(re.escape, specials)) + ")") if specials else None


def _render_pieces(tokenizer: Any, messages: Sequence[dict[str, Any]],
                   add_generation_prompt: bool) -> tuple[list[tuple[str, bool]], list[int]]:
    """([(text, written by the template)], span edges): the rendered conversation cut where contents begin and end.

    The span edges are the `{% generation %}` spans' (start, end) character offsets, flattened, in the
    rendered text. A template that changes or inspects a content (so the stand-in renders otherwise than
    the text) is a ValueError: its markers could not be told from the text.
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    if not tokenizer.chat_template:
        raise ValueError("the tokenizer has no chat template: give it one with tinylm_hf.tokenization."
                         "chat_template.add_chat_tokens (or train it with `tinylm train-tokenizer --chat`)")
    stand_ins = [{**m, "content": _STAND_IN.format(i)} for i, m in enumerate(messages)]
    options = {"chat_template": tokenizer.chat_template, "add_generation_prompt": add_generation_prompt,
               **tokenizer.special_tokens_map}
    (shape,), (spans,) = render_jinja_template(conversations=[stand_ins], return_assistant_tokens_mask=True, **options)
    pieces: list[tuple[str, bool]] = []
    moved: list[tuple[int, int]] = []  # (stand-in text offset, how far the real text has moved by then)
    done, shift = 0, 0
    for match in _STAND_IN_RE.finditer(shape):
        content = str(messages[int(match.group(1))]["content"])
        pieces += [(shape[done:match.start()], True), (content, False)]
        shift += len(content) - len(match.group(0))
        moved.append((match.end(), shift))
        done = match.end()
    pieces.append((shape[done:], True))
    (text,) = render_jinja_template(conversations=[list(messages)], **options)[0]
    if "".join(p for p, _ in pieces) != text:
        raise ValueError("the chat template changes or inspects the messages' text, so its markers cannot be told "
                         "from the text: render each content unchanged ({{ message['content'] }})")
    ends = [end for end, _ in moved]
    edges = [edge + (moved[i - 1][1] if (i := bisect.bisect_right(ends, edge)) else 0)
             for span in spans for edge in span]
    return pieces, edges
