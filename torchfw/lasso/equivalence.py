r"""The Lasso <-> SVM equivalence (Jaggi 2013/2014; seed 003), in both directions.

Notation (Jaggi's): the columns :math:`A_i \in \mathbb R^d` of a matrix :math:`A` (``d x n``) are
"points". In scikit-learn's orientation ``A`` is the Lasso design ``(n_samples, n_features)``
and its columns are the features.

**Lasso -> SVM** (:func:`lasso_to_svm`, spec §1.4(b), with seed 003's sign typos fixed). The
constrained Lasso

.. math:: \min_{\|w\|_1 \le t} \tfrac12 \|A w - b\|^2

is a problem over the cross-polytope :math:`t\,\mathrm{conv}\{\pm e_i\}`, which has **2n**
vertices. Writing :math:`w = t(I_n \mid -I_n)\lambda` with :math:`\lambda` in the unit simplex
of :math:`\mathbb R^{2n}`, and using :math:`\mathbf 1^\top\lambda = 1` to absorb ``b``,

.. math::
    A w - b = \tilde A \lambda, \qquad
    \tilde A = t\,(A \mid -A) - b\,\mathbf 1^\top \in \mathbb R^{d \times 2n},

so the Lasso is the (hard-margin, L2) SVM dual :math:`\min_{\lambda \in \Delta_{2n}}
\tfrac12 \|\tilde A\lambda\|^2` over the 2n signed, shifted points :math:`\pm tA_i - b`. Its
Gram matrix :math:`\tilde K = \tilde A^\top\tilde A` follows from one column of
:math:`G = A^\top A`, :math:`c = A^\top b` and :math:`\beta = b^\top b`:

.. math::
    \tilde K_{(\sigma,i),(\sigma',j)} = \sigma\sigma' t^2 G_{ij} - \sigma t c_i
        - \sigma' t c_j + \beta, \qquad \sigma, \sigma' \in \{+1, -1\},

which :class:`SignedAtomsOperator` evaluates column by column (never as a dense ``2n x 2n``
matrix). Maps: :math:`w = t(\lambda_{+} - \lambda_{-})` back, and
:math:`\lambda_\pm = \max(\pm w, 0)/t` forward, the mass :math:`1 - \|w\|_1/t` left over split
evenly between :math:`+e_0` and :math:`-e_0` (they cancel). Because
:math:`\tilde K\lambda = [\,t A^\top r;\ -t A^\top r\,] - (b^\top r)\mathbf 1` with
:math:`r = Aw - b`, the simplex gradient is the L1-ball atom scores shifted by a constant: the
two Frank-Wolfe runs pick the same atoms, take the same steps and report the same gaps.

**SVM -> Lasso** (:func:`svm_to_lasso`, spec §1.4(c)). Given the SVM dual
:math:`\min_{x \in \Delta_n} \|A x\|^2`, a *weakly separating* vector ``v``
(:math:`A_i^\top v > 0` for all ``i``), its margin :math:`\sigma = \min_i A_i^\top v/\|v\|` and
any :math:`D > \max_i \|A_i\|`, set

.. math::
    \tilde b = -\frac{D^2}{\sigma} \frac{v}{\|v\|}, \qquad \tilde A = A + \tilde b\,\mathbf 1^\top .

On the simplex :math:`\tilde A x - \tilde b = A x`, and every minimizer of the Lasso
:math:`\min_{\|x\|_1 \le 1} \|\tilde A x - \tilde b\|^2` lies on the simplex: at the SVM
solution :math:`z = Ax^\star` the L1-ball optimality conditions read :math:`A_j^\top z \ge
\|z\|^2` for the atoms :math:`+e_j` (the SVM's own optimality conditions) and
:math:`2\kappa\,\hat v^\top z \ge \|z\|^2 + A_j^\top z` for the atoms :math:`-e_j`, with
:math:`\kappa = D^2/\sigma`; since :math:`\hat v^\top z \ge \sigma` and
:math:`\|z\|, \|A_j\| < D`, the second holds strictly. So the two problems have the same
solutions and the map back is the identity on the simplex.

*Normalization chosen here* (seed 003 leaves ``w`` and ``sigma`` undefined): ``v`` is used only
through its direction :math:`\hat v = v/\|v\|`, :math:`\sigma` is the geometric margin
:math:`\min_i A_i^\top \hat v`, and ``D = 1.01 max_i ||A_i||`` by default.

References
----------
M. Jaggi, "An Equivalence between the Lasso and Support Vector Machines", in *Regularization,
Optimization, Kernels, and Support Vector Machines*, 2014 (arXiv:1303.1152).
M. Jaggi, "Revisiting Frank-Wolfe: projection-free sparse convex optimization", ICML 2013.
Seeds 002/003 of this project (spec ``seed002_003_partan_variants_lasso.md`` §1.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..objectives import ColumnOperator, Quadratic
from ..sets.oracles import L1Ball, Simplex
from ..utils.column_cache import ColumnCache
from ..utils.data import as_matrix
from ..utils.jit import njit as _njit  # None without numba
from ..utils.validation import check_finite, check_nonnegative, check_positive
from .gram import GramOperator

__all__ = ["SignedAtomsOperator", "LassoSVMProblem", "SVMLassoProblem", "lasso_to_svm",
           "svm_to_lasso"]



def _assemble_py(out, G, a, t, c, has_c, beta, ci, origin, offset, has_offset, off_k):
    """Column of the signed-atom Gram matrix from Gram column ``G`` in one pass.

    ``a = sigma t^2``; entries are ``a G_r - t c_r + beta - sigma t c_i`` (upper half) and
    ``-a G_r + t c_r + beta - sigma t c_i`` (lower half), plus ``offset_r + offset_k``.
    """
    p = G.shape[0]
    if has_c:
        shift = beta - (a / t) * ci
        for r in range(p):
            g = a * G[r]
            tc = t * c[r]
            out[r] = g - tc + shift
            out[p + r] = -g + tc + shift
        if origin:
            out[2 * p] = shift
    else:
        for r in range(p):
            g = a * G[r]
            out[r] = g
            out[p + r] = -g
        if origin:
            out[2 * p] = 0.0
    if has_offset:
        for r in range(out.shape[0]):
            out[r] += offset[r] + off_k


_assemble_kernel = _njit(_assemble_py)


class SignedAtomsOperator(ColumnOperator):
    r"""Gram matrix of the signed, shifted atoms :math:`\pm t A_i - b` (and optionally ``-b``).

    With ``N = 2n`` atoms (``+1`` for the origin atom when ``origin=True``), atom
    ``(sigma, i)`` (index ``i`` for ``sigma = +1``, ``n + i`` for ``sigma = -1``) is the point
    :math:`\sigma t A_i - b` and the origin atom (index ``2n``) is :math:`-b`. The operator is
    :math:`\tilde K = \tilde A^\top \tilde A` with entries

    .. math::
        \tilde K_{kl} = \sigma_k\sigma_l t^2 G_{i_k i_l} - \sigma_k t c_{i_k}
        - \sigma_l t c_{i_l} + \beta ,

    where :math:`\sigma = 0` for the origin atom, :math:`G = A^\top A`, :math:`c = A^\top b` and
    :math:`\beta = b^\top b`. With ``c=None`` (``b = 0``) it is the plain signed Gram matrix
    :math:`t^2 [G, -G; -G, G]` of the L1 ball's vertices. One column costs one column of
    ``G`` plus O(n) work.

    Parameters
    ----------
    gram : ColumnOperator
        :math:`G` (``n x n``), e.g. a :class:`~torchfw.lasso.gram.GramOperator`.
    radius : float
        ``t > 0``.
    c : Tensor, optional
        :math:`A^\top b`, shape ``(n,)``.
    beta : float, default 0
        :math:`b^\top b`.
    origin : bool, default False
        Append the atom ``-b`` (the centre of the ball, used by the penalized Lasso).
    offset : Tensor, optional
        A vector :math:`\ell` of shape ``(N,)``: the operator becomes
        :math:`\tilde K + \ell\mathbf 1^\top + \mathbf 1\ell^\top`. On the simplex
        :math:`\tfrac12\lambda^\top(\tilde K + \ell\mathbf 1^\top + \mathbf 1\ell^\top)\lambda
        = \tfrac12\lambda^\top\tilde K\lambda + \ell^\top\lambda`: a linear term absorbed
        into the matrix, the way Jaggi absorbs ``b``, so that solvers see a pure SVM dual (the
        gradient moves by the constant :math:`\ell^\top\lambda`, which changes no choice of atom,
        no step and no gap; along directions in the simplex the curvature is that of
        :math:`\tilde K`).
    cache_size : float, default 32
        Budget in MB for assembled columns (CPU), on top of the Gram operator's own cache.
        Returned columns are shared with the cache: do not modify them.
    """

    def __init__(self, gram: ColumnOperator, radius: float, c: Tensor | None = None,
                 beta: float = 0.0, *, origin: bool = False, offset: Tensor | None = None,
                 cache_size: float = 32.0):
        self.gram = gram
        self.radius = check_positive("radius", radius)
        p = gram.shape[0]
        self.p = p
        self.origin = bool(origin)
        N = 2 * p + (1 if self.origin else 0)
        self.shape = (N, N)
        # Always float64: the shifts (beta - sigma t c_i) cancel against each other in every
        # curvature the solver forms, which float32 columns would drown in rounding.
        self.dtype = torch.float64
        self.device = gram.device
        if c is not None:
            if c.shape != (p,):
                raise ValueError(f"c must have shape ({p},), got {tuple(c.shape)}")
            c = c.to(device=self.device, dtype=self.dtype)
        self.c = c
        self.beta = float(beta)
        t = self.radius
        d = gram.diagonal().to(self.dtype) * (t * t)
        if c is None:
            parts = [d, d]
        else:
            parts = [d - 2 * t * c + self.beta, d + 2 * t * c + self.beta]
        if self.origin:
            parts.append(torch.full((1,), self.beta, dtype=self.dtype, device=self.device))
        self._diag = torch.cat(parts)
        if offset is not None:
            if offset.shape != (N,):
                raise ValueError(f"offset must have shape ({N},), got {tuple(offset.shape)}")
            offset = offset.to(device=self.device, dtype=self.dtype).contiguous()
            self._diag = self._diag + 2 * offset
        self.offset = offset
        self._diag = self._diag.contiguous()
        # Host copies for the compiled column assembly (CPU only).
        self._fused = self.device.type == "cpu" and _assemble_kernel is not None
        self._empty = np.empty(0)
        self._c_np = self.c.numpy() if self.c is not None and self.device.type == "cpu" \
            else None
        self._offset_np = offset.numpy() if offset is not None and self._fused else None
        self._origin_col: Tensor | None = None
        slots = int(check_nonnegative("cache_size", cache_size) * 2**20 // (8 * N))
        self._assembled = ColumnCache(slots, N, n_keys=N, dtype=torch.float64,
                                      device="cpu") if self._fused else None

    def diagonal(self) -> Tensor:
        return self._diag

    def _assemble(self, G: Tensor, sigma: Tensor | float, ci: Tensor | float) -> Tensor:
        """Columns from Gram columns ``G`` (``(p,)`` or ``(p, k)``) and their signs."""
        t = self.radius
        up = (sigma * t * t) * G
        if self.c is None:
            parts = [up, -up]
            tail = torch.zeros_like(up[:1])
        else:
            c = self.c if G.dim() == 1 else self.c.unsqueeze(1)
            shift = self.beta - sigma * t * ci
            parts = [up - t * c + shift, -up + t * c + shift]
            tail = shift * torch.ones_like(up[:1])
        if self.origin:
            parts.append(tail)
        return torch.cat(parts)

    def column(self, k) -> Tensor:
        if isinstance(k, Tensor):
            if self.device.type == "cpu" and k.numel() == 1:
                k = int(k)
            else:
                return self.columns(k.reshape(1))[:, 0]
        k = int(k)
        p = self.p
        if k == 2 * p and self.origin:
            # The centre is the away atom of most pairwise steps: compute it once, keep it.
            if self._origin_col is None:
                col = self._origin_column()
                if self.offset is not None:
                    col += self.offset
                    col += float(self.offset[k])
                self._origin_col = col
            return self._origin_col
        sigma = 1.0 if k < p else -1.0
        i = k if k < p else k - p
        if self._fused:
            return self._fused_column(k, i, sigma)
        ci = float(self.c[i]) if self.c is not None else 0.0
        col = self._assemble(self.gram.column(i).to(self.dtype), sigma, ci)
        if self.offset is not None:
            col += self.offset
            col += float(self.offset[k])
        return col

    def _fused_column(self, k: int, i: int, sigma: float) -> Tensor:
        """Column ``k`` in one compiled pass over ``N`` (CPU; the vector ops cost 10x more).

        Assembled columns are cached (:mod:`torchfw.utils.column_cache`): pairwise and away steps
        ask for the same few active atoms again and again.
        """
        cache = self._assembled
        assert cache is not None  # built exactly for the fused path
        row = cache.lookup(k)
        if row is not None:
            return cache.buffer[row]
        G = self.gram.column(i)
        if G.dtype != torch.float64:
            G = G.to(torch.float64)
        row, _ = cache.insert(k)
        col = cache.buffer[row]
        out = col.numpy()
        # On the fused (CPU) path the host copies exist exactly when c and the offset do.
        c_np, offset_np = self._c_np, self._offset_np
        _assemble_kernel(out, G.numpy(), sigma * self.radius * self.radius, self.radius,
                         c_np if c_np is not None else self._empty, c_np is not None, self.beta,
                         float(c_np[i]) if c_np is not None else 0.0, self.origin,
                         offset_np if offset_np is not None else self._empty,
                         offset_np is not None,
                         float(offset_np[k]) if offset_np is not None else 0.0)
        return col

    def _origin_column(self) -> Tensor:
        t = self.radius
        if self.c is None:
            return torch.zeros(self.shape[0], dtype=self.dtype, device=self.device)
        return torch.cat([-t * self.c + self.beta, t * self.c + self.beta,
                          torch.full((1,), self.beta, dtype=self.dtype, device=self.device)])

    def columns(self, index: Tensor) -> Tensor:
        """Columns ``index`` as an ``(N, k)`` tensor (no host reads)."""
        index = index.reshape(-1)
        p = self.p
        negative = index >= p
        is_origin = index >= 2 * p
        feat = torch.where(negative, index - p, index).clamp_max(p - 1)
        sigma = torch.where(is_origin, 0.0, torch.where(negative, -1.0, 1.0)).to(self.dtype)
        G = self.gram.columns(feat).to(self.dtype)
        ci = self.c.index_select(0, feat).unsqueeze(0) if self.c is not None else 0.0
        # sigma = 0 for the origin atom makes its column -t c + beta, t c + beta, beta.
        cols = self._assemble(G, sigma.unsqueeze(0), ci)
        if self.offset is not None:
            cols = cols + self.offset.unsqueeze(1) + self.offset.index_select(0, index)
        return cols

    def to_point(self, weights: Tensor) -> Tensor:
        r""":math:`w = t(\lambda_+ - \lambda_-)` (the origin's weight contributes nothing)."""
        p = self.p
        return self.radius * (weights[..., :p] - weights[..., p:2 * p])

    def matvec(self, v: Tensor, block: int = 256) -> Tensor:
        r""":math:`\tilde K v = \tilde A^\top (\tilde A v)` with one product by ``G``."""
        t = self.radius
        w = self.to_point(v).to(self.dtype)
        Gw = self.gram.matvec(w).to(self.dtype)
        if self.c is None:
            parts = [t * Gw, -t * Gw]
            tail = torch.zeros(1, dtype=self.dtype, device=self.device)
        else:
            mass = v.sum().to(self.dtype)
            atr = Gw - mass * self.c               # A^T r, r = A w - b 1'v
            btr = (self.c * w).sum() - mass * self.beta  # b^T r
            parts = [t * atr - btr, -t * atr - btr]
            tail = (-btr).reshape(1)
        if self.origin:
            parts.append(tail)
        out = torch.cat(parts)
        if self.offset is not None:
            vv = v.to(self.dtype)
            out = out + self.offset * vv.sum() + (self.offset * vv).sum()
        return out.to(v.dtype)


@dataclass
class LassoSVMProblem:
    r"""A constrained Lasso written as an SVM dual over the 2n signed, shifted atoms.

    Minimize ``objective`` over ``lmo`` (the unit simplex of dimension ``2n``); the minimum is
    :math:`\min_{\|w\|_1 \le t} \tfrac12\|Aw - b\|^2` and :meth:`to_lasso` maps the solution
    back. See :func:`lasso_to_svm`.

    Attributes
    ----------
    operator : SignedAtomsOperator
        :math:`\tilde K = \tilde A^\top \tilde A`, lazy.
    objective : Quadratic
        :math:`\tfrac12 \lambda^\top \tilde K \lambda`.
    lmo : Simplex
        The unit simplex.
    radius : float
        ``t``.
    gram : ColumnOperator
        :math:`G = A^\top A`.
    b : Tensor
    """

    operator: SignedAtomsOperator
    objective: Quadratic
    lmo: Simplex
    radius: float
    gram: ColumnOperator
    b: Tensor

    @property
    def n_features(self) -> int:
        return self.operator.p

    def to_lasso(self, weights: Tensor) -> Tensor:
        r"""Lasso coefficients :math:`w = t(\lambda_+ - \lambda_-)` of simplex weights."""
        return self.operator.to_point(weights)

    def to_svm(self, w: Tensor) -> Tensor:
        r"""Simplex weights of a point ``w`` with :math:`\|w\|_1 \le t` (canonical choice).

        :math:`\lambda_\pm = \max(\pm w, 0)/t`; the slack :math:`1 - \|w\|_1/t` goes half to
        :math:`+e_0` and half to :math:`-e_0`, whose contributions cancel.
        """
        check_l1_feasible(w, self.radius)
        return L1Ball(self.radius).to_weights(w.to(self.operator.dtype))

    def points(self, index: Tensor | None = None) -> Tensor:
        r"""The atoms :math:`\tilde A` as dense columns (``d x 2n``; for small problems/tests)."""
        A = self._dense_A()
        t = self.radius
        At = torch.cat([t * A, -t * A], dim=1) - self.b.unsqueeze(1)
        return At if index is None else At.index_select(1, index)

    def _dense_A(self) -> Tensor:
        gram = self.gram
        if not isinstance(gram, GramOperator):
            raise TypeError("points() needs the problem's design (a GramOperator)")
        # G = scale * A_c^T A_c: the points are sqrt(scale) * A_c.
        A = gram.X.to_dense() if gram.sparse else gram.X
        if gram.sparse and gram.center:
            A = A - gram.means.unsqueeze(0)
        return A * math.sqrt(gram.scale)


def check_l1_feasible(w: Tensor, radius: float) -> None:
    """Raise unless ``||w||_1 <= radius`` (up to rounding)."""
    norm = float(w.abs().sum())
    if norm > radius * (1 + 1e-9) + 1e-12:
        raise ValueError(f"||w||_1 = {norm:.6g} exceeds the radius {radius:.6g}")


def _as_vector(b, n: int, name: str, device, dtype) -> Tensor:
    if isinstance(b, Tensor):
        v = b.detach()
    else:
        try:
            v = torch.as_tensor(b)
        except Exception as exc:  # noqa: BLE001 - report any conversion failure clearly
            raise TypeError(f"{name} could not be converted to a tensor: {exc}") from None
    if v.dim() == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.dim() != 1 or v.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), got {tuple(v.shape)}")
    v = v.to(device=device, dtype=dtype)
    check_finite(name, v)
    return v


