"""NumPy ``Generator`` shuffles inside compiled loops, bit for bit.

One concern: a compiled loop that draws its own random orders (a block-coordinate descent that
shuffles its blocks every epoch) must draw the same numbers as the Python loop it replaces, from
the same ``numpy.random.Generator``, so that both give the same iterates and leave the generator
in the same state. :func:`handle` reads the generator's bit generator as three integers (the
address of its state and of its ``next_uint32`` / ``next_uint64`` functions, NumPy's documented
``BitGenerator.ctypes`` interface); compiled code then calls those C functions itself
(:func:`shuffle_prefix`), as NumPy's own ``Generator.shuffle`` does.

Why not pass the ``Generator`` to numba, which accepts it: numba re-reads its ``ctypes``
attributes on every call (measured 25-40 us a call on a loaded 2-core machine, as much as a
shrunk Weston-Watkins sweep of dna), and its ``shuffle`` is not NumPy 2's (another bounded-integer
draw, other permutations). Three integers cost nothing to pass.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .jit import HAVE_NUMBA, njit, numba

__all__ = ["handle", "shuffle_prefix", "random_interval"]


def handle(rng: np.random.Generator) -> tuple[int, int, int] | None:
    """``(state address, next_uint32 address, next_uint64 address)`` of ``rng``'s bit
    generator, or ``None`` without numba or without NumPy's ``ctypes`` interface.

    The addresses are valid while ``rng`` lives: the caller keeps a reference to it across
    the compiled calls.
    """
    if not HAVE_NUMBA:
        return None
    try:
        c = rng.bit_generator.ctypes
        return (int(c.state_address),
                int(ctypes.cast(c.next_uint32, ctypes.c_void_p).value or 0),
                int(ctypes.cast(c.next_uint64, ctypes.c_void_p).value or 0))
    except (AttributeError, TypeError):  # pragma: no cover - a generator without the interface
        return None


if HAVE_NUMBA:
    from llvmlite import ir as _ir  # type: ignore[import-untyped]
    from numba.extending import intrinsic as _intrinsic

    def _call_next(context, builder, fn_addr, state, bits):
        """Call the C function at ``fn_addr`` (``uintN (*)(void *state)``) on ``state``."""
        i64 = _ir.IntType(64)
        fnty = _ir.FunctionType(_ir.IntType(bits), [i64])
        fn = builder.inttoptr(fn_addr, fnty.as_pointer())
        return builder.call(fn, [state])

    @_intrinsic
    def _next_uint32(typingctx, fn_addr, state):
        """``next_uint32(state)`` of a NumPy bit generator, by address."""
        sig = numba.types.uint32(numba.types.uint64, numba.types.uint64)

        def codegen(context, builder, signature, args):
            return _call_next(context, builder, args[0], args[1], 32)

        return sig, codegen

    @_intrinsic
    def _next_uint64(typingctx, fn_addr, state):
        """``next_uint64(state)`` of a NumPy bit generator, by address."""
        sig = numba.types.uint64(numba.types.uint64, numba.types.uint64)

        def codegen(context, builder, signature, args):
            return _call_next(context, builder, args[0], args[1], 64)

        return sig, codegen
else:  # pragma: no cover - without numba the compiled loops do not run
    def _next_uint32(fn_addr, state):  # type: ignore[misc]
        raise RuntimeError("compiled draws need numba")

    def _next_uint64(fn_addr, state):  # type: ignore[misc]
        raise RuntimeError("compiled draws need numba")


def _random_interval_py(state, next32, next64, max_val):
    """A uniform integer in ``[0, max_val]``: NumPy's ``random_interval`` (a mask of the
    bits of ``max_val``, rejection above it; 32-bit draws while ``max_val`` fits 32 bits)."""
    if max_val == 0:
        return 0
    mx = np.uint64(max_val)
    mask = mx
    mask |= mask >> np.uint64(1)
    mask |= mask >> np.uint64(2)
    mask |= mask >> np.uint64(4)
    mask |= mask >> np.uint64(8)
    mask |= mask >> np.uint64(16)
    mask |= mask >> np.uint64(32)
    if mx <= np.uint64(0xFFFFFFFF):
        value = np.uint64(_next_uint32(np.uint64(next32), np.uint64(state))) & mask
        while value > mx:
            value = np.uint64(_next_uint32(np.uint64(next32), np.uint64(state))) & mask
    else:
        value = _next_uint64(np.uint64(next64), np.uint64(state)) & mask
        while value > mx:
            value = _next_uint64(np.uint64(next64), np.uint64(state)) & mask
    return np.int64(value)


random_interval = njit(_random_interval_py, fallback=True, inline=True)


def _shuffle_prefix_py(state, next32, next64, a, m):
    """Shuffle ``a[:m]`` in place as ``Generator.shuffle(a[:m])`` does (Fisher-Yates from the
    last element down, ``j = random_interval(i)``): the same permutation and the same draws.
    ``Generator.permutation(m)`` is this on ``arange(m)``."""
    for i in range(m - 1, 0, -1):
        j = random_interval(state, next32, next64, i)
        t = a[j]
        a[j] = a[i]
        a[i] = t


shuffle_prefix = njit(_shuffle_prefix_py, fallback=True)
