"""A fitted SVC's state: what it holds, what it must look like, and optional methods.

:func:`svc_state` / :func:`restore_svc` turn a fitted :class:`~torchfw.SVC` into tensors and
plain values (``torch.load(weights_only=True)`` reads them back: no pickled code) and back.

:func:`check_svc_state` is the gate every model file passes before an :class:`~torchfw.SVC` is
built from it (``SVC.load``, ``SVC.from_state_dict``, LIBSVM model files): a truncated,
tampered or foreign file gets a ValueError naming the field that is wrong, never a raw
``KeyError``/``IndexError`` later, and never a model that silently predicts one class (NaN
coefficients).

:func:`available_if` is scikit-learn's convention for optional methods (``predict_proba``
exists only with ``probability=True``): ``hasattr`` answers False otherwise, so that tools
probing for the method (``CalibratedClassifierCV``, ``check_estimator``) see what the
estimator can do.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..utils.data import csr_tensor, take_rows
from ..utils.estimator import plain
from ..utils.validation import resolve_device
from ._attrs import NAMESPACES, publish

__all__ = ["available_if", "check_svc_state", "svc_state", "restore_svc", "from_state"]

_REQUIRED = ("params", "classes", "gamma", "n_features_in", "support", "n_support", "n_iter",
             "support_vectors", "dual_coef", "intercept")


class available_if:  # noqa: N801 - used as a decorator, named like scikit-learn's
    """Decorator: the method exists only when ``check(self)`` returns True (else AttributeError).

    ``check`` may raise AttributeError itself with a message saying what enables the method.
    """

    def __init__(self, check):
        self.check = check

    def __call__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        return self

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn  # the class attribute: the plain function, for docs and introspection
        if not self.check(obj):
            raise AttributeError(f"{type(obj).__name__} has no attribute {self.fn.__name__!r}")
        return functools.partial(self.fn, obj)


def _tensor(state: dict, key: str, dim: int | None = None) -> torch.Tensor:
    value = state[key]
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"SVC state: {key!r} must be a tensor, got {type(value).__name__}")
    if dim is not None and value.dim() != dim:
        raise ValueError(f"SVC state: {key!r} must be {dim}-d, got shape {tuple(value.shape)}")
    return value


def _state_dtype(value) -> torch.dtype | None:
    """``params["dtype"]`` of a state: None or the name of a real floating torch dtype.

    Anything else is refused naming the field: the name is looked up on ``torch``, and any
    attribute there (a function, a module) would otherwise become the estimator's dtype.
    """
    if value is None or isinstance(value, torch.dtype) and value.is_floating_point \
            and not value.is_complex:
        return value
    found = getattr(torch, value.replace("torch.", "", 1), None) \
        if isinstance(value, str) and value.replace("torch.", "", 1).isidentifier() else None
    if isinstance(found, torch.dtype) and found.is_floating_point and not found.is_complex:
        return found
    raise ValueError(f"SVC state: params['dtype'] must name a real floating-point torch dtype "
                     f"(e.g. 'torch.float32') or be None, got {value!r}")


def check_svc_state(state: dict) -> None:
    """Raise ValueError unless ``state`` is a consistent fitted SVC (see the module docstring)."""
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        raise ValueError(f"SVC state is missing {', '.join(map(repr, missing))}")
    if not isinstance(state["params"], dict):
        raise ValueError("SVC state: 'params' must be a dict of the estimator's parameters")
    _state_dtype(state["params"].get("dtype"))
    classes = state["classes"]
    if not isinstance(classes, (list, tuple)) or len(classes) < 2:
        raise ValueError(f"SVC state: 'classes' must list at least two classes, got {classes!r}")
    if len(set(classes)) != len(classes):
        raise ValueError("SVC state: 'classes' has repeated labels")
    n_problems = 1 if len(classes) == 2 else len(classes)
    n_pairs = len(classes) * (len(classes) - 1) // 2
    # Version 3 keeps a one-vs-one model of more than two classes in LIBSVM's packed layout:
    # k - 1 coefficient rows, one intercept per pair (version 2: one row per pair).
    packed = state.get("version", 1) >= 3 and len(classes) > 2 and \
        state.get("multi_class_") == "ovo"
    gamma = state["gamma"]
    if not isinstance(gamma, (int, float)) or not math.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"SVC state: 'gamma' must be a positive number, got {gamma!r}")
    n_features = state["n_features_in"]
    if not isinstance(n_features, int) or n_features < 1:
        raise ValueError(f"SVC state: 'n_features_in' must be a positive int, got {n_features!r}")
    coef = _tensor(state, "dual_coef", 2)
    intercept = _tensor(state, "intercept", 1)
    n_rows = coef.shape[0]
    if n_rows not in ((len(classes) - 1,) if packed else (n_problems, n_pairs)):
        raise ValueError(f"SVC state: 'dual_coef' has {n_rows} rows for {len(classes)} classes"
                         + (" (one-vs-one, packed: k - 1 rows)" if packed else ""))
    n_outputs = n_pairs if packed else n_rows  # one intercept per binary problem
    if intercept.shape != (n_outputs,):
        raise ValueError(f"SVC state: 'intercept' has shape {tuple(intercept.shape)}, expected "
                         f"({n_outputs},)")
    sv = state["support_vectors"]
    kernel = state["params"].get("kernel", "rbf")
    if not isinstance(kernel, str):
        raise ValueError(f"SVC state: 'params' kernel must be a kernel name, got "
                         f"{type(kernel).__name__}")
    precomputed = kernel == "precomputed"
    if isinstance(sv, dict):
        shape = sv.get("shape")
        if not (isinstance(shape, (list, tuple)) and len(shape) == 2):
            raise ValueError("SVC state: sparse 'support_vectors' need a 2-d 'shape'")
        n_sv, d = int(shape[0]), int(shape[1])
    elif precomputed:  # no vectors: support indexes the columns of the test kernel values
        if not (isinstance(sv, torch.Tensor) and sv.numel() == 0):
            raise ValueError("SVC state: a precomputed-kernel model has no 'support_vectors' "
                             "(an empty tensor expected)")
        n_sv, d = coef.shape[1], n_features
    elif isinstance(sv, torch.Tensor) and sv.dim() == 2:
        n_sv, d = sv.shape
        if not bool(torch.isfinite(sv).all()):
            raise ValueError("SVC state: 'support_vectors' hold NaN or infinite values")
    else:
        raise ValueError("SVC state: 'support_vectors' must be a 2-d tensor or a CSR dict")
    if coef.shape[1] != n_sv:
        raise ValueError(f"SVC state: 'dual_coef' has {coef.shape[1]} columns for {n_sv} "
                         "support vectors")
    if d != n_features:
        raise ValueError(f"SVC state: support vectors have {d} features, 'n_features_in' says "
                         f"{n_features}")
    if not (bool(torch.isfinite(coef).all()) and bool(torch.isfinite(intercept).all())):
        raise ValueError("SVC state: 'dual_coef' or 'intercept' hold NaN or infinite values")
    support = _tensor(state, "support", 1)
    if support.shape[0] != n_sv:
        raise ValueError(f"SVC state: 'support' lists {support.shape[0]} indices for {n_sv} "
                         "support vectors")
    if precomputed and n_sv and not (int(support.min()) >= 0
                                     and int(support.max()) < n_features):
        raise ValueError(f"SVC state: 'support' indexes training examples outside 0.."
                         f"{n_features - 1} (a precomputed-kernel model of {n_features})")
    if state.get("version", 1) >= 2:  # support vectors class by class, counted per class
        n_support = _tensor(state, "n_support", 1)
        if n_support.shape[0] != len(classes) or int(n_support.sum()) != n_sv or \
                bool((n_support < 0).any()):
            raise ValueError(f"SVC state: 'n_support' must count the {n_sv} support vectors "
                             f"of each of the {len(classes)} classes")
    for key in ("prob_a", "prob_b"):
        value = state.get(key)
        if value is not None and (not isinstance(value, torch.Tensor)
                                  or value.shape != (n_outputs,)
                                  or not bool(torch.isfinite(value).all())):
            raise ValueError(f"SVC state: {key!r} must be {n_outputs} finite numbers")
    if packed:
        _check_packed_signs(coef, _tensor(state, "n_support", 1))


def _check_packed_signs(packed: torch.Tensor, n_support: torch.Tensor) -> None:
    r"""Refuse packed one-vs-one coefficients whose signs contradict their class blocks.

    A support vector of class :math:`c` has :math:`\alpha y / \rho \ge 0` in the pairs where
    :math:`c` is first (rows :math:`o - 1`, :math:`o > c`) and :math:`\le 0` where it is second
    (rows :math:`o < c`): a state whose ``n_support`` counts were changed would otherwise give
    the pairs other vectors' coefficients and predict differently, without a word.
    """
    k = packed.shape[0] + 1
    owner = torch.repeat_interleave(torch.arange(k), n_support.to(torch.int64))
    rows = torch.arange(k - 1).unsqueeze(1)
    first = rows >= owner.unsqueeze(0)  # row o - 1 >= c: o > c, the vector's class is first
    wrong = (first & (packed < 0)) | (~first & (packed > 0))
    if bool(wrong.any()):
        column = int(torch.nonzero(wrong.any(0))[0])
        raise ValueError(f"SVC state: the one-vs-one coefficient signs of support vector "
                         f"{column} do not fit its class {int(owner[column])} (by 'n_support'):"
                         f" the counts or the order of the support vectors were changed")


def svc_state(model) -> dict:
    """The fitted ``model`` as a dict of tensors and plain values (format ``torchfw.SVC``).

    A model with a callable kernel is refused (ValueError): the state holds no code, and a
    function pickled by reference would run whatever the name means at load time.
    """
    if callable(model.kernel):
        name = getattr(model.kernel, "__name__", repr(model.kernel))
        raise ValueError(f"an SVC with a callable kernel ({name}) cannot be saved: its state "
                         f"holds tensors and plain values, no code. Save a model fitted with "
                         f"kernel='precomputed' on the kernel's Gram matrix instead, or refit")
    params = {k: plain(v) for k, v in model.get_params(deep=False).items()}
    sv = model._sv.cpu()
    if sv.layout == torch.sparse_csr:
        support_vectors = {"crow": sv.crow_indices(), "col": sv.col_indices(),
                           "values": sv.values(), "shape": list(sv.shape)}
    else:
        support_vectors = sv

    def optional(values):
        return None if values is None else torch.from_numpy(np.asarray(values, np.float64))

    # Version 2: support vectors class by class, n_support per class (scikit-learn's layout);
    # dual_coef and intercept hold one row per binary problem, as the model predicts with them.
    # Version 3: a one-vs-one model of more than two classes holds LIBSVM's packed (k - 1, n_SV)
    # dual_coef (as it predicts with it), intercept one per pair.
    return {"format": "torchfw.SVC", "version": 3, "params": params,
            "classes": model.classes_.tolist(), "gamma": float(model._gamma),
            "n_features_in": int(model.n_features_in_),
            "support": torch.from_numpy(np.asarray(model.support_, dtype=np.int64)),
            "n_support": torch.from_numpy(np.asarray(model.n_support_, dtype=np.int64)),
            "n_iter": torch.as_tensor(np.asarray(model.n_iter_)),
            "support_vectors": support_vectors, "dual_coef": model._coef.cpu(),
            "intercept": model._bias.cpu(), "namespace": model._namespace,
            "class_weight": optional(getattr(model, "class_weight_", None)),
            "fit_status": int(getattr(model, "fit_status_", 0)),
            "shape_fit": [int(n) for n in getattr(model, "shape_fit_", ())],
            "prob_a": optional(getattr(model, "probA_", None)),
            "prob_b": optional(getattr(model, "probB_", None)),
            "multi_class_": model._scheme()}


def restore_svc(model, state: dict, device=None) -> None:
    """Set the fitted attributes of ``model`` from a state :func:`check_svc_state` accepted."""
    sv = state["support_vectors"]
    if isinstance(sv, dict):
        # From a file: let torch validate the structure before anything indexes it.
        sv = csr_tensor(sv["crow"], sv["col"], sv["values"], size=tuple(sv["shape"]),
                        check_invariants=True)

    def placed(tensor):
        return tensor.to(device) if device is not None else tensor

    model.classes_ = np.asarray(state["classes"])
    model._gamma = float(state["gamma"])
    model.n_features_in_ = int(state["n_features_in"])
    support = state["support"].numpy()
    coef = state["dual_coef"]
    n_iter = state["n_iter"]
    model.n_iter_ = np.atleast_1d(n_iter.numpy()).astype(np.int32)
    if state.get("version", 1) < 2:  # support vectors by index, n_support per problem
        order, n_support = _class_order_v1(state, coef.to(torch.float64).numpy())
        support = support[order]
        index = torch.from_numpy(order)
        sv = take_rows(sv, index) if sv.shape[0] else sv
        coef = coef[:, index]
    else:
        n_support = state["n_support"].numpy()
    if state.get("version", 1) < 3 and model._packed():  # one row per pair: pack them
        from ._attrs import pack_ovo

        coef = torch.from_numpy(pack_ovo(coef.to(torch.float64).numpy(), n_support))
    model.support_ = support.astype(np.int32)
    model.n_support_ = np.asarray(n_support, dtype=np.int32)
    model._sv = placed(sv)
    model._coef = placed(coef)
    model._bias = placed(state["intercept"])
    model._sv_objects = None
    model._namespace = str(state.get("namespace", "numpy"))
    if model._namespace not in NAMESPACES:
        raise ValueError(f"SVC state: 'namespace' must be one of {NAMESPACES}, got "
                         f"{model._namespace!r}")
    model.probA_ = None if state.get("prob_a") is None else state["prob_a"].numpy()
    model.probB_ = None if state.get("prob_b") is None else state["prob_b"].numpy()
    model.result_ = None
    model.fit_status_ = int(state.get("fit_status", 0))
    if state.get("shape_fit"):
        model.shape_fit_ = tuple(int(n) for n in state["shape_fit"])
    if state.get("class_weight") is not None:
        model.class_weight_ = state["class_weight"].numpy()


def _class_order_v1(state: dict, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class-by-class order and per-class counts of a version-1 state's support vectors.

    Version 1 listed them by training index; each one's class follows from the signs of its
    coefficients (binary: positive is class 1; a one-vs-one pair: positive is its first
    class; one-vs-rest: positive in its own class's row).
    """
    from ._multiclass import class_pairs

    k = len(state["classes"])
    n_sv = coef.shape[1]
    owner = np.full(n_sv, -1, dtype=np.int64)
    if k == 2:
        owner[:] = (coef[0] > 0).astype(np.int64)
    elif coef.shape[0] == k * (k - 1) // 2 and state.get("multi_class_", "ovr") == "ovo":
        for p, (i, j) in enumerate(class_pairs(k)):
            owner[coef[p] > 0] = i
            owner[coef[p] < 0] = j
    else:
        for c in range(k):
            owner[coef[c] > 0] = c
    if (owner < 0).any():
        raise ValueError("SVC state (version 1, one-vs-rest): the class of a support vector "
                         "cannot be told from its coefficients; refit and save the model again")
    support = state["support"].numpy()
    order = np.lexsort((support, owner))
    return order, np.bincount(owner, minlength=k)


def from_state(cls, state: dict, map_location=None):
    """A fitted ``cls`` (:class:`~torchfw.SVC` or a subclass) from a state dict, checked first.

    :meth:`SVC.from_state_dict <torchfw.SVC.from_state_dict>`: the state passes
    :func:`check_svc_state`, the parameters build the estimator, :func:`restore_svc` sets the
    fitted attributes (on ``map_location`` if given).
    """
    if not isinstance(state, dict) or state.get("format") != "torchfw.SVC":
        raise ValueError("not a torchfw.SVC state dict")
    check_svc_state(state)
    params = dict(state["params"])
    if len(state["classes"]) > 2:  # saved before one-vs-one existed: one-vs-rest
        params.setdefault("multi_class", "ovr")
    if "dtype" in params:
        params["dtype"] = _state_dtype(params["dtype"])
    model = cls(**params)
    # The scheme the model was trained with ("auto" resolved); absent before "auto" existed.
    model.multi_class_ = str(state.get("multi_class_", "ovr" if params.get(
        "multi_class", "ovr") == "auto" else params.get("multi_class", "ovr")))
    restore_svc(model, state, resolve_device(map_location)
                if map_location is not None else None)
    model._kernel = model._make_kernel()
    publish(model)
    return model
