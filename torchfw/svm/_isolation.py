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
training examples, and their exponentials; not computed for other kernels, an explicit ``tol``,
or when ``tol`` would not change.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["isolated_examples", "neighbour_weights", "ISOLATED_K", "PROBE_ROWS"]

#: The median nearest-neighbour kernel value below which the examples count as isolated.
ISOLATED_K = 0.5
#: Examples whose nearest neighbour is probed (all of them below this many).
PROBE_ROWS = 256
#: Kernel values per block of the probe (4M: 16 MB in float32).
_BLOCK = 1 << 22


def isolated_examples(kernel, X: Tensor) -> bool:
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
    """
    weights = neighbour_weights(kernel, X)
    return weights is not None and weights[0] < ISOLATED_K


def neighbour_weights(kernel, X: Tensor) -> tuple[float, float] | None:
    """Two medians over a sample of examples :math:`i`: of the nearest neighbour's kernel value,
    :math:`\\max_{j \\ne i} k(x_i, x_j)` in :math:`[0, 1]`, and of the summed kernel values of
    all other examples, :math:`n_i = \\sum_{j \\ne i} k(x_i, x_j)` (how many examples weigh in
    a decision at :math:`x_i`, each counted by its weight); None for every kernel but the
    Gaussian one and for fewer than two examples.

    Parameters
    ----------
    kernel : Kernel
        The fit's kernel object (:func:`torchfw.svm.kernels.make_kernel`); only ``"rbf"`` is
        probed, whose diagonal is 1 and whose values fall with the distance.
    X : Tensor
        The training examples ``(m, d)``, dense or CSR, in the fit's precision.
    """
    m = X.shape[0]
    if getattr(kernel, "name", None) != "rbf" or m < 2:
        return None
    from ..utils.data import take_rows
    from ..utils.threads import few_threads
    from .kernels import _matmul_t, _row_norms_sq

    n = min(m, PROBE_ROWS)
    # evenly spaced rows, no random draw: the fit's random streams stay as they were
    rows = torch.linspace(0, m - 1, n, device=X.device).round().long()
    # threads as for the fit on X (one for a small input: the fit runs the probe so)
    with few_threads(X, device=X.device):
        sq = _row_norms_sq(X)
        nearest = torch.empty(n, dtype=torch.float64)
        sums = torch.empty(n, dtype=torch.float64)
        step = max(1, _BLOCK // m)
        for start in range(0, n, step):
            index = rows[start:start + step]
            # squared distances ||x_i||^2 + ||x_j||^2 - 2 <x_i, x_j>: the nearest neighbour is the
            # smallest
            dist = _matmul_t(take_rows(X, index), X).mul_(-2.0)
            dist.add_(sq.to(dist.dtype).unsqueeze(0)).add_(sq[index].to(dist.dtype).unsqueeze(1))
            # the example itself is not its own neighbour (a duplicate elsewhere is: distance 0)
            dist[torch.arange(len(index), device=dist.device), index] = float("inf")
            dist.clamp_(min=0.0)
            nearest[start:start + len(index)] = dist.min(dim=1).values.cpu()
            # exp(-gamma * inf) = 0: the example's own term drops out of its sum
            sums[start:start + len(index)] = dist.mul_(-kernel.gamma).exp_().sum(dim=1).cpu()
    # median of exp(-gamma d^2) = exp(-gamma * median d^2): exp is monotone
    return float(torch.exp(-kernel.gamma * nearest.median())), float(sums.median())
