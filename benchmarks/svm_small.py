"""Small and medium SVMs: torchfw ``SVC()`` against scikit-learn ``SVC()`` at their defaults.

Both at C=1, gamma="scale", on standardized inputs (scaler fitted on the training part of a
70/30 stratified split), in the same process, warm (one untimed fit first), median fit time of
``--repeats`` fits; test accuracy averaged over ``--splits`` such splits (default 10, the
protocol behind ``SVC``'s ``tol="auto"``: on one split of iris a single test example is 2.2
points). Data: iris, wine, breast_cancer, digits
(scikit-learn's loaders) and ``make_classification`` sets, binary and 10 classes, of m = 500,
2,000, 8,000 and 20,000 examples (20,000 skipped with ``--quick``). Prints a table with the
time ratio per row and its geometric mean, and writes it to
``benchmarks/results/svm_small.md`` (and ``.json``).

Multiclass sets are also fitted with the one-vs-one/one-vs-rest scheme ``SVC()`` does not use
by default (``multi_class``), so that the default's choice can be read off the table.

``--cold`` adds the fresh-process figure: ``python -c "import ...; fit"`` timed from outside
(median of ``--cold-repeats`` processes) for three sizes, torchfw against scikit-learn, with the
bare ``import torch`` / ``import sklearn`` processes alongside.

Usage::

    python benchmarks/svm_small.py --quick --cold
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def datasets(quick: bool):
    from sklearn import datasets as skd

    for name in ("iris", "wine", "breast_cancer", "digits"):
        X, y = getattr(skd, f"load_{name}")(return_X_y=True)
        yield name, X, y
    sizes = (500, 2000, 8000) if quick else (500, 2000, 8000, 20000)
    for classes in (2, 10):
        for m in sizes:
            X, y = skd.make_classification(n_samples=m, n_features=20, n_informative=10,
                                           n_classes=classes, n_clusters_per_class=1,
                                           random_state=0)
            yield f"generated {classes} classes, m={m:,}", X, y


def split(X, y, seed=0):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def split_accuracies(make, X, y, splits, first):
    """Test accuracy on each of ``splits`` stratified 70/30 splits (seeds 0, 1, ...).

    ``first`` is the accuracy on split 0 (the timed fit's). One split of iris tests 45
    examples, so one example moves its accuracy by 2.2 points: a single split cannot tell
    apart two estimators within half a point, an average over several can.
    """
    scores = [first]
    for seed in range(1, splits):
        Xtr, Xte, ytr, yte = split(X, y, seed)
        scores.append(float(make().fit(Xtr, ytr).score(Xte, yte)))
    return scores


def timed_fit(make, Xtr, ytr, repeats):
    make().fit(Xtr, ytr)  # warm: compiled kernels loaded, caches filled
    times = []
    for _ in range(repeats):
        model = make()
        start = time.perf_counter()
        model.fit(Xtr, ytr)
        times.append(time.perf_counter() - start)
    return statistics.median(times), model


def warm_table(quick: bool, repeats: int, splits: int):
    from sklearn.svm import SVC as SkSVC

    import torchfw

    rows = []
    for name, X, y in datasets(quick):
        Xtr, Xte, ytr, yte = split(X, y)
        reps = repeats if len(ytr) <= 6000 else max(1, repeats // 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_sk, sk = timed_fit(lambda: SkSVC(), Xtr, ytr, reps)
            t_fw, fw = timed_fit(lambda: torchfw.SVC(), Xtr, ytr, reps)
            other = None
            if len(np.unique(y)) > 2:  # the scheme SVC() does not use, for the default's choice
                scheme = "ovo" if fw.multi_class_ == "ovr" else "ovr"
                t_other, fit_other = timed_fit(lambda s=scheme: torchfw.SVC(multi_class=s), Xtr,
                                               ytr, reps)
                other = {"scheme": scheme, "s": t_other, "ratio": t_other / t_sk,
                         "acc": float(np.mean(split_accuracies(
                             lambda s=scheme: torchfw.SVC(multi_class=s), X, y, splits,
                             float(fit_other.score(Xte, yte)))))}
            acc_sk = split_accuracies(SkSVC, X, y, splits, float(sk.score(Xte, yte)))
            acc_fw = split_accuracies(torchfw.SVC, X, y, splits, float(fw.score(Xte, yte)))
        # The paired difference's standard error: how far apart the two may look by chance.
        diff = np.subtract(acc_sk, acc_fw)
        rows.append({"data": name, "m": len(ytr), "classes": len(np.unique(y)),
                     "sklearn_s": t_sk, "torchfw_s": t_fw, "ratio": t_fw / t_sk,
                     "acc_sklearn": float(np.mean(acc_sk)),
                     "acc_torchfw": float(np.mean(acc_fw)), "splits": splits,
                     "acc_loss_se": float(diff.std(ddof=1) / np.sqrt(splits))
                     if splits > 1 else 0.0,
                     "path": "dense" if _is_dense(fw) else "lazy", "other_scheme": other})
        r = rows[-1]
        alt = "" if other is None else (f"  {other['scheme']} {1e3 * other['s']:.1f} ms "
                                        f"({other['ratio']:.2f}, {100 * other['acc']:.1f})")
        print(f"{name:34s} m={r['m']:6d}  sklearn {1e3 * t_sk:9.1f} ms  torchfw "
              f"{1e3 * t_fw:9.1f} ms  ratio {r['ratio']:6.2f}  acc {100 * r['acc_sklearn']:.1f}"
              f" / {100 * r['acc_torchfw']:.1f}  ({r['path']}){alt}", flush=True)
    return rows


def _is_dense(model) -> bool:
    results = model.result_ if isinstance(model.result_, list) else [model.result_]
    return all(r.info.get("execution") == "dense" for r in results)


_COLD = """
import time; start = time.perf_counter()
{imports}
from sklearn.datasets import make_classification
X, y = make_classification(n_samples={m}, n_features=20, n_informative=10, n_classes={k},
                           n_clusters_per_class=1, random_state=0)
X = (X - X.mean(0)) / X.std(0)
{fit}
"""


def cold_table(repeats: int):
    cases = []
    for m, k in ((500, 2), (2000, 2), (2000, 10)):
        for who, imports, fit in (
                ("torchfw", "import torchfw", "torchfw.SVC().fit(X, y)"),
                ("sklearn", "from sklearn.svm import SVC", "SVC().fit(X, y)")):
            code = _COLD.format(imports=imports, m=m, k=k, fit=fit)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", code], check=True)
                times.append(time.perf_counter() - start)
            cases.append({"case": f"m={m:,}, {k} classes", "who": who,
                          "median_s": statistics.median(times)})
            print(f"cold {cases[-1]['case']:22s} {who:8s} {cases[-1]['median_s']:.2f} s",
                  flush=True)
    for who, code in (("python -c 'import torch'", "import torch"),
                      ("python -c 'import sklearn.svm'", "import sklearn.svm"),
                      ("python -c 'import torch, torchfw'", "import torch, torchfw")):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        cases.append({"case": "import only", "who": who, "median_s": statistics.median(times)})
        print(f"cold {who:34s} {cases[-1]['median_s']:.2f} s", flush=True)
    return cases


def markdown(rows, cold, args) -> str:
    lines = [f"# torchfw SVC() vs scikit-learn SVC() at defaults ({cpu_model()})", "",
             f"`python benchmarks/svm_small.py{' --quick' if args.quick else ''}"
             f"{' --cold' if args.cold else ''}`; warm fits, median of {args.repeats}; "
             f"C=1, gamma='scale', standardized inputs, timed on one 70/30 split; accuracy "
             f"averaged over {args.splits} stratified 70/30 splits. Load average "
             f"{args.load[0]:.1f} at the start, {args.load[1]:.1f} at the end "
             f"({os.cpu_count()} CPUs).", "",
             "| data | m (train) | scikit-learn | torchfw | torchfw / sklearn | accuracy sklearn "
             "| accuracy torchfw | loss ± s.e. | path | other scheme: time, ratio, accuracy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o = r.get("other_scheme")
        alt = "" if o is None else (f"{o['scheme']}: {1e3 * o['s']:.1f} ms, {o['ratio']:.2f}, "
                                    f"{100 * o['acc']:.1f}")
        lines.append(f"| {r['data']} | {r['m']:,} | {1e3 * r['sklearn_s']:.1f} ms | "
                     f"{1e3 * r['torchfw_s']:.1f} ms | {r['ratio']:.2f} | "
                     f"{100 * r['acc_sklearn']:.2f} | {100 * r['acc_torchfw']:.2f} | "
                     f"{100 * (r['acc_sklearn'] - r['acc_torchfw']):+.2f} ± "
                     f"{100 * r['acc_loss_se']:.2f} | {r['path']} | {alt} |")
    geo = math.exp(statistics.fmean(math.log(r["ratio"]) for r in rows))
    lines += ["", f"Geometric mean of the time ratio: **{geo:.2f}**; slowest ratio "
              f"{max(r['ratio'] for r in rows):.2f}; largest accuracy loss "
              f"{max(100 * (r['acc_sklearn'] - r['acc_torchfw']) for r in rows):.2f} points "
              f"(mean over the splits)."]
    multi = [r for r in rows if r.get("other_scheme")]
    if multi:
        o_geo = math.exp(statistics.fmean(math.log(r["other_scheme"]["ratio"]) for r in multi))
        d_geo = math.exp(statistics.fmean(math.log(r["ratio"]) for r in multi))
        faster = sum(r["ratio"] <= r["other_scheme"]["ratio"] for r in multi)
        lines += ["", f"Multiclass sets: `SVC()` (`multi_class='auto'`) has geometric-mean ratio "
                  f"{d_geo:.2f} and is at least as fast as the other scheme on {faster} of "
                  f"{len(multi)} sets; the other scheme: {o_geo:.2f}."]
    if cold:
        lines += ["", "## Fresh processes (`python -c`, timed from outside, median of "
                  f"{args.cold_repeats})", "", "| case | who | seconds |", "|---|---|---|"]
        lines += [f"| {c['case']} | {c['who']} | {c['median_s']:.2f} |" for c in cold]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip m = 20,000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="also time fresh processes")
    parser.add_argument("--cold-repeats", type=int, default=3)
    parser.add_argument("--splits", type=int, default=10,
                        help="70/30 splits the accuracy is averaged over (the time: the first)")
    parser.add_argument("--out", default=str(RESULTS / "svm_small.md"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = warm_table(args.quick, args.repeats, args.splits)
    cold = cold_table(args.cold_repeats) if args.cold else None
    args.load = (load_before, os.getloadavg()[0])  # a shared machine inflates every time
    text = markdown(rows, cold, args)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"warm": rows, "cold": cold}, indent=1))


if __name__ == "__main__":
    main()
