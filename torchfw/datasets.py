r"""Datasets: synthetic generators, torch <-> SciPy CSR, and the LIBSVM / svmlight reader.

One concern: data sets in memory (making them, converting them). Reading files is the concern of
:mod:`torchfw.io`; its readers are re-exported here.

Reading
-------
:func:`load_svmlight` reads one file in the LIBSVM / svmlight text format into a
``torch.sparse_csr_tensor`` and a float64 label vector; :func:`load_svmlight_files` reads several
files (train / test) with a common number of features. Both live in
:mod:`torchfw.io.svmlight` (a vectorized parser whose numbers are bit-for-bit ``strtod``'s).

Generating
----------
:func:`make_classification_blobs` (small, non-linearly separable problems for demos and tests),
:func:`make_sparse_regression` (wide Lasso problems with a sparse ground truth),
:func:`make_large_classification` (millions of dense float32 examples for scaling benchmarks)
and :func:`make_unscaled_classification` (overlapping classes on a raw 0-100 integer scale, a
badly conditioned problem for dual coordinate descent).
All are deterministic given ``random_state`` and draw from NumPy's PCG64 generator, so the data
do not depend on the torch version or on the device they are moved to.

Converting
----------
:func:`to_scipy_csr` and :func:`from_scipy_csr` share memory where the formats allow. SciPy is
imported only when they are called, so it stays an optional dependency.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from .io.svmlight import _csr_tensor, load_svmlight, load_svmlight_files
from .utils.validation import check_int_at_least, check_nonnegative, resolve_device

__all__ = [
    "load_svmlight",
    "load_svmlight_files",
    "make_classification_blobs",
    "make_sparse_regression",
    "make_large_classification",
    "make_unscaled_classification",
    "to_scipy_csr",
    "from_scipy_csr",
]
# --------------------------------------------------------------------------------------------
# SciPy interoperability
# --------------------------------------------------------------------------------------------


def _import_scipy_sparse():
    try:
        import scipy.sparse as sp
    except ImportError as exc:  # pragma: no cover - scipy is installed wherever tests run
        raise ImportError("this function needs SciPy: pip install scipy") from exc
    return sp


def to_scipy_csr(X, *, matrix=False):
    """Convert a 2-D ``torch.sparse_csr_tensor`` into a SciPy CSR array, sharing memory.

    Parameters
    ----------
    X : torch.Tensor
        A 2-D tensor with ``layout=torch.sparse_csr``. CUDA tensors are first copied to the CPU.
    matrix : bool, default False
        Return a legacy ``scipy.sparse.csr_matrix`` instead of a ``csr_array``. SciPy copies the
        index arrays of a ``csr_matrix`` to int32 when they fit, so only ``csr_array`` is
        guaranteed to share all three arrays with ``X``.

    Returns
    -------
    scipy.sparse.csr_array or scipy.sparse.csr_matrix
        The same matrix. For a CPU tensor of dtype float32 or float64, its ``data``,
        ``indices`` and ``indptr`` are views of the tensor's storage (writing to one changes
        the other). float16 and bfloat16 values are converted to float32 (SciPy's sparse
        routines do not support them).

    Raises
    ------
    TypeError
        If ``X`` is not a CSR tensor.
    ValueError
        If ``X`` is not 2-D.
    ImportError
        If SciPy is not installed.
    """
    if not isinstance(X, torch.Tensor) or X.layout != torch.sparse_csr:
        kind = f"a tensor with layout {X.layout}" if isinstance(X, torch.Tensor) else type(X)
        raise TypeError(f"X must be a torch.sparse_csr_tensor, got {kind}")
    if X.dim() != 2:
        raise ValueError(f"X must be 2-D, got shape {tuple(X.shape)} (batched CSR tensors are "
                         f"not supported)")
    sp = _import_scipy_sparse()
    X = X.detach()
    if X.device.type != "cpu":
        X = X.cpu()
    values = X.values()
    if values.dtype in (torch.float16, torch.bfloat16):
        values = values.float()
    if values.is_complex():
        raise TypeError(f"complex CSR tensors are not supported, got {values.dtype}")
    parts = (values.numpy(), X.col_indices().numpy(), X.crow_indices().numpy())
    shape = tuple(X.shape)
    if matrix:
        return sp.csr_matrix(parts, shape=shape, copy=False)
    return sp.csr_array(parts, shape=shape, copy=False)


def _check_csr_arrays(A) -> None:
    """O(nnz) consistency check of a SciPy CSR matrix, without modifying it.

    torch does not validate CSR tensors by default, and an out-of-range column index would
    corrupt later kernels silently.
    """
    n_rows, n_cols = A.shape
    indptr, indices = np.asarray(A.indptr), np.asarray(A.indices)
    if indptr.shape != (n_rows + 1,):
        raise ValueError(f"A is not a valid CSR matrix: indptr has {indptr.size} entries for "
                         f"{n_rows} rows (expected {n_rows + 1})")
    if indptr[0] != 0 or indptr[-1] > min(indices.size, np.asarray(A.data).size):
        raise ValueError("A is not a valid CSR matrix: indptr must start at 0 and end at most "
                         "at the number of stored entries")
    if np.any(np.diff(indptr) < 0):
        raise ValueError("A is not a valid CSR matrix: indptr is not non-decreasing")
    used = indices[: indptr[-1]]
    if used.size and (used.min() < 0 or used.max() >= n_cols):
        raise ValueError(f"A is not a valid CSR matrix: column indices must be in [0, {n_cols}),"
                         f" found {used.min() if used.min() < 0 else used.max()}")


def from_scipy_csr(A, *, dtype=None, device=None):
    """Convert a SciPy sparse matrix or array into a ``torch.sparse_csr_tensor``.

    Parameters
    ----------
    A : scipy.sparse matrix or array
        Any 2-D SciPy sparse format; non-CSR formats are converted with ``A.tocsr()``.
        Unsorted or duplicate column indices are put in canonical form (duplicates summed, as
        SciPy defines them) on a copy; ``A`` itself is never modified.
    dtype : torch.dtype, optional
        Values dtype. By default float32 and float64 values keep their dtype and anything else
        (integers, booleans, float16) becomes ``torch.get_default_dtype()``.
    device : str or torch.device, optional
        Where to put the tensor (default: CPU).

    Returns
    -------
    torch.Tensor
        A ``torch.sparse_csr_tensor`` with int64 indices. On the CPU, when ``A`` is already a
        canonical CSR with int64 indices and the value dtype is kept, the tensor shares its
        three arrays with ``A``; int32 indices (SciPy's usual choice) are widened on a copy.

    Raises
    ------
    TypeError
        If ``A`` is not a SciPy sparse matrix, or holds complex values, or ``dtype`` is not a
        floating-point torch dtype.
    ValueError
        If ``A`` is not 2-D or its index arrays are inconsistent (out-of-range column index,
        non-monotone ``indptr``).
    ImportError
        If SciPy is not installed.
    """
    sp = _import_scipy_sparse()
    if not sp.issparse(A):
        raise TypeError(f"A must be a SciPy sparse matrix or array, got {type(A).__name__}")
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D, got shape {A.shape}")
    if dtype is not None and (not isinstance(dtype, torch.dtype)
                              or not dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    if np.iscomplexobj(A.data):
        raise TypeError(f"complex sparse matrices are not supported, got {A.dtype}")
    device = resolve_device(device)
    if A.format != "csr":
        A = A.tocsr()
    _check_csr_arrays(A)
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()  # also sorts the indices, which torch's CSR invariants require
    if dtype is None:
        dtype = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}.get(
            A.data.dtype, torch.get_default_dtype())
    nnz = int(A.indptr[-1])  # SciPy tolerates unused trailing storage; torch does not
    data = A.data[:nnz]
    if data.dtype not in (np.float32, np.float64) or not data.flags.writeable:
        data = data.astype(np.float64)
    values = torch.from_numpy(data).to(dtype)
    crow = torch.from_numpy(np.asarray(A.indptr, dtype=np.int64))
    col = torch.from_numpy(np.asarray(A.indices[:nnz], dtype=np.int64))
    X = _csr_tensor(crow, col, values, A.shape)
    return X.to(device) if device is not None else X


# --------------------------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------------------------


def _rng(random_state) -> np.random.Generator:
    if random_state is None or isinstance(random_state, numbers.Integral):
        if isinstance(random_state, bool):
            raise TypeError("random_state must be None, an int or a numpy.random.Generator, "
                            "got a bool")
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng(None if random_state is None else int(random_state))
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise TypeError(f"random_state must be None, an int or a numpy.random.Generator, got "
                    f"{type(random_state).__name__}")


def _check_float_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    return dtype


def _check_sizes(n_samples, n_features, n_informative) -> tuple[int, int, int]:
    """Validated sizes of a generator with informative features (at most ``n_features``)."""
    n_samples = check_int_at_least("n_samples", n_samples, 1)
    n_features = check_int_at_least("n_features", n_features, 1)
    n_informative = check_int_at_least("n_informative", n_informative, 1)
    if n_informative > n_features:
        raise ValueError(f"n_informative={n_informative} exceeds n_features={n_features}")
    return n_samples, n_features, n_informative


def _finish(arrays, dtype, device):
    device = resolve_device(device)
    out = []
    for arr in arrays:
        t = torch.from_numpy(arr)
        if t.is_floating_point():
            t = t.to(dtype)
        out.append(t.to(device) if device is not None else t)
    return out


def make_classification_blobs(n_samples=300, n_features=2, n_classes=2, *, pattern="rings",
                              noise=0.1, shuffle=True, random_state=None,
                              dtype=torch.float64, device=None):
    r"""Small classification problems that a linear model cannot solve but an RBF SVM can.

    Parameters
    ----------
    n_samples : int, default 300
        Number of examples (at least ``n_classes``).
    n_features : int, default 2
        Dimension of the examples.
    n_classes : int, default 2
        Number of classes (at least 2).
    pattern : {"rings", "xor"}, default "rings"
        ``"rings"``: class :math:`k` lies on the sphere of radius :math:`(k + 1) / K` around the
        origin (concentric shells, :math:`K` = ``n_classes``), with Gaussian radial noise of
        standard deviation ``noise / K``; classes have equal sizes (up to one). Every class has
        the same mean, so no linear classifier does better than the majority class.
        ``"xor"``: Gaussian clusters (standard deviation ``noise``, in every dimension) at the
        corners of the cube :math:`\{-1, 1\}^m` spanned by the first
        :math:`m = \min(d, \max(2, \lceil \log_2 2K \rceil))` features; the class of a corner
        is its number of positive coordinates modulo :math:`K` (the XOR / parity pattern for
        two classes; classes are balanced for :math:`K = 2`). Needs ``n_features >= 2``.
    noise : float, default 0.1
        Noise level (see ``pattern``); around 0.3 the classes start to overlap.
    shuffle : bool, default True
        Shuffle the examples (otherwise they come grouped by class or corner).
    random_state : int, numpy.random.Generator or None
        Seed; the same seed gives the same data on every platform and device.
    dtype : torch.dtype, default torch.float64
    device : str or torch.device, optional

    Returns
    -------
    X : torch.Tensor
        Dense ``(n_samples, n_features)`` tensor of ``dtype``.
    y : torch.Tensor
        int64 class labels in ``0 .. n_classes - 1``.

    Examples
    --------
    >>> X, y = make_classification_blobs(200, random_state=0)
    >>> X.shape, torch.bincount(y).tolist()
    (torch.Size([200, 2]), [100, 100])
    """
    n_classes = check_int_at_least("n_classes", n_classes, 2)
    n_samples = check_int_at_least("n_samples", n_samples, n_classes)
    n_features = check_int_at_least("n_features", n_features, 1)
    noise = check_nonnegative("noise", noise)
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    if pattern == "rings":
        y = np.repeat(np.arange(n_classes), np.diff(
            np.linspace(0, n_samples, n_classes + 1).round().astype(np.int64)))
        direction = rng.standard_normal((n_samples, n_features))
        norms = np.linalg.norm(direction, axis=1, keepdims=True)
        direction /= np.where(norms > 0, norms, 1.0)  # a zero draw has probability 0
        radius = (y + 1.0) / n_classes + (noise / n_classes) * rng.standard_normal(n_samples)
        X = direction * radius[:, None]
    elif pattern == "xor":
        if n_features < 2:
            raise ValueError("pattern='xor' needs n_features >= 2")
        m = min(n_features, max(2, math.ceil(math.log2(2 * n_classes))))
        corners = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(np.int64)
        corner = np.arange(n_samples) % 2**m
        X = noise * rng.standard_normal((n_samples, n_features))
        X[:, :m] += 2.0 * corners[corner] - 1.0
        y = corners[corner].sum(1) % n_classes
    else:
        raise ValueError(f"pattern must be 'rings' or 'xor', got {pattern!r}")
    if shuffle:
        order = rng.permutation(n_samples)
        X, y = X[order], y[order]
    return tuple(_finish((np.ascontiguousarray(X), y.astype(np.int64)), dtype, device))


def make_sparse_regression(n_samples=100, n_features=1000, n_informative=10, noise=0.1,
                           random_state=None, dtype=torch.float64, *, correlation=0.0,
                           device=None):
    r"""A wide linear regression problem with a sparse ground truth (a Lasso benchmark).

    The design has i.i.d. standard normal rows with equicorrelated columns,

    .. math::
        X_{ij} = \sqrt{1 - \rho}\, Z_{ij} + \sqrt{\rho}\, U_i, \qquad
        y = X w^\star + \sigma \varepsilon,

    with :math:`Z, U, \varepsilon` standard normal, :math:`\rho` = ``correlation`` and
    :math:`\sigma` = ``noise``. The true coefficients :math:`w^\star` have ``n_informative``
    non-zeros at random positions, with random signs and magnitudes uniform in ``[1, 2]`` (so
    the support is recoverable at low noise).

    Parameters
    ----------
    n_samples : int, default 100
    n_features : int, default 1000
    n_informative : int, default 10
        Number of non-zero true coefficients, ``1 <= n_informative <= n_features``.
    noise : float, default 0.1
        Standard deviation of the additive Gaussian noise.
    random_state : int, numpy.random.Generator or None
    dtype : torch.dtype, default torch.float64
    correlation : float, default 0.0
        Correlation between any two columns, in ``[0, 1)``.
    device : str or torch.device, optional

    Returns
    -------
    X : torch.Tensor
        ``(n_samples, n_features)``.
    y : torch.Tensor
        ``(n_samples,)``.
    w_true : torch.Tensor
        ``(n_features,)`` with exactly ``n_informative`` non-zeros.

    Examples
    --------
    >>> X, y, w = make_sparse_regression(50, 200, 5, random_state=0)
    >>> X.shape, int((w != 0).sum())
    (torch.Size([50, 200]), 5)
    """
    n_samples, n_features, n_informative = _check_sizes(n_samples, n_features, n_informative)
    noise = check_nonnegative("noise", noise)
    correlation = check_nonnegative("correlation", correlation)
    if correlation >= 1:
        raise ValueError(f"correlation must be in [0, 1), got {correlation}")
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    X = rng.standard_normal((n_samples, n_features))
    if correlation > 0:
        X *= math.sqrt(1 - correlation)
        X += math.sqrt(correlation) * rng.standard_normal((n_samples, 1))
    w = np.zeros(n_features)
    support = rng.choice(n_features, size=n_informative, replace=False)
    w[support] = rng.choice([-1.0, 1.0], size=n_informative) * rng.uniform(1, 2, n_informative)
    y = X @ w + noise * rng.standard_normal(n_samples)
    return tuple(_finish((X, y, w), dtype, device))


def make_large_classification(n_samples=200_000, n_features=20, random_state=None,
                              dtype=torch.float32, *, n_informative=5, flip_y=0.0,
                              device=None):
    r"""Millions of dense examples, quickly, for scaling benchmarks.

    Features are i.i.d. standard normal; the label says whether the first ``n_informative``
    features lie outside the sphere holding half of the probability mass:

    .. math::
        y_i = \mathbb{1}\left[\textstyle\sum_{j < k} x_{ij}^2 > m_k\right],

    with :math:`m_k` the median of the :math:`\chi^2_k` distribution (Wilson–Hilferty
    approximation, so the classes are balanced to within about one percent). The boundary is a
    sphere: a linear classifier does no better than chance while an RBF SVM learns it, so the
    problem keeps many support vectors, which is what a scaling benchmark should stress. A
    fraction ``flip_y`` of labels is then flipped at random.

    Generation is vectorized in float32 (about half a second per million examples of 20
    features on one CPU core; 4 million take 2.5 s) and the data are the same for a given seed
    whatever the ``dtype`` or device.

    Parameters
    ----------
    n_samples : int, default 200000
    n_features : int, default 20
    random_state : int, numpy.random.Generator or None
    dtype : torch.dtype, default torch.float32
    n_informative : int, default 5
        Number of features the label depends on (``1 .. n_features``).
    flip_y : float, default 0.0
        Fraction of labels flipped, in ``[0, 0.5]``.
    device : str or torch.device, optional
        Where to put the tensors (the data are generated on the CPU and copied once).

    Returns
    -------
    X : torch.Tensor
        ``(n_samples, n_features)`` of ``dtype``.
    y : torch.Tensor
        int64 labels in ``{0, 1}``.

    Examples
    --------
    >>> X, y = make_large_classification(1000, random_state=0)
    >>> X.dtype, X.shape
    (torch.float32, torch.Size([1000, 20]))
    """
    n_samples, n_features, n_informative = _check_sizes(n_samples, n_features, n_informative)
    flip_y = check_nonnegative("flip_y", flip_y)
    if flip_y > 0.5:
        raise ValueError(f"flip_y must be in [0, 0.5], got {flip_y}")
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    X = rng.standard_normal((n_samples, n_features), dtype=np.float32)
    k = n_informative
    median = k * (1 - 2 / (9 * k)) ** 3
    radius2 = np.einsum("ij,ij->i", X[:, :k], X[:, :k])
    y = (radius2 > median).astype(np.int64)
    if flip_y > 0:
        flip = rng.random(n_samples) < flip_y
        y[flip] = 1 - y[flip]
    return tuple(_finish((X, y), dtype, device))


def make_unscaled_classification(n_samples=400, n_features=5, n_classes=10, *,
                                 random_state=None, dtype=torch.float64, device=None):
    r"""Overlapping Gaussian classes whose features are integers from 0 to 100, not scaled.

    Class centres :math:`\mu_c \sim \mathcal N(0, 3^2 I)`, examples
    :math:`z_i = \mu_{y_i} + \varepsilon_i` with :math:`\varepsilon_i \sim \mathcal N(0, I)`, then
    each feature mapped affinely onto ``[0, 100]`` and rounded,

    .. math:: x_{ij} = \operatorname{round}\Bigl(100\,
        \frac{z_{ij} - \min_l z_{lj}}{\max_l z_{lj} - \min_l z_{lj}}\Bigr) ,

    as pendigits' raw pen coordinates are. Every example then shares a large mean (about 50
    per feature), so :math:`\|x_i\|^2` is large and the examples' Gram matrix is dominated by
    one direction: the dual of a linear SVM is badly conditioned for coordinate descent
    (LIBLINEAR's and the Weston-Watkins solver's), which converges far more slowly here than on
    the same data scaled to ``[0, 1]``. A test bed for stopping rules and shrinking heuristics.

    Parameters
    ----------
    n_samples : int, default 400
        Number of examples (at least ``n_classes``); the classes get ``n_samples // n_classes``
        each, the first ``n_samples % n_classes`` classes one more.
    n_features : int, default 5
    n_classes : int, default 10
        At least 2.
    random_state : int, numpy.random.Generator or None
        Seed; the same seed gives the same data on every platform and device.
    dtype : torch.dtype, default torch.float64
    device : str or torch.device, optional

    Returns
    -------
    X : torch.Tensor
        ``(n_samples, n_features)``, whole numbers in ``[0, 100]``; each feature takes both
        ends.
    y : torch.Tensor
        int64 class labels in ``0 .. n_classes - 1``, in random order.

    Examples
    --------
    >>> X, y = make_unscaled_classification(200, random_state=0)
    >>> X.shape, float(X.min()), float(X.max()), torch.bincount(y).tolist()[:3]
    (torch.Size([200, 5]), 0.0, 100.0, [20, 20, 20])
    """
    n_classes = check_int_at_least("n_classes", n_classes, 2)
    n_samples = check_int_at_least("n_samples", n_samples, n_classes)
    n_features = check_int_at_least("n_features", n_features, 1)
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    centers = rng.normal(scale=3.0, size=(n_classes, n_features))
    sizes = n_samples // n_classes + (np.arange(n_classes) < n_samples % n_classes)
    y = np.repeat(np.arange(n_classes), sizes)
    Z = centers[y] + rng.normal(size=(n_samples, n_features))
    lo, hi = Z.min(0), Z.max(0)
    # a constant feature (one example) maps to 0 rather than dividing by zero
    X = np.round(100 * (Z - lo) / np.where(hi > lo, hi - lo, 1.0))
    order = rng.permutation(n_samples)
    return tuple(_finish((X[order], y[order].astype(np.int64)), dtype, device))
