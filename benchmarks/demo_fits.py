"""The README demo's fits one by one, CPU and wall time, with an empty numba cache and a warm one.

``benchmarks/first_fit.py`` times the demo as a whole process; this script times each of its
fits (``SVC.fit`` wrapped to read the process's CPU time around it), each run in a fresh process
that runs ``python -m torchfw demo`` unchanged otherwise:

* ``cold``: an empty cache with ``TORCHFW_COLD_START=fallback`` (the fits of a fresh install,
  without the background warm-up's competition for the cores, which ``first_fit.py`` includes);
* ``warm``: a cache the demo filled once compiling (``TORCHFW_COLD_START=compile``; that first
  run is not reported), so every fit runs compiled.

With ``--base DIR`` (another checkout, e.g. ``git worktree add --detach /tmp/base main``) both
checkouts run alternately, round by round, under the same load. Writes
``benchmarks/results/demo_fits_<machine>.md`` and ``.json``.

Usage::

    python benchmarks/demo_fits.py --machine xeon2 --base /tmp/base --repeats 3
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model, machine_header  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent

# The demo as `python -m torchfw demo` runs it, with SVC.fit timed (CPU time of the process).
DEMO = r"""
import json, runpy, sys, time
c0 = time.process_time()
from torchfw.svm import estimator
fits = []
fit = estimator.SVC.fit

def timed(self, X, y, *args, **kwargs):
    c, w = time.process_time(), time.perf_counter()
    out = fit(self, X, y, *args, **kwargs)
    fits.append([self.solver, int(X.shape[0]), time.process_time() - c, time.perf_counter() - w])
    return out

estimator.SVC.fit = timed
sys.argv = ["torchfw", "demo"]
try:
    runpy.run_module("torchfw", run_name="__main__")
except SystemExit as stop:
    if stop.code:
        raise
print(json.dumps({"fits": fits, "cpu": time.process_time() - c0}))
"""


def run_demo(root: Path, cache: str, policy: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(root),
           "TORCHFW_COLD_START": policy}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", DEMO], env=env, capture_output=True, text=True,
                         cwd=root)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - start
    # The demo's own first fit (200 examples, before the table) is left out.
    result["fits"] = {solver: {"cpu": cpu, "wall": wall}
                      for solver, n, cpu, wall in result["fits"] if n > 200}
    return result


def measure(variants: list[tuple[str, Path]], repeats: int, cache_root: Path) -> dict:
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg()), "python": sys.version.split()[0],
            "variants": {name: str(root) for name, root in variants}}
    warm = {}
    for name, root in variants:  # fill each checkout's cache once (not reported)
        warm[name] = cache_root / f"warm-{name}"
        warm[name].mkdir(parents=True, exist_ok=True)
        run_demo(root, str(warm[name]), "compile")
    rounds = []
    for r in range(repeats):
        row: dict = {}
        for name, root in (variants if r % 2 == 0 else variants[::-1]):
            with tempfile.TemporaryDirectory() as cache:
                row[f"{name}:cold"] = run_demo(root, cache, "fallback")
            row[f"{name}:warm"] = run_demo(root, str(warm[name]), "compile")
        row["load_average"] = list(os.getloadavg())
        rounds.append(row)
        print(json.dumps(row), flush=True)
    meta["load_average_end"] = list(os.getloadavg())
    return {"meta": meta, "rounds": rounds}


def report(measured: dict, command: str) -> str:
    meta, rounds = measured["meta"], measured["rounds"]
    columns = [f"{name}:{stage}" for name in meta["variants"] for stage in ("cold", "warm")]
    solvers = list(rounds[0][columns[0]]["fits"])

    def med(column, get):
        return statistics.median(get(r[column]) for r in rounds)

    lines = ["# The README demo's fits: empty numba cache against a warm one", ""]
    lines += machine_header(meta, command)
    lines += [f"Python {meta['python']}; load average at end: "
              + ", ".join(f"{x:.2f}" for x in meta["load_average_end"]) + ". Checkouts: "
              + "; ".join(f"`{n}`: {p}" for n, p in meta["variants"].items())
              + f". Medians of {len(rounds)} round(s), fresh processes; `cold`: an empty cache, "
              "`TORCHFW_COLD_START=fallback` (no background warm-up); `warm`: the cache the demo "
              "filled compiling. CPU time of the process around each `SVC.fit` (seconds), then "
              "wall time.", "",
              "| fit | " + " | ".join(f"{c} CPU" for c in columns) + " | "
              + " | ".join(f"{c} wall" for c in columns) + " |",
              "|---|" + "---|" * (2 * len(columns))]
    for solver in solvers:
        lines.append(f"| `{solver}` | "
                     + " | ".join(f"{med(c, lambda x, s=solver: x['fits'][s]['cpu']):.2f}"
                                  for c in columns) + " | "
                     + " | ".join(f"{med(c, lambda x, s=solver: x['fits'][s]['wall']):.2f}"
                                  for c in columns) + " |")
    lines.append("| all fits | " + " | ".join(
        f"{med(c, lambda x: sum(f['cpu'] for f in x['fits'].values())):.2f}" for c in columns)
        + " | " + " | ".join(
        f"{med(c, lambda x: sum(f['wall'] for f in x['fits'].values())):.2f}" for c in columns)
        + " |")
    lines.append("| the whole process (imports included) | " + " | ".join(
        f"{med(c, lambda x: x['cpu']):.2f}" for c in columns) + " | " + " | ".join(
        f"{med(c, lambda x: x['wall']):.2f}" for c in columns) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", default=None, help="another checkout measured alternately")
    parser.add_argument("--cache-root", default=None,
                        help="where the warm caches live (kept: a rerun reuses them)")
    args = parser.parse_args(argv)
    variants = [("this", ROOT)]
    if args.base:
        base = Path(args.base).resolve()
        if not (base / "torchfw" / "__init__.py").exists():
            parser.error(f"--base {args.base}: no torchfw package there")
        variants.append(("base", base))
    with tempfile.TemporaryDirectory() as tmp:
        cache_root = Path(args.cache_root) if args.cache_root else Path(tmp)
        measured = measure(variants, args.repeats, cache_root)
    command = "python benchmarks/demo_fits.py " + " ".join(argv if argv is not None
                                                           else sys.argv[1:])
    text = report(measured, command)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"demo_fits_{args.machine}.md").write_text(text + "\n")
    (RESULTS / f"demo_fits_{args.machine}.json").write_text(json.dumps(measured, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
