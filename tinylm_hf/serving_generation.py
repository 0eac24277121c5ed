"""How `tinylm serve` makes a reply's tokens: the model's public generation API, one request's ids at a time.

`PlainGenerator` runs `model.generate` with a streamer, one request after another; `BatchingGenerator` hands every
request to the model's continuous-batching manager (`model.init_continuous_batching()`: `add_request` and
`register_result_handler`), which packs concurrent requests into shared batches over a paged KV cache. Both give a
request's new tokens as they come, to an asyncio consumer. Nothing here reads transformers' `cli.serving` (its
internals change every release); `TextDeltas` turns the tokens into streamed text.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import torch
from transformers.generation.stopping_criteria import StoppingCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from .serving_requests import RequestError, sampling

WAIT_S = 0.5  # how often a request waiting for tokens checks that the batching worker still runs


class GenerationUnavailable(RuntimeError):
    """The server cannot generate any more (the batching worker stopped): answered with a 503."""


class _QueueStreamer(BaseStreamer):
    """A `generate` streamer that hands each step's new token ids to an asyncio queue (the prompt skipped), until
    `cancel` is set (no one reads them any more)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue, cancel: threading.Event) -> None:
        self.loop, self.queue, self.cancel, self.prompt_seen = loop, queue, cancel, False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:  # generate's first call hands over the prompt
            self.prompt_seen = True
            return
        self.send(value.reshape(-1).tolist())

    def send(self, item: Any) -> None:
        if not self.cancel.is_set():
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def end(self) -> None:
        pass


class _Cancelled(StoppingCriteria):
    """Stops `generate` at its next step once `cancel` is set (the client went away)."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        return torch.full((input_ids.shape[0],), self.cancel.is_set(), dtype=torch.bool, device=input_ids.device)


class PlainGenerator:
    """`model.generate` in a worker thread, one request at a time (the model is not shared between threads).

    A request's `seed` is set under the same lock, just before its `generate`: the same request with the same seed
    samples the same reply. A request whose consumer stops (the client disconnected) stops generating at its next
    step, so it holds the model no longer.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._lock = threading.Lock()

    def is_alive(self) -> bool:
        return True

    def admit(self, config: Any) -> None:
        """Nothing to check: each request samples as it asks."""

    async def tokens(self, ids: list[int], config: Any, seed: int | None = None) -> AsyncIterator[list[int]]:
        """The new token ids of greedy or sampled `generate` on `ids` (sampling from `seed` when given), step by step."""
        loop, queue = asyncio.get_running_loop(), asyncio.Queue()
        tensor = torch.tensor([ids], device=self.model.device)
        cancel = threading.Event()

        streamer = _QueueStreamer(loop, queue, cancel)

        def run() -> None:
            try:
                with self._lock, torch.no_grad():
                    if seed is not None:
                        torch.manual_seed(seed)
                    self.model.generate(tensor, attention_mask=torch.ones_like(tensor), generation_config=config,
                                        streamer=streamer, stopping_criteria=StoppingCriteriaList([_Cancelled(cancel)]))
                streamer.send(None)
            except Exception as error:  # noqa: BLE001 (raised again in the request's task)
                streamer.send(error)

        threading.Thread(target=run, name="tinylm-generate", daemon=True).start()
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:  # finished, failed, or closed early because the client went away
            cancel.set()

    def stop(self) -> None:
        pass


