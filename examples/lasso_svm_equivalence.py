"""The Lasso <-> SVM equivalence (Jaggi 2014), made visible on the leukemia data.

Three panels, saved as a PNG (``examples/output/lasso_svm_equivalence.png`` by default):

1. The constrained Lasso ``min (1/2n)||y - Xw - b||^2  s.t.  ||w||_1 <= t`` solved twice with
   plain Frank-Wolfe: directly over the L1 ball (``method="l1ball"``) and as an SVM dual over
   the 2p signed, shifted atoms ``+-t A_i - b`` (``method="svm"``,
   :func:`torchfw.lasso.equivalence.lasso_to_svm`). The two duality-gap curves lie on top of each
   other: the runs pick the same atoms and take the same steps.
2. The same with pairwise Frank-Wolfe (linear convergence).
3. The regularization path of the penalized Lasso (``torchfw.lasso_path``, warm starts), with
   scikit-learn's path overlaid when it is installed.

Usage::

    python examples/lasso_svm_equivalence.py [--out FILE] [--data DIR] [--quick]

``--quick`` runs 100 iterations per curve and a 10-point path (for the tests).

Data: the Golub et al. leukemia CSV files in ``../shared/data`` (or ``--data`` /
``$TORCHFW_DATA``): 72 patients x 7129 genes, standardized; y = +1 (AML) / -1 (ALL).
"""

from __future__ import annotations

import argparse
import csv
import io
import lzma
import os
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchfw import lasso_path  # noqa: E402
from torchfw.lasso import LassoData  # noqa: E402


def load_leukemia(folder: Path):
    """72 x 7129 standardized expression matrix (patients in id order) and +-1 labels."""
    def matrix(name):
        with lzma.open(folder / name, "rb") as f:
            rows = [r for r in csv.reader(io.TextIOWrapper(f, encoding="utf-8")) if r]
        cols = [j for j, h in enumerate(rows[0]) if h.strip().isdigit()]  # skip "call" columns
        return [int(rows[0][j]) for j in cols], np.array([[float(r[j]) for j in cols]
                                                           for r in rows[1:]])

    ids_a, A = matrix("leukemia_golub_train.csv.xz")
    ids_b, B = matrix("leukemia_golub_independent.csv.xz")
    X = np.concatenate([A, B], axis=1).T[np.argsort(ids_a + ids_b)]
    with lzma.open(folder / "leukemia_golub_labels.csv.xz", "rt") as f:
        labels = {int(r[0]): r[1].strip() for r in list(csv.reader(f))[1:] if r}
    y = np.array([1.0 if labels[i] == "AML" else -1.0 for i in range(1, 73)])
    X = X - X.mean(axis=0)
    std = X.std(axis=0)
    return X / np.where(std > 0, std, 1.0), y


NAMES = {"fw": "Frank-Wolfe", "pairwise": "pairwise Frank-Wolfe"}


def gap_curve(data: LassoData, radius: float, method: str, solver: str, n_iter: int):
    """Duality gap and iterate after every Frank-Wolfe iteration."""
    gaps, iterates = [], []
    p = data.n_features

    def record(info):
        gaps.append(info.gap)
        x = info.x
        iterates.append(x.clone() if method == "l1ball" else radius * (x[:p] - x[p:]))

    data.solve_constrained(radius, None, method=method, solver=solver, tol=1e-300,
                           max_iter=n_iter, check_every=1, callback=record)
    return np.array(gaps), torch.stack(iterates)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "examples" / "output" / "lasso_svm_equivalence.png")
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("TORCHFW_DATA",
                                                    ROOT.parent / "shared" / "data")))
    parser.add_argument("--quick", action="store_true",
                        help="100 iterations per curve and a 10-point path (for the tests)")
    args = parser.parse_args(argv)
    n_iter = 100 if args.quick else 400
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y = load_leukemia(args.data)
    data = LassoData(X, y)  # centred design and target, lazy Gram operator X_c'X_c / n
    radius = 1.0
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for ax, solver in ((axes[0], "fw"), (axes[1], "pairwise")):
        gap_l1, w_l1 = gap_curve(data, radius, "l1ball", solver, n_iter)
        gap_svm, w_svm = gap_curve(data, radius, "svm", solver, n_iter)
        diff = float((w_l1 - w_svm).abs().max())
        print(f"{solver:8s}: {len(gap_l1) - 1} iterations, max |w_l1ball - w_svm| over all "
              f"iterates = {diff:.1e}, final gaps {gap_l1[-1]:.3e} / {gap_svm[-1]:.3e}")
        ax.semilogy(gap_l1, lw=3, alpha=0.5, label='L1 ball (method="l1ball")')
        ax.semilogy(gap_svm, "k--", lw=1, label='SVM over 2p atoms (method="svm")')
        ax.set_title(f"{NAMES[solver]}, radius t = {radius:g}\n"
                     f"max iterate difference {diff:.0e}")
        ax.set_xlabel("iteration")
        ax.set_ylabel("Frank-Wolfe duality gap")
        ax.legend()
    # Regularization path (penalized form), torchfw against scikit-learn.
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    alphas, coefs, gaps = lasso_path(Xc, yc, n_alphas=10 if args.quick else 40, eps=0.02,
                                     tol=1e-6 if args.quick else 1e-8)
    ax = axes[2]
    active = np.flatnonzero(np.abs(coefs).max(axis=1) > 0)
    ax.plot(np.log10(alphas), coefs[active].T, lw=1)
    try:
        from sklearn.linear_model import lasso_path as sk_path

        _, sk_coefs, _ = sk_path(Xc, yc, alphas=alphas, tol=1e-10, max_iter=100_000)
        ax.plot(np.log10(alphas), sk_coefs[active].T, "k:", lw=0.8)
        print(f"path: {len(alphas)} alphas, {len(active)} genes ever active, max |coef - "
              f"sklearn| = {np.abs(coefs - sk_coefs).max():.1e}")
        ax.set_title("Lasso path (torchfw; dotted: scikit-learn)")
    except ImportError:
        ax.set_title("Lasso path (torchfw)")
    ax.invert_xaxis()
    ax.set_xlabel("log10(alpha)")
    ax.set_ylabel("coefficient")
    fig.suptitle("Lasso = SVM (Jaggi 2014): leukemia, 72 x 7129")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
