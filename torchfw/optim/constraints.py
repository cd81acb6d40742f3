r"""One call that constrains a whole model: a parameter group per parameter, radii from its init.

Pokutta, Spiegel & Zimmer (2020, Section 3.2 and their reference code's
``create_lp_constraints(model, ord, value, mode)``) constrain each layer of a network separately
and size each set by the layer's initialization, so that one number ``value`` means the same
thing for a 64-wide and a 4096-wide layer. The rule, which :func:`constraints_for` follows:

* ``mode="initialization"``: the Euclidean diameter of the set of a parameter :math:`\theta` is

  .. math:: D(\mathcal{C}_\theta) = 2\,w\,\mathbb{E}\,\|\theta_0\|_2 ,

  :math:`w` = ``value`` and :math:`\theta_0` drawn by the layer's own initializer
  (``module.reset_parameters()``). The expectation is estimated by drawing ``samples``
  initializations (the reference code draws 100) of a copy of the layer, under a forked
  random-number generator seeded with ``seed``: the model's weights and the caller's random
  stream are untouched, and the radii do not depend on which initial weights the model
  happens to hold. The radius follows from the set's diameter in dimension
  :math:`n` = ``p.numel()``: :math:`r = D / D_1(n)` with :math:`D_1` the diameter of the unit
  set (:meth:`~torchfw.sets.oracles.LMO.diameter`), i.e.

  ``"l2"``, ``"l1"``: :math:`D_1 = 2`, radius :math:`w\,\mathbb{E}\|\theta_0\|_2`;
  ``"linf"``: :math:`D_1 = 2\sqrt{n}`, radius :math:`w\,\mathbb{E}\|\theta_0\|_2 / \sqrt{n}`;
  ``"lp"``: :math:`D_1 = 2 n^{\max(0, 1/2 - 1/p)}`, radius
  :math:`w\,\mathbb{E}\|\theta_0\|_2 / n^{\max(0, 1/2 - 1/p)}`;
  ``"ksparse"``: :math:`D_1 = 2\sqrt{K}`, radius :math:`w\,\mathbb{E}\|\theta_0\|_2 / \sqrt{K}`.

  A parameter whose layer has no ``reset_parameters`` is sized by its current norm; a
  parameter whose expected initial norm is 0 (zero-initialized biases) by the norm 1, as the
  reference code does.
* ``mode="diameter"``: every set has Euclidean diameter ``value``.
* ``mode="radius"``: every set has radius ``value``.

With ``rescale="diameter"`` (the optimizer's default) the step length of every layer is then at
most the learning rate, whatever the layer's size.

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Iterable

import torch
from torch import nn

from ..sets.oracles import LMO, L1Ball, L2Ball, LinfBall
from ..sets.polytopes import KSparsePolytope, LpBall

__all__ = ["constraints_for", "expected_init_norms"]

_SETS = ("l2", "l1", "linf", "lp", "ksparse")
_MODES = ("initialization", "diameter", "radius")


def _unit_set(kind: str, n: int, p: float | None, k: int | None) -> LMO:
    if kind == "l2":
        return L2Ball(1.0)
    if kind == "l1":
        return L1Ball(1.0)
    if kind == "linf":
        return LinfBall(1.0)
    if kind == "lp":
        assert p is not None
        return LpBall(p, 1.0)
    assert k is not None
    return KSparsePolytope(k, 1.0)


def _with_radius(unit: LMO, radius: float) -> LMO:
    out = copy.copy(unit)
    out.radius = radius  # type: ignore[attr-defined]  # every set of _unit_set has a radius
    return out


def _owners(model: nn.Module) -> dict[int, tuple[str, nn.Module]]:
    """The module that registers each parameter directly, by the parameter's id."""
    owners: dict[int, tuple[str, nn.Module]] = {}
    for mod_name, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), (f"{mod_name}.{name}" if mod_name else name, module))
    return owners


