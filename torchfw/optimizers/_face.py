r"""The active-set corrective step: the exact minimizer of a quadratic on the current face.

One concern: the linear algebra of one correction, shared by every storage (the compiled SVC
solve, :mod:`torchfw.svm._dense`, and :class:`~torchfw.optimizers._engine.QuadraticEngine`
under any optimizer, :mod:`torchfw.optimizers._correction`). Each storage gathers the
quadratic restricted to the support :math:`S = \{k : w_k > 0\}` of its iterate -- the matrix
:math:`G = \tilde Q_{SS}`, the linear term :math:`c_S` and the weights :math:`x = w_S` -- and
hands them here; it applies the result to its own gradient afterwards.

**Why.** Frank-Wolfe steps (pairwise, SWAP and SWAP-2o included) converge at a linear rate set
by the condition number of :math:`\tilde Q` on the face. On the L2-SVM dual
:math:`\tilde K = Y(K + 1)Y + I/C` that number grows with :math:`C` and with the scale of the
kernel (a polynomial kernel on raw features), and the iterates crawl: at LIBSVM's
:math:`C = 2^{15}` on raw svmguide1, 300,000 SWAP iterations left a relative gap of 2.4. On a
face, though, the dual is an equality-constrained quadratic (no upper bounds: the L2-SVM has
none), whose minimizer is one linear system.

**The step** (Wolfe's minor cycle, Wolfe 1976, "Finding the nearest point in a polytope";
FrankWolfe.jl's ``ActiveSetQuadraticLinearSolve``): with the Cholesky factor
:math:`G = LL^\top`, the minimizer of :math:`\tfrac12 z^\top G z + c_S^\top z` on the affine
hull :math:`\{z : \mathbf 1^\top z = 1\}` solves

.. math:: \begin{pmatrix} G & \mathbf 1 \\ \mathbf 1^\top & 0 \end{pmatrix}
   \begin{pmatrix} z \\ \nu \end{pmatrix} = \begin{pmatrix} -c_S \\ 1 \end{pmatrix},
   \qquad z = v - \nu u,\ u = G^{-1}\mathbf 1,\ v = -G^{-1}c_S,\
   \nu = \frac{\mathbf 1^\top v - 1}{\mathbf 1^\top u}.

If :math:`z > 0` it is the face's minimizer and the step ends there. Otherwise the step moves
from :math:`x` toward :math:`z` until the first weight reaches zero (the ratio test: the
objective decreases all along the segment, being convex with its minimum on the hull at
:math:`z`), that atom leaves the face, the factor is downdated (Givens rotations,
:math:`O(|S|^2)`), and the minor cycle repeats on the smaller face. It ends in at most
:math:`|S|` solves with the minimizer of the quadratic over the simplex of the final face.
The caller then goes back to Frank-Wolfe steps, whose gap certifies the whole problem.

A face whose matrix is not numerically definite (a pivot below the rank cutoff: a singular
:math:`\tilde Q_{SS}`, e.g. an L1 ball's :math:`\pm e_i` both in the support) is left
unchanged: the kernel reports failure and the caller keeps its iterate.
"""

from __future__ import annotations

import numpy as np

from ..utils.jit import njit

__all__ = ["cholesky_in_place", "remove_position", "face_minimizer", "minor_cycle", "face_minimize",
           "FAILED", "correction_window", "STALL", "MAX_FACE", "MIN_WINDOW", "face_atoms", "axpy",
           "MIN_ADD", "extend_factor", "violators", "MAX_ROUNDS", "prune", "extend_skipping",
           "face_growth", "GROWTH", "face_budget", "ITERATION_COST", "FACE_RATIO", "FACTOR_ROWS",
           "GEMM_ROWS", "GEMM_ATOMS", "minor_cycle_kept", "prune_kept", "stalled", "REACH",
           "FIRST_FACE_RATIO", "MAX_FACE_RATIO", "distance", "stalled_scaled", "correction_cost", "FILL",
           "filling"]

#: Return value of :func:`minor_cycle` when the face's matrix is not numerically definite.
FAILED = -1

#: When a correction is due. The run is cut into windows; a window ends after as many plain
#: iterations as cost :data:`RATIO` times one correction on the face the window started on
#: (:func:`correction_window`), and at its end a correction is taken if the window stalled
#: (:func:`stalled`): its smallest distance to the stopping target (:func:`distance`, the gap
#: over the target) is above ``STALL`` times the previous window's smallest (or the distance
#: at the start or after the last correction) -- the plain steps did not halve it -- and, at
#: the rate it fell, would not reach the target within :data:`REACH` windows. So at most
#: about ``1 / (1 + RATIO)`` of the work goes to corrections, and where plain steps converge
#: fast (scaled data, moderate C) none is taken.
#:
#: The distance, not the gap: under a relative target (``rtol |f|``) a gap that halves while
#: the value halves too has come no nearer to stopping. On 4,000 examples of a9a at LIBSVM's
#: (C, gamma) = (2^13, 2^-3) the value fell 100,000-fold over the run while the gap stayed
#: 4-5 times it; measured on the gap, every window of 66,000 plain iterations (one correction
#: on the 1,400-atom support) halved it, no correction was taken, and the fit stopped after
#: 390,820 of the 400,000-iteration safety net.
#:
#: The run's first window (the opening) is measured on gaps against its end's target, as the
#: windows were before distances: it starts at the exact solution of a random subset (SVC's
#: start, :mod:`torchfw.svm._start`), where the value falls with the gap while the support
#: fills in, and on distances every start read as a stall. On 100 examples at C = 10 (a
#: problem the plain steps solve in 2,480 iterations) the opening's distance fell 1.4-fold
#: while its gap fell 7-fold: a correction at iteration 50 led the run elsewhere (2,011
#: iterations, a model 7e-7 from the plain steps' at rtol 1e-6). On a9a at (2^13, 2^-3) the
#: folds take 28,593-81,653 iterations with the opening on gaps (32,684-169,173 without).
#:
#: Every later window is measured both ways: it stalled if its gaps did not halve (against the
#: target, as the opening), or if its distances did not halve while its face did not fill in
#: (:func:`filling`). Early in a run the value falls several-fold a window, the relative
#: target with it, and distances read as a stall while the plain steps still find the
#: support: on raw svmguide1 at C = 2^8, gamma = 2^-9 distances alone took corrections at
#: iterations 100 and 461 on faces of 98 and 188 atoms (of 406) and ran 1,822 iterations,
#: gaps 892; each one-vs-rest problem of a generated 10-class set of 1,400 examples took one
#: on a 150-atom face at iteration 130 (0.085 s against 0.056 s a fit). On a9a (2^13, 2^-3)
#: the folds take at most 114,481 iterations with both (81,653 on distances alone).
STALL = 0.5
RATIO = 1.0
#: Windows a stalled window's rate may still take to the stopping target without a correction
#: (:func:`stalled`; a window of plain steps costs about :data:`RATIO` corrections). Easy
#: one-vs-one pairs of shuttle (8,600 examples against 10, 29 or 1,600) stalled once, at 100
#: to 170 iterations, a few times their target away, and took a correction each (3 or 4 a
#: hold-out): ``SVC()`` on its 5 hold-outs took 1.2 s of CPU, 0.66 s with no correction. At 2
#: windows one correction a hold-out is left, and 0.75-0.8 s (same accuracy within 0.2 points,
#: 99.27 % against scikit-learn's 99.14 %).
REACH = 2
#: Fewest iterations of a window (a correction on a few atoms costs less than a check).
MIN_WINDOW = 50
#: Largest face corrected by a dense factorization (its ``k x k`` matrix: 128 MB at 4,096).
MAX_FACE = 4096
#: What a plain iteration costs per atom, in multiply-adds of the factorization (see
#: :func:`face_budget`).
ITERATION_COST = 10.0
#: Rows of :func:`extend_factor`'s blocks (16 rows of a 4,096-atom face: 512 KB, about a core's
#: second-level cache; 8 to 64 measured within 10 % of each other on a 2,000-atom face).
FACTOR_ROWS = 16
#: Rows of :func:`_factor_rows_gemm`'s blocks (a 2,400-atom factor: 32 and 64 rows took
#: 0.35 s, 128 rows 0.52 s, the row-by-row order 0.63 s).
GEMM_ROWS = 64
#: Fewest atoms a factor must have for :func:`_factor_rows_gemm`: below, the row-by-row
#: order of :func:`_factor_rows_py` (bit for bit the reference sums; little to gain on a
#: factor that fits a core's cache).
GEMM_ATOMS = 256
#: The first correction after a window that was not stalled may factor a face that costs
#: as much as the plain iterations since the last correction (:func:`face_budget`): a single
#: stall (a9a's first 10,000 rows at C = 1 stall once, at 100 iterations) takes the face the
#: plain steps paid for one to one; at 8 there its twice larger face left an iterate that took
#: 7,941 iterations to converge, against 7,321, and 1.15x the time.
FIRST_FACE_RATIO = 1.0
#: Each stalled window that follows a stalled one multiplies the ratio by this, up to
#: :data:`MAX_FACE_RATIO`. At a constant 1 the faces grew too slowly: 4,000 examples of a9a at
#: LIBSVM's (C, gamma) = (2^11, 2^-13) factored faces up to 1,809 atoms and stopped at the
#: 400,000-iteration safety net at relative gap 0.81; at a constant 8 a face grows about 2x
#: per window (8^(1/3)) and the folds of ``benchmarks/svm_grid.py --datasets a9a-5000`` at
#: C = 2^11 and 2^15 converged in up to 68,000 and 83,000 iterations.
FACE_RATIO = 8.0
#: The largest ratio (after three stalls in a row). With 1, 8, 64, 512 and the shorter windows
#: of repeated stalls (:func:`correction_window`) the same folds converge in 924-935
#: iterations at 2^11 and 605-1,155 at 2^15, with four or five corrections (the last on the
#: whole support of 2,270-2,370 atoms); with the ratios alone, 2,553-8,483 and up to 179,000
#: (a third correction's face short of the support, then the long window of its face).
MAX_FACE_RATIO = 512.0
#: Fewest atoms a correction adds to its face when that many violate optimality.
MIN_ADD = 10
#: A correction's round adds ``1 / GROWTH`` of its face in violators (:func:`face_growth`).
GROWTH = 4
#: Most rounds of one correction (each: add the worst violators, minor cycle, new gradient);
#: the rounds go on while each at least halves the gap of the one before.
MAX_ROUNDS = 12
#: Passes of :func:`prune` (each re-extends the factor by the added atoms kept).
PRUNE_PASSES = 1


