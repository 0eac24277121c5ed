"""A TinyLM folder over an OpenAI-compatible API, served by transformers' own server (`transformers serve`).

transformers' server loads a folder's model by looking its architecture up on the transformers package
(``getattr(transformers, config.architectures[0])``), where only the classes transformers ships live, so
``transformers serve`` alone stops at ``module transformers has no attribute TinyLMForCausalLM``.
`expose_tinylm_classes` registers TinyLM with the Auto classes and puts its model classes on the package under
their names; the server then loads a TinyLM folder as it loads a Llama folder, with nothing converted: the
folder's chat template renders the prompt, its ``generation_config.json`` stops a chat model at ``<|end|>``,
and streaming, continuous batching and the attention implementations are transformers' own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .modeling.compat import SERVER_LOADS_IN_ITS_OWN_PROCESS
from .serving_setup import expose_tinylm_classes, keep_hub_kernels_off, use_tokenizers_twins

# what transformers' server imports (its `serving` extra); `pip install 'tinylm-hf[serve]'` installs them
SERVE_PACKAGES = ("fastapi", "uvicorn", "openai", "pydantic")
SERVE_INSTALL = "pip install 'tinylm-hf[serve]'"


def check_serve_packages() -> None:
    """Raise ImportError naming what to install when transformers' server cannot start here."""
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        raise ImportError(f"serving needs {', '.join(SERVE_PACKAGES)}: {SERVE_INSTALL}")


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
) -> None:
    """Serve the model folder ``folder`` with transformers' server on ``host``:``port`` until stopped.

    Endpoints are transformers': ``POST /v1/chat/completions`` (streamed or not), ``POST /v1/completions``,
    ``GET /v1/models``; the model is named by ``folder`` as given. ``continuous_batching`` batches concurrent
    requests over a paged KV cache, sized by the ``cb_*`` options (transformers' defaults when None: they suit a
    GPU, and take tens of seconds per request on a CPU). Returns once the server has stopped (Ctrl-C, SIGTERM).
    """
    from .publish.folder import check_folder_files

    if not 0 < port < 65536:
        raise ValueError(f"port must lie in 1..65535, got {port}")
    for name, value in (("cb_num_blocks", cb_num_blocks), ("cb_max_batch_tokens", cb_max_batch_tokens),
                        ("cb_block_size", cb_block_size)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be a positive number of blocks or tokens, got {value}")
    check_folder_files(folder)
    check_serve_packages()
    expose_tinylm_classes()
    use_tokenizers_twins()
    keep_hub_kernels_off()
    options = dict(force_model=str(Path(folder)), host=host, port=port, device=device,
                   attn_implementation=attn_implementation, continuous_batching=continuous_batching,
                   cb_num_blocks=cb_num_blocks, cb_max_batch_tokens=cb_max_batch_tokens, cb_block_size=cb_block_size)
    if SERVER_LOADS_IN_ITS_OWN_PROCESS:
        from .serving_process import TinyLMServe

        try:
            TinyLMServe(**options)  # until Ctrl-C or SIGTERM
        except SystemExit as stop:  # uvicorn ends the process when it cannot start (a port in use)
            if stop.code:
                raise OSError(f"the server could not start on {host}:{port} (is the port in use?)") from None
        return
    from transformers.cli.serve import Serve

    server = Serve(**options, non_blocking=True)
    try:
        # until Ctrl-C, SIGTERM or a failed start; the server's thread (transformers' attribute) is polled, not
        # joined: a join broken by Ctrl-C leaves the thread looking stopped, and kill_server would then skip it
        while server._thread.is_alive():
            time.sleep(0.5)
    finally:
        # stops the server and the generation threads too (continuous batching's would keep the process alive)
        server.kill_server()
    if not server.server.started:
        raise OSError(f"the server could not start on {host}:{port} (is the port in use?)")
