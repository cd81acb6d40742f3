r"""Several independent simplex problems of the same size, solved in lockstep.

``B`` quadratics :math:`\tfrac12 w_b^\top Q_b w_b` over the unit simplex (one-vs-rest
multiclass SVMs, SVMs over a grid of ``C``, ...) share one iteration: every quantity of the
incremental engine gains a leading batch dimension (weights and gradients ``(B, N)``, scalars
``(B,)``), each problem picks its own atoms and step sizes, and the ``B`` kernel columns of an
iteration come from one matrix product. Problems that reached their tolerance are masked (their
updates become the identity) while the others go on. The variants' step code runs unchanged: with
device scalars every branch is a ``torch.where``, which broadcasts over the batch.

Operators provide ``columns_batched(index) -> (B, N)`` (column ``index[b]`` of problem ``b``),
``diagonal_batched() -> (B, N)``, ``entry_batched(i, j) -> (B,)`` and ``matvec_batched(W)``; see
:class:`torchfw.svm.kernels.OneVsRestOperator`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from ..linesearch import ExactLineSearch, OpenLoop
from ..sets.oracles import Simplex
from ..utils.scalars import DEVICE
from ._engine import Coefficients, QuadraticEngine
from ._face_space import FaceSpace
from ._selection import select
from ._state import StorageState
from ._vectors import feasible_interval, update_vectors
from ._stopping import BatchedStop

__all__ = ["BatchedStorage", "BatchedQuadraticEngine", "BatchedResult", "minimize_batched"]


class BatchedOperator(Protocol):
    """What the batched engine asks of its operator (see the module docstring)."""

    def columns_batched(self, index: Tensor) -> Tensor: ...

    def diagonal_batched(self) -> Tensor: ...

    def entry_batched(self, i: Tensor, j: Tensor) -> Tensor: ...

    def matvec_batched(self, W: Tensor) -> Tensor: ...


class BatchedStorage(StorageState):
    """The storage of ``B`` simplex problems in lockstep (device scalars of shape ``(B,)``).

    Vectors are ``(B, N)``; each problem's selection is the single-problem one
    (:func:`~torchfw.optimizers._selection.select` over the last dimension), its update
    :func:`~torchfw.optimizers._vectors.update_vectors` over rows. ``active`` masks the problems
    that still run (:class:`BatchedQuadraticEngine` gives the others the identity move).
    """

    #: The corrective step runs problem by problem (each its own face and window).
    face_correction = True

    _STATE = ("w", "s", "w_prev", "s_prev", "k", "i_min", "s_min", "j_max", "s_max", "p", "t",
              "i_fw", "s_fw", "W", "p_prev", "t_prev", "active")
    #: A :class:`BatchedOperator`.
    Q: Any

    def __init__(self, operator: BatchedOperator, w0: Tensor, *, keep_previous=False,
                 pair_columns=False):
        self.Q = operator
        self.lmo = Simplex()
        self.B, self.n = w0.shape
        device = w0.device
        self.declare(ops=DEVICE, N=self.n, dtype=w0.dtype, device=device,
                     keep_previous=keep_previous, pair_columns=pair_columns)
        self.active = torch.ones(self.B, dtype=torch.bool, device=device)
        self.k = torch.zeros(self.B, dtype=torch.int64, device=device)
        w = w0.clone()
        self._start(w, self._full_gradient(w), operator.diagonal_batched().to(self.dtype))

    def _full_gradient(self, w: Tensor) -> Tensor:
        return self.Q.matvec_batched(w).to(self.dtype)

    # -- batched state -------------------------------------------------------------------------

    def _set(self, **values) -> None:
        for name, value in values.items():
            current = getattr(self, name, None)
            if isinstance(current, Tensor) and isinstance(value, Tensor):
                current.copy_(value)
            elif isinstance(value, Tensor):
                setattr(self, name, value.clone())
            else:
                setattr(self, name, torch.full((self.B,), float(value), dtype=self.dtype,
                                               device=self.w.device))

    def count(self, name: str, cond=True) -> None:
        inc = torch.as_tensor(cond, device=self.w.device)
        inc = (inc & self.active if inc.dtype == torch.bool else inc * self.active).to(
            torch.int64)
        if name not in self._counts:
            self._counts[name] = torch.zeros(self.B, dtype=torch.int64, device=self.w.device)
        self._counts[name].add_(inc.expand(self.B) if inc.dim() == 0 else inc)

    def step_counts(self) -> dict[str, int]:
        return {k: int(v.sum()) for k, v in self._counts.items()}

    def tick(self) -> None:
        self.k.add_(self.active.to(torch.int64))  # per-problem iteration counts

    def iteration(self) -> int:
        return int(self.k.max())

    # -- entries (the storage protocol) --------------------------------------------------------

    def _get(self, vec: Tensor, k):
        return vec.gather(1, k[:, None])[:, 0].to(self.dtype)

    def score(self, k):
        return self._get(self.s, k)

    def weight(self, k):
        return self._get(self.w, k)

    def diagonal(self, k):
        return self._get(self.diag, k)

    def linear(self, k):
        return 0.0  # the batched problems have no linear term

    def previous_score(self, k):
        return self._get(self.s_prev, k)

    def pair_entry(self, i, j):
        return self.Q.entry_batched(i, j).to(self.dtype)

    def vertex_gradient(self, k) -> Tensor:
        return self.Q.columns_batched(k)

    def active_min(self):
        raise ValueError("batched problems support FW, away, pairwise, SWAP and PARTAN (no "
                         "moves restricted to the active face)")

    def second_order_partner(self):
        raise ValueError("SWAP-2o is not available for batched problems")

    def extrapolation_bounds(self, lam, i):
        return feasible_interval(self.w, self.w_prev, lam, i)

    # -- writes --------------------------------------------------------------------------------

    def reselect(self) -> None:
        """Each problem's selection: the single-problem one over the last dimension."""
        imin, smin, jmax, smax, p, t = select(self.w, self.s, None)
        self._set(i_min=imin, s_min=smin, j_max=jmax, s_max=smax, p=p, t=t, i_fw=imin,
                  s_fw=smin)

    def update(self, co: Coefficients) -> None:
        if co.j is not None and self.pair_columns:
            j = co.j
            pair = self.Q.columns_batched(torch.stack([co.i, j], dim=1))
            h0, h1 = pair[:, 0], pair[:, 1]
        else:
            j = co.i
            h0, h1 = self.vertex_gradient(co.i), None
        update_vectors(self.w, self.s, co.a, co.b, co.i, h0, co.c, j, h1, co.d, self.w_prev,
                       self.s_prev, shift=self.keep_previous, keep=self.active)
        self.reselect()
        if self._renormalizes:
            self._renormalize()

    def after_tick(self) -> None:
        pass  # nothing to refresh: the device runs are exact to rounding

    # -- the corrective step (one problem at a time) --------------------------------------------

    def face_space(self, problem: int = 0) -> FaceSpace:
        """Problem ``problem``'s vectors over its ``N`` atoms (float64 host copies)."""
        return FaceSpace(self.w[problem].to(torch.float64).cpu().numpy(),
                         self.s[problem].to(torch.float64).cpu().numpy(), None)

    def face_column(self, atom: int, problem: int = 0):
        """Problem ``problem``'s column ``atom`` (the batched call: one column per problem)."""
        index = torch.full((self.B,), int(atom), dtype=torch.int64, device=self.w.device)
        return self.Q.columns_batched(index)[problem].to(torch.float64).cpu().numpy()

    def face_write(self, w, s, problem: int = 0) -> None:
        b = problem
        self.w[b] = torch.from_numpy(np.asarray(w)).to(self.w.dtype).to(self.w.device)
        self.s[b] = torch.from_numpy(np.asarray(s)).to(self.s.dtype).to(self.s.device)
        if self.keep_previous:  # PARTAN restarts problem b from the corrected iterate
            self.w_prev[b] = self.w[b]
            self.s_prev[b] = self.s[b]
        self.reselect()
        if self.keep_previous:
            for name, value in (("W", self.p[b] - self.t[b]), ("p_prev", self.p[b]),
                                ("t_prev", self.t[b])):
                getattr(self, name)[b] = value

    # -- whole state ---------------------------------------------------------------------------

    def refresh(self) -> None:
        """Renormalize each problem's weights and recompute its scores exactly (PARTAN's
        scalars kept)."""
        self.w.div_(self.w.sum(-1, keepdim=True))
        self.s.copy_(self._full_gradient(self.w))
        kept = tuple(v.clone() for v in (self.p_prev, self.t_prev, self.W)) \
            if self.keep_previous else None
        self._refresh_scalars()
        if kept is not None:
            self._set(p_prev=kept[0], t_prev=kept[1], W=kept[2])

    def snapshot(self):
        return self.w.clone()

    def restore(self, snap) -> None:
        self.w.copy_(snap)
        self.s.copy_(self._full_gradient(self.w))
        self._refresh_scalars()

    def point(self) -> Tensor:
        return self.lmo.to_point(self.w)

    def weights(self) -> Tensor:
        return self.w

    def n_active(self) -> int:
        return int((self.w > 0).sum())


