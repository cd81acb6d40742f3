"""Arrows point down: no core module of torchfw imports an application module.

The core (constraint sets, line searches, objectives, kernels and Gram operators, the scalar
kinds, results, the optimizers and their engines, the Walrus block solver, the column cache, the
compiled kernel columns) is what the applications (SVMs, the Lasso, multiclass, the torch.optim
optimizers, the heads, the distributed package, the CLI, the data sets) are built from. A core
module that imports an application makes the layers a cycle: it is found here by a static scan
of every ``import`` statement in the core files (function-level imports included), with relative
imports resolved against the importing module's package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "torchfw"

#: Core modules, as dotted names under ``torchfw`` (a package stands for all its modules).
CORE = ("oracles", "linesearch", "objectives", "kernels", "gram", "_scalars", "result",
        "optimizers", "walrus", "_column_cache", "_kernel_cpu", "_numba", "_kernel_formulas",
        "solvers")
#: Application modules (a package stands for all its modules).
APPLICATIONS = ("svm", "lasso", "equivalence", "multiclass", "optim", "heads", "distributed",
                "cli", "datasets", "svm_problem", "lasso_problem", "calibration", "libsvm_model",
                "io", "_svm_probability", "_ww_problem", "_ww_sweep", "_csr", "_sfw_update",
                "_sfw_checks", "_estimator")
#: The SVC estimator's own modules (``_svc_dense``, ``_svc_start``, ...) are applications too.
APPLICATIONS += tuple(p.stem for p in ROOT.glob("_svc_*.py"))

#: "No module of torchfw over ~600 lines" (issue 15): a room with more is a room with several
#: concerns.
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_under(name: str, prefixes) -> bool:
    return any(name == f"torchfw.{p}" or name.startswith(f"torchfw.{p}.") for p in prefixes)


def imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of the torchfw modules (or names in them) that ``source`` imports."""
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            # ``from . import svm`` / ``from torchfw import svm`` import a module by name.
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return {n for n in names if n == "torchfw" or n.startswith("torchfw.")}


def violations(files) -> list[tuple[str, str]]:
    """``(core module, application module it imports)`` for every offending import."""
    found = []
    for path, source in files:
        module = _module_name(path)
        if not _is_under(module, CORE):
            continue
        for name in sorted(imported_modules(source, module, path.name == "__init__.py")):
            if _is_under(name, APPLICATIONS):
                found.append((module, name))
    return found


def _core_files():
    return [(p, p.read_text()) for p in sorted(ROOT.rglob("*.py"))]


def test_core_modules_exist():
    # A renamed core module must not silently drop out of the scan.
    for name in CORE:
        assert (ROOT / f"{name}.py").exists() or (ROOT / name / "__init__.py").exists(), name


def test_no_core_module_imports_an_application():
    assert violations(_core_files()) == []


@pytest.mark.parametrize("statement,module,expected", [
    ("from ..svm import SVC", "torchfw.optimizers.base", "torchfw.svm"),
    ("from .. import lasso", "torchfw.optimizers.base", "torchfw.lasso"),
    ("import torchfw.distributed.run", "torchfw.svm.kernels", "torchfw.distributed.run"),
    ("from torchfw import cli", "torchfw.sets.oracles", "torchfw.cli"),
    ("def f():\n    from .heads import Head\n", "torchfw.lasso.gram", "torchfw.heads"),
    ("from .multiclass import X", "torchfw.ww.subproblem", "torchfw.ww.estimator"),
])
def test_a_wrong_import_is_detected(statement, module, expected):
    path = ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")
    found = violations([(path, statement)])
    assert found and found[0][0] == module and found[0][1].startswith(expected), found


@pytest.mark.parametrize("statement,module", [
    ("from ..objectives import Quadratic", "torchfw.optimizers.base"),
    ("from . import _kernels", "torchfw.optimizers._engine"),
    ("import numpy as np", "torchfw.svm.kernels"),
    # An application may import the core, and another application.
    ("from .optimizers import FrankWolfe\nfrom .svm import SVC", "torchfw.lasso"),
])
def test_downward_imports_pass(statement, module):
    path = ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")
    assert violations([(path, statement)]) == []


def test_applications_exist():
    for name in APPLICATIONS:
        assert (ROOT / f"{name}.py").exists() or (ROOT / name / "__init__.py").exists(), name


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_one_room(path):
    # Each module opens with the docstring that states its one concern, and stays small enough
    # to read as one.
    source = path.read_text()
    tree = ast.parse(source)
    if path.name != "__init__.py" or source.strip():
        assert ast.get_docstring(tree), f"{path.name} does not open with its concern"
    n_lines = len(source.splitlines())
    assert n_lines <= MAX_LINES, f"{path.name}: {n_lines} lines"
