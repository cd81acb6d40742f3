r"""Step-size strategies for Frank-Wolfe-type methods.

A strategy maps a :class:`Line` (the iterate, a direction ``d`` and what the solver knows about
the objective along it) to a step :math:`\gamma \in [0, \gamma_{\max}]`.

- :class:`ExactLineSearch`: the exact minimizer along ``d`` for a quadratic objective,
  :math:`\gamma = \mathrm{clip}(-\langle\nabla f, d\rangle / d^\top Q d,\ 0,\ \gamma_{\max})`.
- :class:`OpenLoop`: :math:`\gamma_k = \ell/(k+\ell)` (``ell=2`` is the classic
  :math:`2/(k+2)`), clipped to :math:`\gamma_{\max}`.
- :class:`ShortStep`: :math:`\gamma = \mathrm{clip}(-\langle\nabla f, d\rangle / (L \|d\|^2),
  0, \gamma_{\max})` for an ``L``-smooth objective.
- :class:`Backtracking`: the adaptive Lipschitz estimate of Pedregosa, Negiar, Askari & Jaggi
  (2020), "Linearly convergent Frank-Wolfe with backtracking line-search", AISTATS.

Rules that need no host synchronization (exact, open loop, short step) are evaluated on device
tensors as they are; backtracking is a data-dependent loop and reads its trial values on the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .utils.scalars import HOST, Scalars
from .utils.validation import check_int_at_least, check_positive

__all__ = ["Line", "LineSearch", "ExactLineSearch", "OpenLoop", "ShortStep", "Backtracking"]


@dataclass
class Line:
    r"""What a line search may use about :math:`\phi(\gamma) = f(x + \gamma d)`.

    Attributes
    ----------
    value : scalar
        :math:`f(x)`.
    slope : scalar
        :math:`\langle \nabla f(x), d \rangle` (negative for a descent direction).
    gamma_max : scalar
        Largest feasible step.
    curvature : scalar or None
        :math:`d^\top \nabla^2 f\, d` when the objective is quadratic, else ``None``.
    phi : callable or None
        :math:`\gamma \mapsto f(x + \gamma d)` (one objective evaluation per call).
    dnorm2 : scalar or None
        :math:`\|d\|_2^2` in the space of ``x``.
    ops : Scalars, default HOST
        Scalar arithmetic (host floats or device tensors).
    """

    value: Any
    slope: Any
    gamma_max: Any
    curvature: Any = None
    phi: Callable[[Any], Any] | None = None
    dnorm2: Any = None
    # None, not HOST, as the default: torch.compile (dynamo, torch 2.11) cannot build a Line
    # whose __init__ defaults hold a Scalars object, and fell back to eager steps on CUDA.
    ops: Scalars = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.ops is None:
            self.ops = HOST

    def model_decrease(self, gamma):
        """``f(x) - f(x + gamma d)`` when the curvature is known (exact for quadratics)."""
        return -(gamma * self.slope + 0.5 * gamma * gamma * self.curvature)

    def decrease(self, gamma):
        """``f(x) - f(x + gamma d)``: in closed form when possible, else one evaluation."""
        if self.curvature is not None:
            return self.model_decrease(gamma)
        return self.value - self._phi()(gamma)

    def _phi(self) -> Callable[[Any], Any]:
        """:attr:`phi`, or a clear error for a line that carries no objective evaluations."""
        if self.phi is None:
            raise ValueError("this line has neither a curvature nor phi (objective "
                             "evaluations along the direction)")
        return self.phi

    def unconstrained_minimizer(self):
        """The minimizer along the whole ray (ignoring ``gamma_max``); needs the curvature."""
        ops = self.ops
        return ops.maximum(-self.slope / ops.maximum(self.curvature, 1e-300), 0.0)


class LineSearch:
    """Base class. Subclasses implement :meth:`step`."""

    #: Whether the rule needs :attr:`Line.curvature` (a quadratic objective).
    needs_curvature = False
    #: Whether the rule needs :attr:`Line.phi` (objective evaluations along the line).
    needs_phi = False
    #: Whether the rule needs :attr:`Line.dnorm2`.
    needs_dnorm = False
    #: Whether the rule can run without host synchronization.
    sync_free = True

    def reset(self) -> None:
        """Forget state carried between iterations (called at the start of each solve)."""

    def step(self, line: Line, iteration) -> Any:  # pragma: no cover - abstract
        """Return the step size for ``line`` at iteration ``iteration`` (0-based)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({params})"


class ExactLineSearch(LineSearch):
    r"""Exact minimization along the direction, in closed form for quadratic objectives.

    For :math:`f(x) = \tfrac12 x^\top Q x + c^\top x`,
    :math:`\phi(\gamma) = f + \gamma\, \langle\nabla f, d\rangle + \tfrac12\gamma^2 d^\top Q d`,
    minimized at :math:`\gamma^* = -\langle\nabla f, d\rangle / d^\top Q d`, clipped to
    :math:`[0, \gamma_{\max}]`. Asking for it with an objective that has no closed form (anything
    but :class:`torchfw.Quadratic`) raises before the first iteration.
    """

    needs_curvature = True

    def step(self, line: Line, iteration):
        ops = line.ops
        curv = line.curvature
        tiny = 1e-300
        # Non-positive curvature along a descent direction: the model decreases all the way;
        # along a non-descent direction the best step is 0 (never an infinite one).
        flat = ops.where(line.slope < 0.0, line.gamma_max, 0.0)
        unconstrained = ops.where(curv > tiny, -line.slope / ops.maximum(curv, tiny), flat)
        return ops.clip(unconstrained, 0.0, line.gamma_max)


