"""LIBSVM's default model search (tools/grid.py) with torchfw and LIBSVM side by side.

grid.py searches log2 C from -5 to 15 step 2 and log2 gamma from 3 to -15 step -2 (110 points)
by 5-fold cross-validation accuracy. This script runs that grid on

* ``svmguide1-raw``: svmguide1's 3,089 training examples, features as distributed;
* ``svmguide1-scaled``: the same, each feature scaled to [-1, 1] from the training minimum and
  maximum, as ``svm-scale -l -1 -u 1`` does (a constant feature is left out of the scaling:
  set to 0, which svm-scale writes as absent);
* ``a9a-5000``: 5,000 examples of a9a drawn with a fixed seed (0/1 features, no scaling);

with LIBSVM (scikit-learn's ``SVC``, which is LIBSVM 3.x, at LIBSVM's C, ``tol=1e-3``,
shrinking) and :class:`torchfw.SVC` at 2C (the L2-SVM at 2C is LIBSVM's C on LIBLINEAR's
scale; see the SVC guide, "What C means") with its defaults, on the same stratified folds
(scikit-learn's ``StratifiedKFold(5, shuffle=True, random_state=0)``; grid.py's ``-v 5`` draws
its own random stratified folds). Per grid point: whether any of torchfw's five fits raised a
``ConvergenceWarning``, the CV accuracy of both, the time of both (five fits plus
predictions); then totals and the best point of each.

Usage::

    python benchmarks/svm_grid.py                          # everything (long on 2 cores)
    python benchmarks/svm_grid.py --datasets svmguide1-raw --coarse
    python benchmarks/svm_grid.py --c 15 11 7 --gamma -13 -9   # chosen points
    python benchmarks/svm_grid.py --table      # single fits of the cases that crawled
    python benchmarks/svm_grid.py --loss hinge --coarse   # torchfw's L1-SVM at LIBSVM's C

``--coarse`` keeps every other grid value (log2 C -5, -1, 3, 7, 11, 15; log2 gamma 3, -1, -5,
-9, -13: 30 points). Results go to ``benchmarks/results/svm_grid_<machine>.md`` and ``.json``
(``--machine``, default the CPU's tag and its core count, e.g. ``epyc2``; ``--out``
overrides the stem), rewritten after every point; ``--resume`` keeps the points already there
and runs the others (an interrupted run, or another dataset into the same files);
``--combine STEM ...`` writes the datasets of several such files (runs of one dataset each, side
by side in separate processes) into one.

``--loss hinge`` compares LIBSVM's own model: :class:`torchfw.SVC` with ``loss="hinge"`` (the
L1-SVM, trained by pairwise Frank-Wolfe steps with LIBSVM's pair selection, ``tol`` 1e-3 as
LIBSVM) at LIBSVM's C, instead of the L2-SVM at 2C; the files are then
``svm_grid_hinge_<machine>`` (``svm_grid_hinge_table_<machine>`` for ``--table``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import load_libsvm  # noqa: E402
from _machine import cpu_model, machine_header, machine_tag  # noqa: E402

DATASETS = ("svmguide1-raw", "svmguide1-scaled", "a9a-5000")
LOG2C = tuple(range(-5, 16, 2))
LOG2G = tuple(range(3, -16, -2))


def svm_scale(X: np.ndarray) -> np.ndarray:
    """Features to [-1, 1] from their minimum and maximum (svm-scale's default)."""
    lo, hi = X.min(0), X.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    out = -1.0 + 2.0 * (X - lo) / span
    out[:, hi <= lo] = 0.0
    return out


def load(name: str):
    """``(X, y)`` of a grid dataset, dense float64."""
    if name.startswith("svmguide1"):
        d = load_libsvm("svmguide1")
        X = d.X_train.to_dense().numpy().astype(np.float64)
        y = d.y_train.numpy()
        return (svm_scale(X) if name.endswith("scaled") else X), y
    if name == "a9a-5000":
        d = load_libsvm("a9a")
        rng = np.random.default_rng(0)
        rows = np.sort(rng.choice(d.X_train.shape[0], 5000, replace=False))
        X = d.X_train.to_dense().numpy().astype(np.float64)[rows]
        return X, d.y_train.numpy()[rows]
    raise ValueError(f"unknown dataset {name!r}; expected one of {DATASETS}")


def torchfw_model(C, gamma, loss="squared_hinge", kernel="rbf"):
    """torchfw's model compared with LIBSVM's at LIBSVM's ``C``: the L2-SVM at 2C (its
    equivalent on LIBLINEAR's scale), or with ``loss="hinge"`` LIBSVM's L1-SVM at C."""
    from torchfw import SVC

    if loss == "hinge":
        return SVC(kernel=kernel, C=C, gamma=gamma, loss="hinge", random_state=0)
    return SVC(kernel=kernel, C=2 * C, gamma=gamma, random_state=0)


def cv_point(X, y, folds, C, gamma, loss="squared_hinge"):
    """Both libraries' CV accuracy and time at one grid point, and torchfw's warnings."""
    from sklearn.svm import SVC as LibSVC

    from torchfw.exceptions import ConvergenceWarning

    out = {}
    for lib in ("libsvm", "torchfw"):
        correct = 0
        warned = 0
        iters = []
        t0 = time.perf_counter()
        for train, test in folds:
            if lib == "libsvm":
                model = LibSVC(C=C, gamma=gamma)
                model.fit(X[train], y[train])
            else:
                model = torchfw_model(C, gamma, loss)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    model.fit(X[train], y[train])
                warned += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
                iters.append(int(np.max(model.n_iter_)))
            correct += int((model.predict(X[test]) == y[test]).sum())
        out[lib] = {"accuracy": 100.0 * correct / len(y), "seconds": time.perf_counter() - t0}
        if lib == "torchfw":
            out[lib].update(warnings=warned, max_n_iter=max(iters))
    return out


def run(args, stem: Path) -> dict:
    """The grid of ``args``; the results files ``stem``.md/.json are rewritten after every
    point, so that an interrupted run keeps what it measured and ``--resume`` continues it."""
    from sklearn.model_selection import StratifiedKFold

    log2c = args.c if args.c else (LOG2C[::2] if args.coarse else LOG2C)
    log2g = args.gamma if args.gamma else (LOG2G[::2] if args.coarse else LOG2G)
    command = "python benchmarks/svm_grid.py " + " ".join(sys.argv[1:])
    previous = stem.with_suffix(".json")
    if args.resume and previous.exists():
        report = json.loads(previous.read_text())
        report["meta"].setdefault("resumed", []).append(
            {"load_average": list(os.getloadavg()), "command": command})
    else:
        report = {"meta": {"cpu": cpu_model(), "cores": os.cpu_count(),
                           "load_average_start": list(os.getloadavg()), "command": command,
                           "loss": args.loss},
                  "datasets": {}}
    # Warm-up: load (or compile) the compiled kernels once, outside every timing: the whole
    # matrix's path (300 examples) and the row cache's (1,200: a binary problem of 1,000 or
    # more), which every fold of these sets takes.
    Xw, yw = load(args.datasets[0])
    for size in (300, 1200):
        rows = np.random.default_rng(0).choice(len(yw), min(size, len(yw)), replace=False)
        torchfw_model(2.0 ** 15, 2.0 ** -13, args.loss).fit(Xw[rows], yw[rows])
    for name in args.datasets:
        X, y = load(name)
        folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
        entry = report["datasets"].setdefault(name, {"m": int(X.shape[0]),
                                                     "d": int(X.shape[1]), "points": []})
        points = entry["points"]
        done = {(p["log2c"], p["log2g"]) for p in points}
        for lc in log2c:
            for lg in log2g:
                if (lc, lg) in done:
                    continue
                r = cv_point(X, y, folds, 2.0 ** lc, 2.0 ** lg, args.loss)
                r.update(log2c=lc, log2g=lg)
                points.append(r)
                write(report, stem)
                print(f"{name:17s} log2C={lc:3d} log2g={lg:3d}  LIBSVM {r['libsvm']['accuracy']:6.2f}% "
                      f"{r['libsvm']['seconds']:7.2f}s  torchfw {r['torchfw']['accuracy']:6.2f}% "
                      f"{r['torchfw']['seconds']:7.2f}s  warn={r['torchfw']['warnings']} "
                      f"iters={r['torchfw']['max_n_iter']}", flush=True)
    return report


def combine(stems: list[Path]) -> dict:
    """One report of the datasets of several results files (the first one's machine; each
    run's command and load kept under ``meta["runs"]``)."""
    reports = [json.loads(stem.with_suffix(".json").read_text()) for stem in stems]
    meta = dict(reports[0]["meta"])
    meta["runs"] = [r["meta"] for r in reports]
    meta["command"] = " ; ".join(r["meta"]["command"] for r in reports)
    datasets: dict = {}
    for r in reports:
        datasets.update(r["datasets"])
    return {"meta": meta, "datasets": datasets}


def write(report, stem: Path) -> str:
    """``stem``.json (the report) and ``stem``.md (its tables); returns the Markdown."""
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1))
    text = markdown(report)
    stem.with_suffix(".md").write_text(text)
    return text


