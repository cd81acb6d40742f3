"""Every family against its strongest anchor, in one run: one summary table of ratios and goals.

The rows of the anchors table (torchfw's time divided by the anchor's, below 1 when torchfw is
faster), each measured by the benchmark script that owns it -- this script imports their
functions and adds nothing to their measurements:

* **Lasso** (:mod:`lasso_anchors`): leukemia (72 x 7,129) at 0.1 and 0.01 alpha_max, tol 1e-4
  and 1e-6, the 50-alpha path, news20 (15,935 x 62,061 sparse) at 0.1 and 0.01 alpha_max;
  against skglm (goal: at most its time at an equal or tighter certified gap, the row
  "torchfw @skglm gap"), celer and scikit-learn (reported, with the gap each tool ends at).
* **Weston-Watkins** (:func:`ww_vs_liblinear.defaults_mode`): ``WestonWatkinsSVC(C=C)`` against
  LIBLINEAR ``-s 4 -c C`` at both tools' defaults on dna, satimage, letter and sector (goal: at
  most LIBLINEAR's CPU time, test accuracy within 0.5 points of the paper's Table 6).
* **Multiclass SVC** (:func:`svm_multiclass.run_set`): ``SVC()`` against scikit-learn's and
  scikit-learn-intelex's at defaults on the 11 multiclass LIBSVM sets (goal: faster than
  scikit-learn at accuracy within 0.5 points; intelex reported).
* **The torch.optim step** (:func:`sfw_step.bench_case`): ``StochasticFrankWolfe.step()``
  against the reference SFW step written from the paper's update rule, eager and under
  ``torch.compile`` (goal: at most its time), and against SGD and Adam (reported).
* **The first fit** (:func:`first_fit.measure`): fresh processes, an empty numba cache and the
  cache the background warm-up filled (goals: a cold import + first ``SVC().fit`` of 3,000
  examples, and the README's demo, within 5 s of their warm times; a warm import + first fit
  within 0.3 s of CPU time over ``import torch, sklearn``).

``--quick`` runs fewer repeats and a subset of each family (a smoke run of every section, a few
minutes); ``--only`` picks sections. Writes ``benchmarks/results/anchors_<machine>.md`` and
``.json`` (versions, machine, load at start and end, each section's elapsed time, the summary
and every section's detailed rows).

Usage::

    python benchmarks/anchors.py --machine xeon2
    python benchmarks/anchors.py --quick --only lasso first_fit
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model, machine_header, machine_tag  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

SECTIONS = ("lasso", "ww", "multiclass", "sfw", "first_fit")

#: Accuracy (percentage points) a faster fit may lose against the reference.
ACCURACY_SLACK = 0.5

#: Subsets of ``--quick``.
QUICK_MULTICLASS = ["glass", "vowel", "dna", "shuttle"]
QUICK_WW = ["dna", "satimage"]


def summary_row(family: str, row: str, anchor: str, value: float | None, limit: float | None,
                *, unit: str = "x", extra_ok: bool = True, note: str = "") -> dict:
    """One line of the summary table.

    ``value``: torchfw / anchor (``unit="x"``) or a time (``unit="s"``); ``limit``: the goal
    (``value <= limit``), None for a reported row without a goal. ``extra_ok``: the row's other
    condition (accuracy kept, ...) holds. ``met`` is None without a goal or a value.
    """
    met = None
    if limit is not None and value is not None:
        met = bool(value <= limit and extra_ok)
    return {"family": family, "row": row, "anchor": anchor, "value": value, "unit": unit,
            "limit": limit, "met": met, "note": note}


def _fmt_value(r: dict) -> str:
    if r["value"] is None:
        return "-"
    return f"{r['value']:.2f}" + (" s" if r["unit"] == "s" else "")


def _fmt_goal(r: dict) -> str:
    if r["limit"] is None:
        return "reported"
    return f"<= {r['limit']:g}" + (" s" if r["unit"] == "s" else "")


def _fmt_met(r: dict) -> str:
    return {True: "yes", False: "**no**", None: "-"}[r["met"]]


def render(meta: dict, summary: list[dict], command: str) -> str:
    """The markdown report: machine, versions, loads, then the one summary table."""
    lines = ["# torchfw against the strongest anchor of every family", ""]
    lines += machine_header(meta, command)
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items() if v)
    goals = [r for r in summary if r["met"] is not None]
    lines += [f"Versions: {versions}.", "",
              "Load average at the end: "
              + ", ".join(f"{x:.2f}" for x in meta.get("load_average_end", ())) + ". Elapsed: "
              + ", ".join(f"{k} {v:.0f} s" for k, v in meta.get("elapsed_s", {}).items())
              + ".", "",
              "**torchfw / anchor**: torchfw's time divided by the anchor's, measured side by "
              "side in this run (below 1: torchfw is faster); rows in seconds are times. "
              "**goal**: the issue's target for the row (`reported`: measured, no goal). "
              f"Goals met: {sum(r['met'] for r in goals)} of {len(goals)}.", "",
              "| family | row | anchor | torchfw / anchor | goal | met? | note |",
              "|---|---|---|---|---|---|---|"]
    for r in summary:
        lines.append(f"| {r['family']} | {r['row']} | {r['anchor']} | {_fmt_value(r)} | "
                     f"{_fmt_goal(r)} | {_fmt_met(r)} | {r['note']} |")
    return "\n".join(lines) + "\n"


def write(meta: dict, summary: list[dict], details: dict, command: str, stem: Path) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "command": command, "summary": summary, "details": details},
        indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(render(meta, summary, command))
    print(f"wrote {stem}.md and {stem}.json", flush=True)


# -- the sections ---------------------------------------------------------------------------

def lasso_section(quick: bool) -> tuple[list[dict], list[dict]]:
    import lasso_anchors as la

    warnings.filterwarnings("ignore")
    repeats = 1 if quick else 3
    X, y = la.leukemia()
    la.warm_up(X, y)
    rows = []
    for frac, tol in ([(0.1, 1e-6), (0.01, 1e-4)] if quick else
                      [(f, t) for f in (0.1, 0.01) for t in (1e-4, 1e-6)]):
        rows += la.compare("leukemia", X, y, frac, tol, repeats)
    rows += la.path_compare("leukemia", X, y, 50, 1e-6, repeats)
    Xn, yn = la.news20()
    for frac in (0.1, 0.01):
        rows += la.compare("news20", Xn, yn, frac, 1e-4, repeats)
    return rows, lasso_summary(rows)


def lasso_summary(rows: list[dict]) -> list[dict]:
    out = []
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["problem"], str(r["alpha_frac"]), r["tol"]), {})[r["tool"]] = r
    for (problem, frac, tol), tools in groups.items():
        name = f"{problem}, {frac} alpha_max, tol {tol:g}" if "path" not in problem else \
            f"{problem} (50 alphas), tol {tol:g}"
        matched = tools.get("torchfw @skglm gap")
        if "skglm" in tools and matched is not None:
            out.append(summary_row(
                "Lasso", name, "skglm", matched["wall_s"] / tools["skglm"]["wall_s"], 1.0,
                extra_ok=matched["rel_gap"] <= tools["skglm"]["rel_gap"] * (1 + 1e-9),
                note=f"gap {matched['rel_gap']:.1e} vs {tools['skglm']['rel_gap']:.1e}"))
        own = tools.get("torchfw")
        for anchor in ("celer", "scikit-learn"):
            if anchor in tools and own is not None:
                out.append(summary_row(
                    "Lasso", name, anchor, own["wall_s"] / tools[anchor]["wall_s"], None,
                    note=f"gap {own['rel_gap']:.1e} vs {tools[anchor]['rel_gap']:.1e}"))
    return out


def ww_section(quick: bool) -> tuple[list[dict], list[dict]]:
    import ww_vs_liblinear as ww

    # Compile (or load from numba's cache) the kernels first: defaults_mode times every fit.
    X, y = ww.load(ww.SETS["dna"][0])
    ww.WestonWatkinsSVC(C=1.0).fit(X[:300], y[:300])
    rows = ww.defaults_mode(1 if quick else 5, QUICK_WW if quick else None)
    return rows, ww_summary(rows)


def ww_summary(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        if r["config"] != "default":
            continue
        ok = r["accuracy"] >= r["paper_accuracy"] - ACCURACY_SLACK
        out.append(summary_row(
            "Weston-Watkins", f"{r['dataset']} (k={r['k']}), defaults", "LIBLINEAR -s 4",
            r["ratio"], 1.0, extra_ok=ok,
            note=f"CPU s {r['cpu_s']:.3f} vs {r['liblinear_cpu_s']:.3f}; accuracy "
                 f"{r['accuracy']:.2f} % (paper {r['paper_accuracy']:.2f})"))
    return out


def multiclass_section(quick: bool) -> tuple[list[dict], list[dict]]:
    import svm_multiclass as mc

    libs = mc.libraries()
    rows = []
    for name in (QUICK_MULTICLASS if quick else mc.DATASETS):
        row = mc.run_set(libs, name, 1 if quick else 5)
        print(f"multiclass {name}: " + ", ".join(
            f"{k} {row[k]:.2f}" for k in row if k.startswith("ratio_vs_")), flush=True)
        rows.append(row)
    return rows, multiclass_summary(rows)


def multiclass_summary(rows: list[dict]) -> list[dict]:
    names = {"sklearn": "scikit-learn SVC", "sklearnex": "scikit-learn-intelex SVC"}
    out = []
    for r in rows:
        for lib, anchor in names.items():
            if f"ratio_vs_{lib}" not in r:
                continue
            gain = r[f"acc_minus_{lib}"]
            out.append(summary_row(
                "multiclass SVC", f"{r['dataset']} ({r['n_classes']} classes, "
                f"{r['n_train']:,} train)", anchor, r[f"ratio_vs_{lib}"],
                1.0 if lib == "sklearn" else None, extra_ok=gain >= -ACCURACY_SLACK,
                note=f"fit s {r['torchfw']['fit_s']:.3g} vs {r[lib]['fit_s']:.3g}; "
                     f"accuracy {gain:+.2f} points"))
    return out


def sfw_section(quick: bool) -> tuple[list[dict], list[dict]]:
    import sfw_step
    import torch

    args = SimpleNamespace(check=3 if quick else 10, compile=not quick,
                           rounds=5 if quick else 15, inner=10 if quick else 20)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as sfw_step.py: CPU time of the stepping thread
    rows = []
    try:
        device = torch.device("cpu")
        for name, (make, _) in sfw_step.models().items():
            for kind in ("linf", "l2", "ksparse"):
                rows.append(sfw_step.bench_case(name, make, kind, device, args))
    finally:
        torch.set_num_threads(threads)
    return rows, sfw_summary(rows)


def sfw_summary(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        for mode in ("eager", "compiled"):
            if mode not in r:
                continue
            med = r[mode]["median_s"]
            name = f"{r['model']}, {r['set']}, {mode}"
            out.append(summary_row(
                "SFW step", name, "reference SFW step", med["torchfw"] / med["reference"], 1.0,
                note=f"{1e3 * med['torchfw']:.3f} vs {1e3 * med['reference']:.3f} ms; "
                     f"updates agree to {r['max_rel_diff']:.0e}"))
            for anchor in ("SGD", "Adam"):
                out.append(summary_row("SFW step", name, f"torch.optim.{anchor}",
                                       med["torchfw"] / med[anchor], None))
    return out


def first_fit_section(quick: bool) -> tuple[dict, list[dict]]:
    import first_fit

    measured = first_fit.measure(3000, 1, demo=not quick, compiling=False)
    # A round maps each checkout measured to its row (first_fit.measure): here only "this".
    return measured, first_fit_summary([r["this"] for r in measured["rounds"]])


def first_fit_summary(rounds: list[dict]) -> list[dict]:
    import statistics

    def med(get):
        return statistics.median(get(r) for r in rounds)

    cold = med(lambda r: r["fit_cold"]["import_and_fit"])
    warm = med(lambda r: r["fit_warm"]["import_and_fit"])
    warm_cpu = med(lambda r: r["fit_warm"]["import_and_fit_cpu"])
    out = [summary_row("first fit", "empty cache: import + first SVC().fit (3,000), minus warm",
                       "the warm cache", cold - warm, 5.0, unit="s",
                       note=f"{cold:.2f} s vs {warm:.2f} s (wall)"),
           summary_row("first fit", "warm cache: import + first SVC().fit, CPU over "
                       "import torch, sklearn", "import torch, sklearn", warm_cpu, 0.3, unit="s",
                       note=f"wall {warm:.2f} s")]
    if rounds and "demo_cold" in rounds[0]:
        dc = med(lambda r: r["demo_cold"]["wall"])
        dw = med(lambda r: r["demo_warm"]["wall"])
        out.append(summary_row("first fit", "`python -m torchfw demo`, empty cache minus warm",
                               "the warm cache", dc - dw, 5.0, unit="s",
                               note=f"{dc:.1f} s vs {dw:.1f} s (process wall)"))
    return out


RUNNERS = {"lasso": lasso_section, "ww": ww_section, "multiclass": multiclass_section,
           "sfw": sfw_section, "first_fit": first_fit_section}


def versions() -> dict:
    import torch

    import torchfw

    out = {"python": platform.python_version(), "torch": torch.__version__,
           "torchfw": torchfw.__version__}
    for label, module in (("numpy", "numpy"), ("scipy", "scipy"), ("numba", "numba"),
                          ("scikit-learn", "sklearn"), ("skglm", "skglm"), ("celer", "celer"),
                          ("scikit-learn-intelex", "sklearnex"), ("liblinear", "liblinear")):
        try:
            mod = __import__(module)
            out[label] = getattr(mod, "__version__", None)
        except ImportError:
            out[label] = None
    if out.get("liblinear") is None:
        from importlib import metadata

        try:
            out["liblinear"] = metadata.version("liblinear-official")
        except metadata.PackageNotFoundError:
            pass
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats and sets per family (a smoke run, minutes)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--machine", default=None,
                        help="name in the results files (default: the CPU's, e.g. xeon)")
    parser.add_argument("--out", default=None, help="results path without suffix")
    args = parser.parse_args(argv)
    command = "python benchmarks/anchors.py " + " ".join(sys.argv[1:] if argv is None else argv)
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg()), "versions": versions(),
            "quick": args.quick, "elapsed_s": {}, "load_average_sections": {}}
    summary: list[dict] = []
    details: dict = {}
    stem = Path(args.out) if args.out else RESULTS / f"anchors_{args.machine or machine_tag()}"
    for section in SECTIONS:
        if section not in args.only:
            continue
        start = time.perf_counter()
        print(f"== {section}", flush=True)
        details[section], rows = RUNNERS[section](args.quick)
        summary += rows
        meta["elapsed_s"][section] = time.perf_counter() - start
        meta["load_average_sections"][section] = list(os.getloadavg())
        # Written after every section: a long run that stops keeps what it measured.
        meta["load_average_end"] = list(os.getloadavg())
        write(meta, summary, details, command.strip(), stem)
    print(render(meta, summary, command.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
