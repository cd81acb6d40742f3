"""Weston-Watkins BCD: safe screening against no shrinking and heuristic shrinking (the default).

Usage::

    python benchmarks/ww_screening.py               # ~3 minutes on 2 cores
    python benchmarks/ww_screening.py --repeats 5 --sets dna satimage

For each data set at its C (the paper's Table 6 best C for dna, satimage, letter and sector;
raw digits and pendigits with features in 0-100, as in ``ww_vs_liblinear.py --unscaled``),
``WestonWatkinsSVC(C, tol=0.0009, random_state=r)`` with ``shrinking=False`` (plain BCD, the
paper's Algorithm 1), ``True`` (safe screening) and ``"heuristic"`` (LIBLINEAR-style
shrinking), interleaved round by round, the same seed in a round: median CPU seconds of the
fit, epochs, test accuracy, whether the screened model equals the plain one bit for bit, and
the share of block visits screening passed over. Then the snapshot period
(``torchfw.ww._problem.SNAPSHOT_EVERY``) against the share screened and the time, on dna and
satimage. Writes ``benchmarks/results/ww_screening.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _machine import machine_header  # benchmarks/ is sys.path[0] for these scripts
from ww_vs_liblinear import DATA, RESULTS, SETS, load, machine, unscaled_sets

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchfw import WestonWatkinsSVC  # noqa: E402
from torchfw.optimizers.bcd import BlockCoordinateDescent  # noqa: E402
from torchfw.ww import _problem as _ww_problem
from torchfw.ww.estimator import ww_problem  # noqa: E402

MODES = (False, True, "heuristic")
#: snapshot periods compared (sweeps between two snapshots of W)
PERIODS = (1, 2, 4, 8)


def datasets(names):
    """``name -> (C, X_train, y_train, X_test, y_test)``."""
    out = {}
    for name in names:
        if name in SETS:
            tr, te, C, _ = SETS[name]
            X, y = load(tr)
            Xt, yt = load(te, X.shape[1])
            out[name] = (C, X, y, Xt, yt)
    wanted = {"digits raw": "digits (raw 0-16)", "pendigits raw": "pendigits (0-100)"}
    for name in names:
        if name in wanted:
            for label, C, Xtr, ytr, Xte, yte in unscaled_sets():
                # pendigits at C = 1e-4 (C = 1 on [0, 1] data; at C = 1 BCD stops at max_iter)
                if label == wanted[name] and (name != "pendigits raw" or C < 1):
                    out[name] = (C, Xtr, ytr, Xte, yte)
    return out


def screened_share(X, y, C, seed: int) -> float:
    """The share of block visits that screening passed over in the estimator's run."""
    built = ww_problem(X, y, C, shrinking=True)
    BlockCoordinateDescent("exact", rtol=0.0009, max_iter=1000, random_state=seed,
                           check_every="auto").minimize(built.problem)
    p = built.problem
    return p.screened / (p.n_blocks * p.epochs)


def compare(name, C, X, y, Xt, yt, repeats: int) -> dict:
    times = {str(m): [] for m in MODES}
    epochs, accs, same = {str(m): [] for m in MODES}, {str(m): [] for m in MODES}, []
    for r in range(repeats):
        fits = {}
        for m in MODES:
            t = time.process_time()
            fits[m] = WestonWatkinsSVC(C=C, tol=0.0009, random_state=r, shrinking=m).fit(X, y)
            times[str(m)].append(time.process_time() - t)
            epochs[str(m)].append(int(fits[m].n_iter_))
            accs[str(m)].append(100 * fits[m].score(Xt, yt))
        same.append(bool(np.array_equal(fits[True].coef_.numpy(), fits[False].coef_.numpy())))
    row = {"dataset": name, "n": X.shape[0], "d": X.shape[1], "k": len(np.unique(y)), "C": C,
           "repeats": repeats, "cpu_s": {m: statistics.median(v) for m, v in times.items()},
           "cpu_runs": times, "epochs": epochs, "accuracy": accs, "identical_to_plain": same,
           "screened_share": screened_share(X, y, C, 0)}
    c = row["cpu_s"]
    print(f"{name:14s} plain {c['False']:.3f}s  screening {c['True']:.3f}s "
          f"({c['False'] / c['True']:.2f}x, {100 * row['screened_share']:.0f}% screened, "
          f"identical {all(same)})  heuristic {c['heuristic']:.3f}s "
          f"({c['False'] / c['heuristic']:.2f}x)", flush=True)
    return row


