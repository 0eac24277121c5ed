"""A TinyLM folder over an OpenAI-compatible API: a small FastAPI app of our own over the model's public API.

`tinylm serve` loads the folder as `tinylm generate` does (refusing what it refuses, before anything listens) and
serves that one model under one name: chat completions, completions and responses (streamed as server-sent events
or not), the model list and health, in the bodies the `openai` client reads. `serving_requests` says what a request
gets (plain-text ids as `tinylm chat` encodes them, a 404 for another model's name, a 400 for a prompt that leaves
no room in the context or a field this server does not serve); `serving_generation` makes the tokens with
`model.generate` or the model's continuous batching. transformers' own server (`transformers.cli.serving`) is not
used: its internals change every release, and its app loads any model a client names.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# what the server imports; `pip install 'tinylm-hf[serve]'` installs them (openai is the tests' and users' client)
SERVE_PACKAGES = ("fastapi", "uvicorn")
SERVE_INSTALL = "pip install 'tinylm-hf[serve]'"
# a request body past this is a 413 before it is parsed: a megabyte of text is already far past any TinyLM context
MAX_BODY_BYTES = 4 * 2**20


def use_tokenizers_twins() -> None:
    """Make ``AutoTokenizer`` give each tokenizer family's exact ``tokenizers`` twin in this process.

    A folder naming the from-scratch class gets the twin, whose ids are the same and whose ``tokenizers`` model
    bounds a prompt's characters (``serving_requests.max_prompt_chars``) before it is encoded.
    """
    from transformers.models.auto import tokenization_auto

    from .tokenization.families import FAMILIES

    for family in FAMILIES.values():
        tokenization_auto.REGISTERED_TOKENIZER_CLASSES[family.slow_name] = family.fast


def check_serve_packages() -> None:
    """Raise ImportError naming what to install when the server's packages are not here."""
    import importlib.util

    if any(importlib.util.find_spec(name) is None for name in SERVE_PACKAGES):
        raise ImportError(f"serving needs {', '.join(SERVE_PACKAGES)}: {SERVE_INSTALL}")


def check_start(port: int, cb_sizes: dict[str, int | None]) -> None:
    """ValueError for a port outside 1..65535 or a continuous-batching size that is not positive."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port must lie in 1..65535, got {port!r}")
    for name, value in cb_sizes.items():
        if value is not None and value < 1:
            raise ValueError(f"{name} must be a positive number of blocks or tokens, got {value}")


def check_cache_holds_the_context(num_blocks: int | None, block_size: int | None, context: int | None) -> None:
    """ValueError when the paged cache cannot hold one request as long as the context: transformers' batching
    worker stops for good on such a request ("no requests can be scheduled"), and with it every later request."""
    if num_blocks is None or block_size is None or context is None or num_blocks * block_size >= context:
        return
    raise ValueError(f"--cb-num-blocks {num_blocks} x --cb-block-size {block_size} = {num_blocks * block_size} "
                     f"tokens of cache, fewer than the model's context ({context}): give at least {context} tokens "
                     f"(e.g. --cb-num-blocks {-(-context // block_size)})")


def served_name(folder: str | os.PathLike) -> str:
    """The model's name in requests and in `/v1/models`: the folder as given, without a trailing slash."""
    return str(Path(folder))


def server_url(host: str, port: int) -> str:
    """The base URL of the API at `host`:`port` (an IPv6 address in brackets)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"


def load_served_model(folder: str | os.PathLike, device: str, attn_implementation: str | None) -> Any:
    """The folder's model and tokenizer on `device`, refused as `tinylm generate` refuses them (one ValueError)."""
    from .publish import load_folder
    from .runtime import resolve_device
    from .serving_requests import ServedModel, max_prompt_chars

    from transformers import AutoTokenizer

    place = resolve_device(device)  # an absent GPU is refused before the model is read
    model, _ = load_folder(folder)  # refuses a folder that cannot generate, a tokenizer larger than the model, ...
    tokenizer = AutoTokenizer.from_pretrained(folder)  # the `tokenizers` twin (use_tokenizers_twins): the same ids
    model = model.to(place).eval()
    if attn_implementation is not None:
        model.set_attn_implementation(attn_implementation)
    context = getattr(model.config, "max_position_embeddings", None)
    return ServedModel(served_name(folder), model, tokenizer, max_prompt_chars(tokenizer, context))


