#!/usr/bin/env bash
# Every `tinylm` command once, tiny, on the bundled data: the README's quickstart (short), then each command's smoke
# run. CI runs it in a venv holding only torch and `pip install -e .` (.ci/run), so a module that
# only the `dev` extra happens to bring fails here as it would on a user's fresh machine.
#
#   scripts/smoke_bare_install.sh            # every command but serve
#   scripts/smoke_bare_install.sh --serve    # `tinylm serve` (needs `pip install -e ".[serve]"`): one request
#
# It works in a temporary folder, removed at the end, and stops at the first command that fails, naming it.
# TINYLM picks the command line to test (default: `tinylm`, the installed entry point).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA="$ROOT/tinylm_hf/data"
TINYLM=${TINYLM:-tinylm}
PYTHON=${PYTHON:-python}
PORT=${PORT:-8765}
MODEL='{"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}'
TINY=(--model "$MODEL" --batch-size 2 --context-length 64 --max-iters 2 --warmup-iters 1 --eval-every 2
      --eval-iters 1 --threads 1)
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

step() {  # step NAME COMMAND...: run it, its output in $WORK/NAME.log; say its time, or its log and fail
  local name=$1 start=$SECONDS
  shift
  if "$@" > "$name.log" 2>&1; then
    echo "ok   $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name: $*"
    tail -n 20 "$name.log"
    [[ ! -f server.log ]] || tail -n 20 server.log
    exit 1
  fi
}

tiny_model() {  # a tokenizer, data and a tiny model on the validation slice: tok/, data/, run/hf
  step train-tokenizer $TINYLM train-tokenizer --input "$DATA/tinystories_valid_small.txt" --vocab-size 300 \
    --out tok --no-progress
  step prepare $TINYLM prepare --tokenizer tok --input "$DATA/tinystories_valid_small.txt" --out data
  step train $TINYLM train --data-dir data --out-dir run "${TINY[@]}"
}

if [[ "${1:-}" == "--serve" ]]; then
  tiny_model
  $TINYLM serve run/hf --port "$PORT" --device cpu > server.log 2>&1 &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
  step serve "$PYTHON" - "$PORT" "$SERVER" <<'PY'
import json, os, sys, time, urllib.request
port, server = sys.argv[1], int(sys.argv[2])
body = json.dumps({"model": "run/hf", "prompt": "Once upon a time", "max_tokens": 4}).encode()
for _ in range(240):  # the server loads transformers first: wait for it, while it lives
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                         {"Content-Type": "application/json"})
        print(json.load(urllib.request.urlopen(request, timeout=60))["choices"][0]["text"])
        sys.exit(0)
    except OSError:
        os.kill(server, 0)  # raises once the server has died: its log says why
        time.sleep(0.5)
sys.exit("the server did not answer in 120 s")
PY
  echo "tinylm serve answered a request"
  exit 0
fi

# The README's first command, as written but short (its 6-minute training is --max-iters 20 here)
step quickstart $TINYLM quickstart --max-iters 20 --max-new-tokens 20 --out qs

tiny_model
step count-words $TINYLM count-words --algorithm unigram --input "$DATA/tinystories_valid_small.txt" --out counts.json
step generate $TINYLM generate run/hf --prompt "Once upon a time" --max-new-tokens 8 --temperature 0
head -c 20000 "$DATA/tinystories_valid_small.txt" > heldout.txt
step eval $TINYLM eval run/hf --input heldout.txt
# short conversations and pairs in the bundled files' formats: theirs outgrow the quickstart model's 128 tokens
for animal in cat dog bird fish; do
  printf '{"messages": [{"role": "user", "content": "Tell me about a %s."}, {"role": "assistant", "content": "The %s played in the sun all day."}]}\n' "$animal" "$animal"
done > chats.jsonl
for animal in cat dog bird fish; do
  printf '{"prompt": [{"role": "user", "content": "Tell me about a %s."}], "chosen": [{"role": "assistant", "content": "The %s was happy."}], "rejected": [{"role": "assistant", "content": "No."}]}\n' "$animal" "$animal"
done > pairs.jsonl
step sft $TINYLM sft --data chats.jsonl --val-data chats.jsonl --init-from qs/hf --out-dir sft \
  --batch-size 2 --context-length 128 --max-iters 2 --warmup-iters 1 --eval-every 2 --eval-iters 1 --threads 1
step chat bash -c "printf 'Tell me a story about a cat.\n/exit\n' | $TINYLM chat sft/hf --max-new-tokens 8 --threads 1"
step dpo $TINYLM dpo --data pairs.jsonl --val-data pairs.jsonl --init-from sft/hf --out-dir dpo \
  --batch-size 2 --context-length 128 --max-iters 2 --warmup-iters 1 --eval-every 2 --threads 1
step finetune $TINYLM finetune --task text-classification --init-from run/hf \
  --data "$DATA/corpus_source_validation.jsonl" --validation-share 0.2 --label-names tinystories,shakespeare,novel \
  --out-dir cls --batch-size 2 --context-length 64 --max-iters 2 --warmup-iters 1 --eval-every 2 --eval-iters 1 \
  --threads 1
step export-llama $TINYLM export-llama run/hf llama
step export-gguf $TINYLM export-gguf run/hf model.gguf
step push $TINYLM push run/hf --repo-id smoke/tinylm-smoke --dry-run
step lm-eval-tasks $TINYLM lm-eval-tasks tasks
# a command added to `tinylm` without a step here fails too (serve has its own run, --serve)
for command in $($TINYLM --help | sed -n 's/^    \([a-z][a-z-]*\).*/\1/p'); do
  [[ "$command" == serve || -f "$command.log" ]] || { echo "FAIL $command: no smoke run in $0"; exit 1; }
done
echo "every command ran on a bare install"
