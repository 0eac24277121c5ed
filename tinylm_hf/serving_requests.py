"""What `tinylm serve` answers a request with: the prompt ids and generation config our rules give, or a 4xx.

A chat is rendered with `encode_chat` and a completion prompt with `encode_plain`, as `tinylm chat` and
`tinylm generate` encode them: a message that spells `<|end|>` or `<|assistant|>` is those characters, never the
control tokens (a client cannot close its own turn and forge the assistant's); the only control tokens are the
template's markers. Before any work a request is checked: a field the route does not read is a 400, the model it
names must be the served folder (404), its prompt must leave room for a reply in the model's context (400), every
reply is capped at the room left (it ends with finish_reason "length", the text kept), and a field asking for what
this server does not do (`n` > 1, logprobs, tools, images, stop strings, a generation config of its own) is
refused with a 400 naming it, never silently ignored.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .tokenization.plain_text import encode_chat, encode_plain


class RequestError(Exception):
    """A request the server refuses: answered with `status` and an OpenAI-style error body naming `param`."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        kind = "not_found_error" if self.status == 404 else "invalid_request_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass
class ServedModel:
    """The one model a server serves: its name (what clients send as `model`), the model and its tokenizer."""

    name: str
    model: Any
    tokenizer: Any
    max_prompt_chars: int | None = None  # max_prompt_chars(tokenizer, context)

    @property
    def context(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)


def max_prompt_chars(tokenizer: Any, context: int | None) -> int | None:
    """Characters past which a text is sure to be longer than `context` tokens, or None where none is sure.

    A BPE model without an unknown token (byte-level) spells every character: no token stands for more than its
    longest decoded spelling and a separator. (A WordPiece or Unigram model reads a whole unknown word as one
    token: no bound.) A longer text is refused without being encoded: encoding 2 MB takes seconds, during
    which the server answers no one.
    """
    from tokenizers.models import BPE

    backend = getattr(getattr(tokenizer, "_tokenizer", None), "model", None)
    spells_everything = isinstance(backend, BPE) and (backend.unk_token is None or backend.byte_fallback)
    if context is None or not spells_everything:
        return None
    longest = max(len(tokenizer.decode([i])) for i in range(len(tokenizer)))
    return context * (longest + 1)


# field -> the values that ask for nothing this server leaves undone (None: the field absent or null)
NOTHING_ASKED: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "best_of": (None, 1), "logprobs": (None, False), "top_logprobs": (None, 0),
    "echo": (None, False), "suffix": (None, ""), "tools": (None, []), "functions": (None, []),
    "function_call": (None, "none"), "tool_choice": (None, "none", "auto"), "presence_penalty": (None, 0),
    "stop": (None, [], ""), "modalities": (None, ["text"]), "response_format": (None, {"type": "text"}),
    "chat_template_kwargs": (None, {}), "include": (None, []), "text": (None, {"format": {"type": "text"}}),
    "truncation": (None, "disabled"), "background": (None, False),
}
WHY_REFUSED = {
    "n": "one choice per request", "best_of": "one choice per request", "logprobs": "no log-probabilities",
    "top_logprobs": "no log-probabilities", "echo": "no echo of the prompt", "suffix": "no fill-in-the-middle",
    "tools": "no tool calls (the chat template has no tool format)", "functions": "no tool calls",
    "function_call": "no tool calls", "tool_choice": "no tool calls", "presence_penalty": "no presence penalty",
    "stop": "no stop strings (a chat model stops at its end-of-turn token; cut the text yourself)",
    "audio": "text only", "modalities": "text only", "prediction": "no predicted outputs",
    "web_search_options": "no web search", "response_format": "plain text only",
    "generation_config": "no generation config from a request (it would replace the folder's, its stop token "
                         "included): use temperature, top_p, max_tokens",
    "chat_template_kwargs": "no chat template options", "include": "nothing to include",
    "previous_response_id": "no stored responses", "text": "plain text only", "truncation": "no truncation",
    "background": "no background responses", "max_tool_calls": "no tool calls", "prompt": "no stored prompts",
    "reasoning": "no reasoning", "logit_bias": "no logit bias",
}
MAX_TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
MESSAGE_KEYS = ("role", "content")


def refuse_what_is_not_served(body: dict[str, Any], fields: set[str]) -> None:
    """RequestError 400 for a field of `fields` in `body` that asks for what this server does not do."""
    for field in sorted(fields & body.keys()):
        if body[field] not in NOTHING_ASKED.get(field, (None, {})):
            raise RequestError(400, f"{field}={body[field]!r} is not served: {WHY_REFUSED.get(field, 'not served')}",
                               param=field, code="unsupported_parameter")


