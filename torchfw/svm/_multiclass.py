r"""How an :class:`~torchfw.SVC` with several classes splits into binary problems, and back.

**One-vs-one** (LIBSVM's and scikit-learn's scheme; Knerr, Personnaz & Dreyfus 1990; Hsu & Lin,
"A comparison of methods for multiclass support vector machines", IEEE TNN 13(2), 2002): one
problem per pair of classes :math:`i < j`, on the examples of those two classes only, labelled
:math:`+1` for class :math:`i`. With :math:`k` classes of about :math:`m/k` examples each, the
:math:`k(k-1)/2` problems hold :math:`2m/k` examples each, so their kernel work totals about
:math:`2m^2/k` entries against :math:`k m^2` for one-vs-rest. Prediction is LIBSVM's vote: each
pair votes for :math:`i` when its decision value is positive and for :math:`j` otherwise; the
class with most votes wins, the lowest class index on ties.

**One-vs-rest**: one problem per class :math:`c` over all examples, labelled :math:`+1` for
:math:`c`; prediction is the argmax of the :math:`k` decision values.

**Decision shape.** As scikit-learn's ``decision_function_shape="ovr"`` does for its one-vs-one
SVC, :func:`ovo_to_ovr` turns the :math:`k(k-1)/2` pair values into :math:`k` columns: the votes
plus the summed confidences squashed into :math:`(-1/3, 1/3)`, so that the columns rank classes by
votes first and confidence second.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..utils.data import take_rows

__all__ = ["BinaryProblem", "binary_problems", "class_pairs", "ovo_votes", "ovo_vote",
           "ovo_to_ovr", "restrict", "scatter", "resolve_scheme", "MULTI_CLASS", "OVO_FROM"]

#: Accepted values of ``SVC(multi_class=...)``.
MULTI_CLASS = ("auto", "ovr", "ovo")

#: ``multi_class="auto"`` trains one-vs-one from this many training examples on, one-vs-rest
#: below: the measured crossover of ``SVC()`` with the compiled path on threads
#: (``python benchmarks/svc_scheme_crossover.py``, 2-core Intel Xeon; 3 / 10 classes, ms
#: one-vs-rest against one-vs-one): 1,050 examples 8.7 / 13.1 against 6.0 / 12.8; 1,540:
#: 13.9 / 22.3 against 10.5 / 19.1; 2,100: 22.7 / 36.7 against 18.0 / 26.9. Below ~1,000 the
#: 10-class one-vs-one is slower (490: 5.1 against 7.6 ms), and so is digits' (1,257 examples
#: of 64 features, 10 classes: 12.3 against 15.0 ms, ``benchmarks/svm_small.py``).
OVO_FROM = 1500

#: ``multi_class="auto"`` trains one-vs-rest, even from :data:`OVO_FROM` examples on, when the
#: pairs average fewer than ``TINY_PAIR`` examples (many classes: ``2 n / k``) and the matrix of
#: all ``n <= OVR_MAX`` examples fits the default ``cache_size`` in float32 (200 MB: 7,240), so
#: that the ``k`` problems share it. Tiny pairs are all overhead, and each sees two classes'
#: few examples: sector (6,412 tf-idf documents, 105 classes, pairs of ~122), ``SVC()`` on its
#: test file: one-vs-one 31.0 s, 86.0 %; one-vs-rest 9.1 s, 93.0 % (scikit-learn's one-vs-one
#: 241 s, 87.2 %; ``benchmarks/svm_multiclass.py``).
TINY_PAIR, OVR_MAX = 250, 7240


def resolve_scheme(multi_class: str, n_samples: int, n_classes: int,
                   decision_function_shape: str) -> str:
    """``"ovr"`` or ``"ovo"`` for a fit of ``n_samples`` examples of ``n_classes`` classes.

    ``"auto"`` takes one-vs-one from :data:`OVO_FROM` examples on (unless the pairs are tiny:
    :data:`TINY_PAIR`), whenever the pair values are asked for
    (``decision_function_shape="ovo"``), and for at most three classes at any size:
    there the ``k (k - 1) / 2`` pairs are no more problems than the ``k`` of one-vs-rest, and each
    holds two classes' examples, not all. 3 classes of 490 and 1,050 examples: one-vs-one takes
    0.84 and 0.69 of one-vs-rest's time (``benchmarks/results/svc_scheme_crossover.md``); the
    test accuracy by scheme is in ``benchmarks/results/svm_small_c.md`` (``--c-sweep``).
    """
    if multi_class != "auto":
        return multi_class
    pairs_are_fewer = n_classes * (n_classes - 1) // 2 <= n_classes
    tiny_pairs = 2 * n_samples < TINY_PAIR * n_classes and n_samples <= OVR_MAX
    return ("ovo" if (n_samples >= OVO_FROM and not tiny_pairs) or pairs_are_fewer
            or decision_function_shape == "ovo" else "ovr")


class BinaryProblem(NamedTuple):
    """One binary SVM problem of a (multiclass) fit.

    ``rows`` are the training examples it is solved on (``None``: all of them), ``y`` their
    :math:`\\pm 1` labels (over ``rows``, or over all examples when ``rows`` is ``None``).
    """

    rows: np.ndarray | None
    y: np.ndarray

    def labels_over(self, m: int) -> np.ndarray:
        """The labels as a vector over all ``m`` examples, 0 for those outside ``rows``."""
        if self.rows is None:
            return self.y
        full = np.zeros(m)
        full[self.rows] = self.y
        return full


def class_pairs(n_classes: int) -> list[tuple[int, int]]:
    """The pairs :math:`(i, j)`, :math:`i < j`, in LIBSVM's order (row-major)."""
    return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]


