r"""The Weston-Watkins dual (D2) as a block problem, and the policies that spare its sweeps work.

:class:`WWDualProblem` keeps ``W = W(beta)``, ``beta`` and the block sums consistent and runs an
epoch in the compiled sweep (:func:`torchfw.ww._sweep.ww_epoch`). Two ways to visit less:

- *safe screening* (``shrinking=True``) passes over a block at 0 only while a bound proves that
  its solve would leave it at 0, so the iterates are plain BCD's, bit for bit, and so is the
  model: it can never be less accurate than the run without it;
- *heuristic shrinking* (``shrinking="heuristic"``, the estimator's default) decides from the
  sweep's by-products which slots and blocks the next sweep visits, as LIBLINEAR does,
  un-shrinking to re-check. It does more with less but follows another path, so its model
  differs from plain BCD's within the certified gap.

The duality gap (:meth:`WWDualProblem.value_and_gap`) is always computed over every example
and class, so a run stopped by the gap rule is certified on the full problem in every mode.
:class:`torchfw.WestonWatkinsSVC` builds it; see ``docs/ww_svm.md``.

References
----------
Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021.
C.-J. Lin et al., LIBLINEAR (shrinking with un-shrink and re-check in its dual solvers).
L. El Ghaoui, V. Viallon and T. Rabbani, "Safe Feature Elimination in Sparse Supervised
Learning", 2010 (safe screening: discard a variable only when a bound proves it inactive).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..optimizers.bcd import BlockProblem, BlockQuadratic, CheckSchedule
from ..sets.oracles import Box
from ..utils import bitgen as _bitgen
from . import _blocks as _k
from . import _policy as _pol
from ._csr import row_sqnorms
from ._sweep import _visit_set, ww_objectives, ww_objectives_screened
from .subproblem import iterative_ww_subproblem, walrus

__all__ = ["WWDualProblem", "SNAPSHOT_EVERY", "SCREEN_MIN_ELIGIBLE", "SCREEN_MIN_SCREENED",
           "SCREEN_RETRY", "SHRINK_THRESHOLD", "UNSHRINK_FACTOR", "SKIP_FRACTION",
           "MAX_SHRUNK_SWEEPS", "SLOW_WRONG_FRACTION", "TARGET_MARGIN", "TARGET_RECHECK_FACTOR",
           "CHECK_RECORD_FACTOR"]

#: Safe screening (``WWDualProblem(shrinking=True)``) takes a new snapshot of ``W`` every this
#: many sweeps: each snapshot adds a triangle inequality to the bounds of the blocks screened
#: across it, while the distance to an old snapshot keeps growing.
#: Screened visits over a fit (``python benchmarks/ww_screening.py --repeats 5``): every 1 /
#: 2 / 4 / 8 sweeps, dna 49 / 53 / 51 / 51 %, satimage 25 / 28 / 32 / 31 % (0.164 / 0.154 /
#: 0.145 / 0.145 s).
SNAPSHOT_EVERY = 4
#: A sweep screens only when at least this share of the blocks could be passed over: after a
#: plain sweep, those it found at 0 with no margin below 1; after a screening one, those
#: recorded so. Below it, keeping ``D`` costs more than it saves (up to 1.65x a plain sweep
#: on sector, whose blocks are nearly all support vectors; letter screens 3-4% of its visits).
SCREEN_MIN_ELIGIBLE = 0.15
#: ... and stops, to try again ``SCREEN_RETRY`` sweeps later (twice as late after each futile
#: try in a row), when a sweep after the first of its phase (which only records) passed over
#: fewer than this share of the blocks: where ``W`` moves too far between visits for any bound
#: to hold (pendigits' raw 0-100 features at C = 1 have 57% of the blocks eligible and none
#: screened), keeping ``D`` only costs (1.25x a plain sweep).
SCREEN_MIN_SCREENED = 0.05
SCREEN_RETRY = 10

#: Heuristic shrinking (``WWDualProblem(shrinking="heuristic")``). A slot at 0 whose
#: gradient ``G = margin - 1`` exceeds this at its visit leaves the sweep's list: its gap term
#: ``beta G + C max(0, -G)`` is 0 and the block solve would keep it at 0 at the current sum.
#: LIBLINEAR-style thresholds (the last epoch's largest violation) kept ~70 of 104 slots per
#: block on sector, and gathering that many classes made the sweeps 1.3-1.4x slower.
SHRINK_THRESHOLD = 0.0
#: A full re-check sweep follows once the shrunk sweeps' predicted gap fell by this factor
#: since the last full one (measured on dna, satimage, letter, sector; a fixed period of 10
#: epochs slowed letter, which needs only 17, by 1.2x).
UNSHRINK_FACTOR = 10.0
#: Blocks whose gap shares add up to at most this fraction of the total skip one epoch.
SKIP_FRACTION = 0.05
#: At most this many shrunk sweeps between two full ones. A shrunk phase that runs this long
#: without its predicted gap falling tenfold is *slow*, and every later sweep is full (plain
#: BCD): on unscaled data (raw digits, features in 0-100) progress needs every support
#: vector's block to move a little every epoch. Skipping the small shares cost ~20% more
#: epochs (digits: 1170 instead of 977 to the rule, with a cap of 50 here); slots that turned
#: violating while left out inflated the exact gaps measured between re-checks (pendigits:
#: 5,300-6,400 against ~2,700 without shrinking) and, even with a re-check every 5 sweeps,
#: left the model stopped by max_iter ~2-3 points less accurate (pendigits, 2 seeds).
MAX_SHRUNK_SWEEPS = 25
#: ... but only when the full sweep that ends such a phase finds shrinking *wrong*: more than
#: this fraction of the support slots (``beta_is > 0`` after it) were out of the lists and
#: moved in it (slots at 0 that turned violating while left out). Reaching the cap alone does
#: not tell a badly conditioned problem from one that is merely converging: at the cap, the
#: re-check found 8.6% wrongly shrunk on raw digits, 8.5-15% on generated 0-100 data and 27% on
#: pendigits, but at most 2.4% on dna and 1.3% on satimage (every capped phase, seed 0), where
#: shrinking keeps paying (plain sweeps there cost 2-4x a shrunk one and made the fit 1.7-2.6x
#: slower).
SLOW_WRONG_FRACTION = 0.05
#: A full sweep also follows once the shrunk sweeps predict a gap at most this factor times
#: the stopping rule's target (LIBLINEAR's rule: when the shrunk problem looks converged,
#: restore every variable and re-check), so that a run about to stop is checked on a sweep
#: that saw every slot.
TARGET_MARGIN = 1.5
#: The gap checks pass over rows provably hinge-free (:meth:`WWDualProblem.objectives`) from
#: the first check that follows one whose gap was within this factor of the stopping rule's
#: target. On dna at the defaults the checks before (epochs 1 and ~19) are many epochs apart:
#: the weights move too far for any row to be proved; the last ones, an epoch or two apart,
#: pass over 55-70% of the rows, at ~0.5x a plain check's cost.
CHECK_RECORD_FACTOR = 5.0
#: After a full sweep brought by the target, the next one it brings waits until the shrunk
#: prediction has also fallen by this factor since (LIBLINEAR halves its shrunk tolerance at
#: each un-shrink). Re-checking every other sweep once near the target made a quarter of
#: dna's sweeps full (20 of its last 40) at 2-4x a shrunk sweep's cost.
TARGET_RECHECK_FACTOR = 2.0


class WWDualProblem(BlockProblem):
    r"""The Weston-Watkins dual (D2) over CSR data, for :class:`BlockCoordinateDescent`.

    Keeps ``W = W(beta)`` (``(d, k)``, feature-major), ``beta`` (``(n, k-1)``) and the block sums
    ``1^T beta_i`` consistent after every inner iteration (Wang & Scott 2021, Algorithm 1). The
    epoch runs in the compiled kernel :func:`torchfw.ww._sweep.ww_epoch`; the per-block methods
    (:meth:`block`, :meth:`solve_block`, :meth:`set_block`) are the same algorithm in Python, for
    the generic BCD loop and for tests.

    Parameters
    ----------
    X : torchfw.ww._csr.CSR
        Rows with ``||x_i|| > 0`` (zero rows contribute only constants; the estimator drops them).
    y : ndarray of int64
        Class indices in ``[0, k)``.
    k : int
    C : float
    exact_method : {"walrus", "iterative"}
        The "exact" block solver: Walrus, or the Shark-style iterative baseline.
    eps : float
        Stopping threshold of the iterative solver.
    shrinking : {False, True, "heuristic"}, default False
        ``True``: safe screening in the compiled sweep (same iterates as ``False``, fewer
        score computations; see :func:`torchfw.ww._sweep.ww_epoch`). ``"heuristic"``: shrink
        slots and skip blocks as :meth:`sweep` describes. Off here, so that a
        problem driven directly (the Walrus-vs-iterative benchmark, the tests comparing
        sweeps) runs the paper's Algorithm 1 as written; the estimator shrinks by default.
        The Python per-block methods do neither.
    sqnorm : ndarray, optional
        ``||x_i||^2`` of the rows, when the caller has them already (the estimator computes
        them to drop zero rows); computed from ``X`` otherwise.
    """

    def __init__(self, X, y: np.ndarray, k: int, C: float, exact_method: str = "walrus",
                 eps: float = 1e-6, shrinking: bool | str = False,
                 sqnorm: np.ndarray | None = None):
        self.X = X
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.k = int(k)
        self.C = float(C)
        self.exact_method = exact_method
        self.eps = float(eps)
        n, d = X.shape
        if sqnorm is None:
            sqnorm = row_sqnorms(X)
        elif sqnorm.shape != (n,):
            raise ValueError(f"sqnorm must have shape ({n},), got {sqnorm.shape}")
        self.sqnorm = np.ascontiguousarray(sqnorm, dtype=np.float64)
        self.W = _k.aligned_zeros((d, self.k))
        self.beta = np.zeros((n, self.k - 1))
        self.bsum = np.zeros(n)
        self.ws = _k.Workspace(self.k)
        # [hinge-sum estimate of the last sweep, ||W||^2, max and min projected gradient,
        #  visits screened, visits that found b = 0 optimal in place]
        self.est = np.zeros(6)
        if shrinking not in (False, True, "heuristic"):
            raise ValueError(f"shrinking must be True, False or 'heuristic'; got {shrinking!r}")
        # True: safe screening, plain BCD's iterates (see ww_epoch); "heuristic": the
        # LIBLINEAR-style policy below
        self.screening = shrinking != "heuristic" and bool(shrinking)
        self.shrinking = shrinking == "heuristic"
        # the screening state of ww_epoch (1-element stand-ins when not screening)
        sd, sn, sk = (d, n, self.k) if self.screening else (1, 1, 1)
        self._D = _k.aligned_zeros((sd, sk))
        self._dn2 = np.zeros((2, sk))
        self._off = np.zeros(sk)
        self._bnd = np.zeros(sk)
        self._rb = np.zeros((sn, sk))
        self._gmin = np.zeros(sn)
        self.active = np.empty((n, self.k - 1), dtype=np.int64)
        self.n_act = np.empty(n, dtype=np.int64)
        self.skip = np.zeros(n, dtype=np.int64)
        self.gblk = np.zeros(n)
        self.unshrink()
        # the policy's state (torchfw.ww._policy): integers and flags, floats; read through
        # the properties below
        self._pi = np.zeros(_pol.N_INT, dtype=np.int64)
        self._pf = np.zeros(_pol.N_FLOAT)
        self._pi[_pol.I_RETRY_WAIT] = SCREEN_RETRY
        self._pi[_pol.I_SHRINKING] = int(self.shrinking)
        self._pi[_pol.I_SCREENING] = int(self.screening)
        self._pf[_pol.F_GAMMA_REF] = math.inf
        self._visited = np.zeros(n, dtype=np.bool_)  # blocks not skipped by the last sweep
        self._order = np.empty(n, dtype=np.int64)  # the compiled epochs' visiting orders
        # the compiled sweep's arguments, gathered once: the arrays are updated in place,
        # never replaced, so only the order and the per-sweep switches change between calls
        ws = self.ws
        self._args_data = (X.indptr, X.indices, X.data, self.sqnorm, self.y)
        self._args_state = (self.W, self.beta, self.bsum, self.C)
        self._args_lists = (self.active, self.n_act, self.skip, self.gblk)
        self._args_work = (ws.scores, ws.v, ws.bnew, ws.heap, ws.hidx, ws.sv, ws.si, ws.prefix,
                           ws.grad, ws.changed, ws.u, ws.cls, ws.sc, self.est)
        self._args_policy = (self._visited, self._pi, self._pf, self._consts())
        self._rng: tuple | None = None  # (generator, its bitgen.handle) of the last run
        self._args_screen = self.screen_arrays()
        # the gap check passes over rows provably hinge-free (ww_objectives_screened) where
        # its bounds cost little: computing ||W_c - S_c|| and the snapshot S reads d k
        # weights, the check itself k weights per nonzero
        self._ck_on = d * self.k <= X.indices.shape[0]
        cn, cd, ck = (n, d, self.k) if self._ck_on else (1, 1, 1)
        self._ck_S = np.zeros((cd, ck))
        self._ck_slack = np.zeros(cn)
        self._ck_passed = np.zeros(cn, dtype=np.bool_)
        self._ck = np.zeros(2)  # [a snapshot exists, 2 max_c ||S_c||]
        self._last_gap = math.inf

    # the policy's scalars, held in the arrays the compiled code updates
    epochs = property(lambda self: int(self._pi[_pol.I_EPOCHS]),
                      doc="Sweeps run so far.")
    screened = property(lambda self: int(self._pi[_pol.I_SCREENED]),
                        doc="Visits passed over by the safe screening, in all.")
    eligible = property(lambda self: float(self._pf[_pol.F_ELIGIBLE]),
                        doc="Share of the blocks the next sweep could screen.")
    _full_next = property(lambda self: bool(self._pi[_pol.I_FULL_NEXT]))
    _last_full = property(lambda self: int(self._pi[_pol.I_LAST_FULL]))
    _slow = property(lambda self: bool(self._pi[_pol.I_SLOW]))
    _capped = property(lambda self: bool(self._pi[_pol.I_CAPPED]))
    _by_target = property(lambda self: bool(self._pi[_pol.I_BY_TARGET]))
    _phase = property(lambda self: int(self._pi[_pol.I_PHASE]))
    _retry_at = property(lambda self: int(self._pi[_pol.I_RETRY_AT]))
    _retry_wait = property(lambda self: int(self._pi[_pol.I_RETRY_WAIT]))
    _gamma_ref = property(lambda self: float(self._pf[_pol.F_GAMMA_REF]))
    _target = property(lambda self: float(self._pf[_pol.F_TARGET]))

    @property
    def n_blocks(self) -> int:
        return self.X.shape[0]

    def _method_code(self, block_solver: str) -> int:
        if block_solver == "fw":
            return _k.METHOD_FW
        return _k.METHOD_WALRUS if self.exact_method == "walrus" else _k.METHOD_ITERATIVE

    def set_gap_target(self, target: float) -> None:
        """The gap the stopping rule aims at (BCD calls this after epoch 1's exact gap).

        With shrinking, a shrunk sweep predicting a gap within ``TARGET_MARGIN`` of it makes
        the next sweep a full one. The target depends only on epoch 1, so the iterates still
        do not depend on when the gap is checked.
        """
        self._pf[_pol.F_TARGET] = float(target)

    def unshrink(self) -> None:
        """Put every slot of every block back in the sweep's lists, and skip no block."""
        self.active[:] = np.arange(self.k - 1)
        self.n_act[:] = self.k - 1
        self.skip[:] = 0

    def visit_set(self) -> np.ndarray | None:
        """With heuristic shrinking, between full sweeps: the blocks the next sweep computes.

        The others (skipped this epoch, or with every slot shrunk at 0: three quarters of
        dna's blocks late in a fit) are passed over here as the sweep would pass over them
        (:func:`torchfw.ww._sweep.visit_set`), so BCD shuffles only the blocks worked on, as
        LIBLINEAR shuffles its active examples: on dna a quarter of the permutation's cost,
        which was about a tenth of a shrunk sweep, and the sweep no longer steps over the
        rest. ``None`` (every block, in a full permutation) for full sweeps and the other
        modes.
        """
        if not self.shrinking or self.epochs == 0 or self._full_next:
            return None
        out = np.empty(self.n_blocks, dtype=np.int64)
        m = _visit_set(self.sqnorm, self.skip, self.n_act, self.bsum, self.gblk, self._visited,
                       out)
        self._pi[_pol.I_PENDING] = 1
        return out[:m]

    @staticmethod
    def _consts() -> np.ndarray:
        """The policy's constants as the compiled code reads them (``torchfw.ww._policy.K_*``),
        from this module's globals (read once per problem, at its construction)."""
        return np.array([SHRINK_THRESHOLD, UNSHRINK_FACTOR, SKIP_FRACTION, MAX_SHRUNK_SWEEPS,
                         SLOW_WRONG_FRACTION, TARGET_MARGIN, TARGET_RECHECK_FACTOR,
                         SNAPSHOT_EVERY, SCREEN_MIN_ELIGIBLE, SCREEN_MIN_SCREENED, SCREEN_RETRY],
                        dtype=np.float64)

    def sweep(self, order: np.ndarray, block_solver: str, fw_steps: int) -> int:
        r"""One epoch over ``order`` with the shrinking or screening policy around it
        (:func:`torchfw.ww._policy.ww_sweep`, compiled).

        Heuristic shrinking decides the next sweep from this one's per-block gap shares
        ``gblk``. ``Gamma = sum_i gblk[i]`` predicts the gap of the problem the sweeps
        currently solve (shrunk slots count 0, skipped blocks their share at their last
        visit). A full sweep (every slot listed, every block visited, each slot's shrinking
        re-decided from its current gradient) records ``Gamma_ref``. The next sweep is full
        again (un-shrink and re-check, as LIBLINEAR does when its shrunk problem looks
        converged) once a shrunk sweep predicts ``Gamma <= Gamma_ref / UNSHRINK_FACTOR``, or
        ``Gamma <= TARGET_MARGIN * target`` (the run may be about to stop: the exact check
        should follow a sweep that saw every slot; once such a re-check has run, the next also
        needs ``Gamma <= Gamma_ref / TARGET_RECHECK_FACTOR``), or after ``MAX_SHRUNK_SWEEPS``
        shrunk sweeps. Progress, not a fixed period, sets the pace: a wrongly shrunk slot makes
        ``Gamma`` optimistic, which brings the re-check sooner.

        Between full sweeps, the visited blocks with the smallest shares, adding up to at most
        ``SKIP_FRACTION`` of this sweep's total, skip the next epoch (never two in a row: a
        skipped block is visited the epoch after). A problem is slow once a shrunk phase
        needed the cap *and* the full sweep after it moved more than ``SLOW_WRONG_FRACTION``
        of the support slots that had been left out: there every block's small moves add up,
        and from then on every sweep is full (see ``MAX_SHRUNK_SWEEPS``), so shrinking cannot
        leave the model behind plain BCD's.

        Safe screening decides whether the next sweep screens (``SCREEN_MIN_ELIGIBLE``,
        ``SCREEN_MIN_SCREENED``, ``SCREEN_RETRY``); screened or not, a sweep's iterates are
        plain BCD's.
        """
        return int(_pol.ww_sweep(np.ascontiguousarray(order, dtype=np.int64),
                                 *self._args_data, *self._args_state,
                                 self._method_code(block_solver), int(fw_steps), self.eps,
                                 *self._args_lists, *self._args_work, *self._args_screen,
                                 *self._args_policy))

    def run_epochs(self, rng: np.random.Generator, first: int, last: int,
                   block_solver: str, fw_steps: int,
                   schedule: CheckSchedule) -> tuple[int, int, bool] | None:
        """Epochs ``first..last`` in one compiled call (:func:`torchfw.ww._policy.ww_run`),
        drawing their orders from ``rng`` as BCD does, until ``schedule`` says a gap check is
        due; ``None`` without numba or when ``rng`` cannot be read from compiled code.
        """
        if self._rng is None or self._rng[0] is not rng:  # once per BCD run
            self._rng = (rng, _bitgen.handle(rng))  # holding rng keeps its addresses valid
        h = self._rng[1]
        if h is None:
            return None
        out = np.zeros(3, dtype=np.int64)
        _pol.ww_run(*h, int(first), int(last), int(schedule.max_iter),
                    bool(schedule.use_estimate), float(schedule.calib), float(schedule.limit),
                    int(schedule.last_check), int(schedule.next_check), self._order,
                    *self._args_data, *self._args_state, self._method_code(block_solver),
                    int(fw_steps), self.eps, *self._args_lists, *self._args_work,
                    *self._args_screen, *self._args_policy, out)
        return int(out[0]), int(out[1]), bool(out[2])

    def screen_arrays(self) -> tuple:
        """The screening state that :func:`~torchfw.ww._sweep.ww_epoch` takes after its
        ``screen`` flag: ``(D, dn2, off, bnd, rb, gmin)``."""
        return (self._D, self._dn2, self._off, self._bnd, self._rb, self._gmin)

    def objectives(self) -> tuple[float, float]:
        """Primal ``P(W)`` and dual ``D(beta) = -g(beta)``, over every example and class.

        Rows whose hinge terms are provably 0 since the last snapshot are passed over
        (:func:`torchfw.ww._sweep.ww_objectives_screened`): the same numbers as computing
        them all (:func:`~torchfw.ww._sweep.ww_objectives`), bit for bit.
        """
        # the first screened check computes every row and records their margins, at ~1.2x a
        # plain check's cost: worth it only once the checks come a few epochs apart, near the
        # target (letter's checks, W moving far between them, would each pay it for nothing)
        if self._ck_on and (self._ck[0] != 0.0
                            or self._last_gap <= CHECK_RECORD_FACTOR * self._target):
            P, D, wn = ww_objectives_screened(
                self.X.indptr, self.X.indices, self.X.data, self.y, self.W, self.bsum, self.C,
                self.ws.scores, self.sqnorm, self._ck_S, self._ck_slack, self._ck_passed,
                self._ck)
        else:
            P, D, wn = ww_objectives(self.X.indptr, self.X.indices, self.X.data, self.y, self.W,
                                     self.bsum, self.C, self.ws.scores)
        self.est[1] = wn  # resynchronize the running ||W||^2 of the sweep
        self._last_gap = float(P - D)
        return float(P), float(D)

    def gap_estimate(self) -> float:
        """Free predictor of the gap after a compiled sweep (not a certificate).

        Without shrinking: the primal at the scores each example had on its visit, minus the
        exact dual: ``||W||^2 + C * hinge_estimate - sum_i 1^T beta_i``. With shrinking: the
        sum of the blocks' gap shares at their last visit (``gblk``), which keeps the skipped
        blocks' terms.
        """
        if self.shrinking:
            return float(self.gblk.sum())
        return float(self.est[1] + self.C * self.est[0] - self.bsum.sum())

    def value_and_gap(self) -> tuple[float, float]:
        P, D = self.objectives()
        return -D, P - D

    def point(self) -> Tensor:
        return torch.from_numpy(self.beta)

    # -- the same inner iteration, one block at a time, in Python ------------------------------

    def _slots(self, i: int) -> np.ndarray:
        yi = self.y[i]
        s = np.arange(self.k - 1)
        return np.where(s < yi, s, s + 1)

    def _v(self, i: int) -> np.ndarray:
        lo, hi = self.X.indptr[i], self.X.indptr[i + 1]
        scores = self.X.data[lo:hi] @ self.W[self.X.indices[lo:hi]]
        q = self.sqnorm[i]
        margin = scores[self.y[i]] - scores[self._slots(i)]
        return (1.0 - margin) / q + self.beta[i] + self.bsum[i]

    def block(self, i: int) -> BlockQuadratic:
        q = float(self.sqnorm[i])
        b = torch.from_numpy(self.beta[i].copy())
        v = torch.from_numpy(self._v(i))
        grad = q * (b + b.sum() - v)  # gradient of g in block i: q (Theta beta_i - v)
        return BlockQuadratic(x=b, grad=grad, hess=lambda d: q * (d + d.sum()),
                              lmo=Box(0.0, self.C))

    def solve_block(self, i: int) -> Tensor:
        v = self._v(i)
        if self.exact_method == "walrus":
            return walrus(v, self.C)
        return iterative_ww_subproblem(v, self.C, self.beta[i], q=float(self.sqnorm[i]),
                                       eps=self.eps)

    def set_block(self, i: int, value) -> None:
        self.est[:] = np.nan  # the Python path keeps no estimate
        new = torch.as_tensor(value, dtype=torch.float64).detach().cpu().numpy()
        delta = new - self.beta[i]
        if not delta.any():
            return
        u = np.zeros(self.k)
        u[self._slots(i)] = -delta
        u[self.y[i]] = new.sum() - self.bsum[i]
        lo, hi = self.X.indptr[i], self.X.indptr[i + 1]
        self.W[self.X.indices[lo:hi]] += np.outer(self.X.data[lo:hi], u)
        self.beta[i] = new
        self.bsum[i] = new.sum()
