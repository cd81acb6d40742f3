"""LIBSVM's model files: write a fitted :class:`~torchfw.SVC`, read a model LIBSVM wrote.

A LIBSVM C-SVC model is a text header (kernel and its parameters, ``rho``, the class labels and
the number of support vectors per class) followed by one line per support vector:
its coefficient(s) and its features as ``index:value``. Its decision value for a binary model is

    dec(x) = sum_i coef_i k(sv_i, x) - rho,          predicted label: label[0] if dec > 0,

which is torchfw's binary decision function ``sum_i dual_coef_i k(sv_i, x) + intercept`` with
``rho = -intercept`` and ``label[0]`` the class torchfw predicts for a positive score
(``classes_[1]``). Both tools use the same kernel formulas (``-t 0..3``), so a binary model
predicts identically in either.

Multiclass LIBSVM models are one-vs-one: ``k(k-1)/2`` binary machines, one per pair of label
positions :math:`a < b`, sharing their support vectors, which are listed class by class
(``nr_sv``) with ``k - 1`` coefficients each. A support vector of class :math:`c` keeps its
coefficient for the pair :math:`(c, o)` in column :math:`o - 1` if :math:`o > c`, else in
column :math:`o`; pair :math:`p` has its own ``rho[p]``, and a positive value votes for
``label[a]``. A one-vs-one :class:`~torchfw.SVC` (``multi_class="ovo"``, or ``"auto"`` on
three classes or 1,500 examples or more) is exactly that model over its sorted classes, so it
is exchanged both ways; a one-vs-rest model is refused with a message that says so. The
coefficients are written with 17 significant digits, so the round trip is exact in float64.

**Precomputed kernels** (``kernel="precomputed"``, LIBSVM's ``-t 4``): a support vector line
holds the example's ID instead of its features, ``0:ID`` with IDs counted from 1 -- the
training example ``support_ + 1`` -- and LIBSVM evaluates ``k(sv, x)`` as feature ``ID`` of the
test example. LIBSVM's file does not record how many training examples there were: read back,
the model expects as many kernel columns as its largest ID, or ``n_train`` when given. A model
with a callable kernel has no LIBSVM form (the file cannot hold code).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ..utils.atomic import atomic_write

__all__ = ["write_libsvm_model", "read_libsvm_model"]

_KERNEL_PARAMS = {"linear": (), "poly": ("degree", "gamma", "coef0"), "rbf": ("gamma",),
                  "sigmoid": ("gamma", "coef0"), "precomputed": ()}
# LIBSVM's names of the kernels where they differ from torchfw's
_LIBSVM_NAME = {"poly": "polynomial"}
_TORCHFW_NAME = {v: k for k, v in _LIBSVM_NAME.items()}


def _integer_label(label) -> int:
    value = float(label)
    if not math.isfinite(value) or value != round(value):
        raise ValueError(f"LIBSVM model files hold integer class labels; {label!r} is not one")
    return int(round(value))


def write_libsvm_model(model, path) -> None:
    """Write a fitted binary :class:`~torchfw.SVC` as a LIBSVM model file.

    Parameters
    ----------
    model : SVC
        A fitted binary or one-vs-one model with an ``rbf``, ``linear``, ``poly``, ``sigmoid``
        or ``precomputed`` kernel and integer class labels.
    path : str or Path

    Raises
    ------
    ValueError
        If the model is multiclass, has a kernel LIBSVM lacks, or non-integer labels.
    """
    from ..utils.estimator import check_is_fitted

    check_is_fitted(model, "_coef")
    if callable(model.kernel):
        raise ValueError("a model with a callable kernel has no LIBSVM form (a model file "
                         "cannot hold a function); fit kernel='precomputed' on its Gram matrix")
    if model.kernel not in _KERNEL_PARAMS:
        raise ValueError(f"LIBSVM has no {model.kernel!r} kernel")
    if len(model.classes_) > 2:
        if model._scheme() != "ovo":
            raise ValueError("a one-vs-rest model has no LIBSVM form (LIBSVM's multiclass "
                             "models are one-vs-one): fit with multi_class='ovo' to write one")
        _write_one_vs_one(model, path)
        return
    positive, negative = (_integer_label(c) for c in (model.classes_[1], model.classes_[0]))
    coef = model._coef[0].to(torch.float64).cpu().numpy()
    # LIBSVM lists the support vectors class by class, in the order of its labels.
    order = np.concatenate([np.flatnonzero(coef > 0), np.flatnonzero(coef <= 0)])
    n_pos = int((coef > 0).sum())
    rows = _sv_rows(model, order)
    lines = _kernel_header(model)
    lines += ["nr_class 2", f"total_sv {len(order)}",
              f"rho {float(-model._bias[0]):.17g}",
              f"label {positive} {negative}", f"nr_sv {n_pos} {len(order) - n_pos}", "SV"]
    for k, row in zip(order, rows, strict=True):
        lines.append(f"{coef[k]:.17g} {row}".rstrip())
    atomic_write(path, "\n".join(lines) + "\n")


def _kernel_header(model) -> list[str]:
    lines = ["svm_type c_svc", f"kernel_type {_LIBSVM_NAME.get(model.kernel, model.kernel)}"]
    params = {"degree": model.degree, "gamma": model.gamma_, "coef0": model.coef0}
    for name in _KERNEL_PARAMS[model.kernel]:
        value = params[name]
        lines.append(f"{name} {int(value) if name == 'degree' else repr(float(value))}")
    return lines


def _write_one_vs_one(model, path) -> None:
    """A one-vs-one model in LIBSVM's layout (labels in ``classes_`` order; see the module).

    The model keeps LIBSVM's packed coefficients already (``dual_coef_``, support vectors
    class by class): a support vector's line is its column.
    """
    k = len(model.classes_)
    labels = [_integer_label(c) for c in model.classes_]
    coef = model._coef.to(torch.float64).cpu().numpy()  # (k - 1, n_SV), packed
    order = np.arange(coef.shape[1])
    rows = _sv_rows(model, order)
    lines = _kernel_header(model)
    rho = " ".join(f"{float(-b):.17g}" for b in model._bias.to(torch.float64).cpu())
    lines += [f"nr_class {k}", f"total_sv {len(order)}", f"rho {rho}",
              "label " + " ".join(map(str, labels)),
              "nr_sv " + " ".join(str(int(n)) for n in model.n_support_), "SV"]
    for s, row in zip(order, rows, strict=True):
        lines.append((" ".join(f"{v:.17g}" for v in coef[:, s]) + f" {row}").rstrip())
    atomic_write(path, "\n".join(lines) + "\n")


def _sv_rows(model, order: np.ndarray) -> list[str]:
    """The support vectors ``order`` as LIBSVM writes them: ``index:value`` from 1, or ``0:ID``.

    A precomputed kernel's support vector is its training example's ID (``support_ + 1``).
    """
    if model.kernel == "precomputed":
        return [f"0:{int(model.support_[k]) + 1}" for k in order]
    return [" ".join(f"{j + 1}:{v:.17g}" for j, v in row)
            for row in _sparse_rows(model._sv.cpu(), order)]


def _sparse_rows(sv: torch.Tensor, order: np.ndarray) -> list[list[tuple[int, float]]]:
    """The nonzero ``(column, value)`` pairs of the rows ``order`` of a dense or CSR matrix."""
    if sv.layout == torch.sparse_csr:
        crow = sv.crow_indices().numpy()
        col = sv.col_indices().numpy()
        val = sv.values().to(torch.float64).numpy()
        return [[(int(col[p]), float(val[p])) for p in range(crow[k], crow[k + 1])
                 if val[p] != 0] for k in order]
    dense = sv.to(torch.float64).numpy()
    return [[(int(j), float(dense[k, j])) for j in np.flatnonzero(dense[k])] for k in order]


def _parse_header(lines: list[str], path) -> tuple[dict, int]:
    header: dict[str, list[str]] = {}
    for n, line in enumerate(lines):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "SV":
            return header, n + 1
        header[parts[0]] = parts[1:]
    raise ValueError(f"{path}: not a LIBSVM model file (no 'SV' line)")


def read_libsvm_model(path, device=None, n_train=None):
    """Read a binary C-SVC model written by LIBSVM's ``svm-train`` (or by
    :func:`write_libsvm_model`) as a fitted :class:`~torchfw.SVC`.

    The returned model predicts what LIBSVM predicts: the same decision values (float64),
    with ``classes_`` sorted as torchfw keeps them.

    ``n_train`` (precomputed kernels only, ``kernel_type precomputed``): the number of training
    examples, the columns of the kernel values the model will be given; LIBSVM's file does not
    record it, and without it the model expects as many columns as its largest support-vector
    ID.

    Raises
    ------
    ValueError
        If the file is not a LIBSVM model, is not a binary C-SVC model, or is inconsistent
        (counts that do not match, malformed lines, non-finite numbers).
    """
    from ..svm.estimator import SVC
    from ..utils.readable import check_readable

    text = Path(check_readable(path, "LIBSVM model file", stdin=False)).read_text()
    lines = text.splitlines()
    if not lines or not lines[0].startswith("svm_type"):
        raise ValueError(f"{path}: not a LIBSVM model file (it does not start with svm_type)")
    if not text.endswith("\n"):  # LIBSVM ends every line: the file was cut inside its last
        raise ValueError(f"{path}: line {len(lines)}: the file ends inside a line (no final "
                         f"newline): cut short while written or copied?")
    header, start = _parse_header(lines, path)

    def field(name, kind=str, count=1):
        if name not in header or len(header[name]) < count:
            raise ValueError(f"{path}: LIBSVM model without a valid {name!r} line")
        try:
            values = [kind(v) for v in header[name][:count]]
        except ValueError:
            raise ValueError(f"{path}: bad {name!r} line: {' '.join(header[name])}") from None
        return values if count > 1 else values[0]

    if field("svm_type") != "c_svc":
        raise ValueError(f"{path}: svm_type {field('svm_type')} is not c_svc")
    kernel = field("kernel_type")
    kernel = _TORCHFW_NAME.get(kernel, kernel)
    if kernel not in _KERNEL_PARAMS:
        raise ValueError(f"{path}: kernel_type {kernel} is not supported")
    n_class = field("nr_class", int)
    if n_class < 2:
        raise ValueError(f"{path}: nr_class {n_class} (a classifier has at least 2 classes)")
    n_pairs = n_class * (n_class - 1) // 2
    labels = field("label", int, n_class)
    nr_sv = field("nr_sv", int, n_class)
    rhos = field("rho", float, n_pairs)
    rho = rhos if n_pairs > 1 else [rhos]
    if len(set(labels)) != n_class or min(nr_sv) < 0:
        raise ValueError(f"{path}: repeated labels or negative nr_sv")
    total = field("total_sv", int)
    if total != sum(nr_sv) or total != len([ln for ln in lines[start:] if ln.strip()]):
        raise ValueError(f"{path}: total_sv {total} does not match the support vectors listed")
    gamma = field("gamma", float) if "gamma" in _KERNEL_PARAMS[kernel] else 1.0
    degree = field("degree", int) if kernel == "poly" else 3
    coef0 = field("coef0", float) if kernel in ("poly", "sigmoid") else 0.0
    for name, value in (("gamma", gamma), ("coef0", coef0)):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {name} {value!r} is not a finite number")
    precomputed = kernel == "precomputed"
    coefs, rows, n_features, ids = [], [], 0, []
    for n, line in enumerate(lines[start:], start + 1):
        parts = line.split()
        if not parts:
            continue
        try:
            coefs.append([float(v) for v in parts[:n_class - 1]])
            row = []
            for item in parts[n_class - 1:]:
                index, value = item.split(":")
                row.append((int(index), float(value)))
        except ValueError:
            raise ValueError(f"{path}: line {n}: malformed support vector") from None
        if precomputed:
            if len(row) != 1 or row[0][0] != 0 or row[0][1] != round(row[0][1]) \
                    or row[0][1] < 1:
                raise ValueError(f"{path}: line {n}: a precomputed-kernel support vector is "
                                 f"'0:ID' with the training example's ID (from 1)")
            ids.append(int(row[0][1]))
            row = []
        elif any(j < 1 for j, _ in row):
            raise ValueError(f"{path}: line {n}: feature indices start at 1")
        elif len({j for j, _ in row}) != len(row):  # the later value would silently win
            seen: set[int] = set()
            twice = next(j for j, _ in row if j in seen or seen.add(j))
            raise ValueError(f"{path}: line {n}: feature {twice} is given twice")
        n_features = max([n_features] + [j for j, _ in row])
        rows.append(row)
    if precomputed:
        if n_train is not None and (int(n_train) != n_train or n_train < max(ids, default=1)):
            raise ValueError(f"n_train={n_train!r}: the model's support vectors are training "
                             f"examples up to ID {max(ids, default=1)}")
        n_features = int(n_train) if n_train is not None else max(ids, default=1)
    elif n_train is not None:
        raise ValueError(f"{path}: n_train applies to precomputed-kernel models only")
    sv = torch.zeros(0 if precomputed else len(rows), 0 if precomputed else n_features,
                     dtype=torch.float64)
    for k, row in enumerate(rows):
        for j, v in row:
            sv[k, j - 1] = v
    coef = torch.tensor(coefs, dtype=torch.float64).reshape(len(rows), n_class - 1)
    if not (torch.isfinite(coef).all() and torch.isfinite(sv).all()
            and all(math.isfinite(r) for r in rho)):
        raise ValueError(f"{path}: non-finite numbers in the model")
    support = torch.tensor(ids, dtype=torch.int64) - 1 if precomputed else \
        torch.arange(len(rows), dtype=torch.int64)
    if precomputed and len(set(ids)) != len(ids):
        raise ValueError(f"{path}: a support vector ID is listed twice")
    _check_sign_pattern(coef, nr_sv, path, start)
    # torchfw lists support vectors class by class in sorted label order; the file, in its own
    # label order: the permutation from the file's rows to torchfw's.
    bounds = np.concatenate([[0], np.cumsum(nr_sv)])
    by_label = {label: np.arange(bounds[a], bounds[a + 1]) for a, label in enumerate(labels)}
    perm = torch.from_numpy(np.concatenate([by_label[c] for c in sorted(labels)])
                            .astype(np.int64))
    if n_class > 2:
        return _one_vs_one_model(labels, nr_sv, rho, coef, sv, kernel, gamma, degree, coef0,
                                 device, support, n_features, perm)
    coef = coef[:, 0]
    rho = rho[0]
    classes = np.array(sorted(labels))
    # torchfw predicts classes_[1] for a positive score; LIBSVM predicts label[0] for dec > 0.
    sign = 1.0 if labels[0] == classes[1] else -1.0
    params = dict(kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, dtype=torch.float64)
    state = {"format": "torchfw.SVC", "version": 2, "params": params,
             "classes": classes.tolist(), "gamma": gamma, "n_features_in": n_features,
             "support": support[perm],
             "n_support": torch.tensor(nr_sv if sign < 0 else nr_sv[::-1], dtype=torch.int64),
             "n_iter": torch.tensor([0]), "support_vectors": sv[perm] if sv.shape[0] else sv,
             "dual_coef": (sign * coef[perm]).unsqueeze(0),
             "intercept": torch.tensor([-sign * rho], dtype=torch.float64)}
    return SVC.from_state_dict(state, map_location=device)


def _check_sign_pattern(coef: torch.Tensor, nr_sv: list[int], path, first_line: int) -> None:
    r"""Refuse coefficients whose signs contradict the class blocks that ``nr_sv`` declares.

    LIBSVM lists the support vectors of ``label[c]`` as block ``c`` (``nr_sv[c]`` lines). In
    the machine of label positions :math:`a < b`, a support vector of class :math:`a` has
    coefficient :math:`\alpha y = \alpha \ge 0` and one of :math:`b` has
    :math:`-\alpha \le 0`; so a vector of block :math:`c` has nonnegative coefficients in the
    columns :math:`o - 1` of the classes :math:`o > c` and nonpositive ones in the columns
    :math:`o < c` (see the module docstring). A file whose ``nr_sv`` counts were permuted or
    edited assigns vectors to the wrong class: its machines would use the wrong coefficients
    and predict differently, without any other sign of damage.
    """
    k = len(nr_sv)
    start = 0
    for c, count in enumerate(nr_sv):
        block = coef[start:start + count]
        # columns o - 1 for o > c (c first in the pair) are >= 0; columns o < c are <= 0
        wrong = torch.zeros(block.shape[0], dtype=torch.bool)
        if c < k - 1:
            wrong |= (block[:, c:] < 0).any(1)
        if c > 0:
            wrong |= (block[:, :c] > 0).any(1)
        if bool(wrong.any()):
            row = start + int(torch.nonzero(wrong)[0])
            raise ValueError(f"{path}: line {first_line + 1 + row}: the support vector's "
                             f"coefficient signs do not fit class block {c} (label position "
                             f"{c}, nr_sv {' '.join(map(str, nr_sv))}): the nr_sv counts or "
                             f"the order of the support vectors were changed")
        start += count


def _pair_index(i: np.ndarray, j: np.ndarray, k: int) -> np.ndarray:
    """The index of pair :math:`(i, j)`, :math:`i < j`, in LIBSVM's row-major pair order."""
    return i * (2 * k - i - 1) // 2 + (j - i - 1)