def binary_problems(y_encoded: np.ndarray, n_classes: int, scheme: str) -> list[BinaryProblem]:
    """The binary problems of a fit on class indices ``y_encoded`` (``0 .. n_classes - 1``).

    Two classes make one problem over all examples, :math:`+1` for class 1 (scikit-learn's
    positive class); more make one per class (``"ovr"``) or one per pair (``"ovo"``).
    """
    if n_classes == 2:
        return [BinaryProblem(None, np.where(y_encoded == 1, 1.0, -1.0))]
    if scheme == "ovr":
        return [BinaryProblem(None, np.where(y_encoded == c, 1.0, -1.0))
                for c in range(n_classes)]
    members = [np.flatnonzero(y_encoded == c) for c in range(n_classes)]
    problems = []
    for i, j in class_pairs(n_classes):
        rows = np.sort(np.concatenate([members[i], members[j]]))
        problems.append(BinaryProblem(rows, np.where(y_encoded[rows] == i, 1.0, -1.0)))
    return problems


def restrict(X, C_examples, alpha0, rows):
    """``(X, C, start)`` of a problem on ``rows`` (all examples when ``rows`` is ``None``)."""
    if rows is None:
        return X, C_examples, alpha0
    index = torch.from_numpy(rows).to(X.device)
    C = C_examples if isinstance(C_examples, float) else C_examples[torch.from_numpy(rows)]
    return take_rows(X, index), C, None if alpha0 is None else alpha0[index.to(alpha0.device)]


def scatter(alpha, rows, m: int):
    """A problem's dual vector over ``rows`` as a vector over all ``m`` examples (0 elsewhere)."""
    if rows is None:
        return alpha
    full = torch.zeros(m, dtype=alpha.dtype, device=alpha.device)
    full[torch.from_numpy(rows).to(alpha.device)] = alpha
    return full


def ovo_votes(decision: np.ndarray, n_classes: int, zero_to_first: bool = False) -> np.ndarray:
    """Votes ``(n, n_classes)`` from pair decision values ``(n, n_classes (n_classes - 1) / 2)``.

    A pair :math:`(i, j)` votes for :math:`i` when its value is positive, for :math:`j`
    otherwise: a value of exactly 0 goes to :math:`j`, as in LIBSVM's ``svm_predict_values``
    (which scikit-learn's ``predict`` runs), or to :math:`i` with ``zero_to_first`` (as in
    scikit-learn's ``"ovr"``-shaped ``decision_function``).
    """
    decision = np.asarray(decision)
    votes = np.zeros((decision.shape[0], n_classes), dtype=np.int64)
    for c, (i, j) in enumerate(class_pairs(n_classes)):
        positive = decision[:, c] >= 0 if zero_to_first else decision[:, c] > 0
        votes[:, i] += positive
        votes[:, j] += ~positive
    return votes


def ovo_vote(decision: np.ndarray, n_classes: int) -> np.ndarray:
    """Winning class index per row: most votes, the lowest index on ties (LIBSVM's rule)."""
    return np.argmax(ovo_votes(decision, n_classes), axis=1)  # argmax takes the first maximum


def ovo_to_ovr(decision: np.ndarray, n_classes: int) -> np.ndarray:
    r"""One column per class from pair values: votes plus confidences in :math:`(-1/3, 1/3)`.

    Class :math:`i`'s confidence sums :math:`+f_{ij}` over its pairs as the first class and
    :math:`-f_{ji}` as the second; it is squashed as :math:`s / (3(|s| + 1))` so that it can
    reorder classes only among those with equal votes (scikit-learn's ``"ovr"`` shape of a
    one-vs-one SVC).
    """
    decision = np.asarray(decision, dtype=np.float64)
    confidence = np.zeros((decision.shape[0], n_classes))
    for c, (i, j) in enumerate(class_pairs(n_classes)):
        confidence[:, i] += decision[:, c]
        confidence[:, j] -= decision[:, c]
    votes = ovo_votes(decision, n_classes, zero_to_first=True)
    return votes + confidence / (3.0 * (np.abs(confidence) + 1.0))