def summary(points) -> dict:
    lib = [p["libsvm"] for p in points]
    tfw = [p["torchfw"] for p in points]
    diff = [t["accuracy"] - s["accuracy"] for s, t in zip(lib, tfw, strict=True)]
    best_l = max(points, key=lambda p: p["libsvm"]["accuracy"])
    best_t = max(points, key=lambda p: p["torchfw"]["accuracy"])
    return {"points": len(points), "warned": sum(t["warnings"] > 0 for t in tfw),
            "worst_diff": min(diff), "below_half_point": sum(d < -0.5 for d in diff),
            "libsvm_seconds": sum(s["seconds"] for s in lib),
            "torchfw_seconds": sum(t["seconds"] for t in tfw),
            "best_libsvm": (best_l["log2c"], best_l["log2g"], best_l["libsvm"]["accuracy"]),
            "best_torchfw": (best_t["log2c"], best_t["log2g"], best_t["torchfw"]["accuracy"])}


def markdown(report) -> str:
    lines = ["# LIBSVM's default grid (grid.py): torchfw against LIBSVM", ""]
    lines += machine_header(report["meta"], report["meta"]["command"])
    if len(report["meta"].get("runs", [])) > 1:  # combined: each run's own start load
        lines += ["Runs (one process each): " + "; ".join(
            f"`{r['command'].split('svm_grid.py ')[-1]}` from load "
            f"{', '.join(f'{x:.2f}' for x in r['load_average_start'])}"
            for r in report["meta"]["runs"]) + ".", ""]
    model = ("torchfw `SVC(loss='hinge')` at C (LIBSVM's L1-SVM)"
             if report["meta"].get("loss") == "hinge" else "torchfw at 2C (its L2-SVM)")
    lines += ["5-fold CV accuracy (%) on the same stratified folds; time = five fits and their "
              f"predictions. {model}, LIBSVM (scikit-learn's SVC) at C; "
              "timings on a shared 2-core machine under load from other jobs: compare ratios.",
              "", "## Totals", "",
              "| data | points | torchfw ConvergenceWarnings | points > 0.5 below LIBSVM | "
              "worst difference | LIBSVM time | torchfw time | best (log2C, log2g, %) LIBSVM | "
              "torchfw |", "|---|---|---|---|---|---|---|---|---|"]
    for name, d in report["datasets"].items():
        s = summary(d["points"])
        lines.append(f"| {name} ({d['m']} x {d['d']}) | {s['points']} | {s['warned']} | "
                     f"{s['below_half_point']} | {s['worst_diff']:+.2f} | "
                     f"{s['libsvm_seconds']:.1f} s | {s['torchfw_seconds']:.1f} s | "
                     f"{s['best_libsvm']} | {s['best_torchfw']} |")
    for name, d in report["datasets"].items():
        lines += ["", f"## {name}", "",
                  "| log2 C | log2 gamma | LIBSVM % | torchfw % | LIBSVM s | torchfw s | "
                  "warning | torchfw max iterations |", "|---|---|---|---|---|---|---|---|"]
        for p in d["points"]:
            lines.append(f"| {p['log2c']} | {p['log2g']} | {p['libsvm']['accuracy']:.2f} | "
                         f"{p['torchfw']['accuracy']:.2f} | {p['libsvm']['seconds']:.2f} | "
                         f"{p['torchfw']['seconds']:.2f} | "
                         f"{'yes' if p['torchfw']['warnings'] else 'no'} | "
                         f"{p['torchfw']['max_n_iter']} |")
    return "\n".join(lines) + "\n"


