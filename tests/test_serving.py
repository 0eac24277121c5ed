"""`tinylm serve`: transformers' server answers an OpenAI client on 127.0.0.1 with a TinyLM chat folder, and its
chat completions (streamed or not, continuous batching or not) are greedy `generate` on the chat template's ids,
stopped at `<|end|>`. The server runs in a subprocess, started and stopped by each test, every wait bounded."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from conftest import run_cli_error
from tiny_chats import make_chat_folder

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

MESSAGES = [{"role": "user", "content": "Tell me a story about Ben."}]
MAX_TOKENS = 24
START_TIMEOUT = 180  # seconds for the server to load the model and answer; 2 busy cores can be slow


def end_turn_early(model, prompt_ids: torch.Tensor, end_id: int) -> None:
    """Give `<|end|>` the output row of a token the random model says a few steps in, so that its greedy reply
    is a few tokens and then the end of its turn (as a fine-tuned chat model's is)."""
    with torch.no_grad():
        base = model.generate(prompt_ids, max_new_tokens=MAX_TOKENS, do_sample=False)[0, prompt_ids.shape[1]:]
        for token in base[3:].tolist():
            model.lm_head.weight[end_id] = 3 * model.lm_head.weight[token]
            reply = model.generate(prompt_ids, max_new_tokens=MAX_TOKENS, do_sample=False, eos_token_id=end_id)
            new = reply[0, prompt_ids.shape[1]:].tolist()
            if end_id in new and new.index(end_id) >= 2:
                return
    raise AssertionError("no token made the reply end early")


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from tinylm_hf.tokenization.chat_template import end_of_turn_id, stop_token_ids

    folder = make_chat_folder(tmp_path_factory.mktemp("serve") / "chat", max_position_embeddings=64)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    end_turn_early(model, ids, end_of_turn_id(tokenizer))
    model.save_pretrained(folder)
    # as a published chat folder's (publish.hf_folder): sampling by default, stopping at <|end|>
    GenerationConfig(eos_token_id=stop_token_ids(tokenizer), pad_token_id=tokenizer.eos_token_id, do_sample=True,
                     temperature=0.8, top_k=50, max_new_tokens=200).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def greedy_reply(chat_folder) -> tuple[str, list[int]]:
    """(text, ids) of greedy `generate` on the chat template's prompt ids, stopped where the folder says."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    model = AutoModelForCausalLM.from_pretrained(chat_folder)
    ids = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    out = model.generate(ids, max_new_tokens=MAX_TOKENS, do_sample=False)[0, ids.shape[1]:].tolist()
    return tokenizer.decode(out, skip_special_tokens=True), out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


CONTINUOUS_BATCHING = ["--continuous-batching", "--cb-num-blocks", "32", "--cb-max-batch-tokens", "128",
                       "--cb-block-size", "32"]  # small sizes: a CPU answers in seconds


@pytest.fixture(scope="module", params=[[], CONTINUOUS_BATCHING], ids=["plain", "continuous-batching"])
def client(request, chat_folder):
    """An OpenAI client of `tinylm serve CHAT_FOLDER` on 127.0.0.1, the server stopped after the tests."""
    port = free_port()
    command = [sys.executable, "-m", "tinylm_hf.cli", "serve", str(chat_folder), "--host", "127.0.0.1",
               "--port", str(port), "--device", "cpu", *request.param]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"}, start_new_session=True)
    api = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", timeout=60, max_retries=0)
    try:
        wait_until_up(api, server)
        yield api
    finally:
        stopped = stop(server)
    assert stopped, "tinylm serve did not exit within 30 s of Ctrl-C"


def wait_until_up(api, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"tinylm serve exited with {server.returncode}:\n{server.stdout.read()[-3000:]}")
        try:
            api.models.list()
            return
        except openai.APIConnectionError:
            time.sleep(0.5)
    raise AssertionError(f"tinylm serve did not answer within {START_TIMEOUT} s")


def stop(server: subprocess.Popen) -> bool:
    """SIGINT (Ctrl-C) to the server; SIGKILL to its process group if it has not exited within 30 s.

    Returns whether it exited by itself.
    """
    stopped = True
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stopped = False
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
    server.stdout.close()
    return stopped


def test_the_folder_is_the_served_model(client, chat_folder) -> None:
    assert [model.id for model in client.models.list().data] == [str(chat_folder)]


def test_a_chat_completion_is_greedy_generate_stopped_at_the_end_of_turn(client, chat_folder, greedy_reply) -> None:
    text, ids = greedy_reply
    answer = client.chat.completions.create(model=str(chat_folder), messages=MESSAGES, temperature=0,
                                            max_tokens=MAX_TOKENS)
    choice = answer.choices[0]
    assert (choice.message.content, choice.finish_reason) == (text, "stop")
    assert answer.usage.completion_tokens == len(ids)  # the reply's tokens and <|end|>


def test_a_streamed_chat_completion_is_the_same_text(client, chat_folder, greedy_reply) -> None:
    chunks = client.chat.completions.create(model=str(chat_folder), messages=MESSAGES, temperature=0,
                                            max_tokens=MAX_TOKENS, stream=True)
    parts, reasons = [], []
    for chunk in chunks:
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            reasons.append(choice.finish_reason)
    assert "".join(parts) == greedy_reply[0]
    assert [r for r in reasons if r] == ["stop"]


def test_a_missing_folder_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    message = run_cli_error(["serve", str(tmp_path / "nothing")], capsys)
    assert "nothing" in message


def test_transformers_finds_no_architecture_in_a_llama_gguf(chat_folder, tmp_path) -> None:
    # why docs/how-to/serve.md serves the GGUF with llama.cpp: transformers' server picks the model class from
    # config.architectures, which its GGUF loader leaves unset for a llama file (ours, as Meta's)
    pytest.importorskip("gguf")
    from transformers import AutoConfig

    from tinylm_hf.publish import export_gguf

    path = export_gguf(chat_folder, tmp_path / "chat.gguf", dtype="f32")
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    assert (config.model_type, config.architectures) == ("llama", None)


def test_a_port_in_use_is_one_line_and_exit_2(chat_folder) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "serve", str(chat_folder), "--port", str(port),
                               "--device", "cpu"], capture_output=True, text=True, timeout=START_TIMEOUT,
                              env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    assert done.returncode == 2
    assert f"the server could not start on 127.0.0.1:{port} (is the port in use?)" in done.stderr
    assert "Traceback" not in done.stderr
