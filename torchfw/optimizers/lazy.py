r"""Lazified Frank-Wolfe: a vertex cache consulted before the LMO (Braun, Pokutta & Zink 2017)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..result import Result
from ..sets.oracles import LMO
from ..utils.validation import check_int_at_least, check_positive
from ._engine import GenericEngine
from ._vertices import ActiveSetSolver

__all__ = ["LazyFrankWolfe"]


class _LazyOracle(LMO):
    r"""The set seen through a vertex cache: what the engine calls instead of the real LMO.

    For a gradient :math:`g` at the engine's point :math:`x` it returns the cached vertex of least
    :math:`\langle g, v\rangle` if that vertex is *good enough*,
    :math:`\langle g, x - v\rangle \ge \Phi / K`; otherwise it calls the real LMO (and caches the
    answer). When even the real vertex is not good enough, the run has made progress: the
    estimate halves, :math:`\Phi \leftarrow \min(\langle g, x - v\rangle, \Phi / 2)` (a *dual
    step*).
    """

    def __init__(self, inner: LMO, x0: Tensor, lazy_tolerance: float, cache_size: int | None):
        self.inner = inner
        self.x0 = x0
        self.engine = None
        self.lazy_tolerance = lazy_tolerance
        self.cache_size = cache_size
        self.cache: Tensor | None = None
        self.phi = math.inf
        self.calls = 0
        self.last = "lmo"  # what produced the last vertex: "lazy", "lmo" or "dual"
        self.best_exact_gap = math.inf

    def _x(self) -> Tensor:
        return self.x0 if self.engine is None else self.engine.point()

    def lmo(self, grad: Tensor) -> Tensor:
        x = self._x().reshape(-1)
        g = grad.reshape(-1)
        gx = float(g @ x)
        threshold = gx - self.phi / self.lazy_tolerance
        if self.cache is not None and math.isfinite(threshold):
            scores = self.cache @ g
            best = int(scores.argmin())
            if float(scores[best]) <= threshold:
                self._certify(False)
                self.last = "lazy"
                return self.cache[best].reshape(grad.shape).clone()
        v = self.inner.lmo(grad)
        self.calls += 1
        self._store(v.reshape(-1))
        gap = gx - float(g @ v.reshape(-1))
        self.best_exact_gap = min(self.best_exact_gap, gap)
        if float(g @ v.reshape(-1)) > threshold:
            self.phi = min(gap, self.phi / 2)
            self.last = "dual"
        else:
            self.last = "lmo"
        self._certify(True)
        return v

    def _certify(self, exact: bool) -> None:
        # The engine's gap is the true Frank-Wolfe gap only when this vertex came from the LMO;
        # a cached vertex gives a lower bound, which must not stop the run.
        if self.engine is not None:
            self.engine.certifies_gap = exact

    def _store(self, v: Tensor) -> None:
        if self.cache is None:
            self.cache = v.reshape(1, -1).clone()
            return
        if bool((self.cache == v).all(dim=-1).any()):
            return
        self.cache = torch.cat([self.cache, v.reshape(1, -1)])
        if self.cache_size is not None and self.cache.shape[0] > self.cache_size:
            self.cache = self.cache[-self.cache_size:]  # the oldest vertex leaves first

    def contains(self, x, atol=1e-9):
        return self.inner.contains(x, atol)

    def diameter(self, n):
        return self.inner.diameter(n)

    def max_step(self, x, d):
        return self.inner.max_step(x, d)

    def project(self, x):
        return self.inner.project(x)


class LazyFrankWolfe(ActiveSetSolver):
    r"""Lazified conditional gradient: FW steps toward cached vertices while they are good enough.

    Keeps every vertex the LMO returned and an estimate :math:`\Phi` of the Frank-Wolfe gap. At
    :math:`x` with gradient :math:`g` it first looks in the cache for

    .. math::
        v = \operatorname*{argmin}_{u \in \text{cache}} \langle g, u\rangle
        \quad\text{with}\quad \langle g, x - v\rangle \ge \Phi / K ,

    and calls the LMO only when no cached vertex qualifies; if the LMO's vertex does not qualify
    either, :math:`\Phi \leftarrow \min(\langle g, x - v\rangle, \Phi/2)`. :math:`\Phi` starts at
    infinity, so the first iteration calls the LMO and sets it to the first gap. Then it steps
    :math:`x \leftarrow x + \gamma (v - x)` as :class:`~torchfw.FrankWolfe` does. Same
    :math:`O(1/k)` rate as FW up to the factor ``K``, with far fewer LMO calls when the LMO is
    expensive (nuclear-norm ball, Birkhoff, an LP). Braun, Pokutta & Zink, "Lazifying conditional
    gradient algorithms", ICML 2017 (JMLR 2019); FrankWolfe.jl's ``lazified_conditional_gradient``
    (the rule with ``phi`` and ``K = lazy_tolerance``).

    **Certificates.** The engine reads a true Frank-Wolfe gap only at iterations whose vertex came
    from the LMO; only those may stop the run (so checks run every iteration by default). The
    gaps recorded in ``history`` at cached ("lazy") iterations are gaps to the cached vertex,
    lower bounds of the true gap. The returned ``Result.gap`` is always exact (one more LMO call
    at the end if needed), ``Result.info["lmo_calls"]`` counts the LMO calls.
    Step counters: ``lazy`` (cached vertex), ``lmo`` (LMO vertex, good enough), ``dual`` (LMO
    vertex, :math:`\Phi` halved).

    Parameters
    ----------
    lazy_tolerance : float, default 2.0
        ``K >= 1``: how much worse than :math:`\Phi` a cached vertex may be.
    cache_size : int, optional
        Keep at most this many vertices (oldest out first); unbounded by default.
    """

    def __init__(self, lmo, line_search=None, *, lazy_tolerance: float = 2.0,
                 cache_size: int | None = None, **kwargs):
        super().__init__(lmo, line_search, **kwargs)
        self.lazy_tolerance = check_positive("lazy_tolerance", lazy_tolerance)
        if self.lazy_tolerance < 1.0:
            raise ValueError(f"lazy_tolerance must be >= 1, got {lazy_tolerance!r}")
        self.cache_size = None if cache_size is None else check_int_at_least(
            "cache_size", cache_size, 1)
        if self.check_every is None:
            self.check_every = 1
        if self.stream or self.sample_size is not None:
            raise ValueError("LazyFrankWolfe caches LMO vertices: stream and sample_size do "
                             "not apply")
        if self.execution not in ("auto", "host"):
            raise ValueError("LazyFrankWolfe runs with host scalars (execution='host')")

    def _make_engine(self, objective, x0, line_search):
        self._oracle = _LazyOracle(self.lmo, x0, self.lazy_tolerance, self.cache_size)
        engine = GenericEngine(objective, self._oracle, x0)
        self._oracle.engine = engine
        engine.certifies_gap = True  # the first vertex came from the LMO
        self._active = self._vertex_active_set(x0)
        return engine, "host"

    def _step(self, eng) -> None:
        kind = self._oracle.last
        v = eng.vertex.clone()
        move = eng.toward()
        gamma = float(self._ls.step(move.line, eng.k))
        eng.apply(move.coefficients(gamma))
        self._active.toward(v, gamma)
        eng.count(kind)

    def _run(self, eng, execution: str, **kw) -> Result:
        result = super()._run(eng, execution, **kw)
        oracle = self._oracle
        if oracle.last == "lazy":
            # The last gap was to a cached vertex: replace it by the true one.
            g = eng.g.reshape(-1)
            v = self.lmo.lmo(eng.g).reshape(-1)
            oracle.calls += 1
            result.gap = float(g @ (eng.point().reshape(-1) - v))
            oracle.best_exact_gap = min(oracle.best_exact_gap, result.gap)
        result.best_gap = oracle.best_exact_gap
        result.info["lmo_calls"] = oracle.calls
        return result
