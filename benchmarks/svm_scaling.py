"""Speed-up of torchfw's SVC over scikit-learn's SVC against the number of training examples.

Random subsets of a9a's training set (sizes doubling up to the whole set), each fitted by
scikit-learn's ``SVC`` (LIBSVM) and by torchfw's ``SVC`` with the same C and gamma, side by side
in one run; test accuracy on a9a.t. Writes a table, JSON and a log-log plot of fit time and
speed-up against m.

Usage::

    python benchmarks/svm_scaling.py [--solver swap] [--sizes 2000 4000 ...]
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
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_libsvm  # noqa: E402
from svm_vs_libsvm import machine  # noqa: E402

from torchfw import SVC  # noqa: E402
from torchfw.datasets import to_scipy_csr  # noqa: E402
from torchfw.svm import ConvergenceWarning  # noqa: E402
from torchfw.utils.data import take_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="a9a")
    p.add_argument("--solver", default="swap")
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 8000, 16000, 32561])
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "svm_scaling"))
    p.add_argument("--plot", default=str(ROOT / "docs" / "_static" / "svm_scaling.png"))
    args = p.parse_args(argv)
    from sklearn.svm import SVC as SkSVC

    data = load_libsvm(args.dataset)
    X, y, Xt, yt = data.X_train, data.y_train.numpy(), data.X_test, data.y_test.numpy()
    values = X.values().double()
    n = X.shape[0] * X.shape[1]
    gamma = 1.0 / (X.shape[1] * float((values * values).sum() / n - (values.sum() / n) ** 2))
    Xts = to_scipy_csr(Xt, matrix=True)
    where = machine("cpu")
    print(f"# {args.dataset} subsets; C={args.C}, gamma={gamma:.5g} (scale on the full set); "
          f"torchfw SVC(solver={args.solver!r}) vs scikit-learn SVC; {where}", flush=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(X.shape[0])
    SVC(solver=args.solver, gamma=gamma, random_state=0).fit(
        take_rows(X, torch.from_numpy(order[:500])), y[order[:500]])  # compile the kernels
    rows = []
    print(f"{'m':>7s} {'sklearn s':>10s} {'torchfw s':>10s} {'speed-up':>9s} "
          f"{'acc sk %':>9s} {'acc fw %':>9s}", flush=True)
    for m in args.sizes:
        idx = torch.from_numpy(np.sort(order[:m]))
        Xm, ym = take_rows(X, idx), y[idx.numpy()]
        t = time.perf_counter()
        sk = SkSVC(C=args.C, gamma=gamma, cache_size=200).fit(to_scipy_csr(Xm, matrix=True), ym)
        sk_s = time.perf_counter() - t
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t = time.perf_counter()
            fw = SVC(solver=args.solver, C=args.C, gamma=gamma, random_state=0).fit(Xm, ym)
            fw_s = time.perf_counter() - t
        row = {"m": m, "sklearn_s": sk_s, "torchfw_s": fw_s, "speedup": sk_s / fw_s,
               "sklearn_accuracy": float((sk.predict(Xts) == yt).mean()),
               "torchfw_accuracy": fw.score(Xt, yt),
               "torchfw_iterations": int(np.sum(fw.n_iter_))}
        rows.append(row)
        print(f"{m:7d} {sk_s:10.2f} {fw_s:10.2f} {row['speedup']:9.1f} "
              f"{100 * row['sklearn_accuracy']:9.2f} {100 * row['torchfw_accuracy']:9.2f}",
              flush=True)
    command = "python benchmarks/svm_scaling.py " + " ".join(sys.argv[1:] if argv is None
                                                             else argv)
    meta = {"dataset": args.dataset, "solver": args.solver, "C": args.C, "gamma": gamma,
            "machine": where, "torch": torch.__version__, "command": command,
            "load_average_at_end": list(os.getloadavg())}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [f"# Speed-up against problem size ({args.dataset} subsets)", "",
             f"{where}; torch {meta['torch']}; torchfw `SVC(solver={args.solver!r})` against "
             f"scikit-learn `SVC`, C={args.C}, gamma={gamma:.5g}, one fit each, side by side; "
             f"load average at the end {', '.join(f'{x:.2f}' for x in meta['load_average_at_end'])}"
             f". Command: `{command}`.", "",
             "| m | scikit-learn (s) | torchfw (s) | speed-up | scikit-learn acc (%) | "
             "torchfw acc (%) | torchfw iterations |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['m']:,} | {r['sklearn_s']:.2f} | {r['torchfw_s']:.2f} | "
              f"{r['speedup']:.1f} | {100 * r['sklearn_accuracy']:.2f} | "
              f"{100 * r['torchfw_accuracy']:.2f} | {r['torchfw_iterations']} |" for r in rows]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ms = [r["m"] for r in rows]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
        ax1.loglog(ms, [r["sklearn_s"] for r in rows], "o-", label="scikit-learn SVC")
        ax1.loglog(ms, [r["torchfw_s"] for r in rows], "s-", label=f"torchfw {args.solver}")
        ax1.set_xlabel("training examples m")
        ax1.set_ylabel("fit time (s)")
        ax1.legend()
        ax1.grid(True, which="both", alpha=0.3)
        ax2.semilogx(ms, [r["speedup"] for r in rows], "s-", color="C1")
        ax2.set_xlabel("training examples m")
        for ax in (ax1, ax2):  # label the measured sizes only (log minor labels collide)
            ax.set_xticks(ms, [f"{m // 1000}k" for m in ms])
            ax.minorticks_off()
        ax2.set_ylabel("speed-up over scikit-learn")
        ax2.grid(True, which="both", alpha=0.3)
        fig.suptitle(f"{args.dataset} subsets, RBF, C={args.C} ({where})", fontsize=9)
        fig.tight_layout()
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=90)
        rel = os.path.relpath(args.plot, ROOT / "docs")
        lines += ["", f"![fit time and speed-up against m]({rel})"]
        print(f"wrote {args.plot}")
    except ImportError:
        pass
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