def _dot4_py(a, b, n):
    """``sum(a[:n] * b[:n])`` in four interleaved lanes (independent chains that overlap, in a
    fixed order: every caller gets the same bits), combined as ``(l0 + l1) + (l2 + l3)``."""
    l0 = l1 = l2 = l3 = 0.0
    n4 = n - n % 4
    for r in range(0, n4, 4):
        l0 += a[r] * b[r]
        l1 += a[r + 1] * b[r + 1]
        l2 += a[r + 2] * b[r + 2]
        l3 += a[r + 3] * b[r + 3]
    for r in range(n4, n):
        l0 += a[r] * b[r]
    return (l0 + l1) + (l2 + l3)


def _dot4_arrays(a, b, n):
    """:func:`_dot4` by NumPy's dot product, where the kernel runs interpreted."""
    return float(np.dot(a[:n], b[:n]))


def _dots4_arrays(L, a, b, n, out):
    """:func:`_dots4` by one NumPy product, where the kernel runs interpreted."""
    out[:4] = L[a:a + 4, :n] @ L[b, :n]


def _dots4_py(L, a, b, n, out):
    """``out[q] = _dot4(L[a + q], L[b], n)`` for ``q < 4``, in one pass over ``L[b]``.

    Each of the four sums has :func:`_dot4`'s lanes and order (so its bits): sharing the
    loads of row ``b`` among four rows is what :func:`extend_factor`'s row blocks gain."""
    l00 = l01 = l02 = l03 = 0.0
    l10 = l11 = l12 = l13 = 0.0
    l20 = l21 = l22 = l23 = 0.0
    l30 = l31 = l32 = l33 = 0.0
    n4 = n - n % 4
    A0 = L[a]
    A1 = L[a + 1]
    A2 = L[a + 2]
    A3 = L[a + 3]
    B = L[b]
    for r in range(0, n4, 4):
        b0 = B[r]
        b1 = B[r + 1]
        b2 = B[r + 2]
        b3 = B[r + 3]
        l00 += A0[r] * b0
        l01 += A0[r + 1] * b1
        l02 += A0[r + 2] * b2
        l03 += A0[r + 3] * b3
        l10 += A1[r] * b0
        l11 += A1[r + 1] * b1
        l12 += A1[r + 2] * b2
        l13 += A1[r + 3] * b3
        l20 += A2[r] * b0
        l21 += A2[r + 1] * b1
        l22 += A2[r + 2] * b2
        l23 += A2[r + 3] * b3
        l30 += A3[r] * b0
        l31 += A3[r + 1] * b1
        l32 += A3[r + 2] * b2
        l33 += A3[r + 3] * b3
    for r in range(n4, n):
        l00 += A0[r] * B[r]
        l10 += A1[r] * B[r]
        l20 += A2[r] * B[r]
        l30 += A3[r] * B[r]
    out[0] = (l00 + l01) + (l02 + l03)
    out[1] = (l10 + l11) + (l12 + l13)
    out[2] = (l20 + l21) + (l22 + l23)
    out[3] = (l30 + l31) + (l32 + l33)


def _extend_factor_py(L, k0, k):
    r"""Extend the Cholesky factor ``L[:k0, :k0]`` to rows ``k0 .. k-1``, in place.

    On entry rows ``k0 .. k-1`` of ``L`` hold the new rows of :math:`G` up to the diagonal
    (``L[a, b] = G[a, b]`` for ``b <= a``); on exit ``L[:k, :k]`` is the factor of all of
    :math:`G` (row by row: :math:`L_{ab} = (G_{ab} - L_{a,:b} L_{b,:b}^\top) / L_{bb}`), the
    strict upper triangle zeroed. ``k0 = 0`` factors from scratch; a correction that adds
    atoms to a factored face pays :math:`O(k_0^2 (k - k_0))`, not a new factorization.

    The rows are taken :data:`FACTOR_ROWS` at a time: the block's entries left of it are
    computed column by column, four rows per pass over row ``b`` of the factor
    (:func:`_dots4_py`), so each row read from memory serves the whole block, then the block's
    own triangle row by row. Every entry is the same sum in the same order as row by row
    (bit for bit), only the loops are interchanged: a 2,000-atom face's factor (the cost of a
    correction on a9a at large C, :math:`k^3/3` multiply-adds streaming a 16 MB triangle)
    took about half the time (``tests/test_face_factor.py`` checks the bits). Faces of
    :data:`GEMM_ATOMS` atoms and more go to :func:`_factor_rows_gemm` (block products: the
    same factor to rounding, in a little over half that time again).

    Returns ``k``, or the first row whose pivot falls below the rank cutoff (``16 (k+1) eps``
    times that row's diagonal entry of :math:`G`, :func:`_pivot_cutoff`):
    the matrix is not numerically definite there (rows before it are factored, rows after it
    still hold :math:`G`).
    """
    return _factor_rows(L, k0, k, 0)


