"""torchfw's SVC against scikit-learn's (and scikit-learn-intelex's) SVC on multiclass LIBSVM sets.

Every library at its defaults (``SVC()``: torchfw's L2-SVM at C=2, LIBSVM's L1-SVM at C=1, both
RBF with ``gamma="scale"``), on the 11 multiclass LIBSVM sets of the shared data folder. Sets
with a published test file (dna, satimage, pendigits, letter, sector) are trained on the training
file and scored on the test file; the others are averaged over 5 stratified hold-outs (75 % /
25 %, seeds 0-4). Both libraries get the same input: a dense array where at least 10 % of the
values are nonzero, else the scipy CSR matrix (sector).

Timing. The libraries' fits alternate (torchfw, scikit-learn, scikit-learn-intelex, torchfw, ...)
so that a change of machine load hits all of them alike; fits are repeated (``--repeats`` under
a second, 3 fits from 1 s, one from 20 s) and the median is kept. Before a set is timed, each
library fits once, untimed: torchfw on the first training split (so that numba's compilation,
or the load of its on-disk cache, of the path the timed fits take stays out of the timings), the
others on up to 1,000 stratified rows of it. The ratio is torchfw's time over the anchor's, per
set (summed over the hold-outs), and its geometric mean over the sets.

``--busy`` keeps one core busy (a spinning process) during the timings: on a 2-core machine the
fits then have one core to themselves, and threads that lose their core show up as lost time.

Usage::

    python benchmarks/svm_multiclass.py                         # all 11 sets, quiet
    python benchmarks/svm_multiclass.py --busy                  # with one core taken
    python benchmarks/svm_multiclass.py --datasets glass shuttle --repeats 9
    python benchmarks/svm_multiclass.py --datasets glass vowel --update   # those rows only

``--update`` replaces the rows of the sets measured in the existing result files and keeps
the others (the report names the run each kept row comes from).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_libsvm  # noqa: E402
from _machine import cpu_model, machine_header, machine_tag  # noqa: E402

import torchfw  # noqa: E402
from torchfw.datasets import to_scipy_csr  # noqa: E402
from torchfw.svm import SVC  # noqa: E402

#: The multiclass LIBSVM sets, in the order of the table (by size).
DATASETS = ["glass", "vowel", "vehicle", "segment", "dna", "satimage", "usps", "pendigits",
            "letter", "shuttle", "sector"]

HOLDOUTS, TEST_SIZE, WARMUP_ROWS = 5, 0.25, 1000


def _spin() -> None:  # the --busy job: one core, until terminated
    while True:
        pass


def libraries():
    """``{name: factory}`` of the SVCs at their defaults; scikit-learn-intelex when importable."""
    from sklearn.svm import SVC as SkSVC

    libs = {"torchfw": SVC, "sklearn": SkSVC}
    try:
        from sklearnex.svm import SVC as ExSVC
    except ImportError:
        pass
    else:
        libs["sklearnex"] = ExSVC
    return libs


def versions(libs) -> dict:
    import numba
    import sklearn
    import torch

    out = {"python": platform.python_version(), "torchfw": getattr(torchfw, "__version__", "?"),
           "torch": torch.__version__, "numpy": np.__version__, "numba": numba.__version__,
           "scikit-learn": sklearn.__version__}
    if "sklearnex" in libs:
        import sklearnex

        out["scikit-learn-intelex"] = getattr(sklearnex, "__version__", "?")
    return out


def as_input(X_csr):
    """The matrix both libraries get: dense from 10 % nonzeros on, else CSR (float64)."""
    density = X_csr.nnz / max(1, X_csr.shape[0] * X_csr.shape[1])
    return X_csr.toarray() if density >= 0.1 else X_csr


def splits(name: str):
    """``[(X_train, y_train, X_test, y_test)]``: the published test file, or 5 hold-outs."""
    from sklearn.model_selection import StratifiedShuffleSplit

    data = load_libsvm(name)
    X = to_scipy_csr(data.X_train, matrix=True).astype(np.float64)
    y = data.y_train.numpy()
    if data.X_test is not None:
        Xt = to_scipy_csr(data.X_test, matrix=True).astype(np.float64)
        return [(as_input(X), y, as_input(Xt), data.y_test.numpy())], "test file"
    X = as_input(X)
    cv = StratifiedShuffleSplit(n_splits=HOLDOUTS, test_size=TEST_SIZE, random_state=0)
    return ([(X[tr], y[tr], X[te], y[te]) for tr, te in cv.split(np.zeros(len(y)), y)],
            f"{HOLDOUTS} stratified hold-outs of {TEST_SIZE:.0%}")


def warm_up(libs, X, y) -> None:
    """One untimed fit of torchfw on ``(X, y)`` (the path its timed fits take: numba compiles
    or loads the kernels of that path), and of the others on up to WARMUP_ROWS stratified
    rows."""
    from sklearn.model_selection import train_test_split

    libs["torchfw"]().fit(X, y)
    if X.shape[0] > WARMUP_ROWS:
        _, counts = np.unique(y, return_counts=True)
        strat = y if counts.min() >= 2 else None
        X, _, y, _ = train_test_split(X, y, train_size=WARMUP_ROWS, stratify=strat,
                                      random_state=0)
    for name, make in libs.items():
        if name != "torchfw":
            make().fit(X, y).predict(X[:10])


def timed_fit(make, X, y):
    """``(wall seconds, CPU seconds of the process -- every thread's --, model)``."""
    t, c = time.perf_counter(), time.process_time()
    model = make().fit(X, y)
    return time.perf_counter() - t, time.process_time() - c, model


def measure(libs, X, y, Xt, yt, repeats: int) -> dict:
    """Interleaved fits of every library on one split: median wall and CPU times, test
    accuracy.

    The order of the libraries is reversed every other round: on a loaded machine, fits of a
    few milliseconds are comparable to the scheduler's time slice, and in a fixed order the
    one that tends to run when the process's slice ends absorbs the wait for the next one
    (vowel at load 9: torchfw 22 ms against scikit-learn's 14 ms in a fixed order, 17 against
    19 ms each in its own loop, at 5.5 against 6.0 ms of CPU).
    """
    times = {name: [] for name in libs}
    cpu = {name: [] for name in libs}
    acc = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarnings are reported by the accuracy
        for name, make in libs.items():  # first round: also the models that are scored
            elapsed, seconds, model = timed_fit(make, X, y)
            times[name].append(elapsed)
            cpu[name].append(seconds)
            acc[name] = float(np.mean(model.predict(Xt) == yt))
        slowest = max(t[0] for t in times.values())
        rounds = (0 if slowest >= 20.0 else 2 if slowest >= 1.0 else
                  repeats - 1 if slowest >= 0.1 else 3 * repeats - 1)
        order = list(libs.items())
        for r in range(rounds):
            for name, make in (order[::-1] if r % 2 == 0 else order):
                elapsed, seconds, _ = timed_fit(make, X, y)
                times[name].append(elapsed)
                cpu[name].append(seconds)
    return {name: {"fit_s": statistics.median(t), "fit_s_all": t,
                   "cpu_s": statistics.median(cpu[name]), "accuracy": acc[name]}
            for name, t in times.items()}


def run_set(libs, name: str, repeats: int) -> dict:
    parts, scoring = splits(name)
    X0, y0 = parts[0][0], parts[0][1]
    load_start = list(os.getloadavg())
    warm_up(libs, X0, y0)
    per_split = [measure(libs, *p, repeats) for p in parts]
    row = {"dataset": name, "scoring": scoring, "n_train": int(X0.shape[0]),
           "n_features": int(X0.shape[1]), "n_classes": int(len(np.unique(y0))),
           "sparse_input": not isinstance(X0, np.ndarray), "load_start": load_start,
           "load_end": list(os.getloadavg())}
    for lib in libs:
        row[lib] = {"fit_s": sum(s[lib]["fit_s"] for s in per_split),
                    "accuracy": statistics.mean(s[lib]["accuracy"] for s in per_split),
                    "cpu_s": sum(s[lib]["cpu_s"] for s in per_split),
                    "fits_per_split": [len(s[lib]["fit_s_all"]) for s in per_split],
                    "fit_s_splits": [s[lib]["fit_s"] for s in per_split]}
    for lib in libs:
        if lib != "torchfw":
            row[f"ratio_vs_{lib}"] = row["torchfw"]["fit_s"] / row[lib]["fit_s"]
            row[f"cpu_ratio_vs_{lib}"] = row["torchfw"]["cpu_s"] / row[lib]["cpu_s"]
            row[f"acc_minus_{lib}"] = 100 * (row["torchfw"]["accuracy"] - row[lib]["accuracy"])
    return row


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def report(meta: dict, rows: list[dict], anchors: list[str]) -> list[str]:
    lines = [f"# torchfw SVC() against {', '.join(anchors)} SVC() on multiclass LIBSVM sets"
             f"{' (one core kept busy)' if meta['busy'] else ''}", ""]
    lines += machine_header(meta, meta["command"])
    lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".", "",
              "Defaults of every library. Fit times in seconds: median of interleaved repeats "
              "(summed over the hold-outs); ratio = torchfw ÷ anchor (below 1: torchfw "
              "faster); CPU ratio = the same of the process's CPU seconds (all threads; "
              "'–' for rows measured before it was recorded); accuracy in %, Δ = torchfw − "
              "anchor in points. The libraries' order alternates between rounds. Each set is "
              "preceded by "
              "an untimed warm-up fit of each library (numba's compile time excluded; "
              "torchfw's on the first training split itself). Load = 1-minute load average "
              "at the set's start and end.", ""]
    head = "| set | m × d, classes | scored on | load | torchfw s | acc |"
    rule = "|---|---|---|---|---|---|"
    for a in anchors:
        head += f" {a} s | acc | ratio | CPU ratio | Δ acc |"
        rule += "---|---|---|---|---|"
    lines += [head, rule]
    for r in rows:
        t = r["torchfw"]
        line = (f"| {r['dataset']} | {r['n_train']:,} × {r['n_features']:,}, {r['n_classes']} | "
                f"{'test file' if r['scoring'] == 'test file' else 'hold-outs'} | "
                f"{r['load_start'][0]:.1f}–{r['load_end'][0]:.1f} | {t['fit_s']:.3g} | "
                f"{100 * t['accuracy']:.2f} |")
        for a in anchors:
            cpu_ratio = r.get(f"cpu_ratio_vs_{a}")
            line += (f" {r[a]['fit_s']:.3g} | {100 * r[a]['accuracy']:.2f} | "
                     f"{r[f'ratio_vs_{a}']:.2f} | "
                     f"{'–' if cpu_ratio is None else f'{cpu_ratio:.2f}'} | "
                     f"{r[f'acc_minus_{a}']:+.2f} |")
        lines.append(line)
    lines.append("")
    for a in anchors:
        ratios = [r[f"ratio_vs_{a}"] for r in rows]
        worst = min(rows, key=lambda r: r[f"acc_minus_{a}"])
        lines.append(f"- against {a}: geometric mean of the ratios {geomean(ratios):.2f}, "
                     f"torchfw faster on {sum(x < 1 for x in ratios)} of {len(ratios)}; largest "
                     f"accuracy deficit {worst[f'acc_minus_{a}']:+.2f} points ({worst['dataset']})")
    lines += ["", f"Load average at the end: "
              f"{', '.join(f'{x:.2f}' for x in meta['load_average_end'])}."]
    kept = [r for r in rows if "run" in r]
    if kept:
        lines += ["", "Rows kept from earlier runs (`--update`): " + "; ".join(
            f"{', '.join(r['dataset'] for r in kept if r['run'] == run)} from `{run}`"
            for run in meta["kept_rows_from"]) + "."]
    return lines


