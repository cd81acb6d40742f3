"""A/B timing of the current tree against a baseline commit: no slow-down.

Usage::

    python benchmarks/ab_main.py                       # baseline 67d5e54, 3 pairs per workload
    python benchmarks/ab_main.py --base <commit> --pairs 5 --workloads lasso ww_dna

The baseline is checked out once as a detached git worktree outside the repository
(``--worktree``, default ``/tmp/torchfw_base``; reused when it already sits at the commit; the
shared working tree is never switched). Every measurement runs in its own fresh Python process
with ``PYTHONPATH`` set to one tree, so ``import torchfw`` resolves to that tree (the worker
checks ``torchfw.__file__`` and refuses otherwise); the benchmark helpers it imports
(``benchmarks/_data.py``, ``svm_vs_libsvm.py``, ``lasso_vs_sklearn.py``,
``ww_vs_liblinear.py``) are the current tree's on both sides, so only the library differs.
Inside a worker a warm-up fit runs first (numba compilation and caches stay out of the
clock), then the timed fit(s). Processes alternate old/new in ABBA order (old, new, new, old,
...) so that a drift in machine load hits both sides alike; each side's number is the median
over its processes. Wall and CPU seconds (``time.process_time``, all threads of the worker) are
both recorded; on a shared machine CPU seconds are the steadier measure.

Workloads (settings of the existing benchmark scripts):

* ``svc``: ``SVC(solver="swap", C=1, gamma="scale" resolved as svm_vs_libsvm.py does, tol=0.3,
  cache_size=200, random_state=0)`` on a9a; ``--svc-rows`` limits training to the first rows
  (default 10,000; 0 = all 32,561); test accuracy on the full a9a.t. Warm-up: the same fit on
  the first 1,000 rows (svm_vs_libsvm.py's ``--warmup``).
* ``svc_w8a``: the same on w8a (49,749 examples; ``--svc-rows`` applies too).
* ``lasso``: the leukemia regularization path of lasso_vs_sklearn.py part 2 (centred data, 30
  log-spaced alphas from alpha_max to alpha_max / 100, tol 1e-6, ``torchfw.lasso_path``); warm-up
  = one full path; ``--lasso-inner`` timed paths per process.
* ``ww_dna``, ``ww_satimage``, ``ww_sector``: ``WestonWatkinsSVC(C, tol=0.0009,
  random_state=0, shrinking=True)`` (a fixed workload: the estimator's defaults changed since)
  at ww_vs_liblinear.py's Table 6 C, on its scipy loader's matrices; warm-up = one fit;
  ``--ww-inner`` timed fits per process (sector: 1).

Equality: each worker saves the fitted coefficients; the report gives the largest absolute
difference old vs new, and both sides' accuracy, iterations and objective.

Writes ``benchmarks/results/ab_main.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_BASE = "67d5e54"
WORKLOADS = ("svc", "svc_w8a", "lasso", "ww_dna", "ww_satimage", "ww_sector")


# -- worker: one fresh process, one tree ----------------------------------------------------------

def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _work_svc(args, name="a9a"):
    import warnings

    import torch
    from _data import load_libsvm
    from svm_vs_libsvm import torchfw_run

    try:
        from torchfw.utils.data import take_rows
    except ImportError:  # a base that predates the family packages
        from torchfw._data import take_rows

    data = load_libsvm(name)
    X, y, Xt, yt = data.X_train, data.y_train.numpy(), data.X_test, data.y_test.numpy()
    # gamma="scale" resolved on the full training set, as svm_vs_libsvm.py does.
    values = X.values().double()
    n = X.shape[0] * X.shape[1]
    gamma = 1.0 / (X.shape[1] * float((values * values).sum() / n - (values.sum() / n) ** 2))
    if args.svc_rows:
        rows = torch.arange(args.svc_rows)
        X, y = take_rows(X, rows), y[:args.svc_rows]
    first = torch.arange(1000)
    torchfw_run("swap", take_rows(X, first), y[:1000], take_rows(Xt, first[:100]), yt[:100],
                1.0, gamma, 0.3, "cpu", 0, 200.0)
    from torchfw.svm import SVC

    clf = SVC(solver="swap", C=1.0, gamma=gamma, tol=0.3, device="cpu", random_state=0,
              cache_size=200.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, wall, cpu = _timed(lambda: clf.fit(X, y))
    r = clf.result_
    info = {"accuracy": float(clf.score(Xt, yt)), "n_iter": int(r.n_iter),
            "objective": float(r.value), "rel_gap": float(r.gap / (2 * r.value)),
            "n_sv": int(len(clf.support_)), "gamma": gamma, "n_train": int(X.shape[0])}
    # one row per binary problem (a checkout from before problem_dual_coef_: dual_coef_)
    coef = clf.problem_dual_coef_ if hasattr(type(clf), "problem_dual_coef_") else \
        clf.dual_coef_.double()
    return [wall], [cpu], info, {"dual_coef": np.asarray(coef, dtype=np.float64)}


def _work_lasso(args):
    from _data import load_leukemia
    from lasso_vs_sklearn import TOL

    from torchfw import lasso_path

    X, y = load_leukemia(standardize=True)
    X, y = X.numpy(), y.numpy()
    # lasso_vs_sklearn.path_compare(name, X, y, 30, repeats) for leukemia, torchfw side only.
    Xc = X - X.mean(axis=0)
    yc = y - y.mean()
    amax = float(np.abs(Xc.T @ yc).max()) / len(y)
    alphas = np.geomspace(amax, amax / 100.0, 30)

    def run():
        return lasso_path(Xc, yc, alphas=alphas, tol=TOL, return_n_iter=True)

    run()  # warm-up
    walls, cpus = [], []
    for _ in range(args.lasso_inner):
        (_, coefs, gaps, iters), wall, cpu = _timed(run)
        walls.append(wall)
        cpus.append(cpu)
    coefs = np.asarray(coefs)
    scale = float(yc @ yc) / len(yc)
    info = {"n_iter": int(np.asarray(iters).sum()),
            "max_rel_gap": float(np.max(gaps)) / scale,
            "objective": float(sum(  # sum over the path of the penalized objectives
                float(((yc - Xc @ coefs[:, j]) ** 2).sum()) / (2 * len(yc))
                + alphas[j] * float(np.abs(coefs[:, j]).sum()) for j in range(len(alphas))))}
    return walls, cpus, info, {"coef": coefs}


def _work_ww(args, name):
    from ww_vs_liblinear import SETS, load

    from torchfw import WestonWatkinsSVC

    tr, te, C, _ = SETS[name]
    X, y = load(tr)
    Xt, yt = load(te, X.shape[1])

    def fit():
        return WestonWatkinsSVC(C=C, tol=0.0009, random_state=0, shrinking=True).fit(X, y)

    fit()  # warm-up
    walls, cpus = [], []
    inner = 1 if name == "sector" else args.ww_inner
    for _ in range(inner):
        clf, wall, cpu = _timed(fit)
        walls.append(wall)
        cpus.append(cpu)
    info = {"accuracy": float(clf.score(Xt, yt)), "n_iter": int(clf.n_iter_),
            "objective": float(clf.dual_history_[-1]), "primal": float(clf.primal_history_[-1]),
            "C": C}
    return walls, cpus, info, {"coef": np.asarray(clf.coef_.double().cpu().numpy())}


def worker(args):
    import torchfw  # first, so that the benchmark modules' sys.path edits cannot shadow it

    tree = Path(args.tree).resolve()
    where = Path(torchfw.__file__).resolve()
    if tree not in where.parents:
        raise SystemExit(f"torchfw imported from {where}, not from the tree {tree}")
    sys.path.insert(0, str(HERE))
    if args.worker in ("svc", "svc_w8a"):
        walls, cpus, info, arrays = _work_svc(args, "w8a" if args.worker == "svc_w8a" else "a9a")
    elif args.worker == "lasso":
        walls, cpus, info, arrays = _work_lasso(args)
    else:
        walls, cpus, info, arrays = _work_ww(args, args.worker.split("_", 1)[1])
    np.savez(args.out + ".npz", **arrays)
    Path(args.out + ".json").write_text(json.dumps(
        {"torchfw_file": str(where), "walls": walls, "cpus": cpus, "info": info}))


# -- driver ---------------------------------------------------------------------------------------

def git(*cmd, cwd=ROOT) -> str:
    return subprocess.run(["git", *cmd], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def ensure_worktree(base: str, path: Path) -> str:
    """Detached worktree of ``base`` at ``path``; reused when it already sits at that commit."""
    commit = git("rev-parse", "--verify", base + "^{commit}")
    if path.exists():
        head = git("rev-parse", "HEAD", cwd=path)
        if head != commit:
            raise SystemExit(f"{path} holds {head[:10]}, not {commit[:10]}; pick another "
                             f"--worktree or remove it (git worktree remove {path})")
        return commit
    git("worktree", "add", "--detach", str(path), commit)
    return commit


def run_one(workload, tree: Path, args, tmp: Path, tag: str) -> dict:
    out = tmp / f"{workload}-{tag}"
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", workload, "--tree",
           str(tree), "--out", str(out), "--svc-rows", str(args.svc_rows),
           "--lasso-inner", str(args.lasso_inner), "--ww-inner", str(args.ww_inner)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"worker {workload} on {tree} failed:\n{proc.stderr[-3000:]}")
    res = json.loads(Path(str(out) + ".json").read_text())
    res["process_s"] = time.perf_counter() - t0
    res["arrays"] = str(out) + ".npz"
    res["loadavg"] = os.getloadavg()[0]
    return res


def max_abs_diff(a_path, b_path) -> float:
    with np.load(a_path) as a, np.load(b_path) as b:
        return max(float(np.abs(a[k] - b[k]).max()) if a[k].shape == b[k].shape else float("inf")
                   for k in a.files)


def summarize(workload, old_runs, new_runs) -> dict:
    def side(runs):
        walls = [w for r in runs for w in r["walls"]]
        cpus = [c for r in runs for c in r["cpus"]]
        return walls, cpus

    ow, oc = side(old_runs)
    nw, nc = side(new_runs)
    row = {"workload": workload,
           "old_wall_s": statistics.median(ow), "new_wall_s": statistics.median(nw),
           "old_cpu_s": statistics.median(oc), "new_cpu_s": statistics.median(nc),
           "old_walls": ow, "new_walls": nw, "old_cpus": oc, "new_cpus": nc,
           "old_info": old_runs[0]["info"], "new_info": new_runs[0]["info"],
           "max_abs_coef_diff": max_abs_diff(old_runs[0]["arrays"], new_runs[0]["arrays"]),
           "loadavg_1min": [r["loadavg"] for r in old_runs + new_runs]}
    row["ratio_wall"] = row["new_wall_s"] / row["old_wall_s"]
    row["ratio_cpu"] = row["new_cpu_s"] / row["old_cpu_s"]
    # Paired ratios (pair i = the i-th old and i-th new process, run back to back).
    row["pair_ratios_wall"] = [statistics.median(n["walls"]) / statistics.median(o["walls"])
                               for o, n in zip(old_runs, new_runs, strict=True)]
    row["pair_ratios_cpu"] = [statistics.median(n["cpus"]) / statistics.median(o["cpus"])
                              for o, n in zip(old_runs, new_runs, strict=True)]
    return row


def spread(xs) -> str:
    return f"{min(xs):.3g}-{max(xs):.3g}"


def write(meta, rows, out: Path):
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1,
                                                     default=str) + "\n")
    lines = ["# No slow-down check: current tree vs the baseline commit", "",
             f"Baseline {meta['base_commit'][:10]} (worktree {meta['worktree']}) against "
             f"{meta['new_tree']} (HEAD {meta['new_head'][:10]}"
             + (f", with uncommitted changes in {', '.join(meta['new_dirty'])}"
                if meta["new_dirty"] else "") + "). "
             f"Machine: {meta['cpu']}, {meta['cores']} cores, Python {meta['python']}; shared "
             "with other processes: load average (1, 5, 15 min) "
             + ", ".join(f"{v:.1f}" for v in meta["loadavg_start"]) + " at the start, "
             + ", ".join(f"{v:.1f}" for v in meta["loadavg_end"]) + " at the end, so single "
             "timings vary a lot; the spread columns give min-max over all timed fits.", "",
             f"Command: `{meta['command']}`", "",
             f"{meta['pairs']} old/new pairs of fresh processes per workload in ABBA order; each "
             "process: warm-up fit, then the timed fit(s); medians over all timed fits of a "
             "side. ratio = new / old (< 1: the current tree is faster). CPU seconds are the "
             "worker's process time (all threads). Equality: largest absolute difference of "
             "the fitted coefficients, and both sides' iterations and objective.", "",
             "| workload | old wall s | new wall s | ratio wall | old CPU s | new CPU s | "
             "ratio CPU | paired CPU ratios | spread old / new CPU s | iterations old / new | "
             "objective old / new | accuracy old / new | max abs coef diff |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o, n = r["old_info"], r["new_info"]
        acc = (f"{100 * o['accuracy']:.2f} / {100 * n['accuracy']:.2f}" if "accuracy" in o
               else "-")
        lines.append(
            f"| {r['label']} | {r['old_wall_s']:.3f} | {r['new_wall_s']:.3f} | "
            f"{r['ratio_wall']:.3f} | {r['old_cpu_s']:.3f} | {r['new_cpu_s']:.3f} | "
            f"{r['ratio_cpu']:.3f} | {', '.join(f'{x:.2f}' for x in r['pair_ratios_cpu'])} | "
            f"{spread(r['old_cpus'])} / {spread(r['new_cpus'])} | {o['n_iter']} / "
            f"{n['n_iter']} | {o['objective']:.8g} / {n['objective']:.8g} | {acc} | "
            f"{r['max_abs_coef_diff']:.1e} |")
    lines += ["", f"Elapsed: {meta['elapsed_s']:.0f} s.", ""]
    out.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")


LABELS = {"svc": "SVC swap, a9a", "svc_w8a": "SVC swap, w8a",
          "lasso": "Lasso path, leukemia (30 alphas)",
          "ww_dna": "WW, dna (C=2^-4)", "ww_satimage": "WW, satimage (C=1)",
          "ww_sector": "WW, sector (C=2^-1)"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help="baseline commit")
    parser.add_argument("--worktree", default="/tmp/torchfw_base",
                        help="where the baseline worktree lives (outside the repository)")
    parser.add_argument("--new", default=str(ROOT), help="tree under test (default: this one)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=["lasso", "ww_dna", "ww_satimage",
                                                            "svc"], choices=WORKLOADS)
    parser.add_argument("--svc-rows", type=int, default=10_000,
                        help="first rows of a9a to train on (0: all 32,561)")
    parser.add_argument("--lasso-inner", type=int, default=3)
    parser.add_argument("--ww-inner", type=int, default=3)
    parser.add_argument("--results", default=str(RESULTS / "ab_main"),
                        help="report path without suffix (.md and .json are written)")
    parser.add_argument("--worker", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    from _machine import cpu_model

    start = time.perf_counter()
    old = Path(args.worktree).resolve()
    new = Path(args.new).resolve()
    if old == ROOT or ROOT in old.parents:
        parser.error("--worktree must lie outside the repository")
    commit = ensure_worktree(args.base, old)
    status = subprocess.run(["git", "status", "--porcelain", "--", "torchfw"], cwd=new,
                            check=True, capture_output=True, text=True).stdout
    dirty = [line[3:] for line in status.splitlines() if line.strip()]  # "XY path" lines
    meta = {"base": args.base, "base_commit": commit, "worktree": str(old), "new_tree": str(new),
            "new_head": git("rev-parse", "HEAD", cwd=new), "new_dirty": dirty,
            "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "loadavg_start": os.getloadavg(), "pairs": args.pairs, "svc_rows": args.svc_rows,
            "command": "python benchmarks/ab_main.py " + " ".join(argv or sys.argv[1:])}
    rows = []
    with tempfile.TemporaryDirectory(prefix="ab_main_") as tmp:
        for workload in args.workloads:
            runs = {"old": [], "new": []}
            for i in range(args.pairs):
                order = [("old", old), ("new", new)]
                for tag, tree in (order if i % 2 == 0 else order[::-1]):
                    res = run_one(workload, tree, args, Path(tmp), f"{tag}{i}")
                    runs[tag].append(res)
                    print(f"  {workload:12s} {tag} #{i}: wall "
                          + ", ".join(f"{w:.3f}" for w in res["walls"]) + "  cpu "
                          + ", ".join(f"{c:.3f}" for c in res["cpus"])
                          + f"  load {res['loadavg']:.1f}  ({res['torchfw_file']})", flush=True)
            row = summarize(workload, runs["old"], runs["new"])
            subset = workload.startswith("svc") and args.svc_rows
            row["label"] = LABELS[workload] + (f" (first {args.svc_rows} rows)" if subset else "")
            rows.append(row)
            print(f"{workload:12s} old {row['old_cpu_s']:.3f} s  new {row['new_cpu_s']:.3f} s "
                  f"cpu ratio {row['ratio_cpu']:.3f} (wall {row['ratio_wall']:.3f})  "
                  f"iters {row['old_info']['n_iter']}/{row['new_info']['n_iter']}  "
                  f"max|dcoef| {row['max_abs_coef_diff']:.1e}", flush=True)
    meta["loadavg_end"] = os.getloadavg()
    meta["elapsed_s"] = time.perf_counter() - start
    write(meta, rows, Path(args.results))


if __name__ == "__main__":
    main()
