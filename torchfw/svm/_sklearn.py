"""The scikit-learn face of :class:`~torchfw.SVC`: its fitted attributes, seeds and tags.

:class:`SklearnSVCMixin` turns the binary problems' dual solutions into the model (torch copies
for prediction, public arrays in scikit-learn's layouts and the input's namespace, see
:mod:`torchfw.svm._attrs`), draws each fit's seed (``random_state=None`` is a fixed seed: fits
are deterministic, as LIBSVM's) and declares the estimator's tags. The helpers read
``sample_weight`` (negative weights drop the example, as scikit-learn's SVC) and non-numeric
``X`` for a callable kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..utils.data import as_sample_weight, take_rows
from ..utils.estimator import check_is_fitted
from ..utils.jit import compiled_kernels
from ._attrs import (
    class_order,
    example_class,
    namespace_of,
    not_one_vs_one,
    publish,
    to_namespace,
    unpack_ovo,
)
from ._kernel_range import finite_margins as _finite_margins
from ._multiclass import (
    BinaryProblem,
    OverRows,
    PairProblems,
    RestProblems,
    _pair_values_compiled,
    ovo_pair_values,
    pair_classes,
)
from ._pairs import BlockAlphas, BlockResults
from .problem import example_C

__all__ = ["SklearnSVCMixin"]


def _svc_weights(sample_weight, n_samples: int) -> np.ndarray | None:
    """``sample_weight`` checked, negative weights set to 0 (the example left out).

    As scikit-learn's SVC (LIBSVM drops the examples of weight <= 0): a negative weight is no
    error, but all weights <= 0 are (nothing to fit).
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    array = np.asarray(sample_weight)
    if array.dtype.kind in "iuf":
        array = np.where(array < 0, 0.0, array)  # NaN stays NaN: refused below
    return as_sample_weight(array, n_samples)


def _class_weights(class_weight, y_encoded: np.ndarray, classes) -> np.ndarray:
    """``class_weight_``: each class's multiplier of C (1 without ``class_weight``)."""
    per_example = example_C(1.0, class_weight, y_encoded, classes)
    if isinstance(per_example, float):
        return np.ones(len(classes))
    first = np.array([np.flatnonzero(y_encoded == c)[0] for c in range(len(classes))])
    return per_example.numpy()[first].astype(np.float64)


def _take(objects, index):
    """Rows ``index`` of non-numeric training input (an array, or a list kept as a list)."""
    index = np.asarray(index, dtype=np.int64)
    if isinstance(objects, np.ndarray):
        return objects[index]
    return [objects[int(i)] for i in index]


def _take_object_rows(objects, index: Tensor):
    """:func:`torchfw.utils.data.take_rows` for non-numeric input (the probability folds)."""
    return _take(objects, index.cpu().numpy())


def _zero_margin_message(C) -> str:
    return ("the SVM's margin is 0: no boundary separates the classes at this C"
            + (" (C=inf is the hard margin, which needs data the kernel separates: no "
               "identical examples with different labels; use a finite C)"
               if np.isinf(float(C)) else ""))


def _n_iters(results) -> np.ndarray:
    """The iterations of every problem's solve (without building a batch's results)."""
    if isinstance(results, BlockResults):
        return results.n_iters()
    return np.array([r.n_iter for r in results], dtype=np.int64)


def _all_converged(results) -> bool:
    """Whether every problem met its stopping rule."""
    if isinstance(results, BlockResults):
        return results.all_converged()
    return all(r.converged for r in results)


