"""A run's output folder: who owns it (a lock), which run it holds (run.json), and what a re-run may do.

A folder holds one run. Training into it again without `resume` refuses (or, with `overwrite`,
deletes the previous run's outputs first, and only in a folder whose run.json says a tinylm run wrote
them); `resume` continues only the run named in run.json, so checkpoints of another run are never
picked up, and with no run there it refuses rather than starting fresh. A start that fails before its
first step takes its run.json back, and a run that stopped before its first checkpoint (a crash at a later
step) left nothing to continue: the next command, with or without `resume`, starts afresh in its place and
says so, so neither the corrected command nor `--resume` is refused. A second process
training into the same folder at the same time is refused by an exclusive lock (a lock file that is a
symlink or a hard link is refused, never written through). The folder's mode is set only if we create it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import IO

from ...fileio import FILE_MODE, make_folders, write_json_atomic
from .summary import SUMMARY_FILE

RUN_FILE = "run.json"
LOCK_FILE = ".lock"
CHECKPOINTS_DIR = "checkpoints"
METRICS_FILE = "metrics.jsonl"
LOSS_PLOT = "loss.png"
TENSORBOARD_DIR = "tensorboard"
HF_DIR = "hf"  # the run's Hugging Face folder, once published
# Everything a run writes into its folder; --overwrite removes exactly these.
RUN_OUTPUTS = (CHECKPOINTS_DIR, METRICS_FILE, LOSS_PLOT, RUN_FILE, SUMMARY_FILE, HF_DIR, TENSORBOARD_DIR,
               "chat_tokenizer")
KEPT_OUTPUTS = (SUMMARY_FILE, HF_DIR)  # a run that wrote one of these finished: it is never replaced unasked


class RunInUseError(RuntimeError):
    """Another live process is training into the same out-dir."""


class RunDirectory:
    """The output folder of one training run."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock_fh: IO[str] | None = None

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS_DIR

    def lock(self) -> None:
        """Take the folder's exclusive lock; another live process holding it is a `RunInUseError`."""
        make_folders(self.path)
        fh = self._open_lock_file()
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise RunInUseError(
                f"{self.path} is in use by {holder}: two runs must not write one out-dir; "
                "wait for it to finish or choose another --out-dir"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        self._lock_fh = fh

    def _open_lock_file(self) -> IO[str]:
        """The lock file, opened without following a symlink; one that is not our plain file is refused."""
        path = self.path / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            raise FileExistsError(f"{path} is a symlink, not tinylm's lock file: remove it, or choose another "
                                  "--out-dir") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            os.close(fd)
            raise FileExistsError(f"{path} is not tinylm's lock file (a special file or a hard link): remove it, "
                                  "or choose another --out-dir")
        return open(fd, "a+", encoding="utf-8")

    def unlock(self) -> None:
        """Release the lock (also released when the process dies)."""
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh: IO[str] | None = None

    def used(self) -> list[str]:
        """The previous run's outputs present in the folder."""
        return [name for name in RUN_OUTPUTS if (self.path / name).exists()]

    def run_id(self) -> str | None:
        """The id of the run the folder holds (run.json), or None."""
        path = self.path / RUN_FILE
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is corrupt ({err}); use --overwrite to start a new run there") from None
        if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
            raise ValueError(f"{path} is corrupt (no \"run_id\" string); use --overwrite to start a new run there")
        return record["run_id"]

    def start(self, *, resume: bool, overwrite: bool) -> tuple[str | None, bool]:
        """The run id to train under, and whether a previous run is continued.

        Without `resume`, a folder holding a previous run is refused unless `overwrite` is given.
        A folder written before run ids existed resumes with id None (its checkpoints carry none).
        """
        previous = self.run_id()
        if previous is not None and self.stopped_before_checkpoint():
            print(f"{self.path}: run {previous} stopped before its first checkpoint and left nothing to continue; "
                  "starting afresh in its place")
            self._remove(self.used())
            previous = None
            resume = False
        if resume:
            if previous is None and not self.checkpoints.is_dir():
                raise FileNotFoundError(f"no run to resume in {self.path} (no {RUN_FILE}, no checkpoints): "
                                        "leave out --resume to start one, or name the run's --out-dir")
            return previous, True
        used = self.used()
        if used and previous is None:
            raise FileExistsError(
                f"{self.path} holds {', '.join(used)} but no {RUN_FILE}: no tinylm run wrote it, so it is neither "
                "continued nor deleted (--overwrite); choose another --out-dir, or move those files away yourself"
            )
        if used and not overwrite:
            raise FileExistsError(
                f"{self.path} already holds a run ({', '.join(used)}): pass --resume to continue it, "
                "--overwrite to delete it and start afresh, or choose another --out-dir"
            )
        self._remove(used)
        run_id = uuid.uuid4().hex[:12]
        write_json_atomic(self.path / RUN_FILE, {"run_id": run_id})
        return run_id, False

    def stopped_before_checkpoint(self) -> bool:
        """True when the folder's run wrote no checkpoint and never finished (it crashed or was killed before its first
        checkpoint): nothing of it can be resumed or published."""
        checkpoints = self.checkpoints
        if checkpoints.is_dir() and any(p.suffix == ".pt" for p in checkpoints.iterdir()):
            return False
        return not any((self.path / name).exists() for name in KEPT_OUTPUTS)

    def abandon(self, run_id: str | None) -> None:
        """Undo the start of new run `run_id` when it failed before its first step (a typo'd preset, missing data):
        what it wrote (run.json, ...) is removed, so that the corrected command finds the folder as it was.

        A fresh start left none of `RUN_OUTPUTS` behind (`start` refuses or deletes them), so all present are its.
        """
        if run_id is None or self.checkpoints.exists() or (self.path / METRICS_FILE).exists():
            return
        if self.run_id() != run_id:
            return
        self._remove(self.used())

    def _remove(self, names: list[str]) -> None:
        """Delete the run outputs `names` (a symlink itself, never what it points to)."""
        for name in names:
            target = self.path / name
            shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
