r"""The storage protocol: what an engine's storage answers so that the moves are written once.

One concern: the declared interface between the scalar algebra of the simplex/L1 family
(:mod:`torchfw.optimizers._moves`, applied by :class:`~torchfw.optimizers._engine.QuadraticEngine`)
and the places the numbers live. A storage holds the weights ``w`` over the ``N`` atoms, the
gradient ``s`` (scores), the diagonal of :math:`\tilde Q`, the linear term over atoms, and for
PARTAN the previous iterate; it answers single entries, columns, the selections of the next
iteration and the PARTAN bounds, and it applies a move to its vectors. The moves never touch a
vector themselves. For the active-set corrective step (:mod:`torchfw.optimizers._correction`,
written once) it shows its vectors over its own positions (``face_space``, a
:class:`~torchfw.optimizers._face_space.FaceSpace`), answers the columns of a face's atoms at
those positions (``face_column``) and takes the new weights and scores (``face_write``).

The engine *holds* a storage (``QuadraticEngine(storage)``); no storage inherits the moves, and
no storage inherits a member of this protocol from a generic base class. :func:`check_storage`
refuses, when the engine is built, a storage that lacks a member, and names it; mypy checks
each storage class against :class:`Storage` where it is built.

Implemented by

==========================  =================================================================
storage                     where the numbers live
==========================  =================================================================
``HostStorage``             one process, host scalars (numba kernels over NumPy views of the
                            tensors) or device scalars (tensor ops, no host read: compiled and
                            CUDA-graph captured), ``optimizers/_host.py``
``RowStorage``              one problem whose vertex gradients are rows of a row source (a
                            matrix read in place, SVC's signed kernel rows, a cache of rows);
                            blocks or the whole solve in the one compiled loop
                            (``optimizers/_rows.py``, ``optimizers/_compiled_loop.py``)
``DenseStorage``            the row-source storage over the ``N x N`` vertex gradients ``H``,
                            formed once (``execution="dense"``, ``optimizers/_dense.py``)
``StreamingStorage``        a working set of admitted atoms, vectors by slot (seed 001),
                            ``optimizers/_streaming.py``
``BatchedStorage``          ``B`` problems in lockstep, every scalar of shape ``(B,)``, stopped
                            problems masked, ``optimizers/batched.py``
``ShardedStorage``          examples sharded over ``torch.distributed`` ranks, entries of
                            remote atoms from one exchange per iteration,
                            ``distributed/engine.py``
``SampledStorage``          seed 002's randomized FW: state over the slots of the active set,
                            the FW atom from a random sample, ``optimizers/_sampled.py``
==========================  =================================================================

and checked against one another by ``tests/test_engine_parity.py``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..utils.scalars import Scalars
from ._moves import Coefficients

__all__ = ["Storage", "STORAGE_MEMBERS", "BOOKKEEPING", "check_storage"]


@runtime_checkable
class Storage(Protocol):
    """The members a storage provides (host floats or device tensors, per ``ops``).

    Scalars kept current after every move (set by the selection): ``p`` (:math:`w^\\top s`),
    ``t`` (:math:`\\tilde c^\\top w`), ``i_fw, s_fw`` (FW atom and its score), ``i_min, s_min``
    (smallest score: ``gap = p - s_min``), ``j_max, s_max`` (away atom: largest score among
    active atoms); with ``keep_previous`` also ``W, p_prev, t_prev``; ``constant`` (the
    objective's); ``ops`` (``HOST`` or ``DEVICE``). The bookkeeping (iteration counter ``k``,
    step counters, ``_set`` of the scalars) is :class:`~torchfw.optimizers._state.EngineState`'s,
    which a storage subclasses: it defines no member of this protocol.
    """

    ops: Scalars
    keep_previous: bool
    constant: Any
    p: Any
    t: Any
    i_fw: Any
    s_fw: Any
    i_min: Any
    s_min: Any
    j_max: Any
    s_max: Any
    W: Any
    p_prev: Any
    t_prev: Any
    k: Any

    # -- entries (scores, weights, diagonal, linear term, previous scores) ----------------------
    def score(self, k) -> Any:
        """Score (gradient entry) :math:`s_k`."""

    def weight(self, k) -> Any:
        """Weight :math:`w_k`."""

    def diagonal(self, k) -> Any:
        r"""Diagonal entry :math:`\tilde Q_{kk}`."""

    def linear(self, k) -> Any:
        r"""Linear term :math:`\tilde c_k` (0 without one)."""

    def previous_score(self, k) -> Any:
        """PARTAN: the previous iterate's score of atom ``k``."""

    def pair_entry(self, i, j) -> Any:
        r""":math:`\tilde Q_{ij}` (pairwise and SWAP lines)."""

    # -- columns, selections, bounds -----------------------------------------------------------
    def vertex_gradient(self, k) -> Any:
        r"""Column :math:`h_k = \nabla F(e_k)` in the storage's own layout."""

    def active_min(self) -> tuple[Any, Any]:
        """Active atom of smallest score and the score (face moves of fully corrective FW)."""

    def second_order_partner(self) -> Any:
        """SWAP-2o away atom (raise ``ValueError`` where the storage has no full gradient)."""

    def extrapolation_bounds(self, lam, i) -> tuple[Any, Any]:
        r"""PARTAN: the feasible :math:`\mu` interval ``(lo, hi)``
        (:func:`~torchfw.optimizers._vectors.feasible_interval` over the storage's vectors)."""

    # -- writes --------------------------------------------------------------------------------
    def update(self, co: Coefficients) -> None:
        """Apply the move to the vectors
        (:func:`~torchfw.optimizers._vectors.update_vectors`), then :meth:`reselect`."""

    def reselect(self) -> None:
        """The selection from the vectors (sets the scalars above): one definition,
        :func:`torchfw.optimizers._selection.select`, or its compiled twin on the host; a
        sharded storage adds its cross-rank round."""

    def after_tick(self) -> None:
        """After a counted iteration (exact refresh, the next streamed atom, ...)."""

    # -- the corrective step (torchfw.optimizers._correction, written once over these) --------
    def face_space(self, problem: int = 0) -> Any:
        """The weights, scores and linear term over the storage's positions, as a
        :class:`~torchfw.optimizers._face_space.FaceSpace` (``problem``: one of a batch)."""

    def face_column(self, atom: int, problem: int = 0) -> Any:
        r"""Column :math:`h_{atom}` at the storage's positions, as a host array (float64 or
        the storage's own precision; not kept by the storage)."""

    def face_write(self, w: Any, s: Any, problem: int = 0) -> None:
        """Replace the weights and scores over the positions (float64 host arrays; PARTAN's
        previous iterate becomes the new one), then :meth:`reselect`."""

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

    # -- bookkeeping (EngineState's, the same for every storage) -------------------------------
    def count(self, name: str, cond=True) -> None:
        """Add one to step counter ``name`` where ``cond`` holds."""

    def tick(self) -> None:
        """Count one iteration."""

    def set_scalars(self, **values) -> None:
        """Store scalars (on device into fixed tensors)."""