class OpenLoop(LineSearch):
    r"""Open-loop ("agnostic") step :math:`\gamma_k = \ell / (k + \ell)`, clipped to ``gamma_max``.

    ``ell=2`` is the classic :math:`2/(k+2)` of Frank & Wolfe / Jaggi (2013); larger ``ell`` gives
    faster rates on some sets (Wirth et al. 2023). Needs nothing about the objective.
    """

    def __init__(self, ell: int = 2):
        self.ell = check_int_at_least("ell", ell, 1)

    def step(self, line: Line, iteration):
        ops = line.ops
        gamma = self.ell / (ops.as_float(iteration) + self.ell)
        return ops.minimum(gamma, line.gamma_max)


class ShortStep(LineSearch):
    r"""Short step for an ``L``-smooth objective: minimizes the quadratic upper bound.

    :math:`\gamma = \mathrm{clip}\big(-\langle\nabla f, d\rangle / (L\|d\|^2), 0,
    \gamma_{\max}\big)`. Guarantees :math:`f(x+\gamma d) \le f(x)` when ``L`` bounds the
    Lipschitz constant of the gradient.
    """

    needs_dnorm = True

    def __init__(self, lipschitz: float):
        self.lipschitz = check_positive("lipschitz", lipschitz)

    def step(self, line: Line, iteration):
        ops = line.ops
        denom = ops.maximum(self.lipschitz * line.dnorm2, 1e-300)
        return ops.clip(-line.slope / denom, 0.0, line.gamma_max)


class Backtracking(LineSearch):
    r"""Adaptive backtracking on a local Lipschitz estimate (Pedregosa et al., AISTATS 2020).

    Each iteration first lowers the previous estimate, :math:`M = \eta L_{k-1}`, then doubles
    :math:`M \leftarrow \tau M` until the sufficient-decrease condition holds,

    .. math:: f(x + \gamma d) \le f(x) + \gamma \langle\nabla f, d\rangle
              + \tfrac{\gamma^2 M}{2} \|d\|^2,
              \qquad \gamma = \min\Big(\frac{-\langle\nabla f, d\rangle}{M \|d\|^2},
              \gamma_{\max}\Big).

    The accepted step never increases ``f`` (the right side is at most ``f(x)``). If no trial
    succeeds within ``max_tries`` the step is 0.

    Parameters
    ----------
    eta : float, default 0.9
        Factor (< 1) applied to the previous estimate before searching.
    tau : float, default 2.0
        Factor (> 1) applied on each failed trial.
    lipschitz : float or None
        Initial estimate. By default it is measured on the first line from a finite difference
        of ``phi``.
    max_tries : int, default 60
    """

    needs_phi = True
    needs_dnorm = True
    sync_free = False

    def __init__(self, eta: float = 0.9, tau: float = 2.0, lipschitz: float | None = None,
                 max_tries: int = 60):
        self.eta = check_positive("eta", eta)
        if self.eta >= 1:
            raise ValueError(f"eta must be < 1, got {eta!r}")
        self.tau = check_positive("tau", tau)
        if self.tau <= 1:
            raise ValueError(f"tau must be > 1, got {tau!r}")
        self.lipschitz = None if lipschitz is None else check_positive("lipschitz", lipschitz)
        self.max_tries = check_int_at_least("max_tries", max_tries, 1)
        self._estimate = self.lipschitz
        self.n_evaluations = 0

    def reset(self) -> None:
        self._estimate = self.lipschitz
        self.n_evaluations = 0

    def _initial_estimate(self, line: Line, slope: float, dnorm2: float, value: float) -> float:
        # Curvature of phi from one probe step: phi(e) = f + e*slope + e^2 M dnorm2 / 2.
        probe = min(1e-3, float(line.gamma_max)) or 1e-3
        f_probe = float(line._phi()(probe))
        self.n_evaluations += 1
        est = 2.0 * (f_probe - value - probe * slope) / (probe * probe * dnorm2)
        return est if math.isfinite(est) and est > 0 else 1.0

    def step(self, line: Line, iteration):
        slope = float(line.slope)
        dnorm2 = float(line.dnorm2)
        value = float(line.value)
        gamma_max = float(line.gamma_max)
        if not slope < 0 or dnorm2 <= 0 or gamma_max <= 0:
            return 0.0
        if self._estimate is None:
            self._estimate = self._initial_estimate(line, slope, dnorm2, value)
        m = self.eta * self._estimate
        phi = line._phi()
        for _ in range(self.max_tries):
            gamma = min(-slope / (m * dnorm2), gamma_max)
            trial = float(phi(gamma))
            self.n_evaluations += 1
            # The sufficient-decrease bound is <= value in exact arithmetic; rounding can push
            # it one ulp above, so also insist that f does not increase.
            bound = value + gamma * slope + 0.5 * gamma * gamma * m * dnorm2
            if trial <= min(bound, value):
                self._estimate = m
                return gamma
            m *= self.tau
        return 0.0


def default_line_search(objective) -> LineSearch:
    """Exact line search when the objective has a closed form, else adaptive backtracking."""
    return ExactLineSearch() if getattr(objective, "has_curvature", False) else Backtracking()
