"""torchfw.Lasso against the Lasso anchors (skglm, celer, scikit-learn) at equal certified gaps.

Usage::

    python benchmarks/lasso_anchors.py                       # everything (several minutes)
    python benchmarks/lasso_anchors.py --quick               # 1 repeat, no tol 1e-6 on news20
    python benchmarks/lasso_anchors.py --machine epyc2       # names the results files

Problems (penalized Lasso with an intercept, scikit-learn's objective
``||y - Xw - b||^2 / (2n) + alpha ||w||_1``):

* leukemia (Golub et al.: 72 x 7,129 dense, genes standardized, y = +1 AML / -1 ALL) at
  ``alpha = 0.1`` and ``0.01 alpha_max``, ``tol = 1e-4`` and ``1e-6``;
* news20 (LIBSVM's multiclass ``news20``: 15,935 x 62,061 sparse, the class label 1..20 as the
  regression target) at ``0.1`` and ``0.01 alpha_max``, ``tol = 1e-4`` (and ``1e-6`` unless
  ``--quick``);
* the regularization path on leukemia: 50 alphas log-spaced from ``alpha_max`` to
  ``alpha_max / 1000`` (scikit-learn's default grid), warm starts, ``tol = 1e-6``, centred data
  and no intercept (as ``sklearn.linear_model.lasso_path``).

Every tool gets its defaults but ``alpha`` and ``tol`` (and ``max_iter`` raised for
scikit-learn), the same float64 arrays (SciPy CSC for the sparse set), and is timed end to end
(``fit``: input checks, copies, solve), interleaved, ``--repeats`` times; tables give medians.
The tools' ``tol`` means different things (skglm's bounds the optimality violation, celer's and
scikit-learn's the duality gap), so **every row reports the certified relative duality gap each
tool ends at, computed here the same way for all** from its coefficients: ``r = y_c - X_c w``,
``theta = r / max(n alpha, ||X_c^T r||_inf)`` (the standard dual point), gap = primal - dual,
divided by ``||y_c||^2 / n`` (scikit-learn's ``tol`` units). torchfw stops on exactly that gap,
so it runs twice: at the row's ``tol``, and at ``min(tol, skglm's final gap)`` ("torchfw @skglm
gap"), which is the row the goal ``time <= skglm's time at an equal or tighter gap`` is judged
on (ratio column: torchfw @skglm gap / skglm).

Writes ``benchmarks/results/lasso_anchors_<machine>.md`` and ``.json``. Data: ``../shared/data``
or ``$TORCHFW_DATA``.
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
from _machine import cpu_model, machine_header  # benchmarks/ is sys.path[0] for these scripts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _data import load_leukemia, load_svmlight_cached  # noqa: E402

import torchfw  # noqa: E402
from torchfw import Lasso, lasso_path  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def versions() -> dict:
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "torchfw": getattr(torchfw, "__version__", "?")}
    for name in ("sklearn", "skglm", "celer", "numba", "scipy", "numpy"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out


def certified(X, y, coef, alpha, fit_intercept=True) -> tuple[float, float]:
    """(relative certified gap, objective) at ``coef`` with the optimal intercept."""
    import scipy.sparse as sp

    n = len(y)
    yc = y - y.mean() if fit_intercept else y
    if sp.issparse(X):
        m = np.asarray(X.mean(axis=0)).ravel() if fit_intercept else np.zeros(X.shape[1])
        r = yc - (X @ coef - m @ coef)
        xtr = X.T @ r - m * r.sum()
    else:
        Xc = X - X.mean(axis=0) if fit_intercept else X
        r = yc - Xc @ coef
        xtr = Xc.T @ r
    lam = n * alpha
    s = min(1.0, lam / float(np.abs(xtr).max())) if np.abs(xtr).max() > 0 else 1.0
    primal = 0.5 * float(r @ r) + lam * float(np.abs(coef).sum())
    dual = -0.5 * s * s * float(r @ r) + s * float(r @ yc)
    return (primal - dual) / float(yc @ yc), primal / n


#: Seconds of rest before each timed fit. Some tools leave their OpenMP workers spinning for a
#: while after a fit; on a 2-core machine that spin takes a core from whichever fit comes next
#: (news20 at 0.01 alpha_max: a torchfw fit right after scikit-learn's took 0.12-0.14 s
#: against 0.095 s after a pause of 1 s). The pause, untimed and the same before every tool's
#: fit, keeps one tool's idle workers off the next tool's clock.
SETTLE_S = 1.0


def timed(fn):
    time.sleep(SETTLE_S)
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def tools(alpha, tol):
    """name -> a fit returning coef_ (each tool's Lasso at its defaults but alpha and tol)."""
    from sklearn.linear_model import Lasso as SkLasso

    out = {}
    try:
        from skglm import Lasso as SkglmLasso

        out["skglm"] = lambda X, y: SkglmLasso(alpha=alpha, tol=tol).fit(X, y).coef_
    except ImportError:
        pass
    try:
        from celer import Lasso as CelerLasso

        out["celer"] = lambda X, y: CelerLasso(alpha=alpha, tol=tol).fit(X, y).coef_
    except ImportError:
        pass
    out["scikit-learn"] = lambda X, y: SkLasso(alpha=alpha, tol=tol,
                                                max_iter=1_000_000).fit(X, y).coef_
    return out


def compare(name, X, y, frac, tol, repeats, skip=()):
    yc = y - y.mean()
    amax = float(np.abs(X.T @ yc).max()) / len(y)
    alpha = frac * amax
    fits = {k: v for k, v in tools(alpha, tol).items() if k not in skip}
    runs: dict[str, list[float]] = {}
    coefs: dict[str, np.ndarray] = {}
    tol_match = tol
    for rep in range(repeats):
        for key, fit in fits.items():
            coef, wall = timed(lambda f=fit: f(X, y))
            runs.setdefault(key, []).append(wall)
            coefs[key] = coef
            if key == "skglm" and rep == 0:
                tol_match = min(tol, certified(X, y, coef, alpha)[0])
        for key, t in (("torchfw", tol), ("torchfw @skglm gap", tol_match)):
            model, wall = timed(lambda t=t: Lasso(alpha=alpha, tol=t).fit(X, y))
            runs.setdefault(key, []).append(wall)
            coefs[key] = model.coef_
    rows = []
    base = statistics.median(runs["skglm"]) if "skglm" in runs else None
    for key, walls in runs.items():
        gap, obj = certified(X, y, coefs[key], alpha)
        wall = statistics.median(walls)
        row = {"problem": name, "n": X.shape[0], "p": X.shape[1], "alpha_frac": frac,
               "tol": tol, "tool": key, "wall_s": wall, "walls": walls, "rel_gap": gap,
               "nnz": int((coefs[key] != 0).sum()), "objective": obj,
               "ratio_vs_skglm": None if base is None else wall / base}
        if key == "torchfw @skglm gap":
            row["tol_run"] = tol_match
        rows.append(row)
        ratio = "" if base is None else f"  x skglm {wall / base:5.2f}"
        print(f"{name:8s} a/amax={frac:<5g} tol={tol:<6g} {key:19s} {wall:8.4f} s{ratio}  "
              f"rel.gap {gap:.2e}  nnz {row['nnz']:>4}  obj {obj:.10g}", flush=True)
    return rows


def path_compare(name, X, y, n_alphas, tol, repeats):
    Xc = X - X.mean(axis=0)
    yc = y - y.mean()
    amax = float(np.abs(Xc.T @ yc).max()) / len(y)
    alphas = np.geomspace(amax, amax * 1e-3, n_alphas)
    from sklearn.linear_model import lasso_path as sk_lasso_path

    fits = {}
    try:
        from skglm import Lasso as SkglmLasso

        fits["skglm"] = lambda t: SkglmLasso(tol=t, fit_intercept=False).path(Xc, yc, alphas)[1]
    except ImportError:
        pass
    try:
        from celer import Lasso as CelerLasso

        fits["celer"] = lambda t: CelerLasso(tol=t, fit_intercept=False).path(Xc, yc, alphas)[1]
    except ImportError:
        pass
    fits["scikit-learn"] = lambda t: sk_lasso_path(Xc, yc, alphas=alphas, tol=t,
                                                   max_iter=1_000_000)[1]
    fits["torchfw"] = lambda t: lasso_path(Xc, yc, alphas=alphas, tol=t)[1]
    runs: dict[str, list[float]] = {}
    coefs = {}
    tol_match = tol
    for rep in range(repeats):
        for key, fit in fits.items():
            out, wall = timed(lambda f=fit: f(tol))
            runs.setdefault(key, []).append(wall)
            coefs[key] = out
            if key == "skglm" and rep == 0:
                tol_match = min(tol, max(certified(Xc, yc, out[:, k], a, False)[0]
                                         for k, a in enumerate(alphas)))
        out, wall = timed(lambda t=tol_match: fits["torchfw"](t))
        runs.setdefault("torchfw @skglm gap", []).append(wall)
        coefs["torchfw @skglm gap"] = out
    rows = []
    base = statistics.median(runs["skglm"]) if "skglm" in runs else None
    for key, walls in runs.items():
        gaps = [certified(Xc, yc, coefs[key][:, k], a, False)[0] for k, a in enumerate(alphas)]
        objs = [certified(Xc, yc, coefs[key][:, k], a, False)[1] for k, a in enumerate(alphas)]
        wall = statistics.median(walls)
        row = {"problem": f"{name} path", "n": X.shape[0], "p": X.shape[1],
               "alpha_frac": "1 .. 1e-3", "n_alphas": n_alphas, "tol": tol, "tool": key,
               "wall_s": wall, "walls": walls, "rel_gap": max(gaps),
               "nnz": int((coefs[key][:, -1] != 0).sum()), "objective": float(sum(objs)),
               "ratio_vs_skglm": None if base is None else wall / base}
        if key == "torchfw @skglm gap":
            row["tol_run"] = tol_match
        rows.append(row)
        ratio = "" if base is None else f"  x skglm {wall / base:5.2f}"
        print(f"path {name:8s} {n_alphas} alphas tol={tol:<6g} {key:19s} {wall:8.4f} s{ratio}  "
              f"max rel.gap {max(gaps):.2e}  nnz(last) {row['nnz']:>4}", flush=True)
    return rows


def write(results, machine: str, command: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"lasso_anchors_{machine}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    m = results["meta"]
    v = m["versions"]
    lines = ["# Lasso: torchfw against skglm, celer and scikit-learn at equal certified gaps", ""]
    lines += machine_header(m, command)
    lines += ["Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".", "",
              f"Median wall seconds of `fit` over {results['repeats']} interleaved repeat(s), "
              "end to end, every tool at its defaults but alpha and tol. **rel. gap**: the "
              "certified duality gap at the tool's coefficients, computed by this script the "
              "same way for all (dual point r / max(n alpha, ||X^T r||_inf)), divided by "
              "||y_c||^2 / n. torchfw stops on that gap; **torchfw @skglm gap** runs it to "
              "min(tol, skglm's final gap), the row the goal is judged on; **x skglm** = "
              "wall / skglm's wall (< 1: faster than skglm). For the path, rel. gap is the "
              "largest over the 50 alphas and the objective is their sum.", "",
              "| problem | n x p | alpha / alpha_max | tol | tool | wall s | x skglm | "
              "rel. gap | nnz | objective |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        ratio = "" if r["ratio_vs_skglm"] is None else f"{r['ratio_vs_skglm']:.2f}"
        tool = r["tool"] if "tol_run" not in r else f"{r['tool']} (tol {r['tol_run']:.2g})"
        if r["tool"] == "torchfw @skglm gap":
            tool, ratio = f"**{tool}**", f"**{ratio}**"
        lines.append(f"| {r['problem']} | {r['n']} x {r['p']} | {r['alpha_frac']} | "
                     f"{r['tol']:g} | {tool} | {r['wall_s']:.4f} | {ratio} | "
                     f"{r['rel_gap']:.1e} | {r['nnz']} | {r['objective']:.10g} |")
    lines += ["", "Load average at the end: "
              + ", ".join(f"{x:.2f}" for x in m["load_average_end"])
              + f". Elapsed: {results['elapsed_s']:.0f} s.", ""]
    stem.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {stem}.md and {stem}.json")


def leukemia():
    """leukemia as float64 NumPy arrays, genes standardized."""
    X, y = load_leukemia(standardize=True)
    return X.numpy(), y.numpy()


def news20():
    """news20 (LIBSVM's multiclass set) as a float64 SciPy CSC matrix and the class label."""
    import scipy.sparse as sp

    Xs, ys = load_svmlight_cached("news20", n_features=62061, dtype=torch.float64)
    Xn = sp.csr_matrix((Xs.values().numpy(), Xs.col_indices().numpy(),
                        Xs.crow_indices().numpy()), shape=tuple(Xs.shape)).tocsc()
    return Xn, ys.numpy()


def warm_up(X, y) -> None:
    """Compile (or load from numba's cache) every tool's dense and sparse kernels, untimed."""
    import scipy.sparse as sp

    amax = float(np.abs(X.T @ (y - y.mean())).max()) / len(y)
    for fit in tools(0.5 * amax, 1e-3).values():
        fit(X[:, :300], y)
    Lasso(alpha=0.5 * amax, tol=1e-3).fit(X[:, :300], y)
    Lasso(alpha=0.5 * amax, tol=1e-3).fit(sp.csc_matrix(X[:, :300]), y)
    for fit in tools(0.5 * amax, 1e-3).values():
        fit(sp.csc_matrix(X[:, :300]), y)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, news20 at tol 1e-4 only")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--machine", default="epyc2",
                        help="the name in the results files (default epyc2)")
    parser.add_argument("--only", choices=["leukemia", "path", "news20"], action="append")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    only = set(args.only or ["leukemia", "path", "news20"])
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average_start": os.getloadavg(),
            "versions": versions(), "torch_threads": torch.get_num_threads()}
    print(meta, flush=True)
    rows = []
    X, y = leukemia()
    warm_up(X, y)
    if "leukemia" in only:
        for frac in (0.1, 0.01):
            for tol in (1e-4, 1e-6):
                rows += compare("leukemia", X, y, frac, tol, repeats)
    if "path" in only:
        rows += path_compare("leukemia", X, y, 50, 1e-6, repeats)
    if "news20" in only:
        Xn, yn = news20()
        for frac in (0.1, 0.01):
            for tol in ((1e-4,) if args.quick else (1e-4, 1e-6)):
                rows += compare("news20", Xn, yn, frac, tol, repeats)
    meta["load_average_end"] = os.getloadavg()
    results = {"meta": meta, "repeats": repeats, "rows": rows,
               "elapsed_s": time.perf_counter() - start}
    if not args.no_write:
        command = "python benchmarks/lasso_anchors.py" + (" --quick" if args.quick else "")
        command += f" --machine {args.machine}" if args.machine != "epyc2" else ""
        if args.only:
            command += "".join(f" --only {o}" for o in args.only)
        write(results, args.machine, command)


if __name__ == "__main__":
    main()
