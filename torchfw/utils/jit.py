"""The package's one numba probe: whether compiled CPU kernels are available, and how to compile.

One concern: importing numba (optional at run time; ``TORCHFW_DISABLE_NUMBA=1`` turns it off, to
test the pure-Python and PyTorch fallbacks) and compiling with the options every compiled kernel
of torchfw uses. The modules with compiled code (:mod:`torchfw.svm._kernel_cpu`,
:mod:`torchfw.ww._blocks`, :mod:`torchfw.optimizers._kernels`, :mod:`torchfw.lasso.equivalence`)
read :data:`HAVE_NUMBA` and :func:`njit` from here instead of each probing on its own.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

try:
    if os.environ.get("TORCHFW_DISABLE_NUMBA"):
        raise ImportError("disabled by TORCHFW_DISABLE_NUMBA")
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None  # type: ignore[assignment]  # optional module: callers test HAVE_NUMBA
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "numba", "njit", "package_digest", "sources_digest"]


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
    dispatcher = numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=fastmath)(fn)
    _stamp_with_package(dispatcher)
    return dispatcher


def sources_digest(root: Path) -> str:
    """A digest of the path, size and modification time of every ``.py`` file under ``root``."""
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


@functools.cache
def package_digest() -> str:
    """:func:`sources_digest` of the installed torchfw package, computed once per process."""
    return sources_digest(Path(__file__).resolve().parents[1])


def _stamp_with_package(dispatcher, digest: str | None = None) -> None:
    """Key ``dispatcher``'s on-disk cache to the whole package's sources, not its own file's.

    numba validates a cached kernel against the modification time and size of the file that
    defines it, but a kernel compiled with ``cache=True`` embeds the compiled code of every
    function it calls: after an edit of a callee in another module, the cache would go on
    serving the old callee. Adding :func:`package_digest` to the stamp numba stores in its
    index makes any change to the package's sources recompile every kernel once. (An install
    or upgrade writes every file anew, so users see the same behaviour as before; numba
    versions without this internal attribute keep their own rule.)
    """
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        cache_file._source_stamp = (cache_file._source_stamp,
                                    package_digest() if digest is None else digest)