def lasso_to_svm(A, b, t: float, *, cache_size: float = 256.0,
                 dtype: torch.dtype = torch.float64, origin: bool = False) -> LassoSVMProblem:
    r"""Write the constrained Lasso :math:`\min_{\|w\|_1\le t} \tfrac12\|Aw-b\|^2` as an SVM dual.

    Parameters
    ----------
    A : array-like, sparse matrix or Tensor
        ``(d, n)``: ``d`` samples, ``n`` features (columns are Jaggi's points).
    b : array-like or Tensor
        ``(d,)``.
    t : float
        Radius of the L1 ball, ``t > 0``.
    cache_size : float, default 256
        Budget of the Gram column cache in MB.
    dtype : torch.dtype, default float64
    origin : bool, default False
        Also add the atom :math:`-b` (the ball's centre) as atom ``2n``; used by the penalized
        Lasso's epigraph form (:class:`torchfw.Lasso`).

    Returns
    -------
    LassoSVMProblem
        ``problem.objective`` over ``problem.lmo`` is the SVM dual; ``problem.to_lasso`` and
        ``problem.to_svm`` map between the two.

    Examples
    --------
    >>> import torch, torchfw
    >>> from torchfw.lasso.equivalence import lasso_to_svm
    >>> A = torch.randn(20, 5, dtype=torch.float64); b = torch.randn(20, dtype=torch.float64)
    >>> prob = lasso_to_svm(A, b, t=1.0)
    >>> res = torchfw.FrankWolfe(prob.lmo, tol=1e-9, max_iter=10**5).minimize(prob.objective)
    >>> w = prob.to_lasso(res.x)
    >>> bool(w.abs().sum() <= 1 + 1e-12)
    True
    """
    A = as_matrix(A, name="A", dtype=dtype)
    d, _ = A.shape
    t = check_positive("t", t)
    b = _as_vector(b, d, "b", A.device, dtype)
    gram = GramOperator(A, dtype=dtype, cache_size=cache_size, scale=1.0)
    # G = A^T A, c = A^T b, beta = b^T b.
    c = gram.rmatvec(b)
    op = SignedAtomsOperator(gram, t, c, float((b * b).sum()), origin=origin)
    return LassoSVMProblem(operator=op, objective=Quadratic(op), lmo=Simplex(), radius=t,
                           gram=gram, b=b)


