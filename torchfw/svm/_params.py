"""The hyperparameters of :class:`~torchfw.SVC`: what each one accepts.

:func:`check_params` runs at the start of every ``fit`` (and in ``torchfw.cli`` before a
training run starts), so that a bad value gets a ValueError naming the parameter before any
data is read. Parameters whose validity depends on the data (``class_weight``'s labels, a
precomputed kernel's shape) are checked where the data is (:mod:`torchfw.svm.problem`,
:mod:`torchfw.svm`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..utils.validation import check_int_at_least, check_positive
from ._multiclass import MULTI_CLASS
from .kernels import KERNELS

__all__ = ["check_params", "LOSSES"]

#: The values of ``SVC(loss=...)``: the L2-SVM on the simplex, or LIBSVM's L1-SVM
#: (:mod:`torchfw.svm._hinge`, imported by the fits that use it).
LOSSES = ("squared_hinge", "hinge")

def _is_minus_one(value) -> bool:
    """Whether ``value`` is the integer -1 (scikit-learn's "no limit"; not a bool or float)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
        and int(value) == -1


def check_params(model, solvers) -> None:
    """Raise a ValueError (a TypeError for a non-number) naming ``model``'s first bad parameter.

    ``solvers`` are the solver names the estimator accepts (:data:`torchfw.svm.SOLVERS`).
    """
    kernel = model.kernel
    if not (callable(kernel) or (isinstance(kernel, str) and
                                 (kernel == "precomputed" or kernel in KERNELS))):
        raise ValueError(f"unknown kernel {kernel!r}; expected one of "
                         f"{sorted(KERNELS) + ['precomputed']} or a callable")
    if model.solver not in solvers:
        raise ValueError(f"unknown solver {model.solver!r}; expected one of {solvers}")
    # C=inf is the hard margin: the dual's diagonal term 1/C vanishes, and the simplex QP
    # min a'(D(K + 1)D)a stays valid (its optimum is positive on data the kernel separates)
    check_positive("C", model.C, allow_inf=True)
    if not (isinstance(model.tol, str) and model.tol == "auto"):
        check_positive("tol", model.tol)
    if not (isinstance(model.gamma, str) and model.gamma in ("scale", "auto")):
        check_positive("gamma", model.gamma)
    if model.max_iter is not None and not _is_minus_one(model.max_iter):
        try:
            check_int_at_least("max_iter", model.max_iter, 1)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"max_iter must be -1 (no limit) or an integer >= 1, got "
                            f"{model.max_iter!r}") from None
    if model.max_iter is not None and _is_minus_one(model.max_iter) and \
            model.solver in ("sfw", "msfw"):
        raise ValueError(f"max_iter=-1 (no limit) does not apply to the streaming solver "
                         f"{model.solver!r}, which runs max_iter samples; give a number "
                         f"(default: one epoch)")
    if model.sample_size is not None:
        check_int_at_least("sample_size", model.sample_size, 1)
    check_int_at_least("n_init", model.n_init, 1)
    for name in ("probability", "break_ties"):
        if not isinstance(getattr(model, name), (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {getattr(model, name)!r}")
    if model.multi_class not in MULTI_CLASS:
        raise ValueError(f"multi_class must be one of {MULTI_CLASS}, got "
                         f"{model.multi_class!r}")
    if model.decision_function_shape not in ("ovr", "ovo"):
        raise ValueError(f"decision_function_shape must be 'ovr' or 'ovo', got "
                         f"{model.decision_function_shape!r}")
    if model.decision_function_shape == "ovo" and model.multi_class == "ovr":
        raise ValueError("decision_function_shape='ovo' needs multi_class='ovo' (a "
                         "one-vs-rest model has one decision column per class)")
    if model.break_ties and model.decision_function_shape == "ovo":
        raise ValueError("break_ties=True needs decision_function_shape='ovr' (as in "
                         "scikit-learn)")
    shrinking = getattr(model, "shrinking", True)
    if not isinstance(shrinking, (bool, np.bool_)):
        raise ValueError(f"shrinking must be True or False, got {shrinking!r}")
    loss = getattr(model, "loss", "squared_hinge")
    if not (isinstance(loss, str) and loss in LOSSES):
        raise ValueError(f"loss must be one of {LOSSES} (the L2-SVM on the simplex, or "
                         f"LIBSVM's L1-SVM), got {loss!r}")
    rs = model.random_state
    if not (rs is None or isinstance(rs, (np.random.RandomState, np.random.Generator))
            or (isinstance(rs, (int, np.integer)) and not isinstance(rs, (bool, np.bool_)))):
        raise ValueError(f"random_state must be None, an int, a numpy RandomState or "
                         f"Generator; got {rs!r}")
    if not (model.dense == "auto" or isinstance(model.dense, (bool, np.bool_))):
        raise ValueError(f"dense must be 'auto', True or False, got {model.dense!r}")
    if not isinstance(model.average, (bool, np.bool_)):
        check_int_at_least("average", model.average, 0)
    if model.dtype not in (None, torch.float32, torch.float64):
        raise ValueError(f"dtype must be None, torch.float32 or torch.float64, got "
                         f"{model.dtype!r}")
