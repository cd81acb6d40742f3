r"""Objectives: plain callables (autograd gradients) and quadratics with incremental updates.

Any callable ``f(x) -> scalar tensor`` is an objective; :class:`FunctionObjective` wraps it and
gets the gradient from autograd (or from a user-supplied ``grad``).

:class:`Quadratic` is :math:`f(x) = \tfrac12 x^\top Q x + c^\top x` where ``Q`` is a dense tensor
*or any operator that yields columns* (:class:`ColumnOperator`). Over an atomic set (simplex,
L1 ball) the solvers keep :math:`Qx` up to date incrementally: a step toward atom ``i`` costs one
column of ``Q`` and O(n) work, the exact step size and the new value come from cached scalars.
This is the whole mechanism behind lazy kernel matrices: the optimizer never knows a kernel
exists.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .utils.validation import check_finite

__all__ = ["Objective", "FunctionObjective", "Quadratic", "ColumnOperator", "DenseOperator",
           "as_objective"]


class Objective:
    """Base class: a differentiable function of one tensor.

    Subclasses implement :meth:`value` and may override :meth:`value_and_grad`.
    """

    #: Whether :meth:`curvature` gives ``d' (Hessian) d`` exactly (quadratic objectives).
    has_curvature = False

    def value(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def curvature(self, d: Tensor) -> Tensor:  # pragma: no cover - abstract
        """``d' (Hessian) d``; only objectives with :attr:`has_curvature` implement it."""
        raise NotImplementedError

    def value_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        with torch.enable_grad():
            xr = x.detach().requires_grad_(True)
            f = self.value(xr)
            _check_scalar(f, x)
            (g,) = torch.autograd.grad(f, xr)
        return f.detach(), g

    def __call__(self, x: Tensor) -> Tensor:
        return self.value(x)


def _check_scalar(f, x: Tensor | None = None) -> None:
    if not isinstance(f, Tensor):
        raise TypeError(f"the objective must return a scalar tensor, got {type(f).__name__}")
    if f.numel() != 1:
        raise ValueError(
            f"the objective must return a scalar, got a tensor of shape {tuple(f.shape)}"
        )
    if x is None:
        return
    if f.device != x.device:
        raise ValueError(f"the objective returned a value on device {f.device} for x on "
                         f"{x.device}; keep the objective's tensors on x's device")
    if f.is_floating_point() and x.is_floating_point() and \
            torch.finfo(f.dtype).bits < torch.finfo(x.dtype).bits:
        raise ValueError(f"the objective returned {f.dtype} for x of dtype {x.dtype}: its "
                         f"values would be rounded to {f.dtype}; compute it in {x.dtype}")


class FunctionObjective(Objective):
    """Wrap a callable ``f(x) -> scalar tensor``; gradients come from autograd.

    Parameters
    ----------
    fun : callable
        The objective. Must be differentiable by autograd unless ``grad`` is given.
    grad : callable, optional
        ``grad(x) -> Tensor`` returning the gradient, to skip autograd.
    """

    def __init__(self, fun: Callable[[Tensor], Tensor], grad: Callable[[Tensor], Tensor] | None
                 = None):
        if not callable(fun):
            raise TypeError(f"objective must be callable, got {type(fun).__name__}")
        self.fun = fun
        self.grad = grad

    def value(self, x: Tensor) -> Tensor:
        return self.fun(x)

    def value_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.grad is None:
            return super().value_and_grad(x)
        with torch.no_grad():
            f = self.fun(x)
            _check_scalar(f, x)
            g = self.grad(x)
        if g.shape != x.shape:
            raise ValueError(f"grad returned shape {tuple(g.shape)}, expected {tuple(x.shape)}")
        return f.detach(), g

    def __repr__(self) -> str:
        return f"FunctionObjective({getattr(self.fun, '__name__', repr(self.fun))})"


def as_objective(objective) -> Objective:
    """Return ``objective`` as an :class:`Objective` (wrapping plain callables)."""
    if isinstance(objective, Objective):
        return objective
    if callable(objective):
        return FunctionObjective(objective)
    raise TypeError(f"objective must be callable or a torchfw Objective, got "
                    f"{type(objective).__name__}")


