"""Communication of the sharded solvers: rank layout and the instrumented collectives.

One concern: moving arrays between the ranks of a ``torch.distributed`` process group so that
every rank ends with bit-identical values (:class:`Communicator`), plus the contiguous split of
the examples over the ranks (:func:`shard_range`) and the gathering of sharded vectors
(:func:`gather_shards`). Nothing here knows about kernels or solvers.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import Tensor

from ..utils.validation import check_int_at_least

try:
    import torch.distributed as dist

    HAVE_DISTRIBUTED = dist.is_available()
except ImportError:  # pragma: no cover - torch builds without distributed support
    dist = None  # type: ignore[assignment]  # optional module: callers test HAVE_DISTRIBUTED
    HAVE_DISTRIBUTED = False


def shard_range(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Contiguous, balanced ``[start, stop)`` of ``n`` examples for ``rank`` of ``world_size``.

    The first ``n % world_size`` ranks get one example more. Any contiguous split in rank order
    works with this module; this is the one the examples and tests use.
    """
    check_int_at_least("world_size", world_size, 1)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    base, extra = divmod(int(n), world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)



class Communicator:
    """The collectives of the sharded solvers, instrumented.

    Every call records how many bytes this rank hands to the collective (``sent``) and how many
    it gets back from the other ranks (``received``), per operation, and the wall time spent in
    the call (which includes waiting for slower ranks). These are the payloads of *our* calls;
    the bytes on the wire also depend on the backend's algorithm and headers, which
    ``benchmarks/distributed.py`` measures separately.

    Parameters
    ----------
    group : ProcessGroup, optional
        Default: the world group. The process group must be initialized.
    """

    def __init__(self, group=None):
        if not HAVE_DISTRIBUTED:
            raise RuntimeError("torch.distributed is not available in this PyTorch build")
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized: call "
                               "torch.distributed.init_process_group(...) first (torchrun sets "
                               "the environment it reads)")
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.backend = str(dist.get_backend(group))
        # NCCL only moves CUDA tensors; gloo moves CPU tensors.
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if self.backend == "nccl" else torch.device("cpu"))
        self._gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters."""
        self.ops: dict[str, dict[str, float]] = {}

    def _record(self, op: str, sent: int, received: int, seconds: float) -> None:
        entry = self.ops.setdefault(op, {"calls": 0, "sent": 0, "received": 0, "seconds": 0.0})
        entry["calls"] += 1
        entry["sent"] += sent
        entry["received"] += received
        entry["seconds"] += seconds

    def stats(self) -> dict:
        """Totals and per-operation counters: ``calls``, ``sent``, ``received``, ``seconds``."""
        total = {"calls": 0, "sent": 0, "received": 0, "seconds": 0.0}
        for entry in self.ops.values():
            for key in total:
                total[key] += entry[key]
        return {"total": total, "ops": {k: dict(v) for k, v in self.ops.items()}}

    def _to_comm(self, array: np.ndarray) -> Tensor:
        t = torch.from_numpy(np.ascontiguousarray(array))
        return t if self.device.type == "cpu" else t.to(self.device)

    def all_gather(self, array: np.ndarray, op: str = "all_gather") -> np.ndarray:
        """Every rank's ``array`` (same shape on all ranks), stacked in rank order."""
        if self.size == 1:  # a group of one: nothing to send
            self._record(op, 0, 0, 0.0)
            return np.array(array)[None]
        t = self._to_comm(array)
        flat = t.reshape(-1)
        out = torch.empty(self.size * flat.numel(), dtype=t.dtype, device=t.device)
        start = time.perf_counter()
        self._gather(out, flat, group=self.group)
        result = out.cpu().numpy().reshape((self.size,) + tuple(t.shape))
        self._record(op, t.nbytes, (self.size - 1) * t.nbytes, time.perf_counter() - start)
        return result

    def all_reduce(self, array: np.ndarray, reduce: str = "max",
                   op: str = "all_reduce") -> np.ndarray:
        """Elementwise ``max`` or ``min`` of ``array`` over the ranks (exact, order-free).

        Sums are never all-reduced: the backend's summation order may differ between ranks, and
        the ranks must agree bit for bit. Use :meth:`sum` (all-gather, then :func:`math.fsum`).
        """
        if self.size == 1:
            self._record(op, 0, 0, 0.0)
            return np.array(array)
        t = self._to_comm(array)
        reduce_op = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[reduce]
        start = time.perf_counter()
        dist.all_reduce(t, op=reduce_op, group=self.group)
        result = t.cpu().numpy()
        self._record(op, t.nbytes, t.nbytes, time.perf_counter() - start)
        return result

    def sum(self, values, op: str = "sum") -> np.ndarray:
        """Correctly rounded sums of ``values`` over the ranks, identical on every rank."""
        rows = self.all_gather(np.asarray(values, dtype=np.float64).reshape(-1), op=op)
        return np.array([math.fsum(rows[:, k]) for k in range(rows.shape[1])])

    def gather_rows(self, rows: np.ndarray, op: str = "gather_rows") -> np.ndarray:
        """Concatenate every rank's ``(k_r, L)`` rows in rank order (``k_r`` may differ)."""
        rows = np.asarray(rows, dtype=np.float64)
        width = rows.shape[1]
        counts = self.all_gather(np.array([rows.shape[0]], dtype=np.int64), op=op)[:, 0]
        top = int(counts.max())
        if top == 0:
            return np.zeros((0, width))
        padded = np.zeros((top, width))
        padded[:rows.shape[0]] = rows
        everything = self.all_gather(padded, op=op)
        return np.concatenate([everything[r, :counts[r]] for r in range(self.size)])

    def all_gather_object(self, obj) -> list:
        """Every rank's picklable ``obj`` (set-up only: labels, sizes)."""
        out = [None] * self.size
        start = time.perf_counter()
        dist.all_gather_object(out, obj, group=self.group)
        self._record("all_gather_object", 0, 0, time.perf_counter() - start)
        return out


def gather_shards(tensor: Tensor, comm: Communicator | None = None) -> Tensor:
    """Concatenate every rank's shard of a per-example vector or matrix, in rank order.

    A collective: every rank must call it. Returns the full tensor on every rank (in float64 for
    transport, cast back to the input's dtype, on the input's device).
    """
    comm = comm or Communicator()
    t = tensor.detach()
    rows = t.reshape(t.shape[0], -1).double().cpu().numpy()
    full = comm.gather_rows(rows, op="gather_shards")
    out = torch.from_numpy(full).to(dtype=t.dtype, device=t.device)
    return out.reshape((full.shape[0],) + tuple(t.shape[1:]))
