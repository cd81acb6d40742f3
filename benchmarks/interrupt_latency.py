"""Ctrl-C latency of a compiled SVC solve: from SIGINT to the end of the process.

The compiled whole solve (:mod:`torchfw.svm._dense`, the row-source storage's
:meth:`~torchfw.optimizers._rows.RowStorage.solve`) runs in numba code, where Python's signal
handlers cannot run: a Ctrl-C is handled when the compiled call returns. With
``torchfw.optimizers._rows.CHUNK_SECONDS`` (default 0.2 s) the loop returns to Python between chunks
of iterations; ``None`` makes it one call for the whole solve, as before.

For each mode, a fresh subprocess loads a9a, compiles the kernels on a small fit, says it is
ready, and fits ``SVC(tol=1e-3)`` on a9a (32,561 examples: the compiled solve on a cache of
kernel rows); the parent sends SIGINT ``--after`` seconds into the fit and times until the
process has exited, and reads from the child the moment the ``KeyboardInterrupt`` reached the
caller of ``fit``. Interpreter teardown (torch, numba, the data) is timed on its own, as a
baseline. ``--full`` also times one uninterrupted fit per mode (the chunks' cost).

Usage::

    python benchmarks/interrupt_latency.py                    # 3 runs per mode, SIGINT at 3 s
    python benchmarks/interrupt_latency.py --runs 5 --after 5 --full
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import cpu_model, machine_tag  # benchmarks/ is sys.path[0] for these scripts

ROOT = Path(__file__).resolve().parents[1]
MODES = {"chunked (0.2 s)": "0.2", "one call": "none"}


def child(chunk: str, tol: float) -> None:
    """Load a9a, compile, print 'ready', fit; print the fit time if it finishes."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import warnings

    import torch
    from _data import load_libsvm

    import torchfw.optimizers._rows as rows
    from torchfw import SVC
    from torchfw.utils.data import take_rows

    rows.CHUNK_SECONDS = None if chunk in ("none", "exit") else float(chunk)
    d = load_libsvm("a9a")
    # Compile outside the timing: a binary fit from 1,000 examples takes the same compiled
    # path as a9a's (a cache of kernel rows), so every function it calls is compiled here.
    first = torch.arange(1500)
    SVC(random_state=0).fit(take_rows(d.X_train, first), d.y_train[:1500])
    if chunk == "exit":  # the teardown baseline: the process ends right away
        print(f"exiting {time.time()!r}", flush=True)
        return
    print("ready", flush=True)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = SVC(tol=tol, random_state=0).fit(d.X_train, d.y_train)
    except KeyboardInterrupt:
        # The wall clock is shared with the parent: it subtracts the time it sent SIGINT.
        print(f"interrupted {time.time()!r}", flush=True)
        raise
    print(json.dumps({"fit_s": time.perf_counter() - start, "n_iter": int(model.n_iter_),
                      "engine": model.result_.info.get("engine")}), flush=True)


def run_one(chunk: str, tol: float, after: float | None, timeout: float) -> dict:
    """One child: SIGINT ``after`` seconds after 'ready' (None: let it finish)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, __file__, "--child", chunk, "--tol", str(tol)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if chunk == "exit":
        proc.wait(timeout)
        return {"teardown_s": time.time() - float(line.split()[1])}
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"child did not start: {line!r}")
    if after is None:
        out = proc.stdout.read()
        proc.wait(timeout)
        return json.loads(out.strip().splitlines()[-1])
    time.sleep(after)
    sent_wall = time.time()
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return {"latency_s": float("inf"), "exit_s": float("inf"), "finished_first": False}
    exit_s = time.perf_counter() - sent
    rest = proc.stdout.read()
    caught = [ln for ln in rest.splitlines() if ln.startswith("interrupted ")]
    latency = float(caught[0].split()[1]) - sent_wall if caught else float("nan")
    return {"latency_s": latency, "exit_s": exit_s, "finished_first": "fit_s" in rest,
            "returncode": proc.returncode}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--after", type=float, default=3.0, help="seconds into the fit")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--full", action="store_true", help="also time uninterrupted fits")
    p.add_argument("--modes", nargs="+", default=list(MODES.values()), choices=list(MODES.values()),
                   help="0.2: chunked (the default solve); none: one call (minutes on a9a)")
    p.add_argument("--machine", default=f"{machine_tag()}{os.cpu_count()}")
    p.add_argument("--out", default=None, help="report path without suffix "
                   "(default benchmarks/results/interrupt_latency_<machine>)")
    args = p.parse_args()
    if args.child is not None:
        child(args.child, args.tol)
        return
    load = os.getloadavg()
    teardown = [run_one("exit", args.tol, None, args.timeout)["teardown_s"]
                for _ in range(args.runs)]
    print(f"teardown of an idle process after loading a9a: median "
          f"{statistics.median(teardown):.2f} s", flush=True)
    rows = {}
    if args.out is None:
        args.out = str(ROOT / "benchmarks" / "results" / f"interrupt_latency_{args.machine}")
    for name, chunk in MODES.items():
        if chunk not in args.modes:
            continue
        runs = [run_one(chunk, args.tol, args.after, args.timeout) for _ in range(args.runs)]
        full = run_one(chunk, args.tol, None, args.timeout) if args.full else None
        rows[name] = {"runs": runs, "full": full}
        lat = [r["latency_s"] for r in runs]
        ext = [r["exit_s"] for r in runs]
        print(f"{name:16s} to KeyboardInterrupt: median {statistics.median(lat):7.2f} s "
              f"(runs: {', '.join(f'{x:.2f}' for x in lat)}); to exit: median "
              f"{statistics.median(ext):7.2f} s"
              + (f"  uninterrupted fit {full['fit_s']:.1f} s, {full['n_iter']} iterations"
                 if full else ""), flush=True)
    command = "python benchmarks/interrupt_latency.py " + " ".join(sys.argv[1:])
    lines = ["# Ctrl-C latency of a compiled SVC solve (a9a, tol=1e-3)", "",
             f"Machine: {cpu_model()}, {os.cpu_count()} cores (shared); load average at start: "
             f"{', '.join(f'{x:.2f}' for x in load)}.", "", f"Command: `{command.strip()}`", "",
             f"SIGINT {args.after:g} s into `SVC(tol={args.tol:g}).fit` on a9a (32,561 "
             f"examples, compiled solve on a cache of kernel rows), in a fresh process per "
             f"run. *To KeyboardInterrupt*: from SIGINT to the exception reaching the caller "
             f"of `fit` (what a Ctrl-C waits for); *to exit*: to the end of the process, which "
             f"adds the interpreter's teardown (median {statistics.median(teardown):.2f} s for "
             f"a process that just loaded a9a and exits: torch, numba and the data, on this "
             f"machine under load).", "",
             "| mode | to KeyboardInterrupt, median (s) | runs (s) | to exit, median (s) | "
             "uninterrupted fit (s) | iterations |",
             "|---|---:|---|---:|---:|---:|"]
    for name, row in rows.items():
        lat = [r["latency_s"] for r in row["runs"]]
        ext = [r["exit_s"] for r in row["runs"]]
        full = row["full"]
        lines.append(f"| {name} | {statistics.median(lat):.2f} | "
                     f"{', '.join(f'{x:.2f}' for x in lat)} | {statistics.median(ext):.2f} | "
                     + (f"{full['fit_s']:.1f} | {full['n_iter']} |" if full else "- | - |"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"load_average_start": load, "cpu": cpu_model(), "after_s": args.after,
         "tol": args.tol, "teardown_s": teardown, "modes": rows}, indent=1) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
