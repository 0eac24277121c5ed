"""Where text comes from: files named by paths or globs, read as UTF-8 by one rule, and `datasets` datasets by name.

The one rule for every reader of a user's text file (prepare, eval, sft, finetune): UTF-8, a leading byte-order
mark dropped (as Python's `utf-8-sig` does, so an editor's BOM never becomes three byte tokens), and a byte that is
not UTF-8 a ValueError naming the file, its line and the byte.
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import json
import os
import re
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..fileio import check_input_file
from .documents import SplitRule, choose_stream_split_rule, split_fixed_size_stream, split_lines_stream

PACKAGE_DATA = Path(__file__).resolve().parent.parent / "data"  # the text and conversations bundled with tinylm_hf
TEXT_ENCODING = "utf-8-sig"  # UTF-8 whose leading byte-order mark, if any, is dropped
_CHUNK_BYTES = 1 << 20
_LINE_PIECE_CHARS = 1 << 16  # a line longer than this is read in pieces while its split rule is chosen
_SURROGATE = re.compile("[\ud800-\udfff]")  # a code point left unpaired by a JSON escape: no UTF-8 text holds one


def not_utf8(path: str | os.PathLike, data: bytes, err: UnicodeDecodeError, *, line: int = 1, offset: int = 0,
             what: str = "input file") -> ValueError:
    """The error for a byte of `data` (a piece of `path` starting at byte `offset` and on `line`) that is not UTF-8."""
    line += data[: err.start].count(b"\n")
    return ValueError(f"{what} {os.fspath(path)} is not UTF-8 text: byte 0x{data[err.start]:02X} at offset "
                      f"{offset + err.start} (line {line}); re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def check_utf8_file(path: str | os.PathLike, what: str = "input file") -> Path:
    """`path` if it is a readable file of UTF-8 text (read in pieces: memory stays bounded); else an error naming it."""
    path = check_input_file(path, what)
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset, line = 0, 1
    with open(path, "rb") as fh:
        while data := fh.read(_CHUNK_BYTES):
            try:
                decoder.decode(data)
            except UnicodeDecodeError as err:
                raise not_utf8(path, decoder.getstate()[0] + data, err, line=line,
                               offset=offset - len(decoder.getstate()[0]), what=what) from None
            offset, line = offset + len(data), line + data.count(b"\n")
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as err:
            raise not_utf8(path, err.object, err, line=line, offset=offset - len(err.object), what=what) from None
    return path


def read_text(path: str | os.PathLike, what: str = "input file") -> str:
    """The whole text of a UTF-8 file, its leading byte-order mark dropped; not UTF-8 is an error naming the file."""
    data = check_input_file(path, what).read_bytes()
    try:
        return data.decode(TEXT_ENCODING)
    except UnicodeDecodeError as err:
        raise not_utf8(path, data, err, what=what) from None


def iter_lines(path: str | os.PathLike, what: str = "input file") -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 file, one line in memory at a time, its leading byte-order mark dropped."""
    offset = 0
    with open(check_input_file(path, what), "rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                yield number, raw.decode(TEXT_ENCODING if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise not_utf8(path, raw, err, line=number, offset=offset, what=what) from None
            offset += len(raw)


def iter_file_documents(path: str | os.PathLike) -> Iterator[tuple[str, SplitRule]]:
    """(document, the rule that cut it) of a UTF-8 text file, one document in memory at a time.

    The file is read as `datasets`' text loader reads it (the `TEXT_ENCODING`, universal newlines: "\\r\\n" and "\\r"
    become "\\n"), once to choose its split rule and once to cut it; the documents are `split_documents`' of its
    whole text. Check the file first (`check_utf8_file`): a byte that is not UTF-8 raises UnicodeDecodeError here.
    """
    with open(path, encoding=TEXT_ENCODING) as fh:
        rule = choose_stream_split_rule(iter(partial(fh.readline, _LINE_PIECE_CHARS), ""))
    with open(path, encoding=TEXT_ENCODING) as fh:
        if rule == "fixed_size":
            documents = split_fixed_size_stream(iter(partial(fh.read, _CHUNK_BYTES), ""))
        else:
            documents = split_lines_stream(fh, rule)
        for document in documents:
            yield document, rule


def lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in the strings (keys included) of a parsed JSON value, as its escape (`\\ud800`);
    None when there is none. JSON's `\\ud800` escape parses to one, which no UTF-8 file, Arrow table or tokenizer
    can hold."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return f"\\u{ord(found.group()):04x}" if found else None
    if isinstance(value, (dict, list)):
        items = [*value, *value.values()] if isinstance(value, dict) else value
        return next((escape for item in items if (escape := lone_surrogate(item))), None)
    return None


def parse_json_text(text: str, where: str) -> Any:
    """`json.loads(text)` of a user's JSON line or file (`where` names it, e.g. "data.jsonl, line 3"): malformed JSON
    and a lone surrogate escape are a ValueError naming `where` and the fix."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        reason = err if isinstance(err, json.JSONDecodeError) else "nested too deeply"
        raise ValueError(f"{where} is not valid JSON ({reason}): fix or remove it") from None
    if "\\u" in text and (escape := lone_surrogate(value)):
        raise ValueError(f"{where} holds the lone surrogate escape {escape}, which is no Unicode character: fix it (a "
                         "character above U+FFFF is a pair of escapes, e.g. \\ud83d\\ude00) or remove it")
    return value


def check_json_rows(path: str | os.PathLike, what: str = "input file") -> None:
    """Refuse a JSON or JSON-lines file of rows naming its first problem: a line that is not JSON, a lone surrogate,
    no rows at all. What `datasets` reports of such a file is a traceback naming neither the file nor the line."""
    path = Path(path)
    if path.suffix.lower() == ".json" and not is_json_lines(path):  # one JSON document (datasets reads both)
        text = read_text(path, what)
        value = parse_json_text(text, f"{what} {path}")
        if not value:
            raise ValueError(f"{what} {path} holds no rows: give it one JSON object per example")
        return
    for _ in iter_json_lines(path, what):
        pass


def is_json_lines(path: str | os.PathLike) -> bool:
    """Whether a JSON file holds JSON lines (its first non-blank line is a whole JSON value that is no array), as
    a `.jsonl` file does, rather than one JSON document (an array of rows, or an object over many lines)."""
    if Path(path).suffix.lower() == ".jsonl":
        return True
    for _, line in iter_lines(path):
        if line.strip():
            if line.lstrip().startswith("["):
                return False
            try:
                json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                return False
            return True
    return True  # blank: refused as holding no rows


def iter_json_lines(path: str | os.PathLike, what: str = "input file") -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line of a JSON-lines file, one line in memory at a time; a line
    that is not JSON, a lone surrogate escape, or a file without rows is a ValueError naming the file and line."""
    rows = 0
    for number, line in iter_lines(path, what):
        if line.strip():
            yield number, parse_json_text(line, f"{what} {path}, line {number}")
            rows += 1
    if not rows:
        raise ValueError(f"{what} {path} holds no rows (it is empty): give it one JSON object per line")


def check_dataset_files(name: str, err: Exception) -> ValueError:
    """The one-line error for a dataset `datasets` could not read: the first bad line of its JSON files where `name`
    is a local folder (raised), else the first line of what `datasets` said."""
    if os.path.isdir(name):
        for path in sorted(Path(name).rglob("*")):
            if path.suffix.lower() in (".json", ".jsonl") and path.is_file():
                check_json_rows(path, "data file")
    cause = err.__cause__ or err
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return ValueError(f"dataset {name} does not load: {first}")


@contextlib.contextmanager
def datasets_errors_unlogged() -> Iterator[None]:
    """`datasets` logs a parse error (its own line, naming no line of the file) before raising it; the error raised
    is said in one line by whoever catches it (`check_json_rows`, `check_dataset_files`)."""
    from datasets.utils import logging as datasets_logging

    before = datasets_logging.get_verbosity()
    datasets_logging.set_verbosity(datasets_logging.CRITICAL)
    try:
        yield
    finally:
        datasets_logging.set_verbosity(before)


def expand_inputs(patterns: Sequence[str | os.PathLike]) -> list[Path]:
    """Files named by paths or glob patterns (`data/*.txt`), in order, each once: the one expansion of every
    command's `--input`. A pattern that matches nothing, or a path that is no file, is an error naming it."""
    files: list[Path] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if not glob.has_magic(pattern):
            check_input_file(pattern, hint=f"name its files, e.g. {pattern}/*.txt" if os.path.isdir(pattern) else "")
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise FileNotFoundError(f"no input file matches {pattern}")
        files += [Path(m) for m in matches if Path(m) not in files]
    return files


def load_named_dataset(name: str, **kwargs: Any) -> Any:
    """`datasets.load_dataset(name, **kwargs)`, its refusals said in one line naming `name`.

    `datasets` no longer runs loading scripts: a folder holding one is refused, as is a name it cannot find.
    """
    import datasets

    try:
        with datasets_errors_unlogged():
            return datasets.load_dataset(name, **kwargs)
    except datasets.exceptions.DatasetGenerationError as err:
        raise check_dataset_files(name, err) from None
    except (RuntimeError, datasets.exceptions.DatasetNotFoundError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"dataset {name} does not load: {first}. Give a local folder of data files "
                         "(.txt, .jsonl, .csv, .parquet) or a dataset name without a loading script") from None


def check_text_column(rows: Any, column: str, source: str) -> None:
    """Refuse a `datasets.Dataset` whose `column` is missing, not text, or holds a null (naming the row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column not in rows.column_names:
        raise ValueError(f"text column {column!r} is not in {source} (columns: {rows.column_names}); pass --text-column")
    values = rows.data.column(column)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or pa.types.is_null(values.type)):
        raise ValueError(f"column {column!r} of {source} holds {values.type}, not text; name a text column with "
                         "--text-column")
    if values.null_count:
        row = int(pc.index(pc.is_null(values), True).as_py())
        raise ValueError(f"row {row + 1} of {source} has no text in column {column!r} (null): remove the row or give "
                         "it a text")


def iter_dataset_texts(spec: str, text_column: str = "text") -> Iterator[str]:
    """Stream the texts of a `datasets` dataset given as NAME or NAME:SPLIT (default split: train); empty texts are
    skipped, and a null or non-text value is refused naming its row (as `prepare` and `eval` refuse it).

    Streaming reads as it goes, so memory stays bounded whatever the dataset's size.
    """
    name, _, split = spec.partition(":")
    dataset = load_named_dataset(name, split=split or "train", streaming=True)
    for row_number, row in enumerate(read_dataset_rows(name, dataset), 1):
        if row_number == 1 and text_column not in row:
            raise ValueError(f"dataset {name} has no column {text_column!r} (columns: {sorted(row)}); pass --text-column")
        text = row[text_column]
        if not isinstance(text, str):
            raise ValueError(f"row {row_number} of dataset {name} has no text in column {text_column!r} ({text!r}): "
                             "remove the row or give it a text")
        if text:
            yield text


def read_dataset_rows(name: str, dataset: Any) -> Iterator[dict[str, Any]]:
    """The rows of a streamed dataset; one that cannot be read is a one-line error (`check_dataset_files`)."""
    rows = iter(dataset)
    while True:
        try:
            with datasets_errors_unlogged():
                row = next(rows)
        except StopIteration:
            return
        except Exception as err:  # pyarrow's and datasets' parse errors, whose messages name no file
            raise check_dataset_files(name, err) from None
        yield row
