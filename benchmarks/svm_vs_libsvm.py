"""torchfw SVC against scikit-learn's SVC (LIBSVM) on the seed papers' datasets.

Side by side in one run on one machine: fit time (median of ``--repeats``), test accuracy,
iterations and support vectors for every requested torchfw solver, and scikit-learn's ``SVC``
with the same ``C`` and ``gamma``. Ratios are computed against scikit-learn measured in the same
run (``--sklearn-json`` reuses a stored measurement instead, for GPU runs where the host CPU
differs from the one of record; the table then says so).

Usage::

    python benchmarks/svm_vs_libsvm.py --dataset a9a                  # CPU, all solvers
    python benchmarks/svm_vs_libsvm.py --dataset a9a --device cuda --solvers swap partan
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_libsvm  # noqa: E402

from torchfw.datasets import to_scipy_csr  # noqa: E402
from torchfw.exceptions import ConvergenceWarning  # noqa: E402
from torchfw.svm import SVC  # noqa: E402
from torchfw.utils.data import take_rows  # noqa: E402

ALL_SOLVERS = ["fw", "away", "pairwise", "swap", "swap2", "partan", "sfw", "msfw"]


def machine(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    model = cpu_model()
    import os

    return f"{model}, {os.cpu_count()} cores"


def sklearn_run(X, y, Xt, yt, C, gamma, cache_size):
    from sklearn.svm import SVC as SkSVC

    Xs = to_scipy_csr(X, matrix=True)
    Xts = to_scipy_csr(Xt, matrix=True)
    t = time.perf_counter()
    clf = SkSVC(C=C, gamma=gamma, cache_size=cache_size).fit(Xs, y)
    elapsed = time.perf_counter() - t
    return {"solver": "sklearn SVC (LIBSVM)", "fit_s": elapsed,
            "accuracy": float((clf.predict(Xts) == yt).mean()),
            "n_sv": int(clf.n_support_.sum()), "iterations": None}


def torchfw_run(solver, X, y, Xt, yt, C, gamma, tol, device, seed, cache_size):
    clf = SVC(solver=solver, C=C, gamma=gamma, tol=tol, device=device, random_state=seed,
              cache_size=cache_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        clf.fit(X, y)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t
    result = clf.result_
    return {"solver": solver, "fit_s": elapsed, "accuracy": clf.score(Xt, yt),
            "n_sv": int(len(clf.support_)), "iterations": int(result.n_iter),
            "rel_gap": float(result.gap / (2 * result.value)), "status": str(result.status),
            "steps": result.steps}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="a9a")
    parser.add_argument("--solvers", nargs="+", default=ALL_SOLVERS, choices=ALL_SOLVERS)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--gamma", default="scale")
    parser.add_argument("--tol", type=float, default=0.3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-size", type=float, default=200.0)
    parser.add_argument("--sklearn-repeats", type=int, default=1,
                        help="scikit-learn fits to time (median reported); its time varies "
                             "by 20%% between runs on a shared machine")
    parser.add_argument("--no-sklearn", action="store_true")
    parser.add_argument("--sklearn-json", help="reuse a stored sklearn measurement")
    parser.add_argument("--warmup", action="store_true",
                        help="fit each torchfw solver once on 1,000 examples before timing "
                             "(JIT compilation and caches stay out of the timings)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    gamma = args.gamma if args.gamma in ("scale", "auto") else float(args.gamma)
    data = load_libsvm(args.dataset)
    X, y, Xt, yt = (data.X_train, data.y_train.numpy(), data.X_test, data.y_test.numpy())
    if gamma == "scale":  # resolve once so that both libraries get the same number
        values = X.values().double()
        n = X.shape[0] * X.shape[1]
        var = float((values * values).sum() / n - (values.sum() / n) ** 2)
        gamma = 1.0 / (X.shape[1] * var)
    print(f"# {args.dataset}: {X.shape[0]} x {X.shape[1]} train, {Xt.shape[0]} test; C={args.C} "
          f"gamma={gamma:.6g} tol={args.tol}; device {args.device} ({machine(args.device)})",
          flush=True)
    rows = []
    sk = None
    if args.sklearn_json:
        sk = json.loads(Path(args.sklearn_json).read_text())["sklearn"]
        sk["note"] = f"from {args.sklearn_json} ({sk.get('machine', '?')})"
        print(f"sklearn (stored): fit {sk['fit_s']:.2f} s, acc {sk['accuracy']:.4f}")
    elif not args.no_sklearn:
        sk_runs = [sklearn_run(X, y, Xt, yt, args.C, gamma, args.cache_size)
                   for _ in range(args.sklearn_repeats)]
        sk = dict(sk_runs[0])
        sk["fit_s"] = statistics.median(r["fit_s"] for r in sk_runs)
        sk["fit_s_all"] = [r["fit_s"] for r in sk_runs]
        sk["machine"] = machine("cpu")
        print(f"sklearn: fit {sk['fit_s']:.2f} s, acc {sk['accuracy']:.4f}, SVs {sk['n_sv']}",
              flush=True)
    for solver in args.solvers:
        if args.warmup:
            first = torch.arange(1000)
            torchfw_run(solver, take_rows(X, first), y[:1000], take_rows(Xt, first[:100]),
                        yt[:100], args.C, gamma, args.tol, args.device, 0, args.cache_size)
        runs = [torchfw_run(solver, X, y, Xt, yt, args.C, gamma, args.tol, args.device, seed,
                            args.cache_size) for seed in range(args.repeats)]
        row = dict(runs[0])
        row["fit_s"] = statistics.median(r["fit_s"] for r in runs)
        row["fit_s_all"] = [r["fit_s"] for r in runs]
        row["accuracy_all"] = [r["accuracy"] for r in runs]
        row["accuracy"] = statistics.mean(r["accuracy"] for r in runs)
        row["iterations"] = int(statistics.median(r["iterations"] for r in runs))
        row["n_sv"] = int(statistics.median(r["n_sv"] for r in runs))
        if sk is not None:
            row["speedup_vs_sklearn"] = sk["fit_s"] / row["fit_s"]
            row["accuracy_minus_sklearn"] = row["accuracy"] - sk["accuracy"]
        rows.append(row)
        extra = (f" speed-up x{row['speedup_vs_sklearn']:.1f}, acc diff "
                 f"{100 * row['accuracy_minus_sklearn']:+.2f} pt") if sk else ""
        runs_txt = ", ".join(f"{t:.2f}" for t in row["fit_s_all"])
        print(f"{solver:8s} fit {row['fit_s']:7.2f} s (runs {runs_txt}) "
              f"acc {row['accuracy']:.4f} it {row['iterations']} SVs {row['n_sv']}{extra}",
              flush=True)
    out = Path(args.out or f"benchmarks/results/svm_{args.dataset}_{args.device.split(':')[0]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"dataset": args.dataset, "device": args.device, "machine": machine(args.device),
            "C": args.C, "gamma": gamma, "tol": args.tol, "repeats": args.repeats,
            "sklearn_repeats": args.sklearn_repeats,
            "torch": torch.__version__, "load_average_at_end": list(os.getloadavg()),
            "command": "python benchmarks/svm_vs_libsvm.py " + " ".join(sys.argv[1:])}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "sklearn": sk, "rows": rows},
                                                   indent=2, default=str))
    sk_fits = ""
    if sk is not None and len(sk.get("fit_s_all", [])) > 1:
        sk_fits = (" (scikit-learn: median of "
                   + ", ".join(f"{t:.1f}" for t in sk["fit_s_all"]) + " s)")
    lines = [f"# {args.dataset}: torchfw SVC solvers against scikit-learn's SVC "
             f"({meta['machine']})",
             "", f"Command: `{meta['command']}`", "",
             f"{args.dataset}, C={args.C}, gamma={gamma:.4g}, tol={args.tol}; {meta['machine']}; "
             f"torch {meta['torch']}; median of {args.repeats} fits{sk_fits}; "
             "load average at the end "
             f"{', '.join(f'{x:.2f}' for x in meta['load_average_at_end'])}.", "",
             "| solver | fit (s) | speed-up vs sklearn | test acc (%) | iterations | SVs |",
             "|---|---|---|---|---|---|"]
    if sk is not None:
        lines.append(f"| sklearn SVC (LIBSVM){' *' if 'note' in sk else ''} | "
                     f"{sk['fit_s']:.2f} | 1.0 | {100 * sk['accuracy']:.2f} | - | {sk['n_sv']} |")
    for r in rows:
        speed = f"{r['speedup_vs_sklearn']:.1f}" if sk is not None else "-"
        lines.append(f"| {r['solver']} | {r['fit_s']:.2f} | {speed} | {100 * r['accuracy']:.2f} | "
                     f"{r['iterations']} | {r['n_sv']} |")
    if sk is not None and "note" in sk:
        lines += ["", f"\\* {sk['note']}"]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
