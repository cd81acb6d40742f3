r"""The binary L2-SVM dual as a problem a Frank-Wolfe solver runs, and the map back to the model.

This module builds what a solver needs (:func:`svm_dual_problem`: the lazy kernel operator, the
objective, the constraint set and a starting point) and how to recover the classifier from the
solver's point (:meth:`SVMDualProblem.to_model`). The estimator, :class:`torchfw.SVC`, builds
its lazy problems here (:mod:`torchfw.svm._lazy`) and splits several classes into binary
problems (:mod:`torchfw.svm._multiclass`).

The problem is the L2-SVM with a regularized bias in Core Vector Machine form (Tsang, Kwok &
Cheung 2005), the form of the seed papers (SWAP, Allende et al. 2013; stochastic FW, Ouyang &
Gray 2010; PARTAN, Frandi et al. 2015; spec ``seed000_swap.md`` §1.2-1.3):

.. math::
    \min_{\alpha \in \Delta_m}\ f(\alpha) = \tfrac12 \alpha^\top \tilde K \alpha, \qquad
    \tilde K_{ij} = y_i y_j \big(k(x_i, x_j) + 1\big) + \delta_{ij} / C_i ,

over the unit simplex :math:`\Delta_m`, with labels :math:`y_i \in \{-1, +1\}` and one
:math:`C_i > 0` per example (``C`` times the class weight times the sample weight, as
scikit-learn scales C). :math:`\tilde K` is positive definite, so the solution is unique.
The model is :math:`w = \sum_i \alpha_i y_i \phi(x_i)`, :math:`b = \sum_i \alpha_i y_i`, the
margin :math:`\rho = \alpha^\top \tilde K \alpha` and the decision function, on LIBSVM's scale
(margin 1) as :class:`~torchfw.SVC` reports it,

.. math::
    f(x) = \rho^{-1} \sum_i \alpha_i y_i \big(k(x_i, x) + 1\big)
         = \sum_i \frac{\alpha_i y_i}{\rho}\, k(x_i, x) + \frac{b}{\rho} .

The Frank-Wolfe gap of the dual, :math:`\rho - \min_i (\tilde K \alpha)_i`, is the worst margin
violation; ``SVC(tol=...)`` bounds it relative to :math:`\rho` (``rtol = 2 tol`` of a core
optimizer, whose relative gap is taken against :math:`f = \rho / 2`).

References
----------
I. W. Tsang, J. T. Kwok, P.-M. Cheung, "Core Vector Machines: fast SVM training on very large
data sets", JMLR 6, 2005.
H. Allende, E. Frandi, R. Ñanculef, C. Sartori, "A novel Frank-Wolfe algorithm. Analysis and
applications to large-scale SVM training", 2013 (arXiv:1304.1014). Seed 000 of this project.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..objectives import Quadratic
from ..sets.oracles import Simplex
from ..utils.data import as_labels, as_matrix, as_sample_weight, drop_zero_weight, take_rows
from ..utils.validation import check_int_at_least, check_positive, resolve_device
from ._start import initial_alpha
from .kernels import KERNELS, Kernel, SVMDualOperator, make_kernel

__all__ = ["SVMDualProblem", "SVMDualModel", "svm_dual_problem", "resolve_gamma",
           "example_C", "STARTS"]

#: Starting points of :func:`svm_dual_problem` (``start=``).
STARTS = ("subset", "vertex")


def resolve_gamma(gamma, X: Tensor) -> float:
    """The kernel coefficient: ``"scale"`` is ``1 / (d * X.var())``, ``"auto"`` ``1 / d``.

    As in scikit-learn (the variance of all entries of ``X``, dense or CSR; 1 when it is 0).
    A number is returned as is (checked by the kernel).
    """
    if isinstance(gamma, str) and gamma == "auto":
        return 1.0 / X.shape[1]
    if isinstance(gamma, str) and gamma == "scale":
        if X.layout == torch.sparse_csr:
            values = X.values().double()
            n = X.shape[0] * X.shape[1]
            mean = values.sum() / n
            var = float((values * values).sum() / n - mean * mean)
        elif X.device.type == "cpu":  # NumPy: a fifth of torch's time on a 100-example fit
            x = X.detach().numpy().astype(np.float64).ravel()
            d = x - x.mean()
            # not d @ d: a BLAS call wakes OpenBLAS's threads, which then spin on the cores
            # the compiled solve's threads need (digits' fit 11.5 -> 16.3 ms on 2 cores)
            var = float(np.multiply(d, d, out=d).sum()) / x.size
        else:
            var = float(X.double().var(unbiased=False))
        return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    if isinstance(gamma, str):
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive number, got {gamma!r}")
    return float(gamma)


def example_C(C: float, class_weight, y_encoded: np.ndarray, classes,
              sample_weight: np.ndarray | None = None) -> Tensor | float:
    r"""Per-example :math:`C_i`: ``C`` times the class weight times the sample weight (if any).

    ``y_encoded`` holds class indices into ``classes``; ``class_weight`` is None, a dict
    ``{label: weight}`` or ``"balanced"`` (:math:`m / (k\, m_c)` for a class of :math:`m_c`
    examples), as in scikit-learn. A plain
    float when every example has the same C (no weights), else a float64 tensor ``(m,)``.
    """
    n_classes = len(classes)
    if sample_weight is not None:
        base = example_C(C, class_weight, y_encoded, classes)
        return torch.from_numpy(np.asarray(base, dtype=np.float64) * sample_weight)
    if class_weight is None:
        return float(C)
    counts = np.bincount(y_encoded, minlength=n_classes)
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be a dict or 'balanced', got {class_weight!r}")
        weights = len(y_encoded) / (n_classes * counts)
    elif isinstance(class_weight, dict):
        weights = np.ones(n_classes)
        index = {c: k for k, c in enumerate(classes)}
        for label, weight in class_weight.items():
            if label not in index:
                raise ValueError(f"class_weight has label {label!r} not present in y")
            weights[index[label]] = check_positive(f"class_weight[{label!r}]", weight)
    else:
        raise ValueError(f"class_weight must be a dict or 'balanced', got {class_weight!r}")
    return torch.from_numpy(C * weights[y_encoded])


@dataclass
class SVMDualModel:
    r"""The classifier of a dual point, on the margin-1 scale (:class:`~torchfw.SVC`'s).

    :math:`f(x) = \sum_{i \in S} \beta_i k(x_i, x) + b/\rho` with :math:`\beta_i = \alpha_i
    y_i / \rho` over the support :math:`S = \{i : \alpha_i > 0\}`.

    Attributes
    ----------
    support : ndarray of int
        Indices of the support vectors among the rows of the ``X`` given to the builder.
    support_vectors : Tensor
        Their rows, ``(n_SV, d)`` (dense or CSR, the operator's precision).
    dual_coef : Tensor
        :math:`\alpha_i y_i / \rho`, ``(n_SV,)`` float64 (``SVC.dual_coef_[0]``).
    intercept : float
        :math:`b / \rho = \sum_i \alpha_i y_i / \rho` (``SVC.intercept_[0]``).
    rho : float
        The margin :math:`\rho = \alpha^\top \tilde K \alpha`.
    kernel : Kernel
    classes : ndarray
        The two labels; positive decision values predict ``classes[1]``.
    """

    support: np.ndarray
    support_vectors: Tensor
    dual_coef: Tensor
    intercept: float
    rho: float
    kernel: Kernel
    classes: np.ndarray

    def decision_function(self, X) -> np.ndarray:
        """:math:`f(x)` for each row of ``X`` (array-like, SciPy sparse or tensor): ``(n,)``."""
        sv = self.support_vectors
        dtype = sv.dtype if sv.layout == torch.strided else sv.values().dtype
        X = as_matrix(X, device=sv.device, dtype=dtype)
        if X.shape[1] != sv.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features; the model was built on "
                             f"{sv.shape[1]}")
        K = self.kernel.pairwise(X, sv).to(torch.float64)
        return (K @ self.dual_coef.to(K.device) + self.intercept).cpu().numpy()

    def predict(self, X) -> np.ndarray:
        """``classes[1]`` where :meth:`decision_function` is positive, else ``classes[0]``."""
        return self.classes[(self.decision_function(X) > 0).astype(int)]


@dataclass
class SVMDualProblem:
    r"""One binary L2-SVM dual as a Frank-Wolfe solver takes it, and the way back to the model.

    Run any simplex solver: ``SwapFrankWolfe(problem.lmo, tol=...).minimize(
    problem.objective, problem.x0)``; then ``problem.to_model(result.x)`` is the classifier.

    Attributes
    ----------
    operator : SVMDualOperator
        :math:`\tilde K`, columns computed on demand and cached (``cache_size``).
    objective : Quadratic
        :math:`f(\alpha) = \tfrac12 \alpha^\top \tilde K \alpha` on ``operator``.
    lmo : Simplex
        The unit simplex.
    x0 : Tensor
        Starting point, float64 ``(m,)`` on the operator's device.
    y : ndarray
        The labels in ``{-1, +1}`` (float64), ``+1`` for ``classes[1]``.
    C : float or Tensor
        :math:`C_i`: one value, or one per example (float64 ``(m,)``).
    X : Tensor
        The training examples of the problem (rows of weight 0 left out).
    rows : ndarray of int or None
        Which rows of the given ``X`` the problem's examples are (None: all, in order).
    classes : ndarray or None
        The two labels (None when built from ``±1`` labels directly).
    """

    operator: SVMDualOperator
    objective: Quadratic
    lmo: Simplex
    x0: Tensor
    y: np.ndarray
    C: float | Tensor
    X: Tensor
    rows: np.ndarray | None = None
    classes: np.ndarray | None = None

    @property
    def kernel(self) -> Kernel:
        r"""The kernel :math:`k` of :math:`\tilde K`."""
        return self.operator.kernel

    def to_model(self, alpha) -> SVMDualModel:
        r"""The classifier of the dual point ``alpha`` (``(m,)``, on the simplex).

        The margin :math:`\rho = \alpha^\top \tilde K \alpha` is computed from ``alpha``
        (one product with :math:`\tilde K` over its support); the coefficients are
        :math:`\alpha_i y_i / \rho` and the intercept :math:`\sum_i \alpha_i y_i / \rho`, the
        formulas :class:`~torchfw.SVC` uses (with :math:`\rho` from the solver's value).
        """
        m = self.operator.shape[0]
        alpha = torch.as_tensor(alpha.detach() if isinstance(alpha, Tensor) else
                                np.asarray(alpha, dtype=np.float64))
        alpha = alpha.to(device=self.operator.device, dtype=torch.float64)
        if alpha.shape != (m,):
            raise ValueError(f"alpha must have shape ({m},), got {tuple(alpha.shape)}")
        if not bool(torch.isfinite(alpha).all()) or bool((alpha < 0).any()):
            raise ValueError("alpha must be finite and >= 0 (a point of the simplex)")
        rho = float(alpha @ self.operator.matvec(alpha))
        if not rho > 0:
            raise ValueError(f"alpha gives the margin rho = {rho!r}; a point of the simplex "
                             f"gives rho > 0")
        y = torch.from_numpy(self.y).to(alpha.device)
        support = torch.nonzero(alpha > 0).squeeze(1)
        # class by class (-1 first), by index within a class: SVC's (and LIBSVM's) order
        negative_first = np.lexsort((support.cpu().numpy(), self.y[support.cpu().numpy()] > 0))
        support = support[torch.from_numpy(negative_first).to(support.device)]
        signed = alpha * y
        classes = self.classes if self.classes is not None else np.array([-1, 1])
        index = support.cpu().numpy()
        return SVMDualModel(
            support=index if self.rows is None else self.rows[index],
            support_vectors=take_rows(self.X, support.to(self.X.device)),
            dual_coef=signed.index_select(0, support) / rho,
            intercept=float(signed.sum()) / rho, rho=rho, kernel=self.kernel,
            classes=classes)


def build_dual(X: Tensor, y_pm: np.ndarray, kernel: Kernel, C: float | Tensor, *,
               dtype: torch.dtype = torch.float32, cache_size: float = 200.0,
               alpha0: Tensor | None = None, start: str = "subset", n_init: int = 20,
               seed=None, rows: np.ndarray | None = None,
               classes: np.ndarray | None = None) -> SVMDualProblem:
    """:func:`svm_dual_problem` on validated input: ``X`` a tensor, ``y_pm`` in {-1, +1}.

    ``C`` is a float or a per-example tensor; ``alpha0`` a warm start (used as given), else
    ``start``: ``"subset"``, the exact solution on ``n_init`` random examples of both classes
    (seeds 000-002, :func:`torchfw.svm._start.initial_alpha`), or ``"vertex"``, one random
    vertex (seed 001's streaming start), both drawn with ``seed``. The lazy path of
    :class:`~torchfw.SVC` builds each binary problem here.
    """
    y_t = torch.from_numpy(y_pm).to(X.device)
    operator = SVMDualOperator(X, y_t, kernel, C if isinstance(C, float) else C.to(X.device),
                               dtype=dtype, cache_size=cache_size)
    m = X.shape[0]
    if alpha0 is not None:
        x0 = alpha0.to(X.device)
    elif start == "vertex":  # seed 001: a single random vertex; the engine streams from there
        x0 = torch.zeros(m, dtype=torch.float64, device=X.device)
        x0[int(np.random.default_rng(seed).integers(m))] = 1.0
    else:
        x0 = initial_alpha(operator, y_pm, n_init, seed)
    return SVMDualProblem(operator=operator, objective=Quadratic(operator), lmo=Simplex(),
                          x0=x0, y=y_pm, C=C, X=X, rows=rows, classes=classes)


def svm_dual_problem(X, y, *, kernel: str = "rbf", C=1.0, gamma="scale", degree: int = 3,
                     coef0: float = 0.0, class_weight=None, sample_weight=None,
                     start: str = "subset", n_init: int = 20, random_state=None, alpha0=None,
                     dtype: torch.dtype = torch.float32, device=None,
                     cache_size: float = 200.0) -> SVMDualProblem:
    r"""Build the binary L2-SVM dual of ``(X, y)`` as a problem for a Frank-Wolfe solver.

    :math:`\min_{\alpha \in \Delta_m} \tfrac12 \alpha^\top \tilde K \alpha` with
    :math:`\tilde K_{ij} = y_i y_j (k(x_i, x_j) + 1) + \delta_{ij}/C_i` (module docstring).
    ``SVC(solver=s, dense=False, random_state=r)`` solves exactly this problem (two classes)
    with the optimizer of solver ``s`` from :attr:`SVMDualProblem.x0`.

    Parameters
    ----------
    X : array-like, scipy.sparse matrix or Tensor
        ``(m, d)`` training examples (kept sparse when sparse).
    y : array-like
        Labels of exactly two classes; the larger (``np.unique`` order) is :math:`+1`.
    kernel : {"rbf", "linear", "poly", "sigmoid"}
        As in :class:`~torchfw.SVC` (a precomputed or callable kernel has no lazy operator).
    C : float or array-like of shape (m,)
        Regularization, one value or one per example, > 0.
    gamma, degree, coef0
        Kernel parameters, as in :class:`~torchfw.SVC` (``gamma="scale"`` or ``"auto"`` as
        in scikit-learn).
    class_weight : dict or "balanced", optional
        Multiplies :math:`C_i` by the weight of example ``i``'s class.
    sample_weight : array-like of shape (m,), optional
        Multiplies :math:`C_i` by :math:`s_i \ge 0`; examples of weight 0 are left out
        (:attr:`SVMDualProblem.rows` says which rows remain).
    start : {"subset", "vertex"}
        ``"subset"``: the exact solution on ``n_init`` random examples of both classes (seeds
        000-002, as :class:`~torchfw.SVC`); ``"vertex"``: one random vertex (seed 001).
    n_init : int
        Size of the start subset.
    random_state : int, optional
        Seed of the start's draw (``SVC(random_state=r)`` draws with ``r`` for two classes).
    alpha0 : array-like of shape (m,), optional
        A warm start on the simplex, in place of ``start``.
    dtype : torch.float32 or torch.float64
        Precision of the kernel values (the solvers accumulate in float64).
    device : str or torch.device, optional
        Where the operator lives; default: the device of a tensor ``X``, else CPU.
    cache_size : float
        Column cache of the operator in MB.

    Returns
    -------
    SVMDualProblem

    Examples
    --------
    >>> import numpy as np
    >>> from torchfw import SwapFrankWolfe
    >>> from torchfw.svm.problem import svm_dual_problem
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = np.where(X[:, 0] + X[:, 1] > 0, "a", "b")
    >>> problem = svm_dual_problem(X, y, C=10.0, gamma=0.5, random_state=0)
    >>> result = SwapFrankWolfe(problem.lmo, tol=1e-300, rtol=1e-6).minimize(
    ...     problem.objective, problem.x0)
    >>> model = problem.to_model(result.x)
    >>> float(np.mean(model.predict(X) == y)) > 0.95
    True
    """
    if not (isinstance(kernel, str) and kernel in KERNELS):
        raise ValueError(f"kernel must be one of {sorted(KERNELS)} (a precomputed or callable "
                         f"kernel has no lazy operator: use SVC), got {kernel!r}")
    if not (isinstance(start, str) and start in STARTS):
        raise ValueError(f"start must be one of {STARTS}, got {start!r}")
    check_int_at_least("n_init", n_init, 1)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    X = as_matrix(X, device=resolve_device(device), dtype=dtype)
    m = X.shape[0]
    labels = as_labels(y, m, estimator="svm_dual_problem")
    C_given = _per_example(C, m)
    if alpha0 is not None:
        alpha0 = torch.as_tensor(alpha0.detach() if isinstance(alpha0, Tensor) else
                                 np.asarray(alpha0, dtype=np.float64)).to(torch.float64)
        if alpha0.shape != (m,) or not bool(torch.isfinite(alpha0).all()) or \
                bool((alpha0 < 0).any()) or abs(float(alpha0.sum()) - 1.0) > 1e-6:
            raise ValueError(f"alpha0 must be a point of the unit simplex of shape ({m},)")
    X, labels, weights, kept = drop_zero_weight(X, labels, as_sample_weight(sample_weight, m))
    classes, y_encoded = np.unique(labels, return_inverse=True)
    if len(classes) != 2:
        raise ValueError(f"y has {len(classes)} class(es) {list(classes)[:5]}; the binary SVM "
                         f"dual needs exactly 2 (SVC splits more classes into binary problems)")
    if kept is not None:
        C_given = C_given if isinstance(C_given, float) else C_given[kept]
        alpha0 = None if alpha0 is None else alpha0[torch.from_numpy(kept)]
        if alpha0 is not None and not float(alpha0.sum()) > 0:
            raise ValueError("alpha0 has no mass on the examples of nonzero weight")
        alpha0 = None if alpha0 is None else alpha0 / alpha0.sum()
    if isinstance(C_given, float):  # SVC's arithmetic: (C * class weight) * sample weight
        C_examples = example_C(C_given, class_weight, y_encoded, classes, weights)
    else:  # a C per example, times the weights
        base = example_C(1.0, class_weight, y_encoded, classes, weights)
        C_examples = C_given if isinstance(base, float) else C_given * base
    kernel_obj = make_kernel(kernel, resolve_gamma(gamma, X), degree, coef0)
    y_pm = np.where(y_encoded == 1, 1.0, -1.0)
    seed = None if random_state is None else int(random_state)
    return build_dual(X, y_pm, kernel_obj, C_examples, dtype=dtype, cache_size=cache_size,
                      alpha0=alpha0, start=start, n_init=n_init, seed=seed, rows=kept,
                      classes=classes)


def _per_example(C, m: int) -> float | Tensor:
    """``C`` as a positive float, or a float64 tensor ``(m,)`` of positive values."""
    if isinstance(C, (Tensor, np.ndarray, list, tuple)):
        values = torch.as_tensor(C.detach().cpu() if isinstance(C, Tensor) else
                                 np.asarray(C, dtype=np.float64)).to(torch.float64)
        if values.shape != (m,):
            raise ValueError(f"a per-example C must have shape ({m},), got "
                             f"{tuple(values.shape)}")
        if not bool(torch.isfinite(values).all()) or bool((values <= 0).any()):
            raise ValueError("a per-example C must have finite entries > 0")
        return values
    return check_positive("C", C)
