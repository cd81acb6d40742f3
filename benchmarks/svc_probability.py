"""Calibration of ``SVC(probability=True)`` against scikit-learn's, on a9a and digits.

The target: on a9a and digits, the test log-loss of torchfw's Platt probabilities is
within 5% of scikit-learn's ``SVC(probability=True)`` (LIBSVM's ``-b 1``) with the same ``C`` and
``gamma``. Both fit their sigmoids on 5-fold out-of-fold decision values; both are fitted and
scored in the same run, on the same machine. Also reported: the Brier score, test accuracy of
``predict`` and fit time (CPU seconds of the process and wall seconds).

a9a: LIBSVM's split (32,561 train, 16,281 test), ``C = 1`` and ``gamma = "scale"`` resolved once
(``1 / (d Var X)``, the value given to both libraries). digits: raw pixels / 16, a fixed 1,200 /
597 permutation split, ``C = 10``, ``gamma = 0.05`` (the unit test's setting).

Usage::

    nice -n 5 python benchmarks/svc_probability.py                 # both sets (a9a: minutes)
    python benchmarks/svc_probability.py --datasets digits

Writes ``benchmarks/results/svc_probability.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _machine import cpu_model, machine_header  # benchmarks/ is sys.path[0] for these scripts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_libsvm  # noqa: E402

from torchfw.datasets import to_scipy_csr  # noqa: E402
from torchfw.svm import SVC  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def log_loss(proba: np.ndarray, y: np.ndarray, classes: np.ndarray) -> float:
    """Mean negative log-likelihood of the true class (probabilities clipped at 1e-15)."""
    idx = np.searchsorted(classes, y)
    return float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), idx], 1e-15, 1.0))))


def brier(proba: np.ndarray, y: np.ndarray, classes: np.ndarray) -> float:
    """Mean squared distance of the probability rows to the one-hot labels."""
    onehot = (np.asarray(y)[:, None] == classes[None, :]).astype(float)
    return float(np.mean(np.sum((proba - onehot) ** 2, axis=1)))


def load(name: str):
    if name == "a9a":
        d = load_libsvm("a9a")
        X, Xt = d.X_train, d.X_test
        y, yt = d.y_train.numpy(), d.y_test.numpy()
        values = X.values().double()
        n = X.shape[0] * X.shape[1]
        var = float((values * values).sum() / n - (values.sum() / n) ** 2)
        gamma = 1.0 / (X.shape[1] * var)
        return X, y, Xt, yt, to_scipy_csr(X, matrix=True), to_scipy_csr(Xt, matrix=True), \
            1.0, gamma
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        order = np.random.default_rng(0).permutation(len(y))
        tr, te = order[:1200], order[1200:]
        return X[tr], y[tr], X[te], y[te], X[tr], X[te], 10.0, 0.05
    raise SystemExit(f"unknown dataset {name!r}")


def measure(clf, X, y, Xt, yt) -> dict:
    """Fit ``clf`` on ``(X, y)`` and score its probabilities on ``(Xt, yt)``."""
    c0, w0 = time.process_time(), time.perf_counter()
    clf.fit(X, y)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    p = clf.predict_proba(Xt)
    classes = np.asarray(clf.classes_)
    return {"log_loss": log_loss(p, yt, classes), "brier": brier(p, yt, classes),
            "accuracy": float(np.mean(np.asarray(clf.predict(Xt)) == yt)),
            "fit_cpu_s": cpu, "fit_wall_s": wall}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["digits", "a9a"],
                    choices=["digits", "a9a"])
    args = ap.parse_args(argv)
    from sklearn import svm

    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average_start": os.getloadavg()}
    rows = []
    for name in args.datasets:
        X, y, Xt, yt, Xs, Xts, C, gamma = load(name)
        row = {"dataset": name, "n_train": int(len(y)), "n_test": int(len(yt)), "C": C,
               "gamma": gamma}
        row["torchfw"] = measure(SVC(C=C, gamma=gamma, probability=True, random_state=0),
                                 X, y, Xt, yt)
        print(f"{name}: torchfw {row['torchfw']}", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # sklearn deprecates `probability`
            row["sklearn"] = measure(svm.SVC(C=C, gamma=gamma, probability=True,
                                             random_state=0), Xs, y, Xts, yt)
        print(f"{name}: sklearn {row['sklearn']}", flush=True)
        row["ratio"] = row["torchfw"]["log_loss"] / row["sklearn"]["log_loss"]
        rows.append(row)
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/svc_probability.py --datasets " + " ".join(args.datasets)
    (RESULTS / "svc_probability.json").write_text(json.dumps(
        {"machine": meta, "command": command, "rows": rows}, indent=2))
    lines = [
        "# SVC(probability=True): log-loss against scikit-learn's SVC(probability=True)",
        "",
        *machine_header(meta, command),
        "Both: Platt sigmoids on 5-fold out-of-fold decision values, same C and gamma, "
        "random_state=0; test set scores. Target: torchfw's log-loss <= 1.05 x scikit-learn's.",
        "",
        "| dataset | train | test | C | gamma | log-loss torchfw | sklearn | ratio "
        "| Brier torchfw | sklearn | accuracy % torchfw | sklearn | fit s (CPU) torchfw "
        "| sklearn |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t, s = r["torchfw"], r["sklearn"]
        lines.append(
            f"| {r['dataset']} | {r['n_train']} | {r['n_test']} | {r['C']:g} | "
            f"{r['gamma']:.4g} | {t['log_loss']:.4f} | {s['log_loss']:.4f} | "
            f"{r['ratio']:.3f} | {t['brier']:.4f} | {s['brier']:.4f} | "
            f"{100 * t['accuracy']:.2f} | {100 * s['accuracy']:.2f} | {t['fit_cpu_s']:.1f} | "
            f"{s['fit_cpu_s']:.1f} |")
    (RESULTS / "svc_probability.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'svc_probability.md'}")


if __name__ == "__main__":
    main()
