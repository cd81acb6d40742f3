"""Small and medium SVMs: torchfw ``SVC()`` against scikit-learn ``SVC()`` at their defaults.

Both at their defaults (scikit-learn C=1, torchfw C=2: the same regularization of their
losses, see the SVC guide), gamma="scale", on standardized inputs (scaler fitted on the
training part of a 70/30 stratified split), in the same process, warm (one untimed fit first),
median fit time of ``--repeats`` rounds of fits, each round fitting the estimators in turn
(the other multiclass scheme too, below; more rounds for fits
of a few milliseconds: :data:`MIN_TIMED`); test accuracy averaged over ``--splits`` such
splits (default 10, the protocol behind ``SVC``'s ``tol="auto"``: on one split of iris a single
test example is 2.2 points). Data: iris, wine, breast_cancer, digits (scikit-learn's loaders)
and ``make_classification`` sets, binary and 10 classes, of m = 500, 2,000, 8,000 and 20,000
examples (20,000 skipped with ``--quick``). Prints a table with the
time ratio per row and its geometric mean, and writes it to
``benchmarks/results/svm_small_<machine>.md`` and ``.json`` (``<machine>``: ``xeon``, ``epyc``...).

Multiclass sets are also fitted with the one-vs-one/one-vs-rest scheme ``SVC()`` does not use
by default (``multi_class``), so that the default's choice can be read off the table.

``--cold`` adds the fresh processes (``--cold-only``: only them, into
``benchmarks/results/svm_small_cold_<machine>.md``) for three sizes, each figure the median of
``--cold-repeats`` processes (default 5): inside each process, the split of the
cold-start budgets (``import torch``; ``import torchfw`` and ``from torchfw import SVC`` over
it; the first fit; a second, warm fit of the same data), and from outside the wall time of
``python -c "import ...; fit"``, torchfw against scikit-learn, with the bare imports alongside.
It prints "import over torch" and "first fit over warm" against their 0.3 s budgets.

``--c-sweep`` measures only the accuracy of torchfw ``SVC(C=...)`` for several ``C`` against
scikit-learn's ``SVC()`` on the small sets (iris to digits, generated m = 500), over
``--splits`` splits (into
``benchmarks/results/svm_small_c.md``): torchfw's ``C`` is the seed papers', which is LIBLINEAR's
squared-hinge ``C`` times 2 (the SVC guide, "What C means").

Usage::

    python benchmarks/svm_small.py --quick --cold
    python benchmarks/svm_small.py --cold-only
    python benchmarks/svm_small.py --c-sweep --splits 30
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
from _machine import cpu_model, machine_tag  # noqa: E402

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


#: Each estimator's fits of a row take at least about this many seconds in all: a fit of a
#: millisecond is repeated until then (at most :data:`MAX_REPEATS` times), so that a burst of
#: load on a shared machine moves the median of a small set no more than that of a large one.
MIN_TIMED = 0.25
MAX_REPEATS = 200


def timed_fits(makers, Xtr, ytr, repeats):
    """Median fit time and last model of each estimator in ``makers``, fitted in turn.

    Warm first (compiled kernels loaded, caches filled); then ``repeats`` rounds -- more for
    fast fits, up to :data:`MIN_TIMED` seconds per estimator -- each fitting every estimator
    once, interleaved, so that both sides of a ratio see the same machine.
    """
    first = []
    for make in makers:
        start = time.perf_counter()
        make().fit(Xtr, ytr)
        first.append(time.perf_counter() - start)
    rounds = max(repeats, min(MAX_REPEATS, math.ceil(MIN_TIMED / max(min(first), 1e-6))))
    times = [[] for _ in makers]
    models = [None] * len(makers)
    for _ in range(rounds):
        for k, make in enumerate(makers):
            model = make()
            start = time.perf_counter()
            model.fit(Xtr, ytr)
            times[k].append(time.perf_counter() - start)
            models[k] = model
    return [(statistics.median(t), model) for t, model in zip(times, models, strict=True)]


def warm_table(quick: bool, repeats: int, splits: int):
    from sklearn.svm import SVC as SkSVC

    import torchfw

    rows = []
    for name, X, y in datasets(quick):
        Xtr, Xte, ytr, yte = split(X, y)
        reps = repeats  # every size: a fit of fresh memory can take twice the median
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            makers = [SkSVC, torchfw.SVC]
            other = None
            if len(np.unique(y)) > 2:  # the scheme SVC() does not use, for the default's choice
                scheme = "ovo" if torchfw.SVC().fit(Xtr, ytr).multi_class_ == "ovr" else "ovr"
                makers.append(lambda s=scheme: torchfw.SVC(multi_class=s))
            # All in one interleaved loop: a fit timed alone runs on warmer caches than one
            # interleaved with scikit-learn's, which would favour the other scheme.
            (t_sk, sk), (t_fw, fw), *rest = timed_fits(makers, Xtr, ytr, reps)
            if rest:
                (t_other, fit_other), = rest
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
    from torchfw.result import problem_results

    results = problem_results(model.result_)
    return all(r.info.get("execution") == "dense" for r in results)


#: The fresh-process problems: (m, classes) of ``make_classification`` as in the warm table.
COLD_SIZES = ((500, 2), (2000, 2), (2000, 10))

#: The cold-start budgets, in seconds: ``from torchfw import SVC`` over ``import torch``, and the
#: first fit of a fresh process over a second (warm) fit of the same data in that process.
IMPORT_BUDGET = FIRST_FIT_BUDGET = 0.3

# The split, timed inside a fresh process. The data comes from a NumPy file (NumPy is loaded
# by torch): generating it with scikit-learn here would import SciPy's linear algebra, which
# numba's first compiled call imports, and so hide part of the first fit's cost.
_LOAD = "import numpy as np\ndata = np.load({path!r})\nX, y = data['X'], data['y']"
_FIT = "SVC().fit(X, y)"


def _steps_script(steps, path: str, tail: str = "") -> str:
    """A child script that runs ``steps`` (``(name, statement)``, ``name`` None for an untimed
    one) in order and prints the seconds of each named step as one JSON line."""
    lines = ["import json, sys, time", "_t = {}", "_s = time.perf_counter()"]
    for name, statement in steps:
        lines.append(statement.format(path=path))
        if name is not None:
            lines += [f"_t[{name!r}] = time.perf_counter() - _s"]
        lines.append("_s = time.perf_counter()")
    lines += [tail, "print(json.dumps(_t))"]
    return "\n".join(lines)


def _split_script(path: str) -> str:
    """The split: import torch, torchfw, SVC, then the first and a warm fit (and whether the
    fits imported torch's compiler stack)."""
    compiler = ('_t["compiler"] = sorted(m for m in sys.modules '
                'if m.startswith(("torch._dynamo", "torch._inductor")))')
    return _steps_script([("torch", "import torch"), ("torchfw", "import torchfw"),
                          ("svc", "from torchfw import SVC"), (None, _LOAD),
                          ("first", _FIT), ("warm", _FIT)], path, compiler)


# The same process with numba's one-time start-up taken apart: numba's import, torchfw's modules
# over it, SciPy's linear algebra and the rest of numba's CPU-target initialization (both of
# which the first compiled call otherwise pays), then the fits (what remains: cache loads).
def _parts_script(path: str) -> str:
    """The parts of numba's start-up, timed apart in one fresh process (see above)."""
    registries = ("from numba.core.registry import cpu_target\n"
                  "cpu_target.target_context.refresh()")
    return _steps_script([(None, "import torch"), ("numba", "import numba"),
                          ("torchfw", "from torchfw import SVC"),
                          ("scipy.linalg", "import scipy.linalg"),
                          ("registries", registries), (None, _LOAD),
                          ("first fit", _FIT), ("warm fit", _FIT)], path)


# The totals, timed from outside: what a user's `python -c "import ...; fit"` costs.
_TOTAL = """
import numpy as np
{imports}
data = np.load({path!r})
{fit}
"""


def _child_env(bytecode: bool) -> dict:
    """The environment of the timed processes: with bytecode caches unless told otherwise.

    An installed package has its ``.pyc`` files (pip compiles them); this machine's
    environment may set ``PYTHONDONTWRITEBYTECODE``, and a process that compiles every module
    of torchfw from source measures that instead of the package.
    """
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _timed(code: str, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - start


def _split(code: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_table(repeats: int, bytecode: bool = True):
    """Fresh processes: the split timed inside each and the totals timed from outside.

    For each size of :data:`COLD_SIZES`, ``repeats`` rounds of three processes (the split, a
    torchfw total, a scikit-learn total, interleaved so that a change of the machine's load
    falls on both), after one untimed round that writes the bytecode and numba caches. Each
    figure is the median over the rounds.
    """
    import tempfile

    from sklearn.datasets import make_classification

    env = _child_env(bytecode)
    split_rows, totals, parts = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for m, k in COLD_SIZES:
            X, y = make_classification(n_samples=m, n_features=20, n_informative=10,
                                       n_classes=k, n_clusters_per_class=1, random_state=0)
            path = str(Path(tmp) / f"data_{m}_{k}.npz")
            np.savez(path, X=(X - X.mean(0)) / X.std(0), y=y)
            codes = {"split": _split_script(path), "parts": _parts_script(path),
                     "torchfw": _TOTAL.format(imports="import torch, torchfw", path=path,
                                              fit='torchfw.SVC().fit(data["X"], data["y"])'),
                     "sklearn": _TOTAL.format(imports="from sklearn.svm import SVC", path=path,
                                              fit='SVC().fit(data["X"], data["y"])')}
            _split(codes["split"], env)  # untimed: caches written
            runs, outside = [], {"torchfw": [], "sklearn": []}
            for _ in range(repeats):
                runs.append(_split(codes["split"], env))
                for who in outside:
                    outside[who].append(_timed(codes[who], env))
            if not parts:  # the first size only: numba's start-up does not depend on it
                found = [_split(codes["parts"], env) for _ in range(repeats)]
                parts = {"case": f"m={m:,}, {k} classes",
                         **{key: statistics.median(r[key] for r in found) for key in found[0]}}
                print("cold parts", ", ".join(f"{key} {value:.3f}" for key, value in
                                              parts.items() if key != "case"), flush=True)
            med = {key: statistics.median(r[key] for r in runs)
                   for key in ("torch", "torchfw", "svc", "first", "warm")}
            med["import_over_torch"] = statistics.median(r["torchfw"] + r["svc"] for r in runs)
            med["first_over_warm"] = statistics.median(r["first"] - r["warm"] for r in runs)
            med["compiler"] = sorted({name for r in runs for name in r["compiler"]})
            case = f"m={m:,}, {k} classes"
            split_rows.append({"case": case, **med})
            totals.append({"case": case, "torchfw_s": statistics.median(outside["torchfw"]),
                           "sklearn_s": statistics.median(outside["sklearn"])})
            print(f"cold {case:22s} import torch {med['torch']:.3f}  torchfw "
                  f"{med['torchfw']:.3f}  SVC {med['svc']:.3f}  first fit {med['first']:.3f}  "
                  f"warm {med['warm']:.4f}  |  import over torch {med['import_over_torch']:.3f}"
                  f" s ({_verdict(med['import_over_torch'], IMPORT_BUDGET)})  first fit over "
                  f"warm {med['first_over_warm']:.3f} s "
                  f"({_verdict(med['first_over_warm'], FIRST_FIT_BUDGET)})  |  outside: "
                  f"torchfw {totals[-1]['torchfw_s']:.2f} s, sklearn "
                  f"{totals[-1]['sklearn_s']:.2f} s", flush=True)
    for who, code in (("python -c 'pass'", "pass"),
                      ("python -c 'import torch'", "import torch"),
                      ("python -c 'import torch, torchfw'", "import torch, torchfw"),
                      ("python -c 'import torch; from torchfw import SVC'",
                       "import torch; from torchfw import SVC"),
                      ("python -c 'import sklearn.svm'", "import sklearn.svm")):
        totals.append({"case": "import only", "who": who,
                       "median_s": statistics.median(_timed(code, env)
                                                     for _ in range(repeats))})
        print(f"cold {who:50s} {totals[-1]['median_s']:.2f} s", flush=True)
    return {"split": split_rows, "totals": totals, "parts": parts, "bytecode": bytecode}


def _verdict(seconds: float, budget: float) -> str:
    return f"<= {budget:.1f} s: {'yes' if seconds <= budget else 'NO'}"


def cold_markdown(cold, args) -> list[str]:
    """The fresh-process tables: the split inside the processes, the totals from outside."""
    split, totals = cold["split"], cold["totals"]
    worst_import = max(r["import_over_torch"] for r in split)
    worst_first = max(r["first_over_warm"] for r in split)
    compiler = sorted({name for r in split for name in r["compiler"]})
    lines = [f"## Fresh processes (median of {args.cold_repeats} processes per figure)", "",
             "Inside each process, `time.perf_counter()` around each step: `import torch`; "
             "`import torchfw` after it; `from torchfw import SVC` after that; the first "
             "`SVC().fit(X, y)`; a second fit of the same data (warm). The data is read from "
             "a NumPy file, so that nothing but the fit loads SciPy. Each process "
             + ("reads and writes bytecode caches (`.pyc`), as an installed package has them"
                if cold["bytecode"] else "compiles torchfw's modules from source (no `.pyc`)")
             + "; numba's on-disk cache is warm (an untimed process first).", "",
             "| case | import torch | import torchfw | from torchfw import SVC | first fit "
             "| warm fit | import over torch | first fit over warm |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['torch']:.3f} s | {r['torchfw']:.3f} s | {r['svc']:.3f} s "
              f"| {r['first']:.3f} s | {1e3 * r['warm']:.1f} ms | {r['import_over_torch']:.3f} s"
              f" | {r['first_over_warm']:.3f} s |" for r in split]
    lines += ["", f"Import over torch (`import torchfw` + `from torchfw import SVC`): at most "
              f"**{worst_import:.3f} s** ({_verdict(worst_import, IMPORT_BUDGET)}). First fit "
              f"over warm: at most **{worst_first:.3f} s** "
              f"({_verdict(worst_first, FIRST_FIT_BUDGET)}). Compiler stack "
              f"(`torch._dynamo`, `torch._inductor`) imported by the fits: "
              f"{', '.join(compiler) if compiler else 'no'}.", "",
              f"Where the time goes ({cold['parts']['case']}, the same processes with "
              f"numba's start-up taken apart, medians): over `import torch`, numba's import "
              f"{cold['parts']['numba']:.3f} s and torchfw's modules "
              f"{cold['parts']['torchfw']:.3f} s; then numba's one-time CPU-target "
              f"initialization, which the first compiled call otherwise pays: SciPy's BLAS/LAPACK "
              f"bindings (`import scipy.linalg`) {cold['parts']['scipy.linalg']:.3f} s and "
              f"numba's registries (`cpu_target.target_context.refresh()`) "
              f"{cold['parts']['registries']:.3f} s; after these the first fit costs "
              f"{cold['parts']['first fit']:.3f} s (loading the compiled kernels from numba's "
              f"on-disk cache) against {1e3 * cold['parts']['warm fit']:.1f} ms warm.", "",
              "From outside (`python -c`, wall time of the whole process): torchfw is "
              "`import torch, torchfw` + load + `torchfw.SVC().fit`, scikit-learn is "
              "`from sklearn.svm import SVC` + load + `SVC().fit`.", "",
              "| case | torchfw | scikit-learn | torchfw / sklearn |", "|---|---|---|---|"]
    lines += [f"| {t['case']} | {t['torchfw_s']:.2f} s | {t['sklearn_s']:.2f} s | "
              f"{t['torchfw_s'] / t['sklearn_s']:.2f} |" for t in totals if "who" not in t]
    lines += ["", "| import only | seconds |", "|---|---|"]
    lines += [f"| {t['who']} | {t['median_s']:.2f} |" for t in totals if "who" in t]
    return lines


def _default_c() -> float:
    from torchfw import SVC

    return SVC().C


def markdown(rows, cold, args) -> str:
    if not rows:  # --cold-only
        lines = [f"# torchfw SVC() vs scikit-learn SVC() in fresh processes ({cpu_model()})",
                 "", f"`{args.command}`; load average "
                 f"{args.load[0]:.1f} at the start, {args.load[1]:.1f} at the end "
                 f"({os.cpu_count()} CPUs).", ""]
        return "\n".join(lines + cold_markdown(cold, args)) + "\n"
    lines = [f"# torchfw SVC() vs scikit-learn SVC() at defaults ({cpu_model()})", "",
             f"`{args.command}`; warm fits, median of {args.repeats} "
             f"interleaved rounds (up to {MAX_REPEATS} for fast fits: at least "
             f"{MIN_TIMED:g} s of fits per estimator); "
             f"defaults (scikit-learn C=1, torchfw C={_default_c():g}), gamma='scale', "
             f"standardized inputs, timed on one 70/30 split (the other multiclass scheme in "
             f"the same rounds); accuracy "
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
        lines += [""] + cold_markdown(cold, args)
    return "\n".join(lines) + "\n"


#: The ``C`` values of ``--c-sweep``, and its ``tol`` values (at the default ``C``).
SWEEP_C = (0.5, 1.0, 2.0, 4.0)
SWEEP_TOL = (0.1, 0.2, 0.3)
#: Fits (random starts) per split behind each cell of the ``tol`` table.
TOL_STARTS = 3


def c_sweep(splits: int) -> str:
    """Points of test accuracy below scikit-learn's ``SVC()`` of torchfw ``SVC(C=c)`` for each
    ``c`` of :data:`SWEEP_C` on the small sets (scikit-learn's four and the 500-example
    generated ones; mean and standard error over ``splits`` splits), then of the two
    ``multi_class`` schemes at the default ``C`` on the multiclass ones and of each ``tol`` of
    :data:`SWEEP_TOL` (with its fit time), as Markdown."""
    from sklearn.svm import SVC as SkSVC

    from torchfw import SVC
    from torchfw.svm._plan import SMALL_M, SMALL_TOL

    default_c = SVC().C
    lines = [f"# torchfw SVC(C) accuracy against scikit-learn SVC() ({cpu_model()})", "",
             f"`python benchmarks/svm_small.py --c-sweep --splits {splits}`: points of test "
             f"accuracy below scikit-learn's `SVC()` (C=1), mean ± standard error over {splits} "
             f"stratified 70/30 splits (torchfw's `random_state` the split's seed), standardized "
             f"inputs. torchfw's default is C={default_c:g}.", "",
             "| data | " + " | ".join(f"torchfw C={c:g}" for c in SWEEP_C) + " |",
             "|---|" + "---|" * len(SWEEP_C)]

    def loss(cell):
        return f"{statistics.mean(cell):+.2f} ± {statistics.stdev(cell) / math.sqrt(len(cell)):.2f}"

    times, schemes, tols = [], [], []
    for name, X, y in datasets(quick=True):
        if name.startswith("generated") and not name.endswith("m=500"):
            continue
        multiclass = len(np.unique(y)) > 2
        losses = {c: [] for c in SWEEP_C} | {("tol", t): [] for t in SWEEP_TOL} | \
            ({"ovr": [], "ovo": []} if multiclass else {})
        for seed in range(splits):
            Xtr, Xte, ytr, yte = split(X, y, seed)
            reference = SkSVC().fit(Xtr, ytr).score(Xte, yte)
            for key in losses:
                params = dict(multi_class=key) if key in ("ovr", "ovo") else \
                    dict(tol=key[1]) if isinstance(key, tuple) else dict(C=key)
                # tol: the mean over TOL_STARTS random starts, whose spread a loose tol keeps
                seeds = [TOL_STARTS * seed + r for r in range(TOL_STARTS)] \
                    if isinstance(key, tuple) else [seed]
                score = statistics.mean(SVC(random_state=r, **params).fit(Xtr, ytr)
                                        .score(Xte, yte) for r in seeds)
                losses[key].append(100 * (reference - score))
        lines.append(f"| {name} | " + " | ".join(loss(losses[c]) for c in SWEEP_C) + " |")
        if multiclass:
            scheme = SVC().fit(*split(X, y, 0)[::2]).multi_class_
            schemes.append(f"| {name} | {loss(losses['ovr'])} | {loss(losses['ovo'])} | {scheme} |")
        Xtr, _, ytr, _ = split(X, y, 0)
        fits = timed_fits([lambda c=c: SVC(C=c) for c in SWEEP_C], Xtr, ytr, 9)
        times.append((name, [t / fits[SWEEP_C.index(default_c)][0] for t, _ in fits]))
        tol_fits = timed_fits([lambda t=t: SVC(tol=t) for t in SWEEP_TOL], Xtr, ytr, 15)
        tols.append(f"| {name} | " + " | ".join(
            f"{loss(losses[('tol', t)])} ({1e3 * s:.2f} ms)"
            for t, (s, _) in zip(SWEEP_TOL, tol_fits, strict=True)) + " |")
    lines += ["", f"The multiclass sets at C={default_c:g} by scheme (`multi_class`), the same "
              f"splits and measure; the last column is the scheme `multi_class=\"auto\"` "
              f"takes:", "", "| data | one-vs-rest | one-vs-one | auto |", "|---|---|---|---|",
              *schemes]
    lines += ["", f"`tol` at C={default_c:g}, the same splits and measure (each split's loss "
              f"the mean of {TOL_STARTS} fits from random starts), and the median fit "
              f"time (warm, split 0, interleaved; `tol=\"auto\"` is {SMALL_TOL:g} below "
              f"{SMALL_M:,} examples):", "",
              "| data | " + " | ".join(f"tol={t:g}" for t in SWEEP_TOL) + " |",
              "|---|" + "---|" * len(SWEEP_TOL), *tols]
    lines += ["", f"Fit time against `C={default_c:g}` (warm, split 0, median of interleaved "
              "fits as in the warm table):", "",
              "| data | " + " | ".join(f"C={c:g}" for c in SWEEP_C) + " |",
              "|---|" + "---|" * len(SWEEP_C)]
    lines += [f"| {name} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |"
              for name, ratios in times]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip m = 20,000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="also time fresh processes")
    parser.add_argument("--cold-only", action="store_true",
                        help="only the fresh processes (default --out: "
                             "svm_small_cold_<machine>.md)")
    parser.add_argument("--cold-repeats", type=int, default=5,
                        help="fresh processes per figure (the median is reported)")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE for the fresh processes")
    parser.add_argument("--splits", type=int, default=10,
                        help="70/30 splits the accuracy is averaged over (the time: the first)")
    parser.add_argument("--out", default=None,
                        help="the Markdown report (default "
                             "benchmarks/results/svm_small_<machine>.md)")
    parser.add_argument("--c-sweep", action="store_true",
                        help="only the accuracy against C on the small sets "
                             "(default --out: svm_small_c.md)")
    args = parser.parse_args(argv)
    args.command = " ".join(["python benchmarks/svm_small.py",
                             *(sys.argv[1:] if argv is None else argv)])
    if args.c_sweep:
        if args.splits < 2:
            parser.error("--c-sweep needs --splits of at least 2")
        text = c_sweep(args.splits)
        print(text)
        out = Path(args.out or RESULTS / "svm_small_c.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        return
    if args.cold_repeats < 1:
        parser.error("--cold-repeats must be at least 1")
    name = "svm_small_cold" if args.cold_only else "svm_small"
    out = Path(args.out or RESULTS / f"{name}_{machine_tag()}.md")
    load_before = os.getloadavg()[0]
    rows = [] if args.cold_only else warm_table(args.quick, args.repeats, args.splits)
    cold = cold_table(args.cold_repeats, bytecode=not args.no_bytecode) \
        if args.cold or args.cold_only else None
    args.load = (load_before, os.getloadavg()[0])  # a shared machine inflates every time
    text = markdown(rows, cold, args)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"warm": rows, "cold": cold}, indent=1))


if __name__ == "__main__":
    main()