def _pivot_cutoff_py(L, k0, k):
    r"""The smallest pivot :func:`extend_factor` accepts, as a fraction of the row's own
    diagonal entry :math:`G_{aa}`: ``16 (k + 1)`` float64 epsilons. A row is accepted when
    :math:`G_{aa} - \|L_{a,:a}\|^2 > 16 (k+1) \epsilon\, G_{aa}`: when the part of atom
    :math:`a` that the face's earlier atoms do not span is more than rounding of its own
    entries (the computed difference is exact to about :math:`k \epsilon G_{aa}`).

    Why the row's own diagonal and not the largest of the face: the test is then invariant
    to a diagonal scaling of :math:`G` (the Cholesky factor of :math:`DGD` is :math:`DL`).
    A polynomial kernel on raw features has diagonal entries over twelve orders of magnitude
    (breast cancer, degree 5, gamma 0.1: :math:`5 \cdot 10^{19}` to :math:`9 \cdot 10^{31}`);
    against the largest, an atom of small norm failed at a pivot of :math:`2 \cdot 10^{-7}`
    of its own diagonal, every correction was refused, and the plain steps left a relative
    gap of 18 after 1,000 iterations per example. Where the diagonal is constant (Gaussian
    kernels) both tests are the same. ``L``, ``k0`` are unused (kept for the callers' signature)."""
    return (k + 1) * 2.220446049250313e-16 * 16.0


def _factor_rows_py(L, k0, k, c0):
    r""":func:`extend_factor` of rows ``k0 .. k-1`` whose columns before ``c0 <= k0`` are
    already factored (:func:`prune` keeps them: they depend on the row's own entries and on
    the factor's first ``c0`` rows alone, so they are the same bits); the rest of each row
    holds :math:`G` up to the diagonal. ``c0 = 0`` is :func:`extend_factor`.

    Factors of at least :data:`GEMM_ATOMS` atoms with more than :data:`FACTOR_ROWS` new rows go
    to :func:`_factor_rows_gemm` (matrix products; other sums, so other bits, than the order
    here).
    """
    if k >= GEMM_ATOMS and k - k0 > FACTOR_ROWS:
        return _factor_rows_gemm(L, k0, k, c0)
    cutoff = _pivot_cutoff(L, k0, k)
    out = np.empty(4)
    saved = np.empty((FACTOR_ROWS, k))
    for a0 in range(k0, k, FACTOR_ROWS):
        a1 = a0 + FACTOR_ROWS if a0 + FACTOR_ROWS < k else k
        for a in range(a0, a1):  # G of the block, put back where a pivot fails
            for b in range(c0, a0):
                saved[a - a0, b] = L[a, b]
        for b in range(c0, a0):
            d = L[b, b]
            a = a0
            while a + 4 <= a1:
                _dots4(L, a, b, b, out)
                L[a, b] = (L[a, b] - out[0]) / d
                L[a + 1, b] = (L[a + 1, b] - out[1]) / d
                L[a + 2, b] = (L[a + 2, b] - out[2]) / d
                L[a + 3, b] = (L[a + 3, b] - out[3]) / d
                a += 4
            while a < a1:
                L[a, b] = (L[a, b] - _dot4(L[a], L[b], b)) / d
                a += 1
        for a in range(a0, a1):
            for b in range(a0, a):
                L[a, b] = (L[a, b] - _dot4(L[a], L[b], b)) / L[b, b]
            acc = L[a, a] - _dot4(L[a], L[a], a)
            if not acc > cutoff * L[a, a]:
                for r in range(a + 1, a1):
                    for b in range(c0, a0):
                        L[r, b] = saved[r - a0, b]
                return a
            L[a, a] = np.sqrt(acc)
            for b in range(a + 1, L.shape[1]):
                L[a, b] = 0.0
    for a in range(k0):
        for b in range(k0, k):
            L[a, b] = 0.0
    return k


def _block_product_py(F, B, out):
    """``out = F @ B`` (``F`` of shape ``(w, n)``, ``B`` ``(n, nb)``, all C-contiguous).

    Four rows of ``out`` at a time, each entry of ``B`` loaded once for the four (an axpy
    along ``B``'s contiguous rows, which the compiler vectorizes); every entry is the sum over
    ``n`` in increasing order (the same bits whatever the shapes around it)."""
    w = F.shape[0]
    n = F.shape[1]
    nb = B.shape[1]
    for i in range(w):
        for r in range(nb):
            out[i, r] = 0.0
    i = 0
    while i + 4 <= w:
        o0 = out[i]
        o1 = out[i + 1]
        o2 = out[i + 2]
        o3 = out[i + 3]
        for c in range(n):
            f0 = F[i, c]
            f1 = F[i + 1, c]
            f2 = F[i + 2, c]
            f3 = F[i + 3, c]
            row = B[c]
            for r in range(nb):
                b = row[r]
                o0[r] += f0 * b
                o1[r] += f1 * b
                o2[r] += f2 * b
                o3[r] += f3 * b
        i += 4
    while i < w:
        o0 = out[i]
        for c in range(n):
            f0 = F[i, c]
            row = B[c]
            for r in range(nb):
                o0[r] += f0 * row[r]
        i += 1


