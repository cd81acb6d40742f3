r"""Stochastic Frank-Wolfe as a :class:`torch.optim.Optimizer`, for constrained parameters.

The optimizer keeps every constrained parameter :math:`\theta` inside a compact convex set
:math:`\mathcal{C}` (an LMO from :mod:`torchfw.sets.oracles`) by moving it towards a vertex of the set
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

costs one reduction per tensor on top of the step, so it is computed only for groups that ask
for it (``track_gap=True``) and then kept for monitoring (:meth:`StochasticFrankWolfe.fw_gaps`).
In the deterministic convex case it bounds the suboptimality; with stochastic directions it is
a noisy stationarity measure.

Which stochastic Frank-Wolfe: this is the *torch.optim* one (stochastic gradients of
parameters, with momentum). The *streaming* stochastic Frank-Wolfe of seed 001 (Ouyang & Gray,
SFW/MSFW: examples of a kernel SVM arrive one per iteration into a working set) is another
algorithm: ``SVC(solver="sfw" | "msfw")`` or ``FrankWolfe(..., stream=True)`` (see
:mod:`torchfw.solvers`). In the deterministic case (``momentum=0``, ``rescale=None``, learning
rate :math:`2/(k+2)`) a step here is the core's ``FrankWolfe(lmo, OpenLoop())`` step, a declared
second implementation (:mod:`torchfw.utils.twins`).

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.

M. Jaggi. "Revisiting Frank-Wolfe: Projection-Free Sparse Convex Optimization." ICML 2013.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from ..sets.oracles import LMO
from ._batched import (
    _NUMPY,
    FlatViews,
    _ArrayViews,
    _compiled_kernels,
    as_vector,
    directions,
    fast_kind,
    gamma_of,
    ksparse_update,
    l2_update,
    linf_host_constants,
    linf_momentum_host,
    linf_update,
    momentum_kernel_constants,
)
from ._checks import (
    _MISSING,
    _check_hyperparameters,
    _check_oracle,
    _check_param_fits,
    _fill_defaults,
    _Missing,
)
from ._lmo_state import lmo_from_state, lmo_to_state
from ._traced import l2_traced, linf_traced
from ._update import (
    as_rows,
    feasibility_atol,
    frank_wolfe_update,
    sgd_update,
    view_shape,
)
from .constraints import constraints_for, expected_init_norms

__all__ = ["StochasticFrankWolfe", "make_feasible", "constraints_for", "expected_init_norms",
           "lmo_to_state", "lmo_from_state"]


def _has_linf_kernel() -> bool:
    """Whether the fused L-inf kernel exists (numba). Whether compiled kernels run now (the
    cold start may defer them for a while) is the step's own test, at every step."""
    from . import _linf_kernel

    return _linf_kernel.linf_momentum_step is not None


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


def _keep_gap(state: dict, gap: Tensor) -> None:
    """Store a compiled step's gap in the state, in place where a gap of its shape exists.

    A compiled step then mutates its inputs instead of handing new tensors back to be stored
    in Python dicts; and the state tensors are static addresses of the compiled step (checked
    by identity, :meth:`StochasticFrankWolfe._init_group`), so a new tensor at every step
    would trace the step again at every step.
    """
    old = state.get("fw_gap")
    if old is not None and old.shape == gap.shape and old.dtype == gap.dtype:
        old.copy_(gap)
    else:
        state["fw_gap"] = gap


def _sets_of(group: dict) -> list:
    """The set of each parameter of a group: its ``lmo``, or its sequence of sets, one per
    parameter."""
    lmo = group["lmo"]
    if isinstance(lmo, (list, tuple)):
        return list(lmo)
    return [lmo] * len(group["params"])


