"""Class probabilities from SVM decision values: Platt scaling and pairwise coupling.

An SVM's decision value is a margin, not a probability. LIBSVM's ``-b 1`` and scikit-learn's
``SVC(probability=True)`` map it through a sigmoid fitted to out-of-fold decision values
(Platt 2000), with the Newton method and target smoothing of Lin, Lin & Weng (2007),
*A note on Platt's probabilistic outputs for support vector machines*, Machine Learning 68:
for decision values ``d_i`` and labels ``y_i in {+1, -1}``, find

    min_{A,B}  - sum_i [ t_i log p_i + (1 - t_i) log(1 - p_i) ],    p_i = 1 / (1 + exp(A d_i + B)),

with the smoothed targets ``t_i = (N+ + 1)/(N+ + 2)`` for positives and ``1/(N- + 2)`` for
negatives (they keep the fit finite on separable data). Several classes combine their binary
probabilities in one of two ways:

* one-vs-rest: ``p_k`` from class ``k``'s sigmoid, normalized to sum to one;
* one-vs-one: the pairwise probabilities ``r_ij ~ P(i | i or j)`` coupled by the second method of
  Wu, Lin & Weng (2004), *Probability estimates for multi-class classification by pairwise
  coupling*, JMLR 5: ``min_p sum_{i<j} (r_ji p_i - r_ij p_j)^2`` s.t. ``sum p = 1``, a linear
  system whose solution is non-negative (their Theorem 2), as LIBSVM does.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fit_sigmoid", "sigmoid_proba", "normalize_ovr", "couple_pairwise"]


def fit_sigmoid(decision: np.ndarray, positive: np.ndarray, max_iter: int = 100,
                tol: float = 1e-5) -> tuple[float, float]:
    """Fit Platt's sigmoid ``P(y=+1 | d) = 1 / (1 + exp(A d + B))`` (Lin, Lin & Weng 2007).

    Parameters
    ----------
    decision : array of shape (n,)
        Decision values, ideally out-of-fold.
    positive : bool array of shape (n,)
        Whether each example belongs to the positive class.

    Returns
    -------
    A, B : float
    """
    d = np.asarray(decision, dtype=np.float64).ravel()
    pos = np.asarray(positive, dtype=bool).ravel()
    if d.shape != pos.shape or d.size == 0:
        raise ValueError("decision values and labels must be non-empty and of one length")
    if not np.all(np.isfinite(d)):
        raise ValueError("decision values must be finite to fit a sigmoid")
    n_pos = int(pos.sum())
    n_neg = d.size - n_pos
    t = np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    A, B = 0.0, math.log((n_neg + 1.0) / (n_pos + 1.0))
    sigma = 1e-12  # keeps the Hessian positive definite

    def objective(a, b):
        f = a * d + b
        # -[t log p + (1-t) log(1-p)] with p = 1/(1+e^f), stably: t f + log(1 + e^-f) when f >= 0
        return float(np.sum(np.where(f >= 0, t * f + np.log1p(np.exp(-np.abs(f))),
                                     (t - 1.0) * f + np.log1p(np.exp(-np.abs(f))))))

    value = objective(A, B)
    for _ in range(max_iter):
        f = A * d + B
        ef = np.exp(-np.abs(f))
        p = np.where(f >= 0, ef / (1.0 + ef), 1.0 / (1.0 + ef))  # 1 / (1 + e^f)
        q = 1.0 - p
        w = p * q
        h11 = sigma + float(np.sum(d * d * w))
        h22 = sigma + float(np.sum(w))
        h21 = float(np.sum(d * w))
        r = t - p
        g1 = float(np.sum(d * r))
        g2 = float(np.sum(r))
        if abs(g1) < tol and abs(g2) < tol:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        slope = g1 * dA + g2 * dB
        step = 1.0
        while step >= 1e-10:  # backtracking with the sufficient-decrease rule
            new_value = objective(A + step * dA, B + step * dB)
            if new_value < value + 1e-4 * step * slope:
                A, B, value = A + step * dA, B + step * dB, new_value
                break
            step /= 2.0
        else:
            break  # no decrease along the Newton direction: at the optimum to rounding
    return float(A), float(B)


def sigmoid_proba(decision: np.ndarray, A: float | np.ndarray,
                  B: float | np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(A d + B))``, computed without overflow (``A``, ``B`` broadcast)."""
    f = A * np.asarray(decision, dtype=np.float64) + B
    ef = np.exp(-np.abs(f))
    return np.where(f >= 0, ef / (1.0 + ef), 1.0 / (1.0 + ef))


def normalize_ovr(proba: np.ndarray) -> np.ndarray:
    """Rows of one-vs-rest probabilities ``(n, k)`` scaled to sum to one (uniform if all 0)."""
    proba = np.clip(np.asarray(proba, dtype=np.float64), 1e-15, None)
    return proba / proba.sum(axis=1, keepdims=True)


def couple_pairwise(r: np.ndarray) -> np.ndarray:
    """Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2).

    Parameters
    ----------
    r : array of shape (n, k, k)
        ``r[:, i, j]`` estimates ``P(class i | class i or j)``; ``r[:, j, i] = 1 - r[:, i, j]``
        (the diagonal is ignored).

    Returns
    -------
    array of shape (n, k)
        Probabilities, each row summing to one.
    """
    r = np.clip(np.asarray(r, dtype=np.float64), 1e-7, 1.0 - 1e-7)
    n, k, _ = r.shape
    off = ~np.eye(k, dtype=bool)
    # Q_tt = sum_{j != t} r_jt^2, Q_tj = -r_jt r_tj
    rT = np.swapaxes(r, 1, 2)
    Q = -rT * r * off
    Q[:, np.arange(k), np.arange(k)] = np.sum(np.where(off, rT * rT, 0.0), axis=2)
    system = np.zeros((n, k + 1, k + 1))
    system[:, :k, :k] = Q
    system[:, :k, k] = 1.0
    system[:, k, :k] = 1.0
    rhs = np.zeros((n, k + 1))
    rhs[:, k] = 1.0
    p = np.linalg.solve(system, rhs[..., None])[:, :k, 0]
    p = np.clip(p, 0.0, None)  # non-negative in exact arithmetic (Theorem 2); rounding aside
    return p / p.sum(axis=1, keepdims=True)
