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

``--base DIR`` measures another checkout (``git worktree add --detach /tmp/base main``)
alternately in the same run, under the same load; ``--skip-compile`` leaves out the fit
compiling in the process.

Usage::

    python benchmarks/first_fit.py --machine epyc2
    python benchmarks/first_fit.py --machine epyc2 --skip-demo --repeats 3
    python benchmarks/first_fit.py --machine xeon2 --skip-compile --base /tmp/base
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


def _env(cache: str, extra: dict | None = None, root: Path = ROOT) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(root)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    # The user's default cold start (_machine, imported by every benchmark, sets
    # TORCHFW_COLD_START=compile for the others' timings): only ``extra`` chooses here.
    env.pop("TORCHFW_COLD_START", None)
    env.update(extra or {})
    return env


def run(code: str, cache: str, env_extra: dict | None = None,
        root: Path = ROOT) -> tuple[dict, float]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=_env(cache, env_extra, root),
                         capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


def _demo_fits(stdout: str) -> dict:
    """The demo table's fit times by solver (``{"sfw": 0.68, ...}``; scikit-learn's too)."""
    fits = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2].endswith("%"):
            try:
                fits[parts[0]] = float(parts[1])
            except ValueError:
                continue
    return fits


def run_demo(cache: str, root: Path = ROOT) -> dict:
    """Wall and CPU time (with its children's: none but the shell of a warm-up start), and
    the fit times the demo prints."""
    before = os.times()
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "torchfw", "demo"], env=_env(cache, root=root),
                         capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - start
    after = os.times()
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    cpu = (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)
    return {"wall": wall, "cpu": cpu, "fits": _demo_fits(out.stdout)}


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


def measure_variant(root: Path, fit_code: str, demo: bool, compiling: bool) -> dict:
    """One round of one checkout ``root`` (fresh caches): the baseline, the fits of :data:`FIT`
    with an empty cache (``fit_cold``), the cache its warm-up filled (``fit_warm``) and, with
    ``compiling``, an empty cache compiled in the process (``fit_compile``), and with ``demo``
    the demo's times, cold and warm."""
    row: dict = {}
    with tempfile.TemporaryDirectory() as cache:
        row["baseline"], _ = run(BASELINE, cache, root=root)
        started = time.perf_counter()
        row["fit_cold"], row["fit_cold_wall"] = run(fit_code.replace("LISTEN", "False"), cache,
                                                    root=root)
        row["warmup"] = wait_warm(cache, started)
        row["fit_warm"], row["fit_warm_wall"] = run(fit_code.replace("LISTEN", "False"), cache,
                                                    root=root)
    if compiling:
        with tempfile.TemporaryDirectory() as cache:
            row["fit_compile"], row["fit_compile_wall"] = run(
                fit_code.replace("LISTEN", "True"), cache, {"TORCHFW_COLD_START": "compile"},
                root=root)
    if demo:
        with tempfile.TemporaryDirectory() as demo_cache:
            started = time.perf_counter()
            row["demo_cold"] = run_demo(demo_cache, root)
            row["demo_warmup"] = wait_warm(demo_cache, started)
            row["demo_warm"] = run_demo(demo_cache, root)
    for stage in ("cold", "warm", "compile"):
        f = row.get(f"fit_{stage}")
        if f is None:
            continue
        f["import_and_fit"] = f["import_torchfw"] + f["first_fit"]
        f["import_and_fit_cpu"] = f["import_torchfw_cpu"] + f["first_fit_cpu"]
    return row


def measure(n: int = 3000, repeats: int = 1, demo: bool = True, compiling: bool = True,
            base: Path | None = None) -> dict:
    """Run the rounds and return ``{"meta": ..., "rounds": [...]}``; a round maps each checkout
    (``"this"``, and ``"base"`` when ``base`` is given) to :func:`measure_variant`'s row.

    With a base checkout the two alternate within each round (which goes first alternates
    between rounds), so that both meet the same load; only this checkout compiles in the
    process (``compiling``).
    """
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg()), "python": sys.version.split()[0]}
    fit_code = FIT.replace("N,", f"{n},")
    variants = [("this", ROOT)] + ([("base", base)] if base is not None else [])
    for _, root in variants:
        compileall.compile_dir(str(root / "torchfw"), quiet=1)  # what an install writes
    rounds = []
    for r in range(repeats):
        order = variants if r % 2 == 0 else variants[::-1]
        rnd = {}
        for name, root in order:
            rnd[name] = measure_variant(root, fit_code, demo, compiling and name == "this")
            rnd[name]["load_average_after"] = list(os.getloadavg())
            print(json.dumps({name: {k: v for k, v in rnd[name].items()
                                     if k != "fit_compile"}}), flush=True)
        rounds.append(rnd)
    meta["load_average_end"] = list(os.getloadavg())
    meta["variants"] = {name: str(root) for name, root in variants}
    return {"meta": meta, "rounds": rounds}


