"""What `tinylm serve` answers a request with: transformers' handlers, fed the ids our rules give, or a 4xx.

transformers' handlers render a chat with `apply_chat_template` and a completion prompt with the tokenizer's
plain call, so a message that spells `<|end|>` or `<|assistant|>` becomes those control tokens (a client could
close its own turn and forge the assistant's). Here a handler takes its ids from `encode_chat` / `encode_plain`,
as `tinylm chat` and `tinylm generate` do: the only control tokens are the template's markers. Before any work
a request is checked: the model it names must be the served folder (404), its prompt must leave room for a reply
in the model's context (400), every reply is capped at the room left (it ends with finish_reason "length", the
text kept), and a field asking for what this server does not do (`n` > 1, logprobs, tools, images, stop strings,
a generation config of its own) is refused with a 400 naming it, never silently ignored. Generation, streaming
and continuous batching stay transformers' own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from transformers.cli.serving.chat_completion import ChatCompletionHandler
from transformers.cli.serving.completion import CompletionHandler
from transformers.cli.serving.response import ResponseHandler
from transformers.cli.serving.utils import CBGenerateManager, Modality

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


def check_batch_sampling(manager: Any, config: Any) -> None:
    """RequestError 400 when continuous batching already samples otherwise than `config` asks.

    transformers' continuous batching takes its sampling settings from the request that starts it and applies them
    to every later request: a request asking for others would silently get those.
    """
    running = getattr(manager, "_cb", None) if isinstance(manager, CBGenerateManager) else None
    if running is None or sampling(running.generation_config) == sampling(config):
        return
    raise RequestError(400, f"with --continuous-batching every request samples as the first one did "
                       f"({sampling(running.generation_config)}); this one asks for {sampling(config)}: send the "
                       "same settings, or start the server without --continuous-batching", param="temperature")


class ServedHandler:
    """What the chat, completion and response handlers share: one served model, ids by our rules, checked limits.

    Mixed in before a transformers handler class; `prompt_ids` and `dispatch` are the per-route parts.
    """

    refused_fields: frozenset[str] = frozenset()  # the fields of the route's schema this server does not serve

    def __init__(self, served: ServedModel, generation_state: Any) -> None:
        super().__init__(model_manager=None, generation_state=generation_state)  # type: ignore[call-arg]
        self.served = served

    def _resolve_model(self, body: dict[str, Any]) -> tuple[str, Any, Any]:
        requested = body.get("model")
        if requested is not None and requested != self.served.name:
            raise RequestError(404, f"the model {requested!r} does not exist: this server serves "
                               f"{self.served.name!r} only", param="model", code="model_not_found")
        return self.served.name, self.served.model, self.served.tokenizer

    async def handle_request(self, body: dict[str, Any], request_id: str) -> Any:
        import torch

        self._validate_request(body)  # transformers': 422 for a field outside the OpenAI schema
        refuse_what_is_not_served(body, self.refused_fields)
        check_sampling_fields(body)
        name, model, tokenizer = self._resolve_model(body)
        ids = self.prompt_ids(body)
        room = reply_room(len(ids), self.served.context)
        use_cb = self.generation_state.use_continuous_batching(model, Modality.LLM)
        config = self._build_generation_config(body, model.generation_config, use_cb=use_cb)
        if room is not None and (config.max_new_tokens is None or config.max_new_tokens > room):
            config.max_new_tokens = room  # the reply ends where the context does: finish_reason "length"
        manager = self.generation_state.get_manager(name, use_cb=use_cb)
        check_batch_sampling(manager, config)
        if use_cb:
            manager.init_cb(model, config)
            inputs: dict[str, Any] = {"input_ids": ids}
        else:
            tensor = torch.tensor([ids], device=model.device)
            inputs = {"input_ids": tensor, "attention_mask": torch.ones_like(tensor)}
        return await self.dispatch(body, request_id, inputs, config, manager)

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        """The prompt's ids, by this route's fields (each route's own)."""
        raise NotImplementedError

    async def dispatch(self, body: dict[str, Any], request_id: str, inputs: dict[str, Any], config: Any,
                       manager: Any) -> Any:
        """The answer: transformers' streaming or non-streaming reply of this route (each route's own)."""
        raise NotImplementedError


class ChatHandler(ServedHandler, ChatCompletionHandler):
    """`POST /v1/chat/completions`: a conversation's reply, streamed or not."""

    refused_fields = frozenset({"n", "logprobs", "top_logprobs", "tools", "functions", "function_call", "tool_choice",
                                "presence_penalty", "stop", "audio", "modalities", "prediction", "web_search_options",
                                "response_format", "generation_config", "chat_template_kwargs", "logit_bias"})

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        return chat_ids(self.served, plain_messages(body.get("messages")))

    async def dispatch(self, body: dict[str, Any], request_id: str, inputs: dict[str, Any], config: Any,
                       manager: Any) -> Any:
        served = self.served
        if body.get("stream"):
            return self._streaming(request_id, served.model, served.tokenizer, served.name, inputs, config,
                                   gen_manager=manager)
        return await self._non_streaming(request_id, served.model, served.tokenizer, served.name, inputs, config,
                                         gen_manager=manager)


class TextCompletionHandler(ServedHandler, CompletionHandler):
    """`POST /v1/completions`: a prompt's continuation, the prompt plain text."""

    refused_fields = frozenset({"n", "best_of", "logprobs", "echo", "suffix", "presence_penalty", "stop",
                                "generation_config", "logit_bias"})

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise RequestError(400, f"prompt must be one text, got {type(prompt).__name__}", param="prompt")
        refuse_text_past_the_context(self.served, [prompt], "prompt")
        try:
            return encode_plain(self.served.tokenizer, prompt)
        except ValueError as err:
            raise RequestError(400, f"prompt: {err}", param="prompt") from None

    async def dispatch(self, body: dict[str, Any], request_id: str, inputs: dict[str, Any], config: Any,
                       manager: Any) -> Any:
        served = self.served
        if body.get("stream"):
            return self._streaming(request_id, served.model, served.tokenizer, served.name, inputs, config, manager)
        return await self._non_streaming(request_id, served.model, served.tokenizer, served.name, inputs, config,
                                         manager)


class ResponsesHandler(ServedHandler, ResponseHandler):
    """`POST /v1/responses`: the Responses API's reply to `input` (and `instructions`), streamed by default."""

    refused_fields = frozenset({"tools", "tool_choice", "include", "previous_response_id", "text", "truncation",
                                "background", "max_tool_calls", "prompt", "reasoning", "top_logprobs",
                                "generation_config", "chat_template_kwargs"})

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        source = body.get("input")
        if isinstance(source, str):
            messages: Any = [{"role": "user", "content": source}]
        elif isinstance(source, list) and source and all(isinstance(m, dict) and "role" in m for m in source):
            # items sent back from an earlier response carry their id, status and type: only the text counts
            messages = [{key: value for key, value in m.items() if key not in ("id", "status", "type")}
                        for m in source]
        elif isinstance(source, list) and source:
            messages = [{"role": "user", "content": source}]
        else:
            raise RequestError(400, "input must be a text or a non-empty list of messages", param="input")
        instructions = body.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise RequestError(400, "instructions must be a text", param="instructions")
            messages = [{"role": "system", "content": instructions}, *messages]
        return chat_ids(self.served, plain_messages(messages))

    async def dispatch(self, body: dict[str, Any], request_id: str, inputs: dict[str, Any], config: Any,
                       manager: Any) -> Any:
        served = self.served
        if body.get("stream", True):
            return self._streaming(request_id, served.model, served.tokenizer, served.name, body, inputs, config,
                                   gen_manager=manager)
        return await self._non_streaming(request_id, served.model, served.tokenizer, served.name, body, inputs,
                                         config, gen_manager=manager)
