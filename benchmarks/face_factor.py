"""The corrective step's face factorization: row by row against the row blocks, side by side.

The corrective step (:mod:`torchfw.optimizers._face`) factors the face's matrix
:math:`G = \\tilde Q_{SS}` with a dense Cholesky factor extended row by row; on a9a at large C
faces reach 2,000-4,000 atoms and the factor, :math:`k^3/3` multiply-adds, is most of a
correction. :func:`~torchfw.optimizers._face.extend_factor` now takes its rows in blocks
(:data:`~torchfw.optimizers._face.FACTOR_ROWS`), four per pass over a factor row, with the
same sums in the same order; from :data:`~torchfw.optimizers._face.GEMM_ATOMS` atoms on, its
sums against earlier column blocks are block products (other sums: the same factor to
rounding, not the same bits). This script times both on a random positive definite
:math:`G` (the row-by-row loop is the previous kernel, compiled here), from scratch and as the
extension of a factored half (what a correction's round does), alternating the two, and checks
whether the factors are equal bit for bit (else their largest difference relative to the
factor's largest entry). Pure numba (no BLAS, no SciPy).

Usage::

    python benchmarks/face_factor.py                  # k = 1000, 2000, 3000; 5 repeats
    python benchmarks/face_factor.py --k 2000 --repeats 7

Writes ``benchmarks/results/face_factor_<machine>.md`` (``--machine``, default the CPU's tag
and its core count).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_model, machine_header, machine_tag  # noqa: E402


def _row_by_row():
    """The previous kernel, compiled: each row's entries left to right, one dot product each."""
    import numba

    from torchfw.optimizers._face import _dot4, _pivot_cutoff

    @numba.njit(cache=False)
    def rowwise(L, k0, k):
        cutoff = _pivot_cutoff(L, k0, k)
        for a in range(k0, k):
            for b in range(a):
                L[a, b] = (L[a, b] - _dot4(L[a], L[b], b)) / L[b, b]
            acc = L[a, a] - _dot4(L[a], L[a], a)
            if not acc > cutoff:
                return a
            L[a, a] = np.sqrt(acc)
            for b in range(a + 1, L.shape[1]):
                L[a, b] = 0.0
        for a in range(k0):
            for b in range(k0, k):
                L[a, b] = 0.0
        return k

    return rowwise


def measure(k: int, repeats: int) -> list[dict]:
    from torchfw.optimizers import _face

    rowwise = _row_by_row()
    cap = 4096 if k <= 4096 else k  # the correction's buffer: MAX_FACE rows
    rng = np.random.default_rng(0)
    A = rng.standard_normal((k, k // 2))
    G = A @ A.T / k + 1e-3 * np.eye(k)

    def run(fn, k0):
        L = np.empty((cap, cap))
        L[:k, :k] = G
        if k0:
            assert rowwise(L, 0, k0) == k0
        t = time.perf_counter()
        assert fn(L, k0, k) == k
        return time.perf_counter() - t, L[:k, :k].copy()

    run(rowwise, 0)
    run(_face.extend_factor, 0)  # compile both outside the clock
    rows = []
    for k0 in (0, k // 2):
        before, after, same, diff = [], [], True, 0.0
        for _ in range(repeats):
            t, La = run(rowwise, k0)
            before.append(t)
            t, Lb = run(_face.extend_factor, k0)
            after.append(t)
            same &= bool(np.array_equal(La, Lb))
            diff = max(diff, float(np.abs(La - Lb).max() / np.abs(La).max()))
        rows.append({"k": k, "k0": k0, "before": float(np.median(before)),
                     "after": float(np.median(after)), "identical": same, "rel_diff": diff})
        r = rows[-1]
        print(f"k={k:5d} from {k0:5d}: row by row {r['before']:.3f} s, blocks "
              f"{r['after']:.3f} s, ratio {r['after'] / r['before']:.2f}, same bits {same} "
              f"(largest relative difference {diff:.1e})",
              flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1000, 2000, 3000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--machine", default=None)
    args = parser.parse_args()
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg())}
    rows = [r for k in args.k for r in measure(k, args.repeats)]
    meta["load_average_end"] = list(os.getloadavg())
    tag = args.machine or f"{machine_tag()}{os.cpu_count()}"
    lines = ["# Face factorization: row by row against row blocks", ""]
    lines += machine_header(meta, "python benchmarks/face_factor.py " + " ".join(sys.argv[1:]))
    lines += [f"Median of {args.repeats} alternating runs, single thread, float64; load "
              f"average at the end {meta['load_average_end'][0]:.2f}.", "",
              "| atoms k | factored before | row by row | row blocks | ratio | same bits |",
              "|---|---|---|---|---|---|"]
    same_bits = {True: "yes", False: "no"}
    for r in rows:
        lines.append(f"| {r['k']} | {r['k0']} | {r['before']:.3f} s | {r['after']:.3f} s | "
                     f"{r['after'] / r['before']:.2f} | {same_bits[r['identical']]}"
                     f"{'' if r['identical'] else ' (%.0e)' % r['rel_diff']} |")
    out = Path(__file__).resolve().parent / "results" / f"face_factor_{tag}.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
