"""``SVC()`` on one thread against its default threads, on the small multiclass LIBSVM sets.

A multiclass fit spreads its compiled work (the kernel matrix's rows, the binary problems'
blocks) over the cores from a work threshold on (``torchfw.svm._fit.PARALLEL_WORK``,
``torchfw.svm._matrix.PARALLEL_ENTRIES``). On a shared machine a thread may lose its core to
another job; the fit must then not be slower than on one thread. This measures both settings
side by side (interleaved fits, the order reversed every round, medians of wall and CPU time)
on the first training split of each set (``benchmarks/svm_multiclass.py``'s splits), with the
machine as it is and with one core kept busy by a spinning process (``--busy``), and reports
each set's size as the fit's solve work: the sum over its binary problems of (examples)^2.

One thread is ``torch.set_num_threads(1)`` around the fit (the compiled path's threads are at
most torch's setting, ``torchfw.utils.threads.allowed_threads``).

Usage::

    python benchmarks/svc_thread_rule.py                      # both modes, five sets
    python benchmarks/svc_thread_rule.py --datasets glass vowel --rounds 21
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model, machine_header, machine_tag  # noqa: E402
from svm_multiclass import _spin, splits  # noqa: E402

import torch  # noqa: E402

from torchfw.svm import SVC  # noqa: E402

DATASETS = ["glass", "vowel", "vehicle", "segment", "satimage"]
#: Rounds (one fit of each setting) by set: about the same seconds each.
ROUNDS = {"glass": 61, "vowel": 41, "vehicle": 31, "segment": 21, "satimage": 11}


def solve_work(model, y) -> float:
    """Sum over the fit's binary problems of (examples)^2: one-vs-rest ``k m^2``, one-vs-one
    the pairs' (the measure of ``torchfw.svm._fit.PARALLEL_WORK``)."""
    _, counts = np.unique(y, return_counts=True)
    if model.multi_class_ == "ovr":
        return float(len(counts) * len(y) ** 2)
    return float(sum((counts[i] + counts[j]) ** 2 for i in range(len(counts))
                     for j in range(i + 1, len(counts))))


def timed(X, y, one: bool) -> tuple[float, float]:
    """Wall and CPU seconds (every thread of the process) of ``SVC().fit``."""
    before = torch.get_num_threads()
    if one:
        torch.set_num_threads(1)
    try:
        t, c = time.perf_counter(), time.process_time()
        SVC().fit(X, y)
        return time.perf_counter() - t, time.process_time() - c
    finally:
        torch.set_num_threads(before)


def measure(name: str, rounds: int) -> dict:
    (X, y, _, _), *_ = splits(name)[0]
    model = SVC().fit(X, y)  # untimed: numba's cache of the path
    timed(X, y, True)
    wall = {"default": [], "one": []}
    cpu = {"default": [], "one": []}
    for r in range(rounds):
        for setting in (("default", "one") if r % 2 else ("one", "default")):
            w, c = timed(X, y, setting == "one")
            wall[setting].append(w)
            cpu[setting].append(c)
    med = {s: (statistics.median(wall[s]), statistics.median(cpu[s])) for s in wall}
    return {"dataset": name, "m": int(X.shape[0]), "classes": int(len(np.unique(y))),
            "scheme": model.multi_class_, "work": solve_work(model, y), "rounds": rounds,
            "wall_default": med["default"][0], "cpu_default": med["default"][1],
            "wall_one": med["one"][0], "cpu_one": med["one"][1],
            "ratio": med["default"][0] / med["one"][0]}


def run(datasets, busy: bool, scale: float) -> list[dict]:
    spinner = None
    if busy:
        spinner = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
        spinner.start()
    rows = []
    try:
        for name in datasets:
            load = os.getloadavg()[0]
            row = measure(name, max(3, int(ROUNDS.get(name, 11) * scale)))
            row["busy"], row["load_start"], row["load_end"] = busy, load, os.getloadavg()[0]
            rows.append(row)
            print(f"{'busy ' if busy else ''}{name}: work {row['work']:.3g}, default "
                  f"{1e3 * row['wall_default']:.2f} ms (CPU {1e3 * row['cpu_default']:.2f}), "
                  f"one thread {1e3 * row['wall_one']:.2f} ms (CPU {1e3 * row['cpu_one']:.2f}),"
                  f" ratio {row['ratio']:.2f}; load {load:.1f}", flush=True)
    finally:
        if spinner is not None:
            spinner.terminate()
            spinner.join()
    return rows


def report(meta: dict, rows: list[dict]) -> list[str]:
    lines = ["# SVC() on its default threads against one thread, small multiclass sets", ""]
    lines += machine_header(meta, meta["command"])
    lines += ["First training split of each set (`svm_multiclass.py`'s), interleaved fits, "
              "medians; work = sum over the binary problems of (examples)^2; ratio = default "
              "÷ one thread, wall time (below 1: the threads pay). Busy: one core kept busy "
              "by a spinning process. Load = 1-minute load average at the set's start and "
              "end.", "",
              "| set | m, classes, scheme | work | busy | load | default ms (CPU) | "
              "one thread ms (CPU) | ratio |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['m']:,}, {r['classes']}, {r['scheme']} | "
                     f"{r['work']:.3g} | {'yes' if r['busy'] else 'no'} | "
                     f"{r['load_start']:.1f}–{r['load_end']:.1f} | "
                     f"{1e3 * r['wall_default']:.2f} ({1e3 * r['cpu_default']:.2f}) | "
                     f"{1e3 * r['wall_one']:.2f} ({1e3 * r['cpu_one']:.2f}) | "
                     f"{r['ratio']:.2f} |")
    lines += ["", f"Load average at the end: "
              f"{', '.join(f'{x:.2f}' for x in meta['load_average_end'])}."]
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--modes", nargs="+", default=["quiet", "busy"],
                        choices=["quiet", "busy"], help="machine as is, one core kept busy")
    parser.add_argument("--scale", type=float, default=1.0, help="times the default rounds")
    parser.add_argument("--machine", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    command = "python benchmarks/svc_thread_rule.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg()), "command": command.strip()}
    rows = []
    for mode in args.modes:
        rows += run(args.datasets, mode == "busy", args.scale)
    meta["load_average_end"] = list(os.getloadavg())
    out = Path(__file__).resolve().parent / "results" / \
        f"svc_thread_rule_{args.machine or machine_tag()}"
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    out.with_suffix(".md").write_text("\n".join(report(meta, rows)) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
