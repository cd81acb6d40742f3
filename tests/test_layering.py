"""The house's rules, checked on the package's import graph.

torchfw is built in layers, each a set of packages (``docs/design.md``, "where to find what"):

====================  =====================================================================
layer                 packages and modules
====================  =====================================================================
base                  ``utils``, ``exceptions``, ``result``
core                  ``sets``, ``linesearch``, ``objectives``, ``optimizers``, ``solvers``,
                      ``heads``
families              ``svm``, ``ww``, ``lasso``, ``optim`` -- one package per model family
tools                 ``io``, ``datasets``, ``cli``, ``warmup``, ``distributed``, ``__main__``, the
                      package's ``__init__``
====================  =====================================================================

A module may import its own layer and the layers below it, never one above. A family never
imports another family (two families share only what lies below them), so no family reads
another's private names. The graph is computed here by a static scan of every ``import``
statement of every module, function-level imports included, with relative imports resolved
against the importing module's package; an import of a name that is itself a module counts as
an import of that module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "torchfw"

#: Layer of each top-level package or module of torchfw, bottom to top.
LAYERS = {
    "base": ("utils", "exceptions", "result"),
    "core": ("sets", "linesearch", "objectives", "optimizers", "solvers", "heads"),
    "families": ("svm", "ww", "lasso", "optim"),
    "tools": ("io", "datasets", "cli", "warmup", "distributed", "__main__", ""),
}
ORDER = list(LAYERS)
FAMILIES = LAYERS["families"]
#: At most this many modules directly in ``torchfw/`` (``__init__`` and ``__main__`` included).
MAX_TOP_LEVEL = 16


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """The top-level package or module of torchfw that ``module`` belongs to ('' for the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> str | None:
    u = unit(module)
    return next((name for name, units in LAYERS.items() if u in units), None)


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The torchfw modules that ``source`` (the text of ``module``) imports."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from . import svm`` imports the module; ``from .x import f`` imports x.
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t != "torchfw" and not t.startswith("torchfw."):
                continue
            while t not in known and "." in t:  # a name inside a module
                t = t.rpartition(".")[0]
            found.add(t)
    found.discard(module)
    return found


def import_graph(files) -> dict[str, set[str]]:
    """``module -> modules it imports`` over ``files``, an iterable of ``(path, source)``."""
    files = list(files)
    known = {module_name(p) for p, _ in files}
    return {module_name(p): imports_of(s, module_name(p), p.name == "__init__.py", known)
            for p, s in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations(graph: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """``(module, imported module, rule broken)`` for every import against the layers."""
    found = []
    for module, targets in graph.items():
        here = layer(module)
        for target in sorted(targets):
            there = layer(target)
            if here is None or there is None:
                continue  # reported by test_every_module_has_a_layer
            if ORDER.index(there) > ORDER.index(here):
                found.append((module, target, f"{here} imports {there}"))
            elif here == there == "families" and unit(module) != unit(target):
                found.append((module, target, "a family imports another family"))
    return found


def _files():
    return [(p, p.read_text()) for p in sorted(ROOT.rglob("*.py"))]


GRAPH = import_graph(_files())


def test_every_module_has_a_layer():
    assert [m for m in GRAPH if layer(m) is None] == []


def test_arrows_point_down_and_families_stay_apart():
    assert violations(GRAPH) == []


def test_no_import_circle():
    assert cycles(GRAPH) == []


def test_top_level_is_small():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_units_exist():
    # A renamed package must not silently drop out of the rules.
    for units in LAYERS.values():
        for name in units:
            if name:
                assert (ROOT / f"{name}.py").exists() or (ROOT / name / "__init__.py").exists(), name


def _graph_of(statements: dict[str, str]) -> dict[str, set[str]]:
    files = [(ROOT.joinpath(*m.split(".")[1:]).with_suffix(".py"), s)
             for m, s in statements.items()]
    files += [(p, "") for p in sorted(ROOT.rglob("*.py"))
              if module_name(p) not in statements]
    return import_graph(files)


@pytest.mark.parametrize("module,statement,rule", [
    ("torchfw.optimizers.base", "from ..svm import SVC", "core imports families"),
    ("torchfw.optimizers.base", "from .. import lasso", "core imports families"),
    ("torchfw.sets.oracles", "import torchfw.distributed.run", "core imports tools"),
    ("torchfw.utils.data", "def f():\n    from ..heads import KernelSVMHead\n",
     "base imports core"),
    ("torchfw.svm.estimator", "from ..ww._sweep import ww_epoch",
     "a family imports another family"),
    ("torchfw.lasso.problem", "from torchfw.svm import _dense", "a family imports another family"),
    ("torchfw.optim.sfw", "from ..io.svmlight import load_svmlight", "families imports tools"),
])
def test_a_wrong_import_is_detected(module, statement, rule):
    found = violations(_graph_of({module: statement}))
    assert [v for v in found if v[0] == module and v[2] == rule], found


@pytest.mark.parametrize("module,statement", [
    ("torchfw.optimizers.base", "from ..objectives import Quadratic"),
    ("torchfw.optimizers._engine", "from . import _kernels"),
    ("torchfw.svm.kernels", "import numpy as np"),
    ("torchfw.lasso.problem", "from ..optimizers import FrankWolfe\nfrom .gram import GramOperator"),
    ("torchfw.io.libsvm_model", "from ..svm.estimator import SVC"),
])
def test_downward_imports_pass(module, statement):
    found = violations(_graph_of({module: statement}))
    assert [v for v in found if v[0] == module] == []


def test_a_circle_is_found():
    graph = {"torchfw.a": {"torchfw.b"}, "torchfw.b": {"torchfw.c"}, "torchfw.c": {"torchfw.a"},
             "torchfw.d": {"torchfw.a"}}
    assert cycles(graph) == [["torchfw.a", "torchfw.b", "torchfw.c"]]
    assert cycles({"torchfw.a": {"torchfw.b"}, "torchfw.b": set()}) == []


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_states_its_concern(path):
    # Each module opens with the docstring that states its one concern.
    source = path.read_text()
    tree = ast.parse(source)
    if path.name != "__init__.py" or source.strip():
        assert ast.get_docstring(tree), f"{path.name} does not open with its concern"
