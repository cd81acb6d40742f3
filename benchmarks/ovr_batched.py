"""One-vs-rest SVC: the k problems solved as one batch against k sequential fits.

Both paths solve the same k binary problems (class j against the rest) from the same starting
points with the same solver and tolerance; they differ in how an iteration is executed. The
sequential path runs k independent solver loops (on the CPU each loop is compiled); the batched
path (``torchfw.optimizers.batched``) advances all k problems per step with one kernel-column
product for the whole batch and masks the ones that have converged. ``SVC`` picks the batched
path on CUDA and the sequential one on the CPU; this script forces each in turn.

Usage::

    python benchmarks/ovr_batched.py --dataset letter             # CPU
    python benchmarks/ovr_batched.py --dataset letter --device cuda
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_libsvm  # noqa: E402
from svm_vs_libsvm import machine  # noqa: E402

from torchfw import SVC, Status  # noqa: E402
from torchfw.exceptions import ConvergenceWarning  # noqa: E402
from torchfw.result import problem_results  # noqa: E402
from torchfw.svm._plan import fit_planned  # noqa: E402


def fit(X, y, Xt, yt, *, batched: bool, solver: str, C: float, tol: float, device: str):
    model = SVC(solver=solver, C=C, tol=tol, device=device, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        # Force the path through the plan (SVC chooses by device otherwise).
        fit_planned(model, X, y, batched=batched)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    results = problem_results(model.result_)
    return {"fit_s": elapsed, "accuracy": float(model.score(Xt, yt)),
            "iterations": [int(r.n_iter) for r in results],
            "converged": sum(r.status == Status.CONVERGED for r in results),
            "n_sv": int(len(model.support_)), "predict": model.predict(Xt)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="letter")
    p.add_argument("--solver", default="swap")
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--tol", type=float, default=0.3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    data = load_libsvm(args.dataset)
    X, y, Xt, yt = data.X_train, data.y_train.numpy(), data.X_test, data.y_test.numpy()
    k = len(set(y.tolist()))
    where = machine(args.device)
    print(f"# {args.dataset}: {X.shape[0]} x {X.shape[1]}, {k} classes; SVC(solver="
          f"{args.solver!r}, C={args.C}, tol={args.tol}); {args.device} ({where})", flush=True)
    # Warm-up (compilation, CUDA context) on a small subset, both paths.
    first = torch.arange(0, X.shape[0], max(1, X.shape[0] // 1500))
    from torchfw.utils.data import take_rows

    for batched in (False, True):
        fit(take_rows(X, first), y[first.numpy()], Xt, yt, batched=batched, solver=args.solver,
            C=args.C, tol=args.tol, device=args.device)
    runs = {False: [], True: []}
    for _ in range(args.repeats):  # interleaved, so load changes hit both paths alike
        for batched in (False, True):
            runs[batched].append(fit(X, y, Xt, yt, batched=batched, solver=args.solver,
                                     C=args.C, tol=args.tol, device=args.device))
    rows = []
    for batched, name in ((False, f"{k} sequential fits"), (True, "batched (one solve)")):
        r = runs[batched]
        rows.append({"path": name, "fit_s": statistics.median(x["fit_s"] for x in r),
                     "fit_s_all": [x["fit_s"] for x in r], "accuracy": r[0]["accuracy"],
                     "iterations_max": max(r[0]["iterations"]),
                     "iterations_sum": sum(r[0]["iterations"]), "n_sv": r[0]["n_sv"],
                     "converged": r[0]["converged"]})
    agree = float((runs[False][0]["predict"] == runs[True][0]["predict"]).mean())
    speedup = rows[0]["fit_s"] / rows[1]["fit_s"]
    print(f"{'path':24s} {'fit s':>8s} {'acc %':>7s} {'max it':>7s} {'sum it':>8s} {'SVs':>6s}")
    for r in rows:
        print(f"{r['path']:24s} {r['fit_s']:8.2f} {100 * r['accuracy']:7.2f} "
              f"{r['iterations_max']:7d} {r['iterations_sum']:8d} {r['n_sv']:6d}")
    print(f"batched speed-up over sequential: x{speedup:.2f}; test predictions agree on "
          f"{100 * agree:.2f}%")
    command = "python benchmarks/ovr_batched.py " + " ".join(sys.argv[1:] if argv is None
                                                             else argv)
    meta = {"dataset": args.dataset, "k": k, "solver": args.solver, "C": args.C,
            "tol": args.tol, "device": args.device, "machine": where,
            "torch": torch.__version__, "repeats": args.repeats, "command": command,
            "speedup": speedup, "prediction_agreement": agree}
    out = Path(args.out or Path(__file__).resolve().parent / "results" /
               f"ovr_{args.dataset}_{args.device.split(':')[0]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [f"# One-vs-rest on {args.dataset} ({k} classes): batched vs sequential", "",
             f"{where}; torch {meta['torch']}; SVC(solver={args.solver!r}, C={args.C}, "
             f"tol={args.tol}); median of {args.repeats} interleaved fits. Command: "
             f"`{command}`.", "",
             "| path | fit (s) | test acc (%) | max iterations | total iterations | SVs |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['path']} | {r['fit_s']:.2f} | {100 * r['accuracy']:.2f} | "
              f"{r['iterations_max']} | {r['iterations_sum']} | {r['n_sv']} |" for r in rows]
    lines += ["", f"Batched speed-up: x{speedup:.2f}; the two models' test predictions agree on "
              f"{100 * agree:.2f}%."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
