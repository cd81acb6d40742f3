"""Assemble ``docs/benchmarks.md`` from the result tables in ``benchmarks/results/``.

Every benchmark script writes a Markdown table (``<name>.md``) next to its JSON results, with the
machine, the library versions and the command that produced it. This script only stitches those
files together under section headings, so the page never holds a number that a script did not
print; rerun a benchmark, then this script, to refresh it.

Usage::

    python benchmarks/collect.py [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: (section title, what it measures, result files in order): one current result per workload
#: and machine. Files that do not exist are listed as missing rather than skipped silently.
SECTIONS = [
    ("Every family against its strongest anchor, in one run",
     "Lasso against skglm, celer and scikit-learn; Weston-Watkins against LIBLINEAR; "
     "multiclass `SVC` against scikit-learn and scikit-learn-intelex; the torch.optim step "
     "against a reference SFW step; the first fit after install: each row's goal and whether "
     "it holds (`benchmarks/anchors.py`, which calls the scripts of the sections below; "
     "`--quick` runs fewer repeats and sets).",
     ["anchors_xeon2.md", "anchors_quick_xeon2.md"]),
    ("Core Frank-Wolfe variants",
     "Iterations and time to a duality gap of 1e-6 on quadratics over the simplex "
     "(`benchmarks/core_variants.py`).",
     ["core_variants.md"]),
    ("Kernel SVMs against LIBSVM",
     "torchfw `SVC` with every solver against scikit-learn's `SVC` (LIBSVM) on a9a and w8a, side "
     "by side in one run (`benchmarks/svm_vs_libsvm.py`), and the speed-up against the number "
     "of training examples on subsets of a9a (`benchmarks/svm_scaling.py`). The CPU tables come "
     "from a 2-core AMD EPYC, the GPU table from an H100 (its scikit-learn row is the EPYC's).",
     ["svm_a9a_cpu.md", "svm_w8a_cpu.md", "svm_scaling.md", "svm_a9a_h100.md"]),
    ("Small and medium SVMs against scikit-learn",
     "torchfw `SVC()` against scikit-learn `SVC()` at the defaults of both, warm, in one "
     "process, and in fresh processes (`benchmarks/svm_small.py`). The defaults: scikit-learn "
     "C=1; torchfw C=2, which is LIBLINEAR's squared-hinge C=1 in the seed papers' C (the SVC "
     "guide, \"What C means\"). torchfw takes its compiled whole-solve path: several problems "
     "share the whole matrix where it fits `cache_size` (see the SVC guide, \"Small "
     "problems\"); one binary problem of 1,000 examples or more, and any matrix over "
     "`cache_size`, reads a compiled cache of rows. scikit-learn trains multiclass one-vs-one; "
     "torchfw's `multi_class='auto'` trains one-vs-one for three classes, from 450 training "
     "examples for up to six classes and from 1,500 for more, one-vs-rest otherwise (the scheme table, "
     "`benchmarks/svc_scheme_crossover.py`, measures it), and the last column of the first "
     "table fits the same set with the other scheme, in the same interleaved rounds (a fit right "
     "after scikit-learn's runs ~15% slower than one after torchfw's, so the column favours the "
     "other scheme slightly). Fits are interleaved and repeated to 0.25 s per estimator (9 "
     "rounds at every size: on this machine a fit whose memory is fresh can take up to twice "
     "the median). Accuracy is the mean over random 70/30 splits, with the standard error of "
     "the paired difference: on one split of iris a single test example is 2.2 points. The rows "
     "table (`benchmarks/svc_rows_crossover.py`) times one binary problem with the whole matrix "
     "and with the cache. In a fresh process torchfw pays `import torch`, numba's import, and "
     "before its first compiled call numba's one-time start-up (its registries and SciPy's "
     "BLAS/LAPACK bindings); the fresh-process table (`--cold-only`) splits this into the "
     "import and the first fit, against budgets of 0.3 s for each. The last table "
     "(`--c-sweep`) gives the accuracy on the small sets against `C`, by scheme and against "
     "`tol`, over 100 splits. All on a 2-core Intel Xeon.",
     ["svm_small_xeon.md", "svc_scheme_crossover.md", "svc_rows_crossover.md",
      "svm_small_cold_xeon.md", "svm_small_c.md", "svm_small_ab_xeon.md",
      "svc_small_fit_cost_xeon2.md"]),
    ("Multiclass SVMs against scikit-learn",
     "torchfw `SVC()` against scikit-learn's `SVC()` and scikit-learn-intelex's at the defaults "
     "of all, on the 11 multiclass LIBSVM sets, quiet and with one core kept busy by another "
     "job (`benchmarks/svm_multiclass.py`), and one-vs-one on many classes of 2 examples: fit "
     "and predict time and memory (`benchmarks/svc_many_classes.py`).",
     ["svm_multiclass_xeon2.md", "svm_multiclass_busy_xeon2.md", "svc_many_classes_xeon2.md",
      "svc_thread_rule_xeon2.md"]),
    ("Convergence where model searches go: large C, polynomial kernels, raw features",
     "LIBSVM's default grid (`tools/grid.py`'s C and gamma, 5-fold CV) with torchfw and LIBSVM "
     "side by side, the single fits that used to crawl (`benchmarks/svm_grid.py`), polynomial "
     "kernels of degree 2-5 on raw and scaled features (`benchmarks/svm_poly.py`), and the "
     "corrective step's face factor (`benchmarks/face_factor.py`) and the step on every storage "
     "(`benchmarks/face_storages.py`).",
     ["svm_grid_table_xeon2.md", "svm_grid_xeon2.md", "svm_grid_xeon2_a9a.md",
      "svm_grid_xeon2_a9a_full.md", "svm_grid_xeon2_svmguide1_scaled.md",
      "svm_grid_slow_points_xeon2.md", "svm_grid_xeon2_raw_neighbours.md",
      "svm_grid_hinge_full_xeon2.md",
      "svm_grid_hinge_table_xeon2.md", "svm_grid_hinge_table_main_xeon2.md",
      "svm_grid_hinge_points_xeon2.md", "svm_grid_hinge_points_main_xeon2.md",
      "svm_grid_hinge_a9a_points_xeon2.md", "svm_grid_hinge_a9a_points_main_xeon2.md",
      "svm_grid_stall_xeon2.md", "svm_grid_stall_table_xeon2.md",
      "svm_poly_xeon2.md", "svm_poly_pivot_xeon2.md", "svm_poly_powint_xeon2.md", "face_factor_xeon2.md",
      "face_storages_xeon2.md"]),
    ("The first fit after install",
     "A fresh process on an empty numba cache (as right after `pip install`) against a warm "
     "one: import, the first `SVC().fit` and the demo, in wall and CPU time "
     "(`benchmarks/first_fit.py`).",
     ["first_fit_xeon2.md", "first_fit_base_xeon2.md", "demo_fits_xeon2.md"]),
    ("Probabilities: calibration against scikit-learn",
     "`SVC(probability=True)` (Platt sigmoids on 5-fold out-of-fold decision values, as "
     "LIBSVM's `-b 1`) against scikit-learn's `SVC(probability=True)` with the same `C` and "
     "`gamma`: test log-loss, Brier score and accuracy on a9a and digits, in one run "
     "(`benchmarks/svc_probability.py`). The target: log-loss within 5% of scikit-learn's.",
     ["svc_probability.md"]),
    ("The command line end to end",
     "`python -m torchfw train` then `predict` on a 3,000-line LIBSVM file, each in a fresh "
     "process timed from outside, against the same with LIBSVM's own Python bindings "
     "(`benchmarks/cli_vs_libsvm.py`). A fresh torchfw process pays `import torch` (about 1.1 s "
     "on this Intel Xeon) and numba's start-up before its fit, and `import torch` again to "
     "predict; LIBSVM's bindings load a small C library, so on a file this small they finish "
     "first.",
     ["cli_vs_libsvm_xeon.md"]),
    ("Kernel columns: storage and cache",
     "The CPU column pass with features stored in one byte against four, and the cache hit "
     "rates of the column requests of real fits replayed through frequency-based admission "
     "and through LRU (`benchmarks/svm_columns.py`).",
     ["svm_columns_a9a.md"]),
    ("Memory",
     "Peak resident memory of an `SVC` fit against the number of examples "
     "(`benchmarks/svm_memory.py`): linear, the kernel matrix is never formed.",
     ["svm_memory.md"]),
    ("SVC at scale: the sampled storage",
     "Seed 002's randomized Frank-Wolfe (`SVC` above 200,000 examples or with `sample_size`) "
     "on generated problems of 100,000 to 4,000,000 examples, and the crossover with the exact "
     "engine (`benchmarks/svm_large.py`; `--report` renders this table from the stored JSON "
     "files). Seed 002's Table 4 on ijcnn1, w8a and a9a is in the reproduction report.",
     ["svm_large.md"]),
    ("One-vs-rest: batched against sequential",
     "The k one-vs-rest problems as one batched solve against k sequential fits "
     "(`benchmarks/ovr_batched.py`).",
     ["ovr_letter_cpu.md"]),
    ("GPU hot loop",
     "Per-iteration time of the simplex solvers on a lazy RBF kernel against the "
     "memory-bandwidth floor, the time to read `X` once (`benchmarks/gpu_loop.py`). "
     "`benchmarks/results/gpu_check_h100.md` has the CUDA test run on the same kind of "
     "machine and `gpu_profile_h100.txt` the kernels launched per iteration.",
     ["gpu_loop_h100.md"]),
    ("Distributed training",
     "Data-parallel `SVC` over `torch.distributed` with 1 and 2 gloo ranks, and the measured "
     "communication volume per iteration (`benchmarks/distributed.py`).",
     ["distributed.md"]),
    ("Lasso against scikit-learn",
     "Time to a duality gap of 1e-6 and a regularization path against scikit-learn's `Lasso` "
     "(`benchmarks/lasso_vs_sklearn.py`).",
     ["lasso.md"]),
    ("Lasso against skglm, celer and scikit-learn",
     "Time to equal certified duality gaps on leukemia, its 50-penalty path and news20, every "
     "tool's gap computed the same way (`benchmarks/lasso_anchors.py`).",
     ["lasso_anchors_xeon2.md"]),
    ("Weston-Watkins SVMs against LIBLINEAR",
     "Both tools at their defaults, side by side, and accuracy against time over the "
     "tolerance; fit time against LIBLINEAR's Crammer-Singer solver at the paper's tolerance, "
     "Walrus against the iterative subproblem solver, and safe screening against no shrinking "
     "and heuristic shrinking (the default) (`benchmarks/ww_vs_liblinear.py`, "
     "`benchmarks/ww_screening.py`, `benchmarks/ww_walrus_batched.py`).",
     ["ww_vs_liblinear_defaults_xeon2.md", "ww_defaults_epyc2.md",
      "ww_defaults_epyc2_tol_study.md", "ww.md", "ww_unscaled.md",
      "ww_screening.md", "ww_batched.md"]),
    ("The torch.optim step",
     "One `StochasticFrankWolfe.step()` against a plain reference SFW step written in the "
     "benchmark from Pokutta, Spiegel & Zimmer's update rule, eager and compiled "
     "(`benchmarks/sfw_step.py`).",
     ["sfw_step_xeon2.md"]),
    ("No slow-down against the engine's base",
     "Fresh processes of the current tree and of a base commit, interleaved, on SVC a9a and "
     "w8a, the Lasso path and Weston-Watkins: time ratios, iterations and the largest "
     "coefficient difference (`benchmarks/ab_main.py`); SVC's small sets of `svm_small.py` "
     "(`benchmarks/ab_svm_small.py`).",
     ["ab_main_xeon2.md", "ab_main_svc_xeon2.md", "ab_svm_small_xeon2.md", "ab_main_svc_vs_383f533_xeon2.md"]),
    ("Matrix completion over a nuclear-norm ball",
     "Frank-Wolfe and BPCG with the warm-started Lanczos LMO against projected gradient with a "
     "full SVD per step, time to the same held-out RMSE (`benchmarks/nuclear.py`).",
     ["nuclear.md"]),
    ("Reading LIBSVM files",
     "`torchfw.datasets.load_svmlight` against scikit-learn's reader "
     "(`benchmarks/svmlight_loader.py`).",
     ["svmlight_loader.md"]),
]


def demote(markdown: str, top: int = 3) -> str:
    """Renumber an included file's headings to consecutive levels from ``top`` down.

    The page owns levels 1 and 2; a result file may skip levels (``#`` then ``###``), which
    Sphinx rejects, so its distinct levels are mapped in order onto ``top``, ``top + 1``, ...
    """
    levels = sorted({len(m.group(1)) for m in re.finditer(r"^(#+) ", markdown, flags=re.M)})
    rank = {level: min(6, top + i) for i, level in enumerate(levels)}
    return re.sub(r"^(#+) ", lambda m: "#" * rank[len(m.group(1))] + " ", markdown, flags=re.M)


def build() -> str:
    parts = ["# Benchmarks", "",
             "Every table below is a result file written by a script in `benchmarks/` (kept in "
             "`benchmarks/results/`, with its raw values in JSON where the script keeps them), "
             "copied here by "
             "`python benchmarks/collect.py`; each names its machine and the command that "
             "produced it. The machines: a 2-core Intel Xeon (the CI class), a 2-core AMD EPYC, "
             "both shared with other jobs, and an NVIDIA H100 (torch 2.11; the CPU tables use "
             "torch 2.13). Timings on shared machines are noisy: compare the ratios measured "
             "side by side in one run, not numbers across tables or machines.", ""]
    for title, what, files in SECTIONS:
        parts += [f"## {title}", "", what, ""]
        for name in files:
            path = RESULTS / name
            if path.exists():
                parts += [demote(path.read_text().strip()), ""]
            else:
                parts += [f"*Not measured yet: `benchmarks/results/{name}` is missing.*", ""]
    return "\n".join(parts).rstrip() + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = p.parse_args(argv)
    Path(args.out).write_text(build())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