def _factor_rows_gemm_py(L, k0, k, c0):
    r""":func:`_factor_rows_py` of a large face, its sums taken as block products.

    The same row-block Cholesky (left-looking: each block of :data:`GEMM_ROWS` rows is
    solved against the factor rows above it, then its own triangle is factored), with the
    sums :math:`L_{a,:j_0} L_{b,:j_0}^\top` of a block against a column block
    :math:`[j_0, j_1)` of the factor taken as one product ``(w x j0) @ (j0 x rows)``
    (:func:`_block_product`: contiguous rows, vectorized), and only the sums inside the column
    block by hand, a column of the block at a time (again along contiguous rows: the block is
    kept transposed). The row-by-row order reads a factor row per entry and sums along it in
    one chain of dependent adds; a 2,400-atom face (a9a at LIBSVM's C = 2^11) took 0.35 s
    this way against 0.63 s. The products read contiguous copies: the factor rows of each
    column block (``L[j0:j1, :j0]``, copied once, :math:`k^2/2` in all) and the block's rows
    transposed. (BLAS would be faster still, but numba reaches it through SciPy, which
    torchfw does not require, and OpenBLAS's threads spin on a loaded machine.)

    Same contract: returns ``k``, or the first row whose pivot falls below
    :func:`_pivot_cutoff`'s cutoff, rows before it factored and rows after it still
    holding :math:`G` (a failing block's rows are put back).
    """
    cutoff = _pivot_cutoff(L, k0, k)
    rb = GEMM_ROWS
    # Column blocks: c0 .. k0 in steps of rb (the old factor's rows), then the row blocks.
    n_blocks = 0
    j = c0
    while j < k:
        n_blocks += 1
        j = _next_block(j, k0, k, rb)
    starts = np.empty(n_blocks + 1, dtype=np.int64)
    offsets = np.zeros(n_blocks + 1, dtype=np.int64)
    j = c0
    for q in range(n_blocks):
        starts[q] = j
        nxt = _next_block(j, k0, k, rb)
        offsets[q + 1] = offsets[q] + (nxt - j) * j
        j = nxt
    starts[n_blocks] = k
    flat = np.empty(offsets[n_blocks])  # block q's factor rows L[j0:j1, :j0], row-major
    saved = np.empty((rb, k))
    q_row = 0
    for q in range(n_blocks):
        j0 = starts[q]
        j1 = starts[q + 1]
        if j1 > k0:
            break
        q_row = q + 1
        o = offsets[q]
        for a in range(j0, j1):
            for b in range(j0):
                flat[o + (a - j0) * j0 + b] = L[a, b]
    for qa in range(q_row, n_blocks):
        a0 = starts[qa]
        a1 = starts[qa + 1]
        nb = a1 - a0
        bt = np.empty((k, nb))  # the block's rows, transposed (column r: row a0 + r)
        tmp = np.empty(nb)
        for a in range(a0, a1):
            for b in range(c0, a + 1):
                saved[a - a0, b] = L[a, b]
            for b in range(c0):
                bt[b, a - a0] = L[a, b]
        for q in range(qa + 1):  # the column blocks left of this one, then its own
            j0 = starts[q]
            j1 = starts[q + 1]
            w = j1 - j0
            prod = np.zeros((w, nb))
            if j0 > 0:
                if q == qa:  # the block's own rows left of it: copied now, kept for later
                    o = offsets[q]
                    for a in range(a0, a1):
                        for b in range(j0):
                            flat[o + (a - a0) * j0 + b] = L[a, b]
                F = flat[offsets[q]:offsets[q] + w * j0].reshape((w, j0))
                _block_product(F, bt[:j0], prod)
            for b in range(j0, j1):
                # Column b of the block's rows (those below row b in the own block): the
                # rest of each sum, along bt's contiguous rows.
                r0 = 0 if q < qa else b - a0
                Lb = L[b]
                if q == qa:  # row b's pivot first: the rows below need it
                    acc = L[b, b] - prod[b - j0, r0]
                    for c in range(j0, b):
                        acc -= bt[c, r0] * bt[c, r0]
                    if not acc > cutoff * L[b, b]:
                        for t in range(b + 1, a1):
                            for u in range(c0, t + 1):
                                L[t, u] = saved[t - a0, u]
                        return b
                    L[b, b] = np.sqrt(acc)
                    bt[b, r0] = L[b, b]
                    for u in range(b + 1, L.shape[1]):
                        L[b, u] = 0.0
                    r0 += 1
                pb = prod[b - j0]
                for r in range(r0, nb):
                    tmp[r] = L[a0 + r, b] - pb[r]
                for c in range(j0, b):
                    lbc = Lb[c]
                    btc = bt[c]
                    for r in range(r0, nb):
                        tmp[r] -= btc[r] * lbc
                d = Lb[b]
                btb = bt[b]
                for r in range(r0, nb):
                    v = tmp[r] / d
                    btb[r] = v
                    L[a0 + r, b] = v
    for a in range(k0):
        for b in range(k0, k):
            L[a, b] = 0.0
    return k


def _next_block_py(j, k0, k, rb):
    """Where the column block starting at ``j`` ends: ``rb`` columns, cut at ``k0`` (the old
    factor's rows and the new rows fall in different blocks) and at ``k``."""
    nxt = j + rb
    if j < k0 and nxt > k0:
        nxt = k0
    return nxt if nxt < k else k


def _extend_skipping_py(L, Gb, k0, lo, k, x, c, has_c, idx):
    r""":func:`extend_factor` of rows ``k0 .. k-1`` that leaves out an added atom (position
    ``>= lo``, weight 0) whose pivot fails -- an atom numerically dependent on the face's
    others (a polynomial kernel on raw features has a low-rank :math:`K`, which the float32
    rounding of its entries, about :math:`10^{-7}` of entries of :math:`10^5`, can make
    indefinite where :math:`1/C` alone lifts it) -- and goes on. Rows after it still hold
    :math:`G` (the factor is computed row by row), so they move up with its column removed,
    as do ``Gb``, ``idx``, ``x`` and ``c``. Returns the new number of atoms, or -1 when an atom
    before ``lo`` fails.
    """
    start = k0
    while True:
        a = _extend_factor(L, start, k)
        if a == k:
            return k
        if a < lo:
            return -1
        for r in range(a, k - 1):
            for b in range(a):
                L[r, b] = L[r + 1, b]
                Gb[r - k0, b] = Gb[r + 1 - k0, b]
            for b in range(a, r + 1):
                L[r, b] = L[r + 1, b + 1]
                Gb[r - k0, b] = Gb[r + 1 - k0, b + 1]
            idx[r] = idx[r + 1]
            x[r] = x[r + 1]
            if has_c:
                c[r] = c[r + 1]
        k -= 1
        start = a


def _cholesky_in_place_py(G, k):
    r"""Overwrite the lower triangle of ``G[:k, :k]`` with its Cholesky factor :math:`L`
    (:func:`extend_factor` from nothing); False when it is not numerically definite."""
    return _extend_factor(G, 0, k) == k


def _remove_position_py(L, k, r):
    r"""Downdate the factor ``L[:k, :k]`` of :math:`G` to that of :math:`G` without row and
    column ``r`` (the rows below move up by one); :math:`O((k - r) k)`.

    :func:`_downdate` with the rotations left out."""
    cs = np.ones(k)
    sn = np.zeros(k)
    _downdate(L, k, r, cs, sn)


def _downdate_py(L, k, r, cs, sn):
    r""":func:`remove_position`, the Givens rotation of columns ``(c, c+1)`` left in
    ``cs[c], sn[c]`` for ``r <= c < k - 1`` (``cs = 1, sn = 0``: none); ``cs`` and ``sn`` hold
    ones and zeros on entry.

    Deleting row ``r`` of :math:`L` leaves :math:`M` with :math:`MM^\top = G_{-r,-r}`, lower
    triangular but for one entry above the diagonal in each row from ``r`` on; Givens
    rotations of column pairs ``(c, c+1)`` (from the right: :math:`MM^\top` is unchanged)
    clear them one by one. The last column then is zero and is dropped.

    Rotation ``c`` is defined by row ``c`` once rotations ``r .. c-1`` have acted on it, and
    acts on the rows below; each row goes through the rotations in the order ``r, r+1, ..``.
    The rows are taken :data:`FACTOR_ROWS` at a time, each block through the rotations defined
    above it, then through its own: the factor is read row by row. Rotating column pairs over
    all rows (one rotation at a time) read ``L`` a column at a time, an entry per row of a
    ``MAX_FACE``-wide buffer, each a cache and TLB miss -- most of a minor cycle's time on
    a9a at large C. Every entry goes through the same rotations in the same order either way
    (the same bits).
    """
    for a in range(r, k - 1):
        for b in range(a + 2):
            L[a, b] = L[a + 1, b]
    for a0 in range(r, k - 1, FACTOR_ROWS):
        a1 = a0 + FACTOR_ROWS if a0 + FACTOR_ROWS < k - 1 else k - 1
        _rotate_rows(L, r, a0, a1, cs, sn)  # the rotations defined above the block
        for i in range(a0, a1):  # the block's own, row by row
            for c in range(a0, i):
                if sn[c] == 0.0 and cs[c] == 1.0:
                    continue
                li = L[i, c]
                lj = L[i, c + 1]
                L[i, c] = cs[c] * li + sn[c] * lj
                L[i, c + 1] = -sn[c] * li + cs[c] * lj
            a = L[i, i]
            b = L[i, i + 1]
            h = np.hypot(a, b)
            if h == 0.0:
                continue  # cs = 1, sn = 0: no rotation (skipped)
            cs[i] = a / h
            sn[i] = b / h
            L[i, i] = cs[i] * a + sn[i] * b
            L[i, i + 1] = 0.0
    for a in range(k):
        L[a, k - 1] = 0.0
        L[k - 1, a] = 0.0