class SklearnSVCMixin:
    """What :class:`~torchfw.SVC` shares with scikit-learn's SVC (see the module docstring)."""

    # Set by SVC (declared for the type checker)
    random_state: Any
    C: Any
    kernel: Any
    classes_: np.ndarray
    _X_train: Any
    _scheme: Any
    _precomputed: Any

    def _check_shape(self, scores: np.ndarray) -> None:
        """``decision_function_shape="ovo"`` set (by set_params) on a one-vs-rest fit: an error,
        not ``k`` columns where ``k(k-1)/2`` pair values were asked for."""
        if scores.ndim == 2 and self._scheme() == "ovr" and \
                getattr(self, "decision_function_shape", "ovr") == "ovo":
            raise ValueError("decision_function_shape='ovo' asks for the k(k-1)/2 pair values "
                             "of a one-vs-one model, but this SVC was fitted one-vs-rest "
                             "(multi_class_='ovr'); refit with multi_class='ovo', or set "
                             "decision_function_shape='ovr'")

    def _check_hard_margin(self, results) -> None:
        """C=inf converges only on data the kernel separates: a clear error otherwise."""
        if np.isinf(float(self.C)) and not _all_converged(results):
            worst = int(_n_iters(results).max())
            raise ValueError(f"C=inf (the hard margin) did not converge in {worst} iterations: "
                             f"the margin is near 0, so the data are not (or barely) separable "
                             f"by this kernel (identical or near-identical examples of "
                             f"different classes). Use a finite C, or a larger max_iter if the "
                             f"data are separable")

    def _begin_fit(self, X) -> None:
        """What every fit records first: the input's namespace and the seed of its draws."""
        self._namespace = namespace_of(X)
        self._fit_seed = self._draw_seed()
        self._sv_objects = None

    def _draw_seed(self) -> int:
        """The seed of this fit's random draws (initial subsets, sampling, probability folds).

        ``random_state=None`` is a fixed seed, 0: as LIBSVM, whose fits are deterministic, two
        fits of the same data give the same model. An int is the seed itself; a NumPy
        ``RandomState`` or ``Generator`` gives one draw per fit (scikit-learn's convention:
        refits differ).
        """
        rs = self.random_state
        if rs is None:
            return 0
        if isinstance(rs, np.random.RandomState):
            return int(rs.randint(np.iinfo(np.int32).max))
        if isinstance(rs, np.random.Generator):
            return int(rs.integers(np.iinfo(np.int32).max))
        if isinstance(rs, (bool, np.bool_)) or not isinstance(rs, (int, np.integer)):
            raise ValueError(f"random_state must be None, an int, a numpy RandomState or "
                             f"Generator; got {rs!r}")
        return int(rs)

    def _set_model(self, X: Tensor, problems, alphas, results,
                   defer_publish: bool = False, intercepts=None) -> None:
        """The fitted model from the binary problems over ``X`` and their dual solutions.

        ``problems`` are :class:`~torchfw.svm._multiclass.BinaryProblem` s, or each problem's
        labels over all examples (:math:`\\pm 1`, 0 outside a pair). Keeps the torch copies
        prediction uses (``_sv``, ``_coef``, ``_bias``: one coefficient row per binary problem,
        or for one-vs-one LIBSVM's packed ``(k - 1, n_SV)`` rows, :func:`_ovo_model`) and sets
        the public attributes in scikit-learn's layout (:mod:`torchfw.svm._attrs`;
        ``defer_publish``: the caller publishes once it is done).

        ``intercepts`` (one per problem), when given, are the model's intercepts and the dual
        vectors are already on the margin-1 scale (``loss="hinge"``: coefficients
        :math:`\alpha_i y_i`, intercept :math:`-\rho`); otherwise both come from the L2-SVM's
        simplex solution, scaled by its margin.
        """
        if intercepts is not None:
            rho = np.ones(len(results))
        else:
            # rho = alpha' K~ alpha = 2 f at the alpha the model uses (the tail average if any)
            rho = results.margins() if isinstance(results, BlockResults) else \
                np.array([2.0 * (r.value if r.average is None else r.average_value)
                          for r in results])
        k = len(self.classes_)
        if k > 2 and self._scheme() == "ovo" and (isinstance(problems, PairProblems)
                                                  or isinstance(problems[0], BinaryProblem)):
            support, sv_class, coef, bias = self._ovo_model(problems, alphas, results, rho,
                                                            X.shape[0])
        else:
            support, sv_class, coef, bias = self._problem_rows(problems, alphas, results, rho,
                                                               X.shape[0])
        if intercepts is not None:
            bias = np.asarray(intercepts, dtype=np.float64)
        self.support_ = support.astype(np.int32)
        self.n_support_ = np.bincount(sv_class, minlength=k).astype(np.int32)
        self._sv = take_rows(X, torch.from_numpy(support).to(X.device))
        self._coef = torch.from_numpy(coef).to(X.device)
        self._bias = torch.from_numpy(bias).to(X.device)
        self.result_ = results[0] if len(results) == 1 else results
        # A problem its start already solves (the exact solve on the initial subset) counts
        # one iteration: that solve is the solver's work (scikit-learn's n_iter_ >= 1).
        self.n_iter_ = np.maximum(1, _n_iters(results)).astype(np.int32)
        # scikit-learn's fit_status_: 0 when every problem met its stopping rule, else 1.
        self.fit_status_ = int(not _all_converged(results))
        del self._X_train
        if not defer_publish:
            publish(self)

    def _check_margins(self, A: np.ndarray, rho: np.ndarray, results) -> None:
        """Finite dual values and positive margins, or a clear error."""
        finite_rho = bool(np.isfinite(rho).all())
        if not np.isfinite(A).all() or not (finite_rho or np.isinf(self.C)):
            _finite_margins(A, results)  # raises: the kernel's values overflowed
        if not (finite_rho and rho.min(initial=np.inf) > 0):
            raise ValueError(_zero_margin_message(self.C))

    def _problem_rows(self, problems, alphas, results, rho, m: int):
        """``(support, their classes, coef (n_problems, n_SV), bias)``: one row per problem
        (binary, one-vs-rest, or one-vs-one pairs given as labels over all examples)."""
        # One-vs-rest's labels as the one (k, m) array binary_problems made them in, and the
        # examples' classes, not rebuilt from its rows (RestProblems; a fit of 160 examples
        # takes ~1.7 ms, where every NumPy call of a few microseconds counts)
        labels = getattr(problems, "labels", None)
        if labels is None and problems and isinstance(problems[0], BinaryProblem):
            problems = [p.labels_over(m) for p in problems]
        # All problems at once in NumPy (per-problem tensor ops: a fifth of a 100-example fit)
        A = alphas.by_problem() if isinstance(alphas, BlockAlphas) else None
        if A is None and len(alphas) == 1 and isinstance(alphas[0], Tensor):
            # One problem (two classes): its vector and labels as one-row views, not stacked
            # copies -- the same values, read only below.
            A = alphas[0].detach().cpu().numpy()[None]
            if labels is None:
                labels = np.asarray(problems[0])[None]
        else:
            if A is None:
                A = torch.stack([a.full() if isinstance(a, OverRows) else a
                                 for a in alphas]).cpu().numpy()
            if labels is None:
                labels = np.stack(problems)
        support = np.flatnonzero((A > 0).any(0))
        # Class by class, by index within a class: LIBSVM's and scikit-learn's order.
        sv_class = example_class(labels[:, support], len(self.classes_), self._scheme()) \
            if not isinstance(problems, RestProblems) else problems.classes[support]
        order = class_order(support, sv_class)
        support, sv_class = support[order], sv_class[order]
        signed = A * labels
        self._check_margins(A, rho, results)
        # a new array, divided in place (in the layout NumPy's indexing gives it, column-major,
        # which the predictions' products read: the same sums as before, to the bit)
        coef = signed[:, support]
        np.divide(coef, rho[:, None], out=coef)
        return support, sv_class, coef, signed.sum(1) / rho

    def _ovo_model(self, problems, alphas, results, rho, m: int):
        """``(support, their classes, packed coef (k - 1, n_SV), bias (k(k-1)/2,))`` of a
        one-vs-one fit, built from each pair's dual vector on its own rows.

        A support vector of class :math:`c` keeps its coefficient
        :math:`\\alpha_s y_s / \\rho_p` for the pair :math:`p = (c, o)` in row :math:`o - 1`
        if :math:`o > c`, else in row :math:`o` (LIBSVM's layout, :mod:`torchfw.svm._attrs`).
        Every array here is over the pairs' rows, :math:`(k - 1) m` entries in all: never a
        row per pair over all examples or support vectors (1,000 classes of 2 examples:
        499,500 pairs, 2 million entries against a billion).
        """
        k = len(self.classes_)
        first, second = pair_classes(k)
        if isinstance(problems, PairProblems):  # the pairs' arrays as they are
            sizes, rows, y = problems.sizes, problems.rows, problems.y
        else:
            sizes = np.fromiter((p.rows.shape[0] for p in problems), dtype=np.int64,
                                count=len(problems))
            rows = np.concatenate([p.rows for p in problems])
            y = np.concatenate([p.y for p in problems])
        pair = np.repeat(np.arange(len(problems)), sizes)
        if isinstance(alphas, BlockAlphas):  # all pairs' vectors in one array already
            A = alphas.flat
        else:
            A = torch.cat([a.values if isinstance(a, OverRows) else a[torch.from_numpy(p.rows)]
                           for a, p in zip(alphas, problems, strict=True)]).cpu().numpy()
        self._check_margins(A, rho, results)
        in_first, in_second = first[pair], second[pair]
        cls = np.where(y > 0, in_first, in_second)  # the class of each entry's example
        other = in_first + in_second - cls  # the pair's other class
        example_of = np.full(m, -1, dtype=np.int64)
        example_of[rows] = cls
        is_sv = np.zeros(m, dtype=bool)
        is_sv[rows[A > 0]] = True
        support = np.flatnonzero(is_sv)
        sv_class = example_of[support]
        # Class by class, by index within a class: LIBSVM's and scikit-learn's order.
        order = class_order(support, sv_class)
        support, sv_class = support[order], sv_class[order]
        column = np.full(m, -1, dtype=np.int64)
        column[support] = np.arange(support.shape[0])
        signed = A * y
        # the support vectors' entries only (the row and column of each, on them alone)
        at = column[rows]
        keep = np.flatnonzero(at >= 0)
        other, cls = other[keep], cls[keep]
        packed = np.zeros((max(k - 1, 1), support.shape[0]))
        packed[other - (other > cls), at[keep]] = signed[keep] / rho[pair[keep]]
        bias = np.bincount(pair, weights=signed, minlength=len(problems)) / rho
        return support, sv_class, packed, bias

    def _packed(self) -> bool:
        """Whether the coefficients are LIBSVM's packed one-vs-one rows ``(k - 1, n_SV)``."""
        return len(self.classes_) > 2 and self._scheme() == "ovo"

    def _scores_from_kernel(self, K: Tensor, packed_t=None) -> Tensor:
        """Decision values ``(n, n_problems)`` from the kernel values ``K`` ``(n, n_SV)``
        between ``n`` rows and the support vectors (float64); ``packed_t``: the packed
        coefficients as :func:`~torchfw.svm._multiclass.packed_rows` gives them, if made."""
        coef = self._coef.to(device=K.device, dtype=torch.float64)
        bias = self._bias.to(device=K.device, dtype=torch.float64)
        if self._packed():
            return ovo_pair_values(K.to(torch.float64), coef, bias, self.n_support_, packed_t)
        return K.to(torch.float64) @ coef.T + bias

    def _score_columns(self) -> int:
        """Float64 numbers per test row that :meth:`_scores_from_kernel` holds besides ``K``
        (to size the blocks of rows scored at a time)."""
        k = len(self.classes_)
        if not self._packed():
            return self._bias.shape[0]
        # the pair values, and the torch path's class sums (k, k - 1) where not compiled
        compiled = self._sv.device.type == "cpu" and _pair_values_compiled is not None \
            and compiled_kernels()
        return k * (k - 1) // 2 + (0 if compiled else k * (k - 1))

    # -- scikit-learn's attributes ---------------------------------------------------------------

    @property
    def dual_coef_(self):
        r"""Dual coefficients in scikit-learn's layout: ``(1, n_SV)`` or ``(k - 1, n_SV)``.

        :math:`\alpha_i y_i / \rho` on the margin-1 scale, support vectors class by class;
        one-vs-one packs the pairs as LIBSVM (see :mod:`torchfw.svm._attrs`). A one-vs-rest
        model raises AttributeError (its rows are ``problem_dual_coef_``).
        """
        check_is_fitted(self, "_coef")
        if self._dual_coef_public is None:
            raise not_one_vs_one("dual_coef_")
        return self._dual_coef_public

    @property
    def intercept_(self):
        """Intercepts ``(1,)`` or ``(k(k-1)/2,)`` (pairs (0, 1), (0, 2), ...), as scikit-learn.

        A one-vs-rest model raises AttributeError (its ``k`` are ``problem_intercept_``).
        """
        check_is_fitted(self, "_coef")
        if self._dual_coef_public is None:
            raise not_one_vs_one("intercept_")
        return self._problem_intercept_public

    @property
    def problem_dual_coef_(self):
        """One row per binary problem ``(n_problems, n_SV)``: 1, ``k`` (one-vs-rest) or
        ``k(k-1)/2`` (one-vs-one pairs, zeros outside a pair's classes).

        A one-vs-one model keeps LIBSVM's packed ``dual_coef_`` only: these rows are built from
        it on each read, ``k(k-1)/2 x n_SV`` numbers (1,000 classes: 499,500 rows).
        """
        check_is_fitted(self, "_coef")
        if self._problem_dual_coef_public is None:  # one-vs-one: unpacked on demand
            coef = unpack_ovo(self._coef.detach().to(torch.float64).cpu().numpy(),
                              self.n_support_)
            return to_namespace(torch.from_numpy(coef).to(self._coef.device), self._namespace)
        return self._problem_dual_coef_public

    @property
    def problem_intercept_(self):
        """One intercept per binary problem ``(n_problems,)``, as ``problem_dual_coef_``."""
        check_is_fitted(self, "_coef")
        return self._problem_intercept_public

    @property
    def coef_(self):
        r"""Primal weights of a linear kernel, ``(1, d)`` or ``(k(k-1)/2, d)``, read-only.

        :math:`w_p = \sum_s \beta_{ps} x_s` per binary problem (as scikit-learn's, so that
        ``X @ coef_.T + intercept_`` is the pair values). Other kernels raise AttributeError.
        """
        check_is_fitted(self, "_coef")
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        if self._dual_coef_public is None:
            raise not_one_vs_one("coef_")
        sv = self._sv.to_dense() if self._sv.layout == torch.sparse_csr else self._sv
        if self._packed():  # w of pair (i, j): class i's vectors by row j - 1, j's by row i
            w = self._scores_from_kernel(sv.to(torch.float64).T).T
            w = w - self._bias.to(device=w.device, dtype=torch.float64)[:, None]
        else:
            w = self._coef @ sv.to(torch.float64)
        if self._namespace == "torch":
            return w
        out = w.cpu().numpy()
        if self._namespace == "scipy":
            import scipy.sparse as sp

            out = sp.csr_matrix(out)
            out.data.flags.writeable = False
        else:
            out.flags.writeable = False
        return out

    def __sklearn_tags__(self):
        # As scikit-learn's SVC: a precomputed kernel's X is pairwise, so that its
        # cross-validation tools slice the test rows' columns by the training fold too.
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        # The float attributes follow the input's namespace, but predict, decision_function and
        # predict_proba return NumPy for any input, and the integer attributes are NumPy:
        # scikit-learn's array-API support (check_array_api_input) asks for all of them in the
        # input's namespace, so it is not claimed.
        tags.array_api_support = False
        # any X goes to a callable kernel, as scikit-learn's
        tags.input_tags.sparse = not self._precomputed()
        if callable(self.kernel):
            tags.input_tags.string = True
        # random_state=None is a fixed seed: fits are deterministic unless a RandomState
        # instance draws a new seed per fit
        tags.non_deterministic = isinstance(self.random_state,
                                            (np.random.RandomState, np.random.Generator))
        return tags

