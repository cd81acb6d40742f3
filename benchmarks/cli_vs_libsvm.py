"""The command line end to end in fresh processes: torchfw's train + predict against LIBSVM's.

What a LIBSVM user runs on a small data set: one process trains and writes a model file, a
second reads it and predicts a test file. Each command runs in a fresh Python process (the
interpreter start, imports, file parsing, the fit and the model file are all counted), timed
from outside; the median of ``--repeats`` runs is reported. The LIBSVM side is its own Python
bindings (``libsvm-official``: ``svm_read_problem``, ``svm_train``, ``svm_save_model``,
``svm_load_model``, ``svm_predict``), each tool at its defaults (LIBSVM: ``gamma = 1/n_features``;
torchfw: ``gamma = "scale"``), and both again with the same ``-g``.

Usage::

    python benchmarks/cli_vs_libsvm.py                      # svmguide1 (3,089 lines), 5 repeats
    python benchmarks/cli_vs_libsvm.py --dataset svmguide1 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import cpu_model, machine_tag  # benchmarks/ is sys.path[0] for these scripts

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("TORCHFW_DATA", HERE.parent.parent / "shared" / "data"))

LIBSVM_TRAIN = """
import sys
from libsvm.svmutil import svm_read_problem, svm_save_model, svm_train
y, x = svm_read_problem(sys.argv[1])
svm_save_model(sys.argv[2], svm_train(y, x, sys.argv[3]))
"""
LIBSVM_PREDICT = """
import sys
from libsvm.svmutil import svm_load_model, svm_predict, svm_read_problem
y, x = svm_read_problem(sys.argv[1])
_, (acc, _, _), _ = svm_predict(y, x, svm_load_model(sys.argv[2]), "-q")
print(f"Accuracy = {acc:g}%")
"""


def _decompress(name: str, folder: Path) -> Path:
    out = folder / name
    with lzma.open(DATA / f"{name}.xz", "rb") as src:
        out.write_bytes(src.read())
    return out


def _timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"command failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return elapsed, done.stdout


def _accuracy(text: str) -> float:
    match = re.search(r"Accuracy = ([0-9.]+)%", text)
    return float(match.group(1)) if match else float("nan")


def run_pair(train_cmd, predict_cmd, repeats: int) -> dict:
    train_t, predict_t, acc = [], [], float("nan")
    for _ in range(repeats):
        t, _ = _timed(train_cmd)
        p, out = _timed(predict_cmd)
        train_t.append(t)
        predict_t.append(p)
        acc = _accuracy(out)
    return {"train_s": statistics.median(train_t), "predict_s": statistics.median(predict_t),
            "total_s": statistics.median([a + b for a, b in zip(train_t, predict_t,
                                                                  strict=True)]),
            "accuracy": acc}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="svmguide1")
    p.add_argument("--test", default=None, help="test file (default: DATASET.t)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=str(HERE / "results" / f"cli_vs_libsvm_{machine_tag()}"))
    args = p.parse_args(argv)
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        train = _decompress(args.dataset, folder)
        test = _decompress(args.test or f"{args.dataset}.t", folder)
        n_lines = sum(1 for _ in train.open())
        n_features = max(int(tok.split(":")[0]) for line in train.open()
                         for tok in line.split()[1:])
        auto = 1.0 / n_features
        setups = [
            ("torchfw (defaults: gamma=scale)", [], "torchfw"),
            ("LIBSVM bindings (defaults: gamma=1/d)", "-q", "libsvm"),
            (f"torchfw -g {auto:g}", ["-g", f"{auto!r}"], "torchfw"),
        ]
        for label, options, tool in setups:
            model = folder / f"{tool}.model"
            if tool == "torchfw":
                train_cmd = [py, "-m", "torchfw", "train", "-q", *options, str(train), str(model)]
                predict_cmd = [py, "-m", "torchfw", "predict", str(test), str(model)]
            else:
                train_cmd = [py, "-c", LIBSVM_TRAIN, str(train), str(model), options]
                predict_cmd = [py, "-c", LIBSVM_PREDICT, str(test), str(model)]
            row = run_pair(train_cmd, predict_cmd, args.repeats)
            row["setup"] = label
            rows.append(row)
            print(f"{label:42s} train {row['train_s']:6.2f} s  predict {row['predict_s']:6.2f} s"
                  f"  total {row['total_s']:6.2f} s  accuracy {row['accuracy']:.2f}%",
                  flush=True)
        base = rows[1]["total_s"]
        for row in rows:
            row["total_vs_libsvm"] = row["total_s"] / base
    empty = [py, "-c", "pass"]
    interpreter = statistics.median(_timed(empty)[0] for _ in range(args.repeats))
    # What every torchfw process pays before torchfw's own code runs.
    bare_torch = statistics.median(_timed([py, "-c", "import torch"])[0]
                                   for _ in range(args.repeats))
    machine = f"{cpu_model()}, {os.cpu_count()} cores"
    command = "python benchmarks/cli_vs_libsvm.py " + " ".join(argv or sys.argv[1:])
    lines = [f"# CLI end to end: torchfw vs LIBSVM's Python bindings ({args.dataset})", "",
             f"Machine: {machine}. Command: `{command.strip()}`. Training file: {n_lines} "
             f"lines, {n_features} features; test file {test.name}. Each time is the median "
             f"of {args.repeats} fresh processes, measured from outside (an empty `python -c "
             f"pass` costs {interpreter:.2f} s here, `python -c \"import torch\"` "
             f"{bare_torch:.2f} s: each of torchfw's train and predict pays it).", "",
             "| setup | train (s) | predict (s) | total (s) | total / LIBSVM | test accuracy |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['setup']} | {row['train_s']:.2f} | {row['predict_s']:.2f} | "
                     f"{row['total_s']:.2f} | {row['total_vs_libsvm']:.2f} | "
                     f"{row['accuracy']:.2f}% |")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "command": command,
                                                    "interpreter_s": interpreter,
                                                    "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
