"""The corrective step's cost on every storage: fits with ``corrective=True``, one per storage.

Each storage (host, dense, device scalars, streaming, sampled, batched, sharded on one gloo
rank) fits the L2-SVM dual of ``make_classification`` data (RBF kernel, ``gamma="scale"``) with
pairwise steps and ``corrective=True`` (what SVC sets), on a well-conditioned problem (C = 1,
where the step should never fire) and an ill-conditioned one (C = 1e4). Prints one line per fit:
storage, C, seconds, iterations, corrective steps, relative gap.

Run it under two checkouts, interleaved, to compare (the step is a no-op on the storages that
lacked it, so the well-conditioned times must match)::

    for r in 1 2 3; do
      PYTHONPATH=/path/to/a python benchmarks/face_storages.py --tag a
      PYTHONPATH=/path/to/b python benchmarks/face_storages.py --tag b
    done
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch

import torchfw as tf
from torchfw.svm.kernels import OneVsRestOperator, SVMDualOperator, make_kernel

F64 = torch.float64


def data(m: int, seed: int = 0):
    from sklearn.datasets import make_classification

    X, y = make_classification(m, 10, random_state=seed)
    X = torch.from_numpy(X)
    y = torch.from_numpy(np.where(y == 1, 1.0, -1.0))
    y_alt = torch.where(X[:, 1] > 0, 1.0, -1.0).to(F64)
    return X, y, y_alt, make_kernel("rbf", 1.0 / (X.shape[1] * float(X.var())))


def optimizer(**options):
    return tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch(), tol=1e-300, rtol=1e-6,
                                 corrective=True, **options)


def start(m: int) -> torch.Tensor:
    x0 = torch.zeros(m, dtype=F64)
    x0[0] = 1.0
    return x0


def fit(storage: str, m: int, C: float):
    X, y, y_alt, kernel = data(m)
    if storage in ("host", "dense", "device"):
        op = SVMDualOperator(X, y, kernel, C, dtype=F64)
        res = optimizer(execution=storage, max_iter=20 * m).minimize(tf.Quadratic(op), start(m))
        return res.n_iter, res.steps.get("correct", 0), res.gap / res.value
    if storage == "streaming":
        op = SVMDualOperator(X, y, kernel, C, dtype=F64)
        res = optimizer(stream=True, random_state=0, max_iter=5 * m).minimize(tf.Quadratic(op))
        return res.n_iter, res.steps.get("correct", 0), res.gap / res.value
    if storage == "sampled":
        from torchfw.optimizers._kernel_rows import KernelRows
        from torchfw.optimizers._sampled_run import minimize_sampled

        res = minimize_sampled(optimizer(), KernelRows(X, y, kernel, C, dtype=F64),
                               torch.tensor([0]), torch.tensor([1.0], dtype=F64),
                               tol=1e-300, rtol=1e-6, max_iter=20 * m, random_state=0)
        return res.n_iter, res.steps.get("correct", 0), res.gap / res.value
    if storage == "batched":
        from torchfw.optimizers.batched import minimize_batched

        op = OneVsRestOperator(X, torch.stack([y, y_alt]), kernel, C, dtype=F64)
        res = minimize_batched(optimizer(), op, torch.stack([start(m), start(m)]), tol=1e-300,
                               rtol=1e-6, max_iter=20 * m, use_graph=False)
        return (int(res.n_iter.max()), res.steps.get("correct", 0),
                float((res.gap / res.value).max()))
    if storage == "sharded":
        from torchfw import distributed as D

        op = D.ShardedSVMDualOperator(X, y, kernel, C, dtype=F64)
        res = D.minimize(optimizer(max_iter=20 * m), op, start(m))
        return res.n_iter, res.steps.get("correct", 0), res.gap / res.value
    raise ValueError(storage)


STORAGES = ("host", "dense", "device", "streaming", "sampled", "batched", "sharded")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="")
    parser.add_argument("--m", type=int, default=600)
    parser.add_argument("--storages", default=",".join(STORAGES))
    parser.add_argument("--C", default="1,1e4")
    args = parser.parse_args()
    import torch.distributed as dist

    store = tempfile.mktemp()
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        for C in (float(c) for c in args.C.split(",")):
            for storage in args.storages.split(","):
                fit(storage, 60, C)  # compile and warm up
                t0 = time.perf_counter()
                n_iter, corrections, rel_gap = fit(storage, args.m, C)
                seconds = time.perf_counter() - t0
                print(f"{args.tag}\t{storage}\tC={C:g}\t{seconds:.3f}s\t{n_iter} it\t"
                      f"{corrections} corr\trelgap {rel_gap:.2e}", flush=True)
    finally:
        dist.destroy_process_group()
        if os.path.exists(store):
            os.remove(store)


if __name__ == "__main__":
    main()
