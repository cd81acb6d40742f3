r"""Whether a Gaussian kernel leaves the training examples isolated, probed before a fit.

One concern: :func:`neighbour_weights` (and :func:`isolated_examples`, its answer against
:data:`ISOLATED_K`), which :class:`~torchfw.SVC` asks before it resolves ``tol="auto"``
(:func:`torchfw.svm._plan.stop_tol`).

With a ``gamma`` large against the squared distances between neighbouring examples (raw
features: svmguide1's range to 581, LIBSVM's grid up to :math:`\gamma = 8`), the Gaussian kernel
matrix is nearly the identity: :math:`k(x_i, x_j) = e^{-\gamma \|x_i - x_j\|^2} \approx 0` for
every pair but near-duplicates. Nearly every example is then a support vector, and the decision
at a new point is the intercept plus the term of its one or two nearest support vectors,
:math:`f(x) \approx \beta_{nn}\, k(x_{nn}, x) + b/\rho`. Nothing averages the solver's
per-example errors out: a relative gap of 0.3 (``tol="auto"`` from 1,000 examples on, right for
smooth kernels, where each decision sums many support vectors) leaves the intercept and the
single :math:`\beta` far from the optimum. Raw svmguide1 at :math:`C = 2^8` (LIBSVM's
:math:`2^7`), :math:`\gamma = 2^{-1}`, a 5-fold split: stopped at relative gap 0.29, the
intercept :math:`b/\rho` is 0.296 against the exact optimum's 0.358, and the CV accuracy 73.07 %
against the exact L2-SVM's 74.36 % (LIBSVM's too: 0 of 3,089 predictions differ between the two).
At relative gap 0.01 the solve gives 74.36 %.

The probe: for a fixed, evenly spaced sample of up to :data:`PROBE_ROWS` examples, the largest
kernel value with another training example, :math:`\max_{j \ne i} k(x_i, x_j)` (the nearest
neighbour's; the diagonal is 1). The examples are isolated when the median of these is below
:data:`ISOLATED_K`: most examples' nearest neighbour then weighs less than half of themselves in
every decision. Raw svmguide1 (median nearest-neighbour squared distance 11): median 0.004 at
:math:`\gamma = 2^{-1}`, 0.25 at :math:`2^{-3}`, 0.71 at :math:`2^{-5}`; scaled svmguide1
0.976 and above over the whole grid; a9a 0.37 at :math:`2^{-1}`, 0.78 at :math:`2^{-3}`. At
``gamma="scale"`` the expected :math:`\gamma \|x - z\|^2` is about 2, and the probe answers no
but on data whose nearest neighbours are as far as a typical pair.

The same argument holds short of isolation, where a decision weighs a few neighbours: the
probe's second number, the median over the sampled examples of the summed kernel values of the
other examples, :math:`n_i = \sum_{j \ne i} k(x_i, x_j)`, counts them, each by its weight
(:func:`torchfw.svm._plan.stop_tol` scales ``tol="auto"`` with it). Raw svmguide1 at
:math:`\gamma = 2^{-5}`: 2.6-2.8 on its 5-fold training sets, 17-20 at :math:`2^{-7}`; a9a at
:math:`2^{-3}` 645-656, scaled svmguide1 at :math:`2^3` 213-224. The nearest neighbour's value
alone cannot tell these apart: it is 0.61-0.66 on raw svmguide1 at :math:`2^{-5}` and 0.61 or
0.78 on a9a at :math:`2^{-3}` (binary features: the squared distances are even integers, and
the median moves in steps between folds).

Cost: one kernel block of at most :data:`PROBE_ROWS` x ``m`` values, ``m`` the number of
training examples, and their exponentials; not computed for other kernels or an explicit
``tol``. Where the fit builds the whole matrix :math:`K + 1` anyway (the compiled path's shared
matrix, :func:`torchfw.svm._fit.shared_problem`), the probe reads the same rows from it instead
(:func:`_from_matrix`): on iris, wine and breast cancer the block and its dozen tensor
operations were 0.1-0.5 ms of 1.3-3.6 ms fits. The two round differently (float32 dots in
another order, the matrix's own exponential), so the matrix's nearest-neighbour median is taken
only where it lies farther from :data:`ISOLATED_K` than a bound on that difference
(:func:`_rounding_band`); closer, the block decides, so the isolated answer is the block's in
every case. The neighbour sum read from the matrix differs from the block's by rounding only,
which moves ``tol="auto"`` by as little.

In a fit (:func:`neighbour_weights` given ``enough``), compiled passes read the probed rows once
(:func:`_block_rows` after the block's inner products, :func:`_matrix_rows` on the matrix): the
nearest neighbour exactly as before, the neighbour sums as lower bounds or in another order,
taken only where they show the sum beyond ``enough`` (``tol="auto"`` is then the size's
tolerance whatever the sum), else the computation above. So the fit resolves the same ``tol``
bit for bit, for a fraction of the cost: generated 2,000 examples (a 256 x 1,400 block), 1.3
ms of CPU time before, 0.5 ms so; breast cancer's matrix rows 0.12 ms before, 0.05 ms so. Above
twice :data:`FIRST_COLUMNS` examples the block is first computed against that many of them:
where it already shows both bounds (gen2000: a 256 x 256 block), 0.13 ms.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor

from ..utils.jit import compiled_kernels, njit

__all__ = ["isolated_examples", "neighbour_weights", "probed", "ISOLATED_K", "PROBE_ROWS"]

#: The median nearest-neighbour kernel value below which the examples count as isolated.
ISOLATED_K = 0.5
#: Examples whose nearest neighbour is probed (all of them below this many).
PROBE_ROWS = 256
#: Examples against which the probed rows are first compared when their answer may not matter
#: (:func:`neighbour_weights`' ``enough``; only above twice as many examples).
SAMPLE_COLUMNS = 4096
#: Examples against which the probed rows are compared first of all (:data:`SAMPLE_COLUMNS`'
#: argument, above twice as many examples). Generated 2,000-example sets (1,400 examples of
#: 20 features in the fit, ``gamma="scale"``): the median nearest value over 256 columns is
#: 0.55-0.57 against 0.62-0.64 over all of them, its neighbour sums past ``enough``; the probe
#: 0.38 ms of CPU time against every column, 0.13 ms so.
FIRST_COLUMNS = 256
#: Kernel values per block of the probe (4M: 16 MB in float32).
_BLOCK = 1 << 22


def probed(kernel, m: int) -> bool:
    """Whether :func:`neighbour_weights` looks at the data: a Gaussian kernel and at least two
    examples (every other answer is None)."""
    return getattr(kernel, "name", None) == "rbf" and m >= 2


def isolated_examples(kernel, X: Tensor, matrix: np.ndarray | None = None) -> bool:
    """Whether the median over a sample of examples of their nearest neighbour's kernel value,
    :math:`\\max_{j \\ne i} k(x_i, x_j)` (:func:`neighbour_weights`), is below
    :data:`ISOLATED_K` (Gaussian kernels only; False for every other kernel and for fewer than
    two examples).

    Parameters
    ----------
    kernel : Kernel
        The fit's kernel object (:func:`torchfw.svm.kernels.make_kernel`).
    X : Tensor
        The training examples ``(m, d)``, dense or CSR, in the fit's precision.
    matrix : ndarray, optional
        The fit's matrix :math:`K + 1` (:func:`neighbour_weights`).
    """
    weights = neighbour_weights(kernel, X, matrix)
    return weights is not None and weights[0] < ISOLATED_K


def neighbour_weights(kernel, X: Tensor, matrix: np.ndarray | None = None,
                      enough: float | None = None,
                      max_sq: float | None = None) -> tuple[float, float] | None:
    """Two medians over a sample of examples :math:`i`: of the nearest neighbour's kernel value,
    :math:`\\max_{j \\ne i} k(x_i, x_j)` in :math:`[0, 1]`, and of the summed kernel values of
    all other examples, :math:`n_i = \\sum_{j \\ne i} k(x_i, x_j)` (how many examples weigh in
    a decision at :math:`x_i`, each counted by its weight); None for every kernel but the
    Gaussian one and for fewer than two examples.

    With ``enough``, lower bounds of both medians may be returned instead, when they show that
    neither matters: the first at least :data:`ISOLATED_K` (not isolated) and the second at
    least ``enough`` (the neighbour sum from which ``tol="auto"`` no longer changes,
    :func:`torchfw.svm._plan.stop_tol`). They come from the probed rows against
    :data:`FIRST_COLUMNS` evenly spaced examples (above twice as many), then where those do
    not show it against :data:`SAMPLE_COLUMNS` (likewise) (:func:`_medians`): a kernel value is
    non-negative, so the largest and the sum over some of the other examples are at most those
    over all of them, and an order statistic of smaller values is smaller. On w8a (49,749
    examples) this reads 1/12 of the block. On the CPU with the compiled kernels, the second
    median may also be that of lower bounds from one compiled pass over the block or the
    matrix's rows (:func:`_medians`, :func:`_from_matrix`), returned only where it is at least
    ``enough`` beyond rounding; the first is the exact computation's in every case. So a fit
    resolves the very ``tol`` the exact medians give. Without ``enough``, the medians are
    those of the exact computation.

    Parameters
    ----------
    kernel : Kernel
        The fit's kernel object (:func:`torchfw.svm.kernels.make_kernel`); only ``"rbf"`` is
        probed, whose diagonal is 1 and whose values fall with the distance.
    X : Tensor
        The training examples ``(m, d)``, dense or CSR, in the fit's precision.
    matrix : ndarray, optional
        The ``(m, m)`` matrix :math:`K + 1` of ``kernel`` on ``X`` when the fit has built it
        (:func:`torchfw.svm._fit.full_matrix`): the probed rows are read from it, and the
        kernel block is computed only where rounding could tip the isolated answer
        (:func:`_from_matrix`).
    enough : float, optional
        The neighbour sum from which the caller's answer no longer changes.
    max_sq : float, optional
        :math:`\\max_i \\|x_i\\|^2` of ``X`` in float64 when the caller has it
        (:func:`torchfw.svm._kernel_range.check_kernel_range`): the matrix's rounding band
        (:func:`_rounding_band`) then takes no pass over ``X``.
    """
    m = X.shape[0]
    if not probed(kernel, m):
        return None
    if matrix is not None:
        answer = _from_matrix(kernel, X, matrix, _probe_rows(m).numpy(), enough, max_sq)
        if answer is not None:
            return answer
    rows = _probe_rows(m).to(X.device)
    if enough is not None:
        # the smaller sample first: where it answers (most fits at gamma="scale"), a fraction
        # of the block; where it does not, the larger one or every example follows
        for sample in (FIRST_COLUMNS, SAMPLE_COLUMNS):
            if m > 2 * sample:
                columns = _spaced(m, sample).to(X.device)
                bounds = _medians(kernel, X, rows, columns, enough)
                if bounds[0] >= ISOLATED_K and bounds[1] >= enough:
                    return bounds
    return _medians(kernel, X, rows, None, enough)


def _medians(kernel, X: Tensor, rows: Tensor, columns: Tensor | None,
             enough: float | None = None) -> tuple[float, float]:
    """:func:`neighbour_weights`' two medians over ``rows``, their neighbours taken among
    ``columns`` (None: every example).

    With ``enough``, on the CPU with the compiled kernels, the block's rows go through one
    compiled pass (:func:`_block_rows`): the nearest squared distances by the same float
    operations as the tensor computation below (the same bits), and lower bounds of the
    neighbour sums, without the block's seven elementwise passes and their exponentials
    (gen2000's 256 x 1,400 block: 1.4 ms of CPU time, 0.7 ms so). The bounds' median is
    returned where it shows the sums' median at least ``enough`` (:func:`_sums_certified`);
    else the tensor computation runs, as without ``enough``.
    """
    from ..utils.data import take_rows
    from ..utils.threads import few_threads
    from .kernels import _matmul_t, _row_norms_sq

    fast = enough is not None and X.device.type == "cpu" and _block_rows is not None and \
        compiled_kernels()
    n = rows.shape[0]
    others = X if columns is None else take_rows(X, columns)
    width = others.shape[0]
    # each row's bound is summed until it shows its sum at least enough (_sums_certified)
    target = 0.0 if enough is None else 1.01 * enough / _certified_fraction(width, X.dtype)
    if fast and enough is not None and X.layout != torch.sparse_csr:
        with few_threads(X, device=X.device):
            answer = _medians_dense(kernel, X, rows, columns, others, target)
        if _sums_certified(answer[1], enough, width, X.dtype):
            return answer[0], float(_lower_median(answer[1]))
        return _medians(kernel, X, rows, columns)
    # threads as for the fit on X (one for a small input: the fit runs the probe so)
    with few_threads(X, device=X.device):
        sq = _row_norms_sq(X) if columns is None else None
        sq_others = sq if sq is not None else _row_norms_sq(others)
        nearest = torch.empty(n, dtype=torch.float64)
        sums = torch.empty(n, dtype=torch.float64)
        step = max(1, _BLOCK // width)
        for start in range(0, n, step):
            index = rows[start:start + step]
            block = take_rows(X, index)
            sq_block = sq[index] if sq is not None else _row_norms_sq(block)
            # squared distances ||x_i||^2 + ||x_j||^2 - 2 <x_i, x_j>: the nearest neighbour is the
            # smallest
            if X.layout == torch.sparse_csr:
                # the others times the probed rows densified: _matmul_t(block, others) would
                # densify all of the others (w8a: 1.1 s a fit against 0.1 s this way)
                dist = _matmul_t(others, block).T.contiguous()
            else:
                dist = _matmul_t(block, others)
            if fast:
                values = dist.numpy()
                _block_rows(values, sq_others.to(dist.dtype).numpy(),
                            sq_block.to(dist.dtype).numpy(), index.numpy(),
                            _NO_COLUMNS if columns is None else columns.numpy(),
                            kernel.gamma / _BOUND_POWER, target,
                            nearest.numpy()[start:start + len(index)],
                            sums.numpy()[start:start + len(index)],
                            *_work(width + 1, values.dtype))
                continue
            dist.mul_(-2.0)
            dist.add_(sq_others.to(dist.dtype).unsqueeze(0))
            dist.add_(sq_block.to(dist.dtype).unsqueeze(1))
            # the example itself is not its own neighbour (a duplicate elsewhere is: distance 0)
            if columns is None:
                dist[torch.arange(len(index), device=dist.device), index] = float("inf")
            else:
                dist.masked_fill_(index.unsqueeze(1) == columns.unsqueeze(0), float("inf"))
            dist.clamp_(min=0.0)
            nearest[start:start + len(index)] = dist.min(dim=1).values.cpu()
            # exp(-gamma * inf) = 0: the example's own term drops out of its sum
            sums[start:start + len(index)] = dist.mul_(-kernel.gamma).exp_().sum(dim=1).cpu()
    if fast and enough is not None and not _sums_certified(sums.numpy(), enough, width, X.dtype):
        return _medians(kernel, X, rows, columns)
    # median of exp(-gamma d^2) = exp(-gamma * median d^2): exp is monotone
    return float(torch.exp(-kernel.gamma * nearest.median())), float(sums.median())


def _medians_dense(kernel, X: Tensor, rows: Tensor, columns: Tensor | None, others: Tensor,
                   target: float) -> tuple[float, np.ndarray]:
    """:func:`_medians`' compiled pass on dense CPU examples: the median nearest-neighbour
    kernel value and the lower bounds of the neighbour sums (checked by the caller).

    The tensors the tensor computation reads -- the squared norms (:func:`_row_norms_sq`), the
    probed rows (``index_select``) and their inner products with ``others`` (one product of
    the same operands) -- are computed by the same torch calls, so the nearest distances have
    the same bits; everything else is NumPy on the same values: the probed rows' norms picked
    from the others' by index, the work space, and the lower median (``torch.median``'s) of
    the nearest distances by a partition, an exact selection. On gen2000 (a 256 x 1,400
    block) the dozen torch calls this leaves out cost about as much as the compiled pass.
    """
    from .kernels import _row_norms_sq

    n = rows.shape[0]
    width = others.shape[0]
    index_all = rows.numpy()
    sq = _row_norms_sq(X).numpy() if columns is None else None
    sq_others = sq if sq is not None else _row_norms_sq(others).numpy()
    nearest = np.empty(n, dtype=np.float64)
    lower = np.empty(n, dtype=np.float64)
    col = _NO_COLUMNS if columns is None else columns.numpy()
    d2, d2_bits = _work(width + 1, sq_others.dtype)
    step = max(1, _BLOCK // width)
    for start in range(0, n, step):
        index = rows[start:start + step]
        own = index_all[start:start + step]
        block = X.index_select(0, index)
        sq_block = sq[own] if sq is not None else _row_norms_sq(block).numpy()
        dots = (block @ others.T).numpy()  # _matmul_t's product of dense operands
        _block_rows(dots, sq_others, sq_block, own, col, kernel.gamma / _BOUND_POWER, target,
                    nearest[start:start + own.shape[0]], lower[start:start + own.shape[0]],
                    d2, d2_bits)
    # median of exp(-gamma d^2) = exp(-gamma * median d^2), as the tensor computation takes it
    # (torch's exp on the float64 product)
    arg = -kernel.gamma * float(_lower_median(nearest))
    return float(torch.exp(torch.tensor(arg, dtype=torch.float64))), lower


def _lower_median(values: np.ndarray):
    """The lower median of ``values`` (``torch.median``'s: order statistic ``(n - 1) // 2``)."""
    low = (values.shape[0] - 1) // 2
    return np.partition(values, low)[low]


_F64_EPS = float(np.finfo(np.float64).eps)
#: The power of the lower bound :math:`(1 - t / N)_+^N \le e^{-t}` of :func:`_block_rows`.
_BOUND_POWER = 256
_NO_COLUMNS = np.zeros(0, dtype=np.int64)


def _sums_certified(lower: np.ndarray, enough: float, width: int, dtype) -> bool:
    """Whether the lower bounds ``lower`` of the probed rows' neighbour sums (over ``width``
    examples, computed from ``dtype`` values) show that the median of the sums as the tensor
    computation of :func:`_medians` rounds them is at least ``enough``: their lower median
    times :func:`_certified_fraction` is."""
    low = (lower.shape[0] - 1) // 2  # torch.median: the lower median
    return float(np.partition(lower, low)[low]) * _certified_fraction(width, dtype) >= enough


def _certified_fraction(width: int, dtype) -> float:
    """The fraction of its exact value that :func:`_medians`' tensor computation gives at least
    for a neighbour sum of ``width`` terms in ``dtype``.

    That computation rounds each term (the product :math:`\\gamma d^2`, with :math:`\\gamma`
    in ``dtype``, and its exponential: relative errors of a few units :math:`u` of ``dtype``,
    times :math:`\\gamma d^2 \\le 104` where the exponential does not underflow) and sums
    them in ``dtype`` (relative error at most :math:`(w - 1) u`, in any order: Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2002, Sec. 4.2): each sum is at least
    :math:`1 - (w + 256) u` times the exact one, itself at least its bound. An order statistic
    of values each at least :math:`c` times another's is at least :math:`c` times that one's.
    """
    return 1.0 - (width + 256) * torch.finfo(dtype).eps / 2


@functools.lru_cache(maxsize=16)
def _spaced(m: int, count: int) -> Tensor:
    """``count < m`` evenly spaced indices of ``0 .. m - 1`` (:func:`_probe_rows`' spacing),
    kept for the last sizes asked; read only, never written."""
    return torch.linspace(0, m - 1, count).round().long()


@functools.lru_cache(maxsize=16)
def _probe_rows(m: int) -> Tensor:
    """The probed examples: :data:`PROBE_ROWS` evenly spaced ones, or all ``m`` when fewer.

    Evenly spaced, no random draw: the fit's random streams stay as they were. For ``m`` up to
    :data:`PROBE_ROWS`, ``linspace(0, m - 1, m)`` steps by exactly 1 and rounds to every index:
    taken as ``arange(m)``, without the float32 ramp. Kept for the last sizes probed (a fit
    and its refits, cross-validation folds): read only, never written.
    """
    if m <= PROBE_ROWS:
        return torch.arange(m)
    return torch.linspace(0, m - 1, PROBE_ROWS).round().long()


def _from_matrix(kernel, X: Tensor, matrix: np.ndarray, rows: np.ndarray,
                 enough: float | None = None,
                 max_sq: float | None = None) -> tuple[float, float] | None:
    """:func:`neighbour_weights` read from the fit's matrix :math:`K + 1`, or None where
    rounding could make the isolated answer differ from the kernel block's.

    The neighbour sums are the probed rows' sums less :math:`m + 1` (each entry holds
    :math:`k + 1`, the diagonal :math:`k_{ii} + 1 = 2`), in float64, and their lower median
    as the block takes it. With ``enough`` and the compiled kernels, one compiled pass reads
    each probed row once, in place (:func:`_matrix_rows`: its largest entry but the diagonal,
    and its sum); its sums, added in another order than NumPy's, are returned where their
    median is at least ``enough`` beyond the difference of the two orders (each sum of
    :math:`m` values of at most 2 is off by at most :math:`2 m^2 u` in float64, Higham 2002,
    Sec. 4.2); else NumPy's sums are taken, as without ``enough``.

    The block takes the lower median of the probed rows' nearest squared distances
    :math:`d^2` and compares :math:`e^{-\\gamma d^2}` with :data:`ISOLATED_K`; as the kernel
    falls with :math:`d^2`, that is the upper median of their nearest kernel values, order
    statistic :math:`n - 1 - \\lfloor (n - 1) / 2 \\rfloor` of :math:`n`, read here from the
    matrix. An order statistic moves by at most the largest change of its values, so when it
    lies farther from :data:`ISOLATED_K` than the bound of :func:`_rounding_band` on each
    value's difference between the two computations, both give the same answer. ``max_sq``:
    :func:`_rounding_band`'s.
    """
    n = rows.shape[0]
    m = matrix.shape[1]
    fast = enough is not None and _matrix_rows is not None and compiled_kernels()
    if fast:
        width = np.int32 if matrix.dtype == np.float32 else np.int64
        nearest = np.empty(n, dtype=width)
        sums = np.empty(n, dtype=np.float64)
        _matrix_rows(matrix, matrix.view(width), rows, nearest, sums)
        nearest = nearest.view(matrix.dtype)
        sums -= m + 1
    else:
        # the probed rows (a copy: at most PROBE_ROWS x m), the example itself left out (a
        # duplicate elsewhere is a neighbour: k = 1), each row's largest entry
        block = matrix.take(rows, axis=0)
        sums = block.sum(axis=1, dtype=np.float64) - (m + 1)
        block[np.arange(n), rows] = -np.inf
        nearest = block.max(axis=1)
    kth = n - 1 - (n - 1) // 2
    value = float(np.partition(nearest, kth)[kth]) - 1.0  # the matrix holds K + 1
    if abs(value - ISOLATED_K) <= _rounding_band(kernel, X, matrix.dtype, max_sq):
        return None
    low = (n - 1) // 2
    median = float(np.partition(sums, low)[low])
    if fast and median - 4.0 * m * m * _F64_EPS < enough:
        # where the sum may matter, NumPy's (the probed rows copied)
        sums = matrix.take(rows, axis=0).sum(axis=1, dtype=np.float64) - (m + 1)
        median = float(np.partition(sums, low)[low])
    return value, median


def _rounding_band(kernel, X: Tensor, matrix_dtype, max_sq: float | None = None) -> float:
    """A bound on the difference between a kernel value of the probe's block and the same
    entry of the matrix :math:`K + 1` (less 1).

    Both compute :math:`d^2 = \\|x_i\\|^2 + \\|x_j\\|^2 - 2 \\langle x_i, x_j \\rangle` in the
    features' precision (unit roundoff :math:`u`), each with an error of at most
    :math:`(2 d + 4)\\, u\\, (\\|x_i\\|^2 + \\|x_j\\|^2)` over :math:`d` features (sums of
    :math:`d` products: Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, Sec.
    3.1); as :math:`|e^{-a} - e^{-b}| \\le |a - b|` for :math:`a, b \\ge 0`, the two kernel
    values differ by at most :math:`\\gamma` times the sum of both errors, here taken twice
    over. The matrix's float32 exponential (a degree-7 polynomial, relative error below
    :math:`10^{-6}`) and its storage of :math:`k + 1` add at most :math:`16` of its own
    epsilons.

    ``max_sq``, :math:`\\max_i \\|x_i\\|^2` in float64 (:func:`~torchfw.svm._kernel_range.
    max_row_norm_sq`), is computed here when not given.
    """
    d = X.shape[1]
    eps = float(torch.finfo(X.dtype).eps)
    sparse_or_device = X.layout == torch.sparse_csr or X.device.type != "cpu"
    if max_sq is None:
        from ._kernel_range import max_row_norm_sq

        max_sq = max_row_norm_sq(X)
    if not sparse_or_device:
        # raised by 1 %, as when it was summed here in the features' precision: the same band
        max_sq = 1.01 * max_sq
    return 2.0 * kernel.gamma * 2.0 * (2 * d + 4) * eps * 2.0 * max_sq + \
        16.0 * float(np.finfo(matrix_dtype).eps)


# ---------------------------------------------------------------------------------------------
# The compiled passes of the probe: each probed row read once, no temporaries of the block's size
# ---------------------------------------------------------------------------------------------


def _matrix_rows_py(matrix, bits, rows, nearest, sums):
    """``nearest[r]``: the largest entry of row ``i = rows[r]`` of ``matrix`` but the diagonal
    one, as its bits; ``sums[r]``: the row's sum, in float64, in any order (:func:`_from_matrix`
    checks it).

    ``bits`` is ``matrix`` viewed as integers of its width: the entries :math:`k + 1 \\ge 1`
    are positive, whose order is their bits' order, and a largest integer is found in vector
    lanes where a largest float is a chain of dependent comparisons (numba's LLVM does not
    reorder it).
    """
    m = matrix.shape[1]
    for r in range(rows.shape[0]):
        i = rows[r]
        row = matrix[i]
        total = 0.0
        for j in range(m):
            total += row[j]
        b = bits[i]
        best = b[1] if i == 0 else b[0]
        for j in range(i):
            best = max(best, b[j])
        for j in range(i + 1, m):
            best = max(best, b[j])
        nearest[r] = best
        sums[r] = total


def _work(size: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_block_rows`' work space: ``size`` values of ``dtype`` and the same memory viewed
    as integers of their width."""
    values = np.empty(size, dtype=dtype)
    return values, values.view(np.int32 if values.dtype == np.float32 else np.int64)


def _smallest_bits_py(bits, n):
    """The smallest of the first ``n`` entries of ``bits`` (at least one), non-negative floats
    viewed as integers of their width: their order is the floats' order, and a smallest integer
    is found in vector lanes where a smallest float is a chain of dependent comparisons (numba's
    LLVM reorders neither without fast-math flags; gen2000's 256 x 1,400 block: 0.10 ms in
    eight running float minima, 0.02 ms so, wall time on a loaded machine). Exact in any
    order."""
    best = bits[0]
    for j in range(1, n):
        best = min(best, bits[j])
    return best


def _block_rows_py(dots, sq_others, sq_rows, own, columns, scale, target, nearest, lower, d2,
                   d2_bits):
    r"""Rows of :func:`_medians`' block from the inner products ``dots`` (``n x w``, in the
    features' precision): ``nearest[r]``, the smallest squared distance of example ``own[r]``
    to another example, and ``lower[r]``, a lower bound of its neighbour sum.

    The squared distances are those of the tensor computation, operation for operation in the
    same precision: :math:`(-2 \langle x_i, x_j \rangle + \|x_j\|^2) + \|x_i\|^2`, negative
    ones (rounding) taken as 0, the example itself (column ``j`` with ``columns[j] == own[r]``,
    or ``j == own[r]`` when ``columns`` is empty) left out; the smallest of them has the same
    bits. The neighbour sum :math:`\sum_j e^{-\gamma d_j^2}` is bounded below by
    :math:`\sum_j (1 - \gamma d_j^2 / N)_+^N` (``scale`` :math:`= \gamma / N`,
    :math:`N` = :data:`_BOUND_POWER`: :math:`\ln(1 + x) \le x`), which takes eight squarings
    instead of an exponential and is within 0.4 % of it at :math:`\gamma d^2 = 2`, the
    typical pair at ``gamma="scale"``; summed until it reaches ``target`` (a partial sum of
    non-negative terms is a lower bound too). ``d2`` (``width + 1`` values) and ``d2_bits``,
    the same memory as integers (:func:`_work`), are work space: the squared distances are
    non-negative (``+0`` for the clamped ones, ``+inf`` for the example itself), so their
    smallest is taken on their bits (:func:`_smallest_bits`) and read back as a float through
    the extra entry.
    """
    n, width = dots.shape
    for r in range(n):
        row = dots[r]
        s_r = sq_rows[r]
        for j in range(width):
            v = -(row[j] + row[j]) + sq_others[j]  # -2 <x_i, x_j>: exact, as a product by -2
            v = v + s_r
            d2[j] = v if v > 0.0 else v - v  # a clamp at 0 in the features' precision
        i = own[r]
        if columns.shape[0] == 0:
            d2[i] = np.inf
        else:
            q = np.searchsorted(columns, i)
            if q < width and columns[q] == i:
                d2[q] = np.inf
        d2_bits[width] = _smallest_bits(d2_bits, width)
        nearest[r] = d2[width]
        lower[r] = _bound_sum(d2[:width], scale, target)


def _bound_sum_py(d2, scale, target):
    """``sum_j (1 - scale d2_j)_+^256`` (:func:`_block_rows`), stopped once at least
    ``target``, in chunks of :data:`_CHUNK` terms; in any order."""
    n = d2.shape[0]
    total = 0.0
    for lo in range(0, n, _CHUNK):
        for j in range(lo, min(lo + _CHUNK, n)):
            b = 1.0 - scale * d2[j]
            b = b if b > 0.0 else 0.0
            b *= b
            b *= b
            b *= b
            b *= b
            b *= b
            b *= b
            b *= b
            b *= b  # the 8th square: the 256th power (_BOUND_POWER)
            total += b
        if total >= target:
            break
    return total


#: Terms of :func:`_bound_sum` between two looks at its target.
_CHUNK = 128
# Sums in any order (LLVM's vector lanes), checked against their rounding (_sums_certified,
# _from_matrix). No NaN reaches them (finite data: check_kernel_range); infinities do (the
# example's own column), so not LLVM's "no infinities" flag.
_REORDER = {"nnan", "nsz", "reassoc", "contract"}
_smallest_bits = njit(_smallest_bits_py, inline=True)
_bound_sum = njit(_bound_sum_py, fastmath=_REORDER)
_matrix_rows = njit(_matrix_rows_py, fastmath=_REORDER)
_block_rows = njit(_block_rows_py)  # no fastmath: the squared distances' bits are the tensors'
