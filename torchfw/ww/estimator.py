r"""The linear Weston-Watkins multiclass SVM, trained by block-coordinate descent with Walrus.

Primal (no bias; Vapnik's scaling, Wang & Scott 2021, (P)):

.. math::
    \min_{W \in \mathbb R^{d \times k}} \tfrac12 \|W\|_F^2
    + C \sum_{i=1}^n \sum_{j \ne y_i} \max\{0,\ 1 - (w_{y_i} - w_j)^\top x_i\} .

Reparametrized dual (D2): one block :math:`\beta_i \in [0, C]^{k-1}` per example,

.. math::
    \min_{\beta \in [0,C]^{(k-1) \times n}} g(\beta) = \tfrac12 \|W(\beta)\|_F^2
    - \sum_i \mathbf 1^\top \beta_i ,
    \qquad W(\beta) = \sum_i x_i\, (\sigma_{y_i} \pi^\top \beta_i)^\top ,

where :math:`\pi^\top \beta = [\mathbf 1^\top\beta;\ -\beta]`: column :math:`y_i` of ``W`` gets
:math:`(\mathbf 1^\top\beta_i)\, x_i` and the column of the class in slot ``s`` gets
:math:`-\beta_{is}\, x_i`. Minimizing ``g`` over block ``i`` is the fixed-form problem (4) of
:mod:`torchfw.ww.subproblem` with :math:`v_s = (1 - (w_{y_i} - w_{c(s)})^\top x_i)/\|x_i\|^2 + \beta_{is}
+ \mathbf 1^\top\beta_i`, which Walrus solves exactly. BCD (:class:`torchfw.optimizers.bcd.
BlockCoordinateDescent`) sweeps the examples in a fresh random order per epoch and stops when the
duality gap :math:`P(W) - (-g(\beta))` falls to ``tol`` times its value after the first epoch.
By default the sweeps shrink as LIBLINEAR does (``shrinking="heuristic"``), un-shrinking to
re-check; ``shrinking=True`` screens instead (a block at 0 is passed over only while a bound
proves that its solve would leave it there, so the iterates are plain BCD's). The gap is always
computed on the full problem, so every stopped run is certified over all variables.

References
----------
Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021.
J. Weston and C. Watkins, "Support vector machines for multi-class pattern recognition", 1999.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor

from .. import exceptions
from ..optimizers.bcd import BlockCoordinateDescent
from ..utils.data import _is_scipy_sparse, accuracy, as_labels, as_matrix, csr_tensor
from ..utils.estimator import BaseEstimator, check_is_fitted, fit_atomically, plain
from ..utils.validation import check_int_at_least, check_positive, resolve_device
from . import _blocks as _k
from ._csr import CSR as _CSR
from ._csr import as_csr as _as_csr
from ._csr import csr_of_checked as _csr_of_checked
from ._csr import csr_matmul as _csr_matmul
from ._csr import row_sqnorms as _row_sqnorms
from ._csr import take_csr_rows as _take_rows
from ._problem import (  # noqa: F401 (the dual and its shrinking constants, re-exported)
    MAX_SHRUNK_SWEEPS,
    SHRINK_THRESHOLD,
    SKIP_FRACTION,
    TARGET_MARGIN,
    UNSHRINK_FACTOR,
    WWDualProblem,
)

__all__ = ["WestonWatkinsSVC", "WWProblem", "ww_problem"]

_SUBPROBLEMS = ("walrus", "iterative", "fw")
_warned_no_numba = False


def _labels(y, n: int) -> np.ndarray:
    if isinstance(y, Tensor):
        y = y.detach().cpu().numpy()
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-d (one label per sample), got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"X has {n} samples but y has {y.shape[0]} labels")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinite labels")
    if y.dtype.kind == "O" and any(v is None for v in y):
        raise ValueError("y contains missing (None) labels")
    return y


# --------------------------------------------------------------------------------------------
# The reparametrized dual (D2) as a BlockProblem.
# --------------------------------------------------------------------------------------------

# WWDualProblem and its shrinking policy live in torchfw.ww._problem (imported above).

# --------------------------------------------------------------------------------------------
# The estimator.
# --------------------------------------------------------------------------------------------

class WestonWatkinsSVC(BaseEstimator):
    r"""Linear Weston-Watkins multiclass SVM trained by BCD with the exact Walrus solver.

    Solves

    .. math::
        \min_W \tfrac12 \|W\|_F^2 + C \sum_i \sum_{j \ne y_i}
        \max\{0,\ 1 - (w_{y_i} - w_j)^\top x_i\}

    (no intercept) through its reparametrized dual, one block of ``k - 1`` variables per example,
    each block minimized exactly by Walrus in :math:`O(k \log k)` (Wang & Scott, ICML 2021). The
    sweep over examples runs compiled (numba), on the CPU, in float64.

    Parameters
    ----------
    C : float, default 1.0
        Regularization parameter, ``C > 0``.
    tol : float, default 0.01
        Stop after the first epoch ``t`` whose duality gap is ``<= tol * gap_1`` (the gap after
        epoch 1): the paper's rule. The paper uses ``tol = 0.0009``; test accuracy stops
        changing well before (dna, satimage, letter and sector at the paper's ``C``: within
        about 0.3 points of its Table 6, median of 5 seeds, at 0.01, in a quarter to a half
        of the paper's epochs; ``docs/ww_svm.md``). Pass ``tol=0.0009`` for the paper's
        setting.
    max_iter : int, default 1000
        Maximum number of epochs (a :class:`~torchfw.exceptions.ConvergenceWarning` is
        issued when reached).
    subproblem : {"walrus", "iterative", "fw"}, default "walrus"
        Block solver: ``"walrus"`` exact; ``"iterative"`` Shark's greedy coordinate Newton steps
        (the paper's baseline, approximate); ``"fw"`` one Frank-Wolfe step with the box LMO and
        exact line search per block visit (inexact BCD, slower to converge; for comparison).
    random_state : int, optional
        Seed of the per-epoch permutations. Two fits with the same seed visit the examples in the
        same orders, whatever the subproblem solver (with ``shrinking="heuristic"``, the shrunk
        sweeps shuffle only the examples they work on, which depend on the iterates).
    verbose : bool, default False
        Progress bar over epochs with the duality gap.
    device : str or torch.device, optional
        Where ``coef_`` lives and where :meth:`decision_function` computes. Default: the device
        of a tensor ``X`` passed to ``fit``, else the CPU. Training itself always runs on the CPU.
    check_every : int or "auto", default "auto"
        Epochs between duality-gap evaluations (each costs about one epoch: the primal needs
        all ``n k`` scores). ``1`` is the paper's rule to the letter: stop at the *first* epoch
        whose gap is ``<= tol * gap_1``. ``"auto"`` evaluates the gap after epoch 1 and then
        only when a free estimate computed during the sweep (the hinge losses at the scores
        each example had when visited, calibrated against the last exact gap but the first)
        predicts the target is met (see :class:`~torchfw.optimizers.bcd.BlockCoordinateDescent`): the
        iterates are the same, the run may stop some epochs later (usually at the same epoch)
        with a smaller gap, at a fraction of the checking cost.
    shrinking : {"heuristic", True, False}, default "heuristic"
        Spare the sweeps work. ``"heuristic"`` (LIBLINEAR-style shrinking): a slot
        ``beta_is = 0`` with margin above 1 at its visit leaves its block and the blocks with the
        smallest gap shares skip an epoch, a full sweep re-checking everything whenever the
        shrunk sweeps' predicted gap has fallen tenfold and before the run may stop (as
        LIBLINEAR un-shrinks and re-checks). The stopping gap is always computed over every
        example and class, so the model is certified by the same rule as without shrinking;
        it follows another path than plain BCD, so it differs from plain BCD's within that gap
        (test accuracy by a test example or two either way, as plain BCD's own does over
        visiting orders; ``docs/ww_svm.md``). 1.3-2.2x faster than ``False`` on dna, satimage,
        letter and sector. ``True`` (safe screening): a block with ``beta_i = 0`` whose
        margins ``(w_{y_i} - w_c)^T x_i`` all exceeded 1 at its last visit is passed over while
        a bound proves they still do (each margin moves by at most ``||x_i||`` times the
        distance its two classes' weights have moved since), so the iterates, epochs and model
        are exactly those of ``False``. ``False`` gives the paper's Algorithm 1 (every block,
        every slot, each epoch). With ``subproblem="fw"``, ``"heuristic"`` screens instead (its
        rule presumes exact block solves).

    Attributes
    ----------
    classes_ : ndarray of shape (k,)
        Sorted class labels.
    coef_ : Tensor of shape (k, d)
        Class weight vectors :math:`w_j` as rows (float64).
    intercept_ : Tensor of shape (k,)
        Zeros (the formulation has no bias, as in the paper and LIBLINEAR's default).
    n_iter_ : int
        Epochs run.
    gap_history_ : ndarray
        Duality gap at each evaluation (after every epoch with ``check_every=1``).
    gap_epochs_ : ndarray of int
        The epochs at which ``gap_history_`` was evaluated.
    primal_history_, dual_history_ : ndarray
        Primal and dual objective after each epoch (``gap = primal - dual``).
    converged_ : bool
        Whether the gap rule was met.
    result_ : Result
        The BCD result (``result_.x`` is the dual ``beta``, shape ``(n_used, k-1)``).
    n_features_in_ : int

    Notes
    -----
    Rows of ``X`` that are all zero do not enter the dual (their hinge terms are constants);
    they are still counted in the primal objective. Prediction is
    :math:`\operatorname{argmax}_j w_j^\top x` (lowest class index on ties).

    References
    ----------
    Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from torchfw import WestonWatkinsSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5)); y = np.argmax(X[:, :3], axis=1)
    >>> clf = WestonWatkinsSVC(C=1.0, random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    _estimator_kind = "classifier"
    _state_format = "torchfw.WestonWatkinsSVC"

    def __init__(self, C: float = 1.0, tol: float = 0.01, max_iter: int = 1000,
                 subproblem: str = "walrus", random_state: int | None = None,
                 verbose: bool = False, device=None, check_every="auto",
                 shrinking: bool | str = "heuristic"):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.subproblem = subproblem
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.check_every = check_every
        self.shrinking = shrinking

    # -- fit ------------------------------------------------------------------------------------

    def _validate_params(self) -> None:
        check_positive("C", self.C)
        check_positive("tol", self.tol)
        check_int_at_least("max_iter", self.max_iter, 1)
        if self.subproblem not in _SUBPROBLEMS:
            raise ValueError(f"subproblem must be one of {_SUBPROBLEMS}, got "
                             f"{self.subproblem!r}")
        if self.check_every != "auto":
            check_int_at_least("check_every", self.check_every, 1)
        if self.shrinking not in (True, False, "heuristic"):
            raise ValueError(f"shrinking must be True, False or 'heuristic', got "
                             f"{self.shrinking!r}")
        rs = self.random_state
        if rs is not None and (isinstance(rs, bool) or not isinstance(rs, (int, np.integer))):
            raise TypeError(f"random_state must be None or an int, got {rs!r}")

    def fit(self, X, y):
        """Fit the model to ``X`` (dense or sparse, ``(n, d)``) and labels ``y`` (k >= 2 values).

        Returns
        -------
        self

        A fit that does not finish (an exception, a ``KeyboardInterrupt``) leaves the estimator
        as it was (:func:`torchfw.utils.estimator.fit_atomically`).
        """
        return fit_atomically(self, type(self)._fit_checked, X, y)

    def _fit_checked(self, X, y):
        self._validate_params()
        C = float(self.C)
        device = resolve_device(self.device)
        if device is None:
            device = X.device if isinstance(X, Tensor) else torch.device("cpu")
        # as_matrix sums a SciPy matrix's duplicate entries (sorting each row's columns); a
        # torch CSR tensor may still name a column twice
        canonical = _is_scipy_sparse(X)
        X = self._validate_X(X, reset=True, dtype=torch.float64)
        # X is validated: build from its CSR arrays without checking them again (ww_problem
        # would, and the checks' torch reductions cost ~8 ms each on a loaded 2-core machine)
        built = _build_problem(_csr_of_checked(X, canonical=canonical), y, C,
                               exact_method="iterative" if self.subproblem == "iterative"
                               else "walrus",
                               # with one Frank-Wolfe step per visit the block is not
                               # minimized, so "its slot stays at 0" is not what the
                               # heuristic predicts: screening only for the inexact solver
                               shrinking=(True if self.shrinking == "heuristic"
                                          and self.subproblem == "fw" else self.shrinking))
        _warn_if_no_numba()
        problem, classes, n_zero, k = built.problem, built.classes, built.n_zero, built.k
        bcd = BlockCoordinateDescent("fw" if self.subproblem == "fw" else "exact", tol=0.0,
                                     rtol=float(self.tol), max_iter=int(self.max_iter),
                                     random_state=self.random_state, verbose=bool(self.verbose),
                                     check_every=self.check_every)
        if problem.n_blocks == 0:  # every row is zero: W = 0 is optimal, nothing to iterate
            result = None
            gaps = primal = dual = np.zeros(0)
            epochs = np.zeros(0, dtype=np.int64)
            converged = True
        else:
            result = bcd.minimize(problem)
            gaps = np.asarray(result.history.gap)
            epochs = np.asarray(result.history.iteration, dtype=np.int64)
            dual = -np.asarray(result.history.value)
            primal = dual + gaps
            converged = result.converged
        const = built.constant
        self.classes_ = classes
        self.coef_ = built.coef().to(device)
        self.intercept_ = torch.zeros(k, dtype=torch.float64, device=device)
        self.n_iter_ = 0 if result is None else result.n_iter
        self.gap_history_ = gaps
        self.gap_epochs_ = epochs
        self.primal_history_ = primal + const
        self.dual_history_ = dual + const
        self.converged_ = bool(converged)
        self.result_ = result
        self.n_zero_rows_ = n_zero
        self.device_ = device
        if not converged and result is not None and result.status.value == "max_iter":
            warnings.warn(f"WestonWatkinsSVC stopped after max_iter={self.max_iter} epochs with "
                          f"duality gap {gaps[-1]:.3e} > tol * first gap "
                          f"{self.tol * gaps[0]:.3e}; increase max_iter",
                          exceptions.ConvergenceWarning,
                          stacklevel=2)
        return self

    # -- predict --------------------------------------------------------------------------------

    def _scores(self, X) -> Tensor:
        check_is_fitted(self, "coef_")
        csr = _as_csr(self._validate_X(X, reset=False, dtype=torch.float64))
        W = self.coef_
        dev = W.device
        if dev.type == "cpu":
            # CSR times a dense (d, k) matrix in the compiled kernel's layout
            scores = _csr_matmul(csr, np.ascontiguousarray(W.T.cpu().numpy()))
            return torch.from_numpy(scores)
        A = csr_tensor(torch.from_numpy(csr.indptr), torch.from_numpy(csr.indices),
                                    torch.from_numpy(csr.data), size=csr.shape).to(dev)
        return A @ W.T.contiguous()

    def decision_function(self, X):
        """Class scores :math:`w_j^\\top x`, shape ``(n, k)``; ``(n,)`` for two classes.

        With two classes the score is :math:`(w_1 - w_0)^\\top x`, positive for
        ``classes_[1]`` (scikit-learn's convention for binary classifiers). A torch ``X`` gives
        a tensor (on ``coef_``'s device), anything else a NumPy array.
        """
        scores = self._scores(X)
        if scores.shape[1] == 2:
            scores = scores[:, 1] - scores[:, 0]
        if isinstance(X, Tensor):
            return scores.to(self.coef_.device)
        return scores.cpu().numpy()

    def predict(self, X):
        """Predicted labels :math:`\\operatorname{argmax}_j w_j^\\top x` (from ``classes_``)."""
        scores = self._scores(X)
        idx = torch.argmax(scores, dim=1).cpu().numpy()
        labels = self.classes_[idx]
        if isinstance(X, Tensor) and labels.dtype.kind in "biuf":
            return torch.from_numpy(labels).to(X.device)
        return labels

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy of :meth:`predict` on ``(X, y)``, weighted by ``sample_weight``."""
        pred = self.predict(X)
        if isinstance(pred, Tensor):
            pred = pred.cpu().numpy()
        y = as_labels(y, pred.shape[0], estimator=type(self).__name__)
        return accuracy(pred, y, sample_weight)

    def as_module(self, dtype: torch.dtype = torch.float32):
        """The fitted class scores :math:`W x + b` as an ``nn.Module``.

        A :class:`torchfw.heads.LinearHead` holding copies of ``coef_`` and ``intercept_`` as
        buffers (in ``dtype``): it follows ``.to(device)``, composes with a backbone
        (``nn.Sequential(backbone, head)``) and scripts and exports; ``predict_index`` gives
        indices into ``classes_``.
        """
        check_is_fitted(self, "coef_")
        from ..heads import LinearHead  # heads depends on torch.nn only; import on use

        return LinearHead(self.coef_.to(dtype), self.intercept_.to(dtype),
                          classes=self.classes_)

    # -- persistence ----------------------------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # random_state=None visits the blocks in fresh random orders: refits differ within
        # the solver's tolerance. Attributes are torch tensors whatever the input (no array-API
        # namespace rule), which the default array_api_support=False says.
        tags.non_deterministic = self.random_state is None
        return tags

    def state_dict(self) -> dict:
        """The fitted model as tensors and plain values (loadable with ``weights_only=True``)."""
        check_is_fitted(self, "coef_")
        names = getattr(self, "feature_names_in_", None)
        return {"format": "torchfw.WestonWatkinsSVC", "version": 1,
                "params": {k: plain(v) for k, v in self.get_params(deep=False).items()
                           if k != "device"},
                "classes": self.classes_.tolist(), "n_features_in": int(self.n_features_in_),
                "feature_names_in": None if names is None else [str(c) for c in names],
                "coef": self.coef_.detach().cpu(), "intercept": self.intercept_.detach().cpu(),
                "n_iter": int(self.n_iter_), "converged": bool(self.converged_)}

    @classmethod
    def from_state_dict(cls, state: dict, map_location=None) -> WestonWatkinsSVC:
        """The model described by :meth:`state_dict`'s output, checked for consistency."""
        if not isinstance(state, dict) or state.get("format") != "torchfw.WestonWatkinsSVC":
            raise ValueError("not a torchfw.WestonWatkinsSVC state dict")
        missing = [key for key in ("params", "classes", "n_features_in", "coef", "intercept")
                   if key not in state]
        if missing:
            raise ValueError(f"torchfw.WestonWatkinsSVC state dict is missing {missing}")
        model = cls(**state["params"])
        coef, intercept = state["coef"], state["intercept"]
        classes = np.asarray(state["classes"])
        d = int(state["n_features_in"])
        if not (isinstance(coef, Tensor) and coef.shape == (classes.shape[0], d)
                and isinstance(intercept, Tensor) and intercept.shape == (classes.shape[0],)):
            raise ValueError(f"torchfw.WestonWatkinsSVC state dict is inconsistent: coef must "
                             f"be ({classes.shape[0]}, {d}) and intercept "
                             f"({classes.shape[0]},) for {classes.shape[0]} classes and {d} "
                             f"features")
        if classes.shape[0] < 2 or not (bool(torch.isfinite(coef).all())
                                        and bool(torch.isfinite(intercept).all())):
            raise ValueError("torchfw.WestonWatkinsSVC state dict holds fewer than 2 classes "
                             "or non-finite coefficients")
        device = resolve_device(map_location) or torch.device("cpu")
        model.classes_ = classes
        model.n_features_in_ = d
        if state.get("feature_names_in") is not None:
            model.feature_names_in_ = np.asarray(state["feature_names_in"], dtype=object)
        model.coef_ = coef.to(device=device, dtype=torch.float64)
        model.intercept_ = intercept.to(device=device, dtype=torch.float64)
        model.n_iter_ = int(state.get("n_iter", 0))
        model.converged_ = bool(state.get("converged", True))
        model.device_ = device
        model.result_ = None
        return model


class WWProblem:
    r"""The Weston-Watkins dual of a data set, built for a BCD solver, and the way back.

    Attributes
    ----------
    problem : WWDualProblem
        The dual (D2) on the rows with :math:`\|x_i\| > 0` (a zero row's hinge terms are
        constants: :math:`\beta_i = C` is optimal and does not move ``W``); run it with
        :class:`~torchfw.optimizers.bcd.BlockCoordinateDescent`.
    classes : ndarray
        Sorted labels; ``y`` was encoded as indices into it.
    k : int
    n_zero : int
        Rows left out for being zero.
    constant : float
        :math:`C(k-1)\,n_{zero}`, what the zero rows add to the primal and the dual objectives.
    """

    def __init__(self, problem: WWDualProblem, classes: np.ndarray, n_zero: int, C: float):
        self.problem = problem
        self.classes = classes
        self.k = int(classes.shape[0])
        self.n_zero = int(n_zero)
        # zero rows: hinge(0) = 1 for each of the k-1 wrong classes, in P; beta_i = C in D.
        self.constant = float(C) * (self.k - 1) * self.n_zero

    def coef(self) -> Tensor:
        """The class weight vectors :math:`w_j` as rows, ``(k, d)`` float64, from the dual."""
        return torch.from_numpy(np.ascontiguousarray(self.problem.W.T))


def ww_problem(X, y, C: float = 1.0, *, exact_method: str = "walrus", eps: float = 1e-6,
               shrinking: bool | str = False) -> WWProblem:
    r"""Build the Weston-Watkins dual (D2) of ``(X, y)`` (Wang & Scott 2021).

    ``X`` (dense, sparse or a tensor) is validated like every estimator input, ``y`` as class
    labels (``k >= 2`` distinct values). :class:`WestonWatkinsSVC` fits exactly this problem;
    ``exact_method``, ``eps`` and ``shrinking`` are :class:`WWDualProblem`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from torchfw.ww.estimator import ww_problem
    >>> from torchfw.optimizers.bcd import BlockCoordinateDescent
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4)); y = np.argmax(X[:, :3], axis=1)
    >>> built = ww_problem(X, y, C=1.0)
    >>> result = BlockCoordinateDescent("exact", rtol=1e-3, random_state=0).minimize(
    ...     built.problem)
    >>> W = built.coef()                    # (k, d)
    >>> float(np.mean(np.argmax(X @ W.numpy().T, axis=1) == y)) > 0.9
    True
    """
    C = check_positive("C", C)
    return _build_problem(_as_csr(as_matrix(X, dtype=torch.float64)), y, C,
                          exact_method=exact_method, eps=eps, shrinking=shrinking)


def _build_problem(csr: _CSR, y, C: float, *, exact_method: str = "walrus", eps: float = 1e-6,
                   shrinking: bool | str = False) -> WWProblem:
    """:func:`ww_problem` on ``X`` already validated and converted to CSR arrays."""
    C = check_positive("C", C)
    n = csr.shape[0]
    classes, y_idx = np.unique(as_labels(y, n, estimator="WestonWatkinsSVC"),
                               return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(f"y has a single class ({classes[0]!r}), 1 class where a multiclass "
                         f"SVM needs at least 2 distinct labels")
    rowsq = _row_sqnorms(csr)
    keep = rowsq > 0
    n_zero = int(n - keep.sum())
    used = _take_rows(csr, keep) if n_zero else csr
    problem = WWDualProblem(used, y_idx[keep], classes.shape[0], C, exact_method=exact_method,
                            eps=eps, shrinking=shrinking,
                            sqnorm=rowsq[keep] if n_zero else rowsq)
    return WWProblem(problem, classes, n_zero, C)


def _warn_if_no_numba() -> None:
    global _warned_no_numba
    if not _k.HAVE_NUMBA and not _warned_no_numba:
        _warned_no_numba = True
        warnings.warn("numba is not available: WestonWatkinsSVC runs its BCD loop in the Python "
                      "interpreter, about 100x slower. Install numba (a torchfw dependency).",
                      RuntimeWarning, stacklevel=3)