class ColumnOperator:
    r"""A symmetric matrix known through its columns.

    Subclasses set ``shape``, ``dtype``, ``device`` and implement :meth:`columns` and
    :meth:`diagonal`. :meth:`column` and :meth:`matvec` have generic implementations.
    Indices may be Python ints or integer tensors (on the operator's device), so that solvers can
    ask for columns without reading indices back to the host.
    """

    shape: tuple[int, int]
    dtype: torch.dtype
    device: torch.device

    def columns(self, index: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Columns ``index`` (1-d integer tensor of length k) as an ``(n, k)`` tensor."""
        raise NotImplementedError

    def diagonal(self) -> Tensor:  # pragma: no cover - abstract
        """The diagonal as an ``(n,)`` tensor."""
        raise NotImplementedError

    def column(self, i) -> Tensor:
        """Column ``i`` as an ``(n,)`` tensor."""
        index = torch.as_tensor(i, device=self.device).reshape(1)
        return self.columns(index)[:, 0]

    def entry(self, i, j) -> Tensor:
        """``Q[i, j]`` for index tensors of shape (1,) (default: from column ``j``)."""
        return self.columns(j.reshape(1)).index_select(0, i.reshape(1)).reshape(1)

    def matvec(self, v: Tensor, block: int = 256) -> Tensor:
        """``Q v``, computed from the columns at the nonzeros of ``v`` in blocks."""
        nz = torch.nonzero(v).squeeze(1)
        out = torch.zeros(self.shape[0], dtype=v.dtype, device=v.device)
        for start in range(0, nz.numel(), block):
            idx = nz[start:start + block]
            out += self.columns(idx).to(v.dtype) @ v[idx]
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"


class DenseOperator(ColumnOperator):
    """A dense symmetric matrix seen as a :class:`ColumnOperator`."""

    def __init__(self, matrix: Tensor):
        if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"Q must be a square matrix, got shape {tuple(matrix.shape)}")
        self.matrix = matrix
        self.shape = (matrix.shape[0], matrix.shape[1])
        self.dtype = matrix.dtype
        self.device = matrix.device

    def columns(self, index: Tensor) -> Tensor:
        return self.matrix.index_select(1, index)

    def column(self, i) -> Tensor:
        if isinstance(i, int):
            return self.matrix[:, i]
        return self.matrix.index_select(1, i.reshape(1))[:, 0]

    def diagonal(self) -> Tensor:
        return torch.diagonal(self.matrix)

    def matvec(self, v: Tensor, block: int = 256) -> Tensor:
        return self.matrix.to(v.dtype) @ v


#: Largest dense ``Q`` whose positive semi-definiteness is checked by a Cholesky factorization.
PSD_CHECK_LIMIT = 2048


def _check_convex_quadratic(Q: Tensor) -> None:
    """Refuse a dense ``Q`` that is not square, not symmetric or not PSD (to rounding)."""
    if Q.dim() != 2 or Q.shape[0] != Q.shape[1]:
        raise ValueError(f"Q must be a square matrix, got shape {tuple(Q.shape)}")
    n = Q.shape[0]
    if n == 0 or not Q.is_floating_point():
        return
    Qd = Q.detach().to(torch.float64)
    scale = float(Qd.abs().max())
    # Rounding of a matrix computed in Q's own precision (or computed in float32 and handed in
    # as float64, e.g. a Gram matrix X'X): curvature this small relative to Q's scale is noise.
    rel = max(100.0 * torch.finfo(Q.dtype).eps, 1.5e-8) * n
    tol = rel * max(scale, 1e-300)
    asym = float((Qd - Qd.T).abs().max())
    if asym > tol:
        raise ValueError(f"Q must be symmetric: max |Q - Q'| = {asym:.3g} (Frank-Wolfe reads "
                         "Q's columns as gradients of x'Qx/2, which needs Q = Q')")
    diag = torch.diagonal(Qd)
    i = int(torch.argmin(diag))
    if float(diag[i]) < -tol:
        raise ValueError(f"Q is not positive semidefinite (Q[{i},{i}] = {float(diag[i]):.3g} < 0):"
                         " the objective is not convex and a zero duality gap would certify "
                         "nothing")
    if n <= PSD_CHECK_LIMIT:
        sym = 0.5 * (Qd + Qd.T)
        eye = torch.eye(n, dtype=torch.float64, device=Q.device)
        _, info = torch.linalg.cholesky_ex(sym + tol * eye)
        if int(info) != 0:
            smallest = float(torch.linalg.eigvalsh(sym)[0])
            raise ValueError(f"Q is not positive semidefinite (smallest eigenvalue "
                             f"{smallest:.3g}): the objective is not convex and a zero duality "
                             "gap would certify nothing")


class Quadratic(Objective):
    r"""The quadratic :math:`f(x) = \tfrac12 x^\top Q x + c^\top x + \text{constant}`.

    ``Q`` must be symmetric positive semi-definite: the duality gap certifies
    :math:`f(x) - f^* \le g(x)` only for a convex objective (on an indefinite ``Q`` a vertex can
    have gap 0 far from the minimum). It is either a dense ``(n, n)`` tensor or a
    :class:`ColumnOperator` (for instance the lazy kernel operator of :mod:`torchfw.svm.kernels`),
    in which case the full matrix is never formed. A dense tensor is checked: it must be
    symmetric to rounding and, up to ``n = 2048`` (a Cholesky factorization, at most ~0.2 s),
    positive semi-definite to rounding; larger ones are checked for symmetry and a non-negative
    diagonal only. Wrap a matrix known to be PSD in :class:`DenseOperator` to skip the checks.

    Parameters
    ----------
    Q : Tensor or ColumnOperator
    c : Tensor, optional
        Linear term of shape ``(n,)`` (zero by default).
    constant : float, default 0.0
        Added to every value (keeps reported objectives in the user's scale).
    """

    has_curvature = True

    def __init__(self, Q, c: Tensor | None = None, constant: float = 0.0):
        if isinstance(Q, Tensor):
            if Q.is_sparse or Q.layout != torch.strided:
                raise TypeError("a sparse Q must be wrapped in a ColumnOperator")
            check_finite("Q", Q)
            _check_convex_quadratic(Q)
            Q = DenseOperator(Q)
        if not isinstance(Q, ColumnOperator):
            raise TypeError(
                f"Q must be a dense tensor or a torchfw ColumnOperator, got {type(Q).__name__}"
            )
        n = Q.shape[0]
        if c is not None:
            if not isinstance(c, Tensor) or c.shape != (n,):
                raise ValueError(f"c must be a tensor of shape ({n},), got "
                                 f"{getattr(c, 'shape', type(c).__name__)}")
            check_finite("c", c)
            if c.device != Q.device:
                raise ValueError(f"c is on {c.device} but Q is on {Q.device}")
        self.Q = Q
        self.c = c
        self.constant = float(constant)

    @property
    def n(self) -> int:
        return self.Q.shape[0]

    @property
    def device(self) -> torch.device:
        return self.Q.device

    def linear_term(self, dtype=None) -> Tensor:
        """``c`` as a tensor (zeros when absent)."""
        dtype = dtype or self.Q.dtype
        if self.c is None:
            return torch.zeros(self.n, dtype=dtype, device=self.device)
        return self.c.to(dtype)

    def gradient(self, x: Tensor) -> Tensor:
        g = self.Q.matvec(x)
        return g + self.c.to(x.dtype) if self.c is not None else g

    def value(self, x: Tensor) -> Tensor:
        f, _ = self.value_and_grad(x)
        return f

    def value_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        qx = self.Q.matvec(x.detach())
        lin = self.c.to(x.dtype) if self.c is not None else None
        f = 0.5 * torch.dot(x.detach(), qx)
        if lin is not None:
            f = f + torch.dot(lin, x.detach())
            qx = qx + lin
        return f + self.constant, qx

    def curvature(self, d: Tensor) -> Tensor:
        r""":math:`d^\top Q d`."""
        return torch.dot(d, self.Q.matvec(d))

    def __repr__(self) -> str:
        return f"Quadratic(Q={self.Q!r}, c={'None' if self.c is None else 'tensor'})"
