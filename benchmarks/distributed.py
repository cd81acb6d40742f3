"""Data-parallel SVC training with torchfw.distributed: 1 and 2 gloo ranks on CPU.

Part 1, **fit**: ``DistributedSVC`` (RBF kernel, ``gamma="scale"``, ``C=1``: the stored
results' and the default before it became 2, the default ``tol``, ``--solver``, default SWAP)
on generated data (``torchfw.datasets.make_large_classification``, ``--m`` training examples of
``--d`` features plus 5,000 held-out ones) with 1 and with 2 ranks, once per exchange mode
(``"gather"``, ``"broadcast"``). Each rank is a process started by
``torch.multiprocessing.spawn`` with a ``file://`` rendezvous; it holds its contiguous shard
(``shard_range``) and runs with one thread (the per-iteration kernels are single-threaded).
Every process first makes a tiny fit per mode (numba compilation, gloo connections), outside
the timings. Reported: fit time (slowest rank, wall seconds of ``fit``), the solver loop's
time, iterations, time per iteration, the speed-up of 2 ranks over 1, whether the 1- and 2-rank
models agree (dual coefficients, support, held-out predictions), and each rank's communication
during the solver loop from the ``Communicator`` counters (``result_.info["communication"]``):
bytes handed to collectives (*sent*) and got back from the other ranks (*received*), per
iteration. A plain ``SVC`` (no process group, one thread) is fitted too, as the single-process
reference, in the 1-rank process right after its fits.

Part 2, **communication formula**: the byte counts per iteration follow from the code of
``torchfw/distributed/engine.py`` (SWAP over the simplex, no time limit or callback):

* every iteration ends with one selection ``all_gather`` of a float64 record of
  ``1 + 2 * 5`` scalars (``p`` and the FW and away candidates), plus, in ``"gather"`` mode, the
  features of both candidates, ``2 * (3 + d)`` scalars (label, squared norm, ``1/C``, ``x``);
* in ``"broadcast"`` mode, atoms whose features are not yet on every rank are fetched by one
  ``all_reduce(MAX)`` of ``(3 + d)`` scalars per atom (``F`` atoms over the run, read from
  ``result_.info["cache"]["fetched"]``; revisited atoms hit the shared feature cache);
* ``Communicator`` counts ``sent = len(buffer)`` and ``received = (N - 1) * len`` for an
  all-gather, ``sent = received = len`` for an all-reduce, and nothing for a group of one.

So, per rank and iteration, with ``f = F / iterations``::

    gather:     sent = 8 (17 + 2d)            received = (N - 1) 8 (17 + 2d)
    broadcast:  sent = 88 + 8 (3 + d) f       received = (N - 1) 88 + 8 (3 + d) f

The script checks these byte for byte against the counters of the 1- and 2-rank fits, and, to
test the dependence on ``d``, against 2-rank runs of the core solver
(``torchfw.distributed.minimize`` with ``SwapFrankWolfe`` on a ``ShardedSVMDualOperator``, fixed
iteration budgets) at ``d`` = ``--check-d`` (a least-squares line in ``d`` through the measured
bytes per iteration is compared with the formula's). The same fixed-budget runs read the
loopback interface's byte counter (``/proc/net/dev``) at two budgets: the difference divided by
the extra iterations is what gloo actually put on the wire per iteration (TCP/IP and gloo
headers included; any other loopback traffic on the machine during the run inflates it).

Part 3, **extrapolation** to N = 4, 8, 16, 64 ranks: the formula, with ``d`` and the fetch rate
``f`` measured at N = 2 (the path is the same for any N; each rank's column cache gets more
slots as shards shrink, so ``f`` can only fall: an upper bound). The (N - 1) factor of the
all-gather is the code's, not a measurement (two world sizes cannot test it).

Two ranks on a 2-core machine share the cores with each other, with the parent process (idle,
waiting) and with whatever else runs: the speed-up is a lower bound on what two machines give.

Usage::

    python benchmarks/distributed.py                       # m = 20,000, d = 64 (~5-8 min)
    python benchmarks/distributed.py --m 5000 --no-reference   # quick

Writes ``benchmarks/results/distributed.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from _machine import cpu_model  # benchmarks/ is sys.path[0] for these scripts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
EXCHANGES = ("gather", "broadcast")
N_TEST = 5000
EXTRAPOLATE = (4, 8, 16, 64)


def lo_bytes() -> tuple[int, int]:
    """Received and transmitted bytes of the loopback interface so far (Linux)."""
    try:
        with open("/proc/net/dev") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                if name.strip() == "lo":
                    fields = rest.split()
                    return int(fields[0]), int(fields[8])
    except OSError:
        pass
    return -1, -1


def formula(mode: str, world: int, d: int, fetch_rate: float) -> tuple[float, float]:
    """Payload bytes (sent, received) per iteration and rank predicted from the code."""
    if world == 1:
        return 0.0, 0.0
    select = 8 * (1 + 2 * 5)
    if mode == "gather":
        record = select + 8 * 2 * (3 + d)
        return float(record), float((world - 1) * record)
    fetch = 8 * (3 + d) * fetch_rate
    return select + fetch, (world - 1) * select + fetch


# ---------------------------------------------------------------------------------------------
# The ranks
# ---------------------------------------------------------------------------------------------

def _worker(rank: int, world: int, store: str, out: str, cfg: dict) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    import torchfw as tf
    from torchfw import SVC
    from torchfw.datasets import make_large_classification
    from torchfw.distributed import (
        Communicator,
        DistributedSVC,
        ShardedSVMDualOperator,
        gather_shards,
        minimize,
        shard_range,
    )
    from torchfw.svm.kernels import make_kernel

    comm = Communicator()
    results = {"world": world, "fits": [], "checks": []}
    try:
        warnings.simplefilter("ignore")  # fixed budgets stop on max_iter on purpose
        # Warm-up: numba compilation and gloo connections, per mode, outside the timings.
        Xw, yw = make_large_classification(400, cfg["d"], random_state=1)
        a, b = shard_range(400, rank, world)
        for mode in EXCHANGES:
            DistributedSVC(C=1.0, solver=cfg["solver"], max_iter=60, exchange=mode,
                           random_state=0).fit(Xw[a:b], yw[a:b])

        m, d = cfg["m"], cfg["d"]
        if world > 1:
            results["latency"] = bare_latency(world, d)
        X, y = make_large_classification(m + N_TEST, d, random_state=0)
        X_test, y_test = X[m:], y[m:]
        a, b = shard_range(m, rank, world)
        for mode in EXCHANGES:
            dist.barrier()
            start = time.perf_counter()
            model = DistributedSVC(C=1.0, solver=cfg["solver"], exchange=mode, random_state=0).fit(
                X[a:b], y[a:b])
            fit_s = time.perf_counter() - start
            r = model.result_
            mine = {"rank": rank, "fit_s": fit_s, "loop_s": r.history.time[-1],
                    "shard": list(r.info["shard"]), "communication": r.info["communication"],
                    "setup_communication": r.info["setup_communication"],
                    "cache": r.info["cache"]}
            ranks = comm.all_gather_object(mine)
            alpha = gather_shards(model.dual_shard_, comm).numpy()  # a collective
            if rank == 0:
                results["fits"].append({
                    "exchange": r.info["exchange"], "n_iter": r.n_iter,
                    "status": str(r.status), "gap": r.gap, "value": r.value, "ranks": ranks,
                    "alpha": alpha, "support": np.asarray(model.support_),
                    "predict": model.predict(X_test),
                    "accuracy": float(model.score(X_test, y_test))})

        if world == 1 and cfg["reference"]:
            # The single-process reference in the same process, right after the 1-rank fits
            # (same thread count, same moment's machine load).
            SVC(C=1.0, solver=cfg["solver"], max_iter=60, random_state=0).fit(Xw, yw)
            start = time.perf_counter()
            model = SVC(C=1.0, solver=cfg["solver"], random_state=0).fit(X[:m], y[:m])
            fit_s = time.perf_counter() - start
            r = model.result_
            results["reference"] = {
                "fit_s": fit_s, "loop_s": r.history.time[-1], "n_iter": r.n_iter,
                "status": str(r.status), "alpha": r.x.double().numpy(),
                "support": np.asarray(model.support_), "predict": model.predict(X_test),
                "accuracy": float(model.score(X_test, y_test))}

        # Communication checks: the core solver on the sharded operator, fixed budgets.
        if world > 1:
            for d_check in cfg["check_d"]:
                Xc, yc = make_large_classification(cfg["check_m"], d_check, random_state=2)
                a, b = shard_range(cfg["check_m"], rank, world)
                y_pm = torch.from_numpy(np.where(yc[a:b].numpy() > 0, 1.0, -1.0))
                op = ShardedSVMDualOperator(Xc[a:b], y_pm, make_kernel("rbf", 1.0 / d_check),
                                            1.0, comm=comm)
                for mode in EXCHANGES:
                    for rep in range(cfg["check_repeats"]):
                        row = {"d": d_check, "exchange": mode, "repeat": rep, "runs": []}
                        for budget in cfg["budgets"]:
                            opt = tf.SwapFrankWolfe(tf.Simplex(), tf.ExactLineSearch(),
                                                    tol=1e-300, max_iter=budget)
                            dist.barrier()
                            before = lo_bytes()
                            res = minimize(opt, op, exchange=mode)
                            dist.barrier()
                            after = lo_bytes()
                            row["runs"].append({
                                "budget": budget, "n_iter": res.n_iter,
                                "communication": res.info["communication"],
                                "cache": res.info["cache"],
                                "lo_tx": after[1] - before[1], "lo_rx": after[0] - before[0]})
                        results["checks"].append(row)
    finally:
        if rank == 0:
            with open(out, "wb") as fh:
                pickle.dump(results, fh)
        dist.destroy_process_group()


def bare_latency(world: int, d: int, reps: int = 300) -> dict:
    """Seconds per plain gloo call with the payloads of one iteration (no torchfw code)."""
    import torch.distributed as dist

    record = torch.zeros(11 + 2 * (3 + d), dtype=torch.float64)  # gather-mode selection
    out = torch.empty(world * record.numel(), dtype=torch.float64)
    features = torch.zeros(3 + d, dtype=torch.float64)  # one broadcast-mode fetch
    small = torch.zeros(11, dtype=torch.float64)  # broadcast-mode selection
    small_out = torch.empty(world * 11, dtype=torch.float64)
    calls = {
        f"all_gather {record.numel() * 8} B": lambda: dist.all_gather_into_tensor(out, record),
        f"all_gather {small.numel() * 8} B": lambda: dist.all_gather_into_tensor(small_out,
                                                                                small),
        f"all_reduce(MAX) {features.numel() * 8} B": lambda: dist.all_reduce(
            features, op=dist.ReduceOp.MAX),
    }
    seconds = {}
    for name, call in calls.items():
        for _ in range(20):
            call()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(reps):
            call()
        seconds[name] = (time.perf_counter() - start) / reps
    return seconds


def run_world(world: int, cfg: dict) -> dict:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="torchfw-dist-") as tmp:
        out = os.path.join(tmp, "results.pkl")
        mp.spawn(_worker, args=(world, os.path.join(tmp, "store"), out, cfg), nprocs=world,
                 join=True)
        with open(out, "rb") as fh:
            return pickle.load(fh)


# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------

def per_iter(comm: dict, n_iter: int) -> dict:
    return {"sent": comm["sent"] / n_iter, "received": comm["received"] / n_iter,
            "calls": comm["calls"] / n_iter, "seconds": comm["seconds"] / n_iter}


def check_formula(mode, world, d, n_iter, fetched, comm) -> dict:
    """Predicted against counted payload bytes of a whole loop (exact integers)."""
    if world == 1:
        sent = received = 0
    elif mode == "gather":
        rec = 8 * (11 + 2 * (3 + d))
        sent, received = n_iter * rec, (world - 1) * n_iter * rec
    else:
        sent = 88 * n_iter + 8 * (3 + d) * fetched
        received = (world - 1) * 88 * n_iter + 8 * (3 + d) * fetched
    return {"predicted_sent": sent, "predicted_received": received,
            "counted_sent": int(comm["sent"]), "counted_received": int(comm["received"]),
            "exact": sent == comm["sent"] and received == comm["received"]}


def line_fit(xs, ys) -> tuple[float, float]:
    """Least-squares intercept and slope."""
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def analyse(worlds: dict, reference: dict | None, cfg: dict) -> dict:
    d = cfg["d"]
    fits = []
    for world, res in sorted(worlds.items()):
        for f in res["fits"]:
            slowest = max(res_r["fit_s"] for res_r in f["ranks"])
            loop = max(res_r["loop_s"] for res_r in f["ranks"])
            rows = []
            for rr in f["ranks"]:
                fetched = rr["cache"]["fetched"]
                rows.append({"rank": rr["rank"], "shard": rr["shard"], "fit_s": rr["fit_s"],
                             "loop_s": rr["loop_s"],
                             "per_iter": per_iter(rr["communication"], f["n_iter"]),
                             "fetched": fetched,
                             "formula": check_formula(f["exchange"], world, d, f["n_iter"],
                                                      fetched, rr["communication"]),
                             "setup_communication": rr["setup_communication"]})
            fits.append({"world": world, "exchange": f["exchange"], "n_iter": f["n_iter"],
                         "status": f["status"], "gap": f["gap"], "fit_s": slowest,
                         "loop_s": loop, "ms_per_iter": 1e3 * loop / f["n_iter"],
                         "accuracy": f["accuracy"], "n_support": int(len(f["support"])),
                         "ranks": rows})
    # Agreement and speed-up: each 2-rank fit against the 1-rank fit of the same mode.
    by = {(f["world"], f["exchange"]): f for f in fits}
    raw = {(w, f["exchange"]): f for w, res in worlds.items() for f in res["fits"]}
    for f in fits:
        base = raw.get((1, f["exchange"]))
        mine = raw[(f["world"], f["exchange"])]
        if f["world"] > 1 and base is not None:
            one = by[(1, f["exchange"])]
            f["speedup_fit"] = one["fit_s"] / f["fit_s"]
            f["speedup_loop"] = one["loop_s"] / f["loop_s"]
            f["vs_1_rank"] = compare(mine, base)
        if reference is not None:
            f["vs_svc"] = compare(mine, reference)
    # Communication checks at several d (2 ranks).
    checks = []
    for world, res in worlds.items():
        for row in res["checks"]:
            r1, r2 = row["runs"][0], row["runs"][-1]
            extra = r2["n_iter"] - r1["n_iter"]
            c2 = r2["communication"]
            checks.append({
                "world": world, "d": row["d"], "exchange": row["exchange"],
                "repeat": row["repeat"], "n_iter": r2["n_iter"],
                "fetch_rate": r2["cache"]["fetched"] / r2["n_iter"],
                "per_iter": per_iter(c2, r2["n_iter"]),
                "formula": check_formula(row["exchange"], world, row["d"], r2["n_iter"],
                                         r2["cache"]["fetched"], c2),
                # Both ranks' packets cross lo: per rank, half of the transmitted bytes.
                "wire_per_iter_per_rank": (r2["lo_tx"] - r1["lo_tx"]) / 2 / extra
                if extra > 0 and r1["lo_tx"] >= 0 else None,
                "payload_per_iter_per_rank": ((c2["sent"] - r1["communication"]["sent"])
                                              / extra if extra > 0 else None)})
    fitted = {}
    for mode in EXCHANGES:
        pts = [c for c in checks if c["exchange"] == mode and c["repeat"] == 0]
        if len({c["d"] for c in pts}) < 2:
            continue
        if mode == "gather":
            ys = [c["per_iter"]["sent"] for c in pts]
            fitted[mode] = {"quantity": "sent bytes per iteration",
                            "measured": line_fit([c["d"] for c in pts], ys),
                            "formula": (8.0 * 17, 16.0)}
        else:  # bytes per fetched atom, after the selection record
            ys = [(c["per_iter"]["sent"] - 88.0) / c["fetch_rate"] for c in pts]
            fitted[mode] = {"quantity": "exchange bytes per fetched atom",
                            "measured": line_fit([c["d"] for c in pts], ys),
                            "formula": (24.0, 8.0)}
    # Extrapolation from the 2-rank fits (fetch rate measured there).
    extrap = []
    for mode in EXCHANGES:
        f2 = by.get((2, mode))
        if f2 is None:
            continue
        rate = f2["ranks"][0]["fetched"] / f2["n_iter"]
        for world in (1, 2) + EXTRAPOLATE:
            sent, received = formula(mode, world, d, rate)
            row = {"world": world, "exchange": mode, "d": d, "fetch_rate": rate,
                   "sent": sent, "received": received, "total": sent + received,
                   "source": "measured" if world <= 2 else "extrapolated"}
            if world <= 2:
                f = by.get((world, mode))
                if f is not None:
                    row["measured_sent"] = f["ranks"][0]["per_iter"]["sent"]
                    row["measured_received"] = f["ranks"][0]["per_iter"]["received"]
            extrap.append(row)
    auto_max = max(w for w in range(1, 4097) if w * 2 * (3 + d) * 8 <= 65536)
    latency = {world: res["latency"] for world, res in worlds.items() if "latency" in res}
    return {"fits": fits, "checks": checks, "fitted": fitted, "extrapolation": extrap,
            "auto_gather_up_to": auto_max, "bare_latency_s": latency}


def compare(a: dict, b: dict) -> dict:
    same_len = len(a["alpha"]) == len(b["alpha"])
    return {"same_n_iter": a["n_iter"] == b["n_iter"],
            "max_abs_dual_diff": float(np.abs(a["alpha"] - b["alpha"]).max())
            if same_len else None,
            "same_support": bool(np.array_equal(np.sort(a["support"]), np.sort(b["support"]))),
            "prediction_agreement": float(np.mean(a["predict"] == b["predict"]))}


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def tables(res: dict, cfg: dict, meta: dict) -> list[str]:
    d = cfg["d"]
    out = [f"## Fit: DistributedSVC(solver={cfg['solver']!r}), m = {cfg['m']:,}, d = {d}, "
           f"{N_TEST:,} held-out examples", "",
           "fit s: wall seconds of `fit` on the slowest rank (set-up, initial point, solver "
           "loop, model gather); loop s: the solver loop alone. Bytes: payload per iteration "
           "and per rank during the loop, from the Communicator counters (rank 0; ranks "
           "agree to within the record sizes). comm ms/it: time inside collectives per "
           "iteration (waiting for the other rank included); compute ms/it: rank 0's loop "
           "time per iteration minus that. agree: dual coefficients, "
           "support and held-out predictions against the 1-rank fit of the same mode.", "",
           "| ranks | exchange | iterations | status | fit s | loop s | ms/iter | speed-up "
           "(fit / loop) | sent B/it | received B/it | calls/it | comm ms/it | compute ms/it "
           "| formula | accuracy | SVs | agree with 1 rank |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in res["fits"]:
        r0 = f["ranks"][0]
        pi = r0["per_iter"]
        speed = (f"{f['speedup_fit']:.2f} / {f['speedup_loop']:.2f}" if "speedup_fit" in f
                 else "1 (baseline)")
        agree = "-"
        if "vs_1_rank" in f:
            v = f["vs_1_rank"]
            agree = (f"iters {'same' if v['same_n_iter'] else 'DIFFER'}, max|dalpha| "
                     f"{v['max_abs_dual_diff']:.1e}, support "
                     f"{'same' if v['same_support'] else 'DIFFERS'}, predictions "
                     f"{100 * v['prediction_agreement']:.2f}%")
        ok = all(r["formula"]["exact"] for r in f["ranks"])
        out.append(f"| {f['world']} | {f['exchange']} | {f['n_iter']:,} | {f['status']} | "
                   f"{f['fit_s']:.1f} | {f['loop_s']:.1f} | {f['ms_per_iter']:.2f} | {speed} | "
                   f"{pi['sent']:.1f} | {pi['received']:.1f} | {pi['calls']:.2f} | "
                   f"{1e3 * pi['seconds']:.3f} | "
                   f"{1e3 * (r0['loop_s'] / f['n_iter'] - pi['seconds']):.3f} | "
                   f"{'exact' if ok else 'MISMATCH'} | "
                   f"{f['accuracy']:.4f} | {f['n_support']:,} | {agree} |")
    if meta.get("reference"):
        ref = meta["reference"]
        out += ["", f"Single-process reference, `SVC(solver={cfg['solver']!r})` without a "
                f"process group, 1 thread: fit {ref['fit_s']:.1f} s, loop {ref['loop_s']:.1f} "
                f"s, {ref['n_iter']:,} iterations ({1e3 * ref['loop_s'] / ref['n_iter']:.2f} "
                f"ms/iter), accuracy {ref['accuracy']:.4f}."]
        for f in res["fits"]:
            v = f.get("vs_svc")
            if v:
                out.append(f"- {f['world']} rank(s), {f['exchange']}: iterations "
                           f"{'same' if v['same_n_iter'] else 'differ'}, max|dalpha| "
                           f"{v['max_abs_dual_diff']:.1e}, support "
                           f"{'same' if v['same_support'] else 'differs'}, predictions "
                           f"{100 * v['prediction_agreement']:.2f}% equal.")
    for world, lat in res["bare_latency_s"].items():
        out += ["", f"Bare gloo latency with {world} ranks on this machine (300 calls each, "
                "no torchfw code): " + "; ".join(f"{k}: {1e3 * v:.3f} ms"
                                                 for k, v in lat.items()) + "."]
    out += ["", "The formula column compares every rank's counted loop bytes with the "
            "code-derived formula (below), exact integers: gather `sent = 8(17 + 2d)` per "
            "iteration, broadcast `sent = 88 + 8(3 + d) f` with f the fetched atoms per "
            "iteration; received adds `(N - 1)` times the all-gathered record. One rank "
            "communicates nothing (the Communicator skips groups of one)."]
    if res["checks"]:
        out += ["", f"## Communication against d (2 ranks, core SwapFrankWolfe on a "
                f"ShardedSVMDualOperator, m = {cfg['check_m']:,}, fixed budgets "
                f"{cfg['budgets'][0]} and {cfg['budgets'][1]} iterations)", "",
                "payload: Communicator bytes sent per iteration per rank (budget "
                f"{cfg['budgets'][1]}); wire: loopback bytes per extra iteration between the "
                "two budgets, per rank (TCP/IP and gloo headers included; other loopback "
                "traffic on the machine inflates it).", "",
                "| d | exchange | repeat | fetched atoms/it | calls/it | sent B/it | "
                "received B/it | formula | wire B/it/rank | wire / payload | wire overhead "
                "B/call |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in res["checks"]:
            wire = c["wire_per_iter_per_rank"]
            pay = c["payload_per_iter_per_rank"]
            calls = c["per_iter"]["calls"]
            out.append(f"| {c['d']} | {c['exchange']} | {c['repeat']} | "
                       f"{c['fetch_rate']:.3f} | {calls:.2f} | {c['per_iter']['sent']:.1f} | "
                       f"{c['per_iter']['received']:.1f} | "
                       f"{'exact' if c['formula']['exact'] else 'MISMATCH'} | "
                       + (f"{wire:.0f} | {wire / pay:.2f} | {(wire - pay) / calls:.0f} |"
                          if wire is not None and pay else "n/a | n/a | n/a |"))
        for mode, fit in res["fitted"].items():
            (a0, a1), (b0, b1) = fit["measured"], fit["formula"]
            out.append("")
            out.append(f"Least-squares line in d, {mode}, {fit['quantity']}: measured "
                       f"{a0:.2f} + {a1:.4f} d; formula {b0:.0f} + {b1:.0f} d.")
    out += ["", f"## Communication per iteration and rank for N ranks (d = {d}, payload bytes)",
            "", "N = 1, 2: the formula next to the measured counters (the 2-rank fits above). "
            "N >= 4: extrapolated from the formula; d and the broadcast fetch rate f are "
            "measured (2-rank fit; an upper bound for more ranks, whose caches hold more "
            "columns), the (N - 1) factor of the all-gather is the code's, not measured. "
            f"`exchange=\"auto\"` picks gather while N * 2 * (3 + d) * 8 <= 64 KiB, i.e. up "
            f"to N = {res['auto_gather_up_to']} ranks at d = {d}.", "",
            "| N | exchange | source | sent B/it | received B/it | total B/it | measured "
            "sent / received |", "|---|---|---|---|---|---|---|"]
    for e in res["extrapolation"]:
        meas = (f"{e['measured_sent']:.1f} / {e['measured_received']:.1f}"
                if "measured_sent" in e else "-")
        out.append(f"| {e['world']} | {e['exchange']} | {e['source']} | {e['sent']:,.0f} | "
                   f"{e['received']:,.0f} | {e['total']:,.0f} | {meas} |")
    return out


def machine() -> dict:
    cpu = cpu_model()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "backend": "gloo", "threads_per_rank": 1,
            "load_average_start": list(os.getloadavg())}


def strip(obj):
    """Drop the large arrays before writing JSON."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items()
                if k not in ("alpha", "support", "predict")}
    if isinstance(obj, list | tuple):
        return [strip(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--m", type=int, default=20_000, help="training examples")
    parser.add_argument("--d", type=int, default=64, help="features")
    parser.add_argument("--solver", default="swap")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--check-d", type=int, nargs="*", default=[16, 64, 128],
                        help="d values of the communication check (2 ranks; none: skip)")
    parser.add_argument("--check-m", type=int, default=4000)
    parser.add_argument("--budgets", type=int, nargs=2, default=[200, 1000])
    parser.add_argument("--check-repeats", type=int, default=2)
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the single-process SVC fit (made in the 1-rank process)")
    args = parser.parse_args(argv)
    cfg = {"m": args.m, "d": args.d, "solver": args.solver, "check_d": args.check_d,
           "check_m": args.check_m, "budgets": args.budgets,
           "check_repeats": args.check_repeats,
           "reference": not args.no_reference and 1 in args.ranks}
    meta = {"machine": machine(), "config": cfg,
            "command": "python benchmarks/distributed.py " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    print(meta["machine"], flush=True)
    start = time.perf_counter()
    worlds = {}
    for world in args.ranks:
        t0 = time.perf_counter()
        worlds[world] = run_world(world, cfg)
        print(f"{world} rank(s): {time.perf_counter() - t0:.0f} s (spawn, warm-up, fits)",
              flush=True)
    reference = worlds.get(1, {}).get("reference")
    if reference is not None:
        meta["reference"] = {k: v for k, v in reference.items()
                             if k not in ("alpha", "support", "predict")}
    res = analyse(worlds, reference, cfg)
    meta["elapsed_s"] = time.perf_counter() - start
    meta["load_average_end"] = list(os.getloadavg())
    lines = tables(res, cfg, meta)
    print("\n".join(lines))
    m = meta["machine"]
    head = ["# Data-parallel SVC over torch.distributed (gloo, CPU)", "",
            f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, torch "
            f"{m['torch']}; gloo ranks as processes on this one machine, 1 thread each. Load "
            "average (1, 5, 15 min) at start: "
            + ", ".join(f"{v:.2f}" for v in m["load_average_start"]) + "; at end: "
            + ", ".join(f"{v:.2f}" for v in meta["load_average_end"])
            + ". A shared machine: other people's jobs ran during the measurements, and the "
            "2 ranks share its 2 cores with them (and with each other), so the speed-up is a "
            "lower bound on what separate machines would give; one timing per configuration.",
            "", f"Command: `{meta['command']}`", ""]
    tail = ["", f"Elapsed: {meta['elapsed_s']:.0f} s."]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "distributed.md").write_text("\n".join(head + lines + tail) + "\n")
    (RESULTS / "distributed.json").write_text(
        json.dumps(strip({"meta": meta, **res}), indent=1) + "\n")
    print(f"elapsed {meta['elapsed_s']:.0f} s; wrote {RESULTS / 'distributed.md'} and .json")


if __name__ == "__main__":
    main()
