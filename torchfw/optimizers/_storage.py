r"""The storage protocol: what an engine's storage answers so that the moves are written once.

One concern: the declared interface between the scalar algebra of the simplex/L1 family
(:mod:`torchfw.optimizers._moves`, applied by :class:`~torchfw.optimizers._engine.QuadraticEngine`)
and the places the numbers live. A storage holds the weights ``w`` over the ``N`` atoms, the
gradient ``s`` (scores), the diagonal of :math:`\tilde Q`, the linear term over atoms, and for
PARTAN the previous iterate; it answers single entries, columns, the selections of the next
iteration and the PARTAN bounds, and it applies a move to its vectors. The moves never touch a
vector themselves.

Implemented by

========================  ===================================================================
storage                   where the numbers live
========================  ===================================================================
``QuadraticEngine``       one process, host scalars (numba kernels over NumPy views of the
                          tensors) or device scalars (tensor ops, no host read: compiled and
                          CUDA-graph captured), ``optimizers/_engine.py``
``DenseQuadraticEngine``  the host storage with the ``N x N`` vertex gradients formed once; its
                          whole-block compiled loop is a declared second implementation of FW,
                          away and pairwise steps (``optimizers/_dense.py``)
``StreamingEngine``       a working set of admitted atoms, vectors by slot (seed 001),
                          ``optimizers/_streaming.py``
``BatchedQuadraticEngine`` ``B`` problems in lockstep, every scalar of shape ``(B,)``, stopped
                          problems masked, ``optimizers/batched.py``
``DistributedQuadraticEngine`` examples sharded over ``torch.distributed`` ranks, entries of
                          remote atoms from one exchange per iteration,
                          ``distributed/engine.py``
``SampledEngine``         seed 002's randomized FW: state over the slots of the active set,
                          the FW atom from a random sample, ``optimizers/_sampled.py``
========================  ===================================================================

and checked against one another by ``tests/test_engine_parity.py``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ._moves import Coefficients

__all__ = ["Storage", "STORAGE_MEMBERS"]


@runtime_checkable
class Storage(Protocol):
    """The members a storage provides (host floats or device tensors, per ``ops``).

    Scalars kept current after every move (set by the selection): ``p`` (:math:`w^\\top s`),
    ``t`` (:math:`\\tilde c^\\top w`), ``i_fw, s_fw`` (FW atom and its score), ``j_max, s_max``
    (away atom: largest score among active atoms); with ``keep_previous`` also ``W, p_prev,
    t_prev``; ``constant`` (the objective's); ``ops`` (``HOST`` or ``DEVICE``).
    """

    # -- entries (scores, weights, diagonal, linear term, previous scores) ----------------------
    def _s(self, k) -> Any:
        """Score (gradient entry) :math:`s_k`."""

    def _w(self, k) -> Any:
        """Weight :math:`w_k`."""

    def _diag(self, k) -> Any:
        r"""Diagonal entry :math:`\tilde Q_{kk}`."""

    def _ct(self, k) -> Any:
        r"""Linear term :math:`\tilde c_k` (0 without one)."""

    def _previous_score(self, k) -> Any:
        """PARTAN: the previous iterate's score of atom ``k``."""

    def _pair_entry(self, i, j) -> Any:
        r""":math:`\tilde Q_{ij}` (pairwise and SWAP lines)."""

    # -- columns, selections, bounds -----------------------------------------------------------
    def vertex_gradient(self, k) -> Any:
        r"""Column :math:`h_k = \nabla F(e_k)` in the storage's own layout."""

    def active_min(self) -> tuple[Any, Any]:
        """Active atom of smallest score and the score (face moves of fully corrective FW)."""

    def second_order_partner(self) -> Any:
        """SWAP-2o away atom (raise ``ValueError`` where the storage has no full gradient)."""

    def _extrapolation_bounds(self, lam, i) -> tuple[Any, Any]:
        r"""PARTAN: the feasible :math:`\mu` interval ``(lo, hi)``."""

    # -- writes --------------------------------------------------------------------------------
    def _update(self, co: Coefficients) -> None:
        """Apply the move to the vectors, then :meth:`_reselect`."""

    def _reselect(self) -> None:
        """The selection from the vectors (sets the scalars above): one definition,
        :func:`torchfw.optimizers._selection.select`, or its compiled twin on the host; a
        sharded storage adds its cross-rank round."""

    def _after_tick(self) -> None:
        """After a counted iteration (exact refresh, the next streamed atom, ...)."""

    # -- whole state ---------------------------------------------------------------------------
    def snapshot(self) -> Any:
        """What :meth:`restore` needs to return to this iterate (after a NaN)."""

    def restore(self, snap) -> None:
        """Return to a snapshot and recompute the gradient and the selection."""

    def refresh(self) -> None:
        """Recompute the gradient exactly from the weights (bounds float drift)."""

    def point(self) -> Any:
        """The iterate in the problem's coordinates (this rank's slice when sharded)."""

    def weights(self) -> Any:
        """The weights over atoms."""

    def n_active(self) -> int:
        """Number of atoms with positive weight."""


#: Names of the members of :class:`Storage` (what ``tests/test_engine_parity.py`` checks).
STORAGE_MEMBERS = tuple(name for name in vars(Storage)
                        if not name.startswith("__") and callable(vars(Storage)[name]))
