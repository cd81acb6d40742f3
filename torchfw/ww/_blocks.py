r"""Compiled CPU kernels of the Weston-Watkins SVM: the block solvers (the sweep that calls them
is :mod:`torchfw.ww._sweep`).

Everything here is written as plain Python over NumPy arrays and compiled with numba when it is
importable (``TORCHFW_DISABLE_NUMBA=1`` turns numba off, as in :mod:`torchfw.optimizers._kernels`).
Without numba the same functions run in the interpreter: correct, but about two orders of
magnitude slower, so :mod:`torchfw.ww.estimator` warns once when that happens.

Why compiled loops and not tensor ops: one BCD inner iteration reads the weights written by the
previous one (Wang & Scott 2021, Algorithm 1), so the sweep over examples is sequential, and each
step only touches ``nnz(x_i) * k`` numbers. A PyTorch op costs microseconds to dispatch; the whole
inner iteration costs about as much as one dispatch. See ``docs/design.md``, section
"Weston–Watkins BCD: why numba".

Notation (Wang & Scott, ICML 2021, "An Exact Solver for the Weston-Watkins SVM Subproblem"): block
``i`` holds ``beta_i`` in ``[0, C]^(k-1)``; its subproblem, after dividing by ``||x_i||^2``, is

.. math:: \min_{0 \le b \le C} \tfrac12 b^\top (I + 11^\top) b - v^\top b ,

with ``v_s = (1 - (w_{y_i} - w_{c(s)})^\top x_i) / ||x_i||^2 + beta_{is} + 1^\top beta_i``.
Slot ``s`` of a block stands for class ``c(s) = s`` if ``s < y_i`` and ``s + 1`` otherwise (any
bijection between slots and the classes other than ``y_i`` gives the same problem; the paper's
code swaps classes 1 and ``y_i`` instead).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

# The exact step of the FW block solver: the host-float ExactLineSearch of the core.
from ..optimizers._kernels import _step_kernel

# numba is optional at run time: without it the Python versions below run as they are.
from ..utils.jit import HAVE_NUMBA, njit, numba

__all__ = ["HAVE_NUMBA", "METHOD_WALRUS", "METHOD_ITERATIVE", "METHOD_FW", "walrus_single",
           "iterative_single", "fw_single", "Workspace", "aligned_zeros"]

METHOD_WALRUS = 0
METHOD_ITERATIVE = 1
METHOD_FW = 2

#: Relative tolerance of the KKT test in Walrus (spec pitfall 8.1 b): scaled by max(1, v_max, C).
KKT_RTOL = 1e-12


_jit = partial(njit, fallback=True)


#: Nonzeros ahead whose weight rows are prefetched. Each inner iteration reads the k-vector rows
#: ``W[f]`` of the features of ``x_i``: random rows, so the hardware prefetcher cannot guess
#: them and the loop waits on memory latency; asking for the rows a few nonzeros ahead measured
#: about 30% faster on sector (55,197 x 105 weights, larger than the L3 cache).
PREFETCH_AHEAD = 4
#: ... but only when ``W`` has at least this many weights (1 MiB of float64, half the L2 cache
#: of a current core): a smaller ``W`` stays in the first cache levels, where the hints only
#: cost instructions (dna, satimage and letter, ``W`` of 1.7-4.3 KB: sweeps 12-18% faster
#: without them).
PREFETCH_MIN_WEIGHTS = 1 << 17


if HAVE_NUMBA:
    from llvmlite import ir as _ir  # type: ignore[import-untyped]
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic

    def _emit_prefetch(context, builder, aty, arr, index):
        """The ``llvm.prefetch`` call (read, high locality, data cache) for ``arr[index]``."""
        ary = context.make_array(aty)(context, builder, arr)
        ptr = _cgutils.get_item_pointer(context, builder, aty, ary, index, wraparound=False)
        i8p = _ir.IntType(8).as_pointer()
        i32 = _ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=_ir.FunctionType(_ir.VoidType(), [i8p, i32, i32, i32]))
        builder.call(fn, [builder.bitcast(ptr, i8p), _ir.Constant(i32, 0),
                          _ir.Constant(i32, 3), _ir.Constant(i32, 1)])
        return context.get_dummy_value()

    @_intrinsic
    def _prefetch(typingctx, arr, i, j):
        """Hint the CPU to load ``arr[i, j]``'s cache line (LLVM ``llvm.prefetch``, read)."""
        sig = numba.types.void(arr, i, j)

        def codegen(context, builder, signature, args):
            return _emit_prefetch(context, builder, signature.args[0], args[0],
                                  [args[1], args[2]])

        return sig, codegen

    @_intrinsic
    def _prefetch1(typingctx, arr, i):
        """Hint the CPU to load ``arr[i]``'s cache line (1-d ``arr``)."""
        sig = numba.types.void(arr, i)

        def codegen(context, builder, signature, args):
            return _emit_prefetch(context, builder, signature.args[0], args[0], [args[1]])

        return sig, codegen