def check_sampling_fields(body: dict[str, Any]) -> None:
    """RequestError 400 for a token limit, temperature, top_p, frequency_penalty or seed out of range or of a wrong type."""
    for field in MAX_TOKEN_FIELDS:
        value = body.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise RequestError(400, f"{field} must be a whole number >= 1, got {value!r}", param=field)
    ranges = {"temperature": (0.0, 2.0, True), "top_p": (0.0, 1.0, False), "frequency_penalty": (-1.0, 2.0, False)}
    for field, (low, high, low_included) in ranges.items():
        value = body.get(field)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not number or not (low <= value <= high if low_included else low < value <= high):
            interval = f"{'[' if low_included else '('}{low:g}, {high:g}]"
            raise RequestError(400, f"{field} must be a number in {interval}, got {value!r}", param=field)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise RequestError(400, f"seed must be a whole number in [0, 2**63), got {seed!r}", param="seed")


def plain_messages(messages: Any) -> list[dict[str, str]]:
    """`messages` as [{"role", "content": text}]; RequestError 400 for anything but text messages."""
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list of {role, content}", param="messages")
    plain = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(400, f"{where} must be an object with a role and a content", param=where)
        extra = sorted(key for key, value in message.items()
                       if key not in MESSAGE_KEYS and value not in (None, [], ""))  # a sent-back answer's nulls
        if extra:
            raise RequestError(400, f"{where}.{extra[0]} is not served: messages are role and text content only",
                               param=f"{where}.{extra[0]}", code="unsupported_parameter")
        plain.append({"role": message["role"], "content": text_content(message.get("content"), where)})
    return plain


def text_content(content: Any, where: str) -> str:
    """A message content as text: a string, or text parts joined with a space (as transformers joins them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(400, f"{where}.content must be text or a list of text parts", param=f"{where}.content")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("text", "input_text", "output_text") or not isinstance(part.get("text"), str):
            raise RequestError(400, f"{where}.content holds a {kind or type(part).__name__} part: this model reads "
                               "text only", param=f"{where}.content", code="unsupported_content")
        texts.append(part["text"])
    return " ".join(texts)


def refuse_text_past_the_context(served: ServedModel, texts: list[str], param: str) -> None:
    """RequestError 400 for texts with more characters than the context could hold (`max_prompt_chars`)."""
    chars = sum(map(len, texts))
    if served.max_prompt_chars is not None and chars > served.max_prompt_chars:
        raise RequestError(400, f"the prompt is {chars} characters, more than this model's context of "
                           f"{served.context} tokens can hold: shorten it", param=param,
                           code="context_length_exceeded")


def chat_ids(served: ServedModel, messages: list[dict[str, str]]) -> list[int]:
    """The prompt ids of a conversation: the template's markers as control tokens, each content as plain text.

    Encoding stops as soon as the ids leave no room for a reply (a long conversation is never encoded whole).
    """
    from jinja2.exceptions import TemplateError

    refuse_text_past_the_context(served, [m["content"] for m in messages], "messages")
    limit = None if served.context is None else served.context - 1
    try:
        encoded = encode_chat(served.tokenizer, messages, add_generation_prompt=True, max_tokens=limit)
    except (ValueError, TemplateError) as err:
        raise RequestError(400, f"messages: {err}", param="messages") from None
    if encoded is None:
        raise RequestError(400, f"the prompt is more than {limit} tokens but this model reads at most "
                           f"{served.context} (its context), with room for a reply: shorten it to {limit} tokens or "
                           "fewer", param="messages", code="context_length_exceeded")
    return encoded.ids


def reply_room(prompt_length: int, context: int | None) -> int | None:
    """How many tokens a reply may have after a prompt of `prompt_length`; RequestError 400 when none."""
    if prompt_length == 0:
        raise RequestError(400, "the prompt is empty", param="prompt")
    if context is None:
        return None
    if prompt_length >= context:
        raise RequestError(400, f"the prompt is {prompt_length} tokens but this model reads at most {context} "
                           f"(its context), with room for a reply: shorten it to {context - 1} tokens or fewer",
                           code="context_length_exceeded")
    return context - prompt_length


def sampling(config: Any) -> str:
    """How `config` picks tokens, in words: "greedy" or the sampling settings, and any repetition penalty."""
    words = (f"temperature {config.temperature}, top_p {config.top_p}, top_k {config.top_k}" if config.do_sample
             else "greedy")
    penalty = config.repetition_penalty
    return words if penalty in (None, 1.0) else f"{words}, repetition penalty {penalty}"


def check_model(served: ServedModel, body: dict[str, Any]) -> None:
    """RequestError 404 when the request names a model other than the served one."""
    requested = body.get("model")
    if requested is not None and requested != served.name:
        raise RequestError(404, f"the model {requested!r} does not exist: this server serves {served.name!r} only",
                           param="model", code="model_not_found")


def completion_ids(served: ServedModel, body: dict[str, Any]) -> list[int]:
    """The prompt ids of a text completion: the prompt as plain text."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise RequestError(400, f"prompt must be one text, got {type(prompt).__name__}", param="prompt")
    refuse_text_past_the_context(served, [prompt], "prompt")
    try:
        return encode_plain(served.tokenizer, prompt)
    except ValueError as err:
        raise RequestError(400, f"prompt: {err}", param="prompt") from None


