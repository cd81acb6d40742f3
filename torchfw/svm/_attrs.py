r"""A fitted :class:`~torchfw.SVC`'s public arrays, in scikit-learn's layouts and namespaces.

The solver and :meth:`~torchfw.SVC.predict` work on torch copies kept on the training device:
``_sv`` (the support vectors), ``_coef`` (one row :math:`\alpha_i y_i / \rho` per binary
problem, ``(n_problems, n_SV)``; a one-vs-one model of more than two classes keeps LIBSVM's
packed ``(k - 1, n_SV)`` rows instead, below) and ``_bias`` (``(n_problems,)``). The
attributes users read are derived from them once per fit (and per load) by :func:`publish`:

**Order.** Support vectors are listed class by class (in ``classes_`` order), by training
index within a class, as LIBSVM and scikit-learn list them; ``n_support_`` counts them per
class (:func:`class_order`).

**Layout.** For two classes ``dual_coef_`` is ``(1, n_SV)`` and ``intercept_`` ``(1,)``, with
:math:`f(x) = \sum_s \text{dual\_coef\_}_{0s} k(\text{sv}_s, x) + \text{intercept\_}_0`
positive for ``classes_[1]``. A one-vs-one model packs its :math:`k(k-1)/2` pairs into
LIBSVM's ``(k - 1, n_SV)`` (:func:`pack_ovo`), which is also how it is kept and predicts
(:func:`torchfw.svm._multiclass.ovo_pair_values`: each pair combines two classes' blocks, as
LIBSVM's ``svm_predict_values``; ``problem_dual_coef_``'s row per pair is built on demand
only): a support vector of class :math:`c` keeps its
coefficient for the pair :math:`(c, o)` in row :math:`o - 1` if :math:`o > c`, else in row
:math:`o`; ``intercept_[p]`` is pair :math:`p`'s (pairs :math:`(0, 1), (0, 2), \dots`), the
pair value positive for its first class. A one-vs-rest model has no such layout: its
``(k, n_SV)`` rows are ``problem_dual_coef_``, and ``dual_coef_``, ``intercept_`` and
``coef_`` raise (:func:`not_one_vs_one`).

**Namespace** (scikit-learn's array-API rule): NumPy or SciPy input gives NumPy float64
arrays (SciPy CSR ``support_vectors_`` and ``dual_coef_`` for sparse input, as
scikit-learn); torch input gives torch tensors on
the training device. Integer bookkeeping (``classes_``, ``support_``, ``n_support_``,
``n_iter_``) is NumPy in both cases.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["namespace_of", "example_class", "class_order", "pack_ovo", "unpack_ovo",
           "to_namespace", "publish", "not_one_vs_one"]

#: The namespaces of a fitted model's arrays: ``"numpy"``, ``"scipy"`` (sparse), ``"torch"``.
NAMESPACES = ("numpy", "scipy", "torch")


def namespace_of(X) -> str:
    """``"torch"`` for a tensor, ``"scipy"`` for a SciPy sparse matrix, else ``"numpy"``."""
    if isinstance(X, Tensor):
        return "torch"
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        return "scipy"
    return "numpy"


def example_class(labels: np.ndarray, n_classes: int, scheme: str) -> np.ndarray:
    """The class index of each example from its labels in the binary problems.

    ``labels`` is ``(n_problems, m)`` with :math:`\\pm 1` (0 outside a one-vs-one pair):
    two classes, +1 is class 1; one-vs-rest, +1 in row :math:`c` is class :math:`c`;
    one-vs-one, row :math:`(i, j)` says :math:`i` with +1 and :math:`j` with -1.
    """
    labels = np.asarray(labels)
    if n_classes == 2:
        return (labels[0] > 0).astype(np.int64)
    if scheme == "ovr":
        return np.argmax(labels > 0, axis=0).astype(np.int64)
    from ._multiclass import class_pairs

    out = np.full(labels.shape[1], -1, dtype=np.int64)
    for p, (i, j) in enumerate(class_pairs(n_classes)):
        out[labels[p] > 0] = i
        out[labels[p] < 0] = j
    return out


def class_order(support: np.ndarray, sv_class: np.ndarray) -> np.ndarray:
    """The permutation listing support vectors by class, then by index (LIBSVM's order)."""
    return np.lexsort((support, sv_class))


def pack_ovo(coef: np.ndarray, n_support: np.ndarray) -> np.ndarray:
    """One-vs-one pair rows ``(k(k-1)/2, n_SV)`` packed into LIBSVM's ``(k - 1, n_SV)``.

    The support vectors are listed class by class (``n_support`` of each); see the module.
    """
    from ._multiclass import class_pairs

    k = len(n_support)
    start = np.concatenate([[0], np.cumsum(n_support)])
    packed = np.zeros((k - 1, coef.shape[1]), dtype=coef.dtype)
    for p, (i, j) in enumerate(class_pairs(k)):
        si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
        packed[j - 1, si] = coef[p, si]
        packed[i, sj] = coef[p, sj]
    return packed


def unpack_ovo(packed: np.ndarray, n_support: np.ndarray) -> np.ndarray:
    """The inverse of :func:`pack_ovo`: one row per pair, zeros outside the pair's classes."""
    from ._multiclass import class_pairs

    k = len(n_support)
    start = np.concatenate([[0], np.cumsum(n_support)])
    pairs = class_pairs(k)
    coef = np.zeros((len(pairs), packed.shape[1]), dtype=packed.dtype)
    for p, (i, j) in enumerate(pairs):
        si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
        coef[p, si] = packed[j - 1, si]
        coef[p, sj] = packed[i, sj]
    return coef


def to_namespace(value: Tensor, namespace: str, dtype=None):
    """``value`` as the fitted model's namespace gives it (see the module docstring)."""
    if namespace == "torch":
        return value if dtype is None else value.to(dtype)
    host = value.detach().cpu()
    if host.layout == torch.strided and host.dtype in (torch.float32, torch.float64):
        # NumPy's conversion, not torch's: the same values (float32 widens exactly) and the
        # same sharing (float64 is the tensor's memory), at a third of the cost on the three
        # arrays of a small fit
        return host.numpy().astype(np.float64, copy=False)
    if host.layout == torch.sparse_csr:
        import scipy.sparse as sp

        return sp.csr_matrix((host.values().to(torch.float64).numpy(),
                              host.col_indices().numpy(), host.crow_indices().numpy()),
                             shape=tuple(host.shape))
    return host.to(torch.float64).numpy()


def publish(model) -> None:
    """Set ``model``'s public arrays from its torch copies (``_sv``, ``_coef``, ``_bias``).

    ``model._namespace`` says what they are (:func:`to_namespace`); ``model.n_support_`` must
    already count the support vectors per class, listed class by class.
    """
    ns = model._namespace
    coef = model._coef.detach().to(torch.float64)
    k = len(model.classes_)
    ovo = k > 2 and model._scheme() == "ovo"
    if ovo or k == 2:  # one-vs-one: _coef is the packed layout itself
        model._dual_coef_public = to_namespace(coef, ns)
    else:
        model._dual_coef_public = None
    if ns == "scipy" and model._dual_coef_public is not None:  # as scikit-learn's sparse fit
        import scipy.sparse as sp

        model._dual_coef_public = sp.csr_matrix(model._dual_coef_public)
    # One-vs-one pair rows over all support vectors are built on demand only (SVC's
    # problem_dual_coef_): k(k-1)/2 of them would outgrow the model itself.
    model._problem_dual_coef_public = None if ovo else to_namespace(coef, ns)
    model._problem_intercept_public = to_namespace(model._bias.detach().to(torch.float64), ns)
    if getattr(model, "_sv_objects", None) is not None:  # a callable kernel on non-numeric X
        model.support_vectors_ = model._sv_objects
    else:
        model.support_vectors_ = to_namespace(model._sv, ns)


def not_one_vs_one(name: str) -> AttributeError:
    """The error of a scikit-learn-only attribute read on a one-vs-rest model."""
    return AttributeError(
        f"{name} has scikit-learn's one-vs-one layout, which a one-vs-rest SVC does not have "
        f"(multi_class_='ovr': one binary problem per class). Its coefficients are "
        f"problem_dual_coef_ (n_classes, n_SV) and problem_intercept_ (n_classes,), one row "
        f"per class against the rest; fit with multi_class='ovo' for scikit-learn's "
        f"{name}")
