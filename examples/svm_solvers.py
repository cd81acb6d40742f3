"""Duality gap against time and iterations for every Frank-Wolfe solver of ``torchfw.SVC``.

Data: LIBSVM's ``svmguide1`` (3,089 training / 4,000 test examples, 4 features, scaled to
[0, 1] with training statistics) when ``svmguide1.xz`` and ``svmguide1.t.xz`` are in the data
folder (``--data``, else ``$TORCHFW_DATA``, else ``../shared/data``); otherwise a generated
problem (``sklearn.datasets.make_classification``, 3,000 training / 2,000 test examples, 20
features, 5% flipped labels). ``--dataset`` picks one explicitly.

Every solver fits the same RBF SVM (``C``, ``gamma="scale"``) from the same initial subset with
a tight tolerance (``--tol``, default 1e-3, against the usual 0.3), within an iteration and a
time budget per solver. The gap plotted is the relative duality gap ``g / rho`` the stopping
rule bounds (``SVC`` stops when it falls to ``tol``), read from ``result_.history`` (one record
every 10 iterations, with the seconds since the solver started). The Frank-Wolfe gap is not
monotone; the curves show the smallest value seen so far (a run stops the first time its gap
falls to ``tol``).

The streaming solvers ``sfw`` and ``msfw`` (dashed) see one new example per iteration and report
the gap of their working-set problem, which is not the gap of the full problem; they ignore
``tol`` and run their budget. The table's "model gap" column is computed for every solver from
the fitted model alone (``decision_function`` on the training set and ``dual_coef_``): it is the
full problem's relative gap ``1 - min_i (y_i f(x_i) + alpha_i / (rho C))``.

Usage::

    python examples/svm_solvers.py                      # plot in examples/output/
    python examples/svm_solvers.py --time-limit 10 --out /tmp/solvers.png
    python examples/svm_solvers.py --quick              # small subset, short budgets (tests)
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import torchfw
from torchfw.datasets import load_svmlight_files
from torchfw.exceptions import ConvergenceWarning

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "examples" / "output" / "svm_solvers.png"
SOLVERS = ("fw", "away", "pairwise", "swap", "swap2", "partan", "sfw", "msfw")
STREAMING = ("sfw", "msfw")


def load_svmguide1(folder: Path):
    X_tr, y_tr, X_te, y_te = load_svmlight_files([folder / "svmguide1.xz",
                                                  folder / "svmguide1.t.xz"])
    X_tr, X_te = X_tr.to_dense().double().numpy(), X_te.to_dense().double().numpy()
    low, high = X_tr.min(0), X_tr.max(0)
    span = np.where(high > low, high - low, 1.0)
    return ((X_tr - low) / span, y_tr.numpy(), (X_te - low) / span, y_te.numpy(),
            "svmguide1 (scaled to [0, 1])")


def make_generated(seed: int):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=5000, n_features=20, n_informative=8, n_redundant=4,
                               flip_y=0.05, class_sep=1.0, random_state=seed)
    X_tr, X_te, y_tr, y_te = X[:3000], X[3000:], y[:3000], y[3000:]
    mean, std = X_tr.mean(0), X_tr.std(0)
    return ((X_tr - mean) / std, y_tr, (X_te - mean) / std, y_te,
            "make_classification (20 features, 5% label noise, standardized)")


def model_gap(model: torchfw.SVC, X, y) -> float:
    """Relative duality gap of the full problem, from the fitted model's public attributes.

    With the margin-1 decision function ``f`` and ``dual_coef_ = alpha_i y_i / rho``, the gap
    over ``rho`` is ``1 - min_i (y_i f(x_i) + alpha_i / (rho C))`` (see ``torchfw.svm``).
    """
    y_pm = np.where(y == model.classes_[1], 1.0, -1.0)
    slack = np.zeros(len(y))
    slack[model.support_] = np.abs(np.asarray(model.dual_coef_[0], dtype=np.float64)) / model.C
    return float(1.0 - np.min(y_pm * model.decision_function(X) + slack))


def fit(solver: str, X, y, args, max_iter: int, time_limit: float | None):
    model = torchfw.SVC(kernel="rbf", C=args.C, solver=solver, tol=args.tol,
                        max_iter=max_iter, time_limit=time_limit, random_state=args.seed)
    with warnings.catch_warnings():  # budget stops are reported in the table instead
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
    return model, elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=["auto", "svmguide1", "generated"], default="auto")
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("TORCHFW_DATA",
                                                    ROOT.parent / "shared" / "data")))
    parser.add_argument("--C", type=float, default=10.0)
    parser.add_argument("--tol", type=float, default=1e-3,
                        help="relative gap at which a solver stops (SVC's default is 0.3)")
    parser.add_argument("--max-iter", type=int, default=50_000)
    parser.add_argument("--time-limit", type=float, default=4.0,
                        help="seconds per solver")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="600 training examples and short budgets (for the tests)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"where to save the plot (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    have_guide = (args.data / "svmguide1.xz").exists() and (args.data / "svmguide1.t.xz").exists()
    if args.dataset == "svmguide1" and not have_guide:
        parser.error(f"svmguide1.xz / svmguide1.t.xz not found in {args.data}")
    use_guide = args.dataset == "svmguide1" or (args.dataset == "auto" and have_guide)
    X_tr, y_tr, X_te, y_te, description = (load_svmguide1(args.data) if use_guide
                                           else make_generated(args.seed))
    max_iter, time_limit = args.max_iter, args.time_limit
    if args.quick:
        rng = np.random.default_rng(args.seed)
        keep = np.sort(rng.choice(len(X_tr), size=min(600, len(X_tr)), replace=False))
        X_tr, y_tr = X_tr[keep], y_tr[keep]
        X_te, y_te = X_te[:1000], y_te[:1000]
        max_iter, time_limit = min(max_iter, 2000), min(time_limit, 0.3)

    # Warm-up on a small subset: compiled kernels are built (or loaded from the disk cache) here,
    # not inside the timed runs.
    warm = np.random.default_rng(args.seed).choice(len(X_tr), size=min(200, len(X_tr)),
                                                   replace=False)  # the files are sorted by class
    for solver in SOLVERS:
        fit(solver, X_tr[warm], y_tr[warm], args, max_iter=50, time_limit=None)

    runs = {}
    for solver in SOLVERS:
        model, elapsed = fit(solver, X_tr, y_tr, args, max_iter, time_limit)
        result = model.result_
        h = result.history
        rho = 2.0 * np.asarray(h.value)
        runs[solver] = dict(
            iteration=np.asarray(h.iteration), time=np.asarray(h.time),
            gap=np.minimum.accumulate(np.asarray(h.gap) / rho), n_iter=result.n_iter,
            fit_time=elapsed,
            status=str(result.status), solver_gap=result.gap / (2.0 * result.value),
            model_gap=model_gap(model, X_tr, y_tr), test_acc=model.score(X_te, y_te),
            n_sv=len(model.support_))

    print(f"{description}: {len(X_tr)} train / {len(X_te)} test, RBF SVC C={args.C:g}, "
          f"tol={args.tol:g}, budget {max_iter} iterations / {time_limit:g} s per solver")
    header = (f"{'solver':<9} {'iterations':>10} {'time (s)':>8} {'status':<10} "
              f"{'solver gap':>10} {'model gap':>10} {'test acc':>8} {'SVs':>6}")
    print(header)
    print("-" * len(header))
    for solver, r in runs.items():
        mark = "*" if solver in STREAMING else " "
        print(f"{solver:<9} {r['n_iter']:>10d} {r['fit_time']:>8.2f} {r['status']:<10} "
              f"{r['solver_gap']:>9.2e}{mark} {r['model_gap']:>10.2e} {r['test_acc']:>8.4f} "
              f"{r['n_sv']:>6d}")
    print("gaps are relative (g / rho); * working-set gap of a streaming solver")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_iter) = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    for k, (solver, r) in enumerate(runs.items()):
        style = dict(color=f"C{k}", lw=1.4, ls="--" if solver in STREAMING else "-",
                     label=solver + (" (working set)" if solver in STREAMING else ""))
        ax_time.plot(r["time"], r["gap"], **style)
        ax_iter.plot(r["iteration"], r["gap"], **style)
    for ax in (ax_time, ax_iter):
        ax.axhline(args.tol, color="0.5", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
    ax_iter.text(0.01, args.tol, f"tol = {args.tol:g}", color="0.4", ha="left", va="bottom",
                 transform=ax_iter.get_yaxis_transform())
    ax_time.set(xlabel="seconds since the solver started",
                ylabel=r"relative duality gap $g/\rho$ (best so far)",
                title="Gap against time")
    ax_iter.set(xlabel="iteration", xscale="log", title="Gap against iterations")
    ax_iter.legend(ncol=2, fontsize=9)
    fig.suptitle(f"torchfw.SVC solvers: {description}, {len(X_tr)} examples, C={args.C:g}")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"plot saved to {args.out}")
    return runs


if __name__ == "__main__":
    main()
