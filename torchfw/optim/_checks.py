"""Checks of :class:`torchfw.optim.StochasticFrankWolfe`'s groups: hyperparameters, oracles, shapes.

Hyperparameters are checked when a group is added and again at every step (schedulers change
them); a set is checked against each parameter once, on the ``meta`` device, so nothing is
allocated. Groups saved before later options existed get the defaults that reproduce the old
behaviour (:func:`fill_defaults`).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from ..sets.oracles import LMO
from ._update import view_shape

_RESCALES = ("diameter", "gradient", None)


class _Missing:
    """Default of ``lmo``: tells "not given" apart from an explicit ``lmo=None``."""

    def __repr__(self) -> str:
        return "<required>"


_MISSING = _Missing()


def _check_real(name: str, value, low: float, high: float = math.inf) -> None:
    # ``value < low`` rather than ``low <= value``: the comparisons numbers.Real declares.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) \
            or value < low or not value <= high:
        hi = "" if high == math.inf else f" and <= {high}"
        raise ValueError(f"{name} must be a number >= {low}{hi}, got {value!r}")


def _check_lr(lr, at_step: bool) -> None:
    if isinstance(lr, Tensor):
        if lr.numel() != 1:
            raise ValueError(f"Tensor lr must be 1-element, got shape {tuple(lr.shape)}")
        if not lr.is_floating_point():
            raise TypeError(f"a tensor lr must have a floating dtype, got {lr.dtype}")
        if lr.requires_grad:
            raise ValueError("a tensor lr must not require grad (differentiable steps are not "
                             "supported)")
        if at_step:
            # Reading the value would synchronize a CUDA lr at every step: checked when set.
            return
        value = float(lr)
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(f"lr must be a finite number >= 0.0, got {value!r}")
        return
    _check_real("lr", lr, 0.0)
    if math.isinf(lr):
        raise ValueError("lr must be finite, got inf")


def _check_hyperparameters(group: dict, at_step: bool = False) -> None:
    """Validate the numbers of a group (cheap: runs at every step, so schedulers are checked)."""
    _check_lr(group["lr"], at_step)
    _check_real("momentum", group["momentum"], 0.0, 1.0)
    _check_real("weight_decay", group["weight_decay"], 0.0)
    if math.isinf(group["weight_decay"]):
        raise ValueError("weight_decay must be finite, got inf")
    if group["rescale"] not in _RESCALES:
        raise ValueError(
            f"rescale must be 'diameter', 'gradient' or None, got {group['rescale']!r}"
        )
    if not isinstance(group["per_row"], bool):
        raise TypeError(f"per_row must be True or False, got {group['per_row']!r}")
    if not isinstance(group["maximize"], bool):
        raise TypeError(f"maximize must be True or False, got {group['maximize']!r}")
    if group.get("foreach") not in (None, True, False):
        raise TypeError(f"foreach must be None, True or False, got {group['foreach']!r}")
    if not isinstance(group["track_gap"], bool):
        raise TypeError(f"track_gap must be True or False, got {group['track_gap']!r}")


# Hyperparameters added after the first release, with the value that reproduces the old
# behaviour: groups saved before they existed load with these (as torch's own optimizers do).
_LATER_DEFAULTS = {"per_row": False, "weight_decay": 0.0, "rescale": "diameter",
                   "maximize": False, "foreach": None, "track_gap": False}


def _fill_defaults(group: dict) -> None:
    for key, value in _LATER_DEFAULTS.items():
        group.setdefault(key, value)


def _check_oracle(lmo) -> None:
    if lmo is not None and not isinstance(lmo, LMO):
        raise TypeError(
            f"lmo must be a torchfw.sets.oracles.LMO (Simplex, L1Ball, L2Ball, LinfBall, Box, ...) or "
            f"None for an unconstrained group, got {type(lmo).__name__}: torchfw calls "
            f"lmo.lmo(direction) and expects a vertex, so callables and other libraries' "
            f"constraint objects are not accepted"
        )


def _check_param_fits(lmo: LMO, p: Tensor, per_row: bool, label: str) -> None:
    """Check that the set applies to the parameter (shape of radii and bounds), allocation-free."""
    if per_row and p.dim() < 2:
        raise ValueError(
            f"per_row=True needs parameters with at least 2 dimensions (rows = dim 0), but "
            f"{label} has shape {tuple(p.shape)}; put 1-d parameters (biases) in a group with "
            f"per_row=False"
        )
    shape = view_shape(p, per_row)
    if not p.is_floating_point():
        raise TypeError(f"{label} has dtype {p.dtype}; Frank-Wolfe needs floating point")
    try:
        # The meta device runs the oracle's shape logic without touching memory.
        v = lmo.lmo(torch.empty(shape, dtype=p.dtype, device="meta"))
    except (RuntimeError, ValueError, IndexError) as exc:
        raise ValueError(
            f"{type(lmo).__name__} does not fit {label} of shape {tuple(p.shape)} viewed as "
            f"{shape} ({'one set per row' if per_row else 'one set per tensor'}): {exc}"
        ) from None
    if tuple(v.shape) != shape:
        raise ValueError(
            f"{type(lmo).__name__} returned a vertex of shape {tuple(v.shape)} for {label} viewed "
            f"as {shape}; a per-row radius needs one entry per row ({shape[0]})"
        )