@torch.no_grad()
def _project_into(p: Tensor, lmo: LMO, per_row: bool, atol: float) -> int:
    shape = view_shape(p, per_row)
    pv, copied = as_rows(p, shape)
    inside = lmo.contains(pv, atol=atol)
    n_out = int((~inside).sum())
    if n_out:
        # Rows already inside are kept bit for bit (a projection of a feasible point can still
        # move it by rounding, e.g. the sort-based simplex projection).
        pv.copy_(torch.where(inside.unsqueeze(-1), pv, lmo.project(pv)))
        if copied:
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
        The constraint set of the group (from :mod:`torchfw.sets.oracles`). Required: a group whose
        ``lmo`` is neither given in the group nor in the constructor is an error. ``None`` (given
        explicitly) makes the group *unconstrained*: it takes a plain momentum-SGD step
        :math:`\theta \leftarrow \theta - \eta d_t` with the same averaged direction (this equals
        ``torch.optim.SGD(momentum=mu, dampening=mu)``). Use it for parameters that should not be
        constrained (e.g. normalization layers) in a model whose other layers are. In a group,
        ``lmo`` may also be a list of sets (LMOs or ``None``), one per parameter of the group
        in the order of its ``params``: each parameter then has its own set under the
        group's hyperparameters, as :func:`constraints_for` with ``one_group=True`` builds
        them (the reference code's one group with one constraint per parameter). The steps
        are those of one group per parameter; a compiled step has fewer groups to verify at
        each call.
    lr : float or Tensor, default 0.1
        Learning rate :math:`\eta \ge 0`, read from the group at every step (LR schedulers work).
        A one-element tensor is accepted (its value is checked when the group is added).
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
    maximize : bool, default False
        Maximize the objective: the gradient is negated before weight decay and momentum.
    foreach : bool or None, default None
        Accepted for compatibility with ``torch.optim``; the value changes nothing. A step always
        updates the momentum buffers of all groups with multi-tensor (``torch._foreach_*``)
        calls, and L-infinity balls, L2 balls and K-sparse polytopes with a scalar radius (one
        set per tensor) take their Frank-Wolfe step that way too (:mod:`torchfw.optim._batched`);
        other sets take the per-tensor update.
    track_gap : bool, default False
        Compute the Frank-Wolfe gap :math:`\langle d_t, \theta_t - v_t\rangle` of each step
        (one reduction per tensor, which the update itself does not need) and keep it for
        :meth:`fw_gaps` and :meth:`fw_gap`. Off by default, as ``torch.optim`` optimizers
        compute nothing for monitoring; the iterates are the same either way. Like every
        key, it may be set per group (e.g. only for the layers to watch).

    Notes
    -----
    *State.* Per parameter: ``momentum_buffer`` (:math:`d_t`, when :math:`\mu > 0`), ``step``
    (a float32 CPU tensor, as in ``torch.optim``) and, in groups with ``track_gap=True``,
    ``fw_gap`` (the gap :math:`\langle d_t, \theta_t - v_t \rangle` of the last step, one value
    per row). State is keyed by the parameter, so parameters without a gradient in a step
    (``grad is None``: frozen, unused branch) are skipped without affecting the others.
    Parameters that have taken the same number of steps may share one ``step`` tensor (one
    add per step instead of one per parameter, in eager and compiled steps); read it, do not
    modify it in place. A step that skips some parameters gives the stepping ones new
    counters when they shared one with a skipped parameter, so each count stays its own.
    Under ``torch.compile`` the state of parameters that step for the first time is created
    in ``_init_group``, which the compiler runs eagerly when it traces the step (as for
    ``torch.optim``'s own optimizers), and the state tensors are then static addresses of
    the compiled step: change them in place, or load a state dict (a new tensor in the state
    traces the step again).

    *Checkpoints.* :meth:`state_dict` stores each group's oracle as plain data
    (:func:`lmo_to_state`), so ``torch.save(opt.state_dict(), f)`` then
    ``opt.load_state_dict(torch.load(f, weights_only=True))`` restores oracles, hyperparameters
    and buffers, and training resumes bit for bit (also from another live optimizer's
    ``state_dict()``: the loaded state owns its tensors).

    *Degenerate directions.* A set whose direction is exactly zero does not move (its gap is 0);
    a box coordinate with zero direction keeps its value. A NaN or infinite direction entry
    turns NaN the weights whose move reads it, as ``torch.optim.SGD`` would show it: the whole
    set, or in a box (and an L-infinity ball), a product of intervals, that coordinate alone
    (the whole row with ``rescale="gradient"``, whose step size reads the row's norm;
    ``docs/optim.md``).

    *Feasibility.* Start from feasible parameters (:meth:`make_feasible`); the first step warns if
    a parameter is outside its set.

    *Not the streaming SFW.* The streaming stochastic Frank-Wolfe of Ouyang & Gray (seed 001),
    for kernel SVMs, is ``SVC(solver="sfw")`` / ``FrankWolfe(..., stream=True)``, a different
    algorithm (:mod:`torchfw.solvers`).

    References
    ----------
    S. Pokutta, C. Spiegel, M. Zimmer, "Deep Neural Network Training with Frank-Wolfe",
    arXiv:2010.07243, 2020.

    Examples
    --------
    >>> import torch
    >>> from torchfw.sets.oracles import L1Ball, LinfBall
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
    >>> opt.param_groups[0]["track_gap"] = True  # monitor the weight's gap from now on
    >>> model(torch.randn(8, 4)).square().mean().backward()
    >>> opt.step()
    >>> bool(opt.fw_gap() >= 0)
    True
    """

    def __init__(self, params, lmo: LMO | None | _Missing = _MISSING, lr: float | Tensor = 0.1,
                 momentum: float = 0.9, rescale: str | None = "diameter",
                 weight_decay: float = 0.0, per_row: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 track_gap: bool = False):
        defaults = dict(lmo=lmo, lr=lr, momentum=momentum, rescale=rescale,
                        weight_decay=weight_decay, per_row=per_row, maximize=maximize,
                        foreach=foreach, track_gap=track_gap)
        # Fail on bad constructor values even when every group overrides them.
        _check_hyperparameters(defaults)
        if isinstance(lmo, (list, tuple)):
            raise TypeError("a sequence of sets, one per parameter, belongs in a parameter "
                            "group: {'params': [...], 'lmo': [set, ...]}")
        if not isinstance(lmo, _Missing):
            _check_oracle(lmo)
        self._plan: tuple | None = None  # (key, buckets) of the last step: see _step_plan
        super().__init__(params, defaults)

    # -- groups --------------------------------------------------------------------------------

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (see :class:`torch.optim.Optimizer`); it needs an ``lmo`` key or default."""
        if "lmo" not in param_group and isinstance(self.defaults.get("lmo"), _Missing):
            raise ValueError(
                "parameter group has no 'lmo': give each group a constraint set "
                "(e.g. {'params': ..., 'lmo': torchfw.sets.oracles.L1Ball(1.0)}), a default "
                "StochasticFrankWolfe(..., lmo=...), or lmo=None explicitly for an unconstrained "
                "(momentum SGD) group"
            )
        own_lr = "lr" in param_group
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        if not own_lr and isinstance(group["lr"], Tensor):
            # One tensor per group, or a scheduler's in-place update of one group's lr would
            # change the others' too.
            group["lr"] = group["lr"].clone()
        try:
            self._check_group(group)
        except (TypeError, ValueError):
            self.param_groups.pop()
            raise

    def _check_group(self, group: dict) -> None:
        if isinstance(group["lmo"], _Missing):  # pragma: no cover - add_param_group catches it
            raise ValueError("parameter group has no 'lmo'")
        lmo = group["lmo"]
        if isinstance(lmo, (list, tuple)):
            if len(lmo) != len(group["params"]):
                raise ValueError(
                    f"a sequence of sets needs one set per parameter of its group, in the "
                    f"order of the group's params: got {len(lmo)} sets for "
                    f"{len(group['params'])} parameters"
                )
            for each in lmo:
                _check_oracle(each)
        else:
            _check_oracle(lmo)
        _check_hyperparameters(group)
        names = group.get("param_names")
        for i, (p, each) in enumerate(zip(group["params"], _sets_of(group), strict=True)):
            if each is None:
                continue
            label = f"parameter {names[i]!r}" if names else f"parameter {i} of its group"
            _check_param_fits(each, p, group["per_row"], label)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._plan = None
        for group in self.param_groups:
            _fill_defaults(group)
        for value in self.state.values():
            # Older versions counted steps with a Python int.
            if "step" in value and not isinstance(value["step"], Tensor):
                value["step"] = torch.tensor(float(value["step"]), dtype=torch.float32)

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
        compiling = torch.compiler.is_compiling()
        if compiling:
            # read param_groups before _init_group: the compiler marks the parameters static
            # there (and _init_group's mapping of the state would otherwise take them as
            # inputs of the graph)
            groups = self.param_groups
            if not self._init_group():
                for group in groups:
                    _check_hyperparameters(group, at_step=True)  # raises the eager error
        plan = self._step_plan(compiling)
        counters: list[Tensor] = []
        first = False
        for bucket in plan:
            params = bucket["params"]
            grads = [p.grad for p in params]
            states = [self.state[p] for p in params]
            if any(g.is_sparse for g in grads):
                raise RuntimeError("StochasticFrankWolfe does not support sparse gradients")
            if bucket["first"]:
                first = True
                self._first_steps(bucket, params, states, compiling)
            counters += bucket["counters"]
            # tensors whose momentum average the L-inf kernel takes in its pass, once every one
            # has a buffer (eager steps only: _kernel_split)
            fused = bucket["fused"]
            if fused and not (_compiled_kernels()
                              and all("momentum_buffer" in states[i] for i in fused)):
                fused = ()
            ds, gs = directions(params, grads, states, *bucket["hyper"], defer=fused)
            for i in bucket["sgd"]:
                sgd_update(params[i], ds[i], bucket["groups"][i]["lr"])
            for i in bucket["generic"]:
                group = bucket["groups"][i]
                if compiling and group["track_gap"]:
                    out: dict = {}
                    frank_wolfe_update(params[i], ds[i], group, out, True,
                                       lmo=bucket["lmos"][i])
                    _keep_gap(states[i], out["fw_gap"])
                else:
                    frank_wolfe_update(params[i], ds[i], group, states[i], group["track_gap"],
                                       lmo=bucket["lmos"][i])
            for kind, track, idx, radii, gammas, ks, flats, host, radius, steps, kernel \
                    in bucket["fast"]:
                ps = [params[i] for i in idx]
                pds = [ds[i] for i in idx]
                if kernel is not None and fused:
                    # average and move in one pass (torchfw.optim._linf_kernel)
                    linf_momentum_host(ps, pds, [gs[i] for i in idx], radius, steps,
                                       bucket["hyper"][0], *kernel)
                    continue
                if steps is None:  # a tensor lr: gamma changes with its value
                    steps = [gamma_of(bucket["groups"][i], bucket["diameters"][i], p)
                             for i, p in zip(idx, ps, strict=True)]
                    gammas = None if compiling else as_vector(steps, ps[0])
                if compiling and kind != "ksparse":
                    # per-tensor operations, which the compiler fuses (torchfw.optim._traced)
                    traced = linf_traced if kind == "linf" else l2_traced
                    gaps = traced(ps, pds, radius, steps, track)
                elif kind == "linf":
                    gaps = linf_update(ps, pds, radii, gammas, flats, track, host)
                elif kind == "l2":
                    gaps = l2_update(ps, pds, radii, gammas, flats, track)
                else:
                    gaps = ksparse_update(ps, pds, radii, ks, gammas, flats, track)
                if gaps is None:
                    continue
                if compiling:
                    for i, gap in zip(idx, gaps, strict=True):
                        _keep_gap(states[i], gap)
                else:
                    for i, gap in zip(idx, gaps, strict=True):
                        states[i]["fw_gap"] = gap
        if compiling:
            self._count_traced(plan)
            return loss
        if counters:
            torch._foreach_add_(counters, 1.0)
        if first:
            # the key names the counters _first_steps has just handed out (else the next
            # step would see new counters and build the plan again)
            self._plan = (self._plan_key(), plan)
        return loss

    def _init_group(self) -> bool:
        r"""Check the hyperparameters and create the state of the parameters that step for the
        first time, in a compiled step; False if a hyperparameter is wrong (nothing created).

        ``torch.compile`` runs an optimizer's ``_init_group`` eagerly when it traces the step,
        as for ``torch.optim``'s own optimizers, and then treats every tensor of
        ``self.state`` as a static address: the compiled step checks each one by identity
        instead of by dtype, shape and strides and does not load it from ``self.state`` at
        every call (on the small models of ``benchmarks/sfw_step.py``, about a tenth of the
        step). So a compiled step creates here, and not in the traced code, the momentum
        buffer :math:`d_0 = g_0` (:math:`g_0 = \pm\nabla L + \lambda \theta_0`, as
        :func:`~torchfw.optim._batched.directions` forms it) and the step counter (one shared
        by the parameters that start together) of each parameter that has a gradient and no
        state. The traced step then averages the buffer with the same :math:`g_0`, which
        leaves it :math:`g_0` for finite entries, as the eager first step does (an infinite
        entry becomes NaN in the buffer, where the eager step keeps it infinite: the weights
        it moves turn NaN either way).

        The hyperparameters are checked here too (when traced: the compiled step is
        specialized on their values, so that a new value traces the step again): a check
        in the traced code would add the check's own functions and constants to what the
        compiled step verifies at every call. When one is wrong, the traced step runs the
        check itself, which raises the eager step's error.

        Runs only when traced: the eager step creates its state itself (:meth:`_first_steps`).
        """
        for group in self.param_groups:
            try:
                _check_hyperparameters(group, at_step=True)
            except (TypeError, ValueError):
                return False
        fresh: Tensor | None = None
        for group in self.param_groups:
            momentum, decay = group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if momentum != 0 and "momentum_buffer" not in state:
                    g = -p.grad if group["maximize"] else p.grad
                    if decay != 0:
                        g = torch.add(g, p, alpha=decay)
                    state["momentum_buffer"] = \
                        g.detach().clone(memory_format=torch.preserve_format)
                if "step" not in state:
                    if fresh is None:
                        fresh = torch.zeros((), dtype=torch.float32)
                    state["step"] = fresh
        return True

    def _count_traced(self, plan: list[dict]) -> None:
        """Add 1 to the step count of every parameter that stepped, in a compiled step.

        A counter tensor may be shared by parameters whose counts are equal (see
        :meth:`_first_steps`), and which tensors share is not something a compiled step can
        read without specializing on it. When every parameter of the optimizer has a gradient
        (the step the compiler sees the graph of), every holder of a counter steps, so each
        distinct counter takes one in-place add. When some parameter has none, it may hold a
        counter that a stepping one holds too: the stepping ones then get new counters
        ``count + 1`` and the skipped ones keep theirs (the next eager step sees new counters
        and builds its plan anew: :meth:`_plan_key`).
        """
        states = [self.state[p] for bucket in plan for p in bucket["params"]]
        distinct: list[Tensor] = []
        for state in states:
            if not any(state["step"] is c for c in distinct):
                distinct.append(state["step"])
        if not distinct:
            return
        # counters that a skipped parameter holds too must split: the stepping parameters
        # take new ones (count + 1); the others take the add in place (a new tensor at every
        # step would trace the step again at every step: the state tensors are static
        # addresses of a compiled step, checked by identity)
        skipped = [state["step"] for group in self.param_groups for p in group["params"]
                   if p.grad is None and "step" in (state := self.state.get(p, {}))]
        shared = [c for c in distinct if any(c is s for s in skipped)]
        own = [c for c in distinct if not any(c is s for s in skipped)]
        if own:
            torch._foreach_add_(own, 1.0)
        if not shared:
            return
        raised = torch._foreach_add(shared, 1.0)
        for state in states:
            for old, new in zip(shared, raised, strict=True):
                if state["step"] is old:
                    state["step"] = new
                    break

    def _first_steps(self, bucket: dict, params: list[Tensor], states: list[dict],
                     compiling: bool) -> None:
        """Step counters of a new plan's bucket, and the feasibility warning of first steps.

        ``state["step"]`` is a float32 CPU tensor, as in ``torch.optim`` (compiled steps then
        do not specialize on, and recompile for, every value of the counter). Parameters of a
        bucket step together for as long as the plan holds, so those whose counts are equal
        share one counter tensor, and a step adds 1 to each distinct counter once (one add per
        bucket, not one per parameter). Any change in which parameters step rebuilds the plan,
        which shares anew from the current counts. Compiled steps cannot read a count (that would
        specialize the graph on it): they keep the counters they find, give the parameters of a
        bucket that start there one new counter, and count with :meth:`_count_traced`.
        """
        shared: dict[float, Tensor] = {}
        counters: list[Tensor] = []
        fresh: Tensor | None = None
        for p, state, group, lmo in zip(params, states, bucket["groups"], bucket["lmos"],
                                        strict=True):
            step = state.get("step")
            if step is None:
                if lmo is not None and not compiling:
                    # The check reads a boolean on the host, which would break a compiled
                    # graph; compiled steps skip it.
                    self._warn_if_infeasible(lmo, p, group)
                if compiling:
                    # the parameters of a bucket that start together share one counter
                    if fresh is None:
                        fresh = torch.zeros((), dtype=torch.float32)
                    step = state["step"] = fresh
            if compiling:
                continue  # counted by _count_traced
            count = 0.0 if step is None else float(step)
            counter = shared.get(count)
            if counter is None:
                counter = shared[count] = torch.tensor(count, dtype=torch.float32)
                counters.append(counter)
            state["step"] = counter
        bucket["counters"] = counters
        if not compiling:
            bucket["first"] = False

    def _step_plan(self, compiling: bool) -> list[dict]:
        """Which parameters take which update, rebuilt only when groups or gradients change.

        Parameters of all groups are bucketed by device, dtype and momentum settings (one
        multi-tensor momentum update per bucket); within a bucket, the sets with a closed-form
        multi-tensor update (:mod:`torchfw.optim._batched`) are gathered by kind, with their radii
        and step sizes as vectors built once. ``compiling`` is the step's own test: should the
        compiler take this method as a frame of its own while the step runs eagerly (after a
        graph break), the plan must still be the eager step's.
        """
        key: list = []
        if not compiling:
            key = self._plan_key()
            if self._plan is not None and self._plan[0] == key:
                return self._plan[1]
            for group in self.param_groups:
                _check_hyperparameters(group, at_step=True)  # something changed: check again
        buckets: dict[tuple, dict] = {}
        for group in self.param_groups:
            hyper = (group["momentum"], group["weight_decay"], group["maximize"])
            track = group["track_gap"]
            for p, lmo in zip(group["params"], _sets_of(group), strict=True):
                if p.grad is None:
                    continue
                if not track and not compiling:
                    # a gap left from steps that tracked it would read as this step's
                    self.state.get(p, {}).pop("fw_gap", None)
                bucket = buckets.setdefault((p.device, p.dtype) + hyper, {
                    "hyper": hyper, "params": [], "groups": [], "lmos": [], "diameters": [],
                    "sgd": [], "generic": [], "fast": {}, "first": True})
                i = len(bucket["params"])
                bucket["params"].append(p)
                bucket["groups"].append(group)
                bucket["lmos"].append(lmo)
                kind = None if lmo is None else fast_kind(lmo, group)
                if kind == "ksparse" and not p.is_contiguous():
                    kind = None
                bucket["diameters"].append(lmo.diameter(p.numel()) if kind else 0.0)
                if lmo is None:
                    bucket["sgd"].append(i)
                elif kind is None:
                    bucket["generic"].append(i)
                else:
                    bucket["fast"].setdefault((kind, track), []).append(i)
        plan = []
        for bucket in buckets.values():
            fast = []
            fused: list[int] = []
            for kind, track, idx, kernel in self._kernel_split(bucket, compiling):
                like = bucket["params"][idx[0]]
                groups = [bucket["groups"][i] for i in idx]
                radius = [float(bucket["lmos"][i].radius) for i in idx]
                tensor_lr = any(isinstance(g["lr"], Tensor) for g in groups)
                steps = None if tensor_lr else [gamma_of(g, bucket["diameters"][i], like)
                                                for g, i in zip(groups, idx, strict=True)]
                # a compiled step of L-inf and L2 balls reads the Python numbers themselves
                vectors = not compiling or kind == "ksparse"
                radii = as_vector(radius, like) if vectors else None
                gammas = as_vector(steps, like) if vectors and steps is not None else None
                # K of K-sparse sets only: asking another set for it is one more guard per
                # group in a compiled step
                ks = [bucket["lmos"][i].k for i in idx] if kind == "ksparse" else []
                # 1-d views of the parameters and the directions, for the gaps' dot products
                flats = None if compiling else (FlatViews(), FlatViews())
                # the host's copies of the constants, for the eager CPU step of L-inf balls
                # (from the Python numbers: reading the device vectors would synchronize)
                host = None if compiling or kind != "linf" or like.device.type != "cpu" \
                    else linf_host_constants(radius, steps, [bucket["params"][i] for i in idx])
                if kernel and steps is not None:  # (_kernel_split leaves tensor lrs out)
                    # the fused kernel's constants and the NumPy views it reads
                    fused += idx
                    kernel = (momentum_kernel_constants(radius, steps, bucket["hyper"][0],
                                                        like.dtype), _ArrayViews())
                else:
                    kernel = None
                fast.append((kind, track, idx, radii, gammas, ks, flats, host, radius, steps,
                             kernel))
            bucket["fast"] = fast
            bucket["fused"] = tuple(fused)
            plan.append(bucket)
        if not compiling:
            # A compiled step is specialized on the groups by the compiler's own guards;
            # caching there would only add state for it to guard on.
            self._plan = (key, plan)
        return plan

    def _kernel_split(self, bucket: dict, compiling: bool) -> list[tuple]:
        """The bucket's closed-form updates as ``(kind, track, positions, fused)``, the L-inf
        tensors that one compiled pass averages and moves apart (``fused`` true).

        That pass (:func:`~torchfw.optim._linf_kernel.linf_momentum_step`) takes L-infinity
        balls with momentum, without gaps, with a float ``lr``, on contiguous float32 and
        float64 CPU tensors, in eager steps: their move is the compiled kernel's anyway
        (:func:`~torchfw.optim._batched.linf_update`), and the average then costs no pass of
        its own. A compiled step keeps inductor's loop, which fuses the average with the move
        too (:mod:`torchfw.optim._traced`): the kernel, called as an operator from the
        compiled graph, took as long per entry, plus the call.
        """
        out = []
        params = bucket["params"]
        for (kind, track), idx in bucket["fast"].items():
            like = params[idx[0]]
            take: list[int] = []
            if not compiling and kind == "linf" and not track and bucket["hyper"][0] != 0 \
                    and like.device.type == "cpu" and like.dtype in _NUMPY \
                    and not any(isinstance(bucket["groups"][i]["lr"], Tensor) for i in idx) \
                    and _has_linf_kernel():
                take = [i for i in idx if params[i].is_contiguous()]
            rest = [i for i in idx if i not in take]
            out += [(kind, track, part, fuse) for part, fuse in ((take, True), (rest, False))
                    if part]
        return out

    def _plan_key(self) -> list:
        """What the step plan depends on: every hyperparameter, the sets' radii and sizes,
        which parameters have a gradient, with their dtypes and devices, and which step counter
        each holds.

        Compared at each step (a few Python reads per group and parameter): a scheduler's new
        ``lr``, a set's new radius or a gradient set to ``None`` make the next step re-check the
        groups and rebuild the plan. Tensors (an ``lr``, per-row radii) enter by identity: their
        values are read by the step itself.
        """
        key: list = []
        for group in self.param_groups:
            lmo = group["lmo"]
            lr = group["lr"]
            key.append((id(lr) if isinstance(lr, Tensor) else lr, group["momentum"],
                        group["weight_decay"], group["rescale"], group["per_row"],
                        group["maximize"], group["foreach"], group["track_gap"], id(lmo)))
            # each set's identity, radius and K (one set, or one per parameter)
            for each in (lmo if isinstance(lmo, (list, tuple)) else (lmo,)):
                radius = getattr(each, "radius", None)
                key.append((id(each), id(radius) if isinstance(radius, Tensor) else radius,
                            getattr(each, "k", None)))
            # the counters too: a compiled step may have given some parameters new ones
            key += [(p.grad is not None, p.dtype, p.device,
                     id(state.get("step")) if (state := self.state.get(p)) else None)
                    for p in group["params"]]
        return key

    def _warn_if_infeasible(self, lmo: LMO, p: Tensor, group: dict) -> None:
        # One host sync per parameter, on its first step only.
        pv = p.detach().reshape(view_shape(p, group["per_row"]))
        inside = lmo.contains(pv, atol=feasibility_atol(pv.dtype))
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
            for p, lmo in zip(group["params"], _sets_of(group), strict=True):
                if lmo is not None and (p.requires_grad or include_frozen):
                    count += _project_into(p, lmo, group["per_row"], atol)
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
            Only parameters of groups with ``track_gap=True`` appear.

        Raises
        ------
        RuntimeError
            If there are constrained groups and none has ``track_gap=True``: no step computed
            a gap, and an empty or stale answer would read as one.
        """
        constrained = [group for group in self.param_groups
                       if any(lmo is not None for lmo in _sets_of(group))]
        if constrained and not any(group["track_gap"] for group in constrained):
            raise RuntimeError(
                "Frank-Wolfe gaps are not tracked: build the optimizer with track_gap=True "
                "(or set it in the parameter groups to monitor) to have each step compute them"
            )
        out = {}
        for group in constrained:
            if not group["track_gap"]:
                continue
            names = group.get("param_names")
            if named and names is None:
                raise ValueError("named=True needs an optimizer built from named_parameters()")
            for i, p in enumerate(group["params"]):
                gap = self.state.get(p, {}).get("fw_gap")
                if gap is None:
                    continue
                value = gap if (per_row and group["per_row"]) else gap.sum()
                out[names[i] if named and names is not None else p] = value
        return out

    def fw_gap(self) -> Tensor:
        """Sum of the last step's gaps over the tracked parameters, a float64 0-d tensor.

        The parameters form a product of sets, whose gap is the sum of the per-set gaps. Before
        the first step (or with no constrained parameter) there is no gap to report and the
        value is NaN, on the CPU: still a tensor, so a logging hook's ``.item()`` works, and not
        0, which would read as "converged". Raises ``RuntimeError`` as :meth:`fw_gaps` does
        when no constrained group has ``track_gap=True``.
        """
        gaps = list(self.fw_gaps().values())
        if not gaps:
            return torch.tensor(math.nan, dtype=torch.float64)
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
            lmo = group["lmo"]
            group["lmo"] = [lmo_to_state(each) for each in lmo] \
                if isinstance(lmo, (list, tuple)) else lmo_to_state(lmo)
        return state_dict

    def _check_buffers(self, state_dict: dict) -> None:
        """Refuse a saved momentum buffer whose shape is not its parameter's (at load, not at
        the next ``step()``, which would fail inside the update or broadcast silently)."""
        saved_state = state_dict.get("state", {})
        for i, (saved, current) in enumerate(zip(state_dict["param_groups"], self.param_groups,
                                                 strict=False)):
            for j, (index, param) in enumerate(zip(saved["params"], current["params"],
                                                   strict=False)):
                entry = saved_state.get(index)
                buf = entry.get("momentum_buffer") if isinstance(entry, dict) else None
                if buf is None:
                    continue
                if not isinstance(buf, Tensor) or tuple(buf.shape) != tuple(param.shape):
                    shape = tuple(buf.shape) if isinstance(buf, Tensor) else type(buf).__name__
                    raise ValueError(
                        f"saved state of parameter {j} of group {i}: 'momentum_buffer' has "
                        f"shape {shape}, the parameter {tuple(param.shape)}: the state dict "
                        f"is another model's"
                    )

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a :meth:`state_dict`: buffers, hyperparameters and the oracles of every group.

        As in ``torch.optim``, the saved hyperparameters (oracles included) replace the current
        ones. Tensor parameters of the oracles move to the device of their group's parameters.
        Groups saved before ``per_row``, ``rescale``, ``weight_decay``, ``maximize`` or ``foreach``
        existed load with the defaults that reproduce the old behaviour.

        The loaded state owns its tensors. ``torch.optim.Optimizer.load_state_dict`` keeps the
        given tensors when their device and dtype already fit, so an optimizer loaded from
        another live optimizer's ``state_dict()`` would share its momentum buffers and step
        counters, and the two would update the same buffers in place (resuming in memory would
        then not continue as the original does). Tensors still shared after loading are copied.
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
            if "track_gap" not in saved and current is not None:
                # Monitoring only (the iterates do not depend on it): a state dict saved
                # before the option existed keeps this optimizer's choice.
                saved["track_gap"] = current["track_gap"]
            _fill_defaults(saved)
            lmo = saved["lmo"]
            saved["lmo"] = [lmo_from_state(each, device=device) for each in lmo] \
                if isinstance(lmo, (list, tuple)) else lmo_from_state(lmo, device=device)
            if current is not None and len(current["params"]) == len(saved["params"]):
                # Check before loading, so that a state dict that does not fit leaves the
                # optimizer as it was (a mismatch in group sizes is torch's error to raise).
                candidate = {**saved, "params": current["params"]}
                if "param_names" in current:
                    candidate["param_names"] = current["param_names"]
                self._check_group(candidate)
            saved_groups.append(saved)
        state_dict["param_groups"] = saved_groups
        self._check_buffers(state_dict)
        given = {id(value) for entry in state_dict.get("state", {}).values()
                 for value in entry.values() if isinstance(value, Tensor)}
        super().load_state_dict(state_dict)
        # Step counts as float32 CPU tensors (older state dicts hold Python ints), one tensor
        # per count, as a step shares them (a compiled step cannot share them itself).
        shared: dict[float, Tensor] = {}
        for entry in self.state.values():
            if "step" in entry:
                count = float(entry["step"])
                if count not in shared:
                    shared[count] = torch.tensor(count, dtype=torch.float32)
                entry["step"] = shared[count]
        for entry in self.state.values():
            for key, value in entry.items():
                if id(value) in given:
                    entry[key] = value.clone()
