"""Where one binary ``SVC`` problem goes from the whole matrix to a cache of rows (ROWS_FROM).

Binary ``torchfw.SVC()`` (defaults, ``random_state=0``) on generated sets
(``make_classification(m, 20, n_informative=10, n_clusters_per_class=1)``, standardized, the
70/30 split of ``benchmarks/svm_small.py``), fitted with the whole ``m x m`` matrix
(``dense=True``) and with the default (``dense="auto"``: from
:data:`torchfw.svm._matrix.ROWS_FROM` examples, a cache with room for every row), alternating,
median of ``--repeats`` fits each; with the rows the cached solve computed. Then the whole
matrix alone (``plain_kernel_matrix``) on one thread and on two, every time listed: its fresh
memory faulted in by two threads is where the whole matrix's time varies on some machines.
Prints the tables and writes ``benchmarks/results/svc_rows_crossover.md``.

Usage: ``python benchmarks/svc_rows_crossover.py [--repeats 31]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model  # noqa: E402
from svm_small import RESULTS, split  # noqa: E402

SIZES = (500, 1000, 1430, 2000, 4000, 8000)
MATRIX_SIZES = (2800, 4000, 5600)


def _data(m: int):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=m, n_features=20, n_informative=10,
                               n_clusters_per_class=1, random_state=0)
    return split(X, y, 0)


def fits(repeats: int) -> list[str]:
    import torchfw
    from torchfw.svm._matrix import ROWS_FROM

    lines = [f"Fits (`ROWS_FROM` = {ROWS_FROM:,}), median of {repeats} alternating fits:", "",
             "| m (train) | whole matrix | default | default / whole | path of the default "
             "| rows computed |", "|---|---|---|---|---|---|"]
    for m in SIZES:
        Xtr, _, ytr, _ = _data(m)
        times: dict[str, list[float]] = {"whole": [], "default": []}
        for _ in range(repeats + 1):  # the first round warms up
            for key, dense in (("whole", True), ("default", "auto")):
                start = time.perf_counter()
                model = torchfw.SVC(dense=dense, random_state=0).fit(Xtr, ytr)
                times[key].append(time.perf_counter() - start)
                info = model.result_.info
        whole, default = (1e3 * float(np.median(times[k][1:])) for k in ("whole", "default"))
        path = "cache" if "cached_rows" in info else "whole"
        row = (f"| {len(ytr):,} | {whole:.2f} ms | {default:.2f} ms | {default / whole:.2f} | "
               f"{path} | {info.get('misses', len(ytr)):,} of {len(ytr):,} |")
        print(row, flush=True)
        lines.append(row)
    return lines


def matrices(repeats: int) -> list[str]:
    import torch

    import torchfw
    from torchfw.svm._matrix import plain_kernel_matrix, plain_operator
    from torchfw.svm._plan import resolve_plan

    lines = ["", f"The whole matrix alone (RBF, float32), {repeats} computations per thread "
             "count, each in ms, sorted:", "", "| m (train) | one thread | two threads |",
             "|---|---|---|"]
    for m in MATRIX_SIZES:
        Xtr, _, _, _ = _data(int(m / 0.7) + 1)
        X = torch.from_numpy(Xtr.astype(np.float32))
        model = torchfw.SVC()
        model._gamma = model._resolve_gamma(X)
        plan = resolve_plan(model, n_examples=X.shape[0], kernel=model._make_kernel(),
                            dtype=torch.float32, device=X.device)
        op = plain_operator(plan, X, model.C)
        cells = []
        for threads in (1, 2):
            plain_kernel_matrix(op, threads=threads)
            ms = []
            for _ in range(repeats):
                start = time.perf_counter()
                plain_kernel_matrix(op, threads=threads)
                ms.append(1e3 * (time.perf_counter() - start))
            cells.append(", ".join(f"{t:.0f}" for t in sorted(ms)))
        row = f"| {X.shape[0]:,} | {cells[0]} | {cells[1]} |"
        print(row, flush=True)
        lines.append(row)
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--matrix-repeats", type=int, default=7)
    args = parser.parse_args(argv)
    lines = ["# SVC: one binary problem, whole matrix against a cache of rows", "",
             f"`python benchmarks/svc_rows_crossover.py`; {cpu_model()}, {os.cpu_count()} "
             f"CPUs, load average {os.getloadavg()[0]:.1f} at the start.", ""]
    lines += fits(args.repeats)
    lines += matrices(args.matrix_repeats)
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "svc_rows_crossover.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