def _rotate_rows_py(L, r, a0, a1, cs, sn):
    r"""Rows ``a0 .. a1-1`` of :func:`_downdate` through the rotations ``r .. a0-1`` (defined
    above them), in place.

    Rotation ``c`` maps the row's entries ``(c, c+1)`` to ``(cs li + sn lj, -sn li + cs lj)``
    and the next one reads the second of them again, so each row carries it in a register
    along the row (one load and one store an entry, read in order) and four rows go side by
    side (four independent chains). Taking each rotation across the block's rows instead (a
    column at a time) loaded and stored both entries of every pair, a row stride apart: a
    downdate near the top of a 2,000-atom face took 20-40 ms against 4 ms this way. The same
    operations on every entry in the same order (the same bits)."""
    i = a0
    while i + 4 <= a1:
        R0 = L[i]
        R1 = L[i + 1]
        R2 = L[i + 2]
        R3 = L[i + 3]
        t0 = R0[r]
        t1 = R1[r]
        t2 = R2[r]
        t3 = R3[r]
        for c in range(r, a0):
            cc = cs[c]
            sc = sn[c]
            b0 = R0[c + 1]
            b1 = R1[c + 1]
            b2 = R2[c + 1]
            b3 = R3[c + 1]
            if sc == 0.0 and cc == 1.0:  # no rotation (skipped): the pair is left as it is
                R0[c] = t0
                R1[c] = t1
                R2[c] = t2
                R3[c] = t3
                t0 = b0
                t1 = b1
                t2 = b2
                t3 = b3
                continue
            R0[c] = cc * t0 + sc * b0
            t0 = -sc * t0 + cc * b0
            R1[c] = cc * t1 + sc * b1
            t1 = -sc * t1 + cc * b1
            R2[c] = cc * t2 + sc * b2
            t2 = -sc * t2 + cc * b2
            R3[c] = cc * t3 + sc * b3
            t3 = -sc * t3 + cc * b3
        R0[a0] = t0
        R1[a0] = t1
        R2[a0] = t2
        R3[a0] = t3
        i += 4
    while i < a1:
        R0 = L[i]
        t0 = R0[r]
        for c in range(r, a0):
            cc = cs[c]
            sc = sn[c]
            b0 = R0[c + 1]
            if sc == 0.0 and cc == 1.0:
                R0[c] = t0
                t0 = b0
                continue
            R0[c] = cc * t0 + sc * b0
            t0 = -sc * t0 + cc * b0
        R0[a0] = t0
        i += 1


def _triangular_solve(L, k, rhs, out):
    """``out = (L L')^{-1} rhs`` on the leading ``k x k`` factor (forward, then backward).

    Both passes read ``L`` row by row: the backward one (:math:`L^\top`) as a column sweep,
    each solved entry subtracted from those above it along its row of ``L``. Reading
    :math:`L^\top`'s rows (columns of ``L``, an entry per row of a ``MAX_FACE``-wide buffer)
    cost a cache and TLB miss an entry: tens of milliseconds a solve on 2,000 atoms. The
    forward pass sums in :func:`_dot4`'s four lanes (one chain of dependent adds is bound by
    their latency)."""
    for a in range(k):
        out[a] = (rhs[a] - _dot4(L[a], out, a)) / L[a, a]
    for a in range(k - 1, -1, -1):
        xa = out[a] / L[a, a]
        out[a] = xa
        for q in range(a):
            out[q] -= L[a, q] * xa


def _face_minimizer_py(L, k, c, has_c, z, u, work):
    r"""The minimizer ``z`` of :math:`\tfrac12 z^\top G z + c^\top z` on :math:`\mathbf 1^\top z
    = 1`, from the factor of :math:`G` (module docstring); False if it is not finite.

    :func:`_face_minimizer_kept` from no forward vectors (``work`` is unused: kept for the
    callers' signature)."""
    Y = np.empty((2, k))
    return _face_minimizer_kept(L, k, c, has_c, Y, 0, z, u)


def _dot4x2_py(a, y0, y1, n, out):
    """``out[q] = _dot4(a, y_q, n)`` for ``q = 0, 1``, in one pass over ``a`` (each sum in
    :func:`_dot4`'s lanes and order: the same bits)."""
    l0 = l1 = l2 = l3 = 0.0
    m0 = m1 = m2 = m3 = 0.0
    n4 = n - n % 4
    for r in range(0, n4, 4):
        a0 = a[r]
        a1 = a[r + 1]
        a2 = a[r + 2]
        a3 = a[r + 3]
        l0 += a0 * y0[r]
        l1 += a1 * y0[r + 1]
        l2 += a2 * y0[r + 2]
        l3 += a3 * y0[r + 3]
        m0 += a0 * y1[r]
        m1 += a1 * y1[r + 1]
        m2 += a2 * y1[r + 2]
        m3 += a3 * y1[r + 3]
    for r in range(n4, n):
        l0 += a[r] * y0[r]
        m0 += a[r] * y1[r]
    out[0] = (l0 + l1) + (l2 + l3)
    out[1] = (m0 + m1) + (m2 + m3)


def _forward_rows_py(L, a0, k, c, has_c, Y):
    r"""The forward halves of the face's two solves, rows ``a0 .. k-1``: ``Y[0] =``
    :math:`L^{-1}\mathbf 1` and (with ``has_c``) ``Y[1] =`` :math:`L^{-1}(-c)`, the rows before
    ``a0`` given.

    Row ``a`` of a forward solve reads rows ``<= a`` of the factor and of the right-hand side
    only, so the entries of rows a correction did not touch stay valid: an extension (new rows
    below), a prune (rows from its old face's end on) and a downdate
    (:func:`_remove_position_kept`) leave the rows before them, and only the new rows are solved
    here -- :math:`O((k - a_0) k)` instead of :math:`O(k^2)`. Both right-hand sides in one pass
    over each factor row (:func:`_dot4x2`), in :func:`_triangular_solve`'s sums (the same bits
    from ``a0 = 0``)."""
    out = np.zeros(2)
    for a in range(a0, k):
        d = L[a, a]
        if has_c:
            _dot4x2(L[a], Y[0], Y[1], a, out)
            Y[1, a] = (-c[a] - out[1]) / d
        else:
            out[0] = _dot4(L[a], Y[0], a)
        Y[0, a] = (1.0 - out[0]) / d


def _backward_pair_py(L, k, Y, has_c, u, v):
    r"""The backward halves: ``u =`` :math:`L^{-\top}` ``Y[0]`` and (with ``has_c``) ``v =``
    :math:`L^{-\top}` ``Y[1]``, as :func:`_triangular_solve`'s column sweep (each solved entry
    subtracted from those above it along its row of ``L``: rows read in order), both in one pass
    over the factor: a face of thousands of atoms does not fit a cache, and the sweep is bound
    by reading ``L``."""
    for a in range(k):
        u[a] = Y[0, a]
        if has_c:
            v[a] = Y[1, a]
    for a in range(k - 1, -1, -1):
        d = L[a, a]
        ua = u[a] / d
        u[a] = ua
        row = L[a]
        if has_c:
            va = v[a] / d
            v[a] = va
            for q in range(a):
                lq = row[q]
                u[q] -= lq * ua
                v[q] -= lq * va
        else:
            for q in range(a):
                u[q] -= row[q] * ua


