"""The warm-up: compile the kernels of the common SVC fits into numba's disk cache.

``python -m torchfw warmup`` runs it in the foreground (a container build, a CI job's setup
step); :func:`torchfw.utils.cold_start.start_warmup` starts it in the background, at a low
scheduling priority, as ``python -m torchfw warmup --lock LOCK`` (with
``TORCHFW_COLD_START=compile``) when a fit finds the cache cold. It runs the fits whose compiled
kernels a first script meets -- every solver of the README's demo on dense data, a sparse fit
of count features, a three-class fit, and their predictions -- then writes the marker file
(:func:`~torchfw.utils.cold_start.marker_path`) that lets later fits run compiled, and removes
its lock. Kernels of other fits (float64, other kernels, the Weston-Watkins and Lasso families)
still compile on their first use, as before.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

__all__ = ["main", "workloads"]


def workloads() -> None:
    """The fits whose kernels the warm-up compiles (each small: the time is the compiling)."""
    import numpy as np
    import scipy.sparse as sp

    from .datasets import make_classification_blobs
    from .solvers import SOLVERS, solver_names
    from .svm.estimator import SVC

    # Sizes as the demo's and the first fits': the full-matrix compiled path below the
    # cache_size budget, one binary problem (and the streaming solvers' lazy path).
    X, y = make_classification_blobs(2000, 2, pattern="rings", noise=0.15, random_state=0)
    for solver in solver_names("svc"):
        model = SVC(solver=solver, C=10.0, gamma=2.0, random_state=0,
                    max_iter=200 if SOLVERS[solver].streaming else None)
        model.fit(X, y).score(X, y)
    SVC().fit(X, y).predict(X)
    # Count features, sparse (a9a-like: one byte per value on the compiled path).
    rng = np.random.default_rng(0)
    dense = (rng.random((1000, 60)) < 0.2).astype(np.float64)
    labels = np.where(dense[:, :6].sum(axis=1) + rng.normal(0, 0.5, 1000) > 1.2, 1, -1)
    SVC().fit(sp.csr_matrix(dense), labels).decision_function(sp.csr_matrix(dense))
    # Three classes (one-vs-one pairs by default).
    X3, y3 = make_classification_blobs(900, 3, random_state=0)
    SVC().fit(X3, y3).predict(X3)
    # The optimizer's L-infinity steps (move, and momentum with move) on its compiled kernels.
    import torch

    from .optim import StochasticFrankWolfe
    from .sets.oracles import LinfBall

    for dtype in (torch.float32, torch.float64):
        weight = torch.nn.Parameter(torch.zeros(128, 128, dtype=dtype))
        opt = StochasticFrankWolfe([weight], lmo=LinfBall(1.0), lr=0.1)
        for _ in range(2):  # the first step starts the buffer, the second fuses the average
            weight.grad = torch.ones_like(weight)
            opt.step()


def main(argv: list[str] | None = None) -> int:
    """``warmup [--lock FILE]``: run :func:`workloads` and mark the cache warm.

    ``--lock``: the lock file of a background warm-up (the process also lowers its scheduling
    priority: the user's own work comes first). It is removed when the marker is written; a
    warm-up that fails leaves it, so that the next one starts only once it is stale
    (:data:`~torchfw.utils.cold_start.LOCK_STALE_S`), not in every new process.
    """
    from .utils import cold_start

    argv = list(sys.argv[1:] if argv is None else argv)
    lock = None
    if argv[:1] == ["--lock"] and len(argv) == 2:
        lock = Path(argv[1])
        if hasattr(os, "nice"):
            os.nice(10)
        lock.write_text(f"{os.getpid()} {time.time():.0f}\n")
    elif argv:
        print("usage: python -m torchfw warmup", file=sys.stderr)
        return 2
    if not cold_start.jit.HAVE_NUMBA:
        print("numba is not available: nothing to compile", file=sys.stderr)
        return 1
    start = time.process_time()
    workloads()
    marker = cold_start.marker_path()
    if marker is None:
        return 1
    marker.write_text(f"compiled in {time.process_time() - start:.1f} s of CPU time\n")
    # Markers of earlier versions of the package name kernels no longer used.
    for old in marker.parent.glob("torchfw-kernels-*.warm"):
        if old != marker:
            old.unlink(missing_ok=True)
    if lock is not None:
        lock.unlink(missing_ok=True)
    else:
        print(f"compiled kernels cached in {marker.parent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
