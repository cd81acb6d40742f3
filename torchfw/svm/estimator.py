r"""Kernel support vector classification trained by Frank-Wolfe methods on the simplex.

The model is the L2-SVM (squared hinge loss) with a regularized bias, in the Core Vector Machine
form of Tsang, Kwok & Cheung (2005), the form every seed paper uses:

.. math::
    \min_{w, b, \rho, \xi}\ \|w\|^2 + b^2 - 2\rho + C \sum_i \xi_i^2
    \quad \text{s.t.}\quad y_i (w^\top \phi(x_i) + b) \ge \rho - \xi_i ,

whose dual is the quadratic over the unit simplex

.. math::
    \min_{\alpha \in \Delta_m} \tfrac12 \alpha^\top \tilde K \alpha, \qquad
    \tilde K_{ij} = y_i y_j (k(x_i, x_j) + 1) + \delta_{ij}/C_i .

The solution gives :math:`w = \sum_i \alpha_i y_i \phi(x_i)`, :math:`b = \sum_i \alpha_i y_i`
and the margin :math:`\rho = \alpha^\top \tilde K \alpha`. torchfw reports the decision function
on LIBSVM's scale (margin 1): :math:`f(x) = \rho^{-1} \sum_i \alpha_i y_i (k(x_i, x) + 1)`.

**Stopping rule.** The Frank-Wolfe gap of the dual is
:math:`g = \rho - \min_i \big(y_i f_{\rho}(x_i) + \alpha_i / C_i\big)`, where :math:`f_\rho` is
the unscaled decision function: the largest amount by which a training point's (regularized)
margin falls short of :math:`\rho`. ``tol`` bounds :math:`g / \rho`, the worst margin violation
as a fraction of the margin, the same quantity LIBSVM bounds on its margin-1 scale. The
default (``"auto"``: 0.3, and 0.1 below 1,000 examples) is loose by LIBSVM standards because
test accuracy saturates long before the dual converges; ``benchmarks/svm_vs_libsvm.py`` shows
accuracy against ``tol``, ``benchmarks/svm_small.py`` the small problems behind the 0.1.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from .. import exceptions as _exceptions
from ..solvers import solver_names
from ..utils.data import accuracy, as_labels, drop_zero_weight, take_rows
from ..utils.cold_start import begin_fit
from ..utils.estimator import BaseEstimator, atomic_fit, check_is_fitted
from ..utils.threads import few_threads
from ..utils.validation import resolve_device

# Imported here: what every fit and predict uses, and the compiled CPU path's modules. The
# other paths' modules (sampled storage, lazy host path, batched one-vs-rest, probabilities,
# the nn.Module head) are imported where used: a fresh process that fits on the compiled path
# then does not load them (tests/test_cold_start.py).
from . import _custom as _svc_custom
from . import _fit as _svc_fit
from . import _kernel_range
from . import _isolation
from ._attrs import publish
from ._binary import fit_binary
from ._multiclass import (
    PairVotes,
    binary_problems,
    packed_rows,
    resolve_scheme,
    restrict,
    scatter,
    squash_confidence,
)
from ._params import check_params
from ._plan import enough_neighbours, feature_dtype, resolve_plan, stop_tol
from ._sklearn import SklearnSVCMixin, _class_weights, _svc_weights, _take, _take_object_rows
from ._state import available_if, from_state, svc_state
from .kernels import KERNELS, CallableKernel, make_kernel
from .problem import example_C, resolve_gamma

if TYPE_CHECKING:
    from ..heads import KernelSVMHead

__all__ = ["SVC", "SOLVERS"]

#: Solver names accepted by :class:`SVC` (from :data:`torchfw.solvers.SOLVERS`).
SOLVERS = solver_names("svc")


class SVC(SklearnSVCMixin, BaseEstimator):
    r"""Kernel SVM classifier (L2-SVM) trained by Frank-Wolfe methods.

    A drop-in for scikit-learn's ``SVC``: the same parameters and fitted attributes, in the
    same layouts. The fitted float arrays follow the input's namespace: NumPy float64 for
    NumPy or SciPy input (SciPy CSR ``support_vectors_`` and ``dual_coef_`` for sparse input),
    torch tensors on the input's device for torch input (:mod:`torchfw.svm._attrs`); the SVC
    guide's "Coming from scikit-learn's SVC" lists what differs. ``dual_coef_``,
    ``intercept_``, ``coef_``, ``problem_dual_coef_`` and ``problem_intercept_`` are
    read-only properties, documented with the methods.

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly", "sigmoid", "precomputed"} or callable, default "rbf"
        As in scikit-learn. ``"precomputed"``: :meth:`fit` takes the ``(m, m)`` Gram matrix
        :math:`K_{ij} = k(x_i, x_j)` of the training examples in place of ``X``, and
        :meth:`predict` / :meth:`decision_function` take the ``(n, m)`` matrix of kernel
        values between the test and the training examples (``support_`` indexes its columns;
        ``support_vectors_`` is empty). A callable ``kernel(A, B)`` receives host arrays of
        ``n_A`` and ``n_B`` rows and returns the ``(n_A, n_B)`` matrix of kernel values; it is
        called on the training data in :meth:`fit` and on the test rows against
        ``support_vectors_`` at prediction. Either trains by the compiled solve on the
        ``m x m`` matrix (see ``dense``), which must fit ``cache_size`` MB on the CPU, with
        numba (a ValueError says so, and how large ``cache_size`` must be, otherwise);
        ``gamma``, ``degree`` and ``coef0`` are not used. A model with a callable kernel
        cannot be saved (its state holds no code).
    C : float, default 2.0
        Regularization (larger fits closer), the seed papers' C: ``LinearSVC(loss="squared_hinge",
        C=c)`` is this model at ``C = 2 c``; the default is LIBLINEAR's C=1 ("What C means").
    gamma : {"scale", "auto"} or float, default "scale"
        Kernel coefficient; ``"scale"`` is ``1 / (n_features * X.var())`` and ``"auto"`` is
        ``1 / n_features``, as in scikit-learn.
    degree : int, default 3
        Degree of the polynomial kernel.
    coef0 : float, default 0.0
        Independent term of the polynomial and sigmoid kernels.
    solver : str, default "swap"
        ``"fw"`` (Frank-Wolfe), ``"away"`` (away steps, MFW), ``"pairwise"``, ``"swap"`` (SWAP,
        seed 000), ``"swap2"`` (SWAP-2o), ``"partan"`` (PARTAN, seed 002), ``"fc"`` (fully
        corrective, CVM-like), ``"sfw"`` / ``"msfw"`` (streaming stochastic FW, SFW / MSFW:
        without / with away steps, seed 001, Ouyang & Gray; not the ``torch.optim`` optimizer
        :class:`torchfw.optim.StochasticFrankWolfe`).
    tol : float or "auto", default "auto"
        Stop when the dual gap is at most ``tol`` times the margin :math:`\rho` (see the module
        docstring). ``"auto"``: 0.1 below 1,000 training examples
        (:data:`torchfw.svm._plan.SMALL_M`: as accurate as LIBSVM there), 0.3 above (test
        accuracy has saturated), and 0.01 where a Gaussian kernel leaves most examples
        without a near neighbour (:mod:`torchfw.svm._isolation`: each decision is then one
        or two support vectors and the intercept), and 0.01 times the number of examples that
        weigh in a decision where that is smaller (:func:`torchfw.svm._plan.stop_tol`).
        Ignored by the streaming solvers, which run ``max_iter`` samples.
    max_iter : int, optional
        Iteration budget per binary problem; default ``100 * n_samples`` (one epoch for
        ``"sfw"``/``"msfw"``), a safety net that converging fits do not reach (see "Convergence
        at large C" in the SVC guide). ``-1``: no limit, as in scikit-learn (not for the
        streaming solvers).
    sample_size : int, optional
        Randomized LMO: pick the FW vertex among this many random examples (seed 002 uses 194).
    cache_size : float, default 200
        Kernel cache in MB (columns on the lazy path, rows or all on the compiled one).
    device : str or torch.device, optional
        Where to train; default: the device of a tensor ``X``, else CPU.
    dtype : torch.dtype, optional
        Precision of kernel values; solver state is float64. By default float32, or float64
        where float32 would round the dual's :math:`1/C` away next to the largest kernel value
        (a polynomial kernel on raw features, a very large C:
        :func:`torchfw.svm._kernel_range.needs_float64`; the features are then the float32
        values). A given dtype is kept.
    class_weight : dict or "balanced", optional
        Multiply C per class, as in scikit-learn.
    random_state : int, numpy RandomState or Generator, optional
        Seed of the initial subset, sampling and probability folds. ``None`` is the fixed seed
        0 (deterministic fits, as LIBSVM's); a ``RandomState`` draws one seed per fit.
    verbose : bool, default False
        Show a progress bar with the gap, on a terminal (elsewhere tqdm draws none).
    warm_start : bool, default False
        Start from the previous solution when refitting on the same data.
    n_init : int, default 20
        Size of the random initial subset whose restricted problem is solved exactly first.
    time_limit : float, optional
        Wall-clock budget in seconds per binary problem.
    average : bool or int, default True
        Streaming solvers (``"sfw"``, ``"msfw"``) only, as in scikit-learn's
        ``SGDClassifier(average=...)``: the model uses the mean of the iterates from iteration
        ``average`` on (``True``: from the middle of the run, ``max_iter // 2``); ``False`` keeps
        the last iterate, seed 001's algorithm as printed. One pass leaves the last iterate's
        threshold at the mercy of its last steps (one-epoch a9a accuracy 63-84% over random
        orders, against 84.9-85.2% averaged; see the SVC guide). Ignored by the other solvers.
    dense : {"auto", True, False}, default "auto"
        Run the whole solve in one compiled call (:mod:`torchfw.svm._dense`: the lazy path's
        iterates without its interpreter). ``"auto"``: on the CPU with numba, for the solvers
        but ``fc``, ``sfw``, ``msfw``, below 200,000 examples, without ``sample_size``,
        ``time_limit`` or a bar drawn for ``verbose``; the ``m x m`` matrix once if it fits
        ``cache_size`` (200 MB: 7,240 examples in float32), else -- or for a binary fit from
        1,000 examples -- a cache of its rows (not the float64 RBF's, nor for one-vs-one pairs
        over the budget). ``False``: the lazy path; ``True``: the
        whole matrix, or an error. Precomputed and callable kernels always take it.
    probability : bool, default False
        Fit Platt sigmoids on out-of-fold decision values (internal stratified 5-fold
        cross-validation, five extra fits, as LIBSVM's ``-b 1``) so that :meth:`predict_proba`
        is available; several classes couple their pairwise probabilities (one-vs-one, Wu, Lin
        & Weng 2004, as LIBSVM) or normalize their one-vs-rest ones (:mod:`torchfw.svm.calibration`).
        The fits then stop at ``min(tol, 0.05)`` (:data:`torchfw.svm._plan.PROBABILITY_TOL`).
    multi_class : {"auto", "ovr", "ovo"}, default "auto"
        How more than two classes are trained (:mod:`torchfw.svm._multiclass`): ``"ovr"``, one
        problem per class against all others, predicting by the largest decision value;
        ``"ovo"``, one problem per pair of classes on their examples only, predicting by vote
        (LIBSVM's and scikit-learn's scheme). ``"auto"`` takes the faster at equal accuracy, as
        measured (``benchmarks/svm_small.py``; the SVC guide): one-vs-one for three classes, from
        1,500 examples (:data:`torchfw.svm._multiclass.OVO_FROM`) unless its pairs are tiny
        (:data:`~torchfw.svm._multiclass.TINY_PAIR`), for at most 6 classes from 450
        examples (:data:`~torchfw.svm._multiclass.OVO_FEW_FROM`), or with
        ``decision_function_shape="ovo"``, else one-vs-rest. The scheme used is ``multi_class_``.
    decision_function_shape : {"ovr", "ovo"}, default "ovr"
        As in scikit-learn: the shape of :meth:`decision_function` for more than two classes.
        With ``multi_class="ovo"``, ``"ovr"`` turns the pair values into one column per class
        (votes plus confidences in (-1/3, 1/3)) and ``"ovo"`` returns the ``k(k-1)/2`` pair
        values (positive for the first class of the pair); ``multi_class="ovr"`` has ``k``
        columns and accepts ``"ovr"`` only.
    break_ties : bool, default False
        As in scikit-learn: with ``multi_class="ovo"`` and ``decision_function_shape="ovr"``,
        :meth:`predict` takes the argmax of :meth:`decision_function` (ties in votes broken by
        confidence) instead of LIBSVM's vote (ties to the lowest class index).
    shrinking : bool, default True
        ``loss="hinge"``: LIBSVM's shrinking (the last check is over all examples either way).
        Otherwise accepted and unused: the Frank-Wolfe solvers on the simplex keep no working
        set to shrink.
    loss : {"squared_hinge", "hinge"}, default "squared_hinge"
        ``"squared_hinge"``: the L2-SVM above, on the simplex. ``"hinge"``: LIBSVM's and
        scikit-learn's model (the L1-SVM, an unregularized bias) at the same ``C``, whose dual
        :math:`\min \tfrac12 \alpha^\top Q\alpha - e^\top\alpha` over
        :math:`0 \le \alpha_i \le C_i`, :math:`y^\top\alpha = 0`,
        :math:`Q_{ij} = y_i y_j k(x_i, x_j)` is solved by pairwise Frank-Wolfe steps with
        LIBSVM's second-order pair selection (Fan, Chen & Lin 2005; seed 000's SWAP-2o) and
        exact clipped steps -- SMO -- to LIBSVM's maximal violation ``tol`` (``"auto"``:
        1e-3, LIBSVM's), with LIBSVM's intercept (:mod:`torchfw.svm._hinge`). ``max_iter``
        defaults to LIBSVM's ``max(10^7, 100 n)``; ``solver``, ``n_init``, ``average`` and
        ``warm_start`` are not used, ``sample_size`` and ``time_limit`` are errors. CPU only;
        several classes default to one-vs-one, LIBSVM's scheme.

    Attributes
    ----------
    classes_, support_, support_vectors_, n_support_, class_weight_, fit_status_, shape_fit_
        As scikit-learn's SVC (int32 ``support_``, class by class; ``n_support_`` per class).
    multi_class_ : str
        ``"ovr"`` or ``"ovo"``: the scheme used (``multi_class="auto"`` resolved).
    n_iter_ : ndarray of int32
        Solver iterations per binary problem (a problem solved by its start counts 1).
    result_ : Result or sequence of Result
        The solver's result (gap history, status, step counts): one :class:`~torchfw.Result`
        for a binary problem, a sequence of them (one per binary problem) for a multiclass
        fit; :func:`torchfw.result.problem_results` gives a list in every case.
    """

    _estimator_kind = "classifier"
    _state_format = "torchfw.SVC"

    # Fitted in fit (declared for the type checker; no class-level value).
    support_: np.ndarray

    def __init__(self, kernel="rbf", C=2.0, gamma="scale", degree=3, coef0=0.0, solver="swap",
                 tol="auto", max_iter=None, sample_size=None, cache_size=200.0, device=None,
                 dtype=None, class_weight=None, random_state=None, verbose=False,
                 warm_start=False, n_init=20, time_limit=None, average=True, dense="auto",
                 probability=False, multi_class="auto", decision_function_shape="ovr",
                 break_ties=False, shrinking=True, loss="squared_hinge"):
        self.kernel = kernel
        self.C = C
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.sample_size = sample_size
        self.cache_size = cache_size
        self.device = device
        self.dtype = dtype
        self.class_weight = class_weight
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.n_init = n_init
        self.time_limit = time_limit
        self.average = average
        self.dense = dense
        self.probability = probability
        self.multi_class = multi_class
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.shrinking = shrinking
        self.loss = loss

    # -- validation ----------------------------------------------------------------------------

    def _check_params(self) -> None:
        """Raise a ValueError naming the first invalid parameter (:mod:`torchfw.svm._params`)."""
        check_params(self, SOLVERS)

    def _precomputed(self) -> bool:
        """Whether ``kernel="precomputed"`` (``X`` holds kernel values, not features)."""
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _custom_kernel(self) -> bool:
        """Whether the kernel is precomputed or callable: given as values, not by a formula."""
        return callable(self.kernel) or self._precomputed()

    def _make_kernel(self):
        """The kernel object of the fitted model (None for a precomputed kernel)."""
        if self._precomputed():
            return None
        if callable(self.kernel):
            return CallableKernel(self.kernel)
        return make_kernel(self.kernel, self._gamma, self.degree, self.coef0)

    def _resolve_gamma(self, X: Tensor) -> float:
        """``gamma`` as a number (:func:`torchfw.svm.problem.resolve_gamma`)."""
        return resolve_gamma(self.gamma, X)

    def _example_C(self, y_encoded: np.ndarray, n_classes: int,
                   sample_weight: np.ndarray | None = None) -> Tensor | float:
        """Per-example C: ``C`` times the class weight times the sample weight (if any).

        :func:`torchfw.svm.problem.example_C` on the ``n_classes`` classes of ``classes_``.
        """
        return example_C(self.C, self.class_weight, y_encoded, self.classes_[:n_classes],
                         sample_weight)

    # -- fitting -------------------------------------------------------------------------------

    @atomic_fit  # a fit that does not finish leaves the estimator as it was
    def fit(self, X, y, sample_weight=None):
        """Fit the SVM on ``X`` (dense or sparse, ``(n_samples, n_features)``) and labels ``y``.

        ``sample_weight`` multiplies each example's C (scikit-learn's meaning); weights <= 0
        leave the example out. A callable kernel takes any ``X`` (a list of strings) as given.
        """
        return self._fit_input(X, y, sample_weight, {})

    def _fit_input(self, X, y, sample_weight, overrides: dict) -> SVC:
        """:meth:`fit`, with ``overrides`` replacing fields of the resolved plan
        (:func:`torchfw.svm._plan.fit_planned`; empty for :meth:`fit`)."""
        self._check_params()
        device = resolve_device(self.device)
        kdtype = feature_dtype(self.dtype)
        self._begin_fit(X)
        objects = None
        if callable(self.kernel) and not _svc_custom.numeric(X):
            # scikit-learn passes any X to a callable kernel (strings, graphs, ...): the
            # function gives the Gram matrix, the rows stand in as their indices.
            objects = X if isinstance(X, np.ndarray) else list(X)
            X = torch.arange(len(objects), dtype=kdtype).reshape(-1, 1)
        # One torch thread for a small input from its validation on: converting a 1,257 x 64
        # array took 2 ms per copy on two threads with the other core busy, 0.05 ms on one.
        with few_threads(X, device=device):
            X = self._validate_X(X, reset=True, device=device, dtype=kdtype)
            if self._precomputed() and X.shape[0] != X.shape[1]:
                raise ValueError(f"kernel='precomputed': fit takes the square (n_samples, "
                                 f"n_samples) Gram matrix of the training examples; got a "
                                 f"{X.shape[0]} x {X.shape[1]} matrix")
            self.shape_fit_ = tuple(int(n) for n in X.shape) if objects is None else \
                (len(objects),)
            if X.device.type == "cpu":
                # Right after an install, a small fit runs on the PyTorch paths while the
                # kernels compile in the background (torchfw.utils.cold_start); a fit that
                # only the compiled solve runs compiles them here, as before.
                begin_fit(X.shape[0], needs_compiled=self.dense is True or objects is not None
                          or self.loss == "hinge"
                          or callable(self.kernel) or self._precomputed())
            with few_threads(X):
                return self._fit(X, y, sample_weight, kdtype, objects, overrides)

    def _fit(self, X: Tensor, y, sample_weight, kdtype, objects, overrides) -> SVC:
        y = as_labels(y, X.shape[0], estimator=type(self).__name__)
        n_columns = X.shape[1]
        X, y, sample_weight, kept = drop_zero_weight(X, y, _svc_weights(sample_weight,
                                                                         X.shape[0]))
        if kept is not None and self._precomputed():  # the Gram matrix of the kept examples
            index = torch.from_numpy(kept).to(X.device)
            X = (X.to_dense() if X.layout == torch.sparse_csr else X)[:, index].contiguous()
        if objects is not None:
            if kept is not None:
                objects = _take(objects, kept)
            X = torch.arange(len(objects), dtype=kdtype).reshape(-1, 1)
        classes, y_encoded = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"y has a single class ({classes[0]!r}), 1 class where SVC needs at "
                             f"least two")
        previous = getattr(self, "_alphas", None) if self.warm_start else None
        self.classes_ = classes
        self.n_features_in_ = n_columns  # precomputed: the training examples K_test must list
        self._gamma = 1.0 if objects is not None else self._resolve_gamma(X)
        self._kernel = self._make_kernel()
        C_examples = self._example_C(y_encoded, len(classes), sample_weight)
        # float64 where the L2-SVM's 1/C needs it; the hinge dual has no 1/C term, and float32
        # kernel values are LIBSVM's own precision (its cache holds floats)
        norms = _kernel_range.checked_norms(self, X)  # one pass for both checks below
        kdtype = (self.dtype or torch.float32) if self.loss == "hinge" else \
            _kernel_range.kernel_dtype(self, X, C_examples, norms)
        X = X.to(kdtype)
        # NaN kernels: one-class models; its largest squared row norm serves the probe below
        max_sq = _kernel_range.check_kernel_range(self, X, kdtype, norms)
        self.class_weight_ = _class_weights(self.class_weight, y_encoded, classes)
        hinge = self.loss == "hinge"
        self.multi_class_ = resolve_scheme(self.multi_class, X.shape[0], len(classes),
                                           self.decision_function_shape) \
            if not hinge or self.multi_class != "auto" else "ovo"  # LIBSVM's scheme
        problems = binary_problems(y_encoded, len(classes), self.multi_class_)
        if hinge:
            return self._fit_hinge(X, problems, C_examples, kdtype, objects, kept, y_encoded,
                                   sample_weight, overrides)
        if previous is not None and (len(previous) != len(problems)
                                     or previous[0].shape[0] != X.shape[0]):
            previous = None
        self._X_train = X
        # Every choice and number of the solves, resolved once (torchfw.svm._plan): the paths
        # below read the plan, never the estimator.
        plan = resolve_plan(self, n_examples=X.shape[0], kernel=self._kernel, dtype=kdtype,
                            device=X.device, **overrides)
        batched = not plan.custom_kernel and plan.batches(problems)
        compiled = not plan.custom_kernel and not batched and \
            _svc_fit.takes_compiled(plan, X, problems)
        shared = None
        if isinstance(self.tol, str) and objects is None and \
                _isolation.probed(self._kernel, X.shape[0]):
            # tol="auto" is tighter where the Gaussian kernel isolates the examples or a decision
            # weighs few of them (_isolation), probed on the compiled path's matrix K + 1 where
            # it has one (built here: it does not depend on tol)
            shared = _svc_fit.shared_problem(plan, X, problems, C_examples) if compiled else None
            weights = _isolation.neighbour_weights(self._kernel, X, _svc_fit.full_matrix(shared),
                                                   enough_neighbours(X.shape[0]), max_sq)
            # Resolved again only where the answer moves tol (isolated examples, few
            # neighbours): mostly it leaves the size's tol, and the plan stands.
            if weights is not None and stop_tol(
                    self.tol, X.shape[0], bool(self.probability),
                    weights[0] < _isolation.ISOLATED_K, weights[1]) != plan.tol:
                plan = resolve_plan(self, n_examples=X.shape[0], kernel=self._kernel,
                                    dtype=kdtype, device=X.device,
                                    isolated=weights[0] < _isolation.ISOLATED_K,
                                    neighbours=weights[1], **overrides)
        if plan.custom_kernel:  # the compiled solve on the given m x m matrix, or an error
            _svc_custom.check_custom_kernel(plan, X.shape[0], X.device)
            gram = _svc_custom.train_gram(plan.kernel, X, kdtype) if objects is None else \
                _svc_custom.train_gram(None, torch.from_numpy(
                    plan.kernel.matrix(objects, objects)), kdtype)
            alphas, results = _svc_fit.fit_problems(plan, X, problems, C_examples, previous,
                                                    gram=gram)
        elif batched:
            from ._batched import fit_ovr_batched

            alphas, results = fit_ovr_batched(plan, X, [p.y for p in problems], C_examples,
                                              previous)
        elif compiled:
            alphas, results = _svc_fit.fit_problems(plan, X, problems, C_examples, previous,
                                                    shared=shared)
        else:
            alphas, results = [], []
            for k, problem in enumerate(problems):
                Xk, Ck, alpha0 = restrict(X, C_examples, None if previous is None
                                          else previous[k], problem.rows)
                alpha, result = fit_binary(plan, Xk, problem.y, Ck, alpha0, k)
                alphas.append(scatter(alpha, problem.rows, X.shape[0]))
                results.append(result)
        self._check_hard_margin(results)
        return self._finish_fit(X, problems, alphas, results, kdtype, objects, kept, y_encoded,
                                sample_weight, tol=plan.tol, seed=plan.seed)

    def _fit_hinge(self, X, problems, C_examples, kdtype, objects, kept, y_encoded,
                   sample_weight, overrides) -> SVC:
        """The rest of :meth:`_fit` for ``loss="hinge"`` (:mod:`torchfw.svm._hinge`)."""
        from . import _hinge

        _hinge.check_hinge_options(self, X.device)
        self._X_train = X
        plan = resolve_plan(self, n_examples=X.shape[0], kernel=self._kernel, dtype=kdtype,
                            device=X.device, **overrides)
        gram = None
        if plan.custom_kernel:
            _svc_custom.check_custom_kernel(plan, X.shape[0], X.device)
            gram = _svc_custom.train_gram(plan.kernel, X, kdtype) if objects is None else \
                _svc_custom.train_gram(None, torch.from_numpy(
                    plan.kernel.matrix(objects, objects)), kdtype)
        tol = _hinge.HINGE_TOL if isinstance(self.tol, str) else float(self.tol)
        alphas, results, intercepts = _hinge.fit_hinge(plan, X, problems, C_examples, tol=tol,
                                                       max_iter=self.max_iter,
                                                       shrinking=bool(self.shrinking), gram=gram)
        return self._finish_fit(X, problems, alphas, results, kdtype, objects, kept, y_encoded,
                                sample_weight, tol=tol, seed=plan.seed, intercepts=intercepts)

    def _finish_fit(self, X, problems, alphas, results, kdtype, objects, kept, y_encoded,
                    sample_weight, *, tol, seed, intercepts=None) -> SVC:
        """The fitted model from the solved problems, whatever the loss: support vectors,
        dual coefficients and intercepts (``intercepts``: given by the solver, else read off
        the dual), the user's own rows or indices, and Platt's probabilities at ``tol``."""
        self._alphas = alphas
        self._set_model(X, problems, alphas, results, defer_publish=True,
                        intercepts=intercepts)
        if self._precomputed():  # as scikit-learn: the kernel values stand for the vectors
            self._sv = torch.empty((0, 0), dtype=kdtype, device=X.device)
        if objects is not None:  # the support vectors are the user's own rows
            self._sv_objects = _take(objects, self.support_)
        if kept is not None:  # support_ indexes the rows given to fit
            self.support_ = kept[self.support_].astype(np.int32)
        publish(self)
        self.probA_ = self.probB_ = None
        if self.probability:
            from ._probability import fit_platt

            self.probA_, self.probB_ = fit_platt(
                self, X if objects is None else objects, y_encoded,
                take_rows if objects is None else _take_object_rows, shape=self._scheme(),
                pairwise=self._precomputed(), sample_weight=sample_weight, tol=tol, seed=seed)
        return self

    def _scheme(self) -> str:
        """``"ovo"`` or ``"ovr"``: how the decision columns of a multiclass model were trained."""
        return getattr(self, "multi_class_", "ovr" if self.multi_class == "auto"
                       else self.multi_class)

    # -- prediction ----------------------------------------------------------------------------

    def decision_function(self, X) -> np.ndarray:
        """Signed distance to the boundary on the margin-1 scale; ``(n,)`` or ``(n, k)``.

        For two classes, positive for ``classes_[1]``. For ``k`` classes, ``(n, k)`` (one
        column per class) or, with ``decision_function_shape="ovo"``, ``(n, k(k-1)/2)``: one
        column per pair :math:`(i, j)`, positive for class :math:`i` (see ``multi_class``).
        """
        check_is_fitted(self, "_coef")
        if self._scheme() == "ovo" and len(self.classes_) > 2 and \
                self.decision_function_shape == "ovr":
            return self._decision_values(X, PairVotes(len(self.classes_), True,
                                                      squash_confidence))
        scores = self._decision_values(X)
        self._check_shape(scores)
        return scores

    def _decision_values(self, X, reduce=None) -> np.ndarray:
        """One column per binary problem (a vector for two classes), on the margin-1 scale.

        ``reduce`` (optional) maps a block of rows' values to what is returned for them (the
        votes, the per-class columns): the :math:`k(k-1)/2` pair values of all rows are then
        never held at once (1,000 classes: 4 MB a row).
        """
        check_is_fitted(self, "_coef")
        if self._precomputed():
            scores = _kernel_range.finite_scores(_svc_custom.precomputed_scores(self, X), self)
        elif getattr(self, "_sv_objects", None) is not None:  # a callable kernel, non-numeric X
            scores = _kernel_range.finite_scores(_svc_custom.object_scores(self, X), self)
        else:
            sv = self._sv
            shape = getattr(X, "shape", None)
            work = shape[0] * shape[1] * sv.shape[0] if shape is not None and len(shape) == 2 \
                else None
            with few_threads(X, work, device=sv.device):
                return self._kernel_scores(self._check_predict_input(X), sv, reduce)
        return scores if reduce is None else reduce(scores)

    def _kernel_scores(self, X: Tensor, sv: Tensor, reduce=None) -> np.ndarray:
        out: list[np.ndarray] = []
        bad: list[np.ndarray] = []
        # ~128 MB blocks: the kernel values and what the scores hold besides; 32 MB for
        # one-vs-one's pair values, which are reduced block by block (votes, class columns)
        budget = 2**25 if self._packed() else 2**27
        chunk = max(1, int(budget // (8 * max(1, sv.shape[0] + self._score_columns()))))
        packed_t = packed_rows(self._coef) if self._packed() and sv.device.type == "cpu" \
            else None
        for start in range(0, X.shape[0], chunk):
            rows = torch.arange(start, min(X.shape[0], start + chunk), device=X.device)
            block = take_rows(X, rows)
            n_rows = block.shape[0]
            if n_rows < 8 and block.layout == torch.strided:
                # BLAS takes a matrix-vector path for a single row, whose float32 rounding
                # differs (~1e-7) from the matrix-matrix path of a block: pad to one path so
                # that a row scores the same alone as in a batch (scikit-learn's
                # check_methods_subset_invariance).
                block = torch.cat([block, block[:1].expand(8 - n_rows, -1)])
            K = self._kernel.pairwise(block, sv)[:n_rows]
            fused = reduce.from_kernel(K, packed_t, self._bias, self.n_support_) \
                if isinstance(reduce, PairVotes) else None
            if fused is not None:  # votes as the pair values are made (none stored)
                wrong = np.flatnonzero(~fused[1])
                if wrong.size or bad:
                    bad.append(wrong + start)
                else:
                    out.append(fused[0])
                continue
            scores = self._scores_from_kernel(K, packed_t).cpu().numpy()
            wrong = _kernel_range.nonfinite_rows(scores)
            if wrong.size or bad:  # reported once all rows are scored
                bad.append(wrong + start)
                continue
            scores = scores[:, 0] if scores.shape[1] == 1 else scores
            out.append(scores if reduce is None else reduce(scores))
        if bad and np.concatenate(bad).size:
            raise _kernel_range.nonfinite_error(np.concatenate(bad), X.shape[0], self)
        return np.concatenate(out)

    def _check_predict_input(self, X) -> Tensor:
        sv = self._sv
        return self._validate_X(X, reset=False, device=sv.device,
                                dtype=sv.dtype if sv.layout == torch.strided
                                else sv.values().dtype)

    def predict(self, X) -> np.ndarray:
        """Predicted class labels.

        Two classes: the sign of the decision value. One-vs-one: LIBSVM's vote (the lowest
        class index on ties; by confidence with ``break_ties=True``). One-vs-rest: the largest
        decision value.
        """
        check_is_fitted(self, "_coef")
        k = len(self.classes_)
        if k == 2:
            return self.classes_[(self._decision_values(X) > 0).astype(int)]
        if self._scheme() == "ovo":  # votes block by block (no k(k-1)/2 columns for all rows)
            # LIBSVM's vote (ties to the lowest index: argmax takes the first maximum), or
            # scikit-learn's break_ties (the argmax of the "ovr"-shaped columns)
            index = self._decision_values(X, PairVotes(
                k, bool(self.break_ties), (lambda v, c: np.argmax(squash_confidence(v, c), 1))
                if self.break_ties else (lambda v, c: np.argmax(v, axis=1))))
            return self.classes_[index]
        return self.classes_[np.argmax(self._decision_values(X), axis=1)]

    def _has_probability(self) -> bool:
        if not self.probability:
            raise AttributeError("predict_proba is available with SVC(probability=True)")
        return True

    @available_if(_has_probability)
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities ``(n, n_classes)`` from the Platt sigmoids (``probability=True``).

        As in LIBSVM and scikit-learn, their argmax may differ from :meth:`predict` on a few
        rows: the sigmoids were fitted out of fold, the decision function in full.
        """
        check_is_fitted(self, "probA_")
        if self.probA_ is None:
            raise _exceptions.NotFittedError("this SVC was fitted with probability=False; refit "
                                             "it with probability=True for predict_proba")
        assert self.probB_ is not None  # fitted with probA_
        from ._probability import platt_proba

        return self._decision_values(X, functools.partial(
            platt_proba, A=self.probA_, B=self.probB_, n_classes=len(self.classes_),
            shape=self._scheme()))

    @available_if(_has_probability)
    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy on ``(X, y)``, weighted by ``sample_weight`` if given."""
        pred = self.predict(X)
        y = as_labels(y, pred.shape[0], estimator=type(self).__name__)
        return accuracy(pred, y, sample_weight)

    # -- export and persistence ----------------------------------------------------------------

    def as_module(self) -> KernelSVMHead:
        """The decision function as an ``nn.Module`` on the support vectors (dense inputs)."""
        check_is_fitted(self, "_coef")
        if self._custom_kernel():
            raise ValueError(f"as_module: a KernelSVMHead evaluates one of the kernels "
                             f"{sorted(KERNELS)} on its support vectors; this SVC's kernel "
                             f"({'precomputed' if self._precomputed() else 'a callable'}) "
                             f"cannot be exported as a head")
        from ..heads import KernelSVMHead

        return KernelSVMHead(self._sv, self._coef, self._bias,
                             kernel=self.kernel, gamma=self._gamma, degree=self.degree,
                             coef0=self.coef0, classes=self.classes_,
                             multi_class=self._scheme(),
                             n_support=self.n_support_ if self._packed() else None)

    def state_dict(self) -> dict:
        """The fitted model as tensors and plain values (loadable with ``weights_only=True``)."""
        check_is_fitted(self, "_coef")
        return svc_state(self)

    @classmethod
    def from_state_dict(cls, state: dict, map_location=None) -> SVC:
        """A fitted model from :meth:`state_dict`'s output, checked field by field first."""
        return from_state(cls, state, map_location)

    @staticmethod
    def _n_samples(X) -> int:
        return int(X.shape[0])

    @property
    def gamma_(self) -> float:
        """The kernel coefficient actually used (``gamma="scale"`` resolved)."""
        check_is_fitted(self, "_gamma")
        return self._gamma
