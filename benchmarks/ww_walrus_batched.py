"""Batched Walrus (tensor ops, any device) against the sequential compiled Walrus.

Usage::

    python benchmarks/ww_walrus_batched.py [--out DIR]

Solves B independent Weston-Watkins subproblems (4) with ``v`` drawn like BCD's (a positive
common shift plus Gaussian margins, some entries tied on the (C/2) Z grid), with

- the sequential sort-and-sweep (numba, one CPU core, all rows in one compiled loop), and
- :func:`torchfw.ww.subproblem.walrus_batched` on the CPU and, when present, on CUDA,

checks they agree, and prints microseconds per subproblem. This measures the *subproblem
solver*; BCD itself stays sequential (see docs/design.md). Writes ``ww_batched.md`` and
``ww_batched.json`` to ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchfw.ww import _blocks as K  # noqa: E402
from torchfw.ww.subproblem import walrus_batched  # noqa: E402


def _seq_py(V, C, out, heap, hidx, sv, si, prefix):
    m = V.shape[1]
    for r in range(V.shape[0]):
        K.walrus_single(V[r], m, C, out[r], heap, hidx, sv, si, prefix, 0.0)


_seq = K._jit(_seq_py)


def make_v(B: int, m: int, C: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    V = 0.3 + 0.5 * rng.normal(size=(B, m))
    tied = rng.random(B) < 0.2
    V[tied] = np.round(V[tied] / (C / 2)) * (C / 2)
    return V


def timeit(fn, reps=3):
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    C = 0.5
    rows = []
    cuda = torch.cuda.is_available()
    for m, B in ((2, 200_000), (25, 100_000), (104, 50_000), (999, 10_000)):
        V = make_v(B, m, C)
        out = np.zeros_like(V)
        ws = K.Workspace(m + 1)
        t_seq = timeit(lambda V=V, out=out, ws=ws: _seq(V, C, out, ws.heap, ws.hidx, ws.sv,
                                                        ws.si, ws.prefix))
        Vt = torch.from_numpy(V)
        t_cpu = timeit(lambda Vt=Vt: walrus_batched(Vt, C))
        err = float((walrus_batched(Vt, C) - torch.from_numpy(out)).abs().max())
        row = {"k": m + 1, "B": B, "sequential_numba_us": 1e6 * t_seq / B,
               "batched_cpu_us": 1e6 * t_cpu / B, "max_abs_diff": err}
        if cuda:
            Vg = Vt.cuda()

            def run(Vg=Vg):
                walrus_batched(Vg, C)
                torch.cuda.synchronize()

            row["batched_cuda_us"] = 1e6 * timeit(run) / B
            row["max_abs_diff_cuda"] = float((walrus_batched(Vg, C).cpu()
                                              - torch.from_numpy(out)).abs().max())
        rows.append(row)
        print(row, flush=True)
    dev = torch.cuda.get_device_name() if cuda else "none"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"cpu_cores": os.cpu_count(), "cuda_device": dev, "torch": torch.__version__}
    (out_dir / "ww_batched.json").write_text(json.dumps({"machine": meta, "rows": rows},
                                                        indent=2))
    lines = ["# Batched Walrus vs sequential Walrus (microseconds per subproblem)", "",
             f"Machine: {os.cpu_count()} CPU cores, CUDA device: {dev}, torch "
             f"{torch.__version__}. Command: `python benchmarks/ww_walrus_batched.py`. "
             "Sequential: compiled sort-and-sweep, one core, all rows in one compiled loop. "
             "Batched: `walrus_batched` (tensor ops, float64), best of 3.", "",
             "| k | B | sequential (numba, 1 core) | batched, CPU | batched, CUDA | max diff |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['k']} | {r['B']} | {r['sequential_numba_us']:.3f} | "
                     f"{r['batched_cpu_us']:.3f} | "
                     f"{r.get('batched_cuda_us', float('nan')):.3f} | "
                     f"{max(r['max_abs_diff'], r.get('max_abs_diff_cuda', 0.0)):.1e} |")
    (out_dir / "ww_batched.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
