"""Python's cyclic garbage collector paused over a block that only allocates long-lived objects.

Importing a family of torchfw (its modules, numba and numba's typing tables) or loading compiled
kernels from numba's disk cache (unpickled environments, the modules they name, LLVM objects)
allocates some hundred thousand objects that live as long as the process, in a process that
already holds torch's and scikit-learn's (about 270,000 objects). The allocations trigger
collections of the oldest generation, each walking every object of the process and finding
nothing to free: 0.13 s of the 0.18 s of CPU time of ``from torchfw import SVC`` after
``import torch, sklearn``, and about half of the loading of a first fit's kernels (2-core Xeon,
``benchmarks/first_fit.py``). Paused over those blocks, the collector resumes as usual after
them.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Disable the cyclic collector (if enabled) for the block, then re-enable it.

    Only the state found is restored: a nested block, or a caller that disabled the collector
    itself, leaves it disabled; the outermost block that found it enabled re-enables it, also
    when the block raises.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
