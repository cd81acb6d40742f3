r"""The matrix :math:`K + 1` of the compiled SVC path, row by row with the lazy path's kernels.

The compiled whole solve (:mod:`torchfw.svm._dense`) reads every binary problem's matrix
:math:`\tilde K = D_y (K + 1) D_y + \operatorname{diag}(1/C)` from one plain matrix :math:`K + 1`
(no labels, no diagonal term), signs and :math:`1/C_i` applied as a row is read
(:func:`torchfw.svm._dense._row_py`). This module computes that matrix. Its row ``i`` is built
by the compiled column kernels of :mod:`torchfw.svm._kernel_cpu` -- the feature-major dots, the
kernel's argument and outer function, in the same order and precision (float32 RBF through the
same exponential) -- that compute column ``i`` of :class:`~torchfw.svm.kernels.SVMDualOperator` on
the lazy path, so that both paths see the same bits.

The rows are independent: on a large enough matrix, contiguous blocks of them are computed on
several threads (:func:`torchfw.utils.threads.parallel_map`; the compiled kernels release the GIL),
each row by the same code as on one thread, so the matrix has the same bits either way.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..utils.jit import njit as _njit  # None without numba
from ..utils.threads import parallel_map, workers
from . import _kernel_cpu as C
from ._plain_rows import plain_rows

__all__ = ["plain_kernel_matrix", "plain_problem", "plain_operator", "full_source",
           "cached_source", "cache_slots", "row_source_ok", "source_row", "cache_stats",
           "ROWS_FROM", "own_source", "own_source_ok", "pairs_read_rows"]


def _dense_nonzeros(xfm, i, nzf, nzv):
    """Nonzero features of example ``i`` of a feature-major ``xfm`` (``_row_nonzeros``)."""
    n = 0
    for f in range(xfm.shape[0]):
        v = xfm[f, i]
        if v != 0:
            nzf[n] = f
            nzv[n] = v
            n += 1
    return n


def _example_dots(xfm, crow, col, val, sparse, i, out, nzf, nzv):
    """``out[j] = <x_i, x_j>`` for all ``j``: the dots of column ``i`` on the lazy path."""
    if sparse:
        lo = crow[i]
        hi = crow[i + 1]
        _dots(xfm, col[lo:hi], val[lo:hi], out)
    else:
        n = _nonzeros(xfm, i, nzf, nzv)
        _dots(xfm, nzf[:n], nzv[:n], out)


def _rows_rbf_f32(xfm, crow, col, val, sparse, sq, gamma, ones, out, scratch, bits, nzf, nzv,
                  lo, hi):
    """Rows ``lo:hi`` of ``K + 1`` for the RBF kernel in float32 (the lazy path's default)."""
    for i in range(lo, hi):
        _example_row_dots(xfm, crow, col, val, sparse, i, scratch, nzf, nzv)
        _rbf_f32(scratch, sq, sq[i], gamma, ones, 1.0, out[i], bits)


def _feature_major_dots_from(xfm, start, nz_features, nz_values, out):
    """``out[r] = sum_q nz_values[q] * xfm[nz_features[q], start + r]``: the examples from
    ``start`` on, each entry summed as :func:`torchfw.svm._kernel_cpu.feature_major_dots` sums
    it (the same operations in the same order, so the same bits)."""
    n = out.shape[0]
    for r in range(n):
        out[r] = 0.0
    for q in range(nz_features.shape[0]):
        row = xfm[nz_features[q]][start:]  # (row[start + r] would check for negative indices)
        v = nz_values[q]
        for r in range(n):
            out[r] += v * row[r]


def _example_dots_from(xfm, crow, col, val, sparse, i, start, out, nzf, nzv):
    """``out[r] = <x_i, x_{start + r}>``: :func:`_example_dots` from example ``start`` on."""
    if sparse:
        lo = crow[i]
        hi = crow[i + 1]
        _dots_from(xfm, start, col[lo:hi], val[lo:hi], out)
    else:
        n = _nonzeros(xfm, i, nzf, nzv)
        _dots_from(xfm, start, nzf[:n], nzv[:n], out)


def _upper_rbf_f32(xfm, crow, col, val, sparse, sq, gamma, ones, out, scratch, bits, nzf, nzv,
                   lo, hi):
    """Rows ``lo:hi`` of ``K + 1`` (RBF, float32) from their diagonal entry on: the entries
    :func:`_rows_rbf_f32` computes there, by the same operations (the rest by symmetry,
    :func:`_upper_mirror_rbf_f32`)."""
    m = out.shape[0]
    for i in range(lo, hi):
        n = m - i
        _example_row_dots_from(xfm, crow, col, val, sparse, i, i, scratch[:n], nzf, nzv)
        _rbf_f32(scratch[:n], sq[i:], sq[i], gamma, ones[i:], 1.0, out[i, i:], bits[:n])


def _upper_mirror_rbf_f32(xfm, crow, col, val, sparse, sq, gamma, ones, out, scratch, bits, nzf,
                          nzv, lo, hi):
    """Rows ``lo:hi`` of ``K + 1`` (RBF, float32) from their diagonal entry on
    (:func:`_upper_rbf_f32`), and their entries right of the diagonal copied into the lower
    triangle (column ``i`` of the rows below ``i``): band by band of :data:`MIRROR_BAND` rows.

    Each band is copied while its rows are still in the cache: on a matrix larger than the
    cache, a separate pass over the upper triangle read it back from memory down its columns
    (segment, 1,732 x 1,732: 1.4 ms of a 7.2 ms matrix). Row ``j``'s entries ``lo:hi`` left of
    its diagonal are written by this call alone, so bands on threads write disjoint entries.
    """
    m = out.shape[0]
    for bb in range(lo, hi, MIRROR_BAND):
        be = min(bb + MIRROR_BAND, hi)
        _upper_rows(xfm, crow, col, val, sparse, sq, gamma, ones, out, scratch, bits, nzf, nzv,
                    bb, be)
        for j in range(bb + 1, m):
            top = be if be < j else j
            row = out[j]
            for i in range(bb, top):
                row[i] = out[i, j]


def _rows_argument(code, xfm, crow, col, val, sparse, sq, gamma, coef0, out, nzf, nzv, lo, hi):
    """Rows ``lo:hi`` of the kernel's argument (before the outer function), the other cases."""
    for i in range(lo, hi):
        row = out[i]
        _example_row_dots(xfm, crow, col, val, sparse, i, row, nzf, nzv)
        _argument(code, row, sq, np.float64(sq[i]), gamma, coef0, row)


def _rows_finish(code, degree, ones, out, lo, hi):
    """Rows ``lo:hi`` of ``K + 1`` from the kernel's argument (in place)."""
    for i in range(lo, hi):
        _finish(code, out[i], degree, ones, 1.0, 0.0, -1, out[i])


def _upper_argument_rows(code, degree, xfm, crow, col, val, sparse, sq, gamma, coef0, ones, out,
                         nzf, nzv, lo, hi):
    """Rows ``lo:hi`` of ``K + 1`` (every kernel but the RBF one) from their diagonal entry on:
    the entries :func:`_rows_argument` and :func:`_rows_finish` compute there, by the same
    operations (the rest by symmetry, :func:`_upper_mirror_argument`)."""
    for i in range(lo, hi):
        row = out[i, i:]
        _example_row_dots_from(xfm, crow, col, val, sparse, i, i, row, nzf, nzv)
        _argument(code, row, sq[i:], np.float64(sq[i]), gamma, coef0, row)
        _finish(code, row, degree, ones[i:], 1.0, 0.0, -1, row)


def _upper_mirror_argument(code, degree, xfm, crow, col, val, sparse, sq, gamma, coef0, ones,
                           out, nzf, nzv, lo, hi):
    """Rows ``lo:hi`` of ``K + 1`` (every kernel but the RBF one) from their diagonal entry on
    (:func:`_upper_argument_rows`), and their entries right of the diagonal copied into the
    lower triangle band by band of :data:`MIRROR_BAND` rows, as
    :func:`_upper_mirror_rbf_f32` does for the float32 RBF kernel.

    Taken at every size: 2-core Xeon, one thread, CPU us, every row against the triangle and
    its copy (poly unless named): breast cancer (398 x 30, float64, degree 5) 1,164 -> 737,
    float32 853 -> 564; iris (105 x 4, float64) 53 -> 49; wine (124 x 13) 73 -> 70; 150 x 1
    (float32) 89 -> 75; 60 x 3 30 -> 29; 1,000 x 4 2,061 -> 1,576; linear 300 x 2 209 -> 180;
    sigmoid 300 x 12 1,821 -> 1,006; sparse 400 x 100 at 3 % nonzero 441 -> 340.
    """
    m = out.shape[0]
    for bb in range(lo, hi, MIRROR_BAND):
        be = min(bb + MIRROR_BAND, hi)
        _upper_arg_rows(code, degree, xfm, crow, col, val, sparse, sq, gamma, coef0, ones, out,
                        nzf, nzv, bb, be)
        for j in range(bb + 1, m):
            top = be if be < j else j
            row = out[j]
            for i in range(bb, top):
                row[i] = out[i, j]


def plain_kernel_matrix(op, threads: int | None = None) -> np.ndarray:
    r"""The ``(m, m)`` matrix :math:`K + 1` of an :class:`~torchfw.svm.kernels.SVMDualOperator`
    or its :class:`~torchfw.svm._plain_rows.PlainRows`.

    Row ``i`` times :math:`y_i y`, plus :math:`1/C_i` at ``i``, is ``op.column(i)`` exactly: the
    same compiled kernels in the same order (the labels only flip signs, exactly). From
    :data:`PARALLEL_ENTRIES` on, blocks of rows go to several threads
    (:func:`torchfw.utils.threads.workers`), or to ``threads`` when given (1 on a worker thread).
    """
    m = op.shape[0]
    dtype = op._np_dtype
    out = np.empty((m, m), dtype=dtype)
    xfm = op._xfm_np
    d = xfm.shape[0]
    sparse, crow, col, val = _csr_arrays(op)
    ones = np.ones(m, dtype=dtype)
    code = op.kernel.code
    gamma, coef0 = float(op.kernel.gamma), float(op.kernel.coef0)
    degree = int(op.kernel.degree)  # an integer power: no libm pow per entry
    rbf_f32 = code == C.RBF and dtype == np.float32
    sq = op._sq_np

    # The default kernel on examples of SYMMETRIC_FROM nonzeros or more: the upper triangle,
    # each band of rows copied into the lower one as it is made (below, the copy costs what
    # the dots save).
    # The linear, polynomial and sigmoid kernels (either dtype): always the triangle, whose
    # outer function runs on half the entries too (:func:`_upper_mirror_argument`).
    symmetric = (val.shape[0] / max(m, 1) if sparse else d) >= SYMMETRIC_FROM if rbf_f32 \
        else code != C.RBF

    def block(bounds):  # rows lo:hi, with this thread's own scratch vectors
        lo, hi = bounds
        nzf = np.empty(d, dtype=np.int64)
        nzv = np.empty(d, dtype=dtype)
        if rbf_f32:
            scratch = np.empty(m, dtype=dtype)
            bits = np.empty(m, dtype=np.int32)
            rows = upper_mirror_rbf_f32 if symmetric else rows_rbf_f32
            rows(xfm, crow, col, val, sparse, sq, gamma, ones, out, scratch, bits, nzf, nzv,
                 lo, hi)
            return
        if symmetric:  # the other kernels but the float64 RBF's (NumPy's exp on whole rows)
            upper_mirror_argument(code, degree, xfm, crow, col, val, sparse, sq, gamma, coef0,
                                  ones, out, nzf, nzv, lo, hi)
            return
        rows_argument(code, xfm, crow, col, val, sparse, sq, gamma, coef0, out, nzf, nzv,
                      lo, hi)
        if code == C.RBF:
            np.exp(out[lo:hi], out=out[lo:hi])  # as the lazy path: NumPy's exp, elementwise
        rows_finish(code, degree, ones, out, lo, hi)

    if threads is None:
        threads = workers(m, float(m) * m * (d + 8) / (2 if symmetric else 1),
                          PARALLEL_ENTRIES)
    # BLOCKS_PER_THREAD blocks per thread, taken in turn by whichever thread is free: a thread
    # whose core another job holds delays the matrix by a block, not by its half of the rows.
    blocks = 1 if threads <= 1 else min(m, threads * BLOCKS_PER_THREAD)
    edges = [m * b // blocks for b in range(blocks + 1)]
    if not symmetric:
        parallel_map(block, zip(edges[:-1], edges[1:], strict=True), threads)
        return out
    # K is symmetric entry for entry (<x_i, x_j> sums the same products in the same feature
    # order as <x_j, x_i>, and the rest is elementwise), so the copy holds the bits the rows
    # would compute, at half the dots and exponentials. Row i's upper part has m - i entries,
    # and so has the part of column i its copy writes: blocks of about equal area.
    upper = [0] + [int(m - m * math.sqrt(1.0 - b / blocks)) for b in range(1, blocks)] + [m]
    parallel_map(block, zip(upper[:-1], upper[1:], strict=True), threads)
    return out


#: Nonzeros per example (the features of dense ones) from which :func:`plain_kernel_matrix`
#: computes the RBF matrix in float32 as its upper triangle and copies the lower one (half
#: the dots and exponentials, plus a copy of half the entries, band by band while the band
#: is in the cache: :func:`_upper_mirror_rbf_f32`). 2-core Xeon, one thread, CPU ms, every
#: row against the triangle and its copy: segment (1,732 x 19) 7.6 -> 5.4, vehicle (634 x
#: 18) 1.07 -> 0.70; generated sets of 16 features 0.48 -> 0.46 (500 examples), of 10
#: features 0.36 -> 0.38 (500), 2.03 -> 2.09 (1,200); glass (160 x 9) 0.059 -> 0.069, vowel
#: (396 x 10) 0.226 -> 0.255. usps (1,505 x 256, a separate copy pass): 0.052 -> 0.031.
SYMMETRIC_FROM = 16

#: Rows of a band of :func:`_upper_mirror_rbf_f32`: copied to the lower triangle while still
#: in the cache (128 rows of 1,732 floats: 0.9 MB). Segment's matrix, one thread: bands of 16
#: rows 6.3 ms, 32 6.0, 64 5.5, 128 5.4.
MIRROR_BAND = 128

#: Row blocks per thread of :func:`plain_kernel_matrix` (each row is computed by the same code
#: whatever the blocks, so the matrix has the same bits).
BLOCKS_PER_THREAD = 8


#: Work of the matrix, ``m * m * (features + 8)`` (the dots, plus about 8 for the kernel's
#: outer function per entry), from which its rows are computed on several threads: below, the
#: hand-off to a thread (~0.05 ms) costs about what it saves. Measured on a 2-core Xeon, one
#: thread vs two, the matrix alone: 200 x 20 (1.1e6) 0.11 vs 0.17 ms, 500 x 3 (2.8e6) 0.27 vs
#: 0.26 ms, 400 x 30 (6.1e6) 0.46 vs 0.41 ms, 1,000 x 3 (1.1e7) 0.99 vs 0.65 ms, 5,600 x 20
#: 70 vs 41 ms; within a fit, breast cancer (398 x 30, 6.0e6) 1.56 ms vs 1.82 ms: hence 1e7.
PARALLEL_ENTRIES = 1e7


# ---------------------------------------------------------------------------------------------
# Row sources: the full matrix, or a cache of rows computed on first use
# ---------------------------------------------------------------------------------------------
#
# The compiled solve reads rows of K + 1 through a *row source* ``(P, cache)``. The full matrix
# (:func:`full_source`) is ``(P, None)``: the compiled loops are specialised on the None
# (numba prunes the ``cache is None`` branches), read ``P[r]`` and pass nothing else, so
# threads share it. A cache (:func:`cached_source`) is ``(store, cache)`` with ``cache`` the
# tuple ``(where, slot_key, meta, freq, slot_freq, xfm, crow, col, val, sq, ones, scratch,
# bits, nzf, nzv, params)``: ``len(slot_key)`` rows under the byte budget, row ``r`` at
# ``store[where[r]]`` when cached, computed on a miss by the matrix's own row code with the
# lazy path's policy (:class:`torchfw.utils.column_cache.ColumnCache`: frequency-based admission,
# recent rows protected, frequencies halved every ``16 x slots`` misses; a row not admitted
# goes to the scratch row ``store[-1]``). ``meta`` is ``[hits, misses, slots in use, recent
# rows held, the recent rows (KEEP_RECENT)]``; ``params`` is ``[kernel code, gamma, coef0,
# degree, sparse, RBF in float32]``.

#: Rows protected from eviction after they are handed out (:class:`ColumnCache`'s default).
KEEP_RECENT = 4


def _compute_row(cache, r, out):
    """Row ``r`` of ``K + 1`` into ``out``: the code of :func:`plain_kernel_matrix`'s rows."""
    xfm, crow, col, val, sq, ones, scratch, bits, nzf, nzv, params = cache[5:]
    code = int(params[0])
    sparse = params[4] != 0.0
    if params[5] != 0.0:  # the RBF kernel in float32
        _example_row_dots(xfm, crow, col, val, sparse, r, scratch, nzf, nzv)
        _rbf_f32(scratch, sq, sq[r], params[1], ones, 1.0, out, bits)
    else:  # not the float64 RBF, whose exponential is NumPy's (row_source_ok)
        _example_row_dots(xfm, crow, col, val, sparse, r, out, nzf, nzv)
        _argument(code, out, sq, np.float64(sq[r]), params[1], params[2], out)
        _finish(code, out, np.int64(params[3]), ones, 1.0, 0.0, -1, out)


def _touch(meta, row):
    """Record ``row`` as handed out (the last :data:`KEEP_RECENT` are protected)."""
    held = meta[3]
    if held < KEEP_RECENT:
        meta[4 + held] = row
        meta[3] = held + 1
    else:
        for q in range(KEEP_RECENT - 1):
            meta[4 + q] = meta[5 + q]
        meta[3 + KEEP_RECENT] = row


def _victim(meta, slot_freq, freq_key):
    """The least frequent unprotected slot if ``freq_key`` is strictly higher, else -1."""
    victim = -1
    lowest = 0
    for q in range(slot_freq.shape[0]):
        protected = False
        for h in range(meta[3]):
            if meta[4 + h] == q:
                protected = True
        if not protected and (victim < 0 or slot_freq[q] < lowest):
            victim = q
            lowest = slot_freq[q]
    return victim if victim >= 0 and freq_key > lowest else -1


def _source_row_py(store, cache, r):
    """Row ``r`` of ``K + 1`` from the cache ``(store, cache)``, computed on a miss.

    The cache's decisions are :class:`torchfw.utils.column_cache.ColumnCache`'s, request by request
    (``lookup`` then ``insert``). The row returned stays valid until the next call (callers
    copy it at once).

    Inlined into the loop that reads the row: a hit is a few reads and writes of the cache's
    state, which a call would wrap in the reference counts of every array of ``cache`` (about
    30 atomic instructions, 5 % of a gen2000 solve); a miss, which computes a row, is a call
    (:func:`_missed_row_py`).
    """
    where, slot_key, meta, freq, slot_freq = cache[:5]
    freq[r] += 1  # lookup
    slot = where[r]
    if slot >= 0:
        meta[0] += 1
        slot_freq[slot] = freq[r]
        _touch_row(meta, slot)
        return store[slot]
    return _missed_row(store, cache, r)


def _missed_row_py(store, cache, r):
    """:func:`_source_row_py` on a miss (``freq`` already counted): insert row ``r``, or
    compute it into the scratch row when not admitted."""
    where, slot_key, meta, freq, slot_freq = cache[:5]
    n_slots = slot_key.shape[0]
    meta[1] += 1
    if meta[1] % (16 * n_slots) == 0:
        for k in range(freq.shape[0]):
            freq[k] >>= 1
        for q in range(n_slots):
            slot_freq[q] >>= 1
    if meta[2] < n_slots:  # insert
        slot = meta[2]
        meta[2] += 1
    else:
        slot = _least_frequent(meta, slot_freq, freq[r])
        if slot < 0:  # not admitted: computed into the scratch row, left uncached
            _touch_row(meta, n_slots)
            _row_compute(cache, r, store[n_slots])
            return store[n_slots]
        where[slot_key[slot]] = -1
    slot_key[slot] = r
    slot_freq[slot] = freq[r]
    where[r] = slot
    _touch_row(meta, slot)
    _row_compute(cache, r, store[slot])
    return store[slot]


def _csr_arrays(op):
    """``(sparse, crow, col, val)`` of the operator's examples: its CSR arrays, or empty ones
    of the row code's types for dense examples (read from the feature-major copy)."""
    if op.X.layout == torch.sparse_csr:
        return True, op._crow, op._col, op._val
    return (False, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=op._np_dtype))


def _source_parts(op):
    """The kernel part of a row source: the operator's arrays and parameters."""
    m = op.shape[0]
    dtype = op._np_dtype
    sparse, crow, col, val = _csr_arrays(op)
    rbf_f32 = op.kernel.code == C.RBF and dtype == np.float32
    params = np.array([op.kernel.code, op.kernel.gamma, op.kernel.coef0, op.kernel.degree,
                       float(sparse), float(rbf_f32)], dtype=np.float64)
    return (op._xfm_np, crow, col, val, op._sq_np, np.ones(m, dtype=dtype),
            np.empty(m, dtype=dtype), np.empty(m, dtype=np.int32),
            np.empty(op._xfm_np.shape[0], dtype=np.int64),
            np.empty(op._xfm_np.shape[0], dtype=dtype), params)


def full_source(P: np.ndarray):
    """The row source of a full matrix ``P``."""
    return P, None


def cached_source(op, slots: int):
    """A row source caching ``slots`` rows of the operator's ``K + 1`` (``1 <= slots <= m``),
    plus a scratch row for the rows it does not admit."""
    m = op.shape[0]
    store = np.empty((slots + 1, m), dtype=op._np_dtype)  # pages are touched as rows arrive
    return store, (np.full(m, -1, dtype=np.int64), np.full(slots, -1, dtype=np.int64),
                   np.zeros(4 + KEEP_RECENT, dtype=np.int64), np.zeros(m, dtype=np.int64),
                   np.zeros(slots, dtype=np.int64)) + _source_parts(op)


def row_source_ok(op) -> bool:
    """Whether rows of ``op`` can be computed inside compiled code as the lazy path does:
    every kernel but the float64 RBF (its exponential is NumPy's)."""
    return not (op.kernel.code == C.RBF and op._np_dtype == np.float64)


def cache_stats(src) -> dict:
    """Slots, hits and misses (rows computed) of a cached source; empty for a full matrix."""
    cache = src[1]
    if cache is None:
        return {}
    return {"cached_rows": int(cache[1].shape[0]), "hits": int(cache[2][0]),
            "misses": int(cache[2][1])}


def plain_problem(plan, X, C_examples, one_problem=False):
    """``(row source of K + 1, diagonal K_ii + 1 + 1/C_i, 1/C)`` of the examples ``X``, or Nones.

    From :func:`plain_operator`; its rows are the lazy path's columns up to signs. The full
    matrix when it fits the plan's ``cache_size`` (or ``dense=True`` asks for it), else a cache of
    ``cache_size`` MB of its rows (:func:`cached_source`); for ``one_problem`` (a binary fit)
    of :data:`ROWS_FROM` examples or more, a cache even when the full matrix fits.
    ``(None, None, None)`` when the operator has no host storage (``memory_budget``): the
    caller takes the lazy path -- except for sparse examples whose full matrix fits
    ``cache_size``, computed without a dense copy (:mod:`torchfw.svm._sparse_gram`).
    """
    op = plain_operator(plan, X, C_examples)
    if op is None:
        itemsize = 8 if plan.dtype == torch.float64 else 4
        if X.layout == torch.sparse_csr and X.device.type == "cpu" and \
                cache_slots(plan, X.shape[0], np.dtype(f"f{itemsize}")) >= X.shape[0]:
            from ._sparse_gram import sparse_plain_problem

            return sparse_plain_problem(plan, X, C_examples)
        return None, None, None
    m = op.shape[0]
    slots = cache_slots(plan, m, op._np_dtype)
    rows_first = one_problem and m >= ROWS_FROM
    if plan.dense is True or not row_source_ok(op) or (slots >= m and not rows_first):
        src = full_source(plain_kernel_matrix(op))
    else:
        src = cached_source(op, min(slots, m))
    return src, op.diagonal64(), op._inv_c_np


#: Examples from which one binary problem reads its rows from a cache (room for all of them
#: within ``cache_size``), computed on first use, rather than from the whole matrix: a solve
#: reads only the rows of the atoms it visits (1,846 of 5,600 on a generated set), and the
#: whole matrix's fresh memory is written by two threads at once, which on a shared machine can
#: cost several times the compute. ``python benchmarks/svc_rows_crossover.py`` (2-core Xeon,
#: generated sets of 20 features, median of 31 fits), default over whole matrix: 350 examples
#: 1.03, 700 0.95, 1,001 0.92, 1,400 0.66, 2,800 0.85, 5,600 0.81 (57 against 70 ms). The
#: problems of a multiclass fit keep the whole matrix, which lets them be solved on several
#: threads (a cache is solved on one).
ROWS_FROM = 1000


def pairs_read_rows(sizes) -> bool:
    """Whether the one-vs-one pairs of ``sizes`` examples each read their own rows, computed on
    first use (:func:`own_source`), rather than one matrix of all examples: when the median
    pair holds :data:`ROWS_FROM` examples or more.

    A pair's solve visits a few of its rows (pendigits, 7,494 examples of 16 features, 10
    classes: 44-308 of the ~1,500 rows of each of the 45 pairs), so the rows it reads cost far
    less than its share of the matrix of all examples, and the pairs' private caches let them
    run on threads. ``SVC()`` on pendigits' training file, 2-core Xeon, CPU seconds of the fit:
    each pair its own full matrix 0.27, its own cache 0.08; satimage (4,435 examples, 6
    classes, pairs of 1,440-2,110): the matrix of all examples 0.13, each pair's cache 0.07;
    usps (1,505 examples, pairs of ~300) 0.08 either way.
    """
    return sizes is not None and len(sizes) > 0 and float(np.median(sizes)) >= ROWS_FROM


def own_source_ok(op, budget_bytes: float) -> bool:
    """Whether :func:`own_source` has a row source for ``op`` within ``budget_bytes``."""
    n = op.shape[0]
    slots = int(budget_bytes // (n * np.dtype(op._np_dtype).itemsize))
    return slots >= n or (row_source_ok(op) and slots >= 2)


def own_source(op, budget_bytes: float, threads: int | None = None):
    """The row source of the matrix :math:`K + 1` of one problem's own operator ``op`` (a
    one-vs-one pair's), in at most ``budget_bytes``.

    Below :data:`ROWS_FROM` examples, the full matrix when it fits (``threads``: as
    :func:`plain_kernel_matrix`); from there on, or when it does not fit, a cache of rows
    (:func:`cached_source`: the rows the solve visits, computed on first use by the matrix's
    own row code, so that the solve reads the same bits either way). A cache belongs to its
    problem alone: problems with their own caches run on threads. Check
    :func:`own_source_ok` first.
    """
    n = op.shape[0]
    slots = int(budget_bytes // (n * np.dtype(op._np_dtype).itemsize))
    if slots >= n and (n < ROWS_FROM or not row_source_ok(op)):
        return full_source(plain_kernel_matrix(op, threads=threads))
    return cached_source(op, min(slots, n))


def cache_slots(plan, m: int, dtype) -> int:
    """Rows of ``m`` values of ``dtype`` that the plan's ``cache_size`` MB hold (``plan``: a
    :class:`~torchfw.svm._plan.FitPlan`)."""
    return int(float(plan.cache_size) * 2**20 // (m * np.dtype(dtype).itemsize))


def plain_operator(plan, X, C_examples):
    """The host arrays of the examples ``X`` whose matrix is ``K + 1`` -- the plan's kernel in
    its dtype -- (:class:`~torchfw.svm._plain_rows.PlainRows`: those of the operator with
    labels 1, which square away on the diagonal), or None without host storage. Built with
    torch: on the calling thread, before :func:`plain_kernel_matrix` (compiled code only) may
    run on another."""
    C_x = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    return plain_rows(X, plan.kernel, C_x, plan.dtype, plan.cache_size)


# The lazy path's column kernels, as the module globals the row loops call (numba resolves a
# callee by its global name when it compiles the caller).
_dots, _rbf_f32, _argument, _finish = (C.feature_major_dots, C.rbf_finish_f32,
                                       C.kernel_argument, C.finish_column)
_nonzeros = _njit(_dense_nonzeros)
_example_row_dots = _njit(_example_dots)
rows_rbf_f32 = _njit(_rows_rbf_f32)
_dots_from = _njit(_feature_major_dots_from, fastmath=True)  # as feature_major_dots
_example_row_dots_from = _njit(_example_dots_from)
upper_rbf_f32 = _njit(_upper_rbf_f32)
_upper_rows = upper_rbf_f32  # the callee, by global name
upper_mirror_rbf_f32 = _njit(_upper_mirror_rbf_f32)
rows_argument = _njit(_rows_argument)
upper_argument_rows = _njit(_upper_argument_rows)
_upper_arg_rows = upper_argument_rows  # the callee, by global name
upper_mirror_argument = _njit(_upper_mirror_argument)
rows_finish = _njit(_rows_finish)
_row_compute = _njit(_compute_row)
_touch_row = _njit(_touch, inline=True)
_least_frequent = _njit(_victim)
_missed_row = _njit(_missed_row_py)
source_row = _njit(_source_row_py, inline=True)
