"""``SVC().fit`` on many classes of two examples each: fit time and peak memory against
scikit-learn's SVC.

One-vs-one trains :math:`k(k-1)/2` pairs (1,000 classes: 499,500 pairs of 4 examples), so any
per-pair cost -- a dense row over all support vectors, a fixed Python overhead -- shows here
and nowhere else. Each point runs in a fresh subprocess (so that peak RSS is its own): the
data (``k`` classes, 2 Gaussian examples of 10 features each, seed 0), one ``fit`` timed, then
``predict`` on the training rows timed. ``torchfw`` is
``SVC(multi_class="ovo")`` (scikit-learn's scheme at every size), ``torchfw-auto`` ``SVC()``
(one-vs-rest below 1,500 examples). Memory is read as the process's peak RSS
(``resource.getrusage``) and its growth over the RSS before the fit; a watchdog thread ends a
point that passes ``--limit-mb`` (the machine is shared: a run that grows without bound must
not take it down).

Usage::

    python benchmarks/svc_many_classes.py --classes 100 300 1000 \
        --out benchmarks/results/svc_many_classes_xeon2.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _watchdog(limit_mb: float) -> None:
    """End the process (exit 3) as soon as its RSS passes ``limit_mb``."""
    def watch():
        while True:
            if _rss_mb() > limit_mb:
                print(json.dumps({"error": f"RSS over {limit_mb:.0f} MB"}), flush=True)
                os._exit(3)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()


def _point(tool: str, k: int, limit_mb: float) -> dict:
    """One fit and predict of ``tool`` on ``k`` classes of 2 examples (in this process)."""
    import resource

    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2 * k, 10))
    y = np.repeat(np.arange(k), 2)
    if tool.startswith("torchfw"):
        from torchfw import SVC

        # load the compiled code first (numba's cache), so that the times are the fit's and
        # the prediction's
        SVC(multi_class="ovo").fit(X[:8], y[:8]).predict(X[:8])
        # "auto" trains one-vs-rest below 1,500 examples (OVO_FROM): "torchfw" is one-vs-one
        # at every size, scikit-learn's scheme; "torchfw-auto" the default
        model = SVC() if tool == "torchfw-auto" else SVC(multi_class="ovo")
    else:
        from sklearn.svm import SVC as SkSVC

        model = SkSVC()
    before = _rss_mb()
    _watchdog(limit_mb)
    t0 = time.perf_counter()
    model.fit(X, y)
    fit_s = time.perf_counter() - t0
    peak_fit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    pred = model.predict(X)
    predict_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"tool": tool, "classes": k, "pairs": k * (k - 1) // 2, "fit_s": fit_s,
            "predict_s": predict_s, "rss_before_mb": before, "peak_fit_mb": peak_fit,
            "peak_mb": peak, "growth_mb": peak - before,
            "train_accuracy": float(np.mean(pred == y)), "n_sv": int(len(model.support_))}


def _run(tool: str, k: int, limit_mb: float, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--point", tool, str(k),
           "--limit-mb", str(limit_mb)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "classes": k, "error": f"over {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"tool": tool, "classes": k, "error": (proc.stderr.strip().splitlines()
                                                      or [f"exit {proc.returncode}"])[-1]}
    return {"tool": tool, "classes": k, **json.loads(lines[-1])}


def _table(rows: list[dict]) -> str:
    head = ("| classes | pairs | tool | fit (s) | predict (s) | peak RSS (MB) | growth (MB) "
            "| train acc. |\n|---|---|---|---|---|---|---|---|")
    out = [head]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['classes']} | {r['classes'] * (r['classes'] - 1) // 2} | "
                       f"{r['tool']} | {r['error']} | | | | |")
            continue
        out.append(f"| {r['classes']} | {r['pairs']} | {r['tool']} | {r['fit_s']:.2f} | "
                   f"{r['predict_s']:.2f} | {r['peak_mb']:.0f} | {r['growth_mb']:.0f} | "
                   f"{r['train_accuracy']:.3f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--tools", nargs="+", default=["torchfw", "sklearn"])
    parser.add_argument("--limit-mb", type=float, default=4096.0,
                        help="end a point whose RSS passes this (default 4096)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per point")
    parser.add_argument("--out", help="write the table (Markdown) and a JSON beside it")
    parser.add_argument("--point", nargs=2, metavar=("TOOL", "K"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        print(json.dumps(_point(args.point[0], int(args.point[1]), args.limit_mb)), flush=True)
        return
    rows = []
    for k in args.classes:
        for tool in args.tools:
            row = _run(tool, k, args.limit_mb, args.timeout)
            print(json.dumps(row), flush=True)
            rows.append(row)
    table = _table(rows)
    print(table)
    if args.out:
        load = os.getloadavg()
        with open(args.out, "w") as f:
            f.write(f"# SVC() on many classes of 2 examples (one-vs-one)\n\n"
                    f"`python benchmarks/svc_many_classes.py --classes "
                    f"{' '.join(map(str, args.classes))}`: one fresh process per point; "
                    f"10 Gaussian features, seed 0; peak RSS by `getrusage`, growth over the "
                    f"RSS before the fit (fit and predict). Load average at the end: "
                    f"{load[0]:.1f}.\n\n{table}\n")
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
