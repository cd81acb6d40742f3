r"""The corrective step by conjugate gradients: the face's quadratic solved without a factor.

One concern: the linear algebra of the conjugate-gradient form of the corrective step, shared
by every storage (the compiled loop's :func:`torchfw.optimizers._compiled_loop._conjugate_py`
and :func:`torchfw.optimizers._correction.conjugate_face` over any storage's face space), and
the size and matvec budget the run loop gives it (:func:`conjugate_plan`).

**Why.** The dense step (:mod:`torchfw.optimizers._face`) factors the face's matrix, which costs
:math:`k^3/3` for :math:`k` atoms. Where the optimum has thousands of support vectors that cost
is what a fit spends: scaled svmguide1 at LIBSVM's :math:`C = 2^5`, :math:`\gamma = 2^{-15}`
(5-fold CV) has 2,231 support vectors among 2,471 examples, the plain steps add one atom per
iteration, and the faces the budget allows grew 154, 543, 1,086, 2,172 atoms over four
corrections, the last factor alone 1.4 s of a 2-3 s fold against LIBSVM's 0.8 s. There the
kernel is nearly constant (:math:`\gamma \lVert x - x' \rVert^2 \le 5 \cdot 10^{-4}`), so the
L2-SVM's :math:`\tilde K = Y(K + \mathbf 1 \mathbf 1^\top)Y + I/C` is the identity over
:math:`C` plus a matrix of low numerical rank: projected on the face's hull, four of its
eigenvalues exceed :math:`1.1/C` besides the direction of :math:`y`, all others equal
:math:`1/C` to five digits. Conjugate gradients solve such a system in about as many
matrix-vector products as there are eigenvalues apart from the cluster (Nocedal & Wright,
*Numerical Optimization*, Theorem 5.5): ten products of :math:`k^2` each, not :math:`k^3/3`.

**The step.** On a face :math:`F` (the support and the atoms that violate optimality most) the
problem is :math:`\min \tfrac12 z^\top G z + c^\top z` over :math:`\{z \ge 0,\ \mathbf 1^\top z
= 1\}`. A block-pivoting active-set method (Júdice & Pires, "A block principal pivoting
algorithm for large-scale strictly monotone linear complementarity problems", Comput. Oper.
Res. 21, 1994) keeps a free set :math:`A \subseteq F` and solves, by projected conjugate
gradients (Gould, Hribar & Nocedal, "On the solution of equality constrained quadratic
programming problems arising in optimization", SIAM J. Sci. Comput. 23, 2001; with the one
constraint :math:`\mathbf 1^\top z = 1` the projection subtracts the mean), the
equality-constrained problem on :math:`A`; then in one pass every free atom whose weight is not
positive leaves and every held atom whose gradient is below the multiplier :math:`\nu` (the
mean gradient on :math:`A`) enters. When nothing changes, :math:`z` is the minimizer over the
simplex of the face (KKT: :math:`z_A > 0`, :math:`g_A = \nu`, :math:`g_{F \setminus A} \ge
\nu`). Wolfe's minor cycle drops atoms one at a time, each a new solve; on the face above 200
atoms leave, which is 200 solves of ten products, so the pivoting is done in blocks: the
2,471-atom problem from the iterate at its first correction is solved in five passes and 43
products. Block pivoting may cycle, and conjugate gradients on a face of spread spectrum (large
:math:`C`, a polynomial kernel on raw features) need many products: the step is bounded by a
number of products and passes and reports failure when it reaches either, leaving the iterate
unchanged; the run loop then takes the dense step and does not try this one again in the run
(:data:`FAILED`).
"""

from __future__ import annotations

import math

import numpy as np

from ..utils.jit import njit
from . import _face

__all__ = ["FAILED", "CG_MATVECS", "CG_RTOL", "CG_PASSES", "matvec", "hull_minimize",
           "conjugate_minimize", "conjugate_plan", "conjugate_window", "wants_more",
           "face_minimize_conjugate", "ALLOWED", "DISABLED", "LAST"]

