"""Threads on the CPU: torch on one thread around small fits, Python threads for compiled work.

On inputs of a few thousand values, the tensor operations around a fit (validation, gamma,
label handling, set-up, model extraction) take microseconds of work each, and waking torch's
intra-op thread pool costs more than that: on a 2-core machine with the other core busy, one
``var`` of a 1,257 x 64 matrix measured 16 ms instead of 0.05 ms, 50 us per ``index_select``.
:func:`few_threads` runs a block on one thread when the input is small, and restores the
setting after.

The compiled kernels release the GIL (:func:`torchfw.utils.jit.njit`), so Python threads running
them on different data run in parallel: :func:`parallel_map` spreads independent pieces of
compiled work (the rows of a kernel matrix, the binary problems of a multiclass fit) over a
small pool, and :func:`workers` says how many threads a fit may use: the cores available, at
most torch's own thread setting (``OMP_NUM_THREADS=1`` or ``torch.set_num_threads(1)`` give one
thread) as the user left it before :func:`one_thread` lowered it.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager

import torch

__all__ = ["few_threads", "one_thread", "SMALL_INPUT", "allowed_threads", "workers",
           "parallel_map"]

#: Values (rows x columns) up to which a CPU fit runs torch on one thread.
SMALL_INPUT = 2**21


@contextmanager
def one_thread(active: bool = True):
    """Torch on one intra-op thread inside the block (when ``active``); restored after."""
    global _outer_threads
    threads = torch.get_num_threads()
    switch = active and threads > 1
    outermost = switch and _outer_threads is None
    if switch:
        if outermost:
            _outer_threads = threads
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if switch:
            torch.set_num_threads(threads)
            if outermost:
                _outer_threads = None


def few_threads(X, work: int | None = None, *, device: torch.device | None = None):
    """:func:`one_thread` for a small CPU input, else nothing.

    ``X`` is a tensor or any array-like with a ``shape`` (NumPy, SciPy sparse, pandas), so that
    the block may include the input's own validation and conversion; an input without a shape
    (nested lists) counts as small. Small: at most :data:`SMALL_INPUT` values, or ``work``
    (e.g. the multiply-adds of a prediction) at most that when given. Nothing changes for a
    tensor off the CPU or a ``device`` (where ``X`` is headed) that is not the CPU.
    """
    if (isinstance(X, torch.Tensor) and X.device.type != "cpu") or \
            (device is not None and device.type != "cpu"):
        return one_thread(False)
    if work is None:
        shape = getattr(X, "shape", None)
        work = shape[0] * shape[1] if shape is not None and len(shape) == 2 else 0
    return one_thread(work <= SMALL_INPUT)


# torch's thread count as it was before the outermost :func:`one_thread` lowered it (None
# outside any): what the user allows, read by :func:`allowed_threads` inside a fit.
_outer_threads: int | None = None


def allowed_threads() -> int:
    """Threads the user allows: torch's intra-op setting, as it was outside :func:`one_thread`.

    torch reads ``OMP_NUM_THREADS`` at start-up and ``torch.set_num_threads`` changes it; both
    then bound the compiled path's threads too. At most the cores this process may run on.
    """
    threads = _outer_threads if _outer_threads is not None else torch.get_num_threads()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(threads, cores))


def workers(pieces: int, work: float, min_work: float) -> int:
    """Threads for ``pieces`` independent pieces of compiled work: 1 when the work is small.

    ``work`` is the work's size and ``min_work`` the size from which a second thread pays for
    its hand-off (tens of microseconds per piece); the count is at most :func:`allowed_threads`
    and ``pieces``.
    """
    if work < min_work:
        return 1
    return max(1, min(allowed_threads(), pieces))


# Pools by size, created on first use and kept: starting threads costs ~0.1 ms per fit.
_pools: dict[int, ThreadPoolExecutor] = {}


def parallel_map(fn, items, threads: int, *, ahead: int | None = None) -> list:
    """``[fn(item) for item in items]``, on ``threads`` threads when more than one.

    The results are in the order of ``items`` whatever order the threads finish in, and the
    first exception raised (in that order) propagates, so a caller sees what the loop would
    give. ``fn`` must not touch state another item touches: only compiled code releasing the
    GIL gains from the threads. ``items`` may be a generator, run on the calling thread (e.g.
    building what needs torch); with ``ahead``, it is advanced only while fewer than ``ahead``
    items are unfinished, which bounds the memory of the items in flight.
    """
    if threads <= 1:
        return [fn(item) for item in items]
    pool = _pools.get(threads)
    if pool is None:
        pool = _pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="torchfw")
    futures: list[Future] = []
    unfinished: set[Future] = set()
    try:
        for item in items:
            if ahead is not None and len(unfinished) >= ahead:
                unfinished = wait(unfinished, return_when=FIRST_COMPLETED).not_done
            futures.append(pool.submit(fn, item))
            unfinished.add(futures[-1])
        return [future.result() for future in futures]
    finally:  # after an error, what has not started does not start
        for future in futures:
            future.cancel()


def _forget_pools() -> None:
    """After a fork: the child has the pools' objects but not their threads; start afresh."""
    _pools.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