def issue_table(loss="squared_hinge") -> list[dict]:
    """Single fits of the cases that stopped on ``max_iter`` before the corrective step: raw
    svmguide1 (tested on svmguide1.t), iris' versicolor/virginica pair with a degree-3
    polynomial kernel (gamma 1, training accuracy) and 80 x 5 ``make_classification`` at
    C = 1e4 (training accuracy); LIBSVM at C, torchfw at 2C, each fit timed once, warm."""
    from sklearn.datasets import load_iris, make_classification
    from sklearn.svm import SVC as LibSVC

    from torchfw.exceptions import ConvergenceWarning

    d = load_libsvm("svmguide1")
    Xg = d.X_train.to_dense().numpy().astype(np.float64)
    Xgt = d.X_test.to_dense().numpy().astype(np.float64)
    Xi, yi = load_iris(return_X_y=True)
    Xi, yi = Xi[yi > 0], yi[yi > 0]
    Xm, ym = make_classification(80, 5, random_state=0)
    cases = [("svmguide1 raw", "rbf", 2.0 ** 15, 2.0 ** -13, Xg, d.y_train.numpy(), Xgt,
              d.y_test.numpy()),
             ("svmguide1 raw", "rbf", 2.0 ** 11, 2.0 ** -13, Xg, d.y_train.numpy(), Xgt,
              d.y_test.numpy()),
             ("svmguide1 raw", "rbf", 2.0 ** 7, 2.0 ** -9, Xg, d.y_train.numpy(), Xgt,
              d.y_test.numpy()),
             ("iris versicolor/virginica (train)", "poly", 1.0, 1.0, Xi, yi, Xi, yi),
             ("make_classification 80x5 (train)", "rbf", 1e4, "scale", Xm, ym, Xm, ym)]
    rows = []
    for name, kernel, C, gamma, X, y, Xt, yt in cases:
        out = {"data": name, "kernel": kernel, "C": C, "gamma": gamma}
        for lib in ("libsvm", "torchfw"):
            make = (lambda: LibSVC(kernel=kernel, C=C, gamma=gamma)) if lib == "libsvm" else \
                (lambda: torchfw_model(C, gamma, loss, kernel))
            make().fit(X, y)  # warm: the same fit, untimed
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                t0 = time.perf_counter()
                model = make().fit(X, y)
                seconds = time.perf_counter() - t0
            out[lib] = {"seconds": seconds, "accuracy": 100.0 * model.score(Xt, yt)}
            if lib == "torchfw":
                out[lib].update(n_iter=int(np.max(model.n_iter_)), converged=bool(
                    model.result_.converged), warned=any(
                    issubclass(w.category, ConvergenceWarning) for w in caught))
        rows.append(out)
        t, s = out["torchfw"], out["libsvm"]
        print(f"{name:34s} {kernel} C={C:g} gamma={gamma}  LIBSVM {s['seconds']:.3f}s "
              f"{s['accuracy']:.2f}%  torchfw {t['seconds']:.3f}s {t['accuracy']:.2f}% "
              f"iters={t['n_iter']} converged={t['converged']} warned={t['warned']}",
              flush=True)
    return rows