#: Return value of the step when it did not converge within its products or passes: the run
#: takes the dense step instead and no further conjugate step (distinct from -1, "no change").
FAILED = -2
#: The run's conjugate-step state (the compiled loop's ``state[17]``, carried between calls):
#: the step may be tried; it failed once, so the run keeps the dense step; the last correction
#: was a conjugate step (the windows are sized by its cost, :func:`conjugate_window`).
ALLOWED, DISABLED, LAST = 0, 1, 2
#: Matrix-vector products a conjugate step is planned for: its face is the largest whose
#: products, this many, cost what the dense step's factor may cost (:func:`conjugate_plan`).
#: The scaled svmguide1 faces above took 10 per pass and 37-45 in all; the bound on a step's
#: products is the whole budget over :math:`k^2`, at least this.
CG_MATVECS = 32
#: A pass's solve ends when the projected gradient's norm is this fraction of its norm at the
#: step's start. The faces above reached the optimum's value to ten digits and a gap of 1e-5
#: of the value (the fits stop at 0.6 of it) in 29-38 products, against 39-45 at 1e-10 (the
#: dense step's exactness, which the tests ask of :func:`face_minimize_conjugate`).
CG_RTOL = 1e-6
#: Most passes of the block pivoting (each a solve on the free set).
CG_PASSES = 16


def _matvec_py(G, k, d, out):
    r"""``out[:k] = G[:k, :k] @ d[:k]`` for a symmetric ``G`` of which only the lower triangle
    (``G[a, b]``, ``b <= a``) is read: one pass over it, each entry serving its row's sum and its
    column's (half the memory a full product reads, and the products are memory-bound: a
    2,471-atom face's 49 MB). Fixed summation order: every caller gets the same bits."""
    for a in range(k):
        out[a] = 0.0
    for a in range(k):
        row = G[a]
        da = d[a]
        l0 = 0.0
        l1 = 0.0
        l2 = 0.0
        l3 = 0.0
        a4 = a - a % 4
        for b in range(0, a4, 4):
            l0 += row[b] * d[b]
            l1 += row[b + 1] * d[b + 1]
            l2 += row[b + 2] * d[b + 2]
            l3 += row[b + 3] * d[b + 3]
            out[b] += row[b] * da
            out[b + 1] += row[b + 1] * da
            out[b + 2] += row[b + 2] * da
            out[b + 3] += row[b + 3] * da
        for b in range(a4, a):
            l0 += row[b] * d[b]
            out[b] += row[b] * da
        out[a] += ((l0 + l1) + (l2 + l3)) + row[a] * da


def _matvec_arrays(G, k, d, out):
    """:func:`_matvec` by NumPy's products, where the kernel runs interpreted (the cold start's
    fits, :mod:`torchfw.utils.cold_start`): the lower triangle read as the symmetric matrix,
    ``L d + L^T d - diag(L) d``, in NumPy's summation order."""
    lower = np.tril(G[:k, :k])
    x = d[:k]
    out[:k] = lower @ x + lower.T @ x - np.diagonal(lower) * x


def _hull_minimize_py(G, k, c, has_c, free, z, g, d, Gd, tol, max_mv):
    r"""Projected conjugate gradients for :math:`\min \tfrac12 z^\top G z + c^\top z` on the
    hull :math:`\{z : z_a = 0\ (a \notin A),\ \sum_{a \in A} z_a = 1\}` of the free set ``A``.

    ``z`` starts on that hull and ends at its minimizer, ``g`` holds :math:`G z + c` (all ``k``
    entries: the held atoms' are read by the pivoting). The residual is the gradient projected
    on :math:`\{\mathbf 1^\top d = 0\}` over ``A`` (minus its mean); the run ends when its norm
    is at most ``tol``. Returns the products used, or minus them when ``max_mv`` were not
    enough or a direction had no positive curvature (the face's matrix is not definite).
    """
    _matvec(G, k, z, g)
    if has_c:
        for a in range(k):
            g[a] += c[a]
    mv = 1
    n_free = 0
    total = 0.0
    for a in range(k):
        if free[a]:
            n_free += 1
            total += g[a]
    mean = total / n_free
    rr = 0.0
    for a in range(k):
        if free[a]:
            r = g[a] - mean
            d[a] = -r
            rr += r * r
        else:
            d[a] = 0.0
    while rr > tol * tol:
        if mv >= max_mv:
            return -mv
        _matvec(G, k, d, Gd)
        mv += 1
        curvature = 0.0
        for a in range(k):
            curvature += d[a] * Gd[a]
        if not curvature > 0.0:
            return -mv
        alpha = rr / curvature
        total = 0.0
        for a in range(k):
            z[a] += alpha * d[a]
            g[a] += alpha * Gd[a]
            if free[a]:
                total += g[a]
        mean = total / n_free
        rr_new = 0.0
        for a in range(k):
            if free[a]:
                r = g[a] - mean
                rr_new += r * r
        beta = rr_new / rr
        for a in range(k):
            if free[a]:
                d[a] = -(g[a] - mean) + beta * d[a]
        rr = rr_new
    return mv


