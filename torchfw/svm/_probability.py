"""``SVC(probability=True)``: Platt sigmoids fitted on out-of-fold decision values.

As LIBSVM's ``-b 1`` does: the training set is split into 5 folds (stratified here, so every
training part holds every class), a model without probabilities is fitted on four and its
decision values taken on the fifth, and one sigmoid per binary problem is fitted to those
out-of-fold values (:func:`torchfw.svm.calibration.fit_sigmoid`). It costs five extra fits.
Prediction maps the final model's decision values through the sigmoids and combines them:
one-vs-rest columns are normalized, one-vs-one pairs are coupled (Wu, Lin & Weng 2004).
"""

from __future__ import annotations

import numpy as np

from .calibration import couple_pairwise, fit_sigmoid, normalize_ovr, sigmoid_proba

__all__ = ["fit_platt", "platt_proba", "stratified_folds"]


def stratified_folds(y_encoded: np.ndarray, n_folds: int, seed) -> list[np.ndarray]:
    """Test indices of ``n_folds`` folds, each class dealt round-robin after a shuffle."""
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(n_folds)]
    offset = 0
    for c in np.unique(y_encoded):
        members = rng.permutation(np.flatnonzero(y_encoded == c))
        for r, i in enumerate(members):
            folds[(r + offset) % n_folds].append(i)
        offset += len(members)
    return [np.sort(np.asarray(f, dtype=np.int64)) for f in folds]


def _problems(shape: str, n_classes: int) -> list[tuple[int, int | None]]:
    """The binary problems behind the decision columns: ``(positive, negative or None)``."""
    if n_classes == 2:
        return [(1, 0)]
    if shape == "ovo":
        return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]
    return [(k, None) for k in range(n_classes)]


def _columns(scores: np.ndarray) -> np.ndarray:
    return scores[:, None] if scores.ndim == 1 else scores


