r"""Whole-solve compiled path of :class:`~torchfw.SVC` for problems whose kernel fits in memory.

On a few hundred to a few thousand examples, the lazy host path (one cached kernel column per
atom touched, one interpreted iteration per step) spends most of its time in the interpreter:
tens of microseconds of Python per iteration around a few microseconds of arithmetic. When the
``m x m`` matrix :math:`\tilde K` fits a byte budget, this module computes it once and runs the
whole solve -- every iteration, the checks every ``check_every`` iterations and the stopping test
-- in compiled code: the engine's row-source storage (:class:`~torchfw.optimizers._rows.
RowStorage`, whose whole solve is the one compiled quadratic loop of
:mod:`torchfw.optimizers._compiled_loop`) over the SVM's row source. This module is the glue:
the row source (:func:`_row_py`, linked into the loop as an overload of
:func:`~torchfw.optimizers._compiled_loop.vertex_row`), the problem's :func:`storage` and
:func:`solve`.

**Same iterates.** The matrix rows are computed (:mod:`torchfw.svm._matrix`) by the very
kernels that compute the lazy path's columns (:mod:`torchfw.svm._kernel_cpu`, same summation order,
same float32 exponential), so row ``i`` equals ``SVMDualOperator.column(i)`` bit for bit; the
loop takes the host engine's moves through the shared kernels; the
start is the host engine's own (it is constructed, then handed over). The lazy path and this
one therefore produce the same iterates, step counts and stopping iteration
(``tests/test_svc_dense.py`` compares them check by check for every solver).

**Multiclass.** The problems of one-vs-rest share the data: :math:`\tilde K^{(k)} = D_k (K + 1)
D_k + \operatorname{diag}(1/C)` with :math:`D_k = \operatorname{diag}(y^{(k)})`. The matrix
:math:`K + 1` is computed once; each problem reads its rows from it with its signs applied
(exact; :func:`_row_py`). One-vs-one problems read their pair's entries of the same matrix.

**One binary problem** owns its matrix: it is signed once, in place, and the loop reads its rows
where they are (:func:`signed_matrix`), without the copy per row read.
"""

from __future__ import annotations

import numpy as np

from ..optimizers import _compiled_loop as L
from ..optimizers import _kernels as K
from ..optimizers._engine import QuadraticEngine
from ..optimizers._rows import RowStorage
from ..optimizers._stopping import StoppingRule
from ..utils.jit import HAVE_NUMBA
from ..utils.jit import njit as _njit  # None without numba
from ._matrix import full_source, plain_kernel_matrix, source_row

__all__ = ["VARIANTS", "plain_kernel_matrix", "full_source", "storage", "solve", "signed_row",
           "COUNTERS", "Start", "SolveCancelled", "store_state", "K"]

#: Solver name -> code of the compiled loop.
VARIANTS = L.VARIANTS
#: Step counters, in the order of the ``counts`` array.
COUNTERS = L.COUNTERS
#: Status codes of the compiled loop.
_CONVERGED, _NONFINITE = L.CONVERGED, L.NONFINITE
#: The start a solve runs from and leaves its final iterate in.
Start = L.LoopState
SolveCancelled = L.SolveCancelled
store_state = L.store_state


# ---------------------------------------------------------------------------------------------
# The row source: signed rows of K + 1
# ---------------------------------------------------------------------------------------------

def _row_py(P, cache, rows, y, inv_c, i, buf):
    r"""Row ``i`` of the problem's matrix :math:`D_y P D_y + \operatorname{diag}(1/C)`, in ``buf``.

    ``P`` is :math:`K + 1` over all examples, read from the row source ``(P, cache)``
    (:mod:`torchfw.svm._matrix`: ``cache`` None for the full matrix -- numba compiles that case
    without the cache branch -- else the store of a cache of rows and its state); ``rows`` are
    the problem's examples (empty: all of them, in order). The signs are applied as the row is
    read, in ``P``'s precision -- exact -- and ``1/C_i`` is added to the diagonal entry, rounded
    as the lazy path's column kernels round it, so the row is ``SVMDualOperator.column(i)`` of
    the problem bit for bit. Reading rows this way costs one pass over a row per row read;
    flipping the matrix's signs in place cost two passes over all of it per one-vs-rest problem
    (a third of a digits fit), and a one-vs-one pair's signed copy one pass over its block.
    """
    k = i if rows.shape[0] == 0 else rows[i]
    if cache is None:
        return _signed(P[k], rows, y, inv_c, i, buf)
    return _signed(_source_row(P, cache, k), rows, y, inv_c, i, buf)


def _signed_py(row, rows, y, inv_c, i, buf):
    """``buf`` = row ``row`` of ``P`` (over all examples) read at ``rows`` with the signs of
    ``y`` applied and ``1/C_i`` added to entry ``i`` (the arithmetic of :func:`_row_py`;
    inlined into its callers)."""
    yi = y[i]
    if rows.shape[0] == 0:
        for r in range(buf.shape[0]):
            buf[r] = yi * y[r] * row[r]
    else:
        for r in range(buf.shape[0]):
            buf[r] = yi * y[r] * row[rows[r]]
    buf[i] += inv_c[i]
    return buf


_source_row = source_row
_signed = _njit(_signed_py, inline=True)
_row = _njit(_row_py)
signed_row = _row


def row_source(src, rows, y, inv_c):
    """The loop's row source of one problem: ``(P, cache, rows, y, inv_c)`` (see
    :func:`_row_py`), from a source of :mod:`torchfw.svm._matrix` ``(P, cache)``."""
    return src[0], src[1], rows, y, inv_c


