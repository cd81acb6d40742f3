"""Reproduction report for the seed papers: ``docs/reproduction.md`` in one command.

Usage::

    python benchmarks/reproduce.py            # the full report (about 20-25 minutes on 2 CPU cores)
    python benchmarks/reproduce.py --quick    # smoke run on subsets (a few minutes)
    python benchmarks/reproduce.py --from-json benchmarks/results/reproduction.json
                                              # rewrite the Markdown from saved measurements

Every number in the Markdown is written by this script from its own measurements, next to the
numbers the papers print (transcribed in ``../shared/specs``). Sections:

1. Seed 002, Table 2: FW, MFW (away steps), SWAP and PARTAN at an absolute duality gap
   eps = 1e-4 on the dual ``1/2 a'Ka`` (accuracy, time, iterations, SVs; PARTAN's speed-up).
   Table 3 (iterations against eps) from one deeper run per solver.
2. Seed 000: SWAP against FW and MFW (time and iterations to eps, SVs, accuracy), from the same
   deeper runs, plus SWAP-2o.
3. Seed 001: one and two epochs of streaming SFW / MSFW at the paper's kernel width and C.
4. Seed 004: Weston-Watkins SVM accuracy at Table 6's best C (tol 0.0009), and Walrus against
   the iterative subproblem solver (functions of ``benchmarks/ww_vs_liblinear.py``).
5. The Lasso / SVM equivalence: the same Frank-Wolfe iterates and gaps through both routes.

Writes ``docs/reproduction.md``, ``docs/img/reproduction_*.png`` and
``benchmarks/results/reproduction.json`` (``--quick`` writes ``benchmarks/results/*_quick*``
instead, so a smoke run never touches the report). Data: ``../shared/data`` or ``$TORCHFW_DATA``.
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
sys.path.insert(0, str(ROOT / "examples"))

import ww_vs_liblinear as WW  # noqa: E402
from _data import data_dir, load_libsvm  # noqa: E402
from lasso_svm_equivalence import gap_curve, load_leukemia  # noqa: E402

from torchfw import SVC, WestonWatkinsSVC  # noqa: E402
from torchfw.lasso import LassoData  # noqa: E402
from torchfw.svm._plan import fit_planned  # noqa: E402
from torchfw.utils.data import take_rows  # noqa: E402

DOCS = ROOT / "docs"
IMG = DOCS / "img"
RESULTS = ROOT / "benchmarks" / "results"

SOLVER_NAMES = {"fw": "FW", "away": "MFW", "swap": "SWAP", "partan": "PARTAN",
                "swap2": "SWAP-2o", "sfw": "SFW", "msfw": "MSFW"}
TABLE2_SOLVERS = ("fw", "away", "swap", "partan")
DEEP_SOLVERS = ("fw", "away", "swap", "swap2", "partan")
SECTIONS = ("table2", "c_sweep", "deep", "sfw", "ww", "lasso")

# Seed 002, Table 2 (eps = 1e-4): acc %, time s, iterations, SVs per solver.
PAPER_T2 = {
    "a9a": {"fw": (84.21, 158, 20200, 13900), "away": (83.29, 157, 20000, 12800),
            "swap": (83.53, 226, 17600, 14100), "partan": (84.00, 107, 13400, 11800)},
    "w8a": {"fw": (99.30, 378, 16500, 6920), "away": (99.32, 316, 13800, 4480),
            "swap": (99.28, 356, 9240, 4970), "partan": (99.30, 107, 4620, 2830)},
    "ijcnn1": {"fw": (98.50, 51.3, 15900, 3230), "away": (98.22, 45.7, 14100, 2730),
               "swap": (98.40, 50.9, 13500, 3160), "partan": (98.36, 19.8, 5480, 2730)},
}
# FW / PARTAN time ratios of all six Table 2 datasets (a9a, w8a, ijcnn1, USPS-ext, KDD99, RCV1).
PAPER_T2_ALL_RATIOS = {"a9a": 158 / 107, "w8a": 378 / 107, "ijcnn1": 51.3 / 19.8,
                       "usps-ext": 1980 / 738, "kdd99": 702 / 189, "rcv1": 13700 / 12300}
# Seed 002, Table 3: iterations (and time s) per eps in (1e-3, 1e-4, 1e-5, 1e-6).
PAPER_T3 = {
    "a9a": {"fw": ((2820, 20200, 184000, 1790000), (22.4, 158, 1460, 14200)),
            "away": ((2770, 20000, 68000, 150000), (22.0, 157, 548, 1210)),
            "swap": ((2610, 17600, 51800, 109000), (30.7, 226, 646, 1300)),
            "partan": ((2150, 16400, 62100, 663000), (17.3, 107, 509, 5430))},
    "w8a": {"fw": ((1930, 16500, 163000, 1750000), (44.7, 378, 3730, 40200)),
            "away": ((1860, 13800, 63800, 165000), (42.7, 316, 1520, 3780)),
            "swap": ((1690, 9240, 42900, 346000), (64.2, 356, 1310, 8630)),
            "partan": ((777, 4620, 25700, 144000), (18.3, 107, 597, 3320))},
    "ijcnn1": {"fw": ((1720, 15900, 168000, 1970000), (5.77, 51.3, 549, 6480)),
               "away": ((1510, 14100, 71200, 205000), (5.16, 45.7, 238, 681)),
               "swap": ((1210, 13500, 68500, 177000), (6.94, 50.9, 256, 656)),
               "partan": ((783, 5480, 43400, 499000), (3.09, 19.8, 160, 1830))},
}
EPS_GRID = (1e-3, 1e-4, 1e-5, 1e-6)
# Seed 001, Tables 2-4: sigma, C (L2-SVM), accuracy % SFW 1ep, SFW 2ep, MSFW 1ep, MSFW 2ep,
# SMO-L2 (exact L2-SVM), SVs SFW 1ep, MSFW 1ep.
PAPER_SFW = {
    "svmguide1": (20.0, 0.4, (96.85, 96.98, 97.00, 97.00, 97.00), (693, 672)),
    "a9a": (10.0, 0.5, (85.24, 84.69, 84.87, 85.13, 85.21), (12804, 13131)),
    "ijcnn1": (0.61, 5.0, (98.07, 98.58, 98.17, 98.55, 98.61), (2772, 2706)),
}


# -- data ------------------------------------------------------------------------------------------

def cvm_gamma(X: torch.Tensor) -> float:
    """1 / (mean squared distance over all ordered pairs) = 1 / (2 (mean |x|^2 - |mean x|^2))."""
    m, d = X.shape
    if X.layout == torch.sparse_csr:
        vals = X.values().double()
        rows = torch.repeat_interleave(torch.arange(m), X.crow_indices().diff())
        sq = torch.zeros(m, dtype=torch.float64).index_add_(0, rows, vals * vals)
        mean = torch.zeros(d, dtype=torch.float64).index_add_(0, X.col_indices(), vals) / m
    else:
        Xd = X.double()
        sq = (Xd * Xd).sum(1)
        mean = Xd.mean(0)
    return 1.0 / (2.0 * (float(sq.mean()) - float((mean * mean).sum())))


def subsample(X, y, n, seed=0):
    if n is None or n >= X.shape[0]:
        return X, y
    idx = torch.from_numpy(np.sort(np.random.default_rng(seed).choice(X.shape[0], n,
                                                                      replace=False)))
    return take_rows(X, idx), y[idx]


def binary_data(name: str, quick: bool, standardize: bool = True):
    """Train/test split of a binary data set as used in sections 1-3 (see the report's notes)."""
    if name == "ijcnn1":  # only ijcnn1.val (14,990 rows) is here: a seeded 70/30 split of it
        d = load_libsvm("ijcnn1.val")
        X, y = d.X_train.to_dense() if d.X_train.layout == torch.sparse_csr else d.X_train, \
            d.y_train
        perm = torch.from_numpy(np.random.default_rng(0).permutation(X.shape[0]))
        cut = int(0.7 * X.shape[0])
        Xtr, ytr, Xte, yte = X[perm[:cut]], y[perm[:cut]], X[perm[cut:]], y[perm[cut:]]
    else:
        d = load_libsvm(name)
        Xtr, ytr, Xte, yte = d.X_train, d.y_train, d.X_test, d.y_test
        if name == "svmguide1":
            Xtr = Xtr.to_dense() if Xtr.layout == torch.sparse_csr else Xtr
            Xte = Xte.to_dense() if Xte.layout == torch.sparse_csr else Xte
            if standardize:  # seed 003's StandardScaler, fitted on the training split
                mu, sd = Xtr.mean(0), Xtr.std(0, unbiased=False)
                Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    if quick:
        Xtr, ytr = subsample(Xtr, ytr, {"svmguide1": None}.get(name, 3000))
        Xte, yte = subsample(Xte, yte, 4000, seed=1)
    return Xtr, ytr, Xte, yte


# -- absolute tolerance on the dual ------------------------------------------------------------

def fit_svc(X, y, *, eps=None, **params):
    """Fit ``SVC(**params)``; with ``eps``, stopping on the absolute Frank-Wolfe gap ``<= eps``
    of ``1/2 a'Ka`` (seed 002) instead of SVC's ``tol``, which is relative to the margin.

    Everything else of SVC (kernel, CVM-form K, initial 20-point subset, model recovery) is
    kept: only the stopping numbers of the fit's plan are replaced (``gap_tol=eps, rtol=0``).
    """
    clf = SVC(**params)
    c0, w0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if eps is None:
            clf.fit(X, y)
        else:
            fit_planned(clf, X, y, gap_tol=eps, rtol=0.0)
    return clf, time.perf_counter() - w0, time.process_time() - c0


def first_below(history, eps):
    """(iterations, seconds) at the first check with gap <= eps, or None."""
    for k, g, t in zip(history.iteration, history.gap, history.time, strict=True):
        if g <= eps:
            return k, t
    return None


# -- section 1 and 2 ------------------------------------------------------------------------------

def warm_up() -> None:
    """Compile every solver path once on a small problem, so no timing includes compilation."""
    X, y, _, _ = binary_data("svmguide1", True)
    X, y = subsample(X, y, 500)
    for solver in DEEP_SOLVERS:
        fit_svc(X, y, eps=1e-4, C=1.0, gamma=cvm_gamma(X), solver=solver, random_state=0)
    for solver in ("sfw", "msfw"):
        fit_svc(X, y, C=1.0, gamma=1.0, solver=solver, random_state=0)


def section_table2(cfg) -> list[dict]:
    rows = []
    for name in cfg["datasets"]:
        Xtr, ytr, Xte, yte = binary_data(name, cfg["quick"])
        gamma = cvm_gamma(Xtr)
        for solver in TABLE2_SOLVERS:
            clf, wall, cpu = fit_svc(Xtr, ytr, eps=1e-4, C=1.0, gamma=gamma, solver=solver,
                                     random_state=0)
            r = clf.result_
            row = {"dataset": name, "m": int(Xtr.shape[0]), "t": int(Xte.shape[0]),
                   "gamma": gamma, "solver": solver, "accuracy": 100 * clf.score(Xte, yte),
                   "wall_s": wall, "cpu_s": cpu, "solver_s": r.history.time[-1],
                   "iterations": int(r.n_iter), "svs": int(clf.n_support_.sum()),
                   "gap": float(r.gap), "f": float(r.value), "status": str(r.status)}
            rows.append(row)
            print(f"[T2] {name:9s} {solver:7s} acc {row['accuracy']:6.2f}  {wall:7.2f}s wall "
                  f"{cpu:7.2f}s cpu  it {row['iterations']:7d}  SV {row['svs']:6d}  "
                  f"gap {row['gap']:.2e}  f {row['f']:.2e}", flush=True)
    return rows


def section_c_sweep(cfg) -> list[dict]:
    """Table 2's iterations at eps = 1e-4 against C, with the paper's way of choosing C.

    Seed 002 chose C on one random 70/30 split of the training set and does not report it;
    PARTAN's lead over FW grows with C here, so the ordering is measured over a grid of C, with
    the held-out accuracy (SWAP at eps = 1e-4, trained on 70%, scored on 30%) that picks C.
    """
    rows = []
    for name in cfg["c_sweep"]:
        Xtr, ytr, Xte, yte = binary_data(name, cfg["quick"])
        gamma = cvm_gamma(Xtr)
        m = Xtr.shape[0]
        perm = torch.from_numpy(np.random.default_rng(0).permutation(m))
        fit_rows, val_rows = perm[:int(0.7 * m)].sort().values, perm[int(0.7 * m):].sort().values
        Xa, ya = take_rows(Xtr, fit_rows), ytr[fit_rows]
        Xv, yv = take_rows(Xtr, val_rows), ytr[val_rows]
        for C in cfg["c_grid"]:
            held, _, _ = fit_svc(Xa, ya, eps=1e-4, C=C, gamma=gamma, solver="swap",
                                 random_state=0)
            row = {"dataset": name, "C": C, "gamma": gamma,
                   "heldout_accuracy": 100 * held.score(Xv, yv), "iterations": {},
                   "accuracy": {}, "wall_s": {}}
            for solver in TABLE2_SOLVERS:
                clf, wall, _ = fit_svc(Xtr, ytr, eps=1e-4, C=C, gamma=gamma, solver=solver,
                                       random_state=0)
                row["iterations"][solver] = int(clf.result_.n_iter)
                row["accuracy"][solver] = 100 * clf.score(Xte, yte)
                row["wall_s"][solver] = wall
            rows.append(row)
            print(f"[C] {name:5s} C={C:<5g} held-out {row['heldout_accuracy']:.2f}  "
                  + "  ".join(f"{s} {row['iterations'][s]}" for s in TABLE2_SOLVERS), flush=True)
    return rows


def section_deep(cfg) -> tuple[list[dict], dict]:
    """One run per (dataset, solver) to the smallest eps within a time cap; gap histories."""
    rows, curves = [], {}
    for name, eps in cfg["deep"].items():
        Xtr, ytr, Xte, yte = binary_data(name, cfg["quick"])
        gamma = cvm_gamma(Xtr)
        for solver in DEEP_SOLVERS:
            clf, wall, cpu = fit_svc(Xtr, ytr, eps=eps, C=1.0, gamma=gamma, solver=solver,
                                     random_state=0, time_limit=cfg["cap"])
            r, h = clf.result_, clf.result_.history
            reached = {f"{e:g}": first_below(h, e) for e in EPS_GRID if e >= eps}
            row = {"dataset": name, "solver": solver, "target_eps": eps, "cap_s": cfg["cap"],
                   "status": str(r.status), "iterations": int(r.n_iter), "wall_s": wall,
                   "solver_s": h.time[-1], "final_gap": float(r.gap),
                   "svs": int(clf.n_support_.sum()), "accuracy": 100 * clf.score(Xte, yte),
                   "reached": reached, "steps": dict(r.steps)}
            rows.append(row)
            curves[(name, solver)] = (list(h.iteration), list(h.time), list(h.gap))
            print(f"[deep] {name:9s} {solver:7s} {row['status']:10s} it {row['iterations']:8d} "
                  f"{row['solver_s']:7.1f}s gap {row['final_gap']:.2e} SV {row['svs']:6d} "
                  f"acc {row['accuracy']:.2f}  "
                  + " ".join(f"{k}:{v[0] if v else '-'}" for k, v in reached.items()),
                  flush=True)
    return rows, curves


def plot_curves(curves, name, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for solver in DEEP_SOLVERS:
        if (name, solver) not in curves:
            continue
        it, t, g = curves[(name, solver)]
        step = max(1, len(it) // 400)  # thin the curves to keep the PNG small
        it, t, g = it[1::step], t[1::step], g[1::step]
        axes[0].loglog(it, g, lw=1, label=SOLVER_NAMES[solver])
        axes[1].loglog(t, g, lw=1, label=SOLVER_NAMES[solver])
    for ax, xl in zip(axes, ("iteration", "seconds (solver clock)"), strict=True):
        ax.axhline(1e-4, color="grey", lw=0.6, ls=":")
        ax.set_xlabel(xl)
        ax.set_ylabel("FW duality gap (absolute)")
        ax.grid(alpha=0.3, which="both", lw=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{name}: duality gap of 1/2 a'Ka, C = 1, CVM kernel width", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return True


# -- section 3 ------------------------------------------------------------------------------------

def section_sfw(cfg) -> list[dict]:
    rows = []
    for name, (sigma, C_paper, _, _) in PAPER_SFW.items():
        if name not in cfg["sfw_datasets"]:
            continue
        # seed 001 used raw svmguide1 features (sigma = 20); the LIBSVM a9a/ijcnn1 files as given
        Xtr, ytr, Xte, yte = binary_data(name, cfg["quick"], standardize=False)
        gamma = 1.0 / (2.0 * sigma ** 2)
        m = Xtr.shape[0]
        # seed 001's diagonal is 1/(2C); SVC's is 1/C: C_svc = 2 C_paper gives the same problem
        params = dict(C=2.0 * C_paper, gamma=gamma)
        for solver in ("sfw", "msfw"):
            for epochs in (1, 2):
                runs = {False: [], True: []}  # average: last iterate (the paper's), tail mean
                svs, walls = [], []
                for seed in range(cfg["sfw_seeds"]):
                    for average in (False, True):
                        clf, wall, _ = fit_svc(Xtr, ytr, solver=solver, max_iter=epochs * m,
                                               random_state=seed, average=average, **params)
                        runs[average].append(100 * clf.score(Xte, yte))
                    svs.append(int(clf.n_support_.sum()))
                    walls.append(wall)
                row = {"dataset": name, "solver": solver, "epochs": epochs, "m": m,
                       "gamma": gamma, "C_paper": C_paper, "C_svc": 2.0 * C_paper,
                       "accuracy_runs": runs[False], "accuracy": statistics.mean(runs[False]),
                       "accuracy_avg_runs": runs[True],
                       "accuracy_avg": statistics.mean(runs[True]),
                       "svs": statistics.median(svs), "wall_s": statistics.median(walls)}
                rows.append(row)
                print(f"[SFW] {name:9s} {solver:5s} {epochs} ep: acc last "
                      f"{row['accuracy']:.2f} ({', '.join(f'{a:.2f}' for a in runs[False])}), "
                      f"tail mean {row['accuracy_avg']:.2f} "
                      f"({', '.join(f'{a:.2f}' for a in runs[True])}) SV {row['svs']} "
                      f"{row['wall_s']:.1f}s", flush=True)
        clf, wall, _ = fit_svc(Xtr, ytr, solver="swap", tol=cfg["ref_tol"], random_state=0,
                               **params)
        rows.append({"dataset": name, "solver": "swap (reference)", "epochs": None, "m": m,
                     "gamma": gamma, "C_paper": C_paper, "C_svc": 2.0 * C_paper,
                     "accuracy": 100 * clf.score(Xte, yte), "svs": int(clf.n_support_.sum()),
                     "wall_s": wall, "iterations": int(np.sum(clf.n_iter_)), "tol": cfg["ref_tol"]})
        print(f"[SFW] {name:9s} swap reference (tol {cfg['ref_tol']}): acc "
              f"{rows[-1]['accuracy']:.2f} SV {rows[-1]['svs']} {wall:.1f}s", flush=True)
    return rows


# -- section 4 ------------------------------------------------------------------------------------

def section_ww(cfg) -> tuple[list[dict], list[dict]]:
    rows = []
    for name, (tr, te, C, paper) in WW.SETS.items():
        if name not in cfg["ww_datasets"]:
            continue
        X, y = WW.load(tr)
        Xt, yt = WW.load(te, X.shape[1])
        accs, cpus, epochs = [], [], []
        for seed in range(cfg["ww_seeds"]):
            clf, cpu, _ = WW.timed(WestonWatkinsSVC(C=C, tol=0.0009, random_state=seed).fit,
                                   X, y)
            accs.append(100 * clf.score(Xt, yt))
            cpus.append(cpu)
            epochs.append(int(clf.n_iter_))
        rows.append({"dataset": name, "n": X.shape[0], "k": len(np.unique(y)), "C": C,
                     "paper_accuracy": paper, "accuracy_runs": accs,
                     "accuracy": statistics.median(accs), "cpu_s": statistics.median(cpus),
                     "epochs": epochs})
        print(f"[WW] {name:9s} acc {rows[-1]['accuracy']:.2f} (paper {paper:.2f}) "
              f"{rows[-1]['cpu_s']:.2f}s", flush=True)
    ratios, _micro = WW.part2(quick=cfg["quick"])
    return rows, ratios


# -- section 5 ------------------------------------------------------------------------------------

def section_lasso(cfg) -> list[dict]:
    rows = []
    X, y = load_leukemia(data_dir())
    problems = [("leukemia (72 x 7129)", LassoData(X, y), 1.0)]
    h = load_libsvm("housing")
    Xh = h.X_train.to_dense() if h.X_train.layout == torch.sparse_csr else h.X_train
    problems.append(("housing (506 x 13)", LassoData(Xh.double().numpy(),
                                                       h.y_train.double().numpy()), 50.0))
    for label, data, radius in problems:
        for solver in ("fw", "pairwise"):
            t0 = time.perf_counter()
            gap_l1, w_l1 = gap_curve(data, radius, "l1ball", solver, cfg["lasso_iter"])
            gap_svm, w_svm = gap_curve(data, radius, "svm", solver, cfg["lasso_iter"])
            n = min(len(gap_l1), len(gap_svm))
            rel = np.abs(gap_l1[:n] - gap_svm[:n]) / np.maximum(np.abs(gap_l1[:n]), 1e-300)
            support_l1 = (w_l1[-1] != 0).sum().item()
            support_svm = (w_svm[-1] != 0).sum().item()
            row = {"problem": label, "solver": solver, "radius": radius,
                   "iterations": n - 1, "max_abs_dw": float((w_l1[:n] - w_svm[:n]).abs().max()),
                   "max_abs_dgap": float(np.abs(gap_l1[:n] - gap_svm[:n]).max()),
                   "max_rel_dgap": float(rel.max()), "final_gap_l1ball": float(gap_l1[n - 1]),
                   "final_gap_svm": float(gap_svm[n - 1]), "support_l1ball": support_l1,
                   "support_svm": support_svm, "seconds": time.perf_counter() - t0}
            rows.append(row)
            print(f"[lasso] {label:22s} {solver:8s} {n - 1} it: max|dw| {row['max_abs_dw']:.1e} "
                  f"max|dgap| {row['max_abs_dgap']:.1e} (rel {row['max_rel_dgap']:.1e})",
                  flush=True)
    return rows


# -- report ----------------------------------------------------------------------------------------

def f2(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def sci(x):
    return "-" if x is None else f"{x:.2e}"


def machine_info() -> dict:
    model = cpu_model()
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "numpy": np.__version__}


def ordering(iters: dict) -> str:
    order = sorted(iters, key=lambda s: -iters[s])
    return " > ".join(SOLVER_NAMES[s] for s in order)


def _reached(row, eps):
    return row["reached"].get(f"{eps:g}")


def order_flags(its: dict) -> tuple[bool, bool]:
    """(FW needs the most iterations, PARTAN the fewest): the two ends of seed 002's ordering."""
    others = [its[s] for s in TABLE2_SOLVERS if s not in ("fw", "partan")]
    return its["fw"] > max(others + [its["partan"]]), its["partan"] < min(others + [its["fw"]])


def heldout_choice(rows: list[dict], name: str) -> dict:
    """The grid row with the best held-out accuracy (the smaller C on a tie)."""
    rs = [r for r in rows if r["dataset"] == name]
    return max(rs, key=lambda r: (round(r["heldout_accuracy"], 6), -r["C"]))


def c_sweep_report(res: dict) -> list[str]:
    rows = res.get("c_sweep")
    if not rows:
        return []
    out = ["### The ordering against C", "",
           "Seed 002 tuned C on one random 70/30 split of each training set and does not report "
           "it, and the FW/PARTAN ratio moves with C, so the eps = 1e-4 runs are repeated over "
           f"C in {{{', '.join(f'{c:g}' for c in res['config']['c_grid'])}}} (kernel width as "
           "above). Held-out accuracy: SWAP at eps = 1e-4 trained on a seeded 70% of the "
           "training set and scored on the other 30%, the paper's protocol; **bold** = the C it "
           "picks. Iterations on the full training set; test accuracy of the four solvers "
           "(min-max). FW most / PARTAN fewest: the two ends of the paper's ordering. Where "
           "the test accuracy collapses (some solvers at large C) the stop at eps says little "
           "about the classifier: the dual objective shrinks as C grows while eps = 1e-4 is "
           "absolute, so the same eps is a looser relative gap.", "",
           "| dataset | C | held-out acc % | FW | MFW | SWAP | PARTAN | measured ordering | "
           "FW / PARTAN iterations | FW most | PARTAN fewest | test acc % |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["dataset"] for r in rows):
        chosen = heldout_choice(rows, name)
        for r in (r for r in rows if r["dataset"] == name):
            its = r["iterations"]
            fw_most, partan_fewest = order_flags(its)
            acc = r["accuracy"].values()
            c = f"**{r['C']:g}**" if r is chosen else f"{r['C']:g}"
            out.append(f"| {name} | {c} | {r['heldout_accuracy']:.2f} | "
                       + " | ".join(str(its[s]) for s in TABLE2_SOLVERS)
                       + f" | {ordering(its)} | {its['fw'] / its['partan']:.2f} | "
                       f"{'yes' if fw_most else 'no'} | {'yes' if partan_fewest else 'no'} | "
                       f"{min(acc):.2f}-{max(acc):.2f} |")
    out.append("")
    return out


def c_sweep_summary(res: dict) -> str | None:
    rows = res.get("c_sweep")
    if not rows:
        return None
    parts = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        chosen = heldout_choice(rows, name)
        its = chosen["iterations"]
        fw_most, partan_fewest = order_flags(its)
        full = [r["C"] for r in rows if r["dataset"] == name and all(order_flags(r["iterations"]))]
        ratios = [r["iterations"]["fw"] / r["iterations"]["partan"] for r in rows
                  if r["dataset"] == name]
        parts.append(
            f"{name}: the held-out split picks C = {chosen['C']:g}, where the measured ordering "
            f"is {ordering(its)} (FW most: {'yes' if fw_most else 'no'}, PARTAN fewest: "
            f"{'yes' if partan_fewest else 'no'}); both ends hold at C in "
            f"{{{', '.join(f'{c:g}' for c in full) or 'none'}}}; FW/PARTAN iterations go from "
            f"{min(ratios):.2f} to {max(ratios):.2f} over the grid")
    return ("- **Seed 002, the ordering against C** (eps = 1e-4; the paper chose C on a 70/30 "
            "split and does not report it): " + "; ".join(parts) + ".")


def summary_lines(res: dict) -> list[str]:  # noqa: C901 - one linear list of findings
    """The headline findings, every number computed from the measurements in ``res``."""
    t2, deep, sfw, ww, wwr, lasso = (res["table2"], res["deep"], res["sfw"], res["ww"],
                                     res["ww_ratios"], res["lasso"])
    out = ["## Summary", ""]
    by = {(r["dataset"], r["solver"]): r for r in t2}
    names = list(dict.fromkeys(r["dataset"] for r in t2))
    # accuracy against Table 2
    diffs = [by[(n, s)]["accuracy"] - PAPER_T2[n][s][0] for n in names if n in ("a9a", "w8a")
             for s in TABLE2_SOLVERS if (n, s) in by]
    if diffs:
        out.append(f"- **Seed 002, accuracy at eps = 1e-4 (C = 1, CVM kernel width):** on a9a "
                   f"and w8a, the data sets with the paper's own train/test files, our test "
                   f"accuracy is within {max(abs(d) for d in diffs):.2f} points of Table 2 for "
                   f"every solver (differences from {min(diffs):+.2f} to {max(diffs):+.2f}).")
    # iteration counts and ordering
    parts, fewest, fw_most = [], {}, True
    for n in names:
        its = {sv: by[(n, sv)]["iterations"] for sv in TABLE2_SOLVERS if (n, sv) in by}
        if len(its) == 4:
            parts.append(f"{n} {ordering(its)}")
            fewest[n] = min(its, key=its.get)
            fw_most &= max(its, key=its.get) == "fw"
    if parts:
        ok = [n for n in fewest if fewest[n] == "partan"]
        line = ("- **Seed 002, iteration ordering at 1e-4** (paper: FW > MFW >~ SWAP > PARTAN, "
                "PARTAN fewest on all six data sets): measured " + "; ".join(parts) + ". "
                + ("FW needs the most iterations everywhere; " if fw_most else "")
                + f"PARTAN needs the fewest on {len(ok)} of {len(fewest)} data sets"
                + (f" ({', '.join(ok)})" if ok else "")
                + ("." if len(ok) == len(fewest) else
                   ", SWAP or MFW on the others: the paper's ordering holds only in part."))
        fw_it = [by[(n, "fw")]["iterations"] / PAPER_T2[n]["fw"][2] for n in ("a9a", "w8a")
                 if (n, "fw") in by]
        if fw_it:
            line += (" FW's iteration count at 1e-4 is " + " and ".join(f"{x:.2f}" for x in fw_it)
                     + "x the paper's on a9a and w8a, the same order of magnitude: the absolute "
                     "eps means about the same on our K as on the paper's.")
        out.append(line)
    ratios = {n: by[(n, "fw")]["wall_s"] / by[(n, "partan")]["wall_s"] for n in names
              if (n, "fw") in by and (n, "partan") in by}
    iratios = {n: by[(n, "fw")]["iterations"] / by[(n, "partan")]["iterations"] for n in ratios}
    if ratios:
        common = [n for n in ratios if n in PAPER_T2]
        line = ("- **Seed 002, the 2.52x PARTAN speed-up** (mean of FW/PARTAN time ratios): "
                "measured " + ", ".join(f"{n} {ratios[n]:.2f}x" for n in ratios)
                + f", mean **{statistics.mean(ratios.values()):.2f}x** in time (iterations: "
                + ", ".join(f"{n} {iratios[n]:.2f}x" for n in iratios)
                + f", mean {statistics.mean(iratios.values()):.2f}x)")
        if common:
            mine = statistics.mean(ratios[n] for n in common)
            theirs = statistics.mean(PAPER_T2_ALL_RATIOS[n] for n in common)
            line += (f"; on {', '.join(common)} **{mine:.2f}x** against the paper's "
                     f"{theirs:.2f}x on the same data sets")
            if mine < 0.7 * theirs:
                cost = statistics.mean(
                    (by[(n, "partan")]["solver_s"] / by[(n, "partan")]["iterations"])
                    / (by[(n, "fw")]["solver_s"] / by[(n, "fw")]["iterations"]) for n in ratios)
                line += (". **Not reproduced in size**: PARTAN does save iterations over FW "
                         "(fewer than in the paper on these data sets), but a PARTAN iteration "
                         f"costs {cost:.2f}x an FW iteration here on average (the paper's cost "
                         "1.00-1.12x), which eats most of the saving")
            elif mine > 1.3 * theirs:
                line += ". Larger than the paper's"
            else:
                line += ". Reproduced within 30%"
        out.append(line + ".")
    sweep = c_sweep_summary(res)
    if sweep:
        out.append(sweep)
    # Table 3
    grow, tight, overtake, early, same = [], [], [], [], []
    for n in dict.fromkeys(r["dataset"] for r in deep):
        rs = {r["solver"]: r for r in deep if r["dataset"] == n}
        a, b, c = (_reached(rs["fw"], e) for e in (1e-3, 1e-4, 1e-5))
        if a and b:
            grow.append(f"{n} {b[0] / a[0]:.1f}x" + (f" then {c[0] / b[0]:.1f}x" if c else ""))
        eps = rs["fw"]["target_eps"]
        hits = {sv: _reached(rs[sv], eps) for sv in rs}
        its = {sv: (h[0] if h else rs[sv]["iterations"]) for sv, h in hits.items()}
        tight.append(f"{n} at {eps:g}: " + ", ".join(
            f"{SOLVER_NAMES[sv]} {'' if hits[sv] else '>'}{its[sv]}" for sv in DEEP_SOLVERS))
        first = None
        for e in EPS_GRID:
            if e < eps:
                break
            hm, hp = _reached(rs["away"], e), _reached(rs["partan"], e)
            # a capped PARTAN run only counts as slower if it ran past MFW's count
            if hm and ((hp and hm[0] < hp[0])
                       or (not hp and rs["partan"]["iterations"] >= hm[0])):
                first = e
                break
        pfirst = "-"
        if n in PAPER_T3:
            pm, pp = PAPER_T3[n]["away"][0], PAPER_T3[n]["partan"][0]
            pfirst = next((f"{e:g}" for j, e in enumerate(EPS_GRID) if pm[j] < pp[j]), "never")
        where = f"not down to {eps:g}" if first is None else f"{first:g}"
        overtake.append(f"{n} {where} (paper {pfirst})")
        if n in PAPER_T3:
            earlier = first is not None and (pfirst == "never" or first > float(pfirst))
            (early if earlier else same).append(n)
    if grow:
        out.append("- **Seed 002, Table 3:** FW's iterations grow per decade of eps by "
                   + ", ".join(grow) + " (paper: 7-11x, the O(1/eps) rate). Iterations at the "
                   "tightest eps (`>`: not reached within the cap or budget): "
                   + "; ".join(tight) + ". The largest eps at which MFW needs fewer "
                   "iterations than PARTAN: " + ", ".join(overtake) + ". In the paper PARTAN "
                   "leads MFW down to 1e-5 and is overtaken only at 1e-6 (never on w8a)"
                   + (f"; here MFW overtakes PARTAN earlier on {', '.join(early)}: our MFW "
                      "and SWAP need fewer iterations than the paper's at tight eps (compare "
                      "the Table 3 rows below), while PARTAN keeps an FW-like O(1/eps) tail"
                      if early else "")
                   + (f"; consistent with the paper on {', '.join(same)} as far as measured"
                      if same else "") + ".")
    # seed 000
    parts, mfw_w8a = [], []
    for n in dict.fromkeys(r["dataset"] for r in deep):
        rs = {r["solver"]: r for r in deep if r["dataset"] == n}
        eps = rs["fw"]["target_eps"]
        hits = {sv: _reached(rs[sv], eps) for sv in rs}
        if hits["swap"]:
            t_fw = hits["fw"][1] if hits["fw"] else rs["fw"]["solver_s"]
            t_mfw = hits["away"][1] if hits["away"] else rs["away"]["solver_s"]
            sign = "" if hits["fw"] else ">"
            parts.append(f"{n} (eps {eps:g}): SWAP {sign}{t_fw / hits['swap'][1]:.1f}x faster "
                         f"than FW, MFW {sign}{t_fw / t_mfw:.1f}x faster than FW, SWAP/MFW "
                         f"speed {t_mfw / hits['swap'][1]:.2f}")
        if n == "w8a":
            for e in EPS_GRID:
                hf, hm = _reached(rs["fw"], e), _reached(rs["away"], e)
                if hm:
                    mfw_w8a.append(f"{e:g}: " + (f"{hf[1] / hm[1]:.2f}" if hf else
                                                 f">{rs['fw']['solver_s'] / hm[1]:.2f}"))
    if parts:
        line = "- **Seed 000, SWAP vs FW and MFW** (time to the target eps): " + "; ".join(parts)
        if mfw_w8a:
            line += (". On w8a (the paper's Web case, where it finds MFW *slower* than FW) the "
                     "FW/MFW time ratio is " + ", ".join(mfw_w8a) + " (< 1 would be the "
                     "paper's finding)")
        sv_spread, acc_spread = [], []
        for n in dict.fromkeys(r["dataset"] for r in deep):
            rs = {r["solver"]: r for r in deep if r["dataset"] == n}
            svs = [rs[sv]["svs"] for sv in ("fw", "away", "swap", "swap2")]
            acc = [rs[sv]["accuracy"] for sv in ("fw", "away", "swap", "swap2")]
            sv_spread.append(f"{n} {min(svs)}-{max(svs)}")
            acc_spread.append(max(acc) - min(acc))
        line += (". Final SV counts of FW, MFW, SWAP, SWAP-2o: " + ", ".join(sv_spread)
                 + f"; their test accuracies differ by at most {max(acc_spread):.2f} points "
                 "(paper: equally accurate, similar model sizes).")
        out.append(line)
    # seed 001
    parts, unstable = [], []
    for n in dict.fromkeys(r["dataset"] for r in sfw):
        r1 = next(r for r in sfw if r["dataset"] == n and r["solver"] == "sfw"
                  and r["epochs"] == 1)
        ref = next(r for r in sfw if r["dataset"] == n and r["epochs"] is None)
        averaged = ""
        if "accuracy_avg_runs" in r1:
            averaged = (f", tail average {r1['accuracy_avg']:.2f} (runs "
                        f"{min(r1['accuracy_avg_runs']):.2f}-{max(r1['accuracy_avg_runs']):.2f})")
        parts.append(f"{n} last iterate {r1['accuracy']:.2f} (runs "
                     f"{min(r1['accuracy_runs']):.2f}-{max(r1['accuracy_runs']):.2f})"
                     f"{averaged}; paper {PAPER_SFW[n][2][0]:.2f}; converged L2-SVM "
                     f"{ref['accuracy']:.2f}, paper's SMO-L2 {PAPER_SFW[n][2][4]:.2f}")
        spread = max(r1["accuracy_runs"]) - min(r1["accuracy_runs"])
        if spread > 2.0:
            r2 = next(r for r in sfw if r["dataset"] == n and r["solver"] == "sfw"
                      and r["epochs"] == 2)
            inside = min(r1["accuracy_runs"]) <= PAPER_SFW[n][2][0] <= max(r1["accuracy_runs"])
            note = (f"on {n} the last iterate's one-epoch accuracy depends on the random order "
                    f"by {spread:.1f} points (the paper's single run is "
                    f"{'inside' if inside else 'outside'} that range); two epochs give "
                    f"{min(r2['accuracy_runs']):.2f}-{max(r2['accuracy_runs']):.2f}")
            if "accuracy_avg_runs" in r1:
                avg_spread = max(r1["accuracy_avg_runs"]) - min(r1["accuracy_avg_runs"])
                note += (f"; the tail average of the same runs (SVC's default) varies by "
                         f"{avg_spread:.2f} points and its mean is "
                         f"{r1['accuracy_avg'] - PAPER_SFW[n][2][0]:+.2f} from the paper's")
            unstable.append(note)
    if parts:
        out.append("- **Seed 001, one epoch of SFW** (mean of the random orders): "
                   + "; ".join(parts) + "." + (" The paper's algorithm (last iterate) is not a "
                       "stable reproduction: " + "; ".join(unstable) + ". One pass leaves the "
                       "last iterate's threshold to its last few steps; a single run, as in the "
                       "paper, cannot show this." if unstable else "")
                   + (" ijcnn1 here is a split of ijcnn1.val, not the paper's data, so its "
                      "level is not comparable." if "ijcnn1" in names else ""))
    # seed 004
    if ww:
        d = [r["accuracy"] - r["paper_accuracy"] for r in ww]
        out.append(f"- **Seed 004, Weston-Watkins accuracy** at Table 6's best C: within "
                   f"{max(abs(x) for x in d):.2f} points of the paper on "
                   f"{', '.join(r['dataset'] for r in ww)}.")
    if wwr:
        by_k = {}
        for r in wwr:
            if r["ratio@0.001"] is not None:
                by_k.setdefault((r["dataset"], r["k"]), []).append(r["ratio@0.001"])
        out.append("- **Seed 004, Walrus vs iterative** (time to 1e-3 of the first gap, ratio "
                   "< 1: Walrus faster): " + ", ".join(
                       f"{n} (k = {k}) {statistics.median(v):.2f}" for (n, k), v in
                       by_k.items()) + " (paper: equal at small k, Walrus faster as k "
                   "grows).")
    if lasso:
        same_rows = [r for r in lasso if r["max_abs_dw"] < 1e-9]
        other = [r for r in lasso if r["max_abs_dw"] >= 1e-9]
        line = (f"- **Lasso / SVM equivalence:** in {len(same_rows)} of {len(lasso)} runs ("
                f"{sum(r['iterations'] for r in same_rows)} iterations) the iterates of the two "
                f"routes differ by at most "
                f"{max((r['max_abs_dw'] for r in same_rows), default=0):.1e} and the gaps by a "
                f"relative {max((r['max_rel_dgap'] for r in same_rows), default=0):.1e}: the "
                "same algorithm step for step, up to rounding.")
        if other:
            line += (" Exception: " + ", ".join(f"{r['solver']} on {r['problem']}"
                                                 for r in other)
                     + ", where the routes part (max |dw| "
                     + ", ".join(f"{r['max_abs_dw']:.1e}" for r in other) + ") but both "
                     "converge (final gaps " + ", ".join(
                         f"{r['final_gap_l1ball']:.1e} / {r['final_gap_svm']:.1e}"
                         for r in other) + "). This is not a bug: near the solution the "
                     "active atoms' gradient entries become equal up to rounding, and the two "
                     "routes, which compute the gradient by different formulas, break that tie "
                     "for the away atom differently (checked by hand on the first differing "
                     "step); plain FW has no away atom and stays identical.")
        out.append(line)
    out.append("")
    return out


def build_report(res: dict) -> str:  # noqa: C901 - one linear report writer
    meta, t2, deep, sfw, ww, wwr, lasso = (res["machine"], res["table2"], res["deep"],
                                          res["sfw"], res["ww"], res["ww_ratios"], res["lasso"])
    quick = res["quick"]
    L = []
    add = L.append
    add("# Reproduction report (seeds 000-004)")
    add("")
    if quick:
        add("**Smoke run (`--quick`): subsets of the data and short caps; these numbers are not "
            "the report.**")
        add("")
    add("Every number on this page is written by `benchmarks/reproduce.py` from its own "
        "measurements (raw values in `benchmarks/results/reproduction.json`), next to the "
        "numbers the papers print, except section 6's, which `benchmarks/svm_large.py` "
        "measures (`benchmarks/results/reproduction_table4.md`, included as it stands). "
        "Regenerate it with")
    add("")
    add("```bash")
    add(res["command"])
    add("```")
    add("")
    add(f"Machine: {meta['cpu']}, {meta['cores']} cores (shared with other jobs), torch "
        f"{meta['torch']} on the CPU with {meta['torch_threads']} threads, Python "
        f"{meta['python']}. Load average at start {res['load_start']}, at the end "
        f"{res['load_end']}. Whole run: {res['total_s'] / 60:.1f} minutes. Times are wall "
        "seconds of this shared machine; the papers' are CPU seconds of 2009-2015 C++ code, "
        "so only ratios between solvers measured in the same run are comparable.")
    for run in res.get("partial_runs", []):
        add("")
        add(f"Re-measured later on the same machine: `{run['command']}` ({run['total_s'] / 60:.1f}"
            f" minutes, load {run['load_start']} -> {run['load_end']}); those sections' numbers "
            "come from that run, the rest from the run above.")
    add("")
    L.extend(summary_lines(res))

    # ---- section 1
    add("## 1. Seed 002 (PARTAN-FW), Table 2: FW, MFW, SWAP, PARTAN at eps = 1e-4")
    add("")
    add("**Setting.** The L2-SVM dual in the CVM form, `min 1/2 a'Ka` over the unit simplex with "
        "`K_ij = y_i y_j (k(x_i, x_j) + 1) + delta_ij / C` (what `torchfw.SVC` builds; the paper "
        "cites CVM for K and does not print it). Stopping rule: the **absolute** Frank-Wolfe "
        "gap `a'Ka - min_i (Ka)_i <= 1e-4` (SVC's own `tol` is relative to the margin, so the "
        "script swaps SVC's solver factory for one with `tol=1e-4, rtol=0`; kernel, initial "
        "point and model recovery are SVC's). Gaussian kernel `exp(-gamma |x - z|^2)` with "
        "`1/gamma` = the mean squared distance between training points (CVM's heuristic, which "
        "the paper cites). **C = 1** everywhere: the paper tuned C on a 70/30 split but does not "
        "report the values (the ordering against C, with that split, follows the table). "
        "Initial point: the exact solution on 20 random training points "
        "(SVC's default). Kernel values in float32, solver state in float64, 200 MB column "
        "cache. One fit per cell; the time of the same configuration is measured a second time "
        "in the deeper runs of the Table 3 section below.")
    add("")
    add("**Data.** a9a and w8a: the LIBSVM files with their official test sets, as in the paper. "
        "ijcnn1: only `ijcnn1.val` (14,990 rows) is available here, so a seeded 70/30 split of "
        "it (10,493 train / 4,497 test) stands in for the paper's 49,990 / 91,701; its numbers "
        "are not directly comparable with the paper's. svmguide1 (seed 003's data set, "
        "standardized as seed 003 does) has no Table 2 numbers and is an extra.")
    add("")
    add("| dataset | m | solver | acc % (paper) | time s (paper) | iterations (paper) | "
        "SVs (paper) | ms/iter (paper) |")
    add("|---|---|---|---|---|---|---|---|")
    for row in t2:
        p = PAPER_T2.get(row["dataset"], {}).get(row["solver"])
        pm = None if p is None else 1000 * p[1] / p[2]
        ms = 1000 * row["solver_s"] / max(row["iterations"], 1)
        add(f"| {row['dataset']} | {row['m']} | {SOLVER_NAMES[row['solver']]} | "
            f"{row['accuracy']:.2f} ({f2(p and p[0])}) | {row['wall_s']:.1f} "
            f"({f2(p and p[1], '.0f')}) | {row['iterations']} ({f2(p and p[2], '.0f')}) | "
            f"{row['svs']} ({f2(p and p[3], '.0f')}) | {ms:.2f} ({f2(pm)}) |")
    add("")
    add("Time = wall seconds of `fit` (includes the kernel set-up and the 20-point start); "
        "ms/iter uses the solver's own clock. Final gaps and the dual values are in the JSON.")
    add("")
    # ordering and speed-ups
    add("**Iteration ordering** (paper: FW > MFW >~ SWAP > PARTAN on all six data sets).")
    add("")
    add("| dataset | measured ordering (most iterations first) | paper's ordering | "
        "PARTAN speed-up over FW: time (paper) | iterations (paper) |")
    add("|---|---|---|---|---|")
    ratios_t, ratios_i = {}, {}
    for name in dict.fromkeys(r["dataset"] for r in t2):
        rs = {r["solver"]: r for r in t2 if r["dataset"] == name}
        if not all(s in rs for s in TABLE2_SOLVERS):
            continue
        its = {s: rs[s]["iterations"] for s in TABLE2_SOLVERS}
        rt = rs["fw"]["wall_s"] / rs["partan"]["wall_s"]
        ri = its["fw"] / its["partan"]
        ratios_t[name], ratios_i[name] = rt, ri
        p = PAPER_T2.get(name)
        pord = ordering({s: p[s][2] for s in TABLE2_SOLVERS}) if p else "-"
        pt = p and p["fw"][1] / p["partan"][1]
        pi = p and p["fw"][2] / p["partan"][2]
        add(f"| {name} | {ordering(its)} | {pord} | {rt:.2f} ({f2(pt)}) | {ri:.2f} "
            f"({f2(pi)}) |")
    add("")
    common = [n for n in ratios_t if n in PAPER_T2]
    res["summary"]["partan_mean_time_ratio"] = statistics.mean(ratios_t.values()) \
        if ratios_t else None
    if ratios_t:
        paper_all = statistics.mean(PAPER_T2_ALL_RATIOS.values())
        line = (f"**The 2.52x claim.** The paper's 2.52x is the arithmetic mean of its six "
                f"FW/PARTAN time ratios (recomputed: {paper_all:.3f}). Here the mean over "
                f"{len(ratios_t)} data sets ({', '.join(ratios_t)}) is "
                f"**{statistics.mean(ratios_t.values()):.2f}x** in time and "
                f"{statistics.mean(ratios_i.values()):.2f}x in iterations")
        if common:
            mc = statistics.mean(ratios_t[n] for n in common)
            pc = statistics.mean(PAPER_T2_ALL_RATIOS[n] for n in common)
            line += (f"; over the data sets both have ({', '.join(common)}) it is "
                     f"**{mc:.2f}x** against the paper's {pc:.2f}x on the same three")
            res["summary"]["partan_mean_time_ratio_common"] = mc
            res["summary"]["paper_mean_time_ratio_common"] = pc
        add(line + ".")
        add("")

    for line in c_sweep_report(res):
        add(line)

    # ---- Table 3 and section 2 from the deep runs
    add("### Table 3: iterations against eps")
    add("")
    add("One run per solver down to the target eps (or until the time cap of "
        f"{res['config']['cap']:.0f} s per run, or SVC's default budget of 100 m iterations), "
        "C = 1 and the kernel width as above; the "
        "iterations and seconds at which the gap first fell below each eps are read off the "
        "run's gap history (recorded every 10 iterations, the solver's check interval, so they "
        "are the iterations a run with that eps would stop at). `>N` = not reached within the "
        "cap or budget after N iterations. Paper's numbers in parentheses.")
    add("")
    for name in dict.fromkeys(r["dataset"] for r in deep):
        rs = [r for r in deep if r["dataset"] == name]
        eps_list = [e for e in EPS_GRID if e >= rs[0]["target_eps"]]
        add(f"**{name}** (target eps {rs[0]['target_eps']:g}):")
        add("")
        add("| solver | " + " | ".join(f"iter @ {e:g}" for e in eps_list) + " | "
            + " | ".join(f"s @ {e:g}" for e in eps_list) + " |")
        add("|---|" + "---|" * (2 * len(eps_list)))
        for r in rs:
            p = PAPER_T3.get(name, {}).get(r["solver"])
            cells_i, cells_t = [], []
            for j, e in enumerate(EPS_GRID):
                if e not in eps_list:
                    continue
                hit = r["reached"].get(f"{e:g}")
                pi = f" ({p[0][j]:.3g})" if p else ""
                pt = f" ({p[1][j]:.3g})" if p else ""
                if hit:
                    cells_i.append(f"{hit[0]}{pi}")
                    cells_t.append(f"{hit[1]:.1f}{pt}")
                else:
                    cells_i.append(f">{r['iterations']}{pi}")
                    cells_t.append(f">{r['solver_s']:.0f}{pt}")
            add(f"| {SOLVER_NAMES[r['solver']]} | " + " | ".join(cells_i) + " | "
                + " | ".join(cells_t) + " |")
        add("")
    for name, rel in res["plots"].items():
        add(f"![duality gap against iterations and time on {name}]({rel})")
        add("")
    add("## 2. Seed 000 (SWAP): SWAP against FW and MFW")
    add("")
    add("Seed 000 reports no per-data-set numbers (figures only); its claims are ratios: on "
        "Adult (a1a-a7a) SWAP is about 10x faster than FW (median speed-ups over CVM 15.5x vs "
        "1.45x) and MFW is faster than FW; on Web (w1a-w8a) MFW is *slower* than FW and SWAP is "
        "competitive with FW (about 2.4x faster on w8a: 250x vs 106x over CVM); FW, MFW and "
        "SWAP are equally accurate, SWAP-2o is more accurate, model sizes are similar; all at "
        "eps = 1e-6. The runs above (same QP for every solver, 20-point start as in seed 000) "
        "give the time ratios at each eps reached; a9a stands in for Adult and w8a for Web "
        "(seed 000 uses the smaller a1a-a7a, which are not available here). Seed 000 writes "
        "the kernel as `exp(-|x - z|^2 / (2 sigma^2))` with sigma^2 the mean squared distance, "
        "a factor 2 away from the width used here; not rerun.")
    add("")
    add("| dataset | eps | time FW / SWAP | time FW / MFW | time MFW / SWAP | "
        "time FW / SWAP-2o | iterations FW / SWAP | SVs at the end FW, MFW, SWAP, SWAP-2o | "
        "acc % at the end FW, MFW, SWAP, SWAP-2o |")
    add("|---|---|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["dataset"] for r in deep):
        rs = {r["solver"]: r for r in deep if r["dataset"] == name}
        for e in EPS_GRID:
            key = f"{e:g}"
            if key not in rs["fw"]["reached"]:
                continue

            def t(s, key=key, rs=rs):
                hit = rs[s]["reached"].get(key)
                return (hit[1], False) if hit else (rs[s]["solver_s"], True)

            def ratio(a, b, t=t):
                (ta, ca), (tb, cb) = t(a), t(b)
                if ca and cb:
                    return "both capped"
                if ca:
                    return f">{ta / tb:.2f}"
                if cb:
                    return f"<{ta / tb:.2f}"
                return f"{ta / tb:.2f}"

            def iratio(a, b, key=key, rs=rs):
                ha, hb = rs[a]["reached"].get(key), rs[b]["reached"].get(key)
                if ha and hb:
                    return f"{ha[0] / hb[0]:.2f}"
                return "-" if not hb else f">{rs[a]['iterations'] / hb[0]:.2f}"

            add(f"| {name} | {e:g} | {ratio('fw', 'swap')} | {ratio('fw', 'away')} | "
                f"{ratio('away', 'swap')} | {ratio('fw', 'swap2')} | {iratio('fw', 'swap')} | "
                + (", ".join(str(rs[s]["svs"]) for s in ("fw", "away", "swap", "swap2"))
                   if e == rs["fw"]["target_eps"] else "") + " | "
                + (", ".join(f"{rs[s]['accuracy']:.2f}" for s in ("fw", "away", "swap",
                                                                   "swap2"))
                   if e == rs["fw"]["target_eps"] else "") + " |")
    add("")
    add("Ratios > 1: the second solver is faster. `>x`: the first solver hit the cap, so the "
        "true ratio is larger. SVs and accuracy are those of each run's final iterate (target "
        "eps, or the cap).")
    add("")

    # ---- section 3
    add("## 3. Seed 001: one-epoch stochastic FW (SFW) and MSFW")
    add("")
    add("`SVC(solver=\"sfw\" | \"msfw\")` streams the training set once in a random order "
        "(`max_iter = m` is one epoch, the default; `2 m` for two). Kernel width and C are the "
        "paper's Table 2 values, `gamma = 1/(2 sigma^2)`; the paper's diagonal is "
        "`delta_ij/(2C)` where SVC's is `delta_ij/C`, so SVC gets `C = 2 C_paper` (the same "
        "problem). Raw features (svmguide1's sigma = 20 implies unscaled data). Mean accuracy "
        f"over {res['config']['sfw_seeds']} random orders, [min-max] in brackets, paper in "
        "parentheses; the paper reports single runs. The reference column is SWAP run to a "
        f"relative gap of {res['config']['ref_tol']} on the same problem (the exact L2-SVM of the "
        "paper's SMO-L2 column, up to its unregularized bias). ijcnn1 is the 70/30 split of "
        "ijcnn1.val (the paper used the 35,000-row ijcnn1.tr and the 91,701-row test set).")
    add("")
    add("Two models per run: the **last iterate**, seed 001's algorithm as printed "
        "(`average=False`), and the **tail average**, the mean of the iterates of the second "
        "half of the run (`average=True`, SVC's default; not in the paper, see the SVC guide). "
        "SVs are those of the tail average (the same as the last iterate's for SFW, which never "
        "drops a point).")
    add("")
    add("| dataset | gamma | C (paper) | model | SFW 1 ep | SFW 2 ep | MSFW 1 ep | MSFW 2 ep | "
        "reference L2-SVM | SVs SFW / MSFW 1 ep |")
    add("|---|---|---|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["dataset"] for r in sfw):
        rs = {(r["solver"], r["epochs"]): r for r in sfw if r["dataset"] == name}
        pa, psv = PAPER_SFW[name][2], PAPER_SFW[name][3]
        ref = rs[("swap (reference)", None)]
        keys = (("sfw", 1), ("sfw", 2), ("msfw", 1), ("msfw", 2))
        for model, runs_key, mean_key in (("last iterate", "accuracy_runs", "accuracy"),
                                          ("tail average", "accuracy_avg_runs", "accuracy_avg")):
            if runs_key not in rs[keys[0]]:
                continue
            cells = [f"{rs[k][mean_key]:.2f} [{min(rs[k][runs_key]):.2f}-"
                     f"{max(rs[k][runs_key]):.2f}] ({v:.2f})"
                     for k, v in zip(keys, pa[:4], strict=True)]
            add(f"| {name} | {ref['gamma']:.4g} | {ref['C_paper']:g} | {model} | "
                + " | ".join(cells) + f" | {ref['accuracy']:.2f} ({pa[4]:.2f}) | "
                f"{rs[('sfw', 1)]['svs']:.0f} / {rs[('msfw', 1)]['svs']:.0f} "
                f"({psv[0]} / {psv[1]}) |")
    add("")
    add("Times (wall, one epoch): " + "; ".join(
        f"{r['dataset']} {SOLVER_NAMES[r['solver']]} {r['wall_s']:.1f} s"
        for r in sfw if r["epochs"] == 1) + ".")
    add("")

    # ---- section 4
    add("## 4. Seed 004: Weston-Watkins SVM (Walrus)")
    add("")
    add("`WestonWatkinsSVC(C, tol=0.0009)` at the best C of the paper's Table 6, functions of "
        "`benchmarks/ww_vs_liblinear.py` (which also times LIBLINEAR; see "
        f"`benchmarks/results/ww.md`). Median over {res['config']['ww_seeds']} random sweep "
        "orders.")
    add("")
    add("| dataset | n | k | C | accuracy % | paper Table 6 % | difference (pt) | CPU s | "
        "epochs |")
    add("|---|---|---|---|---|---|---|---|---|")
    for r in ww:
        add(f"| {r['dataset']} | {r['n']} | {r['k']} | {r['C']:g} | {r['accuracy']:.2f} | "
            f"{r['paper_accuracy']:.2f} | {r['accuracy'] - r['paper_accuracy']:+.2f} | "
            f"{r['cpu_s']:.2f} | {', '.join(map(str, r['epochs']))} |")
    add("")
    add("**Walrus against the iterative (Shark-style) subproblem solver**, the paper's Figure 2 "
        "metric `ET^delta_Walrus / ET^delta_iterative` (time to the first epoch with gap <= "
        "delta x the first epoch's gap; < 1: Walrus faster). Paper: equal on small k, Walrus "
        "faster as k grows (sector, k = 105), at least as fast everywhere except satimage, "
        "faster early and possibly slower late.")
    add("")
    add("| dataset | k | seed | delta = 0.1 | delta = 0.01 | delta = 0.001 |")
    add("|---|---|---|---|---|---|")
    for r in wwr:
        add(f"| {r['dataset']} | {r['k']} | {r['seed']} | {f2(r['ratio@0.1'])} | "
            f"{f2(r['ratio@0.01'])} | {f2(r['ratio@0.001'])} |")
    add("")

    # ---- section 5
    add("## 5. The Lasso / SVM equivalence (seeds 002-003, Jaggi's reduction)")
    add("")
    add("The constrained Lasso `min 1/(2n) |y - Xw - b|^2, |w|_1 <= t` solved by the same "
        "Frank-Wolfe variant twice: on the L1 ball (`method=\"l1ball\"`) and as an SVM dual over "
        "the 2p signed, shifted atoms (`method=\"svm\"`, `torchfw.lasso.equivalence`); the SVM route's "
        "weights are mapped back to `w` after every iteration (`gap_curve` of "
        "`examples/lasso_svm_equivalence.py`). The theory says the two runs pick the same atoms "
        "and take the same steps, so the iterates and gaps agree up to rounding.")
    add("")
    add("| problem | radius t | solver | iterations | max abs dw over all iterates | "
        "max abs d(gap) | max relative d(gap) | final gap l1ball / svm | nonzeros at the end "
        "l1ball / svm |")
    add("|---|---|---|---|---|---|---|---|---|")
    for r in lasso:
        add(f"| {r['problem']} | {r['radius']:g} | {r['solver']} | {r['iterations']} | "
            f"{r['max_abs_dw']:.1e} | {r['max_abs_dgap']:.1e} | {r['max_rel_dgap']:.1e} | "
            f"{r['final_gap_l1ball']:.3e} / {r['final_gap_svm']:.3e} | {r['support_l1ball']} / "
            f"{r['support_svm']} |")
    add("")
    # section 6 is measured by svm_large.py (hours of runs), kept beside the results and
    # carried into every regenerated report rather than lost with it
    table4 = RESULTS / "reproduction_table4.md"
    if not quick and table4.exists():
        add("")
        add(table4.read_text().rstrip("\n"))
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="subsets and short caps (smoke run)")
    ap.add_argument("--cap", type=float, default=None,
                    help="time cap per deep run in seconds (default 60; 8 with --quick)")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=None,
                    help="measure only these sections; the others come from the saved results "
                         "JSON (benchmarks/results/reproduction.json)")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="rewrite the Markdown from a saved results JSON without measuring")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        res = json.loads(args.from_json.read_text())
        out_md = RESULTS / "reproduction_quick.md" if res["quick"] else DOCS / "reproduction.md"
        out_md.write_text(build_report(res))
        print(f"wrote {out_md.relative_to(ROOT)} from {args.from_json}")
        return
    quick = args.quick
    cfg = {
        "quick": quick,
        "datasets": ["svmguide1", "ijcnn1", "a9a", "w8a"],
        "deep": {"svmguide1": 1e-6, "ijcnn1": 1e-6, "a9a": 1e-5, "w8a": 1e-5},
        "c_sweep": ["a9a", "w8a"] if not quick else ["svmguide1"],
        "c_grid": [0.1, 0.3, 1.0, 3.0, 10.0, 30.0] if not quick else [0.3, 3.0],
        "cap": args.cap if args.cap is not None else (8.0 if quick else 60.0),
        "sfw_datasets": ["svmguide1", "ijcnn1", "a9a"],
        "sfw_seeds": 1 if quick else 5,
        "ref_tol": 0.05 if quick else 0.01,
        "ww_datasets": ["dna", "satimage"] if quick else ["dna", "satimage", "letter",
                                                          "sector"],
        "ww_seeds": 1 if quick else 3,
        "lasso_iter": 50 if quick else 300,
    }
    if quick:
        cfg["deep"] = {"svmguide1": 1e-5, "ijcnn1": 1e-5}
    # a smoke run writes next to the results, never into docs/ (the docs build would pick it up)
    out_md = RESULTS / "reproduction_quick.md" if quick else DOCS / "reproduction.md"
    img_dir = RESULTS if quick else IMG
    suffix = "_quick" if quick else ""
    command = "python benchmarks/reproduce.py" + (" --quick" if quick else "") + \
        (f" --cap {args.cap:g}" if args.cap is not None else "")
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    only = set(args.only or SECTIONS)
    if args.only:  # the other sections, and their provenance, from the last full run
        res = json.loads((RESULTS / f"reproduction{suffix}.json").read_text())
        res.setdefault("partial_runs", []).append(
            {"command": command + " --only " + " ".join(args.only), "machine": machine_info(),
             "load_start": load_start})
    else:
        res = {"command": command, "quick": quick, "config": cfg, "machine": machine_info(),
               "load_start": load_start, "summary": {}}
    for section, keys in (("sfw", ("sfw_datasets", "sfw_seeds")),
                          ("c_sweep", ("c_sweep", "c_grid"))):
        if section in only:
            res["config"].update({k: cfg[k] for k in keys})
    warm_up()
    if "table2" in only:
        res["table2"] = section_table2(cfg)
    if "c_sweep" in only:
        res["c_sweep"] = section_c_sweep(cfg)
    if "deep" in only:
        deep, curves = section_deep(cfg)
        res["deep"] = deep
        res["plots"] = {}
        for name in ("a9a", "ijcnn1") if not quick else ("ijcnn1",):
            png = img_dir / f"reproduction_{name}_gap{suffix}.png"
            if any(k[0] == name for k in curves) and plot_curves(curves, name, png):
                res["plots"][name] = os.path.relpath(png, out_md.parent)
    if "sfw" in only:
        res["sfw"] = section_sfw(cfg)
    if "ww" in only:
        res["ww"], res["ww_ratios"] = section_ww(cfg)
    if "lasso" in only:
        res["lasso"] = section_lasso(cfg)
    elapsed = time.perf_counter() - t0
    if args.only:
        res["partial_runs"][-1].update(total_s=elapsed, load_end=", ".join(
            f"{x:.2f}" for x in os.getloadavg()))
    else:
        res["total_s"] = elapsed
        res["load_end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    report = build_report(res)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_md.write_text(report)
    (RESULTS / f"reproduction{suffix}.json").write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {out_md.relative_to(ROOT)} and benchmarks/results/reproduction{suffix}.json "
          f"in {elapsed / 60:.1f} min")


if __name__ == "__main__":
    main()
