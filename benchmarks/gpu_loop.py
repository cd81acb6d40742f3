"""Per-iteration cost of the simplex solvers on a lazy RBF kernel, against the bandwidth floor.

For each problem size ``m`` (generated dense data, ``d`` features, float32 kernel values) and each
solver, runs a fixed number of iterations with each execution mode and reports microseconds per
iteration. The *floor* is the time to read ``X`` once per iteration at the device's measured
memory bandwidth (every variant here reads ``X`` once per iteration: SWAP/pairwise compute their
two columns in one pass). Iterations of a compiled mode exclude the one-time compilation, which
is reported separately.

Usage::

    python benchmarks/gpu_loop.py --sizes 32768 262144 1048576 4194304 --d 64
    python benchmarks/gpu_loop.py --device cpu --sizes 32768 --modes host   # CPU reference
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

import torchfw as tf
from torchfw.datasets import make_large_classification
from torchfw.svm.kernels import SVMDualOperator, make_kernel

SOLVERS = {
    "fw": tf.FrankWolfe,
    "swap": tf.SwapFrankWolfe,
    "pairwise": tf.PairwiseFrankWolfe,
    "partan": tf.PartanFrankWolfe,
}


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = cpu_model()
    return f"{model} ({torch.get_num_threads()} threads)"


def bandwidth(device: torch.device) -> float:
    """Device memory bandwidth in bytes/s (a large copy, counting bytes read and written)."""
    n = 2**28 if device.type == "cuda" else 2**25
    a = torch.empty(n, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    sync(device)
    reps = 20
    t = time.perf_counter()
    for _ in range(reps):
        b.copy_(a)
    sync(device)
    return 2 * a.numel() * 4 * reps / (time.perf_counter() - t)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(cls, objective, x0, mode, iters, check_every):
    opt = cls(tf.Simplex(), tf.ExactLineSearch(), tol=1e-300, max_iter=iters,
              execution=mode, check_every=check_every)
    sync(x0.device)
    t = time.perf_counter()
    result = opt.minimize(objective, x0)
    sync(x0.device)
    return time.perf_counter() - t, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32768, 262144, 1048576, 4194304])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--solvers", nargs="+", default=["swap", "partan"], choices=SOLVERS)
    parser.add_argument("--modes", nargs="+", default=["graph", "device"],
                        choices=["host", "device", "compile", "graph"])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--host-iters", type=int, default=200,
                        help="iterations for the slow host/device modes")
    parser.add_argument("--check-every", type=int, default=50)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="benchmarks/results/gpu_loop")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    bw = bandwidth(device)
    print(f"# {machine(device)}; measured bandwidth {bw / 1e9:.0f} GB/s; torch {torch.__version__}")
    rows = []
    for m in args.sizes:
        X, y = make_large_classification(m, args.d, random_state=0, device=device)
        y_pm = (2.0 * y - 1.0).to(torch.float32)
        op = SVMDualOperator(X, y_pm, make_kernel("rbf", gamma=1.0 / args.d), C=1.0,
                             dtype=torch.float32, cache_size=max(200.0, 3 * m * 4 / 2**20))
        objective = tf.Quadratic(op)
        x0 = torch.zeros(m, dtype=torch.float64, device=device)
        x0[0] = 1.0
        floor_us = m * args.d * 4 / bw * 1e6
        for name in args.solvers:
            cls = SOLVERS[name]
            for mode in args.modes:
                iters = args.iters if mode in ("graph", "compile") else args.host_iters
                # Warm-up run: compilation / graph capture / allocator.
                warm, _ = run(cls, objective, x0, mode, 3 * args.check_every, args.check_every)
                elapsed, result = run(cls, objective, x0, mode, iters, args.check_every)
                per_iter = elapsed / result.n_iter * 1e6
                row = {"m": m, "d": args.d, "solver": name, "mode": mode,
                       "iterations": result.n_iter, "us_per_iter": per_iter,
                       "floor_us": floor_us, "ratio_to_floor": per_iter / floor_us,
                       "warmup_s": warm}
                rows.append(row)
                print(f"m={m:>8d} {name:8s} {mode:7s} {per_iter:9.1f} us/it  floor "
                      f"{floor_us:7.1f} us  ratio {per_iter / floor_us:6.2f}  "
                      f"(warm-up incl. compile {warm:.1f} s)", flush=True)
        del op, objective, X
        if device.type == "cuda":
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": machine(device), "bandwidth_GBps": bw / 1e9, "torch": torch.__version__,
            "command": "python benchmarks/gpu_loop.py " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = ["# GPU hot loop: time per iteration against the bandwidth floor", "",
             f"Machine: {meta['machine']}; measured bandwidth {meta['bandwidth_GBps']:.0f} GB/s; "
             f"torch {meta['torch']}.", "", f"Command: `{meta['command']}`", "",
             "| m | d | solver | mode | us/iter | floor us | ratio |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['m']} | {r['d']} | {r['solver']} | {r['mode']} | "
                     f"{r['us_per_iter']:.1f} | {r['floor_us']:.1f} | "
                     f"{r['ratio_to_floor']:.2f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')} and .json")


if __name__ == "__main__":
    main()
