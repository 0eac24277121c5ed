"""A TinyLM folder over an OpenAI-compatible API, with transformers' server machinery (`transformers serve`).

`tinylm serve` loads the folder as `tinylm generate` does (refusing what it refuses, before anything listens) and
serves that one model under one name with transformers' request handlers, generation managers, streamers and
continuous batching, in an app of its own: chat completions, completions, responses, the model list and health.
transformers' app would also load any model a client names and unload the served one; this one does not.
`serving_requests` says what a request gets: plain-text ids as `tinylm chat` encodes them, a 404 for another
model's name, a 400 for a prompt that leaves no room in the context or a field this server does not serve.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# what transformers' server machinery imports (its `serving` extra); `pip install 'tinylm-hf[serve]'` installs them
SERVE_PACKAGES = ("fastapi", "uvicorn", "openai", "pydantic")
SERVE_INSTALL = "pip install 'tinylm-hf[serve]'"


def use_tokenizers_twins() -> None:
    """Make ``AutoTokenizer`` give each tokenizer family's exact ``tokenizers`` twin in this process.

    transformers' server streams text through the Rust tokenizer (``tokenizer._tokenizer``, which a from-scratch
    class has not): a folder naming the from-scratch class gets the twin, whose ids are the same.
    """
    from transformers.models.auto import tokenization_auto

    from .tokenizer_training.families import FAMILIES

    for family in FAMILIES.values():
        tokenization_auto.REGISTERED_TOKENIZER_CLASSES[family.slow_name] = family.fast


def check_serve_packages() -> None:
    """Raise ImportError naming what to install when transformers' server cannot start here."""
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
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
    if not hasattr(tokenizer, "_tokenizer"):
        raise ValueError(f"the tokenizer of {folder} ({type(tokenizer).__name__}) has no `tokenizers` twin, which "
                         "transformers' server streams text through")
    model = model.to(place).eval()
    if attn_implementation is not None:
        model.set_attn_implementation(attn_implementation)
    context = getattr(model.config, "max_position_embeddings", None)
    return ServedModel(served_name(folder), model, tokenizer, max_prompt_chars(tokenizer, context))


def build_app(served: Any, generation_state: Any) -> Any:
    """The FastAPI app: chat completions, completions, responses, the model (list) and health; nothing else.

    transformers' own app also loads any model a client names (`/load_model`, `/v1/audio/transcriptions`),
    unloads the served one (`/reset`) and answers decision and audio requests: none of them is served here.
    """
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse
    from transformers.cli.serving.utils import CBWorkerDeadError

    from .serving_requests import ChatHandler, RequestError, ResponsesHandler, TextCompletionHandler

    app = FastAPI()
    chat = ChatHandler(served, generation_state)
    completion = TextCompletionHandler(served, generation_state)
    responses = ResponsesHandler(served, generation_state)

    @app.exception_handler(RequestError)
    async def refused(_request: Any, error: RequestError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(CBWorkerDeadError)
    async def batching_dead(_request: Any, error: CBWorkerDeadError) -> JSONResponse:
        return JSONResponse({"error": {"message": str(error), "type": "server_error"}}, status_code=503)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: dict) -> Any:
        return await chat.handle_request(body, _request_id())

    @app.post("/v1/completions")
    async def completions(body: dict) -> Any:
        return await completion.handle_request(body, _request_id())

    @app.post("/v1/responses")
    async def respond(body: dict) -> Any:
        return await responses.handle_request(body, _request_id())

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
        if not generation_state.is_cb_alive():
            return JSONResponse({"status": "unhealthy", "reason": "cb_worker_dead"}, status_code=503)
        return JSONResponse({"status": "ok"})

    return app


def _request_id() -> str:
    import uuid

    return str(uuid.uuid4())


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

    def __init__(self, uvicorn_server: Any, generation_state: Any, url: str, model_name: str) -> None:
        self.url, self.model_name = url, model_name
        self._server, self._generation_state = uvicorn_server, generation_state
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
        self._generation_state.shutdown()
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
    from .publish.folder import check_folder_files

    check_folder_files(folder)
    check_serve_packages()
    use_tokenizers_twins()
    served = load_served_model(folder, device, attn_implementation)
    if continuous_batching:
        check_cache_holds_the_context(cb_num_blocks, cb_block_size, served.context)

    import uvicorn
    from transformers import ContinuousBatchingConfig
    from transformers.cli.serving.utils import GenerationState

    sizes = {"num_blocks": cb_num_blocks, "max_batch_tokens": cb_max_batch_tokens, "block_size": cb_block_size}
    sizes = {key: value for key, value in sizes.items() if value is not None}
    state = GenerationState(continuous_batching=continuous_batching,
                            cb_config=ContinuousBatchingConfig(**sizes) if sizes else None)
    config = uvicorn.Config(build_app(served, state), host=host, port=port, log_level="warning")
    server = Server(uvicorn.Server(config), state, server_url(host, port), served.name)
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