@dataclass
class SVMLassoProblem:
    r"""An SVM dual :math:`\min_{x\in\Delta}\|Ax\|^2` written as a Lasso over the unit L1 ball.

    Solve :math:`\min_{\|x\|_1 \le 1} \|X x - y\|^2` (any scaling of the objective), e.g. with
    ``torchfw.Lasso(radius=1.0, fit_intercept=False)``; the solution lies on the simplex and is
    the SVM solution. See :func:`svm_to_lasso`.

    Attributes
    ----------
    X : Tensor
        :math:`\tilde A = A + \tilde b \mathbf 1^\top`, ``(d, n)`` dense.
    y : Tensor
        :math:`\tilde b = -(D^2/\sigma)\,\hat v`.
    radius : float
        1.0.
    direction : Tensor
        :math:`\hat v`, the unit weakly separating direction.
    margin : float
        :math:`\sigma = \min_i A_i^\top \hat v > 0`.
    D : float
        The bound :math:`D > \max_i \|A_i\|`.
    """

    X: Tensor
    y: Tensor
    radius: float
    direction: Tensor
    margin: float
    D: float

    def to_lasso(self, alpha: Tensor) -> Tensor:
        """Lasso point of SVM weights: the identity (the simplex lies in the unit L1 ball)."""
        return alpha.clone()

    def to_svm(self, x: Tensor) -> Tensor:
        """SVM weights of a Lasso point: the identity on the simplex (where every Lasso solution
        lies), the Euclidean projection onto the simplex elsewhere (e.g. a non-converged
        iterate)."""
        x = x.to(self.X.dtype)
        on_simplex = bool(Simplex().contains(x, atol=1e-12))
        return x.clone() if on_simplex else Simplex().project(x)


