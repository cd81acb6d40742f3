"""One thread for torch's operations on small CPU inputs.

On inputs of a few thousand values, the tensor operations around a fit (validation, gamma,
label handling, set-up, model extraction) take microseconds of work each, and waking torch's
intra-op thread pool costs more than that: on a 2-core machine with the other core busy, one
``var`` of a 1,257 x 64 matrix measured 16 ms instead of 0.05 ms, 50 us per ``index_select``.
The compiled loops are single-threaded anyway. :func:`few_threads` runs a block on one thread
when the input is small, and restores the setting after.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

__all__ = ["few_threads", "one_thread", "SMALL_INPUT"]

#: Values (rows x columns) up to which a CPU fit runs torch on one thread.
SMALL_INPUT = 2**21


@contextmanager
def one_thread(active: bool = True):
    """Torch on one intra-op thread inside the block (when ``active``); restored after."""
    threads = torch.get_num_threads()
    switch = active and threads > 1
    if switch:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if switch:
            torch.set_num_threads(threads)


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
