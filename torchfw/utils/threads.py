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
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

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


# Pools of helper threads by size, created on first use and kept: starting threads costs
# ~0.1 ms per fit.
_pools: dict[int, ThreadPoolExecutor] = {}


def parallel_map(fn, items, threads: int, *, ahead: int | None = None) -> list:
    """``[fn(item) for item in items]``, on ``threads`` threads when more than one.

    The calling thread is one of the ``threads``: it takes items as the ``threads - 1`` helper
    threads do, from one queue in item order, and waits only for items a helper has started.
    A helper that does not get a core (another job holds it) therefore costs the fit at most the
    item it holds, not its share of the items: on a 2-core machine with a spinning job beside
    it, waiting on two pool threads made one-vs-rest vowel (11 problems of 396 examples)
    twice as slow as one thread. The results are in the order of ``items`` whatever order the
    threads finish in, and the first exception raised (in that order) propagates once the
    items before it are done, so a caller sees what the loop would give; after an error no
    other item starts, and a ``KeyboardInterrupt`` on the calling thread propagates at once.
    ``fn`` must not touch state another item touches: only compiled code releasing the GIL
    gains from the threads. ``items`` may be a generator, always advanced on the calling
    thread (e.g. building what needs torch); with ``ahead``, it is advanced only while fewer
    than ``ahead`` items are unfinished, which bounds the memory of the items in flight.
    """
    if threads <= 1:
        return [fn(item) for item in items]
    helpers = threads - 1
    pool = _pools.get(helpers)
    if pool is None:
        pool = _pools[helpers] = ThreadPoolExecutor(helpers, thread_name_prefix="torchfw")
    work = _Work(fn)
    for _ in range(helpers):
        pool.submit(work.drain)
    try:
        for item in items:
            if not work.put(item, ahead):
                break  # an item failed: no other starts
        work.close()
        work.drain()  # what is left, alongside the helpers
        return work.results()
    except BaseException:
        work.abandon()  # nothing more starts; the helpers' items end on their own
        raise


_FAILED = object()  # what _Work._take returns after an item failed


class _Work:
    """The shared queue of one :func:`parallel_map`: items in order, taken by whichever thread
    is free (the caller and the helpers alike), their results and errors by index."""

    def __init__(self, fn):
        self.fn = fn
        self.cond = threading.Condition()
        self.queue: deque = deque()  # (index, item) not started
        self.count = 0  # items put
        self.unfinished = 0  # put and not finished (queued or running)
        self.closed = False  # no more items will be put
        self.failed: int | None = None  # the lowest index that raised
        self.out: dict[int, Any] = {}
        self.errors: dict[int, BaseException] = {}
        self.running: set[int] = set()
        self.caller = threading.current_thread()  # its interrupts propagate at once

    def put(self, item, ahead: int | None) -> bool:
        """Queue ``item``; False once an item has failed. While ``ahead`` items are unfinished,
        the caller runs queued ones itself, or waits for a helper's to finish."""
        while ahead is not None and self.unfinished >= ahead:
            taken = self._take(room=True)
            if taken is _FAILED:
                return False
            if taken is not None:
                self._run(*taken)
        with self.cond:
            if self.failed is not None:
                return False
            self.queue.append((self.count, item))
            self.count += 1
            self.unfinished += 1
            self.cond.notify()
        return True

    def close(self) -> None:
        """No more items: the threads leave once the queue is empty."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def abandon(self) -> None:
        """The caller gives up (an exception of its own): nothing queued starts."""
        with self.cond:
            self.queue.clear()
            self.closed = True
            if self.failed is None:
                self.failed = -1
            self.cond.notify_all()

    def drain(self) -> None:
        """Run queued items until the queue is closed and empty, or an item failed."""
        while True:
            taken = self._take(room=False)
            if taken is None or taken is _FAILED:
                return
            self._run(*taken)

    def _take(self, room: bool):
        """The next queued ``(index, item)``, marked running; :data:`_FAILED` after an error.
        When the queue is empty: with ``room``, None once some item finished (or at once if
        none is running); else None once the queue is closed, waiting for items till then."""
        with self.cond:
            while not self.queue:
                if self.failed is not None:
                    return _FAILED
                if room:
                    if self.running:
                        self.cond.wait()
                    return None
                if self.closed:
                    return None
                self.cond.wait()
            if self.failed is not None:
                return _FAILED
            index, item = self.queue.popleft()
            self.running.add(index)
            return index, item

    def _run(self, index: int, item) -> None:
        """Item ``index``'s result, or its error, recorded."""
        try:
            value = self.fn(item)
        except BaseException as exc:  # re-raised by results(), in item order
            with self.cond:
                self.errors[index] = exc
                if self.failed is None or index < self.failed:
                    self.failed = index
                self.queue.clear()
                self._finish(index)
            if threading.current_thread() is self.caller and not isinstance(exc, Exception):
                raise  # a KeyboardInterrupt on the calling thread: at once
            return
        with self.cond:
            self.out[index] = value
            self._finish(index)

    def _finish(self, index: int) -> None:  # under the lock
        self.running.discard(index)
        self.unfinished -= 1
        self.cond.notify_all()

    def results(self) -> list:
        """The results in item order, once every started item before the first error (all
        of them without one) is done; the first error in item order raised."""
        with self.cond:
            while any(i < (self.count if self.failed is None else self.failed)
                      for i in self.running):
                self.cond.wait()
            if self.errors:
                raise self.errors[min(self.errors)]
            return [self.out[i] for i in range(self.count)]


def _forget_pools() -> None:
    """After a fork: the child has the pools' objects but not their threads; start afresh."""
    _pools.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