def svm_to_lasso(A, v=None, D: float | None = None) -> SVMLassoProblem:
    r"""Write the SVM dual :math:`\min_{x\in\Delta_n} \|Ax\|^2` as a Lasso over the unit L1 ball.

    Parameters
    ----------
    A : array-like or Tensor
        ``(d, n)``: the SVM's ``n`` points as columns (for the L2-SVM of seed 003 these are
        :math:`(y_i x_i;\ e_i/\sqrt C)`).
    v : array-like or Tensor, optional
        A weakly separating vector, :math:`A_i^\top v > 0` for every ``i``. Default: the mean of
        the points, which is tried and rejected with an error when it does not separate.
    D : float, optional
        Any bound :math:`D > \max_i \|A_i\|`; default ``1.01 max_i ||A_i||``.

    Returns
    -------
    SVMLassoProblem

    Raises
    ------
    ValueError
        If ``v`` is not weakly separating (then no such reduction exists with it) or ``D`` is
        too small.
    """
    A = as_matrix(A, name="A", dtype=torch.float64, allow_sparse=False)
    d, n = A.shape
    if v is None:
        v = A.mean(dim=1)
    v = _as_vector(v, d, "v", A.device, A.dtype)
    norm_v = float(torch.linalg.vector_norm(v))
    if norm_v == 0:
        raise ValueError("the separating vector v is zero")
    direction = v / norm_v
    margins = A.T @ direction
    sigma = float(margins.min())
    if not sigma > 0:
        raise ValueError(
            f"v is not weakly separating: min_i A_i'v/||v|| = {sigma:.3g} <= 0. Pass a vector "
            f"with A_i'v > 0 for every point (for the soft-margin L2-SVM with points "
            f"(y_i x_i; e_i/sqrt(C)), v = (0; 1) works)")
    max_norm = float(torch.linalg.vector_norm(A, dim=0).max())
    if D is None:
        D = 1.01 * max_norm if max_norm > 0 else 1.0
    D = check_positive("D", D)
    if not D > max_norm:
        raise ValueError(f"D must exceed max_i ||A_i|| = {max_norm:.6g}, got {D:.6g}")
    b = -(D * D / sigma) * direction
    return SVMLassoProblem(X=A + b.unsqueeze(1), y=b, radius=1.0, direction=direction,
                           margin=sigma, D=D)