#: The bookkeeping members, which every storage takes from
#: :class:`~torchfw.optimizers._state.EngineState`.
BOOKKEEPING = ("count", "tick", "set_scalars")

#: Names of the methods of :class:`Storage` that each storage defines (what
#: :func:`check_storage` asks for).
STORAGE_MEMBERS = tuple(name for name in vars(Storage)
                        if not name.startswith("_") and callable(vars(Storage)[name])
                        and name not in BOOKKEEPING)


def check_storage(storage: object) -> None:
    """Refuse an object that is not a storage, naming the first member it lacks.

    Called when a :class:`~torchfw.optimizers._engine.QuadraticEngine` is built: the engine
    holds its storage, so a storage that forgot a member fails here instead of running some
    other storage's version of it on its own arrays.

    Raises
    ------
    TypeError
        ``"<class> is not an engine storage: it lacks <member>"``.
    """
    cls = type(storage)
    if cls in _CHECKED:
        return
    for name in STORAGE_MEMBERS + BOOKKEEPING:
        if not callable(getattr(storage, name, None)):
            raise TypeError(f"{cls.__name__} is not an engine storage: it lacks "
                            f"{name}() (torchfw.optimizers._storage.Storage)")
    _CHECKED.add(cls)


#: Storage classes that passed :func:`check_storage`: the members are the class's (no storage
#: sets one per instance), so one check per class holds for all its instances, and an engine
#: built per problem (SVC's compiled solves, microseconds each) does not repeat it.
_CHECKED: set[type] = set()