class BatchingGenerator:
    """The model's continuous-batching manager, started by the first request with that request's sampling.

    The manager samples every request alike (its generation config): a later request asking for other sampling is
    a 400, never silently sampled otherwise. A request's `seed` is not applied (the manager has no per-request
    generator, and a sampled token depends on the batch it shares), so sampling is not reproducible here. A request
    whose consumer stops (the client disconnected) is cancelled in the manager.
    """

    def __init__(self, model: Any, batching_config: Any) -> None:
        self.model, self.batching_config = model, batching_config
        self._manager: Any = None
        self._sampling = ""
        self._lock = threading.Lock()

    def is_alive(self) -> bool:
        return self._manager is None or self._manager.is_running()

    def admit(self, config: Any) -> None:
        """Start the manager with `config`'s sampling on the first request; RequestError 400 for a request asking for
        other sampling, GenerationUnavailable once the worker has stopped."""
        with self._lock:
            if self._manager is None:
                self._manager = self.model.init_continuous_batching(
                    generation_config=config, continuous_batching_config=self.batching_config)
                self._manager.start()
                self._sampling = sampling(config)
        if sampling(config) != self._sampling:
            raise RequestError(400, f"with --continuous-batching every request samples as the first one did "
                               f"({self._sampling}); this one asks for {sampling(config)}: send the same settings, "
                               "or start the server without --continuous-batching", param="temperature")
        if not self.is_alive():
            raise GenerationUnavailable("the continuous-batching worker has stopped: restart the server")

    async def tokens(self, ids: list[int], config: Any, seed: int | None = None) -> AsyncIterator[list[int]]:
        """The new token ids of `ids`'s request (admitted), as the batching worker makes them (`seed` is not
        applied: see the class)."""
        manager = self._manager
        queue: asyncio.Queue = asyncio.Queue()
        request_id = f"tinylm-{uuid.uuid4()}"
        manager.register_result_handler(request_id, queue.put_nowait)  # called on this event loop
        if manager.add_request(ids, request_id=request_id, max_new_tokens=config.max_new_tokens, streaming=True,
                               eos_token_id=config.eos_token_id) is None:
            raise GenerationUnavailable("the continuous-batching worker accepts no requests: restart the server")
        sent, finished = 0, False
        try:
            while not finished:
                try:
                    output = await asyncio.wait_for(queue.get(), WAIT_S)
                except asyncio.TimeoutError:
                    if not self.is_alive():
                        raise GenerationUnavailable("the continuous-batching worker stopped during the request") from None
                    continue
                finished = output.is_finished()
                if output.error is not None:
                    raise RuntimeError(f"continuous batching failed on the request: {output.error}")
                new, sent = output.generated_tokens[sent:], len(output.generated_tokens)
                if new:
                    yield list(new)
        finally:  # closed early because the client went away: the worker stops making its tokens
            if not finished and self.is_alive():
                manager.cancel_request(request_id)

    def stop(self) -> None:
        if self._manager is not None:
            self._manager.stop(block=True, timeout=10)


def check_batching_api(model: Any) -> None:
    """ValueError when the installed transformers lacks the continuous-batching API `BatchingGenerator` uses."""
    import transformers

    try:
        from transformers import ContinuousBatchingConfig  # noqa: F401 (serve builds one)
        from transformers.generation.continuous_batching import ContinuousBatchingManager
    except ImportError:
        ContinuousBatchingManager = None
    needed = ("init_continuous_batching", "start", "stop", "is_running", "add_request", "register_result_handler",
              "cancel_request")
    missing = [name for name in needed if not hasattr(model if name == needed[0] else ContinuousBatchingManager, name)]
    if missing:
        raise ValueError(f"--continuous-batching needs transformers' continuous-batching manager with "
                         f"{', '.join(missing)}, which transformers "
                         f"{transformers.__version__} lacks: upgrade transformers (5.24 and 5.25 are tested) or start "
                         "without --continuous-batching")


class TextDeltas:
    """The text of a growing list of token ids, handed out as the part not yet handed out.

    Text is held back while it ends in an incomplete character (a byte-level token can split one), so the streamed
    parts join to the decoded whole.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.sent = ""

    def add(self, ids: list[int]) -> str:
        """The new text after `ids` are appended ("" while it is incomplete)."""
        self.ids += ids
        text = self.text()
        if text.endswith("\ufffd") or not text.startswith(self.sent):
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta

    def rest(self) -> str:
        """The text not handed out yet, once no more ids come."""
        delta, self.sent = self.text()[len(self.sent):], self.text()
        return delta

    def text(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)
