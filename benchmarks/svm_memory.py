"""Peak memory of an SVC fit against the number of training examples.

The kernel operator computes columns on demand (in row chunks, with a byte-bounded column
cache), so the memory a fit needs should grow linearly in the number of examples ``m``: the
data (m x d), a few vectors of length m and the cache, never the m x m kernel matrix.

Each size is fitted in a fresh subprocess (a process's peak resident set size only grows), for a
fixed number of iterations so that every size does the same kind of work; the table shows the
peak RSS, the RSS of the same process just before the fit (Python, torch and the data), the
increase per example, and what a dense float32 kernel matrix would need.

Usage::

    python benchmarks/svm_memory.py                          # m = 50k, 100k, 200k, 400k
    python benchmarks/svm_memory.py --sizes 20000 40000 --iterations 200
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

ROOT = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    """Current resident set size of this process in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def child(m: int, d: int, iterations: int, cache_size: float, solver: str) -> None:
    """Fit one SVC in this process and print its memory figures as JSON."""
    import warnings

    import torch

    sys.path.insert(0, str(ROOT))
    from torchfw import SVC
    from torchfw.datasets import make_large_classification
    from torchfw.exceptions import ConvergenceWarning

    torch.set_num_threads(2)
    # Compile the CPU kernels on a tiny problem first: numba's own memory is not the fit's.
    Xw, yw = make_large_classification(500, d, random_state=1)
    SVC(C=1.0, solver=solver, max_iter=20, random_state=0).fit(Xw, yw)
    X, y = make_large_classification(m, d, random_state=0)
    before = _rss_mb()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed budget, on purpose
        model = SVC(C=1.0, solver=solver, max_iter=iterations, cache_size=cache_size,
                    random_state=0).fit(X, y)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    print(json.dumps({"m": m, "d": d, "rss_before_mb": before, "peak_mb": peak,
                      "fit_s": elapsed, "n_iter": int(sum(model.n_iter_)),
                      "data_mb": X.element_size() * X.numel() / 2**20}))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[50_000, 100_000, 200_000, 400_000])
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--cache-size", type=float, default=200.0, help="kernel column cache, MB")
    p.add_argument("--solver", default="swap")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "svm_memory"))
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        child(args.child, args.features, args.iterations, args.cache_size, args.solver)
        return

    rows = []
    print(f"SVC({args.solver}), {args.iterations} iterations, d = {args.features}, "
          f"cache_size = {args.cache_size} MB")
    header = (f"{'m':>9s} {'before MB':>10s} {'peak MB':>9s} {'fit MB':>8s} "
              f"{'bytes/example':>14s} {'dense K (GB)':>13s} {'fit s':>7s}")
    print(header)
    for m in args.sizes:
        cmd = [sys.executable, __file__, "--child", str(m), "--features", str(args.features),
               "--iterations", str(args.iterations), "--cache-size", str(args.cache_size),
               "--solver", args.solver]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        row["fit_mb"] = row["peak_mb"] - row["rss_before_mb"]
        row["dense_kernel_gb"] = 4.0 * m * m / 2**30
        rows.append(row)
        print(f"{m:9d} {row['rss_before_mb']:10.0f} {row['peak_mb']:9.0f} {row['fit_mb']:8.0f} "
              f"{2**20 * row['fit_mb'] / m:14.0f} {row['dense_kernel_gb']:13.1f} "
              f"{row['fit_s']:7.1f}", flush=True)

    # Linearity: the least-squares line through (m, peak) and its worst relative residual.
    ms = [r["m"] for r in rows]
    peaks = [r["peak_mb"] for r in rows]
    n = len(ms)
    mean_m, mean_p = sum(ms) / n, sum(peaks) / n
    var = sum((x - mean_m) ** 2 for x in ms)
    slope = sum((x - mean_m) * (p - mean_p) for x, p in zip(ms, peaks, strict=True)) / var \
        if var else 0.0
    intercept = mean_p - slope * mean_m
    worst = max(abs(p - (intercept + slope * x)) / p for x, p in zip(ms, peaks, strict=True))
    summary = (f"peak MB ~= {intercept:.0f} + {slope * 1000:.3f} per 1,000 examples; worst "
               f"relative deviation from that line {100 * worst:.1f}%")
    print(summary)

    machine = cpu_model()
    import torch

    meta = {"machine": machine, "torch": torch.__version__, "solver": args.solver,
            "iterations": args.iterations, "features": args.features,
            "cache_size_mb": args.cache_size,
            "command": "python benchmarks/svm_memory.py " + " ".join(sys.argv[1:]),
            "fit_line": {"intercept_mb": intercept, "mb_per_example": slope,
                         "worst_relative_deviation": worst}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = ["# SVC peak memory against the number of examples", "",
             f"Machine: {machine}; torch {meta['torch']}. Command: `{meta['command']}`.", "",
             f"SVC(solver={args.solver!r}), {args.iterations} iterations, d = {args.features}, "
             f"cache_size = {args.cache_size} MB, float32 data; each size in a fresh process. "
             "'before' is the resident set before the fit (interpreter, torch, data); 'fit' is "
             "the peak minus that.", "",
             "| m | before (MB) | peak (MB) | fit (MB) | fit bytes / example | dense float32 K "
             "(GB) | fit (s) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['m']:,} | {r['rss_before_mb']:.0f} | {r['peak_mb']:.0f} | "
                     f"{r['fit_mb']:.0f} | {2**20 * r['fit_mb'] / r['m']:.0f} | "
                     f"{r['dense_kernel_gb']:.1f} | {r['fit_s']:.1f} |")
    lines += ["", summary + "."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
