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

import functools
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..utils.data import take_rows
from ..utils.jit import compiled_kernels, njit

__all__ = ["BinaryProblem", "PairProblems", "RestProblems", "OverRows", "binary_problems",
           "class_pairs", "pair_classes", "pair_sizes",
           "ovo_votes", "ovo_vote", "ovo_to_ovr", "ovo_pair_values", "PairVotes",
           "squash_confidence", "restrict", "scatter",
           "resolve_scheme", "MULTI_CLASS", "OVO_FROM", "OVO_FEW_CLASSES", "OVO_FEW_FROM"]

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

#: ``multi_class="auto"`` trains one-vs-one from ``OVO_FEW_FROM`` examples on when there are at
#: most ``OVO_FEW_CLASSES`` classes: with every pair solved in compiled blocks
#: (:mod:`torchfw.svm._pairs`), few classes make few, half-sized pairs. One-thread CPU time,
#: one-vs-one over one-vs-rest (2-core Xeon under load, the generated sets of
#: ``benchmarks/svc_scheme_crossover.py``): 4 classes of 490 / 1,050 examples 0.94 / 0.84, 6
#: classes 0.95 / 0.90, but 10 classes 1.07 / 0.93; vehicle (634 examples, 4 classes) 0.79,
#: and 1.6 points more accurate on its hold-outs (``benchmarks/svm_multiclass.py``).
OVO_FEW_CLASSES, OVO_FEW_FROM = 6, 450

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
    :data:`TINY_PAIR`), from :data:`OVO_FEW_FROM` on for at most :data:`OVO_FEW_CLASSES`
    classes, whenever the pair values are asked for
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
    few_classes = n_classes <= OVO_FEW_CLASSES and n_samples >= OVO_FEW_FROM
    return ("ovo" if (n_samples >= OVO_FROM and not tiny_pairs) or pairs_are_fewer
            or few_classes or decision_function_shape == "ovo" else "ovr")


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


def pair_sizes(problems) -> np.ndarray | None:
    """The number of examples of each problem, or None when one spans all examples (binary,
    one-vs-rest): without a Python step per pair for :class:`PairProblems`."""
    if isinstance(problems, PairProblems):
        return problems.sizes
    if any(p.rows is None for p in problems):
        return None
    return np.array([p.rows.shape[0] for p in problems], dtype=np.int64)


def class_pairs(n_classes: int) -> list[tuple[int, int]]:
    """The pairs :math:`(i, j)`, :math:`i < j`, in LIBSVM's order (row-major)."""
    return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]


