"""Running a core simplex optimizer on the sharded engine (``torchfw.distributed.minimize``).

One concern: checking that an optimizer has a distributed form, building the
:class:`~torchfw.distributed.engine.DistributedQuadraticEngine` and running the optimizer's own
loop on it with stopping decisions agreed on by all ranks.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..linesearch import ExactLineSearch, OpenLoop
from ..optimizers._stopping import StoppingRule
from ..optimizers.away import AwayStepFrankWolfe
from ..result import Status
from ..sets.oracles import Simplex
from .comm import Communicator, gather_shards
from .engine import DistributedQuadraticEngine
from .operator import ShardedSVMDualOperator


class AgreedStop(StoppingRule):
    """The optimizer's stopping rule with the clock and the callback agreed on by all ranks.

    Each rank has its own clock and its own callback; at every check one ``all_reduce(MAX)``
    of the two flags makes every rank stop when any rank wants to (the gap and the iteration
    count are global already, so those decisions agree by themselves).
    """

    #: The ranks' communicator (see :meth:`agreed`).
    comm: Communicator

    @classmethod
    def agreed(cls, optimizer, comm: Communicator) -> AgreedStop:
        """The optimizer's own rule (:meth:`StoppingRule.of`), agreed on over ``comm``."""
        rule = cls.of(optimizer)
        rule.comm = comm
        return rule

    def user_stop(self, eng, k, value, gap, elapsed, steps) -> Status | None:
        if self.callback is None and self.time_limit is None:
            return None
        want = float(self.callback is not None
                     and self.call_back(eng, k, value, gap, elapsed, steps))
        late = float(self.time_limit is not None and elapsed >= self.time_limit)
        flags = self.comm.all_reduce(np.array([want, late]), "max", op="stop")
        if flags[0] > 0:
            return Status.CALLBACK
        return Status.TIME_LIMIT if flags[1] > 0 else None


def minimize(optimizer, operator: ShardedSVMDualOperator, w0: Tensor | None = None, *,
             exchange: str = "auto", cache_size: float = 200.0, gather: bool = False):
    r"""Run a core simplex optimizer on :math:`\tfrac12 w^\top \tilde K w` over sharded atoms.

    A collective: every rank calls it with the same optimizer settings and its own operator
    shard. The optimizer's own loop runs unchanged on every rank (checks, stopping rule, history);
    stopping on ``time_limit`` or on a callback is agreed on by all ranks at each check.

    Parameters
    ----------
    optimizer : ConstrainedOptimizer
        :class:`~torchfw.FrankWolfe`, :class:`~torchfw.AwayStepFrankWolfe`,
        :class:`~torchfw.PairwiseFrankWolfe`, :class:`~torchfw.SwapFrankWolfe` (also
        ``second_order=True``), :class:`~torchfw.PartanFrankWolfe` or
        :class:`~torchfw.FullyCorrectiveFrankWolfe` over ``Simplex()`` (radius 1), with
        :class:`~torchfw.ExactLineSearch` or :class:`~torchfw.OpenLoop`.
    operator : ShardedSVMDualOperator
    w0 : Tensor, optional
        This rank's slice of a feasible start; default the first vertex ``e_0`` (as
        ``Simplex.initial_point``).
    exchange : {"auto", "gather", "broadcast"}
        How atom features travel (module docstring).
    cache_size : float
        MB of column slices cached per rank.
    gather : bool
        Return the full iterate on every rank (an all-gather of ``m`` floats) instead of the
        local slice.

    Returns
    -------
    Result
        ``x`` and ``weights`` are this rank's slices (unless ``gather``); value, gap, status and
        history are global and identical on every rank. ``info["shard"]`` is ``(offset,
        n_local)``, ``info["communication"]`` this rank's communication counters during the
        iterations (``calls``, bytes ``sent`` and ``received``, ``seconds`` inside collectives)
        and ``info["setup_communication"]`` those of building the engine.
    """
    lmo = optimizer.lmo
    if not isinstance(lmo, Simplex) or isinstance(lmo.radius, Tensor) or lmo.radius != 1.0:
        raise ValueError("distributed solvers run over Simplex() (radius 1): the sharded atoms "
                         "are the examples")
    if optimizer.sample_size is not None or optimizer.stream:
        raise ValueError("sample_size and stream=True are not supported by the distributed "
                         "engine")
    if optimizer.execution not in ("auto", "host"):
        raise ValueError("the distributed engine runs with host scalars (execution='host')")
    line_search = optimizer.line_search or ExactLineSearch()
    if not isinstance(line_search, (ExactLineSearch, OpenLoop)):
        raise ValueError("the distributed engine needs ExactLineSearch or OpenLoop")
    comm = operator.comm
    if w0 is None:
        w0 = torch.zeros(operator.n_local, dtype=torch.float64)
        if comm.rank == 0:
            w0[0] = 1.0
    stats_start = comm.stats()["total"]
    engine = DistributedQuadraticEngine(
        operator, w0, keep_previous=optimizer.keeps_previous, pair_columns=optimizer.uses_pairs,
        exchange=exchange, cache_size=cache_size, refresh_every=optimizer.refresh_every,
        gather_away=optimizer.uses_pairs or isinstance(optimizer, AwayStepFrankWolfe))
    stats_loop = comm.stats()["total"]
    line_search.reset()
    optimizer._ls = line_search
    result = optimizer._run(engine, "host", rule=AgreedStop.agreed(optimizer, comm),
                            verbose=optimizer.verbose and comm.rank == 0)
    stats = comm.stats()["total"]
    result.info.update({
        "engine": type(engine).__name__, "exchange": engine.exchange,
        "shard": (operator.offset, operator.n_local), "world_size": comm.size,
        "cache": engine.cache_info(),
        "communication": {k: stats[k] - stats_loop[k] for k in stats},
        "setup_communication": {k: stats_loop[k] - stats_start[k] for k in stats}})
    if gather:
        result.x = gather_shards(result.x, comm)
        result.weights = result.x
    return result