def fit_platt(estimator, X, y_encoded: np.ndarray, take_rows, shape: str = "ovr",
              n_folds: int = 5, pairwise: bool = False,
              sample_weight: np.ndarray | None = None, *, tol: float,
              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sigmoid parameters ``(A, B)``, one pair per decision column of ``estimator``.

    Parameters
    ----------
    estimator : SVC
        The estimator being fitted (its parameters are cloned with ``probability=False``).
    X : Tensor
        Training inputs.
    y_encoded : ndarray of int
        Class indices ``0..k-1`` of the training rows.
    take_rows : callable
        ``take_rows(X, index_tensor)`` selecting rows of ``X`` (dense or CSR).
    shape : {"ovr", "ovo"}
        How the decision columns are laid out for more than two classes.
    pairwise : bool
        ``X`` is a precomputed Gram matrix (dense): a fold's model is fitted on the block of
        its training rows and columns, and its decision values are taken on the held-out rows
        against the training columns.
    sample_weight : ndarray, optional
        The final fit's weights: each fold's fit sees its rows' weights, so that the sigmoids
        are fitted to the model the weights define (``C=10`` and ``C=2`` with weights 5 are
        one model, and get one set of probabilities).
    tol : float
        The ``tol`` the final fit stopped at (its plan's, :attr:`torchfw.svm._plan.FitPlan.tol`):
        the folds stop there too.
    seed : int
        The final fit's seed: the folds and the fold fits draw from it.

    Notes
    -----
    A fold whose training part lacks a class (a class of fewer examples than folds) is
    fitted on the classes it has; a binary problem it cannot train takes LIBSVM's constant
    decision value there (+1 when its training part holds only the problem's positive class,
    -1 when only the negative one, 0 when neither), as LIBSVM's ``svm_binary_svc_probability``.
    """
    import torch

    counts = np.bincount(y_encoded)
    n_folds = int(min(n_folds, len(y_encoded)))
    params = estimator.get_params(deep=False)
    # The folds stop where the final fit does (``tol``, the plan's: tighter with
    # probabilities), and draw from this fit's seed (an int: a RandomState would be shared by
    # the clones).
    params.update(probability=False, verbose=False, warm_start=False, tol=tol,
                  random_state=seed)
    if "multi_class" in params:  # the final model's scheme, not one "auto" picks for a fold
        params["multi_class"] = shape
    n_classes = len(counts)
    problems = _problems(shape, n_classes)
    decision = np.full((len(y_encoded), len(problems)), np.nan)
    classes = estimator.classes_
    for fold in stratified_folds(y_encoded, n_folds, seed):
        train = np.setdiff1d(np.arange(len(y_encoded)), fold)
        present = np.unique(y_encoded[train])
        values = np.zeros((len(fold), len(problems)))
        if len(present) >= 2:
            model = type(estimator)(**params)
            train_t = torch.from_numpy(train).to(getattr(X, "device", "cpu"))
            fold_t = torch.from_numpy(fold).to(getattr(X, "device", "cpu"))
            X_train, X_fold = take_rows(X, train_t), take_rows(X, fold_t)
            if pairwise:  # kernel values: columns are training examples too
                X_train, X_fold = X_train[:, train_t], X_fold[:, train_t]
            weights = None if sample_weight is None else sample_weight[train]
            model.fit(X_train, classes[y_encoded[train]], sample_weight=weights)
            # One column per binary problem (one-vs-one pairs as they are, not per class).
            sub = _columns(model._decision_values(X_fold))
            if len(present) < n_classes:
                sub = _subset_columns(sub, present, shape, problems)
            values = sub
        missing = [c for c, (pos, neg) in enumerate(problems)
                   if len(present) < 2 or pos not in present
                   or (neg is not None and neg not in present)]
        for c in missing:  # LIBSVM's constants for a problem a fold could not train
            pos, neg = problems[c]
            has_pos, has_neg = pos in present, (np.setdiff1d(present, [pos]).size > 0
                                                if neg is None else neg in present)
            values[:, c] = 1.0 if has_pos and not has_neg else \
                -1.0 if has_neg and not has_pos else 0.0
        decision[fold] = values
    A = np.empty(len(problems))
    B = np.empty(len(problems))
    for c, (pos, neg) in enumerate(problems):
        rows = np.ones(len(y_encoded), dtype=bool) if neg is None else \
            (y_encoded == pos) | (y_encoded == neg)
        A[c], B[c] = fit_sigmoid(decision[rows, c], y_encoded[rows] == pos)
    return A, B


def _subset_columns(sub: np.ndarray, present: np.ndarray, shape: str,
                    problems: list[tuple[int, int | None]]) -> np.ndarray:
    """A fold model's columns (trained on the classes ``present``) in the full problem layout.

    Columns of problems the fold could not train are left 0 (the caller fills them).
    """
    rank = {int(c): r for r, c in enumerate(present)}
    inner = _problems(shape, len(present))
    where = {pair: q for q, pair in enumerate(inner)}
    out = np.zeros((sub.shape[0], len(problems)))
    for c, (pos, neg) in enumerate(problems):
        if pos not in rank or (neg is not None and neg not in rank):
            continue
        if len(present) == 2:  # a binary fold model: positive for present[1]
            out[:, c] = sub[:, 0] if rank[pos] == 1 else -sub[:, 0]
        elif neg is None:
            out[:, c] = sub[:, where[(rank[pos], None)]]
        else:
            out[:, c] = sub[:, where[(rank[pos], rank[neg])]]
    return out


def platt_proba(scores: np.ndarray, A: np.ndarray, B: np.ndarray, n_classes: int,
                shape: str = "ovr") -> np.ndarray:
    """Class probabilities ``(n, n_classes)`` from decision values and the fitted sigmoids."""
    cols = _columns(np.asarray(scores, dtype=np.float64))
    p = sigmoid_proba(cols, A[None, :], B[None, :])
    if n_classes == 2:
        return np.column_stack([1.0 - p[:, 0], p[:, 0]])
    if shape == "ovo":
        r = np.full((cols.shape[0], n_classes, n_classes), 0.5)
        first, second = np.triu_indices(n_classes, 1)  # the pairs in _problems' order
        r[:, first, second] = p
        r[:, second, first] = 1.0 - p
        return couple_pairwise(r)
    return normalize_ovr(p)