def _face_minimizer_kept_py(L, k, c, has_c, Y, ny, z, u):
    r""":func:`face_minimizer` with the forward vectors ``Y`` (:func:`_forward_rows`) valid for
    the first ``ny`` rows: the rest are solved, ``Y`` then holds all ``k`` (the caller's next
    ``ny``), and one backward pass over the factor gives both :math:`u = G^{-1}\mathbf 1` and
    :math:`v = -G^{-1}c` (``z`` holds ``v`` until :math:`z = v - \nu u`). False if the result is
    not finite."""
    if ny < k:
        _forward_rows(L, ny, k, c, has_c, Y)
    _backward_pair(L, k, Y, has_c, u, z)
    sum_u = 0.0
    for a in range(k):
        sum_u += u[a]
    if has_c:
        sum_v = 0.0
        for a in range(k):
            sum_v += z[a]
        nu = (sum_v - 1.0) / sum_u
        for a in range(k):
            z[a] = z[a] - nu * u[a]
    else:
        for a in range(k):
            z[a] = u[a] / sum_u
    ok = np.isfinite(sum_u) and sum_u != 0.0
    for a in range(k):
        if not np.isfinite(z[a]):
            ok = False
    return ok


def _remove_position_kept_py(L, k, r, Y):
    r""":func:`remove_position` that carries the forward vectors ``Y`` (valid for all ``k`` rows)
    to the downdated factor, in :math:`O(k)`.

    With :math:`M` the factor without row ``r`` and ``R`` the downdate's rotations,
    :math:`M y = b'` (:math:`b` without entry ``r``) for the old forward solution :math:`y`, and
    :math:`M = L' R^\top` with the last column of :math:`L'` zero, so :math:`L' (R^\top y) = b'`:
    the new forward solution is :math:`R^\top y` without its last entry -- the rotations applied
    to ``y`` as to a row of the factor. Orthogonal, so no error grows; the next solve then
    reads the factor once (the backward pass) instead of three times."""
    cs = np.ones(k)
    sn = np.zeros(k)
    _downdate(L, k, r, cs, sn)
    for c in range(r, k - 1):
        if sn[c] == 0.0 and cs[c] == 1.0:
            continue
        for q in range(2):
            a = Y[q, c]
            b = Y[q, c + 1]
            Y[q, c] = cs[c] * a + sn[c] * b
            Y[q, c + 1] = -sn[c] * a + cs[c] * b


def _prune_py(L, Gb, k0, lo, k, x, c, has_c, idx):
    r"""Drop the atoms added to a face (positions ``lo .. k-1``, weight 0) whose weight in the
    face's minimizer is not positive, all at once; the new number of atoms.

    :func:`prune_kept` from no forward vectors."""
    Y = np.zeros((2, k))
    z = np.empty(k)
    solved = np.zeros(2, dtype=np.int64)
    return _prune_kept(L, Gb, k0, lo, k, x, c, has_c, idx, Y, z, solved)


def _prune_kept_py(L, Gb, k0, lo, k, x, c, has_c, idx, Y, z, solved):
    r"""Drop the atoms added to a face (positions ``lo .. k-1``, weight 0) whose weight in the
    face's minimizer is not positive, all at once; the new number of atoms.

    ``Gb[a - k0, b]`` holds :math:`G` of the rows ``k0 .. k-1`` factored last (``b <= a``), as
    they were before :func:`extend_factor` overwrote ``L``'s rows with the factor; ``lo >= k0``
    (the atoms before ``lo`` carry weight and stay). The added atoms sit at zero
    weight, so those the minimizer wants negative would leave one at a time in the minor cycle,
    each a solve and a downdate (most of a9a's correction time at C = 2^16); here the kept rows
    are compacted and refactored once instead (at most :data:`PRUNE_PASSES` passes: a smaller
    face can turn more added atoms negative). Only their columns from ``k0`` on are refactored
    (:func:`_factor_rows_py`): those before are the same bits whichever added atoms stay, so a
    prune costs :math:`O((k - k_0)^3)`, not the :math:`O(k_0^2 (k - k_0))` of the extension.
    Returns -1 if the refactored rows are not definite.

    The solves share their work with the minor cycle that follows (:func:`minor_cycle_kept`):
    ``Y`` holds the forward vectors (:func:`_forward_rows`) of the first ``solved[0]`` rows,
    which only the rows from ``k0`` on (new or refactored) need solved again; on return
    ``solved[0]`` says how many are valid for the returned face, and ``solved[1] = 1`` says
    that ``z`` holds its minimizer (nothing was dropped: the minor cycle starts from it).
    """
    u = np.empty(k)
    newpos = np.empty(k, dtype=np.int64)
    solved[1] = 0
    for _ in range(PRUNE_PASSES):
        if k <= k0:
            return k
        ok = _face_minimizer_kept(L, k, c, has_c, Y, solved[0], z, u)
        solved[0] = k
        if not ok:
            return k
        n_keep = lo
        for a in range(lo, k):
            if z[a] > 0.0:
                n_keep += 1
        if n_keep == k:
            solved[1] = 1
            return k
        for a in range(k0):
            newpos[a] = a
        r = k0
        for a in range(k0, k):
            if a >= lo and not z[a] > 0.0:
                newpos[a] = -1
                continue
            newpos[a] = r
            for b in range(k0):
                Gb[r - k0, b] = Gb[a - k0, b]
                L[r, b] = L[a, b]  # factored, and the same bits refactored (_factor_rows)
            for b in range(k0, a + 1):
                if newpos[b] >= 0:
                    Gb[r - k0, newpos[b]] = Gb[a - k0, b]
            idx[r] = idx[a]
            x[r] = x[a]
            if has_c:
                c[r] = c[a]
            r += 1
        k = n_keep
        solved[0] = k0  # the rows from k0 on are refactored
        for a in range(k0, k):
            for b in range(k0, a + 1):
                L[a, b] = Gb[a - k0, b]
        if _factor_rows(L, k0, k, k0) < k:
            return -1
    return k


def _minor_cycle_py(L, k, x, c, has_c, idx):
    r"""Wolfe's minor cycle on the face of the factor ``L[:k, :k]`` from the weights ``x[:k]``.

    :func:`minor_cycle_kept` from no forward vectors."""
    Y = np.zeros((2, k))
    z = np.empty(k)
    solved = np.zeros(2, dtype=np.int64)
    return _minor_cycle_kept(L, k, x, c, has_c, idx, Y, z, solved)