class BodyLimit:
    """ASGI middleware: a request body past `limit` bytes is a 413 before the app parses it (declared or chunked:
    the rest is read and dropped, never held, so that the client reads the answer); a body within it is handed on
    whole."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before its body ended
                return None
            size, more = size + len(message.get("body", b"")), message.get("more_body", False)
            if size <= self.limit:
                chunks.append(message.get("body", b""))
            else:
                chunks.clear()
        if size > self.limit:
            return await self.refuse(size, scope, receive, send)
        body, handed = b"".join(chunks), False

        async def replay() -> dict:
            nonlocal handed
            if handed:
                return await receive()  # what follows the body: the disconnect a streamed reply listens for
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)

    async def refuse(self, size: int, scope: dict, receive: Callable, send: Callable) -> None:
        from fastapi.responses import JSONResponse

        from .serving_requests import RequestError

        error = RequestError(413, f"the request body is {size:,} bytes, past this server's limit of {self.limit:,}: "
                             "send a shorter prompt")
        await JSONResponse(error.body(), status_code=413)(scope, receive, send)


def build_app(served: Any, generator: Any) -> Any:
    """The FastAPI app: chat completions, completions, responses, the model (list) and health; nothing else.

    transformers' own app also loads any model a client names (`/load_model`, `/v1/audio/transcriptions`) and
    unloads the served one (`/reset`): no such route exists here.
    """
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, StreamingResponse

    from .serving_generation import GenerationUnavailable
    from .serving_requests import CHAT, COMPLETION, RESPONSES, RequestError, Route, prepare

    app = FastAPI()
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)

    @app.exception_handler(RequestError)
    async def refused(_request: Any, error: RequestError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(GenerationUnavailable)
    async def unavailable(_request: Any, error: GenerationUnavailable) -> JSONResponse:
        return JSONResponse({"error": {"message": str(error), "type": "server_error"}}, status_code=503)

    async def answer(route: Route, body: Any, shape: Any) -> Any:
        # encoding a long prompt takes a while (a WordPiece or Unigram prompt has no character bound): off the loop
        ids, config = await asyncio.to_thread(prepare, route, served, body)
        generator.admit(config)
        reply = Reply(served, generator, ids, config, body.get("seed"))
        if body.get("stream"):  # not streamed unless asked, as OpenAI's API (transformers streams responses)
            return StreamingResponse(shape.events(reply), media_type="text/event-stream")
        await reply.finish()
        return JSONResponse(shape.body(reply))

    @app.post("/v1/chat/completions")
    async def chat_completions(body: dict) -> Any:
        return await answer(CHAT, body, ChatShape)

    @app.post("/v1/completions")
    async def completions(body: dict) -> Any:
        return await answer(COMPLETION, body, CompletionShape)

    @app.post("/v1/responses")
    async def responses(body: dict) -> Any:
        return await answer(RESPONSES, body, ResponsesShape)

    entry = {"id": served.name, "object": "model", "created": 0, "owned_by": "local"}

    @app.get("/v1/models")
    def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [entry]})

    @app.get("/v1/models/{name:path}")
    def model(name: str) -> JSONResponse:
        if name != served.name:
            return JSONResponse(RequestError(404, f"the model {name!r} does not exist: this server serves "
                                             f"{served.name!r} only", code="model_not_found").body(), status_code=404)
        return JSONResponse(entry)

    @app.get("/health")
    def health() -> JSONResponse:
        if not generator.is_alive():
            return JSONResponse({"status": "unhealthy", "reason": "batching worker stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    return app


class Reply:
    """One request's reply as it is generated: its text in parts, its token counts and why it ended."""

    def __init__(self, served: Any, generator: Any, ids: list[int], config: Any, seed: int | None = None) -> None:
        import uuid

        from .serving_generation import TextDeltas

        self.served, self.generator, self.ids, self.config, self.seed = served, generator, ids, config, seed
        self.id, self.created = uuid.uuid4().hex, int(time.time())
        self.generated: list[int] = []
        self._text = TextDeltas(served.tokenizer)

    async def parts(self) -> Any:
        """The reply's text, part by part as tokens come (an async iterator of str)."""
        async for new in self.generator.tokens(self.ids, self.config, self.seed):
            self.generated += new
            if delta := self._text.add(new):
                yield delta
        if rest := self._text.rest():
            yield rest

    async def finish(self) -> None:
        async for _ in self.parts():
            pass

    @property
    def text(self) -> str:
        return self._text.text()

    @property
    def finish_reason(self) -> str:
        """"stop" when the reply ended at a stop token, "length" when at its token limit (or the context's end)."""
        stops = self.config.eos_token_id
        stops = set(stops) if isinstance(stops, (list, tuple)) else {stops}
        return "stop" if self.generated and self.generated[-1] in stops else "length"

    def usage(self) -> dict[str, int]:
        prompt, completion = len(self.ids), len(self.generated)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event carrying `data` as JSON."""
    import json

    return (f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n"


def stream_error(error: Exception) -> dict[str, Any]:
    """The body a stream ends with when generation fails after the first bytes were sent."""
    return {"error": {"message": f"generation failed: {error}", "type": "server_error"}}


class ChatShape:
    """`/v1/chat/completions` bodies: a `chat.completion`, or `chat.completion.chunk` events ending in [DONE]."""

    @staticmethod
    def body(reply: Reply) -> dict[str, Any]:
        message = {"role": "assistant", "content": reply.text}
        choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        return {"id": f"chatcmpl-{reply.id}", "object": "chat.completion", "created": reply.created,
                "model": reply.served.name, "choices": [choice], "usage": reply.usage()}

    @staticmethod
    def chunk(reply: Reply, delta: dict[str, str], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        body = {"id": f"chatcmpl-{reply.id}", "object": "chat.completion.chunk", "created": reply.created,
                "model": reply.served.name, "choices": [choice]}
        return sse({**body, "usage": reply.usage()} if finish else body)

    @classmethod
    async def events(cls, reply: Reply) -> Any:
        yield cls.chunk(reply, {"role": "assistant", "content": ""})
        try:
            async for part in reply.parts():
                yield cls.chunk(reply, {"content": part})
        except Exception as error:  # noqa: BLE001 (the status line is sent: the stream says why it ends)
            yield sse(stream_error(error))
            return
        yield cls.chunk(reply, {}, reply.finish_reason)
        yield "data: [DONE]\n\n"


class CompletionShape:
    """`/v1/completions` bodies: a `text_completion`, or `text_completion` chunks ending in [DONE]."""

    @staticmethod
    def body(reply: Reply, text: str | None = None, finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "text": reply.text if text is None else text, "logprobs": None,
                  "finish_reason": reply.finish_reason if text is None else finish}
        body = {"id": f"cmpl-{reply.id}", "object": "text_completion", "created": reply.created,
                "model": reply.served.name, "choices": [choice]}
        return {**body, "usage": reply.usage()} if choice["finish_reason"] else body

    @classmethod
    async def events(cls, reply: Reply) -> Any:
        try:
            async for part in reply.parts():
                yield sse(cls.body(reply, part))
        except Exception as error:  # noqa: BLE001 (the status line is sent: the stream says why it ends)
            yield sse(stream_error(error))
            return
        yield sse(cls.body(reply, "", reply.finish_reason))
        yield "data: [DONE]\n\n"


class ResponsesShape:
    """`/v1/responses` bodies: a `response`, or the Responses API's events from `response.created` to
    `response.completed` (`response.incomplete` when the reply reached its token limit)."""

    @staticmethod
    def body(reply: Reply, status: str | None = None) -> dict[str, Any]:
        status = status or ("completed" if reply.finish_reason == "stop" else "incomplete")
        done = status != "in_progress"
        usage = reply.usage()
        return {
            "id": f"resp_{reply.id}", "object": "response", "created_at": reply.created, "model": reply.served.name,
            "status": status, "error": None, "instructions": None, "tools": [], "tool_choice": "none",
            "parallel_tool_calls": False, "metadata": {},
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "output": [ResponsesShape.message(reply, reply.text)] if done else [],
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                      "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}} if done else None,
        }

    @staticmethod
    def message(reply: Reply, text: str, status: str = "completed") -> dict[str, Any]:
        content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
        return {"type": "message", "id": f"msg_{reply.id}", "status": status, "role": "assistant",
                "content": content}

    @classmethod
    async def events(cls, reply: Reply) -> Any:
        count = iter(range(1 << 62))
        where = {"item_id": f"msg_{reply.id}", "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}

        def event(kind: str, **fields: Any) -> str:
            return sse({"type": kind, "sequence_number": next(count), **fields}, kind)

        yield event("response.created", response=cls.body(reply, "in_progress"))
        yield event("response.output_item.added", output_index=0, item=cls.message(reply, "", "in_progress"))
        yield event("response.content_part.added", part=part, **where)
        try:
            async for delta in reply.parts():
                yield event("response.output_text.delta", delta=delta, logprobs=[], **where)
        except Exception as error:  # noqa: BLE001 (the status line is sent: the stream says why it ends)
            yield event("error", message=f"generation failed: {error}", code="server_error", param=None)
            return
        yield event("response.output_text.done", text=reply.text, logprobs=[], **where)
        yield event("response.content_part.done", part={**part, "text": reply.text}, **where)
        yield event("response.output_item.done", output_index=0, item=cls.message(reply, reply.text))
        done = cls.body(reply)
        yield event(f"response.{done['status']}", response=done)


def listening_socket(host: str, port: int) -> Any:
    """A socket bound to `host`:`port`; OSError naming the address and why when it cannot be (in use, not here)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        raise OSError(f"cannot listen on {host}:{port}: {err.strerror or err} (another port, or an address of "
                      "this machine)") from None
    return sock