def table_markdown(rows, meta) -> str:
    lines = ["# The cases that crawled: single fits, torchfw against LIBSVM", ""]
    lines += machine_header(meta, meta["command"])
    model = "torchfw `SVC(loss='hinge')` at C" if meta.get("loss") == "hinge" else \
        "torchfw at 2C"
    lines += [f"LIBSVM (scikit-learn's SVC) at C, {model}, warm, one fit each (timings on "
              "a shared, loaded 2-core machine).", "",
              "| data | kernel, C (LIBSVM), gamma | LIBSVM | torchfw | torchfw iterations, "
              "status |", "|---|---|---|---|---|"]
    for r in rows:
        s, t = r["libsvm"], r["torchfw"]
        lines.append(f"| {r['data']} | {r['kernel']}, {r['C']:g}, {r['gamma']} | "
                     f"{s['seconds']:.3f} s, {s['accuracy']:.2f} % | {t['seconds']:.3f} s, "
                     f"{t['accuracy']:.2f} % | {t['n_iter']}, "
                     f"{'converged' if t['converged'] else 'max_iter'}"
                     f"{', warned' if t['warned'] else ''} |")
    total_s = sum(r["libsvm"]["seconds"] for r in rows)
    total_t = sum(r["torchfw"]["seconds"] for r in rows)
    lines += ["", f"Total: LIBSVM {total_s:.2f} s, torchfw {total_t:.2f} s."]
    return "\n".join(lines) + "\n"


