"""Hub kernels (transformers >= 5.25 turns them on by default, and needs `kernels` to load any model): a TinyLM
folder and its Llama export load, generate, evaluate and serve with `kernels` installed and without it, and
nothing tries the network. `use_kernels=True` on the CPU changes nothing where `kernels` is installed and is a
one-line refusal where it is not. Each case runs in a fresh process whose sockets reach only the loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tiny_chats import make_chat_folder

pytestmark = pytest.mark.contract

PROBE = r'''
import json, socket, sys, time, urllib.request
{hide}
OFFLINE = []  # every connection attempt to a host other than the loopback (refused)
_connect = socket.socket.connect
def loopback_only(sock, address):
    if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1", "localhost")):
        OFFLINE.append(repr(address))
        raise OSError(f"this test reaches only the loopback, not {{address!r}}")
    return _connect(sock, address)
socket.socket.connect = loopback_only

from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils.import_utils import is_kernels_available
from tinylm_hf.evaluation.perplexity import evaluate_perplexity
from tinylm_hf.publish import load_folder
from tinylm_hf.serving import serve

tinylm_dir, llama_dir, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
MESSAGES = [{{"role": "user", "content": "Tell me a story about Ben."}}]
TEXT = "Once upon a time, there was a little girl named Lily. She liked to play."

def reply(model, tokenizer):
    ids = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    new = model.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1]:]
    return tokenizer.decode(new, skip_special_tokens=True)

out = {{"kernels_available": is_kernels_available()}}
tokenizer = AutoTokenizer.from_pretrained(tinylm_dir)
out["auto_class"] = reply(AutoModelForCausalLM.from_pretrained(tinylm_dir), tokenizer)
for name, folder in (("tinylm", tinylm_dir), ("llama", llama_dir)):
    model, tok = load_folder(folder)
    score = evaluate_perplexity(model, tok, [TEXT], stride=16, batch_size=1, show_progress=False)
    out[name] = {{"class": type(model).__name__, "reply": reply(model, tok), "perplexity": score["perplexity"]}}
try:
    out["use_kernels"] = reply(AutoModelForCausalLM.from_pretrained(tinylm_dir, use_kernels=True), tokenizer)
except (ValueError, ImportError) as error:
    out["use_kernels"] = f"refused: {{error}}"

server = serve(llama_dir, port=port, device="cpu", non_blocking=True)
body = json.dumps({{"model": llama_dir, "messages": MESSAGES, "temperature": 0, "max_tokens": 6}}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{{port}}/v1/chat/completions", data=body,
                                 headers={{"Content-Type": "application/json"}})
deadline = time.monotonic() + 180
try:
    while True:
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                out["served"] = json.load(answer)["choices"][0]["message"]["content"]
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
finally:
    server.kill_server()
out["offline"] = OFFLINE
print("RESULT " + json.dumps(out))
'''
# makes `kernels` unimportable, as where it is not installed (find_spec answers None, import raises ImportError)
HIDE_KERNELS = 'sys.modules["kernels"] = None'


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


def run_probe(folders: tuple[str, str], hide_kernels: bool) -> dict:
    code = PROBE.format(hide=HIDE_KERNELS if hide_kernels else "")
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    env.pop("USE_HUB_KERNELS", None)  # transformers' own default
    done = subprocess.run([sys.executable, "-c", code, *folders, str(free_port())], capture_output=True, text=True,
                          timeout=600, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module", params=["kernels installed", "kernels missing"])
def probe(request, folders) -> dict:
    hide = request.param == "kernels missing"
    if not hide:
        pytest.importorskip("kernels")
    result = run_probe(folders, hide_kernels=hide)
    assert result["kernels_available"] is not hide
    return result


def test_both_folders_load_generate_and_evaluate_alike(probe) -> None:
    tinylm, llama = probe["tinylm"], probe["llama"]
    assert (tinylm["class"], llama["class"]) == ("TinyLMForCausalLM", "LlamaForCausalLM")
    assert tinylm["reply"] == llama["reply"] == probe["auto_class"]
    assert tinylm["perplexity"] == pytest.approx(llama["perplexity"], rel=1e-4)


def test_the_llama_export_serves_the_greedy_reply(probe) -> None:
    assert probe["served"] == probe["llama"]["reply"]


def test_nothing_reaches_for_the_network(probe) -> None:
    assert probe["offline"] == []


def test_use_kernels_on_the_cpu_is_a_no_op_or_one_line_refusal(probe) -> None:
    if probe["kernels_available"]:
        assert probe["use_kernels"] == probe["auto_class"]
    else:
        assert probe["use_kernels"].startswith("refused: ") and "\n" not in probe["use_kernels"]
        assert "pip install" in probe["use_kernels"] and "kernels" in probe["use_kernels"]