class BatchedQuadraticEngine(QuadraticEngine):
    """The engine over a :class:`BatchedStorage`: its moves, with the identity move for the
    problems that stopped (the only part of a move that knows about the batch)."""

    storage: BatchedStorage

    def __init__(self, operator: BatchedOperator, w0: Tensor, *, keep_previous=False,
                 pair_columns=False):
        super().__init__(BatchedStorage(operator, w0, keep_previous=keep_previous,
                                        pair_columns=pair_columns))

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        """Apply each problem's move; problems that stopped get the identity move."""
        st = self.storage
        act = st.active
        dt = st.dtype

        def masked(value, identity):
            value = torch.as_tensor(value, dtype=dt, device=st.w.device).expand(st.B)
            return torch.where(act, value, torch.full_like(value, identity))

        super().apply(Coefficients(a=masked(co.a, 1.0), b=masked(co.b, 0.0), i=co.i,
                                   c=masked(co.c, 0.0), j=co.j, d=masked(co.d, 0.0)), tick)

    def _shift_scalars(self, co: Coefficients) -> None:
        st = self.storage
        act = st.active
        st.set_scalars(W=torch.where(act, self._next_cross(co), st.W),
                       p_prev=torch.where(act, st.p, st.p_prev),
                       t_prev=torch.where(act, st.t, st.t_prev))