def _conjugate_minimize_py(G, k, x, c, has_c, max_mv, rtol):
    r"""The minimizer of :math:`\tfrac12 z^\top G z + c^\top z` over the simplex of the face,
    from the feasible ``x`` (weights :math:`\ge 0` summing to one), by block pivoting over
    :func:`hull_minimize` solves (module docstring).

    The free set starts as the support of ``x`` and the atoms at zero whose gradient is below
    the support's mean gradient. Returns the matrix-vector products used, ``x[:k]`` then
    holding the minimizer (zeros where atoms left), or :data:`FAILED` when ``max_mv`` products
    or :data:`CG_PASSES` passes were not enough, ``x`` then unchanged.
    """
    g = np.empty(k)
    d = np.empty(k)
    Gd = np.empty(k)
    z = np.empty(k)
    free = np.zeros(k, dtype=np.bool_)
    _matvec(G, k, x, g)
    if has_c:
        for a in range(k):
            g[a] += c[a]
    mv = 1
    n_free = 0
    total = 0.0
    for a in range(k):
        z[a] = x[a]
        if x[a] > 0.0:
            free[a] = True
            n_free += 1
            total += g[a]
    if n_free == 0:
        return FAILED
    mean = total / n_free
    for a in range(k):
        if not free[a] and g[a] < mean:
            free[a] = True
            n_free += 1
    total = 0.0
    for a in range(k):
        if free[a]:
            total += g[a]
    mean = total / n_free
    rr = 0.0
    for a in range(k):
        if free[a]:
            rr += (g[a] - mean) * (g[a] - mean)
    tol = rtol * math.sqrt(rr)
    for _ in range(CG_PASSES):
        used = _hull_minimize(G, k, c, has_c, free, z, g, d, Gd, tol, max_mv - mv)
        if used < 0:
            return FAILED
        mv += used
        total = 0.0
        for a in range(k):
            if free[a]:
                total += g[a]
        nu = total / n_free
        changed = False
        for a in range(k):
            if free[a] and not z[a] > 0.0:
                free[a] = False
                n_free -= 1
                changed = True
            elif not free[a] and g[a] < nu - tol:
                free[a] = True
                n_free += 1
                changed = True
        if not changed:
            total = 0.0
            for a in range(k):
                if free[a]:
                    total += z[a]
            for a in range(k):
                x[a] = z[a] / total if free[a] else 0.0
            return mv
        if n_free == 0:
            return FAILED
        # The next pass starts on the new free set's hull: the weights clipped at zero,
        # shifted alike to sum to one.
        total = 0.0
        for a in range(k):
            if free[a]:
                z[a] = z[a] if z[a] > 0.0 else 0.0
                total += z[a]
            else:
                z[a] = 0.0
        shift = (1.0 - total) / n_free
        for a in range(k):
            if free[a]:
                z[a] += shift
    return FAILED


def _conjugate_plan_py(n, iterations, repeats, k_dense):
    r"""The face size and the product budget of a conjugate step, or ``(0, 0)`` for none.

    The step may cost what the dense step may (:func:`torchfw.optimizers._face.face_budget`:
    :math:`B = r \cdot 10\, n \cdot \text{iterations}`, the factor of its ``k_dense`` atoms,
    :math:`k_d^3/3 \le B`): its face is the largest whose :data:`CG_MATVECS` products of
    :math:`k^2` fit, :math:`k = \sqrt{B / \mathrm{CG\_MATVECS}}` (at most :data:`~torchfw.
    optimizers._face.MAX_FACE` and ``n``), its products at most :math:`B / k^2`. Only where
    that face is larger than the dense one (from :math:`k_d \approx 96` on): smaller faces keep
    the dense step, which is exact and cheap there.
    """
    budget = _face_ratio(repeats) * _ITERATION_COST * n * iterations
    k = math.sqrt(budget / CG_MATVECS)
    cap = _MAX_FACE if _MAX_FACE < n else n
    size = cap if k >= cap else int(k)
    if size <= k_dense or size < 2:
        return 0, 0
    products = int(budget / (float(size) * float(size)))
    return size, (products if products > CG_MATVECS else CG_MATVECS)