def _one_vs_one_model(labels, nr_sv, rho, coef, sv, kernel, gamma, degree, coef0, device,
                      support, n_features, perm):
    """A one-vs-one SVC from LIBSVM's multiclass arrays (see the module docstring).

    The file's packed columns are by label position; torchfw's by sorted class. A vector of
    position :math:`a` keeps its coefficient for position :math:`b` in torchfw's row of class
    rank :math:`r_b` (:math:`r_b - 1` if :math:`r_b > r_a`), negated where the sorted order
    turns the pair around (LIBSVM's pair :math:`(a, b)`, :math:`a < b`, votes :math:`a` when
    positive; torchfw's pair votes its lower-ranked class).
    """
    from ..svm.estimator import SVC

    k = len(labels)
    classes = np.array(sorted(labels))
    rank = np.array([int(np.searchsorted(classes, label)) for label in labels])
    start = np.concatenate([[0], np.cumsum(nr_sv)])
    coef = coef.numpy()
    packed = np.zeros((k - 1, coef.shape[0]))
    others = np.arange(k)
    for a in range(k):
        b = others[others != a]  # the file's columns: positions b in order, a left out
        block = slice(start[a], start[a + 1])
        first, second = np.minimum(a, b), np.maximum(a, b)
        sign = np.where(rank[first] < rank[second], 1.0, -1.0)
        row = np.where(rank[b] > rank[a], rank[b] - 1, rank[b])
        packed[row, block] = (coef[block] * sign).T
    first, second = np.triu_indices(k, 1)  # LIBSVM's pairs of label positions, file order
    r1, r2 = rank[first], rank[second]
    intercept = np.zeros(len(first))
    intercept[_pair_index(np.minimum(r1, r2), np.maximum(r1, r2), k)] = \
        -np.where(r1 < r2, 1.0, -1.0) * np.asarray(rho, dtype=np.float64)
    n_support = torch.tensor([nr_sv[labels.index(c)] for c in classes], dtype=torch.int64)
    params = dict(kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, dtype=torch.float64,
                  multi_class="ovo")
    state = {"format": "torchfw.SVC", "version": 3, "params": params,
             "classes": classes.tolist(), "gamma": gamma, "n_features_in": n_features,
             "support": support[perm],
             "n_support": n_support, "n_iter": torch.zeros(len(first), dtype=torch.int64),
             "support_vectors": sv[perm] if sv.shape[0] else sv,
             "dual_coef": torch.from_numpy(packed)[:, perm],
             "intercept": torch.from_numpy(intercept),
             "multi_class_": "ovo"}
    return SVC.from_state_dict(state, map_location=device)
