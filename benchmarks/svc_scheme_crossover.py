"""Where ``SVC(multi_class="auto")`` switches from one-vs-rest to one-vs-one (``OVO_FROM``).

Both schemes of torchfw's ``SVC()`` (C=1, gamma="scale", ``random_state=0``) on generated 3- and
10-class sets (``make_classification(m, 20, n_informative=10, n_clusters_per_class=1)``,
standardized, the 70/30 split of ``benchmarks/svm_small.py``), median of 7 alternating fits
each, with the test accuracy. Prints a table and writes
``benchmarks/results/svc_scheme_crossover.md``.

Usage: ``python benchmarks/svc_scheme_crossover.py``
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model  # noqa: E402
from svm_small import RESULTS, split  # noqa: E402

SIZES = (700, 1500, 2200, 3000, 4500)
REPEATS = 7


def main() -> None:
    import sklearn.datasets as skd

    import torchfw

    load = os.getloadavg()[0]
    lines = ["# SVC: one-vs-rest against one-vs-one by size (`multi_class`)", "",
             f"`python benchmarks/svc_scheme_crossover.py`; {cpu_model()}, {os.cpu_count()} "
             f"CPUs, load average {load:.1f} at the start; median of {REPEATS} alternating "
             f"fits; torchfw's compiled path on its default threads.", "",
             "| classes | m (train) | one-vs-rest | one-vs-one | ovo / ovr | accuracy ovr | "
             "accuracy ovo |", "|---|---|---|---|---|---|---|"]
    for classes in (3, 10):
        for m in SIZES:
            X, y = skd.make_classification(n_samples=m, n_features=20, n_informative=10,
                                           n_classes=classes, n_clusters_per_class=1,
                                           random_state=0)
            Xtr, Xte, ytr, yte = split(X, y, 0)
            times: dict[str, list[float]] = {"ovr": [], "ovo": []}
            acc = {}
            for _ in range(REPEATS):
                for scheme in ("ovr", "ovo"):
                    start = time.perf_counter()
                    model = torchfw.SVC(multi_class=scheme, random_state=0).fit(Xtr, ytr)
                    times[scheme].append(time.perf_counter() - start)
                    acc[scheme] = 100 * model.score(Xte, yte)
            ovr, ovo = (1e3 * float(np.median(times[s])) for s in ("ovr", "ovo"))
            row = (f"| {classes} | {len(ytr):,} | {ovr:.1f} ms | {ovo:.1f} ms | {ovo / ovr:.2f} | "
                   f"{acc['ovr']:.1f} | {acc['ovo']:.1f} |")
            print(row, flush=True)
            lines.append(row)
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "svc_scheme_crossover.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
