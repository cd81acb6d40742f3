"""The first fit after install: fresh processes with an empty numba cache, then with a warm one.

torchfw's CPU kernels are compiled by numba on first use and cached on disk
(``NUMBA_CACHE_DIR``). While that cache is empty, a small fit runs on the PyTorch paths and a
background process compiles the kernels (``torchfw.utils.cold_start``). This script measures,
each in a fresh Python process:

* ``baseline``: ``import torch`` + ``import sklearn`` (what a user's script pays anyway);
* ``fit``: the baseline imports, then ``import torchfw`` and ``SVC().fit`` on 3,000 examples
  (two noisy rings, ``torchfw.datasets.make_classification_blobs``), at defaults;
* ``demo``: ``python -m torchfw demo`` (the README's first command), wall and CPU time of the
  process.

Each is run with an empty cache directory (``cold``: right after install), then -- once the
background warm-up it started has written its marker (its wall time is reported) -- again with
the cache it filled (``warm``); and, for reference, a fit with an empty cache compiling in the
process (``TORCHFW_COLD_START=compile``, numba's own behaviour). For that fit a numba event
listener records the compile time of every function compiled on the way (nested compilations
are inside their caller's time; CPU time of the process), which is where a cold compile goes.
Times are wall time and CPU time of the process (less sensitive to other jobs on a shared
machine). The package's bytecode is compiled first, as an install does (the processes write
bytecode even where ``PYTHONDONTWRITEBYTECODE`` is set).

Writes ``benchmarks/results/first_fit_<machine>.md`` and ``.json``.

Usage::

    python benchmarks/first_fit.py --machine epyc2
    python benchmarks/first_fit.py --machine epyc2 --skip-demo --repeats 3
"""

from __future__ import annotations

import argparse
import compileall
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

FIT = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, sklearn
t1 = time.perf_counter()
c1 = time.process_time()
compiles = {}
if LISTEN:
    from numba.core import event
    starts = {}

    class _Listener(event.Listener):
        def on_start(self, ev):
            starts[id(ev.data["dispatcher"]), str(ev.data["args"])] = time.process_time()

        def on_end(self, ev):
            d = ev.data["dispatcher"]
            name = f"{d.py_func.__module__}.{d.py_func.__qualname__}"
            key = (id(d), str(ev.data["args"]))
            spent = time.process_time() - starts.pop(key, time.process_time())
            if name.startswith("torchfw"):
                compiles[name] = compiles.get(name, 0.0) + spent

    event.register("numba:compile", _Listener())
import torchfw
from torchfw import SVC
from torchfw.datasets import make_classification_blobs
t2 = time.perf_counter()
c2 = time.process_time()
X, y = make_classification_blobs(N, 2, pattern="rings", noise=0.15, random_state=0)
t3 = time.perf_counter()
c3 = time.process_time()
model = SVC().fit(X, y)
t4 = time.perf_counter()
c4 = time.process_time()
SVC().fit(X, y)
t5 = time.perf_counter()
c5 = time.process_time()
print(json.dumps({"import_torch_sklearn": t1 - t0, "import_torchfw": t2 - t1,
                  "import_torchfw_cpu": c2 - c1, "accuracy": float(model.score(X, y)),
                  "first_fit": t4 - t3, "second_fit": t5 - t4, "first_fit_cpu": c4 - c3,
                  "second_fit_cpu": c5 - c4, "compiles": compiles}))
"""

BASELINE = r"""
import json, time
t0 = time.perf_counter()
import torch, sklearn
print(json.dumps({"import_torch_sklearn": time.perf_counter() - t0}))
"""


def _env(cache: str, extra: dict | None = None) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    # The user's default cold start (_machine, imported by every benchmark, sets
    # TORCHFW_COLD_START=compile for the others' timings): only ``extra`` chooses here.
    env.pop("TORCHFW_COLD_START", None)
    env.update(extra or {})
    return env


def run(code: str, cache: str, env_extra: dict | None = None) -> tuple[dict, float]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=_env(cache, env_extra),
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


def run_demo(cache: str) -> dict:
    """Wall and CPU time (with its children's: none but the shell of a warm-up start)."""
    before = os.times()
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "torchfw", "demo"], env=_env(cache),
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = os.times()
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    cpu = (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)
    return {"wall": wall, "cpu": cpu}


def wait_warm(cache: str, started: float, limit: float = 3600.0) -> dict:
    """Wait for the background warm-up's marker in ``cache``; its wall time since ``started``
    and the CPU time it wrote."""
    while time.perf_counter() - started < limit:
        markers = list(Path(cache).rglob("torchfw-kernels-*.warm"))
        if markers and not list(Path(cache).rglob("torchfw-kernels-*.lock")):
            text = markers[0].read_text().split()
            return {"wall": time.perf_counter() - started, "cpu": float(text[2])}
        time.sleep(1.0)
    raise RuntimeError(f"no warm-up marker in {cache} after {limit:.0f} s")