def report(measured: dict, args, command: str) -> str:
    """The markdown report: one pair of columns (empty cache, warm cache) per checkout, the
    in-process compile of this checkout, the demo's times and its streaming fits."""
    meta, rounds = measured["meta"], measured["rounds"]
    names = list(meta["variants"])
    compiling = "fit_compile" in rounds[0]["this"]

    def med(name, get, default="-"):
        values = [get(r[name]) for r in rounds if r.get(name) is not None]
        try:
            return f"{statistics.median(values):.2f}"
        except (KeyError, TypeError, statistics.StatisticsError):
            return default

    def value(stage, field):
        return lambda row: row[stage][field]

    header = ["measure"]
    for name in names:
        header += [f"{name}: empty cache (s)", f"{name}: warm cache (s)"]
    if compiling:
        header.append("this: empty, compiling (s)")

    def line(label, cold=None, warm=None, compile_=None):
        cells = [label]
        for name in names:
            cells += [med(name, cold) if cold else "-", med(name, warm) if warm else "-"]
        if compiling:
            cells.append(med("this", compile_) if compile_ else "-")
        return "| " + " | ".join(cells) + " |"

    def fit_line(label, field):
        return line(label, cold=value("fit_cold", field), warm=value("fit_warm", field),
                    compile_=value("fit_compile", field))

    baseline = value("baseline", "import_torch_sklearn")
    lines = ["# The first fit after install: empty numba cache against a warm one", ""]
    lines += machine_header(meta, command)
    checkouts = "; ".join(f"`{name}`: {path}" for name, path in meta["variants"].items())
    lines += [f"Python {meta['python']}; load average at end: "
              + ", ".join(f"{x:.2f}" for x in meta["load_average_end"])
              + f". Checkouts: {checkouts}. Medians of {args.repeats} round(s), each in fresh "
              "processes (with two checkouts they alternate within a round). Columns: an empty "
              "cache (the default: the fit runs on the PyTorch paths and starts the background "
              "warm-up), the cache that warm-up filled"
              + (", and an empty cache compiled in the process (`TORCHFW_COLD_START=compile`, "
                 "numba's own behaviour)" if compiling else "") + ".", "",
              "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
              line("`import torch, sklearn`", cold=baseline, warm=baseline, compile_=baseline),
              fit_line("`import torchfw` (over torch + sklearn)", "import_torchfw"),
              fit_line("`import torchfw`, CPU time", "import_torchfw_cpu"),
              fit_line(f"first `SVC().fit`, {args.n:,} examples", "first_fit"),
              fit_line("first `SVC().fit`, CPU time of the process", "first_fit_cpu"),
              fit_line("training accuracy", "accuracy"),
              line("second fit, same process", warm=value("fit_warm", "second_fit")),
              line("second fit, CPU time", warm=value("fit_warm", "second_fit_cpu")),
              fit_line("import torchfw + first fit (over torch + sklearn)", "import_and_fit"),
              fit_line("import torchfw + first fit, CPU time", "import_and_fit_cpu"),
              line("background warm-up after the cold fit, wall",
                   cold=value("warmup", "wall")),
              line("background warm-up after the cold fit, CPU", cold=value("warmup", "cpu"))]
    if not args.skip_demo:
        lines += [line("`python -m torchfw demo` (process wall time)",
                       cold=value("demo_cold", "wall"), warm=value("demo_warm", "wall")),
                  line("`python -m torchfw demo` (process CPU time)",
                       cold=value("demo_cold", "cpu"), warm=value("demo_warm", "cpu"))]
        solvers = list(rounds[0]["this"]["demo_cold"]["fits"])
        for solver in solvers:
            lines.append(line(f"demo: `{solver}` fit (wall, as printed)",
                              cold=lambda row, s=solver: row["demo_cold"]["fits"][s],
                              warm=lambda row, s=solver: row["demo_warm"]["fits"][s]))
        lines.append(line("load average (1 min) after the checkout's round",
                          cold=lambda row: row["load_average_after"][0]))
    if compiling:
        compiles = rounds[0]["this"]["fit_compile"]["compiles"]
        lines += ["", "Functions numba compiled during the first fit compiling in the process "
                  "(round 1; a function's time includes what it compiled inside; total of "
                  f"top-level entries {sum(compiles.values()):.1f} s, nested ones counted in "
                  "their callers too):", "", "| function | compile (CPU s) |", "|---|---|"]
        for name, spent in sorted(compiles.items(), key=lambda kv: -kv[1]):
            lines.append(f"| `{name}` | {spent:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", default="cpu")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=1, help="cold/warm rounds (fresh caches)")
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--skip-compile", action="store_true",
                        help="no fit compiling in the process (minutes of CPU time)")
    parser.add_argument("--base", default=None,
                        help="another checkout of torchfw (e.g. a `git worktree add --detach` "
                             "of main) measured alternately in the same run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    base = Path(args.base).resolve() if args.base else None
    if base is not None and not (base / "torchfw" / "__init__.py").exists():
        parser.error(f"--base {args.base}: no torchfw package there")
    measured = measure(args.n, args.repeats, not args.skip_demo, not args.skip_compile, base)
    command = "python benchmarks/first_fit.py " + " ".join(argv if argv is not None
                                                           else sys.argv[1:])
    text = report(measured, args, command)
    print(text)
    stem = args.out or f"first_fit_{args.machine}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps(measured, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