def _loss_tag(loss: str) -> str:
    """The results files' infix of a loss: none for the default L2-SVM."""
    return "_hinge" if loss == "hinge" else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--coarse", action="store_true", help="every other grid value")
    parser.add_argument("--c", type=int, nargs="+", help="log2 C values (default: the grid)")
    parser.add_argument("--gamma", type=int, nargs="+",
                        help="log2 gamma values (default: the grid)")
    parser.add_argument("--machine", default=f"{machine_tag()}{os.cpu_count()}")
    parser.add_argument("--out", default=None, help="output stem under benchmarks/results")
    parser.add_argument("--resume", action="store_true",
                        help="keep the points already in the results files and run the rest")
    parser.add_argument("--combine", nargs="+", metavar="STEM",
                        help="only write the datasets of these results files (stems under "
                             "benchmarks/results, e.g. runs of one dataset each) into one, "
                             "--out or svm_grid_<machine>")
    parser.add_argument("--loss", choices=("squared_hinge", "hinge"), default="squared_hinge",
                        help="torchfw's model: the L2-SVM at 2C (default) or LIBSVM's L1-SVM "
                             "at C (loss='hinge')")
    parser.add_argument("--table", action="store_true",
                        help="only the single fits of the cases that crawled "
                             "(svm_grid_table_<machine>)")
    args = parser.parse_args()
    if args.table:
        meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
                "load_average_start": list(os.getloadavg()),
                "command": "python benchmarks/svm_grid.py " + " ".join(sys.argv[1:]),
                "loss": args.loss}
        rows = issue_table(args.loss)
        stem = args.out or f"svm_grid{_loss_tag(args.loss)}_table_{args.machine}"
        out = Path(__file__).resolve().parent / "results"
        (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        text = table_markdown(rows, meta)
        (out / f"{stem}.md").write_text(text)
        print(text)
        return
    results = Path(__file__).resolve().parent / "results"
    stem = results / (args.out or f"svm_grid{_loss_tag(args.loss)}_{args.machine}")
    if args.combine:
        text = write(combine([results / name for name in args.combine]), stem)
    else:
        text = write(run(args, stem), stem)
    print(text.split("## Totals")[1].split("\n## ")[0])


if __name__ == "__main__":
    main()
