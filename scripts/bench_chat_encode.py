"""Encoding one long conversation for sft: `encode_chat` beside transformers' `apply_chat_template`.

Both give the ids and the assistant mask (transformers': `return_assistant_tokens_mask=True` on the fast
class); `encode_chat` also keeps every message plain text. The table shows seconds per conversation as it
grows and the ratio (transformers' time / ours: above 1, ours is faster), so a cost that grows faster than
the conversation shows as a falling ratio.

    python scripts/bench_chat_encode.py [--exchanges 250 500 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tinylm_hf.corpus.sources import PACKAGE_DATA
from tinylm_hf.tokenization import TinyLMTokenizerFast
from tinylm_hf.tokenization.chat_template import CHAT_TOKENS, add_chat_tokens
from tinylm_hf.tokenization.plain_text import encode_chat
from tinylm_hf.tokenizer_training import train_tokenizer


def conversation(exchanges: int) -> list[dict[str, str]]:
    return [m for i in range(exchanges) for m in (
        {"role": "user", "content": f"Tell me story {i}, please, about a dog and a cat."},
        {"role": "assistant", "content": f"Once upon a time {i} cats sat on a mat and were happy together."})]


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:200_000]
    tokenizer = train_tokenizer(iter([text]), 1024, ["<|endoftext|>", *CHAT_TOKENS], progress=False)
    add_chat_tokens(tokenizer)
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        fast = TinyLMTokenizerFast.from_pretrained(Path(folder))
    print("| exchanges | tokens | encode_chat s | apply_chat_template s | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in args.exchanges:
        messages = conversation(n)
        ours = encode_chat(fast, messages)
        theirs = fast.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=True)
        if (ours.ids, ours.mask) != (list(theirs["input_ids"]), list(theirs["assistant_masks"])):
            raise SystemExit(f"{n} exchanges: encode_chat and apply_chat_template disagree")
        t_ours = best_time(lambda: encode_chat(fast, messages), args.repeats)
        t_theirs = best_time(lambda: fast.apply_chat_template(messages, return_dict=True,
                                                              return_assistant_tokens_mask=True), args.repeats)
        print(f"| {n} | {len(ours.ids):,} | {t_ours:.3f} | {t_theirs:.3f} | {t_theirs / t_ours:.2f} |")


if __name__ == "__main__":
    main()