def binary_problems(y_encoded: np.ndarray, n_classes: int,
                    scheme: str) -> list[BinaryProblem] | PairProblems:
    """The binary problems of a fit on class indices ``y_encoded`` (``0 .. n_classes - 1``).

    Two classes make one problem over all examples, :math:`+1` for class 1 (scikit-learn's
    positive class); more make one per class (``"ovr"``) or one per pair (``"ovo"``, as
    :class:`PairProblems`).
    """
    if n_classes == 2:
        return [BinaryProblem(None, np.where(y_encoded == 1, 1.0, -1.0))]
    if scheme == "ovr":
        # one (k, m) array, a row a problem: one NumPy pass instead of two per class
        labels = np.where(np.arange(n_classes)[:, None] == np.asarray(y_encoded)[None, :],
                          1.0, -1.0)
        return RestProblems(labels, y_encoded)
    if n_classes * (n_classes - 1) // 2 * y_encoded.shape[0] <= PAIR_MASK_ENTRIES:
        return _masked_pairs(y_encoded, n_classes)
    # All pairs at once (1,000 classes: 499,500 pairs; a NumPy step per pair took seconds):
    # each pair's examples are its two classes', in index order.
    y_encoded = np.asarray(y_encoded, dtype=np.int64)
    by_class = np.argsort(y_encoded, kind="stable")  # class by class, by index within
    counts = np.bincount(y_encoded, minlength=n_classes)
    start = np.concatenate([[0], np.cumsum(counts)])
    first, second = pair_classes(n_classes)
    sizes = counts[first] + counts[second]
    pair = np.repeat(np.arange(first.size), sizes)
    # position of each entry within its pair: the first class's members, then the second's
    within = np.arange(pair.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    in_first = within < counts[first][pair]
    source = np.where(in_first, start[first][pair] + within,
                      start[second][pair] + within - counts[first][pair])
    rows = by_class[source]
    rows = rows[np.lexsort((rows, pair))]  # by index within each pair
    labels = np.where(y_encoded[rows] == first[pair], 1.0, -1.0)
    return PairProblems(rows, labels, np.concatenate([[0], np.cumsum(sizes)]))


#: Pairs times examples up to which :func:`binary_problems` finds the one-vs-one pairs' examples
#: in a boolean matrix of one row per pair (:func:`_masked_pairs`, a byte an entry: 8 MB at
#: most) rather than by sorting all pairs' entries: the same arrays, for 7 classes of 1,732
#: examples (segment) in 0.65 against 1.7 ms, 6 of 160 (glass) 40 against 150 us, 11 of 396
#: 0.23 against 0.74 ms.
PAIR_MASK_ENTRIES = 2**23


def _masked_pairs(y_encoded: np.ndarray, n_classes: int) -> PairProblems:
    """:func:`binary_problems`' one-vs-one pairs from the matrix ``mask[p, i]`` (example ``i``
    is in pair ``p``'s two classes): its nonzeros in row-major order are each pair's examples
    in index order, pair after pair; labels :math:`+1` for the pair's first class."""
    y_encoded = np.asarray(y_encoded, dtype=np.int64)
    first, second = pair_classes(n_classes)
    members = np.arange(n_classes)[:, None] == y_encoded[None, :]
    pair, rows = np.nonzero(members[first] | members[second])
    counts = np.bincount(y_encoded, minlength=n_classes)
    sizes = counts[first] + counts[second]
    labels = np.where(y_encoded[rows] == first[pair], 1.0, -1.0)
    return PairProblems(rows, labels, np.concatenate([[0], np.cumsum(sizes)]))


class RestProblems(list):
    """The one-vs-rest problems, a :class:`BinaryProblem` per class over all examples, that
    also keep what the model is built from
    (:meth:`~torchfw.svm._sklearn.SklearnSVCMixin._problem_rows`): their labels as the one
    ``(k, m)`` array their rows view (``labels``) and each example's class (``classes``), not
    stacked or read back from the rows again. A list, as every caller of
    :func:`binary_problems` reads it."""

    def __init__(self, labels: np.ndarray, classes: np.ndarray):
        super().__init__(BinaryProblem(None, row) for row in labels)
        self.labels, self.classes = labels, np.asarray(classes, dtype=np.int64)


class PairProblems(Sequence):
    """The one-vs-one pairs' problems in three arrays: all pairs' rows and labels, one after
    the other, and where each pair starts (``offsets``).

    ``problems[k]`` is pair ``k``'s :class:`BinaryProblem` (views, built on read): 499,500
    pairs held as objects took 220 MB and seconds; as arrays, 16 bytes an entry.
    """

    def __init__(self, rows: np.ndarray, y: np.ndarray, offsets: np.ndarray):
        self.rows, self.y, self.offsets = rows, y, offsets.astype(np.int64)

    @property
    def sizes(self) -> np.ndarray:
        """The number of examples of each pair."""
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        k = range(len(self))[k]  # negative indices, and IndexError past the end
        a, b = int(self.offsets[k]), int(self.offsets[k + 1])
        return BinaryProblem(self.rows[a:b], self.y[a:b])

    def __iter__(self) -> Iterator[BinaryProblem]:
        ends = self.offsets.tolist()
        rows, y = self.rows, self.y
        return (BinaryProblem(rows[a:b], y[a:b]) for a, b in zip(ends[:-1], ends[1:]))


def restrict(X, C_examples, alpha0, rows):
    """``(X, C, start)`` of a problem on ``rows`` (all examples when ``rows`` is ``None``)."""
    if rows is None:
        return X, C_examples, alpha0
    index = torch.from_numpy(rows).to(X.device)
    C = C_examples if isinstance(C_examples, float) else C_examples[torch.from_numpy(rows)]
    return take_rows(X, index), C, None if alpha0 is None else alpha0[index.to(alpha0.device)]


class OverRows:
    """A one-vs-one pair's dual vector kept on its own ``rows`` of the ``m`` examples.

    A pair holds the examples of two classes only: scattered over all ``m`` examples, the
    :math:`k(k-1)/2` vectors of a fit would take :math:`k(k-1)m/2` numbers (1,000 classes of
    2 examples: 8 GB), against :math:`(k-1)m` on their rows. It stands for the full vector
    where a fit reads one back (a warm start indexes it by the pair's rows: ``values``, no
    copy); :meth:`full` builds the full vector when something asks for it.
    """

    __slots__ = ("rows", "values", "m")

    def __init__(self, values, rows: np.ndarray, m: int):
        self.values, self.rows, self.m = values, rows, m

    @property
    def shape(self) -> tuple[int]:
        return (self.m,)

    @property
    def device(self):
        return self.values.device

    @property
    def dtype(self):
        return self.values.dtype

    def full(self):
        """The dual vector over all ``m`` examples (0 outside the pair's rows)."""
        out = torch.zeros(self.m, dtype=self.values.dtype, device=self.values.device)
        out[torch.from_numpy(self.rows).to(self.values.device)] = self.values
        return out

    def __getitem__(self, index):
        if isinstance(index, Tensor) and index.dim() == 1 and \
                index.shape[0] == self.rows.shape[0] and \
                np.array_equal(index.cpu().numpy(), self.rows):
            return self.values
        return self.full()[index]


def scatter(alpha, rows, m: int):
    """A problem's dual vector over ``rows`` as one over all ``m`` examples (0 elsewhere):
    the vector itself for ``rows`` None, else an :class:`OverRows` (no dense copy)."""
    if rows is None:
        return alpha
    return OverRows(alpha, rows, m)


def pair_classes(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """The first and second class of every pair, as :func:`class_pairs` orders them (read
    only: up to :data:`KEPT_PAIR_CLASSES` classes the arrays are kept and shared)."""
    if n_classes <= KEPT_PAIR_CLASSES:
        return _kept_pair_classes(n_classes)
    first, second = np.triu_indices(n_classes, 1)
    return first.astype(np.int64), second.astype(np.int64)


#: Classes up to which :func:`pair_classes` keeps its arrays: ``np.triu_indices`` costs about
#: 40 us whatever the size, twice in a one-vs-one fit of iris (1.6 ms).
KEPT_PAIR_CLASSES = 64


@functools.lru_cache(maxsize=KEPT_PAIR_CLASSES)
def _kept_pair_classes(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pair_classes` of ``n_classes``, made read only to be kept."""
    first, second = np.triu_indices(n_classes, 1)
    first, second = first.astype(np.int64), second.astype(np.int64)
    first.flags.writeable = second.flags.writeable = False
    return first, second


def _per_class_sums(values: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums of pair columns ``(n, k(k-1)/2)`` per class ``(n, k)``: over the pairs where the
    class is first, and over those where it is second.

    Without a Python step per pair (1,000 classes: 499,500 of them): the pairs of a first
    class are contiguous in LIBSVM's order, those of a second class after a stable sort.
    """
    n = values.shape[0]
    first, second = pair_classes(n_classes)
    dtype = np.int64 if values.dtype == np.bool_ else values.dtype  # votes: counts
    as_first = np.zeros((n, n_classes), dtype=dtype)
    as_second = np.zeros((n, n_classes), dtype=dtype)
    if first.size == 0 or n == 0:
        return as_first, as_second
    starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
    as_first[:, first[starts]] = np.add.reduceat(values, starts, axis=1, dtype=dtype)
    order = np.argsort(second, kind="stable")
    by_second = second[order]
    starts = np.flatnonzero(np.r_[True, by_second[1:] != by_second[:-1]])
    as_second[:, by_second[starts]] = np.add.reduceat(values[:, order], starts, axis=1,
                                                      dtype=dtype)
    return as_first, as_second


def ovo_votes(decision: np.ndarray, n_classes: int, zero_to_first: bool = False) -> np.ndarray:
    """Votes ``(n, n_classes)`` from pair decision values ``(n, n_classes (n_classes - 1) / 2)``.

    A pair :math:`(i, j)` votes for :math:`i` when its value is positive, for :math:`j`
    otherwise: a value of exactly 0 goes to :math:`j`, as in LIBSVM's ``svm_predict_values``
    (which scikit-learn's ``predict`` runs), or to :math:`i` with ``zero_to_first`` (as in
    scikit-learn's ``"ovr"``-shaped ``decision_function``).
    """
    decision = np.asarray(decision)
    if _votes_compiled is not None and decision.dtype == np.float64 and compiled_kernels():
        votes = np.zeros((decision.shape[0], n_classes), dtype=np.int64)
        confidence = np.zeros((decision.shape[0], n_classes))
        _votes_compiled(np.ascontiguousarray(decision), n_classes, zero_to_first, votes,
                        confidence)
        return votes
    wins = (decision >= 0) if zero_to_first else (decision > 0)
    as_first, as_second = _per_class_sums(wins, n_classes)
    # class j is second in the j pairs (i, j), i < j, and wins those the first loses
    return as_first + (np.arange(n_classes) - as_second)


def ovo_vote(decision: np.ndarray, n_classes: int) -> np.ndarray:
    """Winning class index per row: most votes, the lowest index on ties (LIBSVM's rule)."""
    return np.argmax(ovo_votes(decision, n_classes), axis=1)  # argmax takes the first maximum


class PairVotes:
    """A reduction of one-vs-one pair values to one output per row, from the votes and the
    summed confidences (:func:`ovo_votes`, :func:`ovo_to_ovr`): ``finish(votes, confidence)``.

    Called on pair values ``(n, k(k-1)/2)`` it reduces them; :meth:`from_kernel` makes the
    values and reduces them in one compiled pass, never storing them (``None`` where that
    pass is not available: no numba, or a tensor off the CPU).
    """

    def __init__(self, n_classes: int, zero_to_first: bool, finish):
        self.n_classes, self.zero_to_first, self.finish = n_classes, zero_to_first, finish

    def __call__(self, decision: np.ndarray) -> np.ndarray:
        decision = np.asarray(decision, dtype=np.float64)
        votes = np.zeros((decision.shape[0], self.n_classes), dtype=np.int64)
        confidence = np.zeros((decision.shape[0], self.n_classes))
        if _votes_compiled is not None and compiled_kernels():
            _votes_compiled(np.ascontiguousarray(decision), self.n_classes, self.zero_to_first,
                            votes, confidence)
        else:
            votes = ovo_votes(decision, self.n_classes, self.zero_to_first)
            as_first, as_second = _per_class_sums(decision, self.n_classes)
            confidence = as_first - as_second
        return self.finish(votes, confidence)

    def from_kernel(self, K: Tensor, packed_t: np.ndarray | None, intercept: Tensor,
                    n_support) -> tuple[np.ndarray, np.ndarray] | None:
        """``(output, finite rows)`` of the kernel values ``K`` ``(n, n_SV)``, or None."""
        if _pair_votes_compiled is None or packed_t is None or K.device.type != "cpu" \
                or not compiled_kernels():
            return None
        n = K.shape[0]
        bounds = np.concatenate([[0], np.cumsum(np.asarray(n_support, dtype=np.int64))])
        votes = np.zeros((n, self.n_classes), dtype=np.int64)
        confidence = np.zeros((n, self.n_classes))
        finite = np.ones(n, dtype=np.bool_)
        _pair_votes_compiled(np.ascontiguousarray(K.to(torch.float64).numpy()), packed_t,
                             bounds, intercept.detach().cpu().to(torch.float64).numpy(),
                             self.zero_to_first, votes, confidence, finite)
        return self.finish(votes, confidence), finite


def squash_confidence(votes: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """:func:`ovo_to_ovr`'s columns from votes and summed confidences."""
    return votes + confidence / (3.0 * (np.abs(confidence) + 1.0))


def ovo_to_ovr(decision: np.ndarray, n_classes: int) -> np.ndarray:
    r"""One column per class from pair values: votes plus confidences in :math:`(-1/3, 1/3)`.

    Class :math:`i`'s confidence sums :math:`+f_{ij}` over its pairs as the first class and
    :math:`-f_{ji}` as the second; it is squashed as :math:`s / (3(|s| + 1))` so that it can
    reorder classes only among those with equal votes (scikit-learn's ``"ovr"`` shape of a
    one-vs-one SVC).
    """
    decision = np.asarray(decision, dtype=np.float64)
    if _votes_compiled is not None and compiled_kernels():  # one pass over the pairs, no (n, pairs) temporaries
        votes = np.zeros((decision.shape[0], n_classes), dtype=np.int64)
        confidence = np.zeros((decision.shape[0], n_classes))
        _votes_compiled(np.ascontiguousarray(decision), n_classes, True, votes, confidence)
    else:
        as_first, as_second = _per_class_sums(decision, n_classes)
        confidence = as_first - as_second
        votes = ovo_votes(decision, n_classes, zero_to_first=True)
    return votes + confidence / (3.0 * (np.abs(confidence) + 1.0))


def _cast_vote(votes, confidence, r, i, j, f, zero_to_first):
    """Row ``r``'s vote of the pair ``(i, j)`` with value ``f``: class ``i`` when ``f > 0`` (or
    ``f == 0`` with ``zero_to_first``, LIBSVM's tie rule), else ``j``; ``f`` adds to ``i``'s
    confidence and subtracts from ``j``'s (scikit-learn's ``ovr`` shape)."""
    if f > 0.0 or (zero_to_first and f == 0.0):
        votes[r, i] += 1
    else:
        votes[r, j] += 1
    confidence[r, i] += f
    confidence[r, j] -= f


_cast_vote_in = njit(_cast_vote, fallback=True)  # both vote kernels call it by this name


def _votes_rows(decision, n_classes, zero_to_first, votes, confidence):
    """Votes and summed confidences of pair values, pair after pair (:func:`ovo_votes`,
    :func:`ovo_to_ovr`): one pass, in compiled code (1,000 classes: 499,500 pairs a row)."""
    for r in range(decision.shape[0]):
        p = 0
        for i in range(n_classes):
            for j in range(i + 1, n_classes):
                _cast_vote_in(votes, confidence, r, i, j, decision[r, p], zero_to_first)
                p += 1


_votes_compiled = njit(_votes_rows)


def packed_rows(packed: Tensor) -> np.ndarray:
    """The packed coefficients ``(k - 1, n_SV)`` as the compiled :func:`ovo_pair_values` reads
    them: transposed, contiguous, float64 (made once per prediction, not per block)."""
    return np.ascontiguousarray(packed.detach().cpu().to(torch.float64).numpy().T)


def _class_sums(K, r, packed_t, bounds, G):
    """``G[c, o]``: class ``c``'s kernel values of row ``r`` against packed row ``o``."""
    k = bounds.shape[0] - 1
    G[:, :] = 0.0
    for c in range(k):
        for s in range(bounds[c], bounds[c + 1]):
            v = K[r, s]
            for o in range(k - 1):
                G[c, o] += v * packed_t[s, o]


def _pair_values_rows(K, packed_t, bounds, intercept, out):
    """:func:`ovo_pair_values` in compiled code, row by row (LIBSVM's ``svm_predict_values``).

    ``packed_t`` is the packed coefficients transposed, ``(n_SV, k - 1)``; per row, ``G[c, o]``
    sums class ``c``'s kernel values against row ``o``, then each pair adds two entries.
    """
    k = bounds.shape[0] - 1
    G = np.empty((k, max(k - 1, 1)))
    for r in range(K.shape[0]):
        _class_sums_in(K, r, packed_t, bounds, G)
        p = 0
        for i in range(k):
            for j in range(i + 1, k):
                out[r, p] = G[i, j - 1] + G[j, i] + intercept[p]
                p += 1


def _pair_votes_rows(K, packed_t, bounds, intercept, zero_to_first, votes, confidence,
                     finite):
    """:func:`_pair_values_rows` and :func:`_votes_rows` in one pass: each pair's value is
    voted and summed as it is made, never stored (``finite[r]``: row ``r``'s were finite)."""
    k = bounds.shape[0] - 1
    G = np.empty((k, max(k - 1, 1)))
    for r in range(K.shape[0]):
        _class_sums_in(K, r, packed_t, bounds, G)
        ok = True
        p = 0
        for i in range(k):
            for j in range(i + 1, k):
                f = G[i, j - 1] + G[j, i] + intercept[p]
                if not np.isfinite(f):
                    ok = False
                _cast_vote_in(votes, confidence, r, i, j, f, zero_to_first)
                p += 1
        finite[r] = ok


_class_sums_in = njit(_class_sums)  # the callee, by global name
_pair_votes_compiled = njit(_pair_votes_rows)
_pair_values_compiled = njit(_pair_values_rows)


def ovo_pair_values(K: Tensor, packed: Tensor, intercept: Tensor, n_support,
                    packed_t: np.ndarray | None = None) -> Tensor:
    r"""One-vs-one pair values ``(n, k(k-1)/2)`` from the kernel values ``K`` ``(n, n_SV)``
    between ``n`` rows and all support vectors, in LIBSVM's packed layout.

    ``packed`` is ``(k - 1, n_SV)`` (``dual_coef_``, support vectors class by class,
    ``n_support`` of each): pair :math:`(i, j)`'s value is
    :math:`\sum_{s \in i} K_{\cdot s} eta_{j-1, s} + \sum_{s \in j} K_{\cdot s} eta_{i, s}
    + b_{ij}`, as LIBSVM's ``svm_predict_values`` sums it (Chang & Lin, LIBSVM, Sec. 7).
    ``K`` is computed once for all pairs; each class's block of columns meets ``packed`` in
    one product :math:`G_c = K_{\cdot, s \in c}\, eta_{\cdot, s \in c}^	op` ``(n, k-1)``,
    and each pair adds two entries of :math:`G`: no row per pair over all support vectors.
    On the CPU with numba, row by row in compiled code from ``packed_t``, ``packed``
    transposed as a contiguous float64 array (:func:`packed_rows`; made here if None).
    """
    k = len(n_support)
    n = K.shape[0]
    bounds = np.concatenate([[0], np.cumsum(np.asarray(n_support, dtype=np.int64))])
    if _pair_values_compiled is not None and K.device.type == "cpu" and compiled_kernels():
        out = np.empty((n, k * (k - 1) // 2))
        _pair_values_compiled(np.ascontiguousarray(K.to(torch.float64).numpy()),
                              packed_rows(packed) if packed_t is None else packed_t,
                              bounds, intercept.to(torch.float64).numpy(), out)
        return torch.from_numpy(out)
    G = torch.zeros(n, k, k - 1, dtype=K.dtype, device=K.device)
    for c in range(k):
        a, b = int(bounds[c]), int(bounds[c + 1])
        if b > a:
            G[:, c, :] = K[:, a:b] @ packed[:, a:b].T
    first, second = pair_classes(k)
    # pair (i, j): class i's vectors in row j - 1, class j's in row i
    flat = G.reshape(n, k * (k - 1))
    ia = torch.from_numpy(first * (k - 1) + second - 1).to(K.device)
    ib = torch.from_numpy(second * (k - 1) + first).to(K.device)
    return flat.index_select(1, ia) + flat.index_select(1, ib) + intercept.to(K.dtype)
