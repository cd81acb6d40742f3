"""A/B of ``SVC()`` fit times on the small sets of ``svm_small.py``: a baseline tree and this.

Each side runs in fresh Python processes with ``PYTHONPATH`` set to its tree, alternating in
ABBA order (base, new, new, base, ...) so that a drift in machine load hits both alike. A
process fits ``SVC()`` (defaults) on the training part of ``svm_small.py``'s split of each set
(standardized, 70/30, seed 0): two untimed fits, then ``--repeats`` timed fits, of which it
reports the median CPU seconds (``time.process_time``: every thread of the process) per fit.
Each side's figure is the median over its processes; the ratio new/base and the per-pair
ratios are printed with the machine's load. The fitted models must be the same bit for bit
(``dual_coef_`` or ``problem_dual_coef_``, intercepts, ``n_iter_``, ``support_``): a
difference is reported.

Usage::

    python benchmarks/ab_svm_small.py --base-tree /tmp/base --pairs 6 \\
        --sets breast_cancer gen500 gen2000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _data(name: str):
    """The training part of ``svm_small.py``'s split of set ``name`` (a scikit-learn loader's
    name, or ``gen<m>`` / ``gen<m>c10``: its generated sets of m examples, 2 or 10 classes)."""
    sys.path.insert(0, str(HERE))
    from sklearn import datasets as skd
    from svm_small import split

    if name.startswith("gen"):
        m, _, classes = name[3:].partition("c")
        X, y = skd.make_classification(n_samples=int(m), n_features=20, n_informative=10,
                                       n_classes=int(classes or 2), n_clusters_per_class=1,
                                       random_state=0)
    else:
        X, y = getattr(skd, f"load_{name}")(return_X_y=True)
    Xtr, _, ytr, _ = split(X, y)
    return Xtr, ytr


def worker(sets: list[str], repeats: int, dump: str) -> None:
    """One process: the median CPU seconds per fit of each set, as JSON; the models to
    ``dump`` (one ``.npz`` per set)."""
    import torchfw
    from torchfw import SVC

    out: dict = {"file": torchfw.__file__}
    for name in sets:
        X, y = _data(name)
        for _ in range(2):
            SVC().fit(X, y)
        times = []
        for _ in range(repeats):
            start = time.process_time()
            model = SVC().fit(X, y)
            times.append(time.process_time() - start)
        out[name] = statistics.median(times)
        ovr = model.multi_class_ == "ovr"
        np.savez(f"{dump}_{name}.npz",
                 dual=np.asarray(model.problem_dual_coef_ if ovr else model.dual_coef_),
                 intercept=np.asarray(model.problem_intercept_), n_iter=model.n_iter_,
                 support=model.support_)
    print(json.dumps(out))


def run_worker(script: str, tree: str, args: list[str]) -> dict:
    """Run ``script --worker *args`` in a fresh process on the source tree ``tree`` and return
    the JSON of its last line; refuse a worker that imported torchfw from elsewhere."""
    out = subprocess.run([sys.executable, script, "--worker", *args], cwd=tree, check=True,
                         env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if not result["file"].startswith(str(Path(tree).resolve())):
        raise RuntimeError(f"{tree}: torchfw imported from {result['file']}")
    return result


def _run(tree: str, sets, repeats: int, dump: str) -> dict:
    return run_worker(__file__, tree, ["--repeats", str(repeats), "--dump", dump,
                                       "--sets", *sets])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-tree", help="the baseline's source tree (a detached worktree)")
    parser.add_argument("--new-tree", default=str(ROOT), help="the tree under test")
    parser.add_argument("--sets", nargs="+", default=["breast_cancer", "gen500", "gen2000"])
    parser.add_argument("--repeats", type=int, default=300, help="timed fits per process")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.sets, args.repeats, args.dump)
        return
    if not args.base_tree:
        parser.error("--base-tree is required")
    runs: dict[str, list[dict]] = {"base": [], "new": []}
    trees = {"base": args.base_tree, "new": args.new_tree}
    with tempfile.TemporaryDirectory() as tmp:
        for p in range(args.pairs):
            for side in ("base", "new") if p % 2 == 0 else ("new", "base"):
                runs[side].append(_run(trees[side], args.sets, args.repeats, f"{tmp}/{side}"))
        same = {}
        for name in args.sets:
            a, b = np.load(f"{tmp}/base_{name}.npz"), np.load(f"{tmp}/new_{name}.npz")
            same[name] = all(np.array_equal(a[k], b[k]) for k in a.files)
    load = os.getloadavg()
    print(f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {args.pairs} pairs of processes, "
          f"{args.repeats} fits each; CPU ms per fit (median)")
    print("| set | base | new | new/base | pair ratios (min-max) | same model |")
    print("|---|---:|---:|---:|---|---|")
    for name in args.sets:
        base = statistics.median(r[name] for r in runs["base"])
        new = statistics.median(r[name] for r in runs["new"])
        ratios = [n[name] / b[name] for b, n in zip(runs["base"], runs["new"], strict=True)]
        print(f"| {name} | {base * 1e3:.3f} | {new * 1e3:.3f} | {new / base:.3f} | "
              f"{min(ratios):.3f}-{max(ratios):.3f} | {'yes' if same[name] else 'NO'} |")


if __name__ == "__main__":
    main()
