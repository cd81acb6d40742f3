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
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import Tensor

from . import _kernel_cpu
from ._column_cache import ColumnCache
from ._data import as_labels, as_matrix, take_rows
from ._scalars import HOST
from ._validation import check_int_at_least, resolve_device
from .kernels import Kernel, SVMDualOperator, make_kernel
from .linesearch import ExactLineSearch, OpenLoop
from .optimizers import _kernels as K
from .optimizers._engine import ZERO_TOL, Coefficients, Move, QuadraticEngine
from .optimizers.active_set import simplex_qp
from .optimizers.away import AwayStepFrankWolfe
from .oracles import Simplex
from .result import Status
from .svm import SVC, ConvergenceWarning, _solver_factory

try:
    import torch.distributed as dist

    HAVE_DISTRIBUTED = dist.is_available()
except ImportError:  # pragma: no cover - torch builds without distributed support
    dist = None
    HAVE_DISTRIBUTED = False

__all__ = ["HAVE_DISTRIBUTED", "Communicator", "ShardedSVMDualOperator",
           "DistributedQuadraticEngine", "minimize", "DistributedSVC", "fit_svc", "shard_range",
           "gather_shards", "EXCHANGES"]

#: Feature exchange modes (see the module docstring).
EXCHANGES = ("auto", "gather", "broadcast")

#: Solvers of :class:`~torchfw.svm.SVC` that run distributed (the streaming ones keep a
#: working set in arrival order, which has no sharded form here).
DISTRIBUTED_SOLVERS = ("fw", "away", "pairwise", "swap", "swap2", "partan", "fc")

_INF = math.inf