def measure(n: int = 3000, repeats: int = 1, demo: bool = True, compiling: bool = True) -> dict:
    """Run the rounds (fresh caches each) and return ``{"meta": ..., "rounds": [...]}``; each
    round holds the baseline, the fits of :data:`FIT` with an empty cache (``fit_cold``), the
    cache its warm-up filled (``fit_warm``) and, with ``compiling``, an empty cache compiled
    in the process (``fit_compile``), and with ``demo`` the demo's wall and CPU times."""
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg()), "python": sys.version.split()[0]}
    fit_code = FIT.replace("N,", f"{n},")
    compileall.compile_dir(str(ROOT / "torchfw"), quiet=1)  # what an install writes
    rounds = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            row: dict = {}
            row["baseline"], _ = run(BASELINE, cache)
            started = time.perf_counter()
            row["fit_cold"], row["fit_cold_wall"] = run(fit_code.replace("LISTEN", "False"),
                                                        cache)
            row["warmup"] = wait_warm(cache, started)
            row["fit_warm"], row["fit_warm_wall"] = run(fit_code.replace("LISTEN", "False"),
                                                        cache)
        if compiling:
            with tempfile.TemporaryDirectory() as cache:
                row["fit_compile"], row["fit_compile_wall"] = run(
                    fit_code.replace("LISTEN", "True"), cache, {"TORCHFW_COLD_START": "compile"})
        if demo:
            with tempfile.TemporaryDirectory() as demo_cache:
                started = time.perf_counter()
                row["demo_cold"] = run_demo(demo_cache)
                row["demo_warmup"] = wait_warm(demo_cache, started)
                row["demo_warm"] = run_demo(demo_cache)
        for stage in ("cold", "warm", "compile"):
            f = row.get(f"fit_{stage}")
            if f is None:
                continue
            f["import_and_fit"] = f["import_torchfw"] + f["first_fit"]
            f["import_and_fit_cpu"] = f["import_torchfw_cpu"] + f["first_fit_cpu"]
        rounds.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "fit_compile"}), flush=True)
    meta["load_average_end"] = list(os.getloadavg())
    return {"meta": meta, "rounds": rounds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", default="cpu")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=1, help="cold/warm rounds (fresh caches)")
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    measured = measure(args.n, args.repeats, not args.skip_demo)
    meta, rounds = measured["meta"], measured["rounds"]

    def med(get):
        return statistics.median(get(r) for r in rounds)

    base = med(lambda r: r["baseline"]["import_torch_sklearn"])

    def cells(key, field):
        return " | ".join(f"{med(lambda r, s=stage: r[s][field]):.2f}"
                          for stage in (f"{key}_cold", f"{key}_warm", f"{key}_compile"))

    second = med(lambda r: r["fit_warm"]["second_fit"])
    second_cpu = med(lambda r: r["fit_warm"]["second_fit_cpu"])
    command = "python benchmarks/first_fit.py " + " ".join(argv if argv is not None
                                                           else sys.argv[1:])
    lines = ["# The first fit after install: empty numba cache against a warm one", ""]
    lines += machine_header(meta, command)
    lines += [f"Python {meta['python']}; load average at end: "
              + ", ".join(f"{x:.2f}" for x in meta["load_average_end"])
              + f". Medians of {args.repeats} round(s), each in fresh processes. Columns: an "
              "empty cache (the default: the fit runs on the PyTorch paths and starts the "
              "background warm-up), the cache that warm-up filled, and an empty cache compiled "
              "in the process (`TORCHFW_COLD_START=compile`, the behaviour before).", "",
              "| measure | empty cache (s) | warm cache (s) | empty, compiling (s) |",
              "|---|---|---|---|",
              f"| `import torch, sklearn` | {base:.2f} | {base:.2f} | {base:.2f} |",
              f"| `import torchfw` (over torch + sklearn) | {cells('fit', 'import_torchfw')} |",
              f"| `import torchfw`, CPU time | {cells('fit', 'import_torchfw_cpu')} |",
              f"| first `SVC().fit`, {args.n:,} examples | {cells('fit', 'first_fit')} |",
              f"| first `SVC().fit`, CPU time of the process | {cells('fit', 'first_fit_cpu')} |",
              f"| training accuracy | {cells('fit', 'accuracy')} |",
              f"| second fit, same process | - | {second:.2f} | - |",
              f"| second fit, CPU time | - | {second_cpu:.2f} | - |"]
    lines += [f"| import torchfw + first fit (over torch + sklearn) | "
              f"{cells('fit', 'import_and_fit')} |",
              f"| import torchfw + first fit, CPU time | {cells('fit', 'import_and_fit_cpu')} |",
              f"| background warm-up after the cold fit (wall; CPU) | "
              f"{med(lambda r: r['warmup']['wall']):.1f}; {med(lambda r: r['warmup']['cpu']):.1f}"
              " | - | - |"]
    if not args.skip_demo:
        lines += [f"| `python -m torchfw demo` (process wall time) | "
                  f"{med(lambda r: r['demo_cold']['wall']):.1f} | "
                  f"{med(lambda r: r['demo_warm']['wall']):.1f} | - |",
                  f"| `python -m torchfw demo` (process CPU time) | "
                  f"{med(lambda r: r['demo_cold']['cpu']):.1f} | "
                  f"{med(lambda r: r['demo_warm']['cpu']):.1f} | - |"]
    compiles = rounds[0]["fit_compile"]["compiles"]
    lines += ["", f"Functions numba compiled during the first fit compiling in the process (round 1; a function's time "
                  f"includes what it compiled inside; total of top-level entries "
                  f"{sum(compiles.values()):.1f} s, nested ones counted in their callers too):",
              "", "| function | compile (CPU s) |", "|---|---|"]
    for name, spent in sorted(compiles.items(), key=lambda kv: -kv[1]):
        lines.append(f"| `{name}` | {spent:.2f} |")
    text = "\n".join(lines)
    print(text)
    stem = args.out or f"first_fit_{args.machine}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
