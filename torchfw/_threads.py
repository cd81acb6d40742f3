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


def few_threads(X):
    """:func:`one_thread` if ``X`` is a small CPU tensor (:data:`SMALL_INPUT`), else nothing."""
    return one_thread(X.device.type == "cpu" and X.shape[0] * X.shape[1] <= SMALL_INPUT)