else:  # pragma: no cover - without numba a prefetch hint means nothing
    def _prefetch(arr, i, j):  # type: ignore[misc]
        return None

    def _prefetch1(arr, i):  # type: ignore[misc]
        return None


def _prefetch_row_py(W, f):
    """Prefetch the whole row ``W[f]`` (one hint per 64-byte line of 8 doubles)."""
    for c in range(0, W.shape[1], 8):
        _prefetch(W, f, c)


_prefetch_row = _jit(_prefetch_row_py)


def _prefetch_cols_py(W, f, cls, a, yi):
    """Prefetch the cache lines of ``W[f, yi]`` and ``W[f, cls[j]]``, ``j < a`` (``cls``
    increasing), one hint per line. Lines are counted from a 64-byte aligned ``W`` (what
    :func:`aligned_zeros` gives); on another base some hints repeat or miss, nothing worse."""
    base = f * W.shape[1]
    ly = (base + yi) >> 3
    _prefetch(W, f, yi)
    last = -1
    for j in range(a):
        line = (base + cls[j]) >> 3
        if line != last and line != ly:
            _prefetch(W, f, cls[j])
            last = line


_prefetch_cols = _jit(_prefetch_cols_py)


def aligned_zeros(shape, align=64):
    """Zero float64 array whose data starts on an ``align``-byte boundary (a cache line)."""
    n = int(np.prod(shape))
    buf = np.zeros(n + align // 8, dtype=np.float64)
    off = (-buf.ctypes.data % align) // 8
    return buf[off:off + n].reshape(shape)


# --------------------------------------------------------------------------------------------
# Walrus (Algorithm 2): exact solution of the block subproblem in O(p log p), p = #{v_j > 0}.
# --------------------------------------------------------------------------------------------

def _sift_down_py(vals, idx, root, size):
    """Restore the max-heap property below ``root`` in ``vals[:size]`` (``idx`` follows)."""
    x = vals[root]
    j = idx[root]
    while True:
        child = 2 * root + 1
        if child >= size:
            break
        if child + 1 < size and vals[child + 1] > vals[child]:
            child += 1
        if vals[child] <= x:
            break
        vals[root] = vals[child]
        idx[root] = idx[child]
        root = child
    vals[root] = x
    idx[root] = j


_sift_down = _jit(_sift_down_py)


def _walrus_py(v, m, C, out, heap, hidx, sv, si, prefix, hint=0.0):
    """Walrus on ``v[:m]``: write the minimizer to ``out[:m]`` and return ``1^T b``.

    Only entries above ``min(v_max / 2, C)`` (a lower bound on ``gamma*``; positivity is the
    paper's Lemma A.9.3) can be positive at the optimum, so only they enter. The sweep walks the
    breakpoints ``{v_j} U {v_j - C}`` downwards by merging two sorted lists (the exit list is the
    entry list shifted by ``-C``, so one sorted order serves both), keeps ``(n_up, n_mid)``, and
    tests the KKT conditions (39) at the closed form ``gamma = (C n_up + S) / (n_mid + 1)`` after
    every event; the first state that passes is the minimizer.

    The sorted order is produced lazily by a max-heap, as in the authors' C++ code: the sweep
    usually stops after a few events (few coordinates are nonzero at the optimum), so popping
    costs ``O(p + events log p)`` instead of a full ``O(p log p)`` sort. ``S`` comes from prefix
    sums of the popped values, not a running add/subtract, so a tie cannot leave it an ulp off
    (spec pitfall 8.1 a); the test has a relative tolerance (8.1 b); a bisection on
    ``h(gamma)`` is the fallback (8.1 c).
    """
    vmax = 0.0
    for j in range(m):
        out[j] = 0.0
        if v[j] > vmax:
            vmax = v[j]
    if vmax <= 0.0:
        return 0.0
    # Any lower bound `low` on gamma* = 1'b* zeroes every v_j <= low, which then never needs
    # sorting. gamma* >= b*_max = clip(v_max - gamma*, 0, C) gives low = min(v_max / 2, C).
    # A guess g (BCD passes the block's previous sum) gives another: F(g) = 1'clip(v - g, 0, C)
    # is decreasing with F(gamma*) = gamma*, so g <= gamma* when F(g) >= g, and otherwise
    # F(g) <= gamma*. Late in BCD the guess is nearly exact and only the ~nonzeros of b* remain.
    low = 0.5 * vmax
    if low > C:
        low = C
    if hint > 0.0:
        f = 0.0
        for j in range(m):
            t = v[j] - hint
            if t >= C:
                f += C
            elif t > 0.0:
                f += t
        g = hint if f >= hint else f
        g -= KKT_RTOL * (vmax if vmax > C else C)  # F above is rounded: keep the bound safe
        if g > low:
            low = g
    p = 0
    for j in range(m):
        if v[j] > low:
            heap[p] = v[j]
            hidx[p] = j
            p += 1
    for r in range(p // 2 - 1, -1, -1):
        _sift_down(heap, hidx, r, p)
    size = p  # heap size; sv[:e] holds the popped (largest) values in decreasing order
    scale = vmax
    if C > scale:
        scale = C
    if scale < 1.0:
        scale = 1.0
    tol = KKT_RTOL * scale
    prefix[0] = 0.0
    e = 0  # entries processed = n_up + n_mid (= values popped)
    x = 0  # exits processed = n_up
    while size > 0 or x < e:
        ve = heap[0] if size > 0 else -math.inf
        vx = sv[x] - C if x < e else -math.inf
        if ve <= 0.0 and vx <= 0.0:
            break  # gamma* > 0: breakpoints <= 0 never hold the answer; only rounding gets here
        if ve >= vx:  # entry: pop the next largest value
            sv[e] = heap[0]
            si[e] = hidx[0]
            prefix[e + 1] = prefix[e] + heap[0]
            e += 1
            size -= 1
            if size > 0:
                heap[0] = heap[size]
                hidx[0] = hidx[size]
                _sift_down(heap, hidx, 0, size)
        else:  # exit: the largest free coordinate reaches C
            x += 1
        n_up = x
        n_mid = e - x
        gamma = (C * n_up + (prefix[e] - prefix[x])) / (n_mid + 1)
        nxt = heap[0] if size > 0 else -math.inf  # v_<e+1>, the next value not yet entered
        if n_up > 0 and sv[n_up - 1] - gamma < C - tol:
            continue
        if (sv[n_up] if n_up < e else nxt) - gamma > C + tol:
            continue
        if n_mid > 0 and sv[e - 1] - gamma < -tol:
            continue
        if nxt - gamma > tol:
            continue
        total = 0.0
        for j in range(n_up):
            out[si[j]] = C
            total += C
        for j in range(n_up, e):
            t = sv[j] - gamma
            # the tolerance admits a state that is off by rounding: keep b inside the box anyway
            if t < 0.0:
                t = 0.0
            elif t > C:
                t = C
            out[si[j]] = t
            total += t
        return total
    return _walrus_bisect(v, m, C, out, vmax, scale)


def _walrus_bisect_py(v, m, C, out, vmax, scale):
    """Fallback (not reached in our tests): bisection on the decreasing
    ``h(g) = 1'clip(v - g) - g`` over ``[0, v_max]``, then the closed form on its active sets."""
    lo = 0.0
    hi = vmax
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        h = -mid
        for j in range(m):
            t = v[j] - mid
            if t >= C:
                h += C
            elif t > 0.0:
                h += t
        if h > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-16 * scale:
            break
    g = 0.5 * (lo + hi)
    n_up = 0
    n_mid = 0
    S = 0.0
    for j in range(m):
        if v[j] - g >= C:
            n_up += 1
        elif v[j] - g > 0.0:
            n_mid += 1
            S += v[j]
    gamma = (C * n_up + S) / (n_mid + 1)
    total = 0.0
    for j in range(m):
        if v[j] - g >= C:
            out[j] = C
        elif v[j] - g > 0.0:
            t = v[j] - gamma
            out[j] = 0.0 if t < 0.0 else (C if t > C else t)
        else:
            out[j] = 0.0
        total += out[j]
    return total


_walrus_bisect = _jit(_walrus_bisect_py)
walrus_single = njit(_walrus_py, fallback=True, inline=True)


# --------------------------------------------------------------------------------------------
# The iterative baseline (Shark's QpMcLinearWW::solveSub, in the coordinates of (4)).
# --------------------------------------------------------------------------------------------

def _iterative_py(v, m, C, b, q, eps, grad):
    """Greedy one-coordinate Newton steps on the block subproblem, warm-started at ``b``.

    ``grad = (I + 11^T) b - v``. The most violating coordinate (KKT violation of the box) takes a
    clipped Newton step (the Hessian diagonal is 2); after a step ``m`` every gradient entry moves
    by ``m`` and the chosen one by ``2m``. Stops when ``q * violation < eps`` (Shark's gradient is
    ``-q * grad``, ``q = ||x_i||^2``, and its threshold is 1e-6) or after ``10 k`` steps, as the
    authors' reimplementation does (spec section 5). Returns ``1^T b``.
    """
    s = 0.0
    for j in range(m):
        s += b[j]
    for j in range(m):
        grad[j] = b[j] + s - v[j]
    for _ in range(10 * (m + 1)):
        best = -1
        viol = 0.0
        for j in range(m):
            g = grad[j]
            if g < 0.0 and b[j] < C:
                if -g > viol:
                    viol = -g
                    best = j
            elif g > 0.0 and b[j] > 0.0:
                if g > viol:
                    viol = g
                    best = j
        if best < 0 or q * viol < eps:
            break
        nb = b[best] - 0.5 * grad[best]
        if nb < 0.0:
            nb = 0.0
        elif nb > C:
            nb = C
        step = nb - b[best]
        b[best] = nb
        s += step
        for j in range(m):
            grad[j] += step
        grad[best] += step
    s = 0.0  # the sum the caller caches must be the sum of the stored b, not a running total
    for j in range(m):
        s += b[j]
    return s


iterative_single = _jit(_iterative_py)


# --------------------------------------------------------------------------------------------
# One (or a few) Frank-Wolfe steps on the block, with the box LMO and exact line search.
# --------------------------------------------------------------------------------------------

def _fw_py(v, m, C, b, steps, grad):
    r"""``steps`` Frank-Wolfe steps on the block subproblem from ``b``; returns ``1^T b``.

    A declared second implementation (:mod:`torchfw.utils.twins`) of
    :meth:`torchfw.optimizers.bcd.BlockCoordinateDescent._fw_block` on this subproblem, compiled
    and specialised to its Hessian :math:`H = I + 11^\top`: the box LMO puts a coordinate at 0
    where the gradient is positive and at ``C`` otherwise (torchfw's :class:`~torchfw.Box`
    convention), a step is taken unless the FW gap ``-<grad, d>`` is zero, and its size is the
    shared exact step (``_kernels._step_kernel``, :class:`~torchfw.ExactLineSearch` on host
    floats) on the curvature ``d^T (I + 11^T) d = ||d||^2 + (1^T d)^2``. Unlike the reference,
    the gradient is recomputed from the clipped ``b`` (the same up to rounding).
    """
    s = 0.0
    for j in range(m):
        s += b[j]
    for j in range(m):
        grad[j] = b[j] + s - v[j]
    for _ in range(steps):
        gd = 0.0
        dd = 0.0
        ds = 0.0
        for j in range(m):
            d = (0.0 if grad[j] > 0.0 else C) - b[j]
            gd += grad[j] * d
            dd += d * d
            ds += d
        if gd >= 0.0:
            break  # the FW gap -<grad, d> is zero: b is optimal
        lam = _step_kernel(gd, dd + ds * ds, 1.0)
        s = 0.0
        for j in range(m):
            d = (0.0 if grad[j] > 0.0 else C) - b[j]
            nb = b[j] + lam * d
            if nb < 0.0:  # rounding only
                nb = 0.0
            elif nb > C:
                nb = C
            b[j] = nb
            s += nb
        for j in range(m):
            grad[j] = b[j] + s - v[j]
    return s


fw_single = _jit(_fw_py)


class Workspace:
    """Scratch buffers of one sweep, allocated once per fit (no allocation in the hot loop)."""

    def __init__(self, k: int):
        m = k - 1
        self.scores = np.zeros(k)
        self.v = np.zeros(max(m, 1))
        self.bnew = np.zeros(max(m, 1))
        self.heap = np.zeros(max(m, 1))
        self.hidx = np.zeros(max(m, 1), dtype=np.int64)
        self.sv = np.zeros(max(m, 1))
        self.si = np.zeros(max(m, 1), dtype=np.int64)
        self.prefix = np.zeros(m + 1)
        self.grad = np.zeros(max(m, 1))
        self.changed = np.zeros(max(m, 1), dtype=np.int64)
        self.u = np.zeros(max(m, 1))
        self.cls = np.zeros(max(m, 1), dtype=np.int64)
        self.sc = np.zeros(max(m, 1))
