r"""Stochastic Frank-Wolfe as a :class:`torch.optim.Optimizer`, for constrained parameters.

The optimizer keeps every constrained parameter :math:`\theta` inside a compact convex set
:math:`\mathcal{C}` (an LMO from :mod:`torchfw.oracles`) by moving it towards a vertex of the set
instead of along the negative gradient. One step, for each parameter that has a gradient
(Pokutta, Spiegel & Zimmer, 2020, Algorithm 1 "SFW with momentum"):

.. math::
    g_t &= \tilde\nabla L(\theta_t) + \lambda\,\theta_t
        \qquad\text{(stochastic gradient, plus optional weight decay)} \\
    d_t &= (1 - \mu)\, g_t + \mu\, d_{t-1}, \qquad d_0 = g_0
        \qquad\text{(momentum: an exponential average of gradients)} \\
    v_t &= \operatorname*{argmin}_{v \in \mathcal{C}} \langle d_t, v \rangle
        \qquad\text{(the linear minimization oracle)} \\
    \theta_{t+1} &= \theta_t + \gamma_t\,(v_t - \theta_t),
        \qquad \gamma_t = \operatorname{clip}_{[0, 1]}(\eta\, s_t) .

The iterate is a convex combination of two points of :math:`\mathcal{C}` (:math:`\gamma_t \in [0,
1]`), so a feasible parameter stays feasible after every step, and no projection is needed. The
scale :math:`s_t` decouples the learning rate :math:`\eta` from the size of the set (``rescale``):

``"diameter"``
    :math:`s_t = 1 / D(\mathcal{C})`, the Euclidean diameter of the set, so the step length
    :math:`\|\theta_{t+1} - \theta_t\| \le \eta`.
``"gradient"``
    :math:`s_t = \|d_t\|_2 / \|v_t - \theta_t\|_2`, so the step length is :math:`\eta\|d_t\|_2`,
    as for SGD (before the clip).
``None``
    :math:`s_t = 1`: :math:`\eta` is the Frank-Wolfe step size itself.

These are the two rescaling rules of Pokutta et al. (2020, Section 3.1, "decoupling the learning
rate from the diameter"); the exact formulas, the momentum convention (the buffer starts at the
first gradient and then averages with weight :math:`1-\mu` on the new gradient) and the clip to
:math:`[0, 1]` are those of the authors' reference implementation (``ZIB-IOL/StochasticFrankWolfe``,
``SFW.step``, versions with default ``momentum=0.9``; a later version takes the weight of the new
gradient as a separate ``1 - dampening``, and this optimizer uses ``dampening = momentum``).

The Frank-Wolfe gap of the direction,

.. math::
    G_t = \langle d_t,\ \theta_t - v_t \rangle
        = \max_{v \in \mathcal{C}} \langle d_t, \theta_t - v \rangle \;\ge\; 0 ,

costs one reduction on top of the step and is kept for monitoring
(:meth:`StochasticFrankWolfe.fw_gaps`). In the deterministic convex case it bounds the
suboptimality; with stochastic directions it is a noisy stationarity measure.

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.

M. Jaggi. "Revisiting Frank-Wolfe: Projection-Free Sparse Convex Optimization." ICML 2013.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from .oracles import LMO, Box, L1Ball, L2Ball, LinfBall, Simplex

__all__ = ["StochasticFrankWolfe", "make_feasible", "lmo_to_state", "lmo_from_state"]

_RESCALES = ("diameter", "gradient", None)


class _Missing:
    """Default of ``lmo``: tells "not given" apart from an explicit ``lmo=None``."""

    def __repr__(self) -> str:
        return "<required>"


_MISSING = _Missing()


# --------------------------------------------------------------------------------------------
# Serialization of oracles as plain data
# --------------------------------------------------------------------------------------------

def _check_plain(where: str, value) -> None:
    """Raise unless ``value`` is data that ``torch.load(weights_only=True)`` accepts."""
    if value is None or isinstance(value, (bool, int, float, str, Tensor)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(where, item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be strings, got {key!r}")
            _check_plain(where, item)
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}; only numbers, strings, None, tensors and "
        f"lists/tuples/dicts of them can be saved without pickling code"
    )


def lmo_to_state(lmo: LMO | None) -> dict | None:
    """Describe an oracle as plain data: its type name and its constructor arguments.

    The result holds only strings, numbers, ``None`` and tensors, so a state dict containing it
    loads with ``torch.load(..., weights_only=True)`` (which refuses arbitrary objects).

    Parameters
    ----------
    lmo : LMO or None
        The oracle. Each argument of its ``__init__`` must be stored on the instance under the same
        name (or with a leading underscore), which is the convention of :mod:`torchfw.oracles`.

    Returns
    -------
    dict or None
        ``{"type": "module.QualName", "params": {name: value}}``; ``None`` for ``None``.
    """
    if lmo is None:
        return None
    if not isinstance(lmo, LMO):
        raise TypeError(f"expected a torchfw.oracles.LMO, got {type(lmo).__name__}")
    cls = type(lmo)
    params = {}
    for name, spec in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
            raise TypeError(
                f"cannot serialize {cls.__name__}: its constructor takes *args or **kwargs"
            )
        for attr in (name, "_" + name):
            if hasattr(lmo, attr):
                value = getattr(lmo, attr)
                break
        else:
            raise TypeError(
                f"cannot serialize {cls.__name__}: constructor argument {name!r} is not stored as "
                f"attribute {name!r} or '_{name}'"
            )
        _check_plain(f"{cls.__name__}.{name}", value)
        # Clone tensors: the state dict must not change when the oracle is mutated later.
        params[name] = value.detach().clone() if isinstance(value, Tensor) else value
    return {"type": f"{cls.__module__}.{cls.__qualname__}", "params": params}


def _lmo_classes() -> dict[str, type]:
    """Every LMO subclass defined so far, by qualified name.

    Only classes already imported are candidates, so loading never imports a module named by a
    file (what ``weights_only=True`` is there to prevent).
    """
    found: dict[str, type] = {}
    todo = [LMO]
    while todo:
        cls = todo.pop()
        found[f"{cls.__module__}.{cls.__qualname__}"] = cls
        todo.extend(cls.__subclasses__())
    return found


def _to_device(value, device):
    if isinstance(value, Tensor):
        return value.to(device) if device is not None else value
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_device(v, device) for v in value)
    return value


def lmo_from_state(state, device: torch.device | str | None = None) -> LMO | None:
    """Rebuild an oracle from :func:`lmo_to_state` output.

    Parameters
    ----------
    state : dict, LMO or None
        The plain-data description (an LMO instance is returned unchanged).
    device : torch.device, optional
        Where to put tensor parameters (radii, bounds), e.g. the device of the parameters.
    """
    if state is None or isinstance(state, LMO):
        return state
    if not isinstance(state, dict) or "type" not in state or "params" not in state:
        raise ValueError(f"not a serialized LMO (expected {{'type', 'params'}}): {state!r}")
    classes = _lmo_classes()
    cls = classes.get(state["type"])
    if cls is None:
        raise ValueError(
            f"unknown LMO type {state['type']!r}; import the module that defines it before "
            f"loading (known: {sorted(classes)})"
        )
    params = {k: _to_device(v, device) for k, v in state["params"].items()}
    return cls(**params)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def _view_shape(p: Tensor, per_row: bool) -> tuple[int, int]:
    """Shape under which a parameter meets its set: (1, numel) or (rows, numel / rows)."""
    if per_row:
        return (p.shape[0], p[0].numel())
    return (1, p.numel())


def _as_view(t: Tensor, shape) -> Tensor:
    # A view when the layout allows it (the update then lands in place); a copy otherwise
    # (e.g. channels_last weights), which the caller writes back.
    return t.view(shape) if t.is_contiguous() else t.reshape(shape)


def _feasibility_atol(dtype: torch.dtype) -> float:
    # Steps are convex combinations computed in floating point: allow rounding, not more.
    return math.sqrt(torch.finfo(dtype).eps)


def _row_diameters(lmo: LMO, pv: Tensor) -> float | Tensor:
    """Euclidean diameter of the set of each row of ``pv`` (a float, or a (B, 1) tensor).

    Never reads a tensor back to the host, so a CUDA step does not synchronize.
    """
    n = pv.shape[-1]
    radius = getattr(lmo, "radius", None)
    if type(lmo) in (Simplex, L1Ball, L2Ball, LinfBall) and isinstance(radius, Tensor):
        # These sets are r times the unit set, so the diameter scales with each row's radius.
        unit = type(lmo)(1.0).diameter(n)
        return unit * radius.to(device=pv.device, dtype=pv.dtype).reshape(-1, 1)
    if type(lmo) is Box and (isinstance(lmo.lower, Tensor) or isinstance(lmo.upper, Tensor)):
        # Tensor bounds may differ per row: the diameter is ||upper - lower|| row by row.
        ones = torch.ones_like(pv)
        return torch.linalg.vector_norm(lmo.lmo(-ones) - lmo.lmo(ones), dim=-1, keepdim=True)
    return lmo.diameter(n)


def _check_real(name: str, value, low: float, high: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) \
            or not low <= value <= high:
        hi = "" if high == math.inf else f" and <= {high}"
        raise ValueError(f"{name} must be a number >= {low}{hi}, got {value!r}")


def _check_hyperparameters(group: dict) -> None:
    """Validate the numbers of a group (cheap: runs at every step, so schedulers are checked)."""
    _check_real("lr", group["lr"], 0.0)
    if math.isinf(group["lr"]):
        raise ValueError("lr must be finite, got inf")
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


def _check_oracle(lmo) -> None:
    if lmo is not None and not isinstance(lmo, LMO):
        raise TypeError(
            f"lmo must be a torchfw.oracles.LMO (Simplex, L1Ball, L2Ball, LinfBall, Box, ...) or "
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
    shape = _view_shape(p, per_row)
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


def _params_of(params) -> list[Tensor]:
    if isinstance(params, nn.Module):
        return list(params.parameters())
    if isinstance(params, Tensor):
        return [params]
    if isinstance(params, Iterable):
        out = []
        for item in params:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Tensor):
                item = item[1]  # named_parameters()
            if not isinstance(item, Tensor):
                raise TypeError(f"expected tensors, got {type(item).__name__}")
            out.append(item)
        return out
    raise TypeError(f"expected a Module, a tensor or an iterable of tensors, got {type(params)}")


@torch.no_grad()
def _project_into(p: Tensor, lmo: LMO, per_row: bool, atol: float) -> int:
    shape = _view_shape(p, per_row)
    pv = _as_view(p, shape)
    inside = lmo.contains(pv, atol=atol)
    n_out = int((~inside).sum())
    if n_out:
        # Rows already inside are kept bit for bit (a projection of a feasible point can still
        # move it by rounding, e.g. the sort-based simplex projection).
        pv.copy_(torch.where(inside.unsqueeze(-1), pv, lmo.project(pv)))
        if pv.data_ptr() != p.data_ptr():
            p.copy_(pv.view(p.shape))
    return n_out


def make_feasible(params, lmo: LMO, *, per_row: bool = False, atol: float = 0.0) -> int:
    r"""Move parameters into a set by Euclidean projection, in place.

    Each parameter (or, with ``per_row=True``, each row ``p[i]``) that lies outside the set is
    replaced by its projection :math:`\Pi_{\mathcal{C}}(\theta) = \operatorname{argmin}_{x \in
    \mathcal{C}} \|x - \theta\|_2`, the feasible point closest to the current one, so pretrained or
    initialized weights change as little as possible (they are not re-initialized, and points
    already inside are left bit-for-bit unchanged). Frank-Wolfe iterates are convex combinations of
    the starting point and vertices, so training should start from a feasible point.

    Parameters
    ----------
    params : nn.Module, Tensor or iterable of Tensor
        The parameters (``named_parameters()`` pairs are accepted too).
    lmo : LMO
        The set.
    per_row : bool, default False
        One set per row (dim 0) instead of one per tensor.
    atol : float, default 0.0
        Points within ``atol`` of the set (in the set's own ``contains`` test) count as inside.

    Returns
    -------
    int
        How many tensors (or rows) were projected.
    """
    if lmo is None:
        raise TypeError("make_feasible needs an LMO; there is nothing to project onto")
    _check_oracle(lmo)
    if not isinstance(per_row, bool):
        raise TypeError(f"per_row must be True or False, got {per_row!r}")
    count = 0
    for i, p in enumerate(_params_of(params)):
        _check_param_fits(lmo, p, per_row, f"parameter {i}")
        count += _project_into(p, lmo, per_row, atol)
    return count


# --------------------------------------------------------------------------------------------
# The optimizer
# --------------------------------------------------------------------------------------------

class StochasticFrankWolfe(torch.optim.Optimizer):
    r"""Stochastic Frank-Wolfe with momentum: a ``torch.optim`` optimizer for constrained weights.

    For each parameter with a gradient, a step computes the momentum direction
    :math:`d_t = (1 - \mu) g_t + \mu d_{t-1}` (:math:`d_0 = g_0`, with
    :math:`g_t = \nabla L + \lambda \theta_t` when ``weight_decay`` :math:`= \lambda > 0`), asks the
    group's oracle for the vertex :math:`v_t = \operatorname{argmin}_{v \in \mathcal{C}} \langle
    d_t, v \rangle` and moves :math:`\theta_{t+1} = \theta_t + \gamma_t (v_t - \theta_t)` with
    :math:`\gamma_t = \operatorname{clip}_{[0,1]}(\eta\, s_t)` (see :mod:`torchfw.optim` for the
    rescaling :math:`s_t`). Feasible parameters therefore stay feasible after every step
    (Pokutta, Spiegel & Zimmer, 2020).

    Parameters
    ----------
    params : iterable
        Parameters, ``named_parameters()`` pairs, or dicts defining parameter groups. Every key
        below may be set per group; groups without a key take the constructor's value.
    lmo : LMO or None
        The constraint set of the group (from :mod:`torchfw.oracles`). Required: a group whose
        ``lmo`` is neither given in the group nor in the constructor is an error. ``None`` (given
        explicitly) makes the group *unconstrained*: it takes a plain momentum-SGD step
        :math:`\theta \leftarrow \theta - \eta d_t` with the same averaged direction (this equals
        ``torch.optim.SGD(momentum=mu, dampening=mu)``). Use it for parameters that should not be
        constrained (e.g. normalization layers) in a model whose other layers are.
    lr : float, default 0.1
        Learning rate :math:`\eta \ge 0`, read from the group at every step (LR schedulers work).
        The Frank-Wolfe step is :math:`\min(1, \eta s_t)`, so values above 1 make sense with
        ``rescale="diameter"`` on large sets.
    momentum : float, default 0.9
        :math:`\mu \in [0, 1]`: weight of the previous direction. ``0`` uses the raw gradient.
    rescale : {"diameter", "gradient", None}, default "diameter"
        Learning-rate rescaling :math:`s_t`: ``1 / diameter`` of the set, ``||d|| / ||v - theta||``,
        or none. With ``per_row=True`` both are computed row by row (one step size per row).
    weight_decay : float, default 0.0
        :math:`\lambda \ge 0`, added to the gradient before the momentum average and the oracle,
        i.e. the optimizer works on :math:`L(\theta) + \frac{\lambda}{2}\|\theta\|^2` over the set.
        With a constraint, the set itself is usually the regularizer, so this is often 0.
    per_row : bool, default False
        ``False``: one set per parameter tensor (viewed as ``(1, numel)``). ``True``: one set per
        row, i.e. per slice ``p[i]`` along dim 0 (viewed as ``(rows, -1)``): an L1 ball per output
        neuron of a ``Linear`` weight ``(out, in)`` or per filter of a conv weight
        ``(out, in, kh, kw)``. Radii may then be tensors of shape ``(rows,)``. 1-d parameters
        (biases) with ``per_row=True`` are rejected: put them in another group.

    Notes
    -----
    *State.* Per parameter: ``momentum_buffer`` (:math:`d_t`, when :math:`\mu > 0`), ``step``
    and ``fw_gap`` (the gap :math:`\langle d_t, \theta_t - v_t \rangle` of the last step, one
    value per row). State is keyed by the parameter, so parameters without a gradient in a step
    (``grad is None``: frozen, unused branch) are skipped without affecting the others.

    *Checkpoints.* :meth:`state_dict` stores each group's oracle as plain data
    (:func:`lmo_to_state`), so ``torch.save(opt.state_dict(), f)`` then
    ``opt.load_state_dict(torch.load(f, weights_only=True))`` restores oracles, hyperparameters
    and buffers, and training resumes bit for bit.

    *Feasibility.* Start from feasible parameters (:meth:`make_feasible`); the first step warns if
    a parameter is outside its set.

    References
    ----------
    S. Pokutta, C. Spiegel, M. Zimmer, "Deep Neural Network Training with Frank-Wolfe",
    arXiv:2010.07243, 2020.

    Examples
    --------
    >>> import torch
    >>> from torchfw.oracles import L1Ball, LinfBall
    >>> from torchfw.optim import StochasticFrankWolfe
    >>> model = torch.nn.Linear(4, 3)
    >>> opt = StochasticFrankWolfe([
    ...     {"params": [model.weight], "lmo": L1Ball(1.0), "per_row": True},
    ...     {"params": [model.bias], "lmo": LinfBall(0.5)},
    ... ], lr=0.1, momentum=0.9)
    >>> _ = opt.make_feasible()
    >>> loss = model(torch.randn(8, 4)).square().mean()
    >>> loss.backward()
    >>> opt.step()
    >>> bool(L1Ball(1.0).contains(model.weight).all())
    True
    """

    def __init__(self, params, lmo: LMO | None = _MISSING, lr: float = 0.1,
                 momentum: float = 0.9, rescale: str | None = "diameter",
                 weight_decay: float = 0.0, per_row: bool = False):
        defaults = dict(lmo=lmo, lr=lr, momentum=momentum, rescale=rescale,
                        weight_decay=weight_decay, per_row=per_row)
        # Fail on bad constructor values even when every group overrides them.
        _check_hyperparameters(defaults)
        if not isinstance(lmo, _Missing):
            _check_oracle(lmo)
        super().__init__(params, defaults)

    # -- groups --------------------------------------------------------------------------------

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (see :class:`torch.optim.Optimizer`); it needs an ``lmo`` key or default."""
        if "lmo" not in param_group and isinstance(self.defaults.get("lmo"), _Missing):
            raise ValueError(
                "parameter group has no 'lmo': give each group a constraint set "
                "(e.g. {'params': ..., 'lmo': torchfw.oracles.L1Ball(1.0)}), a default "
                "StochasticFrankWolfe(..., lmo=...), or lmo=None explicitly for an unconstrained "
                "(momentum SGD) group"
            )
        super().add_param_group(param_group)
        try:
            self._check_group(self.param_groups[-1])
        except (TypeError, ValueError):
            self.param_groups.pop()
            raise

    def _check_group(self, group: dict) -> None:
        if isinstance(group["lmo"], _Missing):  # pragma: no cover - add_param_group catches it
            raise ValueError("parameter group has no 'lmo'")
        _check_oracle(group["lmo"])
        _check_hyperparameters(group)
        if group["lmo"] is None:
            return
        names = group.get("param_names")
        for i, p in enumerate(group["params"]):
            label = f"parameter {names[i]!r}" if names else f"parameter {i} of its group"
            _check_param_fits(group["lmo"], p, group["per_row"], label)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("per_row", False)
            group.setdefault("weight_decay", 0.0)
            group.setdefault("rescale", "diameter")

    # -- the step ------------------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure=None):
        """Take one stochastic Frank-Wolfe step on every parameter that has a gradient.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss; called with gradients enabled before
            the step (the ``torch.optim`` contract).

        Returns
        -------
        The closure's loss, or ``None`` without a closure.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            _check_hyperparameters(group)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("StochasticFrankWolfe does not support sparse gradients")
                state = self.state[p]
                d = self._direction(p, group, state)
                if group["lmo"] is None:
                    p.add_(d, alpha=-group["lr"])
                else:
                    self._frank_wolfe_update(p, d, group, state)
                state["step"] = state.get("step", 0) + 1
        return loss

    @staticmethod
    def _direction(p: Tensor, group: dict, state: dict) -> Tensor:
        g = p.grad
        if group["weight_decay"] != 0:
            g = g.add(p, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum == 0:
            # A stale buffer would otherwise resurface if a schedule turns momentum back on.
            state.pop("momentum_buffer", None)
            return g
        buf = state.get("momentum_buffer")
        if buf is None:
            # d_0 = g_0 (the reference implementation's start), not a zero-started average
            # that would shrink the first directions by (1 - momentum).
            buf = state["momentum_buffer"] = g.detach().clone(memory_format=torch.preserve_format)
        else:
            buf.mul_(momentum).add_(g, alpha=1 - momentum)
        return buf

    def _frank_wolfe_update(self, p: Tensor, d: Tensor, group: dict, state: dict) -> None:
        lmo: LMO = group["lmo"]
        shape = _view_shape(p, group["per_row"])
        pv = _as_view(p, shape)
        dv = d.reshape(shape)
        if "step" not in state:
            self._warn_if_infeasible(lmo, pv, group)
        v = lmo.lmo(dv)
        diff = v - pv
        # Gap of the current iterate for this direction, one value per row; >= 0 when pv is in the
        # set because v minimizes <d, .> over it.
        state["fw_gap"] = -(dv * diff).sum(dim=-1)
        gamma = self._step_size(group, lmo, pv, dv, diff)
        # lerp is exact at the end points (gamma = 1 lands on the vertex), which keeps iterates
        # feasible up to one rounding of a convex combination.
        pv.lerp_(v, gamma)
        if pv.data_ptr() != p.data_ptr():
            p.copy_(pv.view(p.shape))

    @staticmethod
    def _step_size(group: dict, lmo: LMO, pv: Tensor, dv: Tensor, diff: Tensor):
        lr = group["lr"]
        rescale = group["rescale"]
        if rescale is None:
            return min(lr, 1.0)
        if rescale == "diameter":
            diameter = _row_diameters(lmo, pv)
            if isinstance(diameter, Tensor):
                tiny = torch.finfo(pv.dtype).tiny
                return torch.where(diameter > 0, lr / diameter.clamp_min(tiny),
                                   torch.ones_like(diameter)).clamp(0.0, 1.0)
            # A zero diameter means a single point: moving all the way is exact.
            return 1.0 if diameter == 0 else min(lr / diameter, 1.0)
        # "gradient": step length lr * ||d||, as SGD would take (kept on the device: no sync).
        tiny = torch.finfo(pv.dtype).tiny
        ratio = torch.linalg.vector_norm(dv, dim=-1, keepdim=True) / \
            torch.linalg.vector_norm(diff, dim=-1, keepdim=True).clamp_min(tiny)
        return (lr * ratio).clamp(0.0, 1.0)

    def _warn_if_infeasible(self, lmo: LMO, pv: Tensor, group: dict) -> None:
        # One host sync per parameter, on its first step only.
        inside = lmo.contains(pv, atol=_feasibility_atol(pv.dtype))
        if not bool(inside.all()):
            where = f"{int((~inside).sum())} of {inside.numel()} rows" if group["per_row"] \
                else "the whole tensor"
            warnings.warn(
                f"a parameter of shape {tuple(pv.shape)} is outside its {type(lmo).__name__} "
                f"({where}); Frank-Wolfe steps only mix it with vertices, so it stays infeasible "
                f"until the steps add up to 1. Call optimizer.make_feasible() before training.",
                RuntimeWarning, stacklevel=4,
            )

    # -- feasibility and monitoring ----------------------------------------------------------

    @torch.no_grad()
    def make_feasible(self, *, include_frozen: bool = False, atol: float = 0.0) -> int:
        """Project every constrained parameter onto its group's set (see :func:`make_feasible`).

        Parameters
        ----------
        include_frozen : bool, default False
            Also project parameters with ``requires_grad=False``. They are never updated, so by
            default they are left exactly as they are.
        atol : float, default 0.0
            Tolerance of the "already inside" test.

        Returns
        -------
        int
            How many tensors (or rows, for ``per_row`` groups) were projected.
        """
        count = 0
        for group in self.param_groups:
            if group["lmo"] is None:
                continue
            for p in group["params"]:
                if p.requires_grad or include_frozen:
                    count += _project_into(p, group["lmo"], group["per_row"], atol)
        return count

    def fw_gaps(self, *, per_row: bool = False, named: bool = False) -> dict:
        r"""Frank-Wolfe gaps :math:`\langle d_t, \theta_t - v_t \rangle` of the last step.

        They come from the direction, iterate and vertex of the last :meth:`step` (no extra
        forward or backward pass); :math:`\theta_t` is the iterate *before* that step. Only
        constrained parameters that have taken a step appear.

        Parameters
        ----------
        per_row : bool, default False
            For ``per_row`` groups, return the gap of each row (shape ``(rows,)``) instead of their
            sum (the gap of the product of the row sets).
        named : bool, default False
            Key by parameter name (needs an optimizer built from ``named_parameters()``) instead of
            by the parameter tensor.

        Returns
        -------
        dict
            Parameter (or name) -> gap tensor, ``>= 0`` for feasible parameters up to rounding.
        """
        out = {}
        for group in self.param_groups:
            if group["lmo"] is None:
                continue
            names = group.get("param_names")
            if named and names is None:
                raise ValueError("named=True needs an optimizer built from named_parameters()")
            for i, p in enumerate(group["params"]):
                gap = self.state.get(p, {}).get("fw_gap")
                if gap is None:
                    continue
                value = gap if (per_row and group["per_row"]) else gap.sum()
                out[names[i] if named else p] = value
        return out

    def fw_gap(self) -> Tensor | None:
        """Sum of the last step's gaps over all constrained parameters (``None`` before a step).

        The parameters form a product of sets, whose gap is the sum of the per-set gaps.
        """
        gaps = list(self.fw_gaps().values())
        if not gaps:
            return None
        device = gaps[0].device
        return torch.stack([g.to(device=device, dtype=torch.float64) for g in gaps]).sum()

    # -- checkpoints -------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """``torch.optim.Optimizer.state_dict`` with each group's oracle saved as plain data.

        The result loads with ``torch.load(..., weights_only=True)``; see :func:`lmo_to_state`.
        """
        state_dict = super().state_dict()
        # pack_group built fresh dicts: replacing the entry leaves the live groups untouched.
        for group in state_dict["param_groups"]:
            group["lmo"] = lmo_to_state(group["lmo"])
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a :meth:`state_dict`: buffers, hyperparameters and the oracles of every group.

        As in ``torch.optim``, the saved hyperparameters (oracles included) replace the current
        ones. Tensor parameters of the oracles move to the device of their group's parameters.
        """
        state_dict = dict(state_dict)
        saved_groups = []
        for i, saved in enumerate(state_dict["param_groups"]):
            if "lmo" not in saved:
                raise ValueError(
                    f"saved parameter group {i} has no 'lmo' entry: not a StochasticFrankWolfe "
                    f"state dict"
                )
            current = self.param_groups[i] if i < len(self.param_groups) else None
            device = current["params"][0].device if current and current["params"] else None
            saved = dict(saved)
            saved["lmo"] = lmo_from_state(saved["lmo"], device=device)
            if current is not None and len(current["params"]) == len(saved["params"]):
                # Check before loading, so that a state dict that does not fit leaves the
                # optimizer as it was (a mismatch in group sizes is torch's error to raise).
                candidate = {**saved, "params": current["params"]}
                if "param_names" in current:
                    candidate["param_names"] = current["param_names"]
                self._check_group(candidate)
            saved_groups.append(saved)
        state_dict["param_groups"] = saved_groups
        super().load_state_dict(state_dict)
