"""Iterations and time to a Frank-Wolfe gap of 1e-6 for every core variant.

The problem is a random, strongly convex quadratic over the unit simplex: a simplex-constrained
ridge regression with a planted sparse mixture,

.. math::
    f(x) = \\tfrac{1}{2d} \\|A x - b\\|^2 + \\tfrac{\\mu}{2} \\|x\\|^2
         = \\tfrac12 x^\\top Q x + c^\\top x + \\text{const},
    \\qquad Q = A^\\top A / d + \\mu I, \\quad c = -A^\\top b / d,

with ``A`` of shape ``(d, n)`` i.i.d. standard normal, ``b = A x_true + noise`` where ``x_true``
puts random weights on ``n / 40`` random atoms, and ``mu = 0.1`` (``Q`` is positive definite with
smallest eigenvalue ``mu``, so every variant with a linear rate on polytopes has one here). The
constant is kept, so ``f >= 0`` and the reported values are in the problem's own units.

``Q`` is a dense tensor for n = 2,000 (32 MB) and a column operator for n = 20,000 (a dense
matrix would be 3.2 GB in float64): :class:`RidgeGram` below, ``torchfw.lasso.gram.GramOperator`` of
``A`` (column ``i`` is one matrix-vector product with ``A``, least recently used columns kept
under a 256 MB budget) plus ``mu`` on the diagonal. The column cache is emptied before every run,
so each run pays for its own columns.

**What "gap 1e-6" means.** The optimizers' ``tol`` is *absolute* (``ConstrainedOptimizer``'s
docstring): a run stops when the Frank-Wolfe gap ``g(x) = max_v <grad f(x), x - v>`` is at most
``tol``, which certifies ``f(x) - f* <= tol`` in the objective's units. Here ``f*`` is 0.34
(n = 2,000) and 0.23 (n = 20,000), so 1e-6 is also 3e-6 to 4e-6 relative. Every run uses
``tol=1e-6``, ``rtol=0`` and ``ExactLineSearch``.

Variants: ``FrankWolfe``, ``AwayStepFrankWolfe``, ``PairwiseFrankWolfe``, ``SwapFrankWolfe``,
``SwapFrankWolfe(second_order=True)`` (SWAP-2o), ``PartanFrankWolfe``,
``FullyCorrectiveFrankWolfe`` (default inner settings), and the randomized LMO
(``sample_size=194``, ``random_state=0``) on SWAP and on pairwise. Each run has a wall-clock
``--time-limit`` and an iteration cap ``--max-iter``; a run that stops on either is reported with
that status and the gap it reached, and is not repeated (its time is the limit). Repeats are
interleaved (every variant once, then every variant again); the table gives medians.

After the runs, the final values are checked against each other: each run's value ``f_a`` and
gap ``g_a`` certify ``f_a - g_a <= f* <= f_a``, so all intervals must intersect; the script
recomputes ``f`` and the gap from scratch (a full gradient) for that check and prints the
largest disagreement between variants.

Usage::

    python benchmarks/core_variants.py                     # CPU (+ CUDA when available)
    python benchmarks/core_variants.py --device cpu --sizes 2000 --repeats 1   # quick

Writes ``benchmarks/results/core_variants.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torchfw as tf  # noqa: E402
from torchfw.lasso.gram import GramOperator  # noqa: E402
from torchfw.objectives import ColumnOperator  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TOL = 1e-6
SAMPLE = 194

#: name -> (class, keyword arguments)
VARIANTS = {
    "FW": (tf.FrankWolfe, {}),
    "away": (tf.AwayStepFrankWolfe, {}),
    "pairwise": (tf.PairwiseFrankWolfe, {}),
    "SWAP": (tf.SwapFrankWolfe, {}),
    "SWAP-2o": (tf.SwapFrankWolfe, {"second_order": True}),
    "PARTAN": (tf.PartanFrankWolfe, {}),
    "fully corrective": (tf.FullyCorrectiveFrankWolfe, {}),
    f"SWAP, sampled {SAMPLE}": (tf.SwapFrankWolfe, {"sample_size": SAMPLE, "random_state": 0}),
    f"pairwise, sampled {SAMPLE}": (tf.PairwiseFrankWolfe,
                                    {"sample_size": SAMPLE, "random_state": 0}),
}


class RidgeGram(ColumnOperator):
    """``Q = A^T A / d + mu I`` for ``A`` of shape ``(d, n)``, columns on demand.

    A :class:`~torchfw.lasso.gram.GramOperator` of ``A`` (``d`` "samples", ``n`` "features") gives
    ``A^T A / d`` with its column cache; the ridge term is added here. Tensor indices never
    leave the device (CUDA-graph safe); Python-int indices on the host go through the cache.
    """

    def __init__(self, A: torch.Tensor, mu: float, cache_size: float = 256.0):
        self.A = A
        self.mu = float(mu)
        self.gram = GramOperator(A, dtype=A.dtype, cache_size=cache_size)
        self.shape = self.gram.shape
        self.dtype = A.dtype
        self.device = A.device
        self._diag = self.gram.diagonal() + self.mu
        self._rows = torch.arange(self.shape[0], device=A.device).unsqueeze(1)

    def columns(self, index: torch.Tensor) -> torch.Tensor:
        index = index.reshape(-1)
        out = self.gram.columns(index)
        return out + self.mu * (self._rows == index.unsqueeze(0)).to(out.dtype)

    def column(self, i) -> torch.Tensor:
        if isinstance(i, torch.Tensor) and (i.device.type != "cpu" or i.numel() != 1):
            return self.columns(i.reshape(1))[:, 0]
        i = int(i)
        col = self.gram.column(i).clone()  # the cached column is the cache's own buffer
        col[i] += self.mu
        return col

    def entry(self, i, j) -> torch.Tensor:
        i, j = i.reshape(1), j.reshape(1)
        a_i = self.A.index_select(1, i)[:, 0]
        a_j = self.A.index_select(1, j)[:, 0]
        return (torch.dot(a_i, a_j) * self.gram.scale + self.mu * (i == j).to(a_i.dtype)
                ).reshape(1)

    def diagonal(self) -> torch.Tensor:
        return self._diag

    def matvec(self, v: torch.Tensor, block: int = 256) -> torch.Tensor:
        return self.gram.matvec(v) + self.mu * v

    def clear_cache(self) -> None:
        self.gram.clear_cache()


def make_problem(n: int, d: int, mu: float, device: torch.device, operator: str, seed: int = 0):
    """The quadratic above; returns the objective and a description of ``Q``."""
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(d, n, generator=gen, dtype=torch.float64)
    k = max(1, n // 40)
    x_true = torch.zeros(n, dtype=torch.float64)
    x_true[torch.randperm(n, generator=gen)[:k]] = torch.rand(k, generator=gen,
                                                               dtype=torch.float64)
    x_true /= x_true.sum()
    b = A @ x_true + torch.randn(d, generator=gen, dtype=torch.float64)
    A, b = A.to(device), b.to(device)
    c = -(A.T @ b) / d
    constant = float(b @ b) / (2 * d)
    if operator == "auto":
        operator = "dense" if n * n * 8 <= 512 * 2**20 else "columns"
    if operator == "dense":
        Q = A.T @ A / d
        Q.diagonal().add_(mu)
        what = f"dense {n}x{n} float64 ({n * n * 8 / 2**20:.0f} MB)"
    else:
        Q = RidgeGram(A, mu)
        what = (f"column operator: GramOperator of A ({d}x{n}) + mu I, 256 MB column cache "
                f"(a dense Q would be {n * n * 8 / 2**30:.2g} GB)")
    return tf.Quadratic(Q, c, constant=constant), what


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def exact_value_and_gap(objective, x: torch.Tensor) -> tuple[float, float]:
    """``f(x)`` and the FW gap over the unit simplex from a full gradient (no incremental state)."""
    f, g = objective.value_and_grad(x.to(torch.float64))
    return float(f), float(torch.dot(g, x.to(torch.float64)) - g.min())


def run_once(name, objective, args, device):
    cls, kwargs = VARIANTS[name]
    if isinstance(objective.Q, RidgeGram):
        objective.Q.clear_cache()
    opt = cls(tf.Simplex(), tf.ExactLineSearch(), tol=TOL, max_iter=args.max_iter,
              time_limit=args.time_limit, **kwargs)
    sync(device)
    start = time.perf_counter()
    result = opt.minimize(objective)
    sync(device)
    return time.perf_counter() - start, result


def warm_up(objective, device):
    """Compile every variant's kernels (numba on CPU, torch.compile and CUDA graphs per shape)."""
    iters = 150 if device.type == "cuda" else 30  # CUDA: first block compiles, second captures
    for cls, kwargs in VARIANTS.values():
        cls(tf.Simplex(), tf.ExactLineSearch(), tol=TOL, max_iter=iters, **kwargs).minimize(
            objective)
    sync(device)