def _sign_matrix_py(P, y, inv_c):
    r"""``P`` (:math:`K + 1` over the problem's examples, in order) becomes the problem's
    matrix :math:`D_y P D_y + \operatorname{diag}(1/C)`, in place: row ``i`` is
    :func:`_row_py`'s row ``i`` bit for bit (the arithmetic of :func:`_signed_py`: the signs
    exact, :math:`1/C_i` added to the diagonal entry in ``P``'s precision as it rounds it)."""
    for i in range(P.shape[0]):
        row = P[i]
        yi = y[i]
        for r in range(row.shape[0]):
            row[r] = yi * y[r] * row[r]
        row[i] += inv_c[i]


_sign_matrix = _njit(_sign_matrix_py)


def signed_matrix(P: np.ndarray, y: np.ndarray, inv_c: np.ndarray) -> np.ndarray:
    r"""The loop's row source of one problem that owns its whole matrix ``P``: ``P`` itself,
    signed in place (:func:`_sign_matrix_py`), a 2-D array whose rows the loop reads in place
    (:func:`~torchfw.optimizers._compiled_loop.vertex_row`) -- the rows of :func:`_row_py`,
    bit for bit.

    :func:`_row_py` copies every row it reads, signs applied, into a buffer: a pass over the
    row per read, one to three reads per iteration, each also raising and lowering the
    reference counts of the tuple's arrays. One pass over the whole matrix costs about as much
    as a third of ``m`` such reads, and a solve reads more: gen500 (350 examples, 420 SWAP
    iterations), the compiled loop 0.35 ms with copies, 0.29 ms in place, the pass 0.012 ms.
    ``P`` is changed: only for a matrix that nothing reads as :math:`K + 1` once the
    problem's start is made (a binary fit's matrix; not one shared by the problems of a
    multiclass fit).
    """
    _sign_matrix(P, y, inv_c)
    return P


if HAVE_NUMBA:
    from numba import types
    from numba.extending import overload

    @overload(L.vertex_row)
    def _vertex_row_of_svm(src, i, buf):
        """:func:`~torchfw.optimizers._compiled_loop.vertex_row` of :func:`row_source`'s tuple:
        the signed row :func:`_row_py`, computed into ``buf``."""
        if isinstance(src, types.BaseTuple) and len(src.types) == 5 and \
                isinstance(src.types[0], types.Array) and src.types[0].ndim == 2:
            # The tuple is unpacked in the row's own function, which calls nothing (the
            # signing inlined): unpacked in the loop, or around a call, each of its arrays has
            # its reference count raised and lowered per row read (atomic instructions LLVM
            # cannot remove across a call), about 50 ns a row, a sixth of a compiled iteration
            # on a few hundred examples. (Inlining this function into the loop copies the
            # tuple, with the same counts.)
            if isinstance(src.types[1], types.NoneType):
                def full(src, i, buf):
                    P, _, rows, y, inv_c = src
                    k = i if rows.shape[0] == 0 else rows[i]
                    return _signed(P[k], rows, y, inv_c, i, buf)
                return full

            def cached(src, i, buf):  # a row computed on a miss costs far more than the counts
                P, cache, rows, y, inv_c = src
                k = i if rows.shape[0] == 0 else rows[i]
                return _signed(_source_row(P, cache, k), rows, y, inv_c, i, buf)
            return cached
        return None


def storage(src, rows: np.ndarray, y: np.ndarray, inv_c: np.ndarray, diag: np.ndarray,
            start: Start, *, private: bool = False) -> RowStorage:
    """The row-source storage of one problem (:class:`~torchfw.optimizers._rows.RowStorage`):
    its signed rows (:func:`_row_py`) read from the source ``src`` (:func:`full_source` of a
    matrix, or :func:`torchfw.svm._matrix.cached_source`), its state ``start``. The SVM dual
    has no linear term and no constant.

    ``private``: the problem owns the matrix of a full source over its examples (``rows``
    empty), which nothing reads as :math:`K + 1` once this storage is made: the matrix is
    signed in place and its rows read there (:func:`signed_matrix`), the same rows without a
    copy per read. One storage per matrix."""
    if private and src[1] is None and rows.shape[0] == 0:
        return RowStorage(signed_matrix(src[0], y, inv_c), diag, start)
    return RowStorage(row_source(src, rows, y, inv_c), diag, start, row_dtype=src[0].dtype)


def solve(variant: int, src: tuple, rows: np.ndarray, y: np.ndarray, inv_c: np.ndarray,
          diag: np.ndarray, start: Start, *, max_iter: int, tol: float, rtol: float,
          check_every: int, stop=None, correct: bool = True, private: bool = False):
    r"""Run the compiled solve from ``start``, which holds the final iterate afterwards.

    The whole solve of the engine over the problem's :func:`storage`
    (:meth:`~torchfw.optimizers._rows.RowStorage.solve`: the compiled loop to
    :math:`g \le \max(\text{tol}, \text{rtol}\,|f|)` or ``max_iter``, in chunks between
    which ``stop`` is read and a Ctrl-C honoured; ``correct``: the active-set corrective step
    where plain steps stall; ``private``: the problem owns the matrix, whose rows are then
    signed in place, see :func:`storage`).

    Returns the engine's :class:`~torchfw.optimizers._rows.LoopRun` ``(n_iter, status_code,
    history array (n, 3), counts per check (n, 8))``, whose ``result`` is the solve's
    :class:`~torchfw.result.Result`.
    """
    engine = QuadraticEngine(storage(src, rows, y, inv_c, diag, start, private=private))
    return engine.solve(variant, StoppingRule(tol=tol, rtol=rtol, max_iter=max_iter),
                        check_every=check_every, stop=stop, correct=correct)
