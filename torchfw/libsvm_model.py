"""LIBSVM's model files: write a fitted :class:`~torchfw.SVC`, read a model LIBSVM wrote.

A LIBSVM C-SVC model is a text header (kernel and its parameters, ``rho``, the class labels and
the number of support vectors per class) followed by one line per support vector:
its coefficient(s) and its features as ``index:value``. Its decision value for a binary model is

    dec(x) = sum_i coef_i k(sv_i, x) - rho,          predicted label: label[0] if dec > 0,

which is torchfw's binary decision function ``sum_i dual_coef_i k(sv_i, x) + intercept`` with
``rho = -intercept`` and ``label[0]`` the class torchfw predicts for a positive score
(``classes_[1]``). Both tools use the same kernel formulas (``-t 0..3``), so a binary model
predicts identically in either.

Multiclass LIBSVM models are one-vs-one (``k(k-1)/2`` binary machines sharing their support
vectors); torchfw's multiclass :class:`~torchfw.SVC` is one-vs-rest unless it was fitted
one-vs-one, so only binary models are exchanged here, and a multiclass file is refused with a
message that says so. The coefficients are written with 17 significant digits, so the
round trip is exact in float64.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

__all__ = ["write_libsvm_model", "read_libsvm_model"]

_KERNEL_PARAMS = {"linear": (), "poly": ("degree", "gamma", "coef0"), "rbf": ("gamma",),
                  "sigmoid": ("gamma", "coef0")}
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
        A fitted binary model with an ``rbf``, ``linear``, ``poly`` or ``sigmoid`` kernel and
        integer class labels.
    path : str or Path

    Raises
    ------
    ValueError
        If the model is multiclass, has a kernel LIBSVM lacks, or non-integer labels.
    """
    from ._estimator import check_is_fitted

    check_is_fitted(model, "dual_coef_")
    if len(model.classes_) != 2 or model.dual_coef_.shape[0] != 1:
        raise ValueError("only binary models can be written as LIBSVM model files (a "
                         "multiclass LIBSVM model is one-vs-one)")
    if model.kernel not in _KERNEL_PARAMS:
        raise ValueError(f"LIBSVM has no {model.kernel!r} kernel")
    positive, negative = (_integer_label(c) for c in (model.classes_[1], model.classes_[0]))
    coef = model.dual_coef_[0].to(torch.float64).cpu().numpy()
    sv = model.support_vectors_.cpu()
    # LIBSVM lists the support vectors class by class, in the order of its labels.
    order = np.concatenate([np.flatnonzero(coef > 0), np.flatnonzero(coef <= 0)])
    n_pos = int((coef > 0).sum())
    rows = _sparse_rows(sv, order)
    lines = ["svm_type c_svc", f"kernel_type {_LIBSVM_NAME.get(model.kernel, model.kernel)}"]
    params = {"degree": model.degree, "gamma": model.gamma_, "coef0": model.coef0}
    for name in _KERNEL_PARAMS[model.kernel]:
        value = params[name]
        lines.append(f"{name} {int(value) if name == 'degree' else repr(float(value))}")
    lines += ["nr_class 2", f"total_sv {len(order)}",
              f"rho {float(-model.intercept_[0]):.17g}",
              f"label {positive} {negative}", f"nr_sv {n_pos} {len(order) - n_pos}", "SV"]
    for k, row in zip(order, rows, strict=True):
        feats = " ".join(f"{j + 1}:{v:.17g}" for j, v in row)
        lines.append(f"{coef[k]:.17g} {feats}".rstrip())
    Path(path).write_text("\n".join(lines) + "\n")


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
    header = {}
    for n, line in enumerate(lines):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "SV":
            return header, n + 1
        header[parts[0]] = parts[1:]
    raise ValueError(f"{path}: not a LIBSVM model file (no 'SV' line)")


def read_libsvm_model(path, device=None):
    """Read a binary C-SVC model written by LIBSVM's ``svm-train`` (or by
    :func:`write_libsvm_model`) as a fitted :class:`~torchfw.SVC`.

    The returned model predicts what LIBSVM predicts: the same decision values (float64),
    with ``classes_`` sorted as torchfw keeps them.

    Raises
    ------
    ValueError
        If the file is not a LIBSVM model, is not a binary C-SVC model, or is inconsistent
        (counts that do not match, malformed lines, non-finite numbers).
    """
    from .svm import SVC

    text = Path(path).read_text()
    lines = text.splitlines()
    if not lines or not lines[0].startswith("svm_type"):
        raise ValueError(f"{path}: not a LIBSVM model file (it does not start with svm_type)")
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
    if n_class != 2:
        raise ValueError(f"{path}: a {n_class}-class LIBSVM model is one-vs-one; only binary "
                         "models are read")
    labels = field("label", int, 2)
    nr_sv = field("nr_sv", int, 2)
    rho = field("rho", float)
    total = field("total_sv", int)
    if total != sum(nr_sv) or total != len([ln for ln in lines[start:] if ln.strip()]):
        raise ValueError(f"{path}: total_sv {total} does not match the support vectors listed")
    gamma = field("gamma", float) if "gamma" in _KERNEL_PARAMS[kernel] else 1.0
    degree = field("degree", int) if kernel == "poly" else 3
    coef0 = field("coef0", float) if kernel in ("poly", "sigmoid") else 0.0
    coefs, rows, n_features = [], [], 0
    for n, line in enumerate(lines[start:], start + 1):
        parts = line.split()
        if not parts:
            continue
        try:
            coefs.append(float(parts[0]))
            row = []
            for item in parts[1:]:
                index, value = item.split(":")
                row.append((int(index), float(value)))
        except ValueError:
            raise ValueError(f"{path}: line {n}: malformed support vector") from None
        if any(j < 1 for j, _ in row):
            raise ValueError(f"{path}: line {n}: feature indices start at 1")
        n_features = max([n_features] + [j for j, _ in row])
        rows.append(row)
    sv = torch.zeros(len(rows), n_features, dtype=torch.float64)
    for k, row in enumerate(rows):
        for j, v in row:
            sv[k, j - 1] = v
    coef = torch.tensor(coefs, dtype=torch.float64)
    if not (torch.isfinite(coef).all() and torch.isfinite(sv).all() and math.isfinite(rho)):
        raise ValueError(f"{path}: non-finite numbers in the model")
    classes = np.array(sorted(labels))
    # torchfw predicts classes_[1] for a positive score; LIBSVM predicts label[0] for dec > 0.
    sign = 1.0 if labels[0] == classes[1] else -1.0
    params = dict(kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, dtype=torch.float64)
    state = {"format": "torchfw.SVC", "version": 1, "params": params,
             "classes": classes.tolist(), "gamma": gamma, "n_features_in": n_features,
             "support": torch.arange(len(rows), dtype=torch.int64),
             "n_support": torch.tensor(nr_sv if sign > 0 else nr_sv[::-1], dtype=torch.int64),
             "n_iter": torch.tensor(0), "support_vectors": sv,
             "dual_coef": (sign * coef).unsqueeze(0),
             "intercept": torch.tensor([-sign * rho], dtype=torch.float64)}
    return SVC.from_state_dict(state, map_location=device)