def bench_size(n, device, args):
    t0 = time.perf_counter()
    objective, what = make_problem(n, args.d, args.mu, device, args.operator)
    build = time.perf_counter() - t0
    print(f"\n## {device.type}, n = {n:,}, d = {args.d}, mu = {args.mu}: Q is {what} "
          f"(built in {build:.1f} s)", flush=True)
    t0 = time.perf_counter()
    warm_up(objective, device)
    print(f"warm-up (compilation) {time.perf_counter() - t0:.1f} s", flush=True)
    runs = {name: [] for name in args.variants}
    last = {}
    for rep in range(args.repeats):  # interleaved: each repeat runs every variant once
        for name in args.variants:
            if rep > 0 and last[name].status != tf.Status.CONVERGED:
                continue  # stopped on a limit: not repeated
            elapsed, result = run_once(name, objective, args, device)
            runs[name].append(elapsed)
            last[name] = result
            print(f"  repeat {rep + 1}: {name:22s} {result.status!s:10s} "
                  f"{result.n_iter:>8d} it  {elapsed:8.3f} s  gap {result.gap:.2e}", flush=True)
    rows = []
    for name in args.variants:
        r = last[name]
        f_exact, gap_exact = exact_value_and_gap(objective, r.x)
        wall = statistics.median(runs[name])
        rows.append({
            "device": device.type, "n": n, "d": args.d, "mu": args.mu, "Q": what,
            "variant": name, "status": str(r.status), "iterations": r.n_iter,
            "wall_s": wall, "walls": runs[name], "ms_per_iter": 1e3 * wall / max(r.n_iter, 1),
            "gap": r.gap, "value": r.value, "value_recomputed": f_exact,
            "gap_recomputed": gap_exact, "nnz": int((r.x != 0).sum()), "steps": r.steps})
    # Agreement: [f_a - g_a, f_a] must all contain f*; use the recomputed values and gaps.
    lower = max(row["value_recomputed"] - row["gap_recomputed"] for row in rows)
    upper = min(row["value_recomputed"] for row in rows)
    conv = [row for row in rows if row["status"] == "converged"]
    spread = (max(row["value_recomputed"] for row in conv)
              - min(row["value_recomputed"] for row in conv)) if conv else float("nan")
    largest_gap = max((row["gap_recomputed"] for row in conv), default=float("nan"))
    drift = max(abs(row["value"] - row["value_recomputed"]) for row in rows)
    check = {"device": device.type, "n": n, "f_best": upper,
             "certified_lower_bound": lower, "intervals_intersect": lower <= upper + 1e-12,
             "max_disagreement_converged": spread, "largest_gap_converged": largest_gap,
             "max_incremental_value_drift": drift}
    for row in rows:
        row["f_minus_best"] = row["value_recomputed"] - upper
    print_table(rows)
    print(f"agreement: max |f_a - f_b| over converged variants = {spread:.2e} "
          f"(largest of their gaps {largest_gap:.2e}); certified f* in [{lower:.12f}, "
          f"{upper:.12f}] -> {'consistent' if check['intervals_intersect'] else 'INCONSISTENT'}"
          f"; incremental vs recomputed f: max {drift:.1e}", flush=True)
    return rows, check