def shard_range(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Contiguous, balanced ``[start, stop)`` of ``n`` examples for ``rank`` of ``world_size``.

    The first ``n % world_size`` ranks get one example more. Any contiguous split in rank order
    works with this module; this is the one the examples and tests use.
    """
    check_int_at_least("world_size", world_size, 1)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    base, extra = divmod(int(n), world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


# ---------------------------------------------------------------------------------------------
# Communication
# ---------------------------------------------------------------------------------------------

class Communicator:
    """The collectives of the sharded solvers, instrumented.

    Every call records how many bytes this rank hands to the collective (``sent``) and how many
    it gets back from the other ranks (``received``), per operation, and the wall time spent in
    the call (which includes waiting for slower ranks). These are the payloads of *our* calls;
    the bytes on the wire also depend on the backend's algorithm and headers, which
    ``benchmarks/distributed.py`` measures separately.

    Parameters
    ----------
    group : ProcessGroup, optional
        Default: the world group. The process group must be initialized.
    """

    def __init__(self, group=None):
        if not HAVE_DISTRIBUTED:
            raise RuntimeError("torch.distributed is not available in this PyTorch build")
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized: call "
                               "torch.distributed.init_process_group(...) first (torchrun sets "
                               "the environment it reads)")
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.backend = str(dist.get_backend(group))
        # NCCL only moves CUDA tensors; gloo moves CPU tensors.
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if self.backend == "nccl" else torch.device("cpu"))
        self._gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters."""
        self.ops: dict[str, dict[str, float]] = {}

    def _record(self, op: str, sent: int, received: int, seconds: float) -> None:
        entry = self.ops.setdefault(op, {"calls": 0, "sent": 0, "received": 0, "seconds": 0.0})
        entry["calls"] += 1
        entry["sent"] += sent
        entry["received"] += received
        entry["seconds"] += seconds

    def stats(self) -> dict:
        """Totals and per-operation counters: ``calls``, ``sent``, ``received``, ``seconds``."""
        total = {"calls": 0, "sent": 0, "received": 0, "seconds": 0.0}
        for entry in self.ops.values():
            for key in total:
                total[key] += entry[key]
        return {"total": total, "ops": {k: dict(v) for k, v in self.ops.items()}}

    def _to_comm(self, array: np.ndarray) -> Tensor:
        t = torch.from_numpy(np.ascontiguousarray(array))
        return t if self.device.type == "cpu" else t.to(self.device)

    def all_gather(self, array: np.ndarray, op: str = "all_gather") -> np.ndarray:
        """Every rank's ``array`` (same shape on all ranks), stacked in rank order."""
        if self.size == 1:  # a group of one: nothing to send
            self._record(op, 0, 0, 0.0)
            return np.array(array)[None]
        t = self._to_comm(array)
        flat = t.reshape(-1)
        out = torch.empty(self.size * flat.numel(), dtype=t.dtype, device=t.device)
        start = time.perf_counter()
        self._gather(out, flat, group=self.group)
        result = out.cpu().numpy().reshape((self.size,) + tuple(t.shape))
        self._record(op, t.nbytes, (self.size - 1) * t.nbytes, time.perf_counter() - start)
        return result

    def all_reduce(self, array: np.ndarray, reduce: str = "max",
                   op: str = "all_reduce") -> np.ndarray:
        """Elementwise ``max`` or ``min`` of ``array`` over the ranks (exact, order-free).

        Sums are never all-reduced: the backend's summation order may differ between ranks, and
        the ranks must agree bit for bit. Use :meth:`sum` (all-gather, then :func:`math.fsum`).
        """
        if self.size == 1:
            self._record(op, 0, 0, 0.0)
            return np.array(array)
        t = self._to_comm(array)
        reduce_op = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[reduce]
        start = time.perf_counter()
        dist.all_reduce(t, op=reduce_op, group=self.group)
        result = t.cpu().numpy()
        self._record(op, t.nbytes, t.nbytes, time.perf_counter() - start)
        return result

    def sum(self, values, op: str = "sum") -> np.ndarray:
        """Correctly rounded sums of ``values`` over the ranks, identical on every rank."""
        rows = self.all_gather(np.asarray(values, dtype=np.float64).reshape(-1), op=op)
        return np.array([math.fsum(rows[:, k]) for k in range(rows.shape[1])])

    def gather_rows(self, rows: np.ndarray, op: str = "gather_rows") -> np.ndarray:
        """Concatenate every rank's ``(k_r, L)`` rows in rank order (``k_r`` may differ)."""
        rows = np.asarray(rows, dtype=np.float64)
        width = rows.shape[1]
        counts = self.all_gather(np.array([rows.shape[0]], dtype=np.int64), op=op)[:, 0]
        top = int(counts.max())
        if top == 0:
            return np.zeros((0, width))
        padded = np.zeros((top, width))
        padded[:rows.shape[0]] = rows
        everything = self.all_gather(padded, op=op)
        return np.concatenate([everything[r, :counts[r]] for r in range(self.size)])

    def all_gather_object(self, obj) -> list:
        """Every rank's picklable ``obj`` (set-up only: labels, sizes)."""
        out = [None] * self.size
        start = time.perf_counter()
        dist.all_gather_object(out, obj, group=self.group)
        self._record("all_gather_object", 0, 0, time.perf_counter() - start)
        return out


def gather_shards(tensor: Tensor, comm: Communicator | None = None) -> Tensor:
    """Concatenate every rank's shard of a per-example vector or matrix, in rank order.

    A collective: every rank must call it. Returns the full tensor on every rank (in float64 for
    transport, cast back to the input's dtype, on the input's device).
    """
    comm = comm or Communicator()
    t = tensor.detach()
    rows = t.reshape(t.shape[0], -1).double().cpu().numpy()
    full = comm.gather_rows(rows, op="gather_shards")
    out = torch.from_numpy(full).to(dtype=t.dtype, device=t.device)
    return out.reshape((full.shape[0],) + tuple(t.shape[1:]))


# ---------------------------------------------------------------------------------------------
# The sharded kernel operator
# ---------------------------------------------------------------------------------------------

def _kernel_scalar(kernel: Kernel, dot: float, sq_a: float, sq_b: float) -> float:
    """``k(a, b)`` from an inner product and squared norms, in float64 scalar arithmetic.

    Every rank evaluates the same expression on the same inputs, so the value is the same on all
    of them (the ranks' decisions depend on it).
    """
    name = kernel.name
    if name == "rbf":
        return math.exp(-kernel.gamma * max(sq_a + sq_b - 2.0 * dot, 0.0))
    if name == "linear":
        return dot
    if name == "poly":
        return (kernel.gamma * dot + kernel.coef0) ** kernel.degree
    if name == "sigmoid":
        return math.tanh(kernel.gamma * dot + kernel.coef0)
    raise ValueError(f"unsupported kernel {kernel!r}")  # pragma: no cover


class _Atom:
    """An atom's broadcast data: features (kernel dtype), label, squared norm, ``1/C``."""

    __slots__ = ("x", "x64", "nzf", "nzv", "y", "sq", "inv_c", "_x_t")

    def __init__(self, record: np.ndarray, dtype: np.dtype):
        self.y, self.sq, self.inv_c = float(record[0]), float(record[1]), float(record[2])
        self.x64 = np.array(record[3:], dtype=np.float64)
        self.x = self.x64.astype(dtype)  # exact: the owner sent kernel-dtype values
        self.nzf = np.flatnonzero(self.x)
        self.nzv = self.x[self.nzf]
        self._x_t = None

    def x_tensor(self, device, dtype) -> Tensor:
        if self._x_t is None:
            self._x_t = torch.from_numpy(self.x).to(device=device, dtype=dtype)
        return self._x_t


class ShardedSVMDualOperator:
    r"""This rank's rows of the L2-SVM dual matrix :math:`\tilde K`, for a sharded data set.

    The rank holds the examples ``[offset, offset + n_local)`` of the global order (rank 0's
    shard first). Columns :math:`\tilde K_{\text{shard}, i}` are computed for any global atom
    ``i`` from its broadcast features (:class:`DistributedQuadraticEngine` moves them), with the
    same compiled kernel and the same storage as :class:`~torchfw.kernels.SVMDualOperator`
    (which holds the shard). Creating the operator is a collective (the ranks exchange their
    shard sizes).

    Parameters
    ----------
    X : Tensor
        This rank's examples, dense ``(n_local, d)`` or sparse CSR; the same ``d`` on all ranks.
    y : Tensor
        Labels in ``{-1, +1}``, shape ``(n_local,)``.
    kernel : Kernel
    C : float or Tensor
        Regularization, or one value per local example.
    comm : Communicator, optional
        Default: a :class:`Communicator` on the world group.
    dtype : torch.dtype, default float32
        Precision of kernel values.
    memory_budget : float, default 1024
        MB for the shard's dense feature-major copy (see :class:`SVMDualOperator`).
    """

    def __init__(self, X: Tensor, y: Tensor, kernel: Kernel, C: float | Tensor = 1.0, *,
                 comm: Communicator | None = None, dtype: torch.dtype = torch.float32,
                 memory_budget: float = 1024.0):
        self.comm = comm or Communicator()
        n_local = int(X.shape[0]) if X.dim() == 2 else 0
        d = int(X.shape[1]) if X.dim() == 2 else 0
        sizes = self.comm.all_gather(np.array([n_local, d], dtype=np.int64), op="setup")
        if (sizes[:, 0] == 0).any():
            raise ValueError(f"every rank needs at least one example; shard sizes are "
                             f"{sizes[:, 0].tolist()}")
        if (sizes[:, 1] != sizes[0, 1]).any():
            raise ValueError(f"the shards have different numbers of features: "
                             f"{sizes[:, 1].tolist()}")
        itemsize = torch.finfo(dtype).bits // 8
        # The shard operator's own column cache is never used (columns are computed here from
        # broadcast features); it only has to pass the operator's two-column check.
        cache_mb = 2.5 * n_local * itemsize / 2**20
        self.local = SVMDualOperator(X, y, kernel, C, dtype=dtype, cache_size=cache_mb,
                                     memory_budget=memory_budget)
        self.kernel = kernel
        self.dtype = dtype
        self.device = self.local.device
        self.n_local = n_local
        self.n_features = d
        self.sizes = sizes[:, 0].copy()
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.offset = int(self.offsets[self.comm.rank])
        self.shape = (int(self.offsets[-1]),) * 2
        self.max_local = int(self.sizes.max())
        xfm = self.local.xfm
        self.host = (self.device.type == "cpu" and xfm is not None and _kernel_cpu.HAVE_NUMBA)
        self._np_dtype = np.float64 if dtype == torch.float64 else np.float32
        if self.host:
            self._xfm_np = xfm.numpy()
            self._sq_np = self.local.sq.numpy()
            self._y_np = self.local.y.numpy()
            self._scratch = np.empty(n_local, dtype=self._np_dtype)
            self._bits = np.empty(n_local, dtype=np.int32)
        self._sq_host = self.local.sq.cpu().numpy()
        self._y_host = self.local.y.cpu().numpy()
        self._inv_c_host = self.local.inv_C.cpu().numpy()
        self._diag_host = self.local.diagonal().double().cpu().numpy()

    # -- ownership -----------------------------------------------------------------------------

    def owns(self, k: int) -> bool:
        """Whether global atom ``k`` is on this rank."""
        return self.offset <= k < self.offset + self.n_local

    def diagonal_local(self) -> np.ndarray:
        """:math:`\\tilde K_{kk}` for the local atoms (float64)."""
        return self._diag_host

    def write_features(self, local: int, out: np.ndarray) -> None:
        """Write ``[y, ||x||^2, 1/C, x...]`` of local example ``local`` into ``out``."""
        out[0] = self._y_host[local]
        out[1] = self._sq_host[local]
        out[2] = self._inv_c_host[local]
        xfm = self.local.xfm
        if self.host:
            out[3:] = self._xfm_np[:, local]
        elif xfm is not None:
            out[3:] = xfm[:, local].double().cpu().numpy()
        else:
            out[3:] = self.local.X[local].to_dense().double().cpu().numpy()

    def atom(self, record: np.ndarray) -> _Atom:
        return _Atom(record, self._np_dtype)

    # -- columns -------------------------------------------------------------------------------

    def column_into(self, atom: _Atom, k: int, out) -> None:
        r"""Write :math:`\tilde K_{\text{shard}, k}` into ``out`` (NumPy on the host path)."""
        diag_pos = k - self.offset if self.owns(k) else -1
        if self.host:
            kern = self.kernel
            _kernel_cpu.column_into(kern.code, self._xfm_np, atom.nzf, atom.nzv, self._sq_np,
                                    atom.sq, kern.gamma, kern.coef0, kern.degree, self._y_np,
                                    atom.y, atom.inv_c, diag_pos, self._scratch, self._bits, out)
            return
        x = atom.x_tensor(self.device, self.dtype)
        dots = self._dots(x.reshape(1, -1))[:, 0]
        sq_i = torch.tensor(atom.sq, dtype=self.dtype, device=self.device)
        kvals = self.kernel.from_dots(dots, self.local.sq, sq_i)
        out.copy_(self.local.y * atom.y * (kvals + 1.0))
        if diag_pos >= 0:
            out[diag_pos] += atom.inv_c

    def _dots(self, block: Tensor) -> Tensor:
        """Inner products of the local examples with the rows of ``block``: ``(n_local, k)``."""
        if self.local.xfm is not None:
            return (block @ self.local.feature_major()).T
        return torch.sparse.mm(self.local.X, block.T.contiguous())

    def columns_from(self, rows: np.ndarray) -> Tensor:
        r"""Columns for atoms given as rows ``[k, y, ||x||^2, 1/C, x...]``: ``(n_local, len)``.

        Mirrors :meth:`SVMDualOperator.columns` (PyTorch ops, kernel dtype), for full products.
        """
        t = torch.from_numpy(rows).to(self.device)
        idx = t[:, 0].to(torch.int64)
        block = t[:, 4:].to(self.dtype)
        dots = self._dots(block)
        sq_b = t[:, 2].to(self.dtype)
        kvals = self.kernel.from_dots(dots, self.local.sq.unsqueeze(1), sq_b.unsqueeze(0))
        out = self.local.y.unsqueeze(1) * t[:, 1].to(self.dtype).unsqueeze(0) * (kvals + 1.0)
        local_ids = torch.arange(self.n_local, device=self.device) + self.offset
        on_diag = local_ids.unsqueeze(1) == idx.unsqueeze(0)
        return out + on_diag * t[:, 3].to(self.dtype).unsqueeze(0)

    def entry(self, a: _Atom, b: _Atom, same: bool) -> float:
        r""":math:`\tilde K_{ab}` from two atoms' features (float64, identical on all ranks)."""
        kval = _kernel_scalar(self.kernel, float(np.dot(a.x64, b.x64)), a.sq, b.sq)
        return a.y * b.y * (kval + 1.0) + (a.inv_c if same else 0.0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, shard=[{self.offset}, "
                f"{self.offset + self.n_local}), rank={self.comm.rank}/{self.comm.size})")


# ---------------------------------------------------------------------------------------------
# The sharded engine
# ---------------------------------------------------------------------------------------------

class _ConstantObjective:
    """What the inherited moves read from the objective: its constant (zero here)."""

    constant = 0.0


#: Round-1 record of one candidate: s, global index, w, diagonal entry, s_prev.
_REC = 5


class DistributedQuadraticEngine(QuadraticEngine):
    r"""Incremental engine for :math:`\min_{w \in \Delta_m} \tfrac12 w^\top \tilde K w` on shards.

    Host scalars, the moves of :class:`~torchfw.optimizers._engine.QuadraticEngine` (their
    scalar formulas run unchanged on every rank, as in the streaming engine: only the accessors
    ``_s``, ``_w``, ``_diag`` and the steps that touch vectors are overridden). Local vectors have
    one extra *ghost* entry at the end: an atom owned by another rank is addressed as the ghost,
    so the single-process ``update`` kernel applies moves unchanged, and the ghost is zeroed
    afterwards.

    Parameters
    ----------
    operator : ShardedSVMDualOperator
    w0 : Tensor
        This rank's slice of the initial weights (on the simplex over all ranks).
    keep_previous, pair_columns : bool
        As in :class:`QuadraticEngine` (PARTAN; pairwise/SWAP/fully corrective).
    exchange : {"auto", "gather", "broadcast"}
        How atom features travel (see the module docstring).
    gather_limit : int
        ``"auto"`` uses ``"gather"`` while the gathered features are at most this many bytes.
    cache_size : float
        MB of column slices kept (:mod:`torchfw._column_cache`), the same number of columns on
        every rank.
    refresh_every : int, optional
        Recompute ``s`` exactly every that many iterations (collective).
    gather_away : bool, optional
        In ``"gather"`` mode, also send the away candidate's features (default: with
        ``pair_columns``; away-step variants want it too).
    """

    certifies_gap = True

    def __init__(self, operator: ShardedSVMDualOperator, w0: Tensor, *,
                 keep_previous: bool = False, pair_columns: bool = False,
                 exchange: str = "auto", gather_limit: int = 65536, cache_size: float = 200.0,
                 refresh_every: int | None = None, gather_away: bool | None = None):
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
        op = operator
        self.op = op
        self.comm = op.comm
        self.objective = _ConstantObjective()
        self.lmo = Simplex()
        self.ops = HOST
        self.Q = op
        self.n = self.N = op.shape[0]
        self.n_local = n = op.n_local
        self.offset = op.offset
        self.dtype = torch.float64
        self.keep_previous = bool(keep_previous)
        self.pair_columns = bool(pair_columns)
        self.sample = None
        self.refresh_every = refresh_every
        self._radius = 1.0
        self._identity_atoms = True
        self.ct = None
        self.use_numba = op.host and K.HAVE_NUMBA
        device = op.device
        # Candidates whose features ride along in "gather" mode: the away atom too when moves
        # use two atoms or may step away from it.
        self._n_feat = 2 if (pair_columns if gather_away is None else gather_away) else 1
        d = op.n_features
        feature_bytes = self.comm.size * self._n_feat * (3 + d) * 8
        if exchange == "auto":
            exchange = "gather" if feature_bytes <= gather_limit else "broadcast"
        self.exchange = exchange
        self._flen = 3 + d
        self._packet = np.zeros(1 + 2 * _REC + (self._n_feat * self._flen
                                                if exchange == "gather" else 0))
        w0 = torch.as_tensor(w0, dtype=torch.float64)
        if w0.shape != (n,):
            raise ValueError(f"w0 must be this rank's slice, shape ({n},), got "
                             f"{tuple(w0.shape)}")
        total, negative = self.comm.sum([float(w0.sum()), float((w0 < 0).sum())], op="setup")
        if negative > 0 or abs(total - 1.0) > 1e-6:
            raise ValueError(f"w0 is not on the unit simplex over all ranks (sum {total:.9g})")
        n1 = n + 1  # + the ghost entry
        self.w = torch.zeros(n1, dtype=torch.float64, device=device)
        self.w[:n] = w0.to(device)
        self.diag = torch.zeros(n1, dtype=torch.float64, device=device)
        self.diag[:n] = torch.from_numpy(op.diagonal_local()).to(device)
        self.t = 0.0
        # Column slices (with the ghost entry); the same slot count and the same requests on
        # every rank, so the cache holds the same atoms everywhere (whether to fetch is then a
        # shared decision).
        itemsize = torch.finfo(op.dtype).bits // 8
        slots = max(2, int(cache_size * 2**20 // ((op.max_local + 1) * itemsize
                                                  + 8 * self._flen)))
        self._cache = ColumnCache(slots, self.n_local + 1, n_keys=self.n, dtype=op.dtype,
                                  device=op.device)
        self._atoms: dict[int, _Atom] = {}  # features of the cached atoms
        self._fresh: dict[int, _Atom] = {}
        self._known: dict[int, tuple] = {}
        self._active_min = None
        self.fetches = 0
        self._init_counters(device)
        self.s = self._full_gradient(self.w[:n])
        if self.keep_previous:
            self.w_prev = self.w.clone()
            self.s_prev = self.s.clone()
        else:
            self.w_prev = self.s_prev = None
        self._views()
        self._select()
        if self.keep_previous:
            self._set(W=self.p, p_prev=self.p, t_prev=0.0)

    # -- state ---------------------------------------------------------------------------------

    def _views(self) -> None:
        if not self.use_numba:
            return
        self._w_np = self.w.numpy()
        self._s_np = self.s.numpy()
        self._wp_np = self.w_prev.numpy() if self.keep_previous else self._w_np
        self._sp_np = self.s_prev.numpy() if self.keep_previous else self._s_np

    def _full_gradient(self, w: Tensor) -> Tensor:
        """:math:`s = \\tilde K w` on the local rows (collective: the support is gathered).

        Costs the support's features once (set-up, refresh, restore), never per iteration.
        """
        op = self.op
        local = torch.nonzero(w > 0).squeeze(1).cpu().numpy()
        rows = np.zeros((local.size, 2 + self._flen))
        w_host = w.double().cpu().numpy()
        for q, li in enumerate(local):
            rows[q, 0] = li + self.offset
            rows[q, 1] = w_host[li]
            op.write_features(int(li), rows[q, 2:])
        support = self.comm.gather_rows(rows, op="support")
        s = torch.zeros(self.n_local + 1, dtype=torch.float64, device=op.device)
        itemsize = torch.finfo(op.dtype).bits // 8
        chunk = max(1, int(op.local.memory_budget // (4 * itemsize * max(1, self.n_local))))
        weights = torch.from_numpy(support[:, 1].copy()).to(op.device)
        for start in range(0, support.shape[0], chunk):
            block = np.delete(support[start:start + chunk], 1, axis=1)
            cols = op.columns_from(np.ascontiguousarray(block))
            s[:self.n_local] += cols.to(torch.float64) @ weights[start:start + chunk]
        return s

    def _select(self) -> None:
        """Local selection, then round 1: every rank learns the global candidates and ``p``."""
        n = self.n_local
        if self.use_numba:
            imin, smin, jmax, smax, p, _ = K.select(self._w_np[:n], self._s_np[:n],
                                                    self._s_np[:n], False)
        else:
            imin, smin, jmax, smax, p, _ = (
                v.item() for v in K.torch_select(self.w[:n], self.s[:n], None))
            if smax == -_INF:
                jmax = -1
        packet = self._packet
        packet[0] = p
        self._write_candidate(packet[1:1 + _REC], int(imin), smin)
        self._write_candidate(packet[1 + _REC:1 + 2 * _REC], int(jmax), smax)
        if self.exchange == "gather":
            base = 1 + 2 * _REC
            self.op.write_features(int(imin), packet[base:base + self._flen])
            if self._n_feat == 2:
                tail = packet[base + self._flen:]
                if jmax >= 0:
                    self.op.write_features(int(jmax), tail)
                else:
                    tail[:] = 0.0
        rows = self.comm.all_gather(packet, op="select")
        self._combine(rows)

    def _write_candidate(self, out: np.ndarray, local: int, value: float) -> None:
        if local < 0:
            out[:] = (-_INF, -1.0, 0.0, 0.0, 0.0)
            return
        out[0] = value
        out[1] = local + self.offset
        out[2] = self._w_np[local] if self.use_numba else float(self.w[local])
        out[3] = self.op._diag_host[local]
        out[4] = (0.0 if not self.keep_previous else
                  (self._sp_np[local] if self.use_numba else float(self.s_prev[local])))

    def _combine(self, rows: np.ndarray) -> None:
        """Global scalars from the ranks' records, in rank order (identical on every rank)."""
        p = math.fsum(rows[:, 0])
        fw = rows[:, 1:1 + _REC]
        away = rows[:, 1 + _REC:1 + 2 * _REC]
        r_fw = _best(fw[:, 0], fw[:, 1], minimize=True)
        r_aw = _best(away[:, 0], away[:, 1], minimize=False)
        i = int(fw[r_fw, 1])
        self._known = {i: tuple(fw[r_fw])}
        self._fresh = {}
        if r_aw >= 0:
            j, s_j = int(away[r_aw, 1]), float(away[r_aw, 0])
            self._known[j] = tuple(away[r_aw])
        else:  # pragma: no cover - the weights sum to one, so some atom is active
            j, s_j = -1, -_INF
        if self.exchange == "gather":
            base = 1 + 2 * _REC
            self._fresh[i] = self.op.atom(rows[r_fw, base:base + self._flen])
            if self._n_feat == 2 and r_aw >= 0:
                self._fresh.setdefault(j, self.op.atom(rows[r_aw, base + self._flen:]))
        s_i = float(fw[r_fw, 0])
        self._active_min = None
        self._set(i_min=i, s_min=s_i, i_fw=i, s_fw=s_i, j_max=j, s_max=s_j, p=p, t=0.0)

    def _record(self, k: int) -> tuple:
        try:
            return self._known[k]
        except KeyError:  # pragma: no cover - a variant asked about an atom nobody announced
            raise RuntimeError(f"atom {k} was not announced this iteration") from None

    def _s(self, k):
        return float(self._record(k)[0])

    def _w(self, k):
        return float(self._record(k)[2])

    def _diag(self, k):
        return float(self._record(k)[3])

    def _ct(self, k):
        return 0.0

    def _s_prev(self, k):
        return float(self._record(k)[4])

    def active_min(self):
        """Active atom of smallest gradient (collective; cached until the next move)."""
        if self._active_min is None:
            n = self.n_local
            if self.use_numba:
                best, value, _ = K.active_argmin(self._w_np[:n], self._s_np[:n])
            else:
                best, value, _ = K.torch_active_argmin(self.w[:n], self.s[:n])
                best, value = int(best), float(value)
            record = np.zeros(_REC)
            self._write_candidate(record, int(best), float(value))
            if best < 0:
                record[0] = _INF
            rows = self.comm.all_gather(record, op="active_min")
            r = _best(rows[:, 0], rows[:, 1], minimize=True)
            k = int(rows[r, 1])
            self._known.setdefault(k, tuple(rows[r]))
            self._active_min = (k, float(rows[r, 0]))
        return self._active_min

    def n_active(self) -> int:
        return int(self.comm.sum([float((self.w[:self.n_local] > 0).sum())], op="n_active")[0])

    def refresh(self) -> None:
        """Renormalize ``w`` and recompute ``s`` exactly (collective)."""
        n = self.n_local
        total = self.comm.sum([float(self.w[:n].sum())], op="refresh")[0]
        self.w[:n] /= total
        self.s.copy_(self._full_gradient(self.w[:n]))
        self._select()

    def value(self):
        return 0.5 * self.p

    def point(self) -> Tensor:
        """This rank's slice of the iterate."""
        return self.w[:self.n_local]

    def weights(self) -> Tensor:
        return self.w[:self.n_local]

    def snapshot(self):
        return self.w[:self.n_local].clone()

    def restore(self, snap) -> None:
        self.w[:self.n_local].copy_(snap)
        self.w[self.n_local] = 0.0
        self.s.copy_(self._full_gradient(self.w[:self.n_local]))
        self._select()

    # -- features and columns ------------------------------------------------------------------

    def _has_features(self, k: int) -> bool:
        return k in self._fresh or k in self._atoms

    def _features(self, k: int) -> _Atom:
        atom = self._fresh.get(k)
        return atom if atom is not None else self._atoms[k]

    def _exchange(self, atoms, extra=()) -> np.ndarray:
        """Round 2: bring the features of ``atoms`` to every rank, and max-reduce ``extra``.

        One ``all_reduce(MAX)``: each owner writes its atoms' features, the others ``-inf``
        (so the max *is* the owner's value, exactly), and ``extra`` rides along. Skipped when
        every atom is known and nothing needs reducing (a shared decision: the cache and the
        fresh features are identical on all ranks).
        """
        missing = [k for k in dict.fromkeys(atoms) if not self._has_features(k)]
        if not missing and not len(extra):
            return np.zeros(0)
        width = self._flen
        buf = np.full(len(missing) * width + len(extra), -_INF)
        for q, k in enumerate(missing):
            if self.op.owns(k):
                self.op.write_features(k - self.offset, buf[q * width:(q + 1) * width])
        buf[len(missing) * width:] = extra
        buf = self.comm.all_reduce(buf, "max", op="exchange")
        self.fetches += len(missing)
        for q, k in enumerate(missing):
            self._fresh[k] = self.op.atom(buf[q * width:(q + 1) * width])
        return buf[len(missing) * width:]

    def vertex_gradient(self, k):
        """This rank's slice of column ``k`` (with the ghost entry, zero), cached."""
        k = int(k)
        cache = self._cache
        row = cache.lookup(k)
        if row is not None:
            return self._slice(row)
        self._exchange([k])
        atom = self._features(k)
        row, evicted = cache.insert(k)
        if evicted >= 0:
            del self._atoms[evicted]
        if row < cache.n_slots:
            self._atoms[k] = atom
        out = self._slice(row)
        self.op.column_into(atom, k, out[:self.n_local])
        out[self.n_local] = 0.0
        return out

    def _slice(self, row: int):
        buffer = self._cache.buffer
        return buffer[row].numpy() if self.use_numba else buffer[row]

    def cache_info(self) -> dict:
        return {**self._cache.info(), "fetched": self.fetches}

    # -- moves that touch vectors or need pairs ------------------------------------------------

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        """Pairwise move; :math:`\\tilde K_{ij}` from the two atoms' broadcast features."""
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        if partner is None:
            j, sj = self.j_max, self.s_max
        else:
            j = partner
            sj = self._s(j)
        self._exchange([i, j])
        q_ij = self.op.entry(self._features(i), self._features(j), i == j)
        curvature = self._diag(i) + self._diag(j) - 2.0 * q_ij
        line = self._line(si - sj, curvature, self._w(j))
        return Move("pairwise", line, lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

    def second_order_partner(self):
        """SWAP-2o partner: each rank's best, then one all-gather picks the global best."""
        i, si = self.i_fw, self.s_fw
        dii = self._diag(i)
        h = self.vertex_gradient(i)
        n = self.n_local
        li = i - self.offset if self.op.owns(i) else -1
        if self.use_numba:
            w, s, diag = self._w_np[:n], self._s_np[:n], self.diag.numpy()[:n]
            j = int(K.second_order_partner(w, s, h[:n], diag, s, False, li, si, dii))
            hj = float(h[j]) if j >= 0 else 0.0
        else:
            w, s, diag = self.w[:n], self.s[:n], self.diag[:n]
            j = int(K.torch_second_order_partner(w, s, h[:n], diag, None, li, si, dii))
            hj = float(h[j]) if j >= 0 else 0.0
        record = np.zeros(1 + _REC)
        if j >= 0:
            # The same expression as the compiled kernel, so ranks compare like with like.
            q = max(dii + float(self.op._diag_host[j]) - 2.0 * hj, 1e-300)
            diff = float(s[j]) - si
            record[0] = diff * diff / q
            self._write_candidate(record[1:], j, float(s[j]))
        else:
            record[0] = -_INF
            record[1:] = (-_INF, -1.0, 0.0, 0.0, 0.0)
        rows = self.comm.all_gather(record, op="partner")
        r = _best(rows[:, 0], rows[:, 2], minimize=False)
        if r < 0:
            return self.j_max
        k = int(rows[r, 2])
        self._known.setdefault(k, tuple(rows[r, 1:]))
        return k

    def _previous_score(self, i):
        return self._s_prev(i)

    def _extrapolation_bounds(self, lam, i):
        """The feasible mu on the local slice, reduced over the ranks."""
        n = self.n_local
        li = i - self.offset if self.op.owns(i) else -1
        if self.use_numba:
            lo, hi = K.extrapolation_bounds(self._w_np[:n], self._wp_np[:n], lam, li)
        else:
            lo, hi = _torch_bounds(self.w[:n], self.w_prev[:n], lam, li)
        # The feature fetch of the FW atom (needed by apply) rides along with the bounds.
        lo, neg_hi = self._exchange([i], extra=(lo, -hi))
        return lo, -neg_hi

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        """Apply the move to the local slices, then select (round 1)."""
        j = co.j if co.j is not None else co.i
        if self.keep_previous:
            q = self.p
            W_new = co.a * q + co.b * self._s(co.i) + co.c * self._s(j) + co.d * self.W
            self._set(W=W_new, p_prev=self.p, t_prev=0.0)
        use_h1 = co.j is not None and co.c != 0.0
        self._exchange([co.i, j] if use_h1 else [co.i])  # both in one round when needed
        h0 = self.vertex_gradient(co.i)
        h1 = self.vertex_gradient(j) if use_h1 else h0
        n = self.n_local
        ghost = n
        li = co.i - self.offset if self.op.owns(co.i) else ghost
        lj = j - self.offset if self.op.owns(j) else ghost
        if self.use_numba:
            K.update(self._w_np, self._s_np, co.a, co.b, li, h0, co.c if use_h1 else 0.0, lj,
                     h1, co.d, self._wp_np, self._sp_np, self.keep_previous, ZERO_TOL)
        else:
            swapped = K.torch_update(self.w, self.s, co.a, co.b, li, h0, co.c, lj,
                                     h1 if use_h1 else None, co.d, self.w_prev, self.s_prev,
                                     self.keep_previous, ZERO_TOL)
            if swapped:
                self.w, self.w_prev = self.w_prev, self.w
                self.s, self.s_prev = self.s_prev, self.s
        for vec in (self.w, self.s, self.w_prev, self.s_prev):
            if vec is not None:
                vec[ghost] = 0.0
        self._select()
        if not tick:
            return
        self.tick()
        if self.refresh_every and self.k % self.refresh_every == 0:
            self.refresh()


def _torch_bounds(w: Tensor, w_prev: Tensor, lam: float, i: int) -> tuple[float, float]:
    """:func:`K.extrapolation_bounds` on tensors, with ``i = -1`` for an atom owned elsewhere."""
    wt = w * (1.0 - lam)
    if i >= 0:
        wt[i] += lam
    delta = wt - w_prev
    inf = torch.full_like(w, _INF)
    hi = torch.where(delta < 0, wt / (-delta), inf).amin()
    lo = torch.where(delta > 0, -wt / delta, -inf).amax()
    return float(lo), float(hi)


def _best(values: np.ndarray, index: np.ndarray, *, minimize: bool) -> int:
    """Row of the best value, ties to the lowest global index; -1 when no row is valid."""
    valid = index >= 0
    if not valid.any():
        return -1
    v = np.where(valid, values, _INF if minimize else -_INF)
    target = v.min() if minimize else v.max()
    rows = np.flatnonzero(valid & (v == target))
    if rows.size == 0:  # every valid value is NaN
        return int(np.flatnonzero(valid)[0])
    return int(rows[np.argmin(index[rows])])


# ---------------------------------------------------------------------------------------------
# Core entry point
# ---------------------------------------------------------------------------------------------

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
    user_callback, time_limit = optimizer.callback, optimizer.time_limit
    verbose = optimizer.verbose
    stopped = {"time": False}

    def agreed_stop(info) -> bool:
        # Each rank has its own clock and its own callback: stop when any rank wants to.
        want = 0.0
        if user_callback is not None:
            try:
                want = float(bool(user_callback(info)))
            except StopIteration:
                want = 1.0
        late = float(time_limit is not None and info.elapsed >= time_limit)
        flags = comm.all_reduce(np.array([want, late]), "max", op="stop")
        stopped["time"] = bool(flags[1]) and not bool(flags[0])
        return bool(flags.max() > 0)

    optimizer.time_limit = None
    optimizer.callback = agreed_stop if (user_callback is not None or time_limit is not None) \
        else None
    optimizer.verbose = verbose and comm.rank == 0
    stats_loop = comm.stats()["total"]
    try:
        line_search.reset()
        optimizer._ls = line_search
        result = optimizer._run(engine, "host")
    finally:
        optimizer.time_limit, optimizer.callback, optimizer.verbose = \
            time_limit, user_callback, verbose
    if stopped["time"] and result.status is Status.CALLBACK:
        result.status = Status.TIME_LIMIT
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


# ---------------------------------------------------------------------------------------------
# Distributed SVC
# ---------------------------------------------------------------------------------------------

class DistributedSVC(SVC):
    r"""Kernel SVM (L2-SVM) trained data-parallel: each rank fits on its shard of the examples.

    Same model, parameters and attributes as :class:`~torchfw.svm.SVC` (it *is* an SVC: predict,
    score, save, ``as_module`` work unchanged), trained by the sharded engine of this module.
    :meth:`fit` is a collective: call it on every rank of an initialized process group with the
    rank's own rows (any contiguous split in rank order, e.g. :func:`shard_range`); every rank
    ends with the same fitted model. ``support_`` holds *global* indices (rank 0's rows first).

    Parameters
    ----------
    kernel, C, gamma, degree, coef0, tol, max_iter, cache_size, device, dtype
        As in :class:`~torchfw.svm.SVC` (``max_iter`` defaults to ``100 * m`` for the global
        ``m``; ``gamma="scale"`` uses global statistics).
    class_weight, random_state, verbose, warm_start, n_init, time_limit
        As in :class:`~torchfw.svm.SVC` (``class_weight="balanced"`` uses global statistics;
        ``verbose`` shows the progress bar on rank 0).
    solver : {"fw", "away", "pairwise", "swap", "swap2", "partan", "fc"}, default "swap"
    exchange : {"auto", "gather", "broadcast"}, default "auto"
        How atom features travel between ranks (see :mod:`torchfw.distributed`).
    group : ProcessGroup, optional
        Default: the world group.

    Attributes
    ----------
    result_ : Result or list of Result
        This rank's view of each run (``x`` is the rank's slice of the dual).
    dual_shard_ : Tensor or list of Tensor
        This rank's slice of each binary problem's dual solution :math:`\alpha`.
    """

    sample_size = None  # the randomized LMO is not distributed

    def __init__(self, kernel="rbf", C=1.0, gamma="scale", degree=3, coef0=0.0, solver="swap",
                 tol=0.3, max_iter=None, cache_size=200.0, device=None, dtype=None,
                 class_weight=None, random_state=None, verbose=False, warm_start=False,
                 n_init=20, time_limit=None, exchange="auto", group=None):
        super().__init__(kernel=kernel, C=C, gamma=gamma, degree=degree, coef0=coef0,
                         solver=solver, tol=tol, max_iter=max_iter, sample_size=None,
                         cache_size=cache_size, device=device, dtype=dtype,
                         class_weight=class_weight, random_state=random_state, verbose=verbose,
                         warm_start=warm_start, n_init=n_init, time_limit=time_limit)
        self.exchange = exchange
        self.group = group

    def _check_params(self) -> None:
        super()._check_params()
        if self.solver not in DISTRIBUTED_SOLVERS:
            raise ValueError(f"solver {self.solver!r} has no distributed form; use one of "
                             f"{DISTRIBUTED_SOLVERS}")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {self.exchange!r}")

    def fit(self, X, y):
        """Fit on this rank's shard ``(X, y)`` (a collective over the process group)."""
        self._check_params()
        comm = Communicator(self.group)
        device = resolve_device(self.device)
        kdtype = self.dtype or torch.float32
        X = as_matrix(X, device=device, dtype=kdtype)
        y = as_labels(y, X.shape[0])
        labels = comm.all_gather_object(np.unique(y))
        classes = np.unique(np.concatenate(labels))
        if len(classes) < 2:
            raise ValueError(f"y has a single class ({classes[0]!r}) over all ranks; SVC needs "
                             f"at least two")
        y_encoded = np.searchsorted(classes, y)
        previous = getattr(self, "_alphas", None) if self.warm_start else None
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        self._gamma = self._global_gamma(X, comm)
        self._kernel = make_kernel(self.kernel, self._gamma, self.degree, self.coef0)
        C_examples = self._global_C(y_encoded, len(classes), comm)
        if len(classes) == 2:
            problems = [np.where(y_encoded == 1, 1.0, -1.0)]
        else:
            problems = [np.where(y_encoded == k, 1.0, -1.0) for k in range(len(classes))]
        usable = float(previous is not None and len(previous) == len(problems)
                       and previous[0].shape[0] == X.shape[0])
        if comm.all_reduce(np.array([usable]), "min", op="setup")[0] < 1.0:
            previous = None  # warm start only if every rank can
        alphas, results = [], []
        for k, y_pm in enumerate(problems):
            alpha, result = self._fit_shard(X, y_pm, C_examples, kdtype, comm,
                                            None if previous is None else previous[k], k)
            alphas.append(alpha)
            results.append(result)
        self._alphas = alphas
        self.dual_shard_ = alphas[0] if len(alphas) == 1 else alphas
        self._set_global_model(X, problems, alphas, results, comm)
        return self

    def _global_gamma(self, X: Tensor, comm: Communicator) -> float:
        """``gamma="scale"`` over all ranks' data (the statistics SVC uses on one machine)."""
        if self.gamma != "scale":
            return self._resolve_gamma(X)
        d = X.shape[1]
        if X.layout == torch.sparse_csr:
            values = X.values().double()
            total, squares, rows = comm.sum([float(values.sum()), float((values * values).sum()),
                                             X.shape[0]], op="setup")
            n = rows * d
            mean = total / n
            var = squares / n - mean * mean
        else:
            Xd = X.double()
            total, rows = comm.sum([float(Xd.sum()), X.shape[0]], op="setup")
            n = rows * d
            mean = total / n
            var = comm.sum([float(((Xd - mean) ** 2).sum())], op="setup")[0] / n
        return 1.0 / (d * var) if var > 0 else 1.0

    def _global_C(self, y_encoded: np.ndarray, n_classes: int, comm: Communicator):
        if self.class_weight != "balanced":
            return self._example_C(y_encoded, n_classes)
        counts = comm.sum(np.bincount(y_encoded, minlength=n_classes).astype(np.float64),
                          op="setup")
        weights = counts.sum() / (n_classes * counts)
        return torch.from_numpy(self.C * weights[y_encoded])

    def _fit_shard(self, X, y_pm, C_examples, kdtype, comm, alpha0, k):
        y_t = torch.from_numpy(y_pm).to(X.device)
        C_local = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
        op = ShardedSVMDualOperator(X, y_t, self._kernel, C_local, comm=comm, dtype=kdtype)
        m = op.shape[0]
        seed = None if self.random_state is None else int(self.random_state) + k
        if alpha0 is not None:
            w0 = alpha0
        else:
            w0 = self._initial_shard(op, X, y_pm, C_examples, seed)
        max_iter = self.max_iter if self.max_iter is not None else 100 * m
        solver = _solver_factory(self.solver)(
            tol=1e-300, rtol=2.0 * float(self.tol), max_iter=max_iter, random_state=seed,
            verbose=bool(self.verbose), time_limit=self.time_limit)
        result = minimize(solver, op, w0, exchange=self.exchange, cache_size=self.cache_size)
        if result.status in (Status.MAX_ITER, Status.TIME_LIMIT):
            import warnings

            warnings.warn(f"DistributedSVC solver {self.solver!r} stopped on {result.status} "
                          f"after {result.n_iter} iterations with relative gap "
                          f"{result.gap / max(2 * result.value, 1e-300):.3g} > tol={self.tol}",
                          ConvergenceWarning, stacklevel=3)
        return result.x, result

    def _initial_shard(self, op: ShardedSVMDualOperator, X: Tensor, y_pm: np.ndarray,
                       C_examples, seed) -> Tensor:
        """This rank's slice of SVC's initial point: the same random subset, solved exactly.

        Reproduces :meth:`SVC._initial_alpha` on the global data: the subset is drawn as
        positions among all positives and all negatives (ranks in order), the owners send the
        drawn examples (``n_init`` rows), and every rank solves the same small problem.
        """
        comm = op.comm
        m = op.shape[0]
        rng = np.random.default_rng(seed)
        p = min(self.n_init, m)
        pos, neg = np.flatnonzero(y_pm > 0), np.flatnonzero(y_pm < 0)
        counts = comm.all_gather(np.array([pos.size, neg.size], dtype=np.int64), op="setup")
        n_pos_all, n_neg_all = int(counts[:, 0].sum()), int(counts[:, 1].sum())
        n_pos = min(n_pos_all, max(1, round(p * n_pos_all / m)))
        # Generator.choice(a, k) is a[choice(len(a), k)]: drawing positions reproduces SVC.
        picks = [rng.choice(n_pos_all, n_pos, replace=False),
                 rng.choice(n_neg_all, min(n_neg_all, p - n_pos), replace=False)]
        mine = []
        for column, local_members, drawn in ((0, pos, picks[0]), (1, neg, picks[1])):
            start = int(counts[:comm.rank, column].sum())
            own = drawn[(drawn >= start) & (drawn < start + local_members.size)]
            mine.extend(int(local_members[q - start]) for q in own)
        mine.sort()
        width = 3 + op.n_features
        rows = np.zeros((len(mine), width))
        C_host = None if isinstance(C_examples, float) else C_examples.double().cpu().numpy()
        for q, li in enumerate(mine):
            rows[q, 0] = li + op.offset
            rows[q, 1] = y_pm[li]
            rows[q, 2] = C_examples if C_host is None else C_host[li]
            feats = np.zeros(3 + op.n_features)
            op.write_features(li, feats)
            rows[q, 3:] = feats[3:]
        subset = comm.gather_rows(rows, op="setup")  # global index order (ranks in order)
        X_sub = torch.from_numpy(subset[:, 3:]).to(dtype=op.dtype, device=op.device)
        C_sub = (float(C_examples) if C_host is None
                 else torch.from_numpy(subset[:, 2].copy()).to(op.device))
        small_op = SVMDualOperator(X_sub, torch.from_numpy(subset[:, 1].copy()).to(op.device),
                                   self._kernel, C_sub, dtype=op.dtype)
        idx = torch.arange(subset.shape[0], device=op.device)
        w, _ = simplex_qp(small_op.block(idx, idx).double().cpu().numpy())
        w0 = torch.zeros(op.n_local, dtype=torch.float64)
        for q, k in enumerate(subset[:, 0].astype(np.int64)):
            if op.owns(int(k)):
                w0[int(k) - op.offset] = float(w[q])
        return w0.to(op.device)

    def _set_global_model(self, X, problems, alphas, results, comm) -> None:
        """Gather the support vectors from all ranks, then SVC's own model-setting code."""
        support = torch.zeros(X.shape[0], dtype=torch.bool, device=X.device)
        for alpha in alphas:
            support |= alpha > 0
        local = torch.nonzero(support).squeeze(1).cpu().numpy()
        n_prob = len(problems)
        d = X.shape[1]
        rows = np.zeros((local.size, 1 + 2 * n_prob + d))
        alphas_host = [a.double().cpu().numpy() for a in alphas]
        dense = None
        if local.size:
            idx = torch.from_numpy(local).to(X.device)
            sv = take_rows(X, idx)
            dense = (sv.to_dense() if sv.layout == torch.sparse_csr else sv).double().cpu()
        offsets = comm.all_gather(np.array([X.shape[0]], dtype=np.int64), op="setup")[:, 0]
        offset = int(offsets[:comm.rank].sum())
        for q, li in enumerate(local):
            rows[q, 0] = li + offset
            for k in range(n_prob):
                rows[q, 1 + k] = problems[k][li]
                rows[q, 1 + n_prob + k] = alphas_host[k][li]
            rows[q, 1 + 2 * n_prob:] = dense[q].numpy()
        everything = comm.gather_rows(rows, op="model")
        X_sv = torch.from_numpy(everything[:, 1 + 2 * n_prob:].copy()).to(
            dtype=X.dtype if X.layout != torch.sparse_csr else X.values().dtype,
            device=X.device)
        if X.layout == torch.sparse_csr:
            X_sv = X_sv.to_sparse_csr()
        problems_sv = [everything[:, 1 + k].copy() for k in range(n_prob)]
        alphas_sv = [torch.from_numpy(everything[:, 1 + n_prob + k].copy()).to(X.device)
                     for k in range(n_prob)]
        self._X_train = X_sv
        self._set_model(X_sv, problems_sv, alphas_sv, results)
        self.support_ = everything[:, 0].astype(np.int64)

    def state_dict(self) -> dict:
        """As :meth:`SVC.state_dict`, loadable by a plain :class:`SVC` (no process group)."""
        state = super().state_dict()
        keep = set(SVC._get_param_names())
        state["params"] = {k: v for k, v in state["params"].items() if k in keep}
        return state


def fit_svc(X, y, **params) -> DistributedSVC:
    """``DistributedSVC(**params).fit(X, y)`` on this rank's shard (a collective)."""
    return DistributedSVC(**params).fit(X, y)


# ---------------------------------------------------------------------------------------------
# Demo launcher: torchrun --nproc_per_node=2 -m torchfw.distributed ...
# ---------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    """Train a DistributedSVC on generated data or a LIBSVM file, one shard per rank."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=N -m torchfw.distributed",
        description="Data-parallel kernel SVM training with torchfw (one shard per rank).")
    parser.add_argument("--data", help="LIBSVM/svmlight training file (every rank reads it and "
                                       "keeps its rows)")
    parser.add_argument("--test", help="LIBSVM/svmlight test file")
    parser.add_argument("--generate", type=int, nargs=2, metavar=("M", "D"),
                        default=(20000, 16), help="generated data (default: 20000 16)")
    parser.add_argument("--solver", default="swap", choices=DISTRIBUTED_SOLVERS)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--gamma", default="scale")
    parser.add_argument("--tol", type=float, default=0.3)
    parser.add_argument("--exchange", default="auto", choices=EXCHANGES)
    parser.add_argument("--backend", default=None, help="default: nccl with CUDA, else gloo")
    args = parser.parse_args(argv)
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    owns_group = not dist.is_initialized()
    if owns_group:
        dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = None
    if backend == "nccl":
        local_rank = int(__import__("os").environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    from .datasets import load_svmlight, make_large_classification

    if args.data:
        X, y = load_svmlight(args.data)
        X = X.to_dense()
    else:
        m, d = args.generate
        X, y = make_large_classification(m + m // 4, d, random_state=0)
        X, y = X[:m], y[:m]
        X_test, y_test = make_large_classification(m + m // 4, d, random_state=0)
        X_test, y_test = X_test[m:], y_test[m:]
    start, stop = shard_range(X.shape[0], rank, world)
    gamma = args.gamma if args.gamma in ("scale", "auto") else float(args.gamma)
    t0 = time.perf_counter()
    model = DistributedSVC(C=args.C, gamma=gamma, solver=args.solver, tol=args.tol,
                           exchange=args.exchange, device=device).fit(X[start:stop],
                                                                      y[start:stop])
    elapsed = time.perf_counter() - t0
    if args.test:
        X_test, y_test = load_svmlight(args.test, n_features=X.shape[1])
        X_test = X_test.to_dense()
    if rank == 0:
        results = model.result_ if isinstance(model.result_, list) else [model.result_]
        iterations = sum(r.n_iter for r in results)
        sent = sum(r.info["communication"]["sent"] for r in results)
        print(f"ranks={world} backend={backend} m={X.shape[0]} d={X.shape[1]} "
              f"solver={args.solver} exchange={results[0].info['exchange']}")
        print(f"fit {elapsed:.2f} s, {iterations} iterations, {len(model.support_)} support "
              f"vectors, {sent / max(1, iterations):.0f} bytes sent per iteration by rank 0")
        if not args.data or args.test:
            print(f"test accuracy {model.score(X_test, y_test):.4f}")
    if owns_group:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through torchrun
    raise SystemExit(main())
