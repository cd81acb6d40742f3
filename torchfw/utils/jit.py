"""The package's one numba probe: whether compiled CPU kernels are available, and how to compile.

One concern: importing numba (optional at run time; ``TORCHFW_DISABLE_NUMBA=1`` turns it off, to
test the pure-Python and PyTorch fallbacks) and compiling with the options every compiled kernel
of torchfw uses. The modules with compiled code (:mod:`torchfw.svm._kernel_cpu`,
:mod:`torchfw.ww._blocks`, :mod:`torchfw.optimizers._kernels`, :mod:`torchfw.lasso.equivalence`)
read :data:`HAVE_NUMBA` and :func:`njit` from here instead of each probing on its own.
"""

from __future__ import annotations

import os

try:
    if os.environ.get("TORCHFW_DISABLE_NUMBA"):
        raise ImportError("disabled by TORCHFW_DISABLE_NUMBA")
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None  # type: ignore[assignment]  # optional module: callers test HAVE_NUMBA
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "numba", "njit"]


def njit(fn, *, fastmath: bool = False, fallback: bool = False):
    """``fn`` compiled in nopython mode (cached on disk, GIL released, no bounds checks).

    Parameters
    ----------
    fn : callable
        A function numba can compile.
    fastmath : bool, default False
        Let LLVM reassociate floating-point arithmetic (only where the result may differ in the
        last bits, e.g. the kernel-column loops).
    fallback : bool, default False
        Without numba, return ``fn`` itself (it then runs in the interpreter) instead of
        ``None`` (callers that have a PyTorch path test for ``None``).
    """
    if not HAVE_NUMBA:
        return fn if fallback else None
    return numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=fastmath)(fn)
