"""Data parallelism under `torchrun`: this process's rank, its slice of each batch, and the collectives.

Every rank draws the same global batch from the same seeded sampler and keeps its own rows, so N
ranks together compute exactly the gradient of a 1-process run with the same batch. In one process
(no `WORLD_SIZE`, or 1) every collective here is a no-op and the model is not wrapped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch


def is_main_process() -> bool:
    """True in a single process and on rank 0 under torchrun: the process that writes shared outputs."""
    return int(os.environ.get("RANK", "0")) == 0


def wait_for_all_ranks() -> None:
    """Under torchrun, hold every rank until all arrive (so no rank exits while another still writes)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


@dataclass(frozen=True)
class DataParallel:
    """This process's place among the data-parallel ranks, and what the loop asks of them."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def from_environment(cls) -> DataParallel:
        """The ranks torchrun started (initialising the process group), or one process."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))

    @property
    def main(self) -> bool:
        """Rank 0: the process that writes checkpoints, metrics and the summary."""
        return self.rank == 0

    def micro_batch_rows(self, batch_size: int, grad_accum_steps: int) -> tuple[int, slice]:
        """(rows of a micro-step over all ranks, this rank's rows of them)."""
        if batch_size % (grad_accum_steps * self.world):
            raise ValueError(f"batch_size {batch_size} must be divisible by grad_accum_steps * world_size = "
                             f"{grad_accum_steps * self.world}")
        size = batch_size // grad_accum_steps
        per_rank = size // self.world
        return size, slice(self.rank * per_rank, (self.rank + 1) * per_rank)

    def barrier(self) -> None:
        """Hold this rank until every rank arrives."""
        if self.world > 1:
            torch.distributed.barrier()

    def any(self, flag: bool, device: torch.device) -> bool:
        """True when `flag` is true on any rank (so that every rank stops at the same step)."""
        return flag if self.world <= 1 else self.agree_max(device)(1.0 if flag else 0.0) > 0

    def agree_max(self, device: torch.device) -> Callable[[float], float] | None:
        """A function giving the largest of a number over the ranks (every rank gets the same; None in one
        process): the time budget's progress, which each rank measures on its own clock."""
        if self.world <= 1:
            return None

        def largest(value: float) -> float:
            tensor = torch.tensor([value], dtype=torch.float64, device=device)
            torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
            return float(tensor.item())

        return largest

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """`model` in DistributedDataParallel (gradients averaged over ranks in backward); as is in one process."""
        if self.world <= 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def no_sync(self, model: torch.nn.Module) -> Callable[[], contextlib.AbstractContextManager] | None:
        """`train_step`'s `no_sync`: DDP's, which skips the gradient all-reduce of all but the last micro-batch."""
        return model.no_sync if self.world > 1 else None

    @property
    def all_reduce(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """`train_step`'s `all_reduce`: the mean over ranks (None in one process)."""
        return self._mean_over_ranks if self.world > 1 else None

    def _mean_over_ranks(self, t: torch.Tensor) -> torch.Tensor:
        torch.distributed.all_reduce(t)
        return t / self.world