def _minor_cycle_kept_py(L, k, x, c, has_c, idx, Y, z, solved):
    r"""Wolfe's minor cycle on the face of the factor ``L[:k, :k]`` from the weights ``x[:k]``.

    ``x`` (positive, summing to one), the linear term ``c`` and the atom indices ``idx`` are
    compacted in place as atoms leave (the factor with them). Returns the final number of
    atoms, ``x[:k]`` then holding the face's minimizer over the simplex, or :data:`FAILED`
    (``x`` then is a feasible point no worse than the start, possibly with fewer atoms).

    ``Y``, ``z`` and ``solved`` as :func:`prune_kept` leaves them: the forward vectors of the
    first ``solved[0]`` rows, and with ``solved[1] = 1`` the face's minimizer in ``z``. Each
    atom that leaves carries the forward vectors to the downdated factor
    (:func:`_remove_position_kept`, :math:`O(k)`), so the next minimizer costs one backward pass
    over the factor; a minor cycle that dropped a few dozen atoms of a 2,000-atom face (a9a at
    LIBSVM's C = 2^15) read the factor four times per atom before. On return ``solved[0]`` is
    the final face's (all its rows).
    """
    u = np.empty(k)
    ready = solved[1] == 1
    solved[1] = 0
    while k > 0:
        if not ready:
            if not _face_minimizer_kept(L, k, c, has_c, Y, solved[0], z, u):
                solved[0] = 0
                return FAILED
            solved[0] = k
        ready = False
        blocking = -1
        step = 1.0
        for a in range(k):
            d = z[a] - x[a]
            if z[a] <= 0.0 and d < 0.0:
                ratio = x[a] / -d
                if blocking < 0 or ratio < step:
                    step = ratio
                    blocking = a
        if blocking < 0:  # z > 0: the face's minimizer over the simplex
            for a in range(k):
                x[a] = z[a]
            return k
        # Toward z until x[blocking] reaches zero; that atom leaves the face.
        for a in range(k):
            x[a] = x[a] + step * (z[a] - x[a])
        x[blocking] = 0.0
        for a in range(blocking, k - 1):
            x[a] = x[a + 1]
            idx[a] = idx[a + 1]
            if has_c:
                c[a] = c[a + 1]
        _remove_position_kept(L, k, blocking, Y)
        k -= 1
        solved[0] = k
        total = 0.0
        for a in range(k):
            if x[a] < 0.0:
                x[a] = 0.0
            total += x[a]
        for a in range(k):
            x[a] /= total
    return k


def _face_growth_py(k):
    """How many violators a correction adds to a face of ``k`` atoms: a quarter of it, at least
    :data:`MIN_ADD`. (As many as the face holds cost several times the window's estimate
    on svmguide1 at moderate C, where most added atoms left again.)"""
    n_add = k // GROWTH
    return n_add if n_add > MIN_ADD else MIN_ADD


def _face_atoms_py(w, s, p, max_face):
    r"""The atoms of a correction's face: the support of ``w`` (in index order), then the atoms
    outside it whose gradient is below :math:`p = w^\top s` -- those whose entry would lower
    the objective, the most violating first (stable order) -- as many as :func:`face_growth`
    says, within ``max_face`` (:func:`face_budget`). Returns ``(idx, n_support)``; no
    atoms when the support alone exceeds ``max_face``.

    Wolfe's minor cycle starts from their zero weights: an atom whose face minimizer weight is
    negative leaves at once, the others enter. Adding many atoms at a time is what makes the
    step identify a large support in a few corrections, where Frank-Wolfe steps add one atom
    per iteration (a9a at C = 2^16: thousands of support vectors).
    """
    n = w.shape[0]
    k = 0
    for r in range(n):
        if w[r] > 0.0:
            k += 1
    if k > max_face:  # beyond what the plain steps paid for: no face
        return np.empty(0, dtype=np.int64), 0
    room = max_face - k
    n_add = _face_growth(k)
    if n_add > room:
        n_add = room
    extra = violators(w, s, p, n_add)
    idx = np.empty(k + extra.shape[0], dtype=np.int64)
    q = 0
    for r in range(n):
        if w[r] > 0.0:
            idx[q] = r
            q += 1
    for a in range(extra.shape[0]):
        idx[k + a] = extra[a]
    return idx, k


def _violators_py(w, s, p, n_add):
    r"""Up to ``n_add`` atoms outside the support of ``w`` whose gradient is below
    :math:`p = w^\top s` (their entry would lower the objective), the most violating first
    (stable order on ties)."""
    n = w.shape[0]
    n_viol = 0
    for r in range(n):
        if not w[r] > 0.0 and s[r] < p:
            n_viol += 1
    viol = np.empty(n_viol, dtype=np.int64)
    score = np.empty(n_viol)
    q = 0
    for r in range(n):
        if not w[r] > 0.0 and s[r] < p:
            viol[q] = r
            score[q] = s[r]
            q += 1
    order = np.argsort(score, kind="mergesort")
    take = n_add if n_add < n_viol else n_viol
    out = np.empty(take, dtype=np.int64)
    for a in range(take):
        out[a] = viol[order[a]]
    return out


def _face_budget_py(n, iterations, repeats):
    r"""The largest face a correction may factor after ``iterations`` plain iterations on ``n``
    atoms, the window that asks being the ``repeats + 1``-th stalled one in a row: its cost
    :math:`k^3/3` at most :math:`r` times what they cost, about :math:`10 n` each (a row read,
    the update and the selection, memory-bound: measured 10-25 ns an entry against about 1 ns
    a multiply-add in the factorization), and at most :data:`MAX_FACE` and ``n``:

    .. math:: k \le \bigl(3 r \cdot 10\, n \cdot \mathrm{iterations}\bigr)^{1/3},
       \qquad r = \min\bigl(\mathrm{FIRST\_FACE\_RATIO} \cdot
       \mathrm{FACE\_RATIO}^{\,\text{repeats}},\ \mathrm{MAX\_FACE\_RATIO}\bigr).

    This bounds a correction's overhead where the plain steps are fast (5,600 examples
    converging in a few thousand iterations factored faces of thousands of atoms, 25x the fit's
    time, with no bound); the larger ratios, only while stalls repeat, let the face grow as
    fast as an ill-conditioned problem (large C) needs."""
    k = (3.0 * _face_ratio(repeats) * ITERATION_COST * n * iterations) ** (1.0 / 3.0)
    cap = MAX_FACE if MAX_FACE < n else n
    return cap if k >= cap else int(k)


def _face_ratio_py(repeats):
    """How many times the plain iterations since the last correction its face's factor may
    cost, for the ``repeats + 1``-th stalled window in a row (:data:`FIRST_FACE_RATIO`,
    :data:`FACE_RATIO`, :data:`MAX_FACE_RATIO`)."""
    ratio = FIRST_FACE_RATIO
    for _ in range(repeats):
        ratio *= FACE_RATIO
        if ratio >= MAX_FACE_RATIO:
            return MAX_FACE_RATIO
    return ratio


def _axpy_py(out, coef, h):
    """``out += coef * h`` entry by entry (float64 ``out``; ``h`` in its own precision)."""
    for r in range(out.shape[0]):
        out[r] += coef * h[r]


def _correction_window_py(n_face, n, stalls):
    r"""Iterations of a window (see :data:`STALL`) starting on a face of ``n_face`` atoms among
    ``n``, after ``stalls`` stalled windows in a row: a correction costs about :math:`k^3/3`
    for the factor plus :math:`2kn` for the face's rows and the new gradient, a plain
    iteration about :math:`3n` (a row, the update, the selection); the window's iterations
    cost :data:`RATIO` corrections.

    From the second stall in a row on, the window ends sooner if by then
    :func:`face_budget` (at the ratio the next correction gets) affords twice the face: the
    plain steps crawl, and the cost-balanced window of a large face (a9a at large C: 2,300
    atoms, 300,000 iterations) would let them crawl for its whole length after a correction
    whose face fell short of the support."""
    k = float(n_face)
    iters = RATIO * _correction_cost(n_face, n)
    if stalls >= 2:
        twice = 2.0 * k
        paid = twice * twice * twice / (3.0 * _face_ratio(stalls) * ITERATION_COST * n)
        if paid < iters:
            iters = paid
    return MIN_WINDOW if iters < MIN_WINDOW else int(iters)


def _distance_py(gap, target):
    r"""How far a gap is from the stopping target, in units of it: :math:`g / \tau` (the gap
    itself where the target is not positive). The run stops once it is at most 1; the windows
    of :data:`STALL` measure their progress by it."""
    return gap / target if target > 0.0 else gap


