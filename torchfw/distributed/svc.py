"""The data-parallel kernel SVM estimator (:class:`DistributedSVC`).

One concern: :class:`~torchfw.svm.SVC`'s model trained on sharded examples: global statistics
(``gamma="scale"``, balanced class weights), the shared initial point, one sharded run per
binary problem and the gathering of the support vectors into a model every rank holds.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..optimizers.active_set import simplex_qp
from ..result import Status
from ..solvers import solver_names
from ..svm._plan import FitPlan, feature_dtype, resolve_plan
from ..svm._start import draw_positions
from ..svm.estimator import SVC
from ..svm.kernels import KERNELS, SVMDualOperator, make_kernel
from ..utils.data import as_labels, take_rows, to_csr
from ..utils.estimator import fit_atomically
from ..utils.validation import resolve_device
from .comm import Communicator
from .engine import EXCHANGES
from .operator import ShardedSVMDualOperator
from .run import minimize

#: Solvers of :class:`~torchfw.svm.SVC` that run distributed (the streaming ones keep a
#: working set in arrival order, which has no sharded form here); from :mod:`torchfw.solvers`.
DISTRIBUTED_SOLVERS = solver_names("distributed")


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
        As in :class:`~torchfw.svm.SVC`, resolved into the same plan
        (:func:`torchfw.svm._plan.resolve_plan`) for the global ``m``: ``max_iter`` defaults
        to ``100 * m`` (``-1``: no limit), ``tol="auto"`` is 0.1 below 1,000 examples over all
        ranks and 0.3 above; ``gamma="scale"`` uses global statistics.
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
    # One problem per class, solved over the ranks together (one-vs-one is not distributed).
    multi_class, decision_function_shape, break_ties = "ovr", "ovr", False

    def __init__(self, kernel="rbf", C=2.0, gamma="scale", degree=3, coef0=0.0, solver="swap",
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
        if not isinstance(self.kernel, str) or self.kernel not in KERNELS:
            # SVC accepts "precomputed" and callables (a whole m x m Gram matrix on one
            # process); the sharded operator computes kernel columns from every rank's
            # features, which only the built-in kernels do
            name = ("a callable kernel" if callable(self.kernel)
                    else f"kernel={self.kernel!r}")
            raise ValueError(f"DistributedSVC needs a built-in kernel, one of "
                             f"{sorted(KERNELS)}; got {name}. Precomputed and callable "
                             f"kernels train only in SVC on one process.")
        if self.solver not in DISTRIBUTED_SOLVERS:
            raise ValueError(f"solver {self.solver!r} has no distributed form; use one of "
                             f"{DISTRIBUTED_SOLVERS}")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {self.exchange!r}")

    def fit(self, X, y):
        """Fit on this rank's shard ``(X, y)`` (a collective over the process group).

        As :meth:`SVC.fit`, a fit that does not finish leaves the estimator as it was.
        """
        return fit_atomically(self, type(self)._fit_shards, X, y)

    def _fit_shards(self, X, y):
        self._check_params()
        comm = Communicator(self.group)
        device = resolve_device(self.device)
        kdtype = feature_dtype(self.dtype)
        self._begin_fit(X)  # the namespace of the attributes, the seed (every rank's the same)
        X = self._validate_X(X, reset=True, device=device, dtype=kdtype)  # SVC's checks
        y = as_labels(y, X.shape[0], estimator=type(self).__name__)
        labels = comm.all_gather_object(np.unique(y))
        classes = np.unique(np.concatenate(labels))
        if len(classes) < 2:
            raise ValueError(f"y has a single class ({classes[0]!r}) over all ranks; SVC needs "
                             f"at least two")
        y_encoded = np.searchsorted(classes, y)
        previous = getattr(self, "_alphas", None) if self.warm_start else None
        self.classes_ = classes
        self.multi_class_ = "ovr"
        self.n_features_in_ = X.shape[1]
        self.shape_fit_ = tuple(int(n) for n in X.shape)  # this rank's shard
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
        # tol="auto" reads the number of examples over all ranks (one more exchange, only then).
        n_examples = X.shape[0] if not isinstance(self.tol, str) else \
            int(comm.sum([X.shape[0]], op="setup")[0])
        # The plan of the fit, as SVC resolves it, stopping and seeding every rank alike; the
        # sharded runs read it, not the estimator. The corrective step is on, as in SVC: the
        # sharded storage takes it on every rank alike.
        plan = resolve_plan(self, n_examples=n_examples, kernel=self._kernel, dtype=kdtype,
                            device=X.device, solvers="distributed")
        alphas, results = [], []
        for k, y_pm in enumerate(problems):
            alpha, result = fit_shard(plan, X, y_pm, C_examples, comm,
                                      None if previous is None else previous[k], k,
                                      self.exchange)
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
        # A Python float: the sums come back as NumPy scalars, which a weights-only
        # torch.load (SVC.load) refuses in a saved model.
        return float(1.0 / (d * var)) if var > 0 else 1.0

    def _global_C(self, y_encoded: np.ndarray, n_classes: int, comm: Communicator):
        if self.class_weight != "balanced":
            return self._example_C(y_encoded, n_classes)
        counts = comm.sum(np.bincount(y_encoded, minlength=n_classes).astype(np.float64),
                          op="setup")
        weights = counts.sum() / (n_classes * counts)
        return torch.from_numpy(self.C * weights[y_encoded])

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
        dense = torch.zeros(0, d, dtype=torch.float64)  # no support vector on this rank
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
            X_sv = to_csr(X_sv)
        problems_sv = [everything[:, 1 + k].copy() for k in range(n_prob)]
        alphas_sv = [torch.from_numpy(everything[:, 1 + n_prob + k].copy()).to(X.device)
                     for k in range(n_prob)]
        self._X_train = X_sv
        self._set_model(X_sv, problems_sv, alphas_sv, results)
        # _set_model indexes the gathered rows (class by class): their global indices
        self.support_ = everything[self.support_, 0].astype(np.int32)

    def state_dict(self) -> dict:
        """As :meth:`SVC.state_dict`, loadable by a plain :class:`SVC` (no process group)."""
        state = super().state_dict()
        keep = set(SVC._get_param_names())
        state["params"] = {k: v for k, v in state["params"].items() if k in keep}
        return state


def fit_shard(plan: FitPlan, X: Tensor, y_pm: np.ndarray, C_examples, comm: Communicator,
              alpha0, k: int, exchange: str):
    """One binary problem ``k`` of the fit ``plan``, sharded over the ranks of ``comm``;
    ``(this rank's slice of the dual, Result)``.

    ``X``, ``y_pm`` (labels in {-1, +1}) and ``C_examples`` are this rank's rows; ``alpha0``
    is a warm start (this rank's slice) or None: :func:`initial_shard`.
    """
    y_t = torch.from_numpy(y_pm).to(X.device)
    C_local = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    op = ShardedSVMDualOperator(X, y_t, plan.kernel, C_local, comm=comm, dtype=plan.dtype)
    m = op.shape[0]
    seed = plan.problem_seed(k)
    w0 = alpha0 if alpha0 is not None else initial_shard(plan, op, y_pm, C_examples, seed)
    solver = plan.optimizer(max_iter=plan.budget(m), random_state=seed, verbose=plan.verbose,
                            time_limit=plan.time_limit)
    result = minimize(solver, op, w0, exchange=exchange, cache_size=plan.cache_size)
    if result.status in (Status.MAX_ITER, Status.TIME_LIMIT):
        plan.warn_unconverged(result.status, result.n_iter, result.gap, result.value,
                              stacklevel=3)
    return result.x, result


def initial_shard(plan: FitPlan, op: ShardedSVMDualOperator, y_pm: np.ndarray, C_examples,
                  seed: int) -> Tensor:
    """This rank's slice of SVC's initial point: the same random subset, solved exactly.

    Reproduces :func:`torchfw.svm._start.initial_alpha` on the global data: the subset of
    ``plan.n_init`` examples is drawn as positions among all positives and all negatives (ranks
    in order), the owners send the drawn examples, and every rank solves the same small
    problem.
    """
    comm = op.comm
    pos, neg = np.flatnonzero(y_pm > 0), np.flatnonzero(y_pm < 0)
    counts = comm.all_gather(np.array([pos.size, neg.size], dtype=np.int64), op="setup")
    n_pos_all, n_neg_all = int(counts[:, 0].sum()), int(counts[:, 1].sum())
    # Positions among all ranks' positives and negatives, drawn as SVC draws them.
    picks = draw_positions(n_pos_all, n_neg_all, plan.n_init, seed)
    mine: list[int] = []
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
                               plan.kernel, C_sub, dtype=op.dtype)
    # The block as initial_alpha reads it (host columns on the CPU): the same start.
    w, _ = simplex_qp(small_op.start_block(np.arange(subset.shape[0])))
    w0 = torch.zeros(op.n_local, dtype=torch.float64)
    for q, k in enumerate(subset[:, 0].astype(np.int64)):
        if op.owns(int(k)):
            w0[int(k) - op.offset] = float(w[q])
    return w0.to(op.device)


def fit_svc(X, y, **params) -> DistributedSVC:
    """``DistributedSVC(**params).fit(X, y)`` on this rank's shard (a collective)."""
    return DistributedSVC(**params).fit(X, y)
