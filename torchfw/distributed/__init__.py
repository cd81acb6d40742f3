r"""Data-parallel Frank-Wolfe over ``torch.distributed``: kernel SVMs past one machine.

Each rank (process) holds a contiguous *shard* of the examples, ``[offset_r, offset_r + m_r)``
in the global order (rank 0 first), and the matching slices of every per-example vector of the
simplex solvers: the weights ``w``, the gradient :math:`s = \tilde K w` and, for PARTAN, the
previous ones. The kernel matrix is never formed and no rank ever holds more than its shard of
``X``. One iteration of any simplex variant (FW, away, pairwise, SWAP, SWAP-2o, PARTAN, fully
corrective) runs as:

1. **local selection** -- each rank scans its slices once (the compiled ``select`` kernel of the
   single-process engine): its smallest gradient (FW candidate), its largest gradient over active
   examples (away candidate) and its part of :math:`p = w^\top s`;
2. **round 1: one all-gather** of a small fixed-size record per rank: both candidates with the
   scalars the moves need (``s``, ``w``, the diagonal entry, PARTAN's ``s_prev``) and the partial
   ``p``. Every rank combines the records in rank order, so all ranks hold bit-identical global
   scalars (``p`` is summed with :func:`math.fsum`, ties go to the lowest global index as in the
   single-process engine) and take the same decisions without further agreement;
3. **round 2: the features of the chosen atom(s)** reach every rank, and each rank computes its
   slice of the kernel column(s) :math:`\tilde K_{\text{shard}, i}` with the single-process
   compiled column kernel, then applies the move to its slices (the single-process ``update``
   kernel, unchanged).

Two ways to move the features (``exchange=``):

* ``"broadcast"`` -- after round 1, an ``all_reduce(MAX)`` over a buffer where the owner of each
  chosen atom writes its features and every other rank writes ``-inf``: one collective that
  broadcasts from several owners at once and also carries PARTAN's feasibility bounds (a max and a
  negated min). Two rounds per iteration, :math:`O(d)` bytes per rank. Atoms whose features are
  already in the (rank-identical) column cache are not fetched again, so revisited atoms cost one
  round.
* ``"gather"`` -- each rank appends the features of its own candidates to its round-1 record:
  the winner's features arrive with the selection, one round per iteration, but
  :math:`O(N d)` bytes per rank for ``N`` ranks.

Collectives on small messages are latency-bound, so ``"gather"`` is faster for a few ranks and
``"broadcast"`` for many; ``"auto"`` picks ``"gather"`` while the gathered features stay under
``gather_limit`` bytes (64 KiB by default). PARTAN needs one more tiny all-reduce per iteration
(its step bound is a min over all examples that depends on the FW step size), SWAP-2o one
all-gather for its partner and the fully corrective variant one per inner step.

Everything a decision depends on is either a combined round-1 scalar or computed on every rank by
the same scalar code from the same broadcast features (the pairwise curvature
:math:`\tilde K_{ij}`, in float64), so the ranks never disagree. The solution is the
single-process solution up to rounding (partial sums of ``p`` in another order, ``K_ij`` in
float64 instead of the column's float32 value).

Usage, inside an initialized process group (``torchrun`` sets the environment)::

    import torch.distributed as dist
    from torchfw.distributed import DistributedSVC, shard_range

    dist.init_process_group("gloo")            # "nccl" with one GPU per rank
    start, stop = shard_range(len(X), dist.get_rank(), dist.get_world_size())
    model = DistributedSVC(C=1.0, solver="swap").fit(X[start:stop], y[start:stop])
    model.predict(X_test)                      # every rank holds the same fitted model

launched with ``torchrun --nproc_per_node=2 train.py`` (or ``python -m torchfw.distributed``, a
small demo). See ``docs/scale.md``.

The package has one module per concern: :mod:`~torchfw.distributed.comm` (collectives and the
rank layout), :mod:`~torchfw.distributed.operator` (the sharded kernel operator),
:mod:`~torchfw.distributed.engine` (the sharded storage and its engine), :mod:`~torchfw.distributed.run`
(:func:`minimize`), :mod:`~torchfw.distributed.svc` (:class:`DistributedSVC`) and
:mod:`~torchfw.distributed.cli` (the demo).
"""

from __future__ import annotations

from ..optimizers import _kernels as K  # noqa: F401  (idem)
from ..svm import _kernel_cpu  # noqa: F401  (re-exported: tests switch its numba path off)
from .cli import main  # noqa: F401  (``torchfw.distributed.main``, the demo)
from .comm import HAVE_DISTRIBUTED, Communicator, gather_shards, shard_range
from .engine import EXCHANGES, DistributedQuadraticEngine, ShardedStorage
from .operator import ShardedSVMDualOperator
from .run import minimize
from .svc import DISTRIBUTED_SOLVERS, DistributedSVC, fit_svc  # noqa: F401

__all__ = ["HAVE_DISTRIBUTED", "Communicator", "ShardedSVMDualOperator",
           "DistributedQuadraticEngine", "ShardedStorage", "minimize", "DistributedSVC",
           "fit_svc", "shard_range", "gather_shards", "EXCHANGES"]
