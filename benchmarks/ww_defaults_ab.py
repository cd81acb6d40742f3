"""Weston-Watkins at the defaults against LIBLINEAR ``-s 4``: this tree and a base tree, interleaved.

Usage::

    python benchmarks/ww_defaults_ab.py --base-tree /path/to/main --repeats 7

One long-lived worker process per tree (``PYTHONPATH`` set to it, so ``import torchfw`` is that
tree's; the worker checks it), each with the four data sets of Table 6 loaded and the kernels
compiled before any timing. For every data set and repeat ``r`` the driver asks, in ABBA order
(base, new, new, base, ...): each worker fits ``WestonWatkinsSVC(C=C, random_state=r)`` (every
other parameter at its default) and trains LIBLINEAR ``-s 4 -c C -q`` on the same matrices.
Times are CPU seconds of the worker (``time.process_time``) around the whole ``fit`` /
``train`` call; medians over the repeats; ratio = torchfw / LIBLINEAR, each side against its
own LIBLINEAR runs (same process, same minutes of load). Test accuracy is the median over the
repeats. Writes ``benchmarks/results/ww_vs_liblinear_defaults_<machine>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def worker() -> None:
    """Read ``fit NAME SEED`` / ``ll NAME`` lines, answer one JSON line each."""
    import warnings

    warnings.simplefilter("ignore")
    # torchfw first, from PYTHONPATH: ww_vs_liblinear puts this tree's root on sys.path
    import torchfw
    from torchfw import WestonWatkinsSVC

    sys.path.insert(0, str(HERE))
    from ww_vs_liblinear import SETS, load

    tree = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]).resolve()
    if Path(torchfw.__file__).resolve().parents[1] != tree:
        raise SystemExit(f"torchfw from {torchfw.__file__}, not from {tree}")
    from liblinear.liblinearutil import predict, train

    data = {}
    for name, (tr, te, C, _) in SETS.items():
        X, y = load(tr)
        Xt, yt = load(te, X.shape[1])
        data[name] = (X, y, Xt, yt, C)
        WestonWatkinsSVC(C=C, max_iter=3).fit(X, y)  # compile, warm the caches
    print(json.dumps({"ready": str(tree)}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        X, y, Xt, yt, C = data[cmd[1]]
        c0 = time.process_time()
        if cmd[0] == "fit":
            clf = WestonWatkinsSVC(C=C, random_state=int(cmd[2])).fit(X, y)
            cpu = time.process_time() - c0
            out = {"cpu": cpu, "acc": 100 * clf.score(Xt, yt), "epochs": int(clf.n_iter_),
                   "checks": len(clf.gap_history_)}
        else:
            model = train(y, X, f"-s 4 -c {C} -q")
            cpu = time.process_time() - c0
            out = {"cpu": cpu, "acc": predict(yt, Xt, model, "-q")[1][0]}
        print(json.dumps(out), flush=True)


class Worker:
    def __init__(self, tree: Path):
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.proc.stdout.readline())
        assert "ready" in ready, ready

    def ask(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-tree", help="checkout of the base (e.g. main); required")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sets", nargs="+", default=["dna", "satimage", "letter", "sector"])
    ap.add_argument("--machine", default="xeon2")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return
    if not args.base_tree:
        ap.error("--base-tree is required")
    sys.path.insert(0, str(HERE))
    from _machine import machine_header
    from ww_vs_liblinear import SETS, machine

    meta = machine()
    sides = {"base": Worker(Path(args.base_tree).resolve()), "new": Worker(ROOT)}
    runs = {(s, n): {"ww": [], "ll": []} for s in sides for n in args.sets}
    for name in args.sets:
        for r in range(args.repeats):
            order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
            for side in order:
                w = sides[side]
                runs[side, name]["ll"].append(w.ask(f"ll {name}"))
                runs[side, name]["ww"].append(w.ask(f"fit {name} {r}"))
        for side in sides:
            ww, ll = runs[side, name]["ww"], runs[side, name]["ll"]
            t_ww = statistics.median(x["cpu"] for x in ww)
            t_ll = statistics.median(x["cpu"] for x in ll)
            print(f"{name:9s} {side:4s} torchfw {t_ww:.4f}s LIBLINEAR {t_ll:.4f}s ratio "
                  f"{t_ww / t_ll:.2f} acc {statistics.median(x['acc'] for x in ww):.2f} "
                  f"epochs {[x['epochs'] for x in ww]}", flush=True)
    load_end = os.getloadavg()
    for w in sides.values():
        w.close()
    rows = []
    for name in args.sets:
        base_ratio = None
        for side in sides:
            ww, ll = runs[side, name]["ww"], runs[side, name]["ll"]
            row = {"dataset": name, "side": side, "C": SETS[name][2], "paper": SETS[name][3],
                   "cpu_s": statistics.median(x["cpu"] for x in ww),
                   "liblinear_cpu_s": statistics.median(x["cpu"] for x in ll),
                   "accuracy": statistics.median(x["acc"] for x in ww),
                   "liblinear_accuracy": statistics.median(x["acc"] for x in ll),
                   "epochs": [x["epochs"] for x in ww], "checks": [x["checks"] for x in ww],
                   "cpu_runs": [x["cpu"] for x in ww], "liblinear_runs": [x["cpu"] for x in ll]}
            row["ratio"] = row["cpu_s"] / row["liblinear_cpu_s"]
            if side == "base":
                base_ratio = row["ratio"]
            else:
                row["new_over_base"] = row["ratio"] / base_ratio
            rows.append(row)
    command = (f"python benchmarks/ww_defaults_ab.py --base-tree <main> --repeats "
               f"{args.repeats} --sets {' '.join(args.sets)} --machine {args.machine}")
    base = RESULTS / f"ww_vs_liblinear_defaults_{args.machine}"
    base.with_suffix(".json").write_text(json.dumps(
        {"machine": meta, "load_average_end": load_end, "command": command, "rows": rows},
        indent=1))
    lines = ["# Weston-Watkins at its defaults against LIBLINEAR -s 4: base and this tree", ""]
    lines += machine_header(meta, command)
    lines += [f"Load average at the end: {', '.join(f'{x:.2f}' for x in load_end)}.", "",
              "`WestonWatkinsSVC(C=C, random_state=r)` against LIBLINEAR `-s 4 -c C -q`, C the "
              "paper's best (Table 6). One worker process per tree, asked in ABBA order "
              "(base, new, new, base, ...); each times its own LIBLINEAR runs beside its fits. "
              "CPU seconds of the whole `fit` / `train` call, medians over the repeats; ratio = "
              "torchfw / LIBLINEAR (below 1: torchfw faster); accuracy: test set %, median.",
              "", "| dataset | tree | torchfw s | LIBLINEAR s | ratio | accuracy % | paper % | "
              "LIBLINEAR % | epochs |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['side']} | {r['cpu_s']:.4f} | "
                     f"{r['liblinear_cpu_s']:.4f} | {r['ratio']:.2f} | {r['accuracy']:.2f} | "
                     f"{r['paper']:.2f} | {r['liblinear_accuracy']:.2f} | "
                     f"{', '.join(map(str, r['epochs']))} |")
    base.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {base}.md and .json")


if __name__ == "__main__":
    main()
