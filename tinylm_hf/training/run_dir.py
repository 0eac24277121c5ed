"""A run's output folder: who owns it (a lock), which run it holds (run.json), and what a re-run may do.

A folder holds one run. Training into it again without `resume` refuses (or, with `overwrite`,
deletes the previous run's outputs first); `resume` continues only the run named in run.json, so
checkpoints of another run are never picked up. A second process training into the same folder at
the same time is refused by an exclusive lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from pathlib import Path

from ..fileio import DIR_MODE, write_json_atomic

RUN_FILE = "run.json"
LOCK_FILE = ".lock"
# Everything a run writes into its folder; --overwrite removes exactly these.
RUN_OUTPUTS = ("checkpoints", "metrics.jsonl", "loss.png", RUN_FILE, "summary.json", "hf", "tensorboard",
               "chat_tokenizer")


class RunInUseError(RuntimeError):
    """Another live process is training into the same out-dir."""


class RunDirectory:
    """The output folder of one training run."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock_fh = None

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def lock(self) -> None:
        """Take the folder's exclusive lock; another live process holding it is a `RunInUseError`."""
        self.path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path, DIR_MODE)
        fh = open(self.path / LOCK_FILE, "a+")
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

    def unlock(self) -> None:
        """Release the lock (also released when the process dies)."""
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    def used(self) -> list[str]:
        """The previous run's outputs present in the folder."""
        return [name for name in RUN_OUTPUTS if (self.path / name).exists()]

    def run_id(self) -> str | None:
        """The id of the run the folder holds (run.json), or None."""
        path = self.path / RUN_FILE
        if not path.is_file():
            return None
        try:
            return str(json.loads(path.read_text(encoding="utf-8"))["run_id"])
        except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is corrupt ({err}); use --overwrite to start a new run there") from None

    def start(self, *, resume: bool, overwrite: bool) -> tuple[str | None, bool]:
        """The run id to train under, and whether a previous run is continued.

        Without `resume`, a folder holding a previous run is refused unless `overwrite` is given.
        A folder written before run ids existed resumes with id None (its checkpoints carry none).
        """
        previous = self.run_id()
        if resume and (previous is not None or self.checkpoints.is_dir()):
            return previous, True
        used = self.used()
        if used and not resume:
            if not overwrite:
                raise FileExistsError(
                    f"{self.path} already holds a run ({', '.join(used)}): pass --resume to continue it, "
                    "--overwrite to delete it and start afresh, or choose another --out-dir"
                )
            for name in used:
                target = self.path / name
                shutil.rmtree(target) if target.is_dir() else target.unlink()
        run_id = uuid.uuid4().hex[:12]
        write_json_atomic(self.path / RUN_FILE, {"run_id": run_id})
        return run_id, False
