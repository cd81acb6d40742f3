"""benchmarks/anchors.py: the summary rows and the table it writes, on made-up measurements.

The run itself takes minutes (every family against its anchors); its summary logic -- which
ratio each row reports, when a goal counts as met -- is what these tests pin down.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def anchors():
    spec = importlib.util.spec_from_file_location("anchors", ROOT / "benchmarks" / "anchors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_goal_is_met_only_at_or_below_its_limit_with_its_condition(anchors):
    row = anchors.summary_row
    assert row("f", "r", "a", 0.8, 1.0)["met"] is True
    assert row("f", "r", "a", 1.0, 1.0)["met"] is True
    assert row("f", "r", "a", 1.2, 1.0)["met"] is False
    assert row("f", "r", "a", 0.8, 1.0, extra_ok=False)["met"] is False
    assert row("f", "r", "a", 0.8, None)["met"] is None  # reported, no goal
    assert row("f", "r", "a", None, 1.0)["met"] is None  # not measured


def _lasso_row(tool, wall, gap, problem="news20", frac=0.1, tol=1e-4):
    return {"problem": problem, "alpha_frac": frac, "tol": tol, "tool": tool, "wall_s": wall,
            "rel_gap": gap}


def test_lasso_is_judged_at_skglms_gap_and_anchors_without_goal_are_reported(anchors):
    rows = [_lasso_row("skglm", 0.20, 3e-8), _lasso_row("celer", 0.50, 1e-5),
            _lasso_row("scikit-learn", 2.0, 9e-5), _lasso_row("torchfw", 0.10, 6e-6),
            _lasso_row("torchfw @skglm gap", 0.15, 5e-12)]
    out = anchors.lasso_summary(rows)
    skglm = [r for r in out if r["anchor"] == "skglm"]
    assert len(skglm) == 1
    assert skglm[0]["value"] == pytest.approx(0.75)  # the matched-gap run, not the faster one
    assert skglm[0]["met"] is True
    celer = next(r for r in out if r["anchor"] == "celer")
    assert celer["value"] == pytest.approx(0.2) and celer["met"] is None
    # A matched run that ends at a looser gap than skglm's does not meet the goal.
    rows[-1] = _lasso_row("torchfw @skglm gap", 0.15, 1e-7)
    assert next(r for r in anchors.lasso_summary(rows) if r["anchor"] == "skglm")["met"] is False


def test_multiclass_goal_needs_the_accuracy_and_intelex_is_reported(anchors):
    row = {"dataset": "glass", "n_classes": 6, "n_train": 160,
           "torchfw": {"fit_s": 0.01}, "sklearn": {"fit_s": 0.02}, "sklearnex": {"fit_s": 0.005},
           "ratio_vs_sklearn": 0.5, "acc_minus_sklearn": -0.7,
           "ratio_vs_sklearnex": 2.0, "acc_minus_sklearnex": 0.0}
    out = anchors.multiclass_summary([row])
    assert [r["met"] for r in out] == [False, None]  # faster, but 0.7 points less accurate
    row["acc_minus_sklearn"] = -0.3
    assert anchors.multiclass_summary([row])[0]["met"] is True


def test_first_fit_rows_and_the_written_table(anchors, tmp_path):
    rounds = [{"fit_cold": {"import_and_fit": 1.5}, "fit_warm": {"import_and_fit": 0.9,
                                                                 "import_and_fit_cpu": 0.34},
               "demo_cold": {"wall": 20.0}, "demo_warm": {"wall": 12.0}}]
    out = anchors.first_fit_summary(rounds)
    assert [r["value"] for r in out] == pytest.approx([0.6, 0.34, 8.0])
    assert [r["met"] for r in out] == [True, False, False]
    meta = {"cpu": "test CPU", "cores": 2, "load_average_start": [1.0, 1.0, 1.0],
            "load_average_end": [2.0, 2.0, 2.0], "versions": {"torch": "2.x"},
            "elapsed_s": {"first_fit": 12.0}}
    anchors.write(meta, out, {"first_fit": rounds}, "python benchmarks/anchors.py",
                  tmp_path / "anchors_test")
    text = (tmp_path / "anchors_test.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("| first fit")]
    assert len(table) == 3
    assert "| 0.34 s | <= 0.3 s | **no** |" in table[1]
    assert "Goals met: 1 of 3" in text
    assert json.loads((tmp_path / "anchors_test.json").read_text())["summary"] == out
