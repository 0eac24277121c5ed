"""The chat format of TinyLM models: the role markers, the end-of-turn token and the one Jinja chat template.

A conversation renders as Phi-3's format, which llama.cpp's own `llama_chat_apply_template` knows by
name (`phi3`), so a GGUF export formats prompts exactly as `tokenizer.apply_chat_template` does::

    <|system|>\\nYou tell stories.<|end|>\\n<|user|>\\nTell me a story.<|end|>\\n<|assistant|>\\nOnce upon a time ...<|end|>\\n

Each assistant turn's text and its `<|end|>` sit between `{% generation %}` markers, so transformers'
`return_assistant_tokens_mask=True` marks exactly the tokens a model learns to say; `<|end|>` is the
token generation stops at. The markers are special tokens that only the template writes: `plain_text.encode_chat`
encodes each message as plain text, so text typed by a user cannot forge them. A folder is a chat model's
when its template renders this format (`renders_chat_format`), however the template is spelled.

This file imports nothing of tinylm_hf: it may be copied into a saved folder with the tokenizer code.
"""

from __future__ import annotations

import functools
from typing import Any

SYSTEM_TOKEN = "<|system|>"
USER_TOKEN = "<|user|>"
ASSISTANT_TOKEN = "<|assistant|>"
END_OF_TURN_TOKEN = "<|end|>"
CHAT_TOKENS = (SYSTEM_TOKEN, USER_TOKEN, ASSISTANT_TOKEN, END_OF_TURN_TOKEN)
ROLES = ("system", "user", "assistant")  # the roles the template knows, in the order of CHAT_TOKENS

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('unknown role ' + message['role'] + ': use system, user or assistant') }}"
    "{%- endif -%}"
    "{{ '<|' + message['role'] + '|>\\n' }}"
    "{%- if message['role'] == 'assistant' -%}"
    "{% generation %}{{ message['content'] + '" + END_OF_TURN_TOKEN + "' }}{% endgeneration %}{{ '\\n' }}"
    "{%- else -%}"
    "{{ message['content'] + '" + END_OF_TURN_TOKEN + "\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '" + ASSISTANT_TOKEN + "\\n' }}{%- endif -%}"
)
"""The Jinja template transformers renders (saved as chat_template.jinja beside the tokenizer)."""

GENERATION_MARKERS = ("{% generation %}", "{% endgeneration %}")


def portable_chat_template(template: str = CHAT_TEMPLATE) -> str:
    """`template` without its `{% generation %}` markers: the same text for Jinja engines that lack that tag.

    The markers are a transformers extension (they render nothing); llama.cpp's Jinja engine and other
    runtimes reading a GGUF's `tokenizer.chat_template` would reject the unknown tag.
    """
    for marker in GENERATION_MARKERS:
        template = template.replace(marker, "")
    return template


def add_chat_tokens(tokenizer: Any) -> int:
    """Give `tokenizer` the chat tokens (as special tokens) and `CHAT_TEMPLATE`; returns how many ids were added.

    Tokens already in the vocabulary (a tokenizer trained with them, `tinylm train-tokenizer --chat`) keep
    their ids; others are appended after the last id, so a model using the tokenizer must grow its
    embeddings to `len(tokenizer)` (`model.resize_token_embeddings`).
    """
    present = [token for token in CHAT_TOKENS if token in tokenizer.all_special_tokens]
    added = tokenizer.add_special_tokens({"extra_special_tokens": [t for t in CHAT_TOKENS if t not in present]},
                                         replace_extra_special_tokens=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    return added


PROBE_CONVERSATIONS = (
    [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "\nHi\n\n"},
     {"role": "assistant", "content": "Hello <b>!\n"}, {"role": "user", "content": "{{ x }} <|end|>"}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": " "}],
)  # every role, edge whitespace, markup and marker text: what a template that differs renders otherwise


@functools.lru_cache(maxsize=16)
def renders_chat_format(template: str | None) -> bool:
    """True when `template` renders every probe conversation exactly as `CHAT_TEMPLATE` does.

    What a template does decides, not how it is spelled: an editor's final newline in chat_template.jinja,
    or the template without its `{% generation %}` markers (`portable_chat_template`), is the same format.
    """
    if not isinstance(template, str):
        return False
    if template == CHAT_TEMPLATE:
        return True
    from transformers.utils.chat_template_utils import render_jinja_template

    def render(source: str) -> list[str]:
        return [render_jinja_template(conversations=[list(c)], chat_template=source, add_generation_prompt=g)[0][0]
                for c in PROBE_CONVERSATIONS for g in (False, True)]

    try:
        return render(template) == render(CHAT_TEMPLATE)
    except Exception:  # any error of arbitrary template code: it does not render this format
        return False


def has_chat_format(tokenizer: Any) -> bool:
    """True when `tokenizer` holds every chat token as a special token and its template renders `CHAT_TEMPLATE`'s text."""
    special = set(tokenizer.all_special_tokens)
    return renders_chat_format(tokenizer.chat_template) and all(token in special for token in CHAT_TOKENS)


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The id of `END_OF_TURN_TOKEN` when `tokenizer`'s template renders `CHAT_TEMPLATE`'s text, else None."""
    if not renders_chat_format(tokenizer.chat_template):
        return None
    return tokenizer.get_vocab().get(END_OF_TURN_TOKEN)


def stop_token_ids(tokenizer: Any) -> list[int]:
    """The ids generation stops at: the end-of-turn token (a chat tokenizer's), then the eos token."""
    ids = [end_of_turn_id(tokenizer), tokenizer.eos_token_id]
    return list(dict.fromkeys(i for i in ids if i is not None))