@torch.no_grad()
def expected_init_norms(model: nn.Module, *, samples: int = 100, seed: int = 0) -> dict[str, float]:
    r"""Monte Carlo estimate of :math:`\mathbb{E}\|\theta_0\|_2` for every parameter of ``model``.

    Each layer with a ``reset_parameters`` method is copied and re-initialized ``samples``
    times; the norms of its own parameters are averaged. Parameters of layers without one get
    their current norm. The model is not modified and the global random state is restored.

    Parameters
    ----------
    model : nn.Module
    samples : int, default 100
        Draws per layer.
    seed : int, default 0
        Seed of the forked generator (CPU, and the CUDA devices the model uses).

    Returns
    -------
    dict
        Parameter name (as in ``model.named_parameters()``) -> expected norm.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    devices = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    norms: dict[str, float] = {}
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for mod_name, module in model.named_modules():
            own = list(module.named_parameters(recurse=False))
            if not own:
                continue
            prefix = f"{mod_name}." if mod_name else ""
            reset = getattr(module, "reset_parameters", None)
            if not callable(reset):
                for name, param in own:
                    norms[prefix + name] = float(torch.linalg.vector_norm(param.detach()))
                continue
            clone = copy.deepcopy(module)
            totals = dict.fromkeys((name for name, _ in own), 0.0)
            for _ in range(samples):
                clone.reset_parameters()
                for name, param in clone.named_parameters(recurse=False):
                    if name in totals:
                        totals[name] += float(torch.linalg.vector_norm(param.detach().double()))
            for name, total in totals.items():
                norms[prefix + name] = total / samples
    return norms


def constraints_for(model: nn.Module, set: str = "l2", value: float = 1.0,  # noqa: A002
                    mode: str = "initialization", *, p: float | None = None,
                    k: int | None = None, k_frac: float | None = None, samples: int = 100,
                    seed: int = 0, unconstrained: Iterable[type] = (),
                    one_group: bool = False) -> list[dict]:
    r"""Parameter groups that constrain every parameter of ``model`` to its own set.

    The groups go straight into :class:`~torchfw.optim.StochasticFrankWolfe`: one group per
    trainable parameter (weight and bias of a layer apart, as the reference code of Pokutta,
    Spiegel & Zimmer (2020) does), each with an ``lmo`` of the chosen kind sized by ``mode``
    (the rule is in :mod:`torchfw.optim.constraints`; for ``mode="initialization"`` the Euclidean
    diameter of each set is ``2 * value * E||theta_0||_2``, so an L2 ball has radius
    ``value * E||theta_0||_2``). Parameters are given as ``(name, tensor)`` pairs, so
    :meth:`~torchfw.optim.StochasticFrankWolfe.fw_gaps` can key them by name.

    Parameters
    ----------
    model : nn.Module
        The model; its trainable parameters (``requires_grad``) get a group each.
    set : {"l2", "l1", "linf", "lp", "ksparse"}, default "l2"
        The kind of set: :class:`~torchfw.sets.oracles.L2Ball`, :class:`~torchfw.sets.oracles.L1Ball`,
        :class:`~torchfw.sets.oracles.LinfBall`, :class:`~torchfw.sets.polytopes.LpBall` (needs ``p``) or
        :class:`~torchfw.sets.polytopes.KSparsePolytope` (needs ``k`` or ``k_frac``).
    value : float, default 1.0
        ``w > 0``: the multiple of the expected initial norm (``"initialization"``), the
        diameter (``"diameter"``) or the radius (``"radius"``).
    mode : {"initialization", "diameter", "radius"}, default "initialization"
    p : float, optional
        Exponent of ``"lp"``, ``1 < p < inf``.
    k, k_frac : int or float, optional
        Nonzeros of a K-sparse vertex: ``k`` for every parameter, or ``k_frac`` of each
        parameter's size (``max(1, round(k_frac * numel))``, the reference code's ``K_frac``).
    samples : int, default 100
        Initializations drawn per layer to estimate :math:`\mathbb{E}\|\theta_0\|_2`.
    seed : int, default 0
        Seed of those draws (a forked generator: the caller's random state is kept).
    unconstrained : iterable of module types, default ()
        Layers whose parameters get ``lmo=None`` groups (momentum SGD), e.g.
        ``(nn.BatchNorm2d, nn.LayerNorm)``.
    one_group : bool, default False
        Return one group holding every parameter and the list of their sets (``None`` for
        the unconstrained ones), as the reference code's ``create_lp_constraints`` is used
        with one optimizer group. The sets and the steps are the same; the layers then
        share the group's hyperparameters (one ``lr`` for all, as a scheduler sets it), and
        a compiled step has one group to verify at each call instead of one per parameter
        (on small models a few percent of the step).

    Returns
    -------
    list of dict
        ``{"params": [(name, param)], "lmo": LMO or None}`` per parameter, in the order of
        ``model.named_parameters()``; with ``one_group=True``, the single group
        ``{"params": [(name, param), ...], "lmo": [LMO or None, ...]}``.

    Examples
    --------
    >>> import torch
    >>> from torchfw.optim import StochasticFrankWolfe, constraints_for
    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    >>> opt = StochasticFrankWolfe(constraints_for(model, "linf", value=30.0), lr=0.1)
    >>> _ = opt.make_feasible()
    >>> len(opt.param_groups)
    4
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"constraints_for needs an nn.Module, got {type(model).__name__}")
    if set not in _SETS:
        raise ValueError(f"set must be one of {', '.join(map(repr, _SETS))}, got {set!r}")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not (math.isfinite(value) and value > 0):
        raise ValueError(f"value must be a finite number > 0, got {value!r}")
    if set == "lp":
        if p is None:
            raise ValueError('set="lp" needs the exponent p (1 < p < inf)')
    elif p is not None:
        raise ValueError(f"p is the exponent of set='lp'; set={set!r} takes no p")
    if set == "ksparse":
        if (k is None) == (k_frac is None):
            raise ValueError('set="ksparse" needs exactly one of k (nonzeros) and k_frac '
                             '(a fraction of each parameter\'s size)')
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        if k_frac is not None and (isinstance(k_frac, bool) or
                                   not isinstance(k_frac, numbers.Real) or not 0 < k_frac <= 1):
            raise ValueError(f"k_frac must be a number in (0, 1], got {k_frac!r}")
    elif k is not None or k_frac is not None:
        raise ValueError(f"k and k_frac belong to set='ksparse'; set={set!r} takes neither")
    skip = tuple(unconstrained)
    if not all(isinstance(t, type) for t in skip):
        raise TypeError("unconstrained must be module types, e.g. (nn.BatchNorm2d,)")
    if not isinstance(one_group, bool):
        raise TypeError(f"one_group must be True or False, got {one_group!r}")
    init = expected_init_norms(model, samples=samples, seed=seed) \
        if mode == "initialization" else {}
    owners = _owners(model)
    groups: list[dict] = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        owner = owners[id(param)][1]
        if skip and isinstance(owner, skip):
            groups.append({"params": [(name, param)], "lmo": None})
            continue
        n = param.numel()
        kk = None
        if set == "ksparse":
            kk = k if k is not None else max(1, round(float(k_frac) * n))
            kk = min(kk, n)
        unit = _unit_set(set, n, p, kk)
        unit_diameter = unit.diameter(n)
        if mode == "radius":
            radius = float(value)
        else:
            diameter = float(value) if mode == "diameter" else \
                2.0 * float(value) * (init[name] if init[name] > 0 else 1.0)
            radius = diameter / unit_diameter
        groups.append({"params": [(name, param)], "lmo": _with_radius(unit, radius)})
    if one_group and groups:
        return [{"params": [g["params"][0] for g in groups], "lmo": [g["lmo"] for g in groups]}]
    return groups
