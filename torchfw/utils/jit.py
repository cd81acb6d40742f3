"""The package's one numba probe: whether compiled CPU kernels are available, and how to compile.

One concern: importing numba (optional at run time; ``TORCHFW_DISABLE_NUMBA=1`` turns it off, to
test the pure-Python and PyTorch fallbacks) and compiling with the options every compiled kernel
of torchfw uses. The modules with compiled code (:mod:`torchfw.svm._kernel_cpu`,
:mod:`torchfw.ww._blocks`, :mod:`torchfw.optimizers._kernels`, :mod:`torchfw.lasso.equivalence`,
:mod:`torchfw.optim._linf_kernel`) read :data:`HAVE_NUMBA` and :func:`njit` from here instead
of each probing on its own.

Whether the compiled kernels *run now* is :func:`compiled_kernels`, which
:mod:`torchfw.utils.cold_start` decides: right after an install numba's disk cache is empty and
the first small fit would spend tens of seconds compiling, so it runs on the PyTorch paths
instead while a background process fills the cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
import types
from pathlib import Path

from .collector import paused
from .kernel_cache import light_loading

try:
    if os.environ.get("TORCHFW_DISABLE_NUMBA"):
        raise ImportError("disabled by TORCHFW_DISABLE_NUMBA")
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None  # type: ignore[assignment]  # optional module: callers test HAVE_NUMBA
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "numba", "njit", "compiled_kernels", "set_deferred", "current", "current_module",
           "interpreted",
           "package_digest", "sources_digest"]


def njit(fn, *, fastmath: bool | set[str] = False, fallback: bool = False,
          inline: bool = False, interpreted_form=None):
    """``fn`` compiled in nopython mode (cached on disk, GIL released, no bounds checks).

    Parameters
    ----------
    fn : callable
        A function numba can compile.
    fastmath : bool or set of str, default False
        Let LLVM reassociate floating-point arithmetic (only where the result may differ in the
        last bits, e.g. the kernel-column loops); a set of LLVM's flags allows only those
        (``{"contract"}``: fused multiply-adds, as PyTorch's CPU kernels compute ``a + b * c``).
    fallback : bool, default False
        Without numba, return ``fn`` itself (it then runs in the interpreter) instead of
        ``None`` (callers that have a PyTorch path test for ``None``).
    inline : bool, default False
        Inline ``fn`` into every compiled caller (numba's ``inline="always"``), for a small
        helper called in a hot loop: a compiled call to a function of another module passes
        each array as a structure with its reference count raised and lowered around it
        (atomic instructions LLVM cannot remove across the call, about 70 ns), which is more
        than a short sparse column's or a small block's work. The inlined code takes its
        caller's ``fastmath``; the function still runs on its own when called from Python.
    interpreted_form : callable, optional
        What runs in place of ``fn`` where no compiled code runs (:func:`interpreted`, and
        ``fallback`` without numba): the same result by array operations, for a kernel whose
        loops cost seconds in the interpreter (a face's matrix-vector product). Its results
        agree with ``fn``'s up to the summation order, as the interpreted paths' results
        agree with the compiled ones (a model of the same tolerance, not the same bits).
    """
    if interpreted_form is not None:
        fn.interpreted_form = interpreted_form
    if not HAVE_NUMBA:
        if not fallback:
            return None
        return fn if interpreted_form is None else interpreted_form
    dispatcher = numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=fastmath,
                            inline="always" if inline else "never")(fn)
    _stamp_with_package(dispatcher)
    _load_without_refresh(dispatcher)
    return dispatcher


_deferred = False  # set by torchfw.utils.cold_start while it defers the compiled kernels


def compiled_kernels() -> bool:
    """Whether the compiled CPU kernels run now: numba is there and the cold start
    (:mod:`torchfw.utils.cold_start`) does not defer them.

    :data:`HAVE_NUMBA` says whether compiled kernels exist in this process; the run-time
    choices between a compiled kernel and its PyTorch form (``_kernels.HAVE_NUMBA``,
    ``_kernel_cpu.HAVE_NUMBA``) read this instead.
    """
    return HAVE_NUMBA and not _deferred


def set_deferred(deferred: bool) -> None:
    """Defer the compiled kernels (True) or run them (False); :mod:`torchfw.utils.cold_start`'s."""
    global _deferred
    _deferred = bool(deferred)


def current(kernel):
    """``kernel`` when the compiled kernels run now, else its interpreted form
    (:func:`interpreted`): for the few kernels with no PyTorch form that a fit calls from
    Python."""
    return kernel if compiled_kernels() else interpreted(kernel)


def current_module(module):
    """``module`` when the compiled kernels run now, else a view of it whose kernels are
    their interpreted forms (:func:`interpreted`; its other names unchanged)."""
    return module if compiled_kernels() else _interpreted_module(module)


class _InterpretedModule:
    """A module's names, with every numba dispatcher read through :func:`interpreted`."""

    def __init__(self, module) -> None:
        self._module = module

    def __getattr__(self, name: str):
        value = interpreted(getattr(self._module, name))
        setattr(self, name, value)  # once per name
        return value


@functools.cache
def _interpreted_module(module) -> _InterpretedModule:
    return _InterpretedModule(module)


_interpreted: dict = {}


def interpreted(kernel):
    """The Python function of the numba dispatcher ``kernel``, calling its compiled callees'
    interpreted forms in turn (what it runs as without numba); ``kernel`` itself if it is not
    a dispatcher; a kernel compiled with an ``interpreted_form`` (:func:`njit`) is that form.

    A dispatcher's ``py_func`` still reaches its callees through its module's globals, which
    hold their dispatchers: calling it would compile them. Its copy here reads a copy of those
    globals in which every dispatcher is replaced the same way (made once per kernel).
    """
    py = getattr(kernel, "py_func", None)
    if py is None or not HAVE_NUMBA or not isinstance(kernel, numba.core.dispatcher.Dispatcher):
        return kernel
    if py in _interpreted:
        return _interpreted[py]
    form = getattr(py, "interpreted_form", None)
    if form is not None:  # array operations instead of the kernel's loops (njit's option)
        _interpreted[py] = form
        return form
    names = dict(py.__globals__)
    copy = types.FunctionType(py.__code__, names, py.__name__, py.__defaults__, py.__closure__)
    copy.__kwdefaults__ = py.__kwdefaults__
    _interpreted[py] = copy  # before the callees: kernels may call each other
    for name, value in names.items():
        if isinstance(value, numba.core.dispatcher.Dispatcher):
            names[name] = interpreted(value)
    return copy


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


def _prepare_for_loading(target_context) -> None:
    """What machine code loaded from numba's cache needs of this process, short of
    ``target_context.refresh()``: the runtime's symbols (NRT) and the symbols numba's hashing
    module registers (the only other ``add_symbol`` of a refresh)."""
    from numba.core.runtime import rtsys  # noqa: PLC0415 - numba is imported by then
    from numba.cpython import hashing  # noqa: F401, PLC0415 - registers its C symbols

    rtsys.initialize(target_context)


def _load_without_refresh(dispatcher) -> None:
    """Let ``dispatcher`` load its cached machine code without refreshing numba's contexts.

    numba's cache refreshes the target context before every load
    (``numba.core.caching.Cache.load_overload``); the first refresh imports and installs every
    typing and lowering registry of numba (array maths, linear algebra, typed containers,
    random generators ...), about 0.15 s of CPU time, and half of a warm-cache first
    ``SVC().fit``. A load needs none of it: the object code is linked as it was compiled, its
    callees inside it, and the only symbols it can import from the process are those of the
    runtime (NRT) and of numba's hashing (:func:`_prepare_for_loading` registers both). So
    loads skip the refresh, and a compile (a signature not in the cache) still refreshes, as
    numba's compiler does before every compilation. The load itself skips what only later
    compilations use (the kernel's bitcode, its environments' module imports:
    :mod:`torchfw.utils.kernel_cache`). The machine code is the same either way: results are
    bit-identical. A numba without these internals keeps its own behaviour.
    """
    cache = getattr(dispatcher, "_cache", None)
    if _LoadingCache is not None and type(cache) is _LoadingCache.__mro__[1]:
        cache.__class__ = _LoadingCache  # same state, one method changed


def _make_loading_cache():
    try:
        from numba.core.caching import FunctionCache
    except ImportError:  # pragma: no cover - numba's internals moved
        return None
    if not all(hasattr(FunctionCache, name) for name in
               ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")):
        return None  # pragma: no cover

    class LoadingCache(FunctionCache):
        """numba's function cache, loading without a refresh (:func:`_load_without_refresh`)
        and with only the work running the machine code needs
        (:func:`torchfw.utils.kernel_cache.light_loading`)."""

        def load_overload(self, sig, target_context):
            with paused():  # the load allocates long-lived objects only
                _prepare_for_loading(target_context)
                with self._guard_against_spurious_io_errors(), \
                        light_loading(self, target_context):
                    return self._load_overload(sig, target_context)

    return LoadingCache


_LoadingCache = _make_loading_cache() if HAVE_NUMBA else None
