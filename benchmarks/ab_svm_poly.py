"""A/B of ``SVC(kernel="poly")`` fit times at points of ``svm_poly.py``: a baseline tree and this.

``svm_poly.py`` times each point by the median wall time of three fits, each right after a
LIBSVM fit in a child process: on a shared 2-core machine a fit of 1-3 ms then moves by a
factor of 2 or more between runs. This script measures the CPU time (``time.process_time``)
of ``--repeats`` fits per process, torchfw's and LIBSVM's (scikit-learn's ``SVC`` at ``C``,
torchfw at ``2C``, as ``svm_poly.py``), in fresh processes alternating base / new in ABBA order,
and reports each side's median over its processes, the ratio new/base and both against
LIBSVM. The fitted models of both trees must be the same bit for bit (``dual_coef_``,
``intercept_``, ``n_iter_``, ``support_``): a difference is reported.

The default points are the four at which ``svm_poly_powint_xeon2.md`` measured torchfw over
2x LIBSVM's time: raw iris at degree 3 (gamma "scale" and 0.1), scaled wine at degree 3 and
gamma 0.1, scaled breast cancer at degree 5 and gamma 1.

Usage::

    python benchmarks/ab_svm_poly.py --base-tree /tmp/base --pairs 4 --repeats 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from ab_svm_small import run_worker  # noqa: E402
POINTS = ("iris:raw:3:scale", "iris:raw:3:0.1", "wine:scaled:3:0.1", "breast_cancer:scaled:5:1")


def _point(text: str):
    name, scaling, degree, gamma = text.split(":")
    return name, scaling, int(degree), gamma if gamma == "scale" else float(gamma)


def worker(points: list[str], repeats: int, dump: str) -> None:
    """One process: per point, the median CPU seconds of torchfw's and LIBSVM's fits, as JSON;
    torchfw's model to ``dump`` (one ``.npz`` per point)."""
    sys.path.insert(0, str(HERE))
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC as LibSVC
    from svm_poly import load, svm_scale

    import torchfw
    from torchfw import SVC

    out: dict = {"file": torchfw.__file__}
    for k, text in enumerate(points):
        name, scaling, degree, gamma = _point(text)
        X, y = load(name)
        Xa, Xb, ya, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        if scaling == "scaled":
            Xa = svm_scale(Xa, Xb)[0]
        times = {"torchfw": [], "libsvm": []}
        for side, fit in (("torchfw", lambda: SVC(kernel="poly", degree=degree, gamma=gamma,
                                                  C=2.0, random_state=0).fit(Xa, ya)),
                          ("libsvm", lambda: LibSVC(kernel="poly", degree=degree, gamma=gamma,
                                                    C=1.0).fit(Xa, ya))):
            for _ in range(3):
                model = fit()
            for _ in range(repeats):
                start = time.process_time()
                fit()
                times[side].append(time.process_time() - start)
            if side == "torchfw":
                np.savez(f"{dump}_{k}.npz", dual=np.asarray(model.dual_coef_),
                         intercept=np.asarray(model.intercept_), n_iter=model.n_iter_,
                         support=model.support_)
        out[text] = {s: statistics.median(t) for s, t in times.items()}
    print(json.dumps(out))


def _run(tree: str, points, repeats: int, dump: str) -> dict:
    return run_worker(__file__, tree, ["--repeats", str(repeats), "--dump", dump,
                                       "--points", *points])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-tree", help="the baseline's source tree (a detached worktree)")
    parser.add_argument("--new-tree", default=str(ROOT), help="the tree under test")
    parser.add_argument("--points", nargs="+", default=list(POINTS),
                        help="data:scaling:degree:gamma, e.g. iris:raw:3:scale")
    parser.add_argument("--repeats", type=int, default=200, help="timed fits per process")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.points, args.repeats, args.dump)
        return
    if not args.base_tree:
        parser.error("--base-tree is required")
    runs: dict[str, list[dict]] = {"base": [], "new": []}
    trees = {"base": args.base_tree, "new": args.new_tree}
    with tempfile.TemporaryDirectory() as tmp:
        for p in range(args.pairs):
            for side in ("base", "new") if p % 2 == 0 else ("new", "base"):
                runs[side].append(_run(trees[side], args.points, args.repeats, f"{tmp}/{side}"))
        same = []
        for k in range(len(args.points)):
            a, b = np.load(f"{tmp}/base_{k}.npz"), np.load(f"{tmp}/new_{k}.npz")
            same.append(all(np.array_equal(a[f], b[f]) for f in a.files))
    load = os.getloadavg()
    print(f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {args.pairs} pairs of processes, "
          f"{args.repeats} fits each; CPU ms per fit (median)")
    print("| point | LIBSVM | base | new | new/base | base/LIBSVM | new/LIBSVM | same model |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for text, ok in zip(args.points, same, strict=True):
        lib = statistics.median(r[text]["libsvm"] for r in runs["base"] + runs["new"])
        base = statistics.median(r[text]["torchfw"] for r in runs["base"])
        new = statistics.median(r[text]["torchfw"] for r in runs["new"])
        print(f"| {text} | {lib * 1e3:.3f} | {base * 1e3:.3f} | {new * 1e3:.3f} | "
              f"{new / base:.3f} | {base / lib:.2f} | {new / lib:.2f} | {'yes' if ok else 'NO'} |")


if __name__ == "__main__":
    main()
