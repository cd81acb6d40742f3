r"""The compiled row-source storage: one problem whose vertex gradients are rows of a source.

One concern: a storage of :class:`~torchfw.optimizers._engine.QuadraticEngine` for problems of
a few hundred to a few thousand atoms, whose iterations run in the one compiled quadratic loop
(:mod:`torchfw.optimizers._compiled_loop`) instead of the interpreter. The problem is
:math:`F(w) = \tfrac12 w^\top \tilde Q w + \tilde c^\top w` plus a constant over the unit simplex
of atoms; the vertex gradient :math:`h_k = \tilde Q e_k + \tilde c` of atom ``k`` is row ``k`` of
a *row source* (:func:`~torchfw.optimizers._compiled_loop.vertex_row`): a 2-D array's rows read in
place (the dense storage's matrix :math:`H`, :mod:`torchfw.optimizers._dense`), or any source a
family registers -- the SVM's signed kernel rows, whole or from a cache of rows
(:mod:`torchfw.svm._dense`). The source is passed in: the core imports no family.

The state is a :class:`~torchfw.optimizers._compiled_loop.LoopState` (the weights ``w``, the
scores :math:`s = \tilde Q w + \tilde c`, PARTAN's previous iterate and support, the scalars).
The storage answers the protocol (:mod:`torchfw.optimizers._storage`) on it -- entries, rows,
selections, PARTAN's bounds, moves applied through the shared kernels -- so that the engine's
Python moves run on it, and it runs the compiled loop on the same state in two ways:

* :meth:`RowStorage.run_block`: exactly ``n`` iterations, no stopping test and no corrective
  step (the run loop of :class:`~torchfw.optimizers.ConstrainedOptimizer` decides at its checks:
  ``execution="dense"``);
* :meth:`RowStorage.solve`: the whole solve -- iterations, the checks every ``check_every``, the
  stopping test of a :class:`~torchfw.optimizers.StoppingRule`, the active-set corrective step
  -- in chunks of about :data:`CHUNK_SECONDS` (:func:`~torchfw.optimizers._compiled_loop.
  run_chunked`), between which a Ctrl-C or a ``stop`` event is honoured. The compiled code
  releases the GIL, so solves of independent problems run on threads (SVC's one-vs-rest).
  The engine drives it (:meth:`QuadraticEngine.solve <torchfw.optimizers._engine.
  QuadraticEngine.solve>`); it returns a :class:`LoopRun` -- the iterations, the status and
  the checks -- whose :meth:`LoopRun.result` is the run's :class:`~torchfw.result.Result`, its
  history read from the checks on first use (:class:`ChecksHistory`).

SVC's compiled path is this storage over the SVM's signed kernel rows (:mod:`torchfw.svm.
_dense`): its loop, stopping test, checks and results are the ones written here.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch

from ..result import History, Result, Status
from ..utils.jit import HAVE_NUMBA
from ..utils.jit import njit as _njit  # None without numba
from . import _compiled_loop as L
from . import _kernels as K
from ._face_space import FaceSpace
from ._moves import ZERO_TOL, Coefficients
from ._state import EngineState
from ._stopping import StoppingRule
from ._vectors import feasible_interval, update_vectors

__all__ = ["RowStorage", "LoopRun", "ChecksHistory", "CHUNK_SECONDS", "FIRST_CHUNK",
           "FIRST_CHUNK_WORK", "first_chunk", "first_pause"]

#: Seconds one compiled call of :meth:`RowStorage.solve` runs before it returns to Python: the
#: loop runs in chunks of iterations sized to about this long, each resuming exactly where the
#: last stopped. Between two chunks the interpreter runs, so that a Ctrl-C
#: (``KeyboardInterrupt``) stops a solve within about this long, and a cancelled fit's solves
#: on worker threads stop too. None: one call for the whole solve (signals wait until it
#: returns: 40 s for SVC on a9a at tol=1e-3).
CHUNK_SECONDS: float | None = 0.2

#: Iterations of the first chunk (rounded to a multiple of ``check_every``), timed to size the
#: next ones: small problems converge within it, in one call. An iteration reads one or two
#: rows of ``N`` entries, which a source may compute on first use (SVC's cache of rows on a9a:
#: ~2 ms per row early on, 2,000 iterations took 3.5 s), so the first chunk has at most
#: ``FIRST_CHUNK_WORK / N`` iterations.
FIRST_CHUNK = 2000
FIRST_CHUNK_WORK = 2_000_000


def first_chunk(n: int) -> int:
    """The iterations of :meth:`RowStorage.solve`'s first chunk on ``n`` atoms (before the
    rounding to ``check_every``)."""
    return min(FIRST_CHUNK, FIRST_CHUNK_WORK // max(1, n))


def first_pause(n: int, check_every: int) -> int:
    """The iteration at which :meth:`RowStorage.solve`'s first chunk on ``n`` atoms pauses
    (:func:`first_chunk` rounded to ``check_every``,
    :func:`~torchfw.optimizers._compiled_loop.first_pause`): a caller that runs only the first
    chunk of many problems in one compiled call (SVC's blocks, :mod:`torchfw.svm._pairs`)
    stops each where the storage's solve would pause."""
    return L.first_pause(first_chunk(n), check_every)


class ChecksHistory(History):
    """A :class:`~torchfw.result.History` kept as a compiled run's check arrays and turned
    into its lists on first read: most callers never read it, and the lists cost as much as
    the solve on small problems (9 us a problem, against ~20 us for each of an SVC's solves
    on iris).

    The compiled loop has no clock: the last check carries the run's total time.
    """

    def __init__(self, hist, hist_counts, elapsed):  # the fields come on first read
        self.__dict__["_checks"] = (hist, hist_counts, elapsed)

    def __getattr__(self, name):
        checks = self.__dict__.pop("_checks", None)
        if checks is None:
            raise AttributeError(name)
        hist, hist_counts, elapsed = checks
        n = hist.shape[0]
        times = [math.nan] * n
        times[-1] = elapsed
        iteration, value, gap = hist.T.tolist()
        # The counts only grow: a counter that is 0 at the last check is 0 at every check.
        used = [(k, counter) for k, counter in enumerate(L.COUNTERS) if hist_counts[-1, k]]
        steps = [{counter: row[k] for k, counter in used if row[k]}
                 for row in hist_counts.tolist()]
        self.__dict__.update(iteration=[int(i) for i in iteration], value=value, gap=gap,
                             time=times, steps=steps)
        return getattr(self, name)


class LoopRun(NamedTuple):
    """What a whole compiled solve returns (:meth:`RowStorage.solve`): ``n_iter`` iterations,
    the loop's ``status`` code (:mod:`~torchfw.optimizers._compiled_loop`), and the checks:
    ``history`` rows ``[k, value, gap]`` and ``counts`` the step counters at each check
    (``(n, 8)``, :data:`~torchfw.optimizers._compiled_loop.COUNTERS`). Unpacks as the tuple
    ``(n_iter, status, history, counts)``."""

    n_iter: int
    status: int
    history: np.ndarray
    counts: np.ndarray

    def result(self, start: L.LoopState, seconds: float, info: dict,
               constant: float = 0.0) -> Result:
        r"""The run's :class:`~torchfw.result.Result` from its final iterate ``start`` (the
        storage's state): value :math:`(p + t)/2` plus ``constant``, gap :math:`p - \min s`,
        the weights (``x``, and a copy as ``weights``), ``CONVERGED`` or ``MAX_ITER``, the
        checks as a :class:`ChecksHistory` (``seconds``: the run's time), the smallest gap
        of the checks and the final one, and ``info``.

        A run that ended on a non-finite check has no result to give (the caller restores the
        last finite iterate): ValueError.
        """
        if self.status == L.NONFINITE:
            raise ValueError("a compiled run that reached non-finite values has no result: "
                             "restore a finite iterate first")
        value, gap = start.value() + constant, start.gap()
        w = torch.from_numpy(start.w)
        return Result(x=w, value=value, gap=gap, n_iter=self.n_iter,
                      status=Status.CONVERGED if self.status == L.CONVERGED
                      else Status.MAX_ITER,
                      history=ChecksHistory(self.history, self.counts, seconds),
                      weights=w.clone(), best_gap=min(float(self.history[:, 2].min()), gap),
                      info=info)


def _row_at_py(src, i, buf):
    """:func:`~torchfw.optimizers._compiled_loop.vertex_row`, callable from Python (compiled
    for each source type, the family's overload resolved as in the loop)."""
    return L.vertex_row(src, i, buf)


def _gradient_from_rows_py(src, w, s, buf):
    r""":math:`s = \sum_k w_k h_k` over the atoms with weight (:math:`\tilde Q w + \tilde c`
    for weights summing to one), row by row in atom order."""
    for r in range(s.shape[0]):
        s[r] = 0.0
    for k in range(w.shape[0]):
        if w[k] != 0.0:
            h = L.vertex_row(src, k, buf)
            for r in range(s.shape[0]):
                s[r] += w[k] * h[r]


_row_at = _njit(_row_at_py)
_gradient_from_rows = _njit(_gradient_from_rows_py)

_CPU = torch.device("cpu")


def _scalar(pos: int, kind=float):
    """A scalar of the state, read from and written to the loop state's array at ``pos``
    (:class:`~torchfw.optimizers._compiled_loop.LoopState`): the compiled calls and the Python
    moves share it, with no copy between them."""

    def get(self):
        return kind(self.start.state[pos])

    def put(self, value) -> None:
        self.start.state[pos] = value

    return property(get, put)


class RowStorage(EngineState):
    r"""A storage over a row source, its state a :class:`~torchfw.optimizers._compiled_loop.
    LoopState`, its iterations the one compiled loop's.

    Parameters
    ----------
    src : row source
        A 2-D array whose row ``k`` is :math:`h_k` (read in place), or a value of a type for
        which a family registered an overload of
        :func:`~torchfw.optimizers._compiled_loop.vertex_row` (the row computed into a buffer
        of ``row_dtype``).
    diag : ndarray
        :math:`\tilde Q_{kk}` (``(N,)``, in the weights' precision).
    start : LoopState
        The start, held (not copied): the storage's vectors are its vectors, the final iterate
        is left in it. Its scalars must be the selection of its vectors (a start built by
        :meth:`LoopState.of_engine`, or by a family's compiled start).
    ct : ndarray, optional
        The linear term over atoms :math:`\tilde c` (None: none).
    constant : float
        The objective's constant (added to every reported value).
    row_dtype : dtype, optional
        The dtype of the rows a computed source writes (its buffers); None for a 2-D array
        source, whose rows are read in place.

    Raises
    ------
    ValueError
        Without numba (the loop is compiled code).
    """

    #: A whole solve takes the corrective step inside the compiled loop (:meth:`solve`'s
    #: ``correct``); the run loop's Python step (:meth:`face_space`, :meth:`face_column`,
    #: :meth:`face_write`) is for the storages over it that run blocks
    #: (:class:`~torchfw.optimizers._dense.DenseStorage`).
    face_correction = False

    def __init__(self, src, diag: np.ndarray, start: L.LoopState, *, ct=None,
                 constant: float = 0.0, row_dtype=None):
        if not HAVE_NUMBA:
            raise ValueError("the row-source storage runs the compiled loop: it needs numba")
        self.src = src
        self.start = start
        n = start.w.shape[0]
        self.N = n
        self.keep_previous = start.wp is not start.w
        self.constant = constant
        self.diag = diag
        self.ct = ct
        # The loop reads ``ct`` only with has_ct: the diagonal stands in for it otherwise.
        self._ct_arg = ct if ct is not None else diag
        self._in_place = row_dtype is None
        self._bufs = (np.empty((2, 0), dtype=src.dtype) if self._in_place
                      else np.empty((2, n), dtype=row_dtype))
        # EngineState's counters, set here: an SVC fit builds a storage per problem solved.
        self.k = 0
        self._counts: dict[str, Any] = {}
        self._device = _CPU
        self._in_support: np.ndarray | None = None  # PARTAN's, built on first Python move

    # -- the scalars: views of the state array ------------------------------------------------

    p = _scalar(0)
    t = _scalar(1)
    s_min = _scalar(2)
    i_min = _scalar(3, int)
    s_max = _scalar(4)
    j_max = _scalar(5, int)
    W = _scalar(6)
    p_prev = _scalar(7)
    t_prev = _scalar(8)
    _n_support = _scalar(9, int)
    #: The FW atom is the atom of smallest score (no sampled selection on this storage).
    i_fw = i_min
    s_fw = s_min

    def _set(self, **values) -> None:
        """Store scalars into the state array (the bookkeeping's ``set_scalars``)."""
        for name, value in values.items():
            setattr(self, name, value)

    # -- rows ----------------------------------------------------------------------------------

    def _row(self, k, slot: int = 0) -> np.ndarray:
        """Row ``k`` of the source (in place, or computed into buffer ``slot``)."""
        if self._in_place:
            return self.src[int(k)]
        return _row_at(self.src, int(k), self._bufs[slot])

    def vertex_gradient(self, k) -> torch.Tensor:
        r""":math:`h_k`, as a tensor (a copy of a computed row: the buffers are reused)."""
        row = self._row(k)
        return torch.from_numpy(row if self._in_place else row.copy())

    # -- entries -------------------------------------------------------------------------------

    def score(self, k):
        return float(self.start.s[k])

    def weight(self, k):
        return float(self.start.w[k])

    def diagonal(self, k):
        return float(self.diag[k])

    def linear(self, k):
        return 0.0 if self.ct is None else float(self.ct[k])

    def previous_score(self, k):
        return float(self.start.sp[k])

    def pair_entry(self, i, j):
        r""":math:`\tilde Q_{ij} = h_i[j] - \tilde c_j`."""
        return float(self._row(i)[int(j)]) - self.linear(j)

    # -- selections, bounds --------------------------------------------------------------------

    def reselect(self) -> None:
        """The selection from the vectors (:func:`torchfw.optimizers._kernels.select`, the
        loop's own); the FW atom is the smallest score."""
        imin, smin, jmax, smax, p, t = K.select(self.start.w, self.start.s, self._ct_arg,
                                                 self.ct is not None)
        state = self.start.state
        state[0], state[1], state[2], state[3], state[4], state[5] = p, t, smin, imin, smax, jmax

    def active_min(self):
        best, value, _ = K.active_argmin(self.start.w, self.start.s)
        return int(best), float(value)

    def second_order_partner(self):
        """SWAP-2o away atom (:func:`torchfw.optimizers._kernels.second_order_partner`, the
        loop's own), else the away atom."""
        i = self.i_fw
        j = K.second_order_partner(self.start.w, self.start.s, self._row(i), self.diag,
                                   self._ct_arg, self.ct is not None, i, self.s_fw,
                                   float(self.diag[i]))
        return int(j) if j >= 0 else self.j_max

    def _note_support(self, i: int) -> None:
        """Record that atom ``i`` may carry weight (PARTAN's bounds read only such atoms)."""
        if self._in_support is None:
            self._in_support = np.zeros(self.N, dtype=np.bool_)
            self._in_support[self.start.support[:self._n_support]] = True
        if not self._in_support[i]:
            self._in_support[i] = True
            self.start.support[self._n_support] = i
            self._n_support += 1

    def extrapolation_bounds(self, lam, i):
        r"""PARTAN's feasible :math:`\mu` interval over the atoms that ever had weight."""
        self._note_support(int(i))
        return feasible_interval(self.start.w, self.start.wp, lam, i,
                                 support=self.start.support, n_support=self._n_support)

    # -- writes --------------------------------------------------------------------------------

    def update(self, co: Coefficients) -> None:
        """Apply the move to the vectors (:func:`~torchfw.optimizers._vectors.update_vectors`,
        the loop's kernels), then :meth:`reselect`."""
        st = self.start
        j = co.j if co.j is not None else co.i
        use_h1 = co.j is not None and co.c != 0.0
        h0 = self._row(co.i, 0)
        h1 = self._row(j, 1) if use_h1 else h0
        support = None
        if self.keep_previous:
            self._note_support(int(co.i))
            self._note_support(int(j))
            support = st.support
        update_vectors(st.w, st.s, co.a, co.b, co.i, h0, co.c if use_h1 else 0.0, j, h1,
                       co.d, st.wp, st.sp, shift=self.keep_previous, support=support,
                       n_support=self._n_support if support is not None else 0)
        self.reselect()

    def after_tick(self) -> None:
        """Nothing: the scores are refreshed only on demand (:meth:`refresh`)."""

    # -- the corrective step through the engine (torchfw.optimizers._correction) -------------

    def face_space(self, problem: int = 0) -> FaceSpace:
        """The vectors over the ``N`` atoms: views of the loop state's arrays."""
        return FaceSpace(self.start.w, self.start.s, self.ct)

    def face_column(self, atom: int, problem: int = 0) -> np.ndarray:
        r""":math:`h_{atom}` (a row of the source; a copy of a computed row, whose buffer is
        reused)."""
        row = self._row(atom)
        return row if self._in_place else row.copy()

    def face_write(self, w, s, problem: int = 0) -> None:
        """The corrected weights and scores; PARTAN restarts from them (previous iterate = the
        new one, every atom with weight in its support list)."""
        st = self.start
        st.w[:] = w
        st.s[:] = s
        self.reselect()
        if self.keep_previous:
            st.wp[:] = st.w
            st.sp[:] = st.s
            for i in np.flatnonzero(st.w > 0.0):
                self._note_support(int(i))
            self._set(W=self.p - self.t, p_prev=self.p, t_prev=self.t)

    # -- whole state ---------------------------------------------------------------------------

    def snapshot(self):
        """Copies of the vectors and the scalars: :meth:`restore` returns to this iterate
        exactly."""
        st = self.start
        vectors = (st.w, st.s, st.wp, st.sp, st.support) if self.keep_previous else (st.w, st.s)
        return tuple(v.copy() for v in vectors), st.state.copy()

    def restore(self, snap) -> None:
        vectors, state = snap
        st = self.start
        # (Without keep_previous only w and s were saved: zip stops there.)
        for target, saved in zip((st.w, st.s, st.wp, st.sp, st.support), vectors,
                                 strict=False):
            target[:] = saved
        st.state[:] = state
        self._in_support = None

    def refresh(self) -> None:
        """Renormalize ``w`` and recompute ``s`` from the rows of its atoms (bounds float
        drift); PARTAN's scalars are kept."""
        st = self.start
        st.w /= st.w.sum()
        buf = self._bufs[0]
        _gradient_from_rows(self.src, st.w, st.s, buf)
        self.reselect()

    def point(self):
        """The weights: the problem's coordinates are the atoms' (a storage over a set's
        atoms maps them, :class:`~torchfw.optimizers._dense.DenseStorage`)."""
        return self.weights()

    def weights(self):
        return torch.from_numpy(self.start.w)

    def n_active(self) -> int:
        return int(np.count_nonzero(self.start.w > 0.0))

    # -- the compiled loop ---------------------------------------------------------------------

    def _add_counts(self, counts) -> None:
        for name, count in zip(L.COUNTERS, counts.tolist(), strict=True):
            if count:
                self._counts[name] = self._counts.get(name, 0) + count

    def run_block(self, variant: int, n: int) -> None:
        """``n`` iterations of ``variant`` (a code of :mod:`~torchfw.optimizers._compiled_loop`)
        in one call of the compiled loop.

        The caller's run loop decides at its checks, so the call never converges on its own
        (``tol = rtol =`` :data:`~torchfw.optimizers._compiled_loop.NEVER`) and takes no
        corrective step: it runs exactly ``n`` iterations from the storage's selection.
        """
        # The loop's arrays, made once per storage: a block of a few hundred atoms runs in a
        # hundred microseconds, where allocating them per call showed.
        args = self.__dict__.get("_block_arrays")
        if args is None:
            args = self._block_arrays = (
                np.zeros(len(L.COUNTERS), dtype=np.int64), np.empty((2, 3)),
                np.empty((2, len(L.COUNTERS)), dtype=np.int64))
        counts, hist, hist_counts = args
        counts.fill(0)
        st = self.start
        # The first ten entries: the scalars alone, no corrective window to carry.
        L.run_loop(variant, self.src, self._bufs, self.diag, self._ct_arg, self.ct is not None,
                   float(self.constant), st.w, st.s, st.wp, st.sp, st.support, st.state[:10],
                   n, L.NEVER, L.NEVER, n, ZERO_TOL, counts, hist, hist_counts, False, n)
        self.k += n
        self._add_counts(counts)

    def solve(self, variant: int, rule: StoppingRule, *, check_every: int, stop=None,
              correct: bool = True):
        r"""The whole solve of ``variant`` under ``rule``, in the compiled loop.

        From the current state to :math:`g \le \max(\text{tol}, \text{rtol}\,|f|)` or
        ``rule.max_iter`` more iterations, checked every ``check_every`` iterations, with the
        active-set corrective step where plain steps stall (``correct``), in chunks of about
        :data:`CHUNK_SECONDS` (the first of at most :func:`first_chunk` iterations): ``stop``
        (a :class:`threading.Event`) is read between chunks, and once set the solve raises
        :class:`~torchfw.optimizers._compiled_loop.SolveCancelled`. The iterates, checks and
        stopping iteration are those of one call, bit for bit.

        Returns a :class:`LoopRun` ``(n_iter, status_code, history array (n, 3), counts per
        check (n, 8))`` (status codes and counters of :mod:`~torchfw.optimizers._compiled_loop`),
        its arrays the checks alone (the buffers sized for the budget are let go).

        Raises
        ------
        ValueError
            For a rule with a time limit or a callback, which the compiled loop cannot ask.
        """
        if rule.time_limit is not None or rule.callback is not None:
            raise ValueError("the compiled solve stops on tol, rtol and max_iter only: no "
                             "time_limit or callback")
        n_iter, status, hist, hist_counts = L.run_chunked(
            variant, self.src, self._bufs, self.diag, self._ct_arg, self.ct is not None,
            float(self.constant), self.start, max_iter=rule.max_iter, tol=rule.tol,
            rtol=rule.rtol, check_every=check_every, stop=stop, correct=correct,
            chunk_seconds=CHUNK_SECONDS, first_chunk=first_chunk(self.N))
        self.k += n_iter
        if hist_counts.shape[0]:
            self._add_counts(hist_counts[-1])
        # One chunk's checks are views of buffers sized for the budget; several, a new array.
        if hist.base is not None:
            hist, hist_counts = hist.copy(), hist_counts.copy()
        return LoopRun(n_iter, status, hist, hist_counts)
