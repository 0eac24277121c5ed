"""Make a large real-text corpus from this machine's installed packages: the memory benchmarks' input (issue 38).

Every UTF-8 source, header and documentation file under the roots (default: /usr, the shared virtualenv, pyenv's
installs), walked in sorted order (symlinks skipped), each distinct content once (SHA-1), is written to one text file,
documents separated by `<|endoftext|>` alone on a line (prepare's separator rule; a special token for the tokenizer
trainers), or with `--separator ""` by an empty line (a corpus that never spells the special token: the trainers are
then given a special token the text lacks). `--size-mb` stops at that size, so a smaller corpus is a prefix of a
larger one made on the same machine.

    python scripts/make_big_corpus.py --out /work/bigcorpus/corpus_1000mb.txt --size-mb 1000
    python scripts/make_big_corpus.py --out /work/bigcorpus/corpus_100mb.txt --size-mb 100
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOTS = ("/usr", "/work/main/.venv", "/root/.pyenv")
# What counts as source, header or documentation text (by suffix; files without one are skipped).
SUFFIXES = frozenset(
    ".py .pyi .pyx .pxd .pxi .c .h .cc .cpp .cxx .hh .hpp .hxx .cu .cuh .inc .rs .go .java .js .mjs .cjs .ts .tsx "
    ".jsx .css .scss .html .htm .md .rst .txt .tex .sh .bash .zsh .pl .pm .rb .lua .r .m .f .f90 .s .asm .cmake .mk "
    ".toml .cfg .ini .yaml .yml .proto .sql .el .vim .awk .sed .texi .po .pod .man .1 .3 .5 .7 .8".split()
)
MAX_FILE_BYTES = 4 << 20  # larger files are mostly generated data, not text people wrote
SEPARATOR = "<|endoftext|>"


def walk_files(roots: list[str]) -> Iterator[Path]:
    """Regular files under `roots` with a text suffix, in sorted order, symlinks skipped."""
    for root in roots:
        if not os.path.isdir(root):
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)))
            for name in sorted(files):
                path = Path(folder, name)
                if path.suffix.lower() in SUFFIXES and not path.is_symlink() and path.is_file():
                    yield path


def read_document(path: Path) -> str | None:
    """The file's text when it is small, non-empty UTF-8 without NUL bytes or separator text; else None."""
    try:
        if not 0 < path.stat().st_size <= MAX_FILE_BYTES:
            return None
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "\0" in text or SEPARATOR in text or not text.strip():
        return None
    return text.replace("\r\n", "\n").strip("\n")


def make_corpus(out: Path, roots: list[str], size_mb: float, separator: str = SEPARATOR) -> tuple[int, int]:
    """Write the corpus to `out` (via a temp file), a line holding `separator` after each document; returns
    (documents, bytes)."""
    limit = int(size_mb * 1e6)
    seen: set[bytes] = set()
    documents = written = 0
    started, shown = time.monotonic(), 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as sink:
        for path in walk_files(roots):
            text = read_document(path)
            if text is None:
                continue
            data = (text + f"\n{separator}\n").encode("utf-8")
            digest = hashlib.sha1(data).digest()
            if digest in seen:
                continue
            if written + len(data) > limit:
                break
            seen.add(digest)
            sink.write(text + f"\n{separator}\n")
            documents, written = documents + 1, written + len(data)
            if written - shown >= 50e6:
                shown = written
                print(f"{written / 1e6:7.0f} MB, {documents:,} documents, {time.monotonic() - started:5.0f} s "
                      f"({path})", file=sys.stderr, flush=True)
    os.replace(tmp, out)
    return documents, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the corpus file to write")
    parser.add_argument("--size-mb", type=float, default=1000.0, help="stop before this many MB (1e6 bytes)")
    parser.add_argument("--root", action="append", dest="roots", default=None,
                        help=f"folder to walk (repeatable; default: {', '.join(ROOTS)})")
    parser.add_argument("--separator", default=SEPARATOR, help=f"the line after each document (default: {SEPARATOR})")
    args = parser.parse_args()
    documents, written = make_corpus(args.out, args.roots or list(ROOTS), args.size_mb, args.separator)
    print(f"wrote {args.out}: {written / 1e6:.1f} MB, {documents:,} documents")


if __name__ == "__main__":
    main()