def periods(name, C, X, y, repeats: int) -> list[dict]:
    rows = []
    saved = _ww_problem.SNAPSHOT_EVERY
    try:
        for period in PERIODS:
            _ww_problem.SNAPSHOT_EVERY = period
            cpu, share = [], screened_share(X, y, C, 0)
            for r in range(repeats):
                t = time.process_time()
                WestonWatkinsSVC(C=C, tol=0.0009, random_state=r, shrinking=True).fit(X, y)
                cpu.append(time.process_time() - t)
            rows.append({"dataset": name, "period": period, "screened_share": share,
                         "cpu_s": statistics.median(cpu)})
            print(f"{name:14s} snapshot every {period}: {100 * share:.0f}% screened, "
                  f"{rows[-1]['cpu_s']:.3f}s", flush=True)
    finally:
        _ww_problem.SNAPSHOT_EVERY = saved
    return rows


def report(meta, command, rows, period_rows) -> None:
    lines = ["# Weston-Watkins BCD: safe screening vs no shrinking vs heuristic shrinking", ""]
    lines += machine_header(meta, command)
    lines += [
        "`WestonWatkinsSVC(C, tol=0.0009, random_state=r)` with `shrinking=False` (plain BCD), "
        "`True` (safe screening) and `\"heuristic\"` (LIBLINEAR-style shrinking), "
        "interleaved, the same seed in a round; median CPU seconds of the fit, speed-up over "
        "plain BCD, epochs and test accuracy of round 0's seed. \"screened\": block visits "
        "passed over by screening in seed 0's run; \"identical\": the screened model's "
        "`coef_` equals the plain one's bit for bit in every round.",
        "",
        "| dataset | n | d | k | C | plain (s) | screening (s) | speed-up | screened | "
        "identical | heuristic (s) | speed-up | epochs plain / heuristic | accuracy % plain "
        "/ heuristic |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["cpu_s"]
        lines.append(
            f"| {r['dataset']} | {r['n']} | {r['d']} | {r['k']} | {r['C']:g} | "
            f"{c['False']:.3f} | {c['True']:.3f} | {c['False'] / c['True']:.2f} | "
            f"{100 * r['screened_share']:.0f}% | {'yes' if all(r['identical_to_plain']) else 'NO'}"
            f" | {c['heuristic']:.3f} | {c['False'] / c['heuristic']:.2f} | "
            f"{r['epochs']['False'][0]} / {r['epochs']['heuristic'][0]} | "
            f"{r['accuracy']['False'][0]:.2f} / {r['accuracy']['heuristic'][0]:.2f} |")
    if period_rows:
        lines += ["", "Snapshot period (sweeps between two snapshots of `W`; each snapshot adds "
                  "a triangle inequality to the bounds of the blocks screened across it), "
                  "screening fit:", "", "| dataset | period | screened | CPU s |",
                  "|---|---|---|---|"]
        for r in period_rows:
            lines.append(f"| {r['dataset']} | {r['period']} | "
                         f"{100 * r['screened_share']:.0f}% | {r['cpu_s']:.3f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ww_screening.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "ww_screening.json").write_text(json.dumps(
        {"machine": meta, "command": command, "rows": rows, "periods": period_rows},
        indent=2, default=str))
    print(f"wrote {RESULTS / 'ww_screening.md'} and .json")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sets", nargs="+", default=["dna", "satimage", "letter", "sector",
                                                  "digits raw", "pendigits raw"])
    ap.add_argument("--no-periods", action="store_true")
    args = ap.parse_args(argv)
    if not DATA.exists():
        raise SystemExit(f"{DATA} not found (set TORCHFW_DATA)")
    meta = machine()
    command = " ".join(["python benchmarks/ww_screening.py"]
                       + [f"'{a}'" if " " in a else a for a in (argv or sys.argv[1:])])
    WestonWatkinsSVC(C=0.1, max_iter=2).fit(np.eye(20), np.arange(20) % 3)  # compile
    data = datasets(args.sets)
    rows = [compare(name, *data[name], args.repeats) for name in args.sets if name in data]
    period_rows = [] if args.no_periods else [
        p for name in ("dna", "satimage") if name in data
        for p in periods(name, *data[name][:3], args.repeats)]
    report(meta, command, rows, period_rows)


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore", UserWarning)
    main()