def conversation_ids(served: ServedModel, body: dict[str, Any]) -> list[int]:
    """The prompt ids of a chat completion's `messages`."""
    return chat_ids(served, plain_messages(body.get("messages")))


def response_ids(served: ServedModel, body: dict[str, Any]) -> list[int]:
    """The prompt ids of a Responses request: `instructions` as the system message, then `input` (text or messages)."""
    source = body.get("input")
    if isinstance(source, str):
        messages: Any = [{"role": "user", "content": source}]
    elif isinstance(source, list) and source and all(isinstance(m, dict) and "role" in m for m in source):
        # items sent back from an earlier response carry their id, status and type: only the text counts
        messages = [{key: value for key, value in m.items() if key not in ("id", "status", "type")} for m in source]
    elif isinstance(source, list) and source:
        messages = [{"role": "user", "content": source}]
    else:
        raise RequestError(400, "input must be a text or a non-empty list of messages", param="input")
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise RequestError(400, "instructions must be a text", param="instructions")
        messages = [{"role": "system", "content": instructions}, *messages]
    return chat_ids(served, plain_messages(messages))


@dataclass(frozen=True)
class Route:
    """What one endpoint reads: its fields, the schema's fields it refuses, its token limit and its prompt."""

    fields: frozenset[str]  # what it reads (and the OpenAI client may send)
    refused: frozenset[str]  # fields of its OpenAI schema refused unless they ask for nothing (NOTHING_ASKED)
    max_tokens: tuple[str, ...]  # the fields that limit the reply, the first given wins
    prompt_ids: Callable[[ServedModel, dict[str, Any]], list[int]]


SAMPLING_FIELDS = frozenset({"model", "stream", "temperature", "top_p", "seed", "user"})
CHAT = Route(SAMPLING_FIELDS | {"messages", "stream_options", "max_tokens", "max_completion_tokens",
                                "frequency_penalty"},
             frozenset({"n", "logprobs", "top_logprobs", "tools", "functions", "function_call", "tool_choice",
                        "presence_penalty", "stop", "audio", "modalities", "prediction", "web_search_options",
                        "response_format", "generation_config", "chat_template_kwargs", "logit_bias"}),
             ("max_completion_tokens", "max_tokens"), conversation_ids)
COMPLETION = Route(SAMPLING_FIELDS | {"prompt", "stream_options", "max_tokens", "frequency_penalty"},
                   frozenset({"n", "best_of", "logprobs", "echo", "suffix", "presence_penalty", "stop",
                              "generation_config", "logit_bias"}),
                   ("max_tokens",), completion_ids)
RESPONSES = Route(SAMPLING_FIELDS | {"input", "instructions", "max_output_tokens"},
                  frozenset({"tools", "tool_choice", "include", "previous_response_id", "text", "truncation",
                             "background", "max_tool_calls", "prompt", "reasoning", "top_logprobs",
                             "generation_config", "chat_template_kwargs"}),
                  ("max_output_tokens",), response_ids)


def refuse_unknown_fields(body: dict[str, Any], route: Route) -> None:
    """RequestError 400 naming the first field that is neither read nor refused by `route`."""
    unknown = sorted(body.keys() - route.fields - route.refused)
    if unknown:
        raise RequestError(400, f"{unknown[0]} is not a field this server reads here: drop it", param=unknown[0],
                           code="unsupported_parameter")


def generation_config(default: Any, body: dict[str, Any], route: Route, room: int | None) -> Any:
    """The folder's generation config with the request's sampling, its reply capped at `room` tokens.

    Without a token limit (and no context) a reply may have max(the folder's max_new_tokens, 1024) tokens.
    """
    config = copy.deepcopy(default)
    asked = next((body[field] for field in route.max_tokens if body.get(field) is not None), None)
    limits = [n for n in (asked, room) if n is not None]
    config.max_new_tokens = min(limits) if limits else max(config.max_new_tokens or 0, 1024)
    if body.get("temperature") is not None:
        config.do_sample = body["temperature"] > 0  # 0: greedy
        config.temperature = float(body["temperature"]) if config.do_sample else config.temperature
    if body.get("top_p") is not None:
        config.top_p = float(body["top_p"])
    if body.get("frequency_penalty") is not None:
        config.repetition_penalty = 1.0 + float(body["frequency_penalty"])
    return config


def prepare(route: Route, served: ServedModel, body: Any) -> tuple[list[int], Any]:
    """(prompt ids, generation config) for `body` on `route`; RequestError 4xx for what is refused.

    Checks come before any encoding: the fields, their values, the model's name, then the prompt's length.
    """
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    refuse_unknown_fields(body, route)
    refuse_what_is_not_served(body, route.refused)
    check_sampling_fields(body)
    check_model(served, body)
    ids = route.prompt_ids(served, body)
    room = reply_room(len(ids), served.context)
    return ids, generation_config(served.model.generation_config, body, route, room)