def _stalled_py(smallest, reference, target):
    r"""Whether a window ended stalled (see :data:`STALL`): its smallest gap :math:`g` is above
    ``STALL`` times its reference :math:`g_0`, and the plain steps, falling at its rate
    :math:`\rho = g / g_0` a window, would not reach the stopping target :math:`\tau` within
    :data:`REACH` more windows: :math:`g \rho^{\mathrm{REACH}} > \tau`. (With
    :math:`\rho > 1/2` the second test lets go only gaps within :math:`4 \tau`.)

    :func:`stalled_scaled` of a window of the cost-balanced length (``scale = 1``)."""
    return _stalled_scaled(smallest, reference, target, 1.0)


def _stalled_scaled_py(smallest, reference, target, scale):
    r""":func:`stalled` of a window whose plain iterations cost ``scale`` times
    :data:`RATIO` corrections on its face (:func:`correction_cost`; 1 for the window
    :func:`correction_window` sizes at no stall): the plain steps, at the window's rate
    :math:`\rho`, need :math:`N = \log(g / \tau) / \log(1 / \rho)` more windows, and the
    window stalled if they cost more than :data:`REACH` corrections,
    :math:`N \cdot \mathrm{scale} > \mathrm{REACH}` (at ``scale = 1``,
    :math:`g \rho^{\mathrm{REACH}} > \tau`).

    The windows a repeated stall shortens (:func:`correction_window`: 490 plain iterations of
    a 1,556-atom face, 1/200 of its correction, on 4,000 examples of a9a at LIBSVM's
    (C, gamma) = (2^3, 2^-7)) rarely halve the gap; counted in windows, a rate of 0.7 each
    read as stalled, and the next correction factored the whole 2,415-atom support: 5-9 s of
    a 7-12 s fold, where the plain steps' four more windows cost 2,000 iterations.

    The run loops pass distances (:func:`distance`) and :math:`\tau = 1`: the gaps measured
    against the target of their own check, which a relative target moves."""
    if not smallest > STALL * reference:
        return False
    rate = smallest / reference if reference > 0.0 else 1.0
    if rate >= 1.0:
        return True
    if not smallest > target:
        return False
    windows = np.log(smallest / target) / np.log(1.0 / rate)
    return windows * scale > REACH


#: A window whose face grew by more than this factor (its positive weights at its end over
#: those at its start) did not stall, whatever its distances (:func:`filling`).
FILL = 1.05


def _filling_py(n_end, n_start):
    r"""Whether the face filled in over a window: :math:`k_1 > \mathrm{FILL} \, k_0` atoms
    with weight at its end and start. The plain steps are still finding the support; a
    correction solves the face they have found so far, short of it, and the next steps undo
    it. Early in a run (the subset's start, :mod:`torchfw.svm._start`) the value falls
    several-fold in a window, so a relative target falls with the gap and the distance
    (:func:`distance`) reads as a stall: on 1,400 examples of a generated 10-class problem
    each one-vs-rest problem's second window (50 to 130, its face 70 to 150 atoms) took a
    correction, and raw svmguide1 at C = 2^8, gamma = 2^-9 two (faces of 63 to 98 and 154 to
    188 atoms; 1,822 iterations against 892 without)."""
    return n_end > FILL * n_start


def _correction_cost_py(n_face, n):
    r"""What one correction on a face of ``n_face`` atoms among ``n`` costs, in plain
    iterations: :math:`(k^3/3 + 2kn) / 3n` (the factor, the face's rows and the new gradient,
    against a row, the update and the selection; see :func:`correction_window`)."""
    k = float(n_face)
    return (k * k * k / 3.0 + 2.0 * k * n) / (3.0 * n)


_dot4 = njit(_dot4_py, fallback=True, interpreted_form=_dot4_arrays)
_dots4 = njit(_dots4_py, fallback=True, interpreted_form=_dots4_arrays)
_pivot_cutoff = njit(_pivot_cutoff_py, fallback=True)
_next_block = njit(_next_block_py, fallback=True)
_block_product = njit(_block_product_py, fallback=True)
_factor_rows_gemm = njit(_factor_rows_gemm_py, fallback=True)
_factor_rows = njit(_factor_rows_py, fallback=True)
extend_factor = njit(_extend_factor_py, fallback=True)
_extend_factor = extend_factor
cholesky_in_place = njit(_cholesky_in_place_py, fallback=True)
remove_position = njit(_remove_position_py, fallback=True)
# The kernels call their helpers through these names: compiled ones when numba is there.
_remove_position = remove_position
_triangular_solve = njit(_triangular_solve, fallback=True)
face_minimizer = njit(_face_minimizer_py, fallback=True)
_face_minimizer = face_minimizer
_dot4x2 = njit(_dot4x2_py, fallback=True)
_forward_rows = njit(_forward_rows_py, fallback=True)
_backward_pair = njit(_backward_pair_py, fallback=True)
_face_minimizer_kept = njit(_face_minimizer_kept_py, fallback=True)
_downdate = njit(_downdate_py, fallback=True)
_rotate_rows = njit(_rotate_rows_py, fallback=True)
_remove_position_kept = njit(_remove_position_kept_py, fallback=True)
minor_cycle_kept = njit(_minor_cycle_kept_py, fallback=True)
_minor_cycle_kept = minor_cycle_kept
prune_kept = njit(_prune_kept_py, fallback=True)
_prune_kept = prune_kept
minor_cycle = njit(_minor_cycle_py, fallback=True)
prune = njit(_prune_py, fallback=True)
extend_skipping = njit(_extend_skipping_py, fallback=True)
_face_ratio = njit(_face_ratio_py, fallback=True)
correction_cost = njit(_correction_cost_py, fallback=True)
_correction_cost = correction_cost
correction_window = njit(_correction_window_py, fallback=True)
filling = njit(_filling_py, fallback=True)
stalled_scaled = njit(_stalled_scaled_py, fallback=True)
_stalled_scaled = stalled_scaled
stalled = njit(_stalled_py, fallback=True)
distance = njit(_distance_py, fallback=True)
axpy = njit(_axpy_py, fallback=True)
face_growth = njit(_face_growth_py, fallback=True)
face_budget = njit(_face_budget_py, fallback=True)
_face_growth = face_growth
face_atoms = njit(_face_atoms_py, fallback=True)
violators = njit(_violators_py, fallback=True)


def face_minimize(G, x, c=None):
    r"""Minimize :math:`\tfrac12 z^\top G z + c^\top z` over the simplex of the face, from ``x``.

    A convenience around the kernels for host arrays (the engine's storage and the tests).

    Parameters
    ----------
    G : ndarray of shape (k, k)
        The quadratic on the face (symmetric; only its lower triangle is read). Overwritten
        by its factor.
    x : ndarray of shape (k,)
        Positive weights summing to one (the current iterate on the face).
    c : ndarray of shape (k,), optional
        Linear term on the face.

    Returns
    -------
    z : ndarray of shape (k,)
        The minimizer over the face's simplex, zeros where atoms left (positions kept), or
        None when ``G`` is not numerically definite.
    """
    G = np.ascontiguousarray(G, dtype=np.float64)
    k = G.shape[0]
    x = np.array(x, dtype=np.float64)
    has_c = c is not None
    c_arr = np.array(c, dtype=np.float64) if has_c else np.zeros(1)
    if not cholesky_in_place(G, k):
        return None
    idx = np.arange(k, dtype=np.int64)
    kept = minor_cycle(G, k, x, c_arr, has_c, idx)
    if kept == FAILED:
        return None
    z = np.zeros(k)
    z[idx[:kept]] = x[:kept]
    return z
