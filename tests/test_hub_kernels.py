"""Hub kernels (transformers >= 5.25 turns them on by default, and needs `kernels` to load any model): a TinyLM
folder and its Llama export load, generate, evaluate and serve with `kernels` installed and without it, and
nothing tries the network. `use_kernels=True` on the CPU changes nothing where `kernels` is installed and is a
one-line refusal where it is not.

Each case runs in fresh processes started with a `sitecustomize` of the test's (so the model process that
transformers' server spawns gets it too): their internet sockets reach only the loopback, every other attempt is written
down and refused, and in the "kernels missing" case `kernels` cannot be imported."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tiny_chats import make_chat_folder


SITECUSTOMIZE = r'''
import os, socket, sys
if os.environ.get("TINYLM_TEST_HIDE_KERNELS"):
    sys.modules["kernels"] = None  # as where it is not installed (find_spec answers None, import raises ImportError)
_connect = socket.socket.connect
def loopback_only(sock, address):
    internet = sock.family in (socket.AF_INET, socket.AF_INET6)
    if internet and address[0] not in ("127.0.0.1", "::1", "localhost"):
        with open(os.environ["TINYLM_TEST_NETWORK_LOG"], "a", encoding="utf-8") as log:
            log.write(repr(address) + "\n")
        raise OSError(f"this test reaches only the loopback, not {address!r}")
    return _connect(sock, address)
socket.socket.connect = loopback_only
'''

PROBE = r'''
import json, sys
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils.import_utils import is_kernels_available
from tinylm_hf.evaluation.perplexity import evaluate_perplexity
from tinylm_hf.publish import load_folder

tinylm_dir, llama_dir = sys.argv[1], sys.argv[2]
MESSAGES = [{"role": "user", "content": "Tell me a story about Ben."}]
TEXT = "Once upon a time, there was a little girl named Lily. She liked to play."

def reply(model, tokenizer):
    ids = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    new = model.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1]:]
    return tokenizer.decode(new, skip_special_tokens=True)

out = {"kernels_available": is_kernels_available()}
tokenizer = AutoTokenizer.from_pretrained(tinylm_dir)
out["auto_class"] = reply(AutoModelForCausalLM.from_pretrained(tinylm_dir), tokenizer)
for name, folder in (("tinylm", tinylm_dir), ("llama", llama_dir)):
    model, tok = load_folder(folder)
    score = evaluate_perplexity(model, tok, [TEXT], stride=16, batch_size=1, show_progress=False)
    out[name] = {"class": type(model).__name__, "reply": reply(model, tok), "perplexity": score["perplexity"]}
try:
    out["use_kernels"] = reply(AutoModelForCausalLM.from_pretrained(tinylm_dir, use_kernels=True), tokenizer)
except (ValueError, ImportError) as error:
    out["use_kernels"] = f"refused: {error}"
print("RESULT " + json.dumps(out))
'''
START_TIMEOUT = 240  # seconds for the server to load the model and answer; 2 busy cores can be slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple[str, str]:
    """(a tiny TinyLM chat folder, its Llama export)."""
    from tinylm_hf.publish.export_llama import export_llama

    root = tmp_path_factory.mktemp("kernels")
    tinylm = make_chat_folder(root / "chat", max_position_embeddings=64)
    return str(tinylm), str(export_llama(tinylm, root / "llama"))


def guarded_env(tmp_path: Path, hide_kernels: bool) -> dict[str, str]:
    """The environment of a guarded process: the test's sitecustomize first on the path, transformers' defaults."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "TINYLM_TEST_NETWORK_LOG": str(tmp_path / "network.log"),
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    env.pop("USE_HUB_KERNELS", None)
    env.pop("TINYLM_TEST_HIDE_KERNELS", None)
    if hide_kernels:
        env["TINYLM_TEST_HIDE_KERNELS"] = "1"
    return env


def served_reply(folder: str, env: dict[str, str]) -> str:
    """The greedy chat reply of `tinylm serve FOLDER` (6 tokens), the server stopped by Ctrl-C afterwards."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tinylm_hf.cli", "serve", folder, "--port", str(port),
                               "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              start_new_session=True)
    body = json.dumps({"model": folder, "temperature": 0, "max_tokens": 6,
                       "messages": [{"role": "user", "content": "Tell me a story about Ben."}]}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while True:
            if server.poll() is not None:
                raise AssertionError(f"tinylm serve exited with {server.returncode}:\n{server.stdout.read()[-3000:]}")
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    return json.load(answer)["choices"][0]["message"]["content"]
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="module", params=["kernels installed", "kernels missing"])
def case(request, tmp_path_factory) -> tuple[bool, Path, dict[str, str]]:
    """(whether `kernels` is hidden, the case's folder, the environment of its guarded processes)."""
    hide = request.param == "kernels missing"
    if not hide:
        pytest.importorskip("kernels")
    tmp_path = tmp_path_factory.mktemp("guarded")
    return hide, tmp_path, guarded_env(tmp_path, hide)


@pytest.fixture(scope="module")
def probe(case, folders) -> dict:
    """What the probe loaded, generated, scored and was refused, in a guarded process."""
    hide, _, env = case
    done = subprocess.run([sys.executable, "-c", PROBE, *folders], capture_output=True, text=True, timeout=600,
                          env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["kernels_available"] is not hide
    return result


def network_attempts(case) -> list[str]:
    log = case[1] / "network.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.mark.contract
def test_both_folders_load_generate_and_evaluate_alike(probe) -> None:
    tinylm, llama = probe["tinylm"], probe["llama"]
    assert (tinylm["class"], llama["class"]) == ("TinyLMForCausalLM", "LlamaForCausalLM")
    assert tinylm["reply"] == llama["reply"] == probe["auto_class"]
    assert tinylm["perplexity"] == pytest.approx(llama["perplexity"], rel=1e-4)


@pytest.mark.contract
def test_loading_reaches_for_no_network(case, probe) -> None:
    assert network_attempts(case) == []


# not a contract test: `tinylm serve` is tested on the newest transformers (the main job), as in test_serving.py
def test_the_llama_export_serves_the_greedy_reply_offline(case, probe, folders) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    assert served_reply(folders[1], case[2]) == probe["llama"]["reply"]
    assert network_attempts(case) == []


@pytest.mark.contract
def test_use_kernels_on_the_cpu_is_a_no_op_or_one_line_refusal(probe) -> None:
    if probe["kernels_available"]:
        assert probe["use_kernels"] == probe["auto_class"]
    else:
        assert probe["use_kernels"].startswith("refused: ") and "\n" not in probe["use_kernels"]
        assert "pip install" in probe["use_kernels"] and "kernels" in probe["use_kernels"]
