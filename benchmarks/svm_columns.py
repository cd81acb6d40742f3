"""Where an SVC fit's columns come from: column-pass cost by storage, and cache hit rates.

Two measurements on a LIBSVM data set with binary features (a9a by default):

1. The compiled CPU column pass (``SVMDualOperator._compute_column``) over random columns, with
   the feature-major copy stored as uint8 (what the operator picks for integer features in
   [0, 255]) and as float32 (the same values), interleaved, median over repeats.
2. The column requests of real ``SVC`` fits, recorded, then replayed through the operator's
   frequency-admission cache (:class:`torchfw.utils.column_cache.ColumnCache`) and through a
   least-recently-used cache of the same number of slots. The fits themselves are not timed.

Usage::

    python benchmarks/svm_columns.py [--dataset a9a] [--solvers swap pairwise partan fw]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_libsvm  # noqa: E402

from torchfw.exceptions import ConvergenceWarning  # noqa: E402
from torchfw.svm import SVC  # noqa: E402
from torchfw.svm.kernels import SVMDualOperator, make_kernel  # noqa: E402
from torchfw.utils.column_cache import ColumnCache  # noqa: E402


def scale_gamma(X) -> float:
    values = X.values().double()
    n = X.shape[0] * X.shape[1]
    var = float((values * values).sum() / n - (values.sum() / n) ** 2)
    return 1.0 / (X.shape[1] * var)


def column_pass(X, y, gamma, n_columns, repeats, seed=0):
    """Median microseconds per column, uint8 against float32 feature-major storage."""
    kernel = make_kernel("rbf", gamma=gamma)
    compact = SVMDualOperator(X, y, kernel, 1.0, cache_size=1)
    if compact.xfm.dtype != torch.uint8:
        raise SystemExit("this data set does not have integer features in [0, 255]")
    wide = SVMDualOperator(X, y, kernel, 1.0, cache_size=1)
    wide._xfm_np = wide._xfm_np.astype(np.float32)  # the same values, four bytes each
    index = [int(i) for i in np.random.default_rng(seed).integers(0, X.shape[0], n_columns)]
    out_a, out_b = torch.empty(X.shape[0]), torch.empty(X.shape[0])
    compact._compute_column(index[0], out_a)
    wide._compute_column(index[0], out_b)  # compile both specializations first
    torch.testing.assert_close(out_a, out_b, rtol=0, atol=0)
    times = {"uint8": [], "float32": []}
    for _ in range(repeats):
        for name, op, out in (("uint8", compact, out_a), ("float32", wide, out_b)):
            t = time.perf_counter()
            for i in index:
                op._compute_column(i, out)
            times[name].append((time.perf_counter() - t) / len(index) * 1e6)
    return {name: statistics.median(v) for name, v in times.items()}, times


def record_requests(solver, X, y, gamma, tol, cache_size, seed=0):
    """The column indices a fit asks its operator for, in order, and the fit's cache stats."""
    requests = []
    original = SVMDualOperator.column

    def column(self, i):
        if not isinstance(i, torch.Tensor):
            requests.append(int(i))
        return original(self, i)

    SVMDualOperator.column = column
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf = SVC(solver=solver, gamma=gamma, tol=tol, cache_size=cache_size,
                      random_state=seed).fit(X, y)
    finally:
        SVMDualOperator.column = original
    return requests, clf.result_.info["cache"], int(np.sum(clf.n_iter_))


def lru_hits(requests, slots):
    cache, hits = OrderedDict(), 0
    for k in requests:
        if k in cache:
            cache.move_to_end(k)
            hits += 1
        else:
            if len(cache) >= slots:
                cache.popitem(last=False)
            cache[k] = None
    return hits


def admission_hits(requests, slots, n_keys):
    cache = ColumnCache(slots, 1, n_keys=n_keys, dtype=torch.float32, device="cpu")
    for k in requests:
        if cache.lookup(k) is None:
            cache.insert(k)
    return cache.hits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="a9a")
    parser.add_argument("--solvers", nargs="+", default=["swap", "pairwise", "partan", "fw"])
    parser.add_argument("--tol", type=float, default=0.3)
    parser.add_argument("--cache-size", type=float, default=200.0)
    parser.add_argument("--columns", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    data = load_libsvm(args.dataset)
    X, y = data.X_train, data.y_train
    m = X.shape[0]
    gamma = scale_gamma(X)
    slots = int(args.cache_size * 2**20 // (4 * m))
    print(f"# {args.dataset}: {m} x {X.shape[1]}, gamma={gamma:.5g}; {cpu_model()}", flush=True)
    medians, raw = column_pass(X, y, gamma, args.columns, args.repeats)
    print(f"column pass: uint8 {medians['uint8']:.1f} us, float32 {medians['float32']:.1f} us",
          flush=True)
    rows = []
    for solver in args.solvers:
        requests, info, n_iter = record_requests(solver, X, y, gamma, args.tol, args.cache_size)
        row = {"solver": solver, "iterations": n_iter, "requests": len(requests),
               "distinct": len(set(requests)), "fit_cache": info,
               "admission_hits": admission_hits(requests, slots, m),
               "lru_hits": lru_hits(requests, slots)}
        rows.append(row)
        print(f"{solver:8s} requests {row['requests']} distinct {row['distinct']} hits: "
              f"admission {row['admission_hits']} (fit: {info['hits']}), "
              f"LRU {row['lru_hits']}", flush=True)
    out = Path(args.out or f"benchmarks/results/svm_columns_{args.dataset}")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"dataset": args.dataset, "m": m, "gamma": gamma, "cache_size": args.cache_size,
            "slots": slots, "machine": cpu_model(), "torch": torch.__version__,
            "command": "python benchmarks/svm_columns.py " + " ".join(sys.argv[1:])}
    out.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "column_pass_us": medians, "column_pass_raw": raw, "rows": rows},
        indent=2))
    lines = [f"# Kernel columns on {args.dataset}: storage and cache", "",
             f"Machine: {cpu_model()}; torch {torch.__version__}. Command: `{meta['command']}`.",
             "", f"**Column pass** (RBF, {args.columns} random columns of length {m:,}, median "
             f"of {args.repeats} interleaved repeats): feature-major copy in uint8 "
             f"{medians['uint8']:.1f} us per column, in float32 {medians['float32']:.1f} us "
             f"(x{medians['float32'] / medians['uint8']:.2f}).", "",
             f"**Cache** ({args.cache_size:g} MB = {slots:,} columns of {m:,}; tol = {args.tol}): "
             "column requests of each fit replayed through the operator's frequency-admission "
             "cache and through an LRU cache of the same size. Columns computed = requests - "
             "hits.", "",
             "| solver | iterations | requests | distinct columns | hits, admission | "
             "hits, LRU | columns computed, admission / LRU |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        computed = (r["requests"] - r["admission_hits"]) / (r["requests"] - r["lru_hits"])
        lines.append(f"| {r['solver']} | {r['iterations']:,} | {r['requests']:,} | "
                     f"{r['distinct']:,} | {r['admission_hits']:,} | {r['lru_hits']:,} | "
                     f"{computed:.2f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