@dataclass
class BatchedResult:
    """Per-problem outcome of :func:`minimize_batched`."""

    x: Tensor
    value: Tensor
    gap: Tensor
    n_iter: Tensor
    converged: Tensor
    history: list = field(default_factory=list)
    steps: dict = field(default_factory=dict)
    time: float = 0.0


def minimize_batched(optimizer, operator, w0: Tensor, *, tol: float = 1e-300,
                     rtol: float = 0.0, max_iter: int = 10_000, check_every: int = 50,
                     use_graph: bool | None = None) -> BatchedResult:
    """Solve ``B`` simplex quadratics with ``optimizer``'s variant, in lockstep.

    Parameters
    ----------
    optimizer : ConstrainedOptimizer
        Supplies the variant (its ``_step``) and the line search (exact or open loop).
    operator : batched operator
        See the module docstring.
    w0 : Tensor of shape (B, N)
        Initial weights, each row on the unit simplex.
    tol, rtol : float
        Problem ``b`` stops when ``gap_b <= max(tol, rtol * |f_b|)``.
    max_iter : int
        Problem ``b`` also stops at ``k_b = max_iter`` (the last block is cut there).
    check_every : int
        Iterations between checks.
    use_graph : bool, optional
        Capture blocks of compiled iterations as CUDA graphs (default: on CUDA).

    The run is the optimizer's own loop (``ConstrainedOptimizer._loop``) with the stopping rule
    :class:`~torchfw.optimizers._stopping.BatchedStop`, which masks the problems that stopped
    (they get the identity move) and ends the run when all have stopped.
    """
    line_search = optimizer.line_search or ExactLineSearch()
    if not isinstance(line_search, (ExactLineSearch, OpenLoop)):
        raise ValueError("batched problems need ExactLineSearch or OpenLoop")
    optimizer._ls = line_search
    engine = BatchedQuadraticEngine(operator, w0, keep_previous=optimizer.keeps_previous,
                                    pair_columns=optimizer.uses_pairs)
    if use_graph is None:
        use_graph = w0.is_cuda
    rule = BatchedStop(tol=tol, rtol=rtol, max_iter=max_iter)
    start = time.perf_counter()
    # The optimizer's own run loop; "graph" runs compiled blocks captured as CUDA graphs,
    # "device" the variant's eager step.
    _, history = optimizer._loop(engine, "graph" if use_graph else "device", rule,
                                 check_every=check_every)
    value, gap = rule.measure(engine)
    return BatchedResult(x=engine.w.clone(), value=value, gap=gap, n_iter=engine.k.clone(),
                         converged=rule.converged(value, gap),
                         history=[(k, v.cpu(), g.cpu(), t) for k, v, g, t in zip(
                             history.iteration, history.value, history.gap, history.time,
                             strict=True)],
                         steps=engine.step_counts(), time=time.perf_counter() - start)
