"""Command-line demo: ``torchrun --nproc_per_node=N -m torchfw.distributed ...``.

One concern: parsing the demo's arguments, setting up the process group and reporting a
:class:`~torchfw.distributed.svc.DistributedSVC` fit on generated data or a LIBSVM file.
"""

from __future__ import annotations

import time

import torch

from ..result import problem_results
from .comm import dist, shard_range
from .engine import EXCHANGES
from .svc import DISTRIBUTED_SOLVERS, DistributedSVC


def main(argv=None) -> int:
    """Train a DistributedSVC on generated data or a LIBSVM file, one shard per rank."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=N -m torchfw.distributed",
        description="Data-parallel kernel SVM training with torchfw (one shard per rank).")
    parser.add_argument("--data", help="LIBSVM/svmlight training file (every rank reads it and "
                                       "keeps its rows)")
    parser.add_argument("--test", help="LIBSVM/svmlight test file")
    parser.add_argument("--generate", type=int, nargs=2, metavar=("M", "D"),
                        default=(20000, 16), help="generated data (default: 20000 16)")
    parser.add_argument("--solver", default="swap", choices=DISTRIBUTED_SOLVERS)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--gamma", default="scale")
    parser.add_argument("--tol", type=float, default=0.3)
    parser.add_argument("--exchange", default="auto", choices=EXCHANGES)
    parser.add_argument("--backend", default=None, help="default: nccl with CUDA, else gloo")
    args = parser.parse_args(argv)
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    owns_group = not dist.is_initialized()
    if owns_group:
        dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = None
    if backend == "nccl":
        local_rank = int(__import__("os").environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    from ..datasets import load_svmlight, make_large_classification

    if args.data:
        X, y = load_svmlight(args.data)
        X = X.to_dense()
    else:
        m, d = args.generate
        X, y = make_large_classification(m + m // 4, d, random_state=0)
        X, y = X[:m], y[:m]
        X_test, y_test = make_large_classification(m + m // 4, d, random_state=0)
        X_test, y_test = X_test[m:], y_test[m:]
    start, stop = shard_range(X.shape[0], rank, world)
    gamma = args.gamma if args.gamma in ("scale", "auto") else float(args.gamma)
    t0 = time.perf_counter()
    model = DistributedSVC(C=args.C, gamma=gamma, solver=args.solver, tol=args.tol,
                           exchange=args.exchange, device=device).fit(X[start:stop],
                                                                      y[start:stop])
    elapsed = time.perf_counter() - t0
    if args.test:
        X_test, y_test = load_svmlight(args.test, n_features=X.shape[1])
        X_test = X_test.to_dense()
    if rank == 0:
        results = problem_results(model.result_)
        iterations = sum(r.n_iter for r in results)
        sent = sum(r.info["communication"]["sent"] for r in results)
        print(f"ranks={world} backend={backend} m={X.shape[0]} d={X.shape[1]} "
              f"solver={args.solver} exchange={results[0].info['exchange']}")
        print(f"fit {elapsed:.2f} s, {iterations} iterations, {len(model.support_)} support "
              f"vectors, {sent / max(1, iterations):.0f} bytes sent per iteration by rank 0")
        if not args.data or args.test:
            print(f"test accuracy {model.score(X_test, y_test):.4f}")
    if owns_group:
        dist.destroy_process_group()
    return 0