def _conjugate_window_py(n_face, n, stalls):
    r""":func:`torchfw.optimizers._face.correction_window` after a conjugate step: the window's
    plain iterations cost :data:`~torchfw.optimizers._face.RATIO` times the next correction,
    which is a conjugate step, :math:`\mathrm{CG\_MATVECS}\, k^2 + 2kn`, not a factor (at
    3,000 iterations a window, the dense step's, the 1,291-atom face of scaled svmguide1 at
    :math:`C = 2^5`, :math:`\gamma = 2^{-15}` crawled 2,800 iterations for a step of 0.1 s).
    From the second stall in a row, the window ends sooner if by then :func:`conjugate_plan`
    affords twice the face."""
    k = float(n_face)
    iters = _RATIO * (CG_MATVECS * k * k + 2.0 * k * n) / (3.0 * n)
    if stalls >= 2:
        twice = 2.0 * k
        paid = CG_MATVECS * twice * twice / (_face_ratio(stalls) * _ITERATION_COST * n)
        if paid < iters:
            iters = paid
    return _MIN_WINDOW if iters < _MIN_WINDOW else int(iters)


def _wants_more_py(w, s, p, k_dense):
    """Whether the support of ``w`` and the atoms outside it with score below ``p`` (the
    violators a correction would add) number more than ``k_dense``: the dense step's face would
    leave some out."""
    count = 0
    for r in range(w.shape[0]):
        if w[r] > 0.0 or s[r] < p:
            count += 1
    return count > k_dense


_face_ratio = _face._face_ratio
_ITERATION_COST = _face.ITERATION_COST
_MAX_FACE = _face.MAX_FACE
_RATIO = _face.RATIO
_MIN_WINDOW = _face.MIN_WINDOW
_matvec = njit(_matvec_py, fallback=True, interpreted_form=_matvec_arrays)
matvec = _matvec
_hull_minimize = njit(_hull_minimize_py, fallback=True)
hull_minimize = _hull_minimize
conjugate_minimize = njit(_conjugate_minimize_py, fallback=True)
conjugate_plan = njit(_conjugate_plan_py, fallback=True)
wants_more = njit(_wants_more_py, fallback=True)
conjugate_window = njit(_conjugate_window_py, fallback=True)


def face_minimize_conjugate(G, x, c=None, max_matvecs: int = 10_000, rtol: float = 1e-12):
    r"""Minimize :math:`\tfrac12 z^\top G z + c^\top z` over the simplex of the face, from
    ``x``, by :func:`conjugate_minimize` (a convenience for host arrays and the tests).

    Parameters
    ----------
    G : ndarray of shape (k, k)
        The quadratic on the face (symmetric, positive definite; only its lower triangle is
        read).
    x : ndarray of shape (k,)
        Weights :math:`\ge 0` summing to one.
    c : ndarray of shape (k,), optional
        Linear term.
    max_matvecs : int
        Most matrix-vector products.
    rtol : float
        Each solve ends at this fraction of the first projected gradient's norm.

    Returns
    -------
    z : ndarray of shape (k,) or None
        The minimizer, or None when the products or passes were not enough.
    products : int
        The products used (:data:`FAILED` when ``z`` is None).
    """
    G = np.ascontiguousarray(G, dtype=np.float64)
    k = G.shape[0]
    x = np.array(x, dtype=np.float64)
    has_c = c is not None
    c_arr = np.array(c, dtype=np.float64) if has_c else np.zeros(1)
    used = conjugate_minimize(G, k, x, c_arr, has_c, int(max_matvecs), float(rtol))
    return (None, FAILED) if used < 0 else (x, int(used))
