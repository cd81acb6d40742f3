r"""Fitted SVMs as ``nn.Module`` heads on learned features.

:class:`KernelSVMHead` computes a kernel SVM's decision function

.. math:: f_c(x) = \sum_{i \in SV} \beta_{ci}\, k(x_i, x) + b_c

from buffers only (support vectors, coefficients, intercepts), so it composes with a backbone
(``nn.Sequential(backbone, head)``), follows ``.to(device)``, and works under ``torch.no_grad``,
``torch.compile``, TorchScript and ``torch.export``. :class:`LinearHead` does the same for linear
models (``W x + b``). :func:`fit_head` fits a head on the features a backbone produces over a
DataLoader, in batches, on the backbone's device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from .utils.kernel_formulas import CODES, from_dots

__all__ = ["KernelSVMHead", "LinearHead", "fit_head", "extract_features"]

_KERNEL_CODES = CODES  # the one table of kernel formulas (torchfw.utils.kernel_formulas)


class KernelSVMHead(nn.Module):
    r"""Decision function of a kernel SVM on the support vectors.

    ``forward`` returns decision values, ``(n,)`` for binary models and ``(n, k)`` otherwise;
    :meth:`predict_index` returns class indices into the model's ``classes_``. A one-vs-one
    model (``multi_class="ovo"``) computes its ``k(k-1)/2`` pair values and returns them in
    :class:`~torchfw.SVC`'s per-class shape (votes plus confidences in (-1/3, 1/3));
    :meth:`predict_index` then takes LIBSVM's vote (lowest class index on ties), as
    :meth:`torchfw.SVC.predict` does.

    Parameters
    ----------
    support_vectors : Tensor of shape (n_SV, d)
    dual_coef : Tensor of shape (k, n_SV) or (n_classes - 1, n_SV)
        :math:`\beta_{ci}`; ``k = 1`` for a binary model, one row per class (one-vs-rest) or
        per pair (one-vs-one). With ``n_support``, a one-vs-one model's LIBSVM packed layout
        (an SVC's ``dual_coef_``, see :mod:`torchfw.svm._attrs`).
    intercept : Tensor of shape (k,)
        One per row, or one per pair :math:`(0, 1), (0, 2), \dots` for the packed layout.
    kernel : {"rbf", "linear", "poly", "sigmoid"}
    multi_class : {"ovr", "ovo"}, default "ovr"
        How the rows of ``dual_coef`` combine into classes (see :class:`torchfw.SVC`).
    n_support : sequence of int, optional
        One-vs-one only: the number of support vectors of each class (listed class by class),
        which says that ``dual_coef`` is packed. Pair :math:`(i, j)`'s value then sums class
        :math:`i`'s block of kernel values against row :math:`j - 1` and class :math:`j`'s
        against row :math:`i`, as LIBSVM's ``svm_predict_values``: the head holds
        :math:`(k - 1) n_{SV}` coefficients, not :math:`k(k-1)/2 \cdot n_{SV}`.
    gamma, degree, coef0 : kernel parameters
    classes : sequence of numbers or strings, optional
        The labels :meth:`predict_index` indexes (the estimator's ``classes_``).

    Notes
    -----
    *Saving.* The ``state_dict`` holds the buffers and, under ``_extra_state``, the kernel, its
    parameters and the classes as plain data, so ``torch.load(..., weights_only=True)`` reads it
    without extra safe globals. :meth:`from_state_dict` rebuilds the head from it alone; loading
    it into a head built with another kernel, parameters or classes raises ``ValueError`` (a
    head built without ``classes`` takes the saved ones).
    """

    # Labels are plain Python values (any type the estimator accepted), never read by forward.
    __jit_ignored_attributes__ = ["classes"]
    if TYPE_CHECKING:  # buffers registered in __init__ (TorchScript rejects PEP 563 strings)
        support_vectors: Tensor
        sv_sq_norms: Tensor
        dual_coef: Tensor
        intercept: Tensor

    def __init__(self, support_vectors: Tensor, dual_coef: Tensor, intercept: Tensor,
                 kernel: str = "rbf", gamma: float = 1.0, degree: int = 3, coef0: float = 0.0,
                 classes=None, multi_class: str = "ovr", n_support=None):
        super().__init__()
        if multi_class not in ("ovr", "ovo"):
            raise ValueError(f"multi_class must be 'ovr' or 'ovo', got {multi_class!r}")
        if kernel not in _KERNEL_CODES:
            raise ValueError(f"unknown kernel {kernel!r}; expected one of {list(_KERNEL_CODES)}")
        # NumPy / SciPy arrays (a fitted SVC's attributes for NumPy input) become tensors
        support_vectors, dual_coef, intercept = (_as_tensor(a) for a in
                                                 (support_vectors, dual_coef, intercept))
        if support_vectors.layout != torch.strided:
            support_vectors = support_vectors.to_dense()
        if dual_coef.dim() != 2 or dual_coef.shape[1] != support_vectors.shape[0]:
            raise ValueError(f"dual_coef must have shape (k, {support_vectors.shape[0]}), got "
                             f"{tuple(dual_coef.shape)}")
        self.register_buffer("support_vectors", support_vectors.detach().clone())
        self.register_buffer("sv_sq_norms", (support_vectors.detach() ** 2).sum(1))
        self.register_buffer("dual_coef", dual_coef.detach().clone())
        self.register_buffer("intercept", intercept.detach().reshape(-1).clone())
        self.kernel = kernel
        self.kernel_code = _KERNEL_CODES[kernel]
        self.gamma = float(gamma)
        self.degree = int(degree)
        self.coef0 = float(coef0)
        self.binary = dual_coef.shape[0] == 1
        n_rows = dual_coef.shape[0]
        self.one_vs_one = multi_class == "ovo" and not self.binary
        # Class boundaries of the support vectors in the packed layout ([0]: not packed).
        self.sv_bounds = [0]
        self.packed = self.one_vs_one and n_support is not None
        if self.packed:
            assert n_support is not None
            counts = [int(c) for c in np.asarray(_as_tensor(n_support)).reshape(-1)]
            if len(counts) != n_rows + 1 or min(counts) < 0 or \
                    sum(counts) != support_vectors.shape[0]:
                raise ValueError(f"n_support must count the {support_vectors.shape[0]} support "
                                 f"vectors of each of the {n_rows + 1} classes of a packed "
                                 f"(k - 1, n_SV) dual_coef; got {counts}")
            self.sv_bounds = [0] + np.cumsum(counts).tolist()
            self.n_classes = n_rows + 1
            if self.intercept.shape[0] != self.n_classes * (self.n_classes - 1) // 2:
                raise ValueError(f"a packed one-vs-one head has one intercept per pair, "
                                 f"{self.n_classes * (self.n_classes - 1) // 2}; got "
                                 f"{self.intercept.shape[0]}")
        else:
            # k(k-1)/2 pair rows for one-vs-one: k from the positive root.
            self.n_classes = 2 if self.binary else (
                int(round((1 + math.sqrt(1 + 8 * n_rows)) / 2)) if self.one_vs_one
                else n_rows)
        if self.one_vs_one and not self.packed and \
                self.n_classes * (self.n_classes - 1) // 2 != n_rows:
            raise ValueError(f"a one-vs-one dual_coef has k(k-1)/2 rows; {n_rows} is not such "
                             "a number")
        self.multi_class = "ovo" if self.one_vs_one else "ovr"
        self.classes = _plain_classes(classes, self.n_classes)

    def _config(self) -> dict:
        config = {"kernel": self.kernel, "gamma": self.gamma, "degree": self.degree,
                  "coef0": self.coef0, "classes": self.classes,
                  "multi_class": self.multi_class}
        if self.packed:  # version 3: the class boundaries of a packed one-vs-one head
            config["n_support"] = [b - a for a, b in zip(self.sv_bounds[:-1],
                                                         self.sv_bounds[1:], strict=True)]
        return config

    def get_extra_state(self) -> dict:
        """What ``forward`` and :meth:`predict_index` use besides the buffers (plain data)."""
        return {"format": "torchfw.KernelSVMHead", "version": 3 if self.packed else 2,
                **self._config()}

    def set_extra_state(self, state) -> None:
        """Check that a loaded state was saved by a head built like this one; raise otherwise.

        The kernel, its parameters and the classes are part of the model: a head built with
        other ones would compute other decision values from the same buffers, so loading into
        it is an error, not a silent change. Rebuild the head from the file with
        :meth:`from_state_dict` instead.
        """
        if isinstance(state, dict):  # saved before one-vs-one heads existed (version 1)
            state = {"multi_class": "ovr", **state}
        _check_extra_state(state, "torchfw.KernelSVMHead", self._config(),
                           "KernelSVMHead.from_state_dict(state_dict)")
        self.classes = state.get("classes")

    @classmethod
    def from_state_dict(cls, state_dict, prefix: str = "") -> KernelSVMHead:
        """Build the head a :meth:`state_dict` was saved from (buffers, kernel and classes).

        Parameters
        ----------
        state_dict : dict
            The head's ``state_dict()``, or a composed model's with ``prefix`` naming the head
            (e.g. ``"1."`` for ``nn.Sequential(backbone, head)``).
        prefix : str, default ""
        """
        extra = _extra_state_of(state_dict, prefix, "torchfw.KernelSVMHead")
        try:
            sv, coef, intercept = (state_dict[prefix + name] for name in
                                   ("support_vectors", "dual_coef", "intercept"))
        except KeyError as exc:
            raise ValueError(f"not a KernelSVMHead state dict: no {exc.args[0]!r}") from None
        head = cls(sv, coef, intercept, kernel=extra["kernel"], gamma=extra["gamma"],
                   degree=extra["degree"], coef0=extra["coef0"], classes=extra["classes"],
                   multi_class=extra.get("multi_class", "ovr"),
                   n_support=extra.get("n_support"))
        head.load_state_dict({k[len(prefix):]: v for k, v in state_dict.items()
                              if k.startswith(prefix)})
        return head

    def forward(self, x: Tensor) -> Tensor:
        scores = self.decision_values(x)
        if self.one_vs_one:
            votes, confidence = self._votes(scores, True)
            return votes + confidence / (3.0 * (confidence.abs() + 1.0))
        return scores

    def _votes(self, scores: Tensor, zero_to_first: bool) -> tuple[Tensor, Tensor]:
        """Votes and summed confidences per class from one-vs-one pair values."""
        pairs = torch.triu_indices(self.n_classes, self.n_classes, 1, device=scores.device)
        n = scores.shape[0]
        first = pairs[0].unsqueeze(0).expand(n, -1)
        second = pairs[1].unsqueeze(0).expand(n, -1)
        wins = (scores >= 0) if zero_to_first else (scores > 0)
        votes = torch.zeros(n, self.n_classes, dtype=scores.dtype, device=scores.device)
        votes.scatter_add_(1, first, wins.to(scores.dtype))
        votes.scatter_add_(1, second, (~wins).to(scores.dtype))
        confidence = torch.zeros_like(votes)
        confidence.scatter_add_(1, first, scores)
        confidence.scatter_add_(1, second, -scores)
        return votes, confidence

    @torch.jit.export
    def decision_values(self, x: Tensor) -> Tensor:
        """One value per binary problem: ``(n,)`` for binary models, else ``(n, rows)``."""
        sv = self.support_vectors.to(x.dtype)
        dots = x @ sv.T
        # Squared norms are read by the RBF kernel (code 1) only.
        sq = (x * x).sum(1, keepdim=True) if self.kernel_code == 1 else dots
        k = from_dots(self.kernel_code, dots, sq, self.sv_sq_norms.to(x.dtype).unsqueeze(0),
                      self.gamma, self.coef0, self.degree)
        if self.packed:
            return self._pair_values(k)
        scores = k @ self.dual_coef.to(x.dtype).T + self.intercept.to(x.dtype)
        if self.binary:
            return scores[:, 0]
        return scores

    def _pair_values(self, k: Tensor) -> Tensor:
        """Pair values ``(n, k(k-1)/2)`` of a packed one-vs-one head from the kernel values
        ``k`` ``(n, n_SV)``: each class's block meets the ``k - 1`` rows once, each pair adds
        two entries (:func:`torchfw.svm._multiclass.ovo_pair_values`' scheme)."""
        coef = self.dual_coef.to(k.dtype)
        n_classes = self.n_classes
        blocks = [k[:, self.sv_bounds[c]:self.sv_bounds[c + 1]]
                  @ coef[:, self.sv_bounds[c]:self.sv_bounds[c + 1]].T
                  for c in range(n_classes)]
        flat = torch.stack(blocks, 1).reshape(k.shape[0], n_classes * (n_classes - 1))
        pairs = torch.triu_indices(n_classes, n_classes, 1, device=k.device)
        first = flat.index_select(1, pairs[0] * (n_classes - 1) + pairs[1] - 1)
        second = flat.index_select(1, pairs[1] * (n_classes - 1) + pairs[0])
        return first + second + self.intercept.to(k.dtype)

    @torch.jit.export
    def predict_index(self, x: Tensor) -> Tensor:
        """Index of the predicted class (into the fitted model's ``classes_``)."""
        scores = self.decision_values(x)
        if self.binary:
            return (scores > 0).to(torch.int64)
        if self.one_vs_one:  # LIBSVM's vote; argmax returns the first (lowest) of equal maxima
            return torch.argmax(self._votes(scores, False)[0], dim=1)
        return torch.argmax(scores, dim=1)

    def extra_repr(self) -> str:
        return (f"kernel={self.kernel!r}, gamma={self.gamma:g}, n_sv="
                f"{self.support_vectors.shape[0]}, n_outputs={self.dual_coef.shape[0]}")


class LinearHead(nn.Module):
    """``x @ weight.T + bias`` from fitted coefficients (e.g. a Weston-Watkins SVM).

    ``classes`` (optional) are the labels that :meth:`predict_index` indexes; they are saved in
    the ``state_dict`` and checked on load, as for :class:`KernelSVMHead`.
    """

    __jit_ignored_attributes__ = ["classes"]
    if TYPE_CHECKING:  # buffers registered in __init__ (TorchScript rejects PEP 563 strings)
        weight: Tensor
        bias: Tensor

    def __init__(self, weight: Tensor, bias: Tensor | None = None, classes=None):
        super().__init__()
        self.register_buffer("weight", weight.detach().clone())
        self.register_buffer("bias", torch.zeros(weight.shape[0], dtype=weight.dtype,
                                                 device=weight.device)
                             if bias is None else bias.detach().reshape(-1).clone())
        self.classes = _plain_classes(classes, weight.shape[0])

    def get_extra_state(self) -> dict:
        """The classes (plain data), saved next to the buffers."""
        return {"format": "torchfw.LinearHead", "version": 1, "classes": self.classes}

    def set_extra_state(self, state) -> None:
        """Raise when the loaded classes are not this head's (see :class:`KernelSVMHead`)."""
        _check_extra_state(state, "torchfw.LinearHead", {"classes": self.classes},
                           "LinearHead.from_state_dict(state_dict)")
        self.classes = state.get("classes")

    @classmethod
    def from_state_dict(cls, state_dict, prefix: str = "") -> LinearHead:
        """Build the head a :meth:`state_dict` was saved from (see ``KernelSVMHead``)."""
        extra = _extra_state_of(state_dict, prefix, "torchfw.LinearHead")
        if prefix + "weight" not in state_dict:
            raise ValueError("not a LinearHead state dict: no 'weight'")
        head = cls(state_dict[prefix + "weight"], state_dict.get(prefix + "bias"),
                   classes=extra["classes"])
        head.load_state_dict({k[len(prefix):]: v for k, v in state_dict.items()
                              if k.startswith(prefix)})
        return head

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight.to(x.dtype).T + self.bias.to(x.dtype)

    @torch.jit.export
    def predict_index(self, x: Tensor) -> Tensor:
        return torch.argmax(self.forward(x), dim=1)


def _as_tensor(value) -> Tensor:
    """A tensor as it is; a SciPy sparse matrix densified; an array-like as a tensor."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "toarray"):
        value = value.toarray()
    return torch.as_tensor(np.asarray(value))


def _plain_classes(classes, n_outputs: int) -> list | None:
    """Labels as a list of Python numbers or strings (``weights_only``-loadable), or None."""
    if classes is None:
        return None
    if isinstance(classes, Tensor):
        classes = classes.tolist()
    elif hasattr(classes, "tolist"):  # NumPy arrays and scalars
        classes = classes.tolist()
    classes = list(classes)
    for label in classes:
        if isinstance(label, bool) or not isinstance(label, (int, float, str)):
            raise TypeError(f"classes must be numbers or strings, got {type(label).__name__} "
                            f"({label!r})")
    if len(classes) != n_outputs:
        raise ValueError(f"{len(classes)} classes for a head with {n_outputs} of them")
    return classes


def _extra_state_of(state_dict, prefix: str, fmt: str) -> dict:
    key = prefix + "_extra_state"
    extra = state_dict.get(key) if isinstance(state_dict, dict) else None
    if not isinstance(extra, dict) or extra.get("format") != fmt:
        raise ValueError(
            f"no {fmt} description under {key!r}: not a state dict of that head (or one saved "
            f"by a torchfw version whose heads did not save their kernel and classes)"
        )
    return extra


def _check_extra_state(state, fmt: str, mine: dict, rebuild: str) -> None:
    if not isinstance(state, dict) or state.get("format") != fmt:
        raise ValueError(f"the loaded state was not saved by a {fmt.split('.')[-1]}")
    # Classes left unspecified (None) take the saved ones: they do not change the function.
    differs = [f"{key}: saved {state.get(key)!r}, this head {value!r}"
               for key, value in mine.items()
               if state.get(key) != value and not (key == "classes" and value is None)]
    if differs:
        raise ValueError(
            f"the state dict was saved by a {fmt.split('.')[-1]} built differently ("
            + "; ".join(differs) + f"); its buffers would compute another function here. "
            f"Build the head from the state dict instead: {rebuild}"
        )


@torch.no_grad()
def extract_features(backbone: nn.Module, loader, device=None,
                     transform: Callable[[Tensor], Tensor] | None = None
                     ) -> tuple[Tensor, Tensor]:
    """Run ``backbone`` over ``loader`` (yielding ``(inputs, labels)``) and stack the outputs.

    Batches are moved to ``device`` (default: the backbone's first parameter's device). The
    backbone is put in eval mode for the pass and restored afterwards.
    """
    if device is None:
        param = next(backbone.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
    was_training = backbone.training
    backbone.eval()
    features, labels = [], []
    try:
        for batch in loader:
            if not isinstance(batch, (tuple, list)) or len(batch) < 2:
                raise ValueError("the loader must yield (inputs, labels) pairs")
            inputs, target = batch[0].to(device), batch[1]
            out = backbone(inputs)
            if transform is not None:
                out = transform(out)
            features.append(out.reshape(out.shape[0], -1))
            labels.append(torch.as_tensor(target).reshape(-1).cpu())
    finally:
        backbone.train(was_training)
    if not features:
        raise ValueError("the loader yielded no batches")
    return torch.cat(features), torch.cat(labels)


def fit_head(estimator, backbone: nn.Module, loader, device=None) -> nn.Module:
    """Fit ``estimator`` (e.g. :class:`torchfw.SVC`) on backbone features; return its head.

    The features stay on the backbone's device (the GPU when there is one), so the SVM trains
    there too unless the estimator's ``device`` says otherwise.
    """
    features, labels = extract_features(backbone, loader, device=device)
    estimator.fit(features, labels.numpy())
    return estimator.as_module()