def merged_rows(old: dict, rows: list[dict], meta: dict) -> tuple[list[dict], dict]:
    """``rows`` with the rows of the sets they do not measure kept from the earlier result
    ``old`` (each tagged with the earlier run's command), in the table's order; ``meta``
    records the earlier runs."""
    measured = {r["dataset"] for r in rows}
    kept = [dict(r, run=r.get("run", old["meta"]["command"])) for r in old["rows"]
            if r["dataset"] not in measured]
    if not kept:
        return rows, meta
    anchors = {k[len("ratio_vs_"):] for r in rows for k in r if k.startswith("ratio_vs_")}
    kept = [r for r in kept if all(f"ratio_vs_{a}" in r for a in anchors)]
    order = {name: i for i, name in enumerate(DATASETS)}
    meta = dict(meta, kept_rows_from=sorted({r["run"] for r in kept}))
    return sorted(rows + kept, key=lambda r: order.get(r["dataset"], len(order))), meta


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--repeats", type=int, default=5,
                        help="fits per library for fits under a second (3x that under 0.1 s; "
                             "3 up to 20 s)")
    parser.add_argument("--busy", action="store_true", help="keep one core busy while timing")
    parser.add_argument("--no-sklearnex", action="store_true")
    parser.add_argument("--machine", default=None, help="tag of the result files (default: "
                        "the CPU's, e.g. epyc)")
    parser.add_argument("--out", default=None, help="result path without suffix")
    parser.add_argument("--update", action="store_true",
                        help="keep the rows of the other sets from the existing result file")
    args = parser.parse_args(argv)
    libs = libraries()
    if args.no_sklearnex:
        libs.pop("sklearnex", None)
    anchors = [a for a in libs if a != "torchfw"]
    command = "python benchmarks/svm_multiclass.py " + " ".join(sys.argv[1:] if argv is None
                                                                else argv)
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "busy": args.busy,
            "load_average_start": list(os.getloadavg()), "versions": versions(libs),
            "repeats": args.repeats, "command": command.strip()}
    spinner = None
    if args.busy:
        spinner = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
        spinner.start()
    rows = []
    try:
        for name in args.datasets:
            row = run_set(libs, name, args.repeats)
            rows.append(row)
            msg = " ".join(f"{a} {row[a]['fit_s']:.3g}s acc {100 * row[a]['accuracy']:.2f}"
                           for a in libs)
            ratios = " ".join(f"ratio/{a} {row[f'ratio_vs_{a}']:.2f}" for a in anchors)
            print(f"{name}: {msg}; {ratios}; load {row['load_start'][0]:.1f}-"
                  f"{row['load_end'][0]:.1f}", flush=True)
    finally:
        if spinner is not None:
            spinner.terminate()
            spinner.join()
    meta["load_average_end"] = list(os.getloadavg())
    tag = args.machine or machine_tag()
    out = Path(args.out or Path(__file__).resolve().parent / "results" /
               f"svm_multiclass{'_busy' if args.busy else ''}_{tag}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.update and out.with_suffix(".json").exists():
        rows, meta = merged_rows(json.loads(out.with_suffix(".json").read_text()), rows, meta)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    out.with_suffix(".md").write_text("\n".join(report(meta, rows, anchors)) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
