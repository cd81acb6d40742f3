"""torchfw.Lasso (Frank-Wolfe) against scikit-learn's coordinate descent Lasso.

Usage::

    python benchmarks/lasso_vs_sklearn.py            # everything (~10 minutes on 2 cores)
    python benchmarks/lasso_vs_sklearn.py --quick    # 1 repeat, smaller wide problem

Part 1, time to a duality gap of ``tol = 1e-6`` in scikit-learn's meaning (the gap divided by
``||y - mean(y)||^2 / n``, i.e. ``sklearn.linear_model.Lasso(tol=1e-6)``) for the penalized Lasso
with an intercept, at a few ``alpha / alpha_max``:

* leukemia (Golub et al.: 72 x 7129, genes standardized, y = +1 AML / -1 ALL);
* a generated wide problem, n = 1,000, p = 100,000, 20 non-zero true coefficients
  (``torchfw.datasets.make_sparse_regression``, noise 0.5).

Both estimators get the same float64 NumPy arrays and are timed end to end (``fit``: input
checks, copies, solve), interleaved, ``--repeats`` times; the tables give medians of wall
seconds, the ratio torchfw / scikit-learn (< 1: torchfw faster), both final gaps (relative, in
tol's units), and the relative difference of the objectives. torchfw runs
``Lasso(alpha, tol=1e-6, solver="pairwise")`` with ``method="l1ball"`` (and ``"svm"`` on
leukemia: the same iterates through Jaggi's equivalence). On CUDA (when
``torch.cuda.is_available()``) torchfw also runs with ``device="cuda"``.

Part 2, a regularization path: ``torchfw.lasso_path`` (warm starts, one Gram cache) against
``sklearn.linear_model.lasso_path`` (warm starts), same alphas (log-spaced from alpha_max to
alpha_max / 100 on leukemia, / 20 on the wide problem), tol = 1e-6, centred data (neither fits
an intercept).

Writes ``benchmarks/results/lasso.md`` and ``benchmarks/results/lasso.json``. Data:
``../shared/data`` or ``$TORCHFW_DATA``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _data import load_leukemia  # noqa: E402

from torchfw import Lasso, lasso_path  # noqa: E402
from torchfw.datasets import make_sparse_regression  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TOL = 1e-6


def machine() -> dict:
    model = cpu_model()
    import sklearn

    info = {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "sklearn": sklearn.__version__,
            "torch_threads": torch.get_num_threads(),
            "load_average_start": os.getloadavg()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def relative_gap(gap: float, y: np.ndarray) -> float:
    yc = y - y.mean()
    return gap / (float(yc @ yc) / len(y))


def objective(X, y, coef, intercept, alpha) -> float:
    r = y - X @ coef - intercept
    return float(r @ r) / (2 * len(y)) + alpha * float(np.abs(coef).sum())


def alpha_max(X, y) -> float:
    yc = y - y.mean()
    # X^T y_c = X_c^T y_c: no centred copy of a large X needed.
    return float(np.abs(X.T @ yc).max()) / len(y)


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def compare(name, X, y, fracs, repeats, methods, devices, max_iter):
    from sklearn.linear_model import Lasso as SkLasso

    rows = []
    amax = alpha_max(X, y)
    for frac in fracs:
        alpha = frac * amax
        runs = {"sklearn": []}
        fits = {}
        for _ in range(repeats):  # interleaved: both see the same machine load
            sk, wall, cpu = timed(lambda a=alpha: SkLasso(alpha=a, tol=TOL,
                                                           max_iter=100_000).fit(X, y))
            runs["sklearn"].append((wall, cpu))
            fits["sklearn"] = sk
            for method in methods:
                for device in devices:
                    key = f"torchfw {method}" + ("" if device == "cpu" else f" ({device})")
                    model, wall, cpu = timed(lambda a=alpha, m=method, d=device: Lasso(
                        alpha=a, tol=TOL, method=m, solver="pairwise", device=d,
                        max_iter=max_iter).fit(X, y))
                    runs.setdefault(key, []).append((wall, cpu))
                    fits[key] = model
        sk = fits["sklearn"]
        f_sk = objective(X, y, sk.coef_, sk.intercept_, alpha)
        base = statistics.median(w for w, _ in runs["sklearn"])
        for key, times in runs.items():
            m = fits[key]
            wall = statistics.median(w for w, _ in times)
            cpu = statistics.median(c for _, c in times)
            f = objective(X, y, m.coef_, m.intercept_, alpha)
            rows.append({
                "problem": name, "n": X.shape[0], "p": X.shape[1], "alpha_frac": frac,
                "alpha": alpha, "solver": key, "wall_s": wall, "cpu_s": cpu,
                "ratio_vs_sklearn": wall / base,
                "rel_gap": relative_gap(m.dual_gap_, y),
                "n_iter": int(m.n_iter_), "nnz": int((m.coef_ != 0).sum()),
                "rel_obj_diff_vs_sklearn": (f - f_sk) / abs(f_sk),
                "walls": [w for w, _ in times]})
            print(f"{name:9s} a/amax={frac:<5g} {key:22s} {wall:8.3f} s  ratio {wall / base:6.2f}"
                  f"  rel.gap {rows[-1]['rel_gap']:.2e}  iters {m.n_iter_:>7}  "
                  f"nnz {rows[-1]['nnz']:>4}  dObj {rows[-1]['rel_obj_diff_vs_sklearn']:+.1e}",
                  flush=True)
    return rows


def path_compare(name, X, y, n_alphas, repeats, ratio=100.0):
    from sklearn.linear_model import lasso_path as sk_lasso_path

    Xc = X - X.mean(axis=0)
    yc = y - y.mean()
    amax = float(np.abs(Xc.T @ yc).max()) / len(y)
    alphas = np.geomspace(amax, amax / ratio, n_alphas)
    sk_t, fw_t = [], []
    for _ in range(repeats):
        (_, sk_coefs, sk_gaps), wall, _ = timed(lambda: sk_lasso_path(
            Xc, yc, alphas=alphas, tol=TOL, max_iter=100_000))
        sk_t.append(wall)
        (_, coefs, gaps, iters), wall, _ = timed(lambda: lasso_path(
            Xc, yc, alphas=alphas, tol=TOL, solver="pairwise", return_n_iter=True))
        fw_t.append(wall)
    scale = float(yc @ yc) / len(yc)
    row = {"problem": name, "n": X.shape[0], "p": X.shape[1], "n_alphas": n_alphas,
           "alpha_min_frac": 1.0 / ratio,
           "alpha_range": [float(alphas[0]), float(alphas[-1])],
           "sklearn_s": statistics.median(sk_t), "torchfw_s": statistics.median(fw_t),
           "ratio_vs_sklearn": statistics.median(fw_t) / statistics.median(sk_t),
           "torchfw_max_rel_gap": float(np.max(gaps)) / scale,
           # scikit-learn's lasso_path already divides its gaps by n.
           "sklearn_max_rel_gap": float(np.max(sk_gaps)) / scale,
           "torchfw_iters": int(iters.sum()),
           "max_abs_coef_diff": float(np.abs(coefs - sk_coefs).max())}
    print(f"path {name:9s} {n_alphas} alphas  sklearn {row['sklearn_s']:.3f} s  torchfw "
          f"{row['torchfw_s']:.3f} s  ratio {row['ratio_vs_sklearn']:.2f}  max|dcoef| "
          f"{row['max_abs_coef_diff']:.1e}", flush=True)
    return row


def write(results, args):
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "lasso.json").write_text(json.dumps(results, indent=1) + "\n")
    m = results["machine"]
    lines = ["# Lasso: torchfw (Frank-Wolfe) vs scikit-learn (coordinate descent)", ""]
    lines.append(f"Machine: {m['cpu']}, {m['cores']} cores"
                 + (f", GPU {m['gpu']}" if "gpu" in m else ", no GPU")
                 + f"; Python {m['python']}, torch {m['torch']} ({m['torch_threads']} threads), "
                 f"scikit-learn {m['sklearn']}. Load average at start: "
                 + ", ".join(f"{v:.2f}" for v in m["load_average_start"])
                 + " (a shared machine: both solvers were timed interleaved).")
    flags = " --quick" if args.quick else ""
    lines += ["", f"Command: `python benchmarks/lasso_vs_sklearn.py{flags}`", ""]
    lines += ["## Time to a duality gap of tol = 1e-6 (penalized Lasso with intercept)", "",
              f"Median wall seconds of `fit` over {args.repeats} interleaved repeat(s); ratio = "
              "torchfw / scikit-learn (< 1: torchfw faster). rel. gap = final duality gap / "
              "(||y_c||^2 / n), scikit-learn's formula for both (its `tol` units). dObj = "
              "relative difference of the penalized objectives (torchfw - sklearn).", "",
              "| problem | n x p | alpha / alpha_max | solver | wall s | ratio | rel. gap | "
              "iterations | nnz | dObj |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["fits"]:
        lines.append(f"| {r['problem']} | {r['n']} x {r['p']} | {r['alpha_frac']:g} | "
                     f"{r['solver']} | {r['wall_s']:.3f} | {r['ratio_vs_sklearn']:.2f} | "
                     f"{r['rel_gap']:.1e} | {r['n_iter']} | {r['nnz']} | "
                     f"{r['rel_obj_diff_vs_sklearn']:+.1e} |")
    lines += ["", "Iterations: coordinate-descent epochs for scikit-learn, Frank-Wolfe "
              "iterations (one coordinate each) for torchfw.", ""]
    lines += ["## Regularization path (warm starts)", "",
              "Same log-spaced alphas from alpha_max down, tol = 1e-6, centred data, no "
              "intercept; median wall seconds.", "",
              "| problem | n x p | alphas | smallest alpha / alpha_max | sklearn lasso_path s | "
              "torchfw lasso_path s | ratio | torchfw max rel. gap | sklearn max rel. gap | "
              "FW iterations | max abs coef diff |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["paths"]:
        lines.append(f"| {r['problem']} | {r['n']} x {r['p']} | {r['n_alphas']} | "
                     f"{r['alpha_min_frac']:g} | {r['sklearn_s']:.3f} | {r['torchfw_s']:.3f} | "
                     f"{r['ratio_vs_sklearn']:.2f} | {r['torchfw_max_rel_gap']:.1e} | "
                     f"{r['sklearn_max_rel_gap']:.1e} | "
                     f"{r['torchfw_iters']} | {r['max_abs_coef_diff']:.1e} |")
    lines += ["", "Elapsed: " + f"{results['elapsed_s']:.0f} s.", ""]
    (RESULTS / "lasso.md").write_text("\n".join(lines))
    print(f"wrote {RESULTS / 'lasso.md'} and {RESULTS / 'lasso.json'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, p = 20,000 for the wide problem")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--no-wide", action="store_true", help="skip the generated problem")
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (1 if args.quick else 3)
    warnings.filterwarnings("ignore", message="Sparse")
    start = time.perf_counter()
    results = {"machine": machine(), "tol": TOL, "fits": [], "paths": []}
    print(results["machine"], flush=True)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    X, y = load_leukemia(standardize=True)
    X, y = X.numpy(), y.numpy()
    # Warm up the compiled kernels (numba caches them on disk afterwards).
    Lasso(alpha=0.5 * alpha_max(X, y), tol=1e-3).fit(X[:, :200], y)
    results["fits"] += compare("leukemia", X, y, [0.5, 0.1, 0.01], args.repeats,
                               ["l1ball", "svm"], devices, 10**6)
    results["paths"].append(path_compare("leukemia", X, y, 30, args.repeats))

    if not args.no_wide:
        p = 20_000 if args.quick else 100_000
        Xw, yw, _ = make_sparse_regression(1000, p, 20, noise=0.5, random_state=0)
        Xw, yw = Xw.numpy(), yw.numpy()
        results["fits"] += compare("wide", Xw, yw, [0.1, 0.02], args.repeats, ["l1ball"],
                                   devices, 10**6)
        results["paths"].append(path_compare("wide", Xw, yw, 20, 1, ratio=20.0))
    results["elapsed_s"] = time.perf_counter() - start
    write(results, args)


if __name__ == "__main__":
    main()