class Server:
    """A running `tinylm serve` server: `url` and `model_name` are where it listens and what clients send."""

    def __init__(self, uvicorn_server: Any, generator: Any, url: str, model_name: str) -> None:
        self.url, self.model_name = url, model_name
        self._server, self._generator = uvicorn_server, generator
        self._thread: Any = None

    def start(self, sock: Any, timeout: float = 60.0) -> None:
        """Serve on the bound socket `sock` in a thread; OSError when it stopped before it listened."""
        import threading

        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="tinylm-serve",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self._server.started:
            self.stop()
            raise OSError(f"the server did not start on {self.url}")

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop listening and stop the generation threads (continuous batching's would keep the process alive)."""
        self._generator.stop()
        self._server.should_exit = True
        if self.is_running():
            self._thread.join(timeout=10)


def serve(
    folder: str | os.PathLike,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    device: str = "auto",
    attn_implementation: str | None = None,
    continuous_batching: bool = False,
    cb_num_blocks: int | None = None,
    cb_max_batch_tokens: int | None = None,
    cb_block_size: int | None = None,
    non_blocking: bool = False,
    on_start: Callable[[Server], None] | None = None,
) -> Server:
    """Serve the model folder ``folder`` on ``host``:``port`` until stopped (Ctrl-C, SIGTERM).

    Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (streamed or not), ``POST /v1/completions``,
    ``GET /v1/models``, ``GET /health``. The model's name in requests is ``served_name(folder)``; any other is a
    404. The folder is refused as ``tinylm generate`` refuses it (ValueError) before anything listens.
    ``continuous_batching`` batches concurrent requests over a paged KV cache, sized by the ``cb_*`` options
    (transformers' defaults when None: they suit a GPU, and take tens of seconds per request on a CPU).
    ``on_start`` is called once the server listens. Returns the stopped server, or at once with ``non_blocking``
    (the server runs in a thread; ``stop()`` stops it).
    """
    cb_sizes = {"cb_num_blocks": cb_num_blocks, "cb_max_batch_tokens": cb_max_batch_tokens,
                "cb_block_size": cb_block_size}
    check_start(port, cb_sizes)
    listening_socket(host, port).close()  # an address in use or not here is refused before the model is read
    from .training.model_folder import check_folder_files

    check_folder_files(folder)
    check_serve_packages()
    use_tokenizers_twins()
    served = load_served_model(folder, device, attn_implementation)
    from .serving_generation import BatchingGenerator, PlainGenerator, check_batching_api

    if continuous_batching:
        check_cache_holds_the_context(cb_num_blocks, cb_block_size, served.context)
        check_batching_api(served.model)
        from transformers import ContinuousBatchingConfig

        sizes = {"num_blocks": cb_num_blocks, "max_batch_tokens": cb_max_batch_tokens, "block_size": cb_block_size}
        sizes = {key: value for key, value in sizes.items() if value is not None}
        generator: Any = BatchingGenerator(served.model, ContinuousBatchingConfig(**sizes))
    else:
        generator = PlainGenerator(served.model)

    import uvicorn

    config = uvicorn.Config(build_app(served, generator), host=host, port=port, log_level="warning")
    server = Server(uvicorn.Server(config), generator, server_url(host, port), served.name)
    server.start(listening_socket(host, port))
    if on_start is not None:
        on_start(server)
    if non_blocking:
        return server
    try:
        while server.is_running():  # until Ctrl-C or SIGTERM; polled, so that Ctrl-C lands in this thread
            time.sleep(0.5)
    finally:
        server.stop()
    return server