HEADER = ("| device | n | variant | status | iterations | time s | ms/iter | gap | "
          "f - f_best | nnz | steps |")


def row_line(r) -> str:
    steps = ", ".join(f"{k} {v}" for k, v in r["steps"].items())
    return (f"| {r['device']} | {r['n']:,} | {r['variant']} | {r['status']} | "
            f"{r['iterations']:,} | {r['wall_s']:.3f} | {r['ms_per_iter']:.3f} | "
            f"{r['gap_recomputed']:.1e} | {r['f_minus_best']:.1e} | {r['nnz']} | {steps} |")


def print_table(rows) -> None:
    print(HEADER)
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(row_line(r))


def machine() -> dict:
    cpu = cpu_model()
    info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "load_average_start": list(os.getloadavg())}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def write(results) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "core_variants.json").write_text(json.dumps(results, indent=1) + "\n")
    m = results["machine"]
    a = results["args"]
    lines = ["# Core variants: iterations and time to an absolute Frank-Wolfe gap of 1e-6", "",
             f"Machine: {m['cpu']}, {m['cores']} cores"
             + (f", GPU {m['gpu']}" if "gpu" in m else ", no GPU")
             + f"; Python {m['python']}, torch {m['torch']} ({m['torch_threads']} threads). "
             "Load average (1, 5, 15 min) at start: "
             + ", ".join(f"{v:.2f}" for v in m["load_average_start"]) + "; at end: "
             + ", ".join(f"{v:.2f}" for v in results["load_average_end"])
             + " (a shared machine: other people's jobs ran during the measurements).", "",
             f"Command: `{results['command']}`", "",
             "Problem: f(x) = ||Ax - b||^2 / (2d) + (mu/2) ||x||^2 over the unit simplex, "
             f"A ~ N(0,1) of shape (d, n), d = {a['d']}, mu = {a['mu']}, b = A x_true + "
             "N(0, 1) noise with x_true on n/40 random atoms; Q = A'A/d + mu I. float64.", "",
             "Stopping rule: **absolute** gap, `tol=1e-6` (the optimizers' `tol` is absolute: "
             "gap <= tol certifies f(x) - f* <= 1e-6), ExactLineSearch, "
             f"time limit {a['time_limit']:g} s and max_iter {a['max_iter']:,} per run. "
             f"Times are medians of {a['repeats']} interleaved repeats of `minimize` (problem "
             "built beforehand, kernels compiled by a warm-up run, column cache emptied before "
             "each run); a run that stops on a limit is not repeated. gap and f - f_best are "
             "recomputed from a full gradient at the returned x (f_best: the smallest value "
             "of all variants at that size). nnz: nonzeros of x. steps: the variant's step "
             "counters (fully corrective: `inner` are its inner pairwise steps, not counted "
             "as iterations).", ""]
    for size in results["sizes"]:
        lines.append(f"### {size['device']}, n = {size['n']:,}: Q is {size['Q']}")
        lines += ["", HEADER, "|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [row_line(r) for r in results["rows"]
                  if r["device"] == size["device"] and r["n"] == size["n"]]
        c = size["check"]
        lines += ["", f"Agreement: max |f_a - f_b| over the converged variants "
                  f"{c['max_disagreement_converged']:.1e} (their largest gap "
                  f"{c['largest_gap_converged']:.1e}); the certified intervals [f - gap, f] of "
                  f"all runs {'intersect' if c['intervals_intersect'] else 'DO NOT intersect'}"
                  f": f* in [{c['certified_lower_bound']:.12f}, {c['f_best']:.12f}]. Largest "
                  f"difference between the solver's incremental f and the recomputed one: "
                  f"{c['max_incremental_value_drift']:.1e}.", ""]
    lines.append(f"Elapsed: {results['elapsed_s']:.0f} s.")
    (RESULTS / "core_variants.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'core_variants.md'} and .json")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--d", type=int, default=200, help="rows of A")
    parser.add_argument("--mu", type=float, default=0.1, help="ridge (strong convexity)")
    parser.add_argument("--device", nargs="+", default=None,
                        help="default: cpu, and cuda when torch.cuda.is_available()")
    parser.add_argument("--operator", choices=["auto", "dense", "columns"], default="auto",
                        help="auto: dense Q up to 512 MB, else the column operator")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per run")
    parser.add_argument("--max-iter", type=int, default=1_000_000)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    devices = args.device or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    start = time.perf_counter()
    results = {"machine": machine(), "tol": TOL, "tol_kind": "absolute", "args": vars(args),
               "command": "python benchmarks/core_variants.py " + " ".join(
                   sys.argv[1:] if argv is None else argv),
               "rows": [], "sizes": []}
    print(results["machine"], flush=True)
    for dev in devices:
        device = torch.device(dev)
        for n in args.sizes:
            rows, check = bench_size(n, device, args)
            results["rows"] += rows
            results["sizes"].append({"device": device.type, "n": n, "Q": rows[0]["Q"],
                                     "check": check})
    results["elapsed_s"] = time.perf_counter() - start
    results["load_average_end"] = list(os.getloadavg())
    print(f"elapsed {results['elapsed_s']:.0f} s; load average {results['load_average_end']}")
    write(results)


if __name__ == "__main__":
    main()
