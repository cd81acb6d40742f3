"""A fresh process: what ``import torchfw`` loads, lazy submodules, and a CPU fit's imports.

Each test runs a child interpreter, since the parent (pytest) has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_is_light_and_submodules_are_attributes():
    # torch users write torch.optim.X after `import torch`.
    result = _run("""
import json, sys, types
import torch
before = set(sys.modules)
import torchfw
loaded = sorted(set(sys.modules) - before)
names = {}
for sub in ("optim", "datasets", "distributed", "svm", "ww", "lasso", "sets", "heads", "io",
            "linesearch", "objectives", "optimizers", "solvers", "utils"):
    names[sub] = type(getattr(torchfw, sub)).__name__
sfw = torchfw.optim.StochasticFrankWolfe
import torchfw.ww.subproblem  # the module holding walrus: the function keeps its public names
print(json.dumps({"loaded": loaded, "names": names, "sfw": sfw.__name__,
                  "walrus": type(torchfw.walrus).__name__,
                  "ww_walrus": type(torchfw.ww.walrus).__name__,
                  "svc": torchfw.SVC.__module__, "dir": "SVC" in dir(torchfw)}))
""")
    heavy = [m for m in result["loaded"]
             if m.split(".")[0] in ("numba", "scipy", "sklearn", "matplotlib", "llvmlite")]
    assert heavy == []
    assert all(m == "torchfw" or m.startswith("torchfw.") for m in result["loaded"])
    assert set(result["names"].values()) == {"module"}
    assert result["sfw"] == "StochasticFrankWolfe"
    assert result["walrus"] == result["ww_walrus"] == "function"
    assert result["svc"] == "torchfw.svm.estimator"
    assert result["dir"]


def test_lazy_names_are_the_public_names():
    import torchfw

    assert sorted(torchfw.__all__) == sorted(torchfw._LAZY)
    for name in torchfw.__all__:
        assert getattr(torchfw, name) is not None


def test_unknown_attribute_raises():
    import torchfw

    with pytest.raises(AttributeError, match="no_such_thing"):
        torchfw.no_such_thing  # noqa: B018


def test_cpu_fit_never_touches_the_compiler_stack():
    # The first call of a torch.library custom op imports dynamo and friends (seconds in a
    # fresh process): nothing on the CPU path of fit/predict may go through one.
    result = _run("""
import json, sys
import numpy as np
import torch
before = set(sys.modules)
import torchfw
rng = np.random.default_rng(0)
X = rng.normal(size=(120, 5))
for y in ((X[:, 0] > 0).astype(int), np.arange(120) % 3):
    for solver in ("swap", "pairwise", "partan", "fw"):
        for dense in ("auto", False):  # the compiled whole solve and the lazy host path
            model = torchfw.SVC(solver=solver, dense=dense).fit(X, y)
            model.predict(X)
            model.decision_function(X)
# The other CPU paths of fit and predict: weighted, one-vs-one, probabilities (Platt's
# cross-validated fits), the sampled storage, a precomputed kernel.
y3 = np.arange(120) % 3
weighted = torchfw.SVC(class_weight="balanced").fit(X, y3, sample_weight=np.linspace(0.5, 2, 120))
weighted.predict(X)
torchfw.SVC(multi_class="ovo").fit(X, y3).predict(X)
torchfw.SVC(probability=True).fit(X, y3).predict_proba(X)
torchfw.SVC(sample_size=40, max_iter=50).fit(X, y3 == 0).predict(X)
K = X @ X.T
torchfw.SVC(kernel="precomputed").fit(K, y3).predict(K)
from torchfw.optimizers import _selection
new = sorted(set(sys.modules) - before)
print(json.dumps({"new": new, "op": _selection._reduce_op is not None}))
""")
    compiler = [m for m in result["new"] if m.split(".")[0] == "sympy" or any(
        m.startswith(p) for p in ("torch._dynamo", "torch._inductor", "torch._functorch",
                                  "torch._library.custom_ops", "torch.fx.experimental"))]
    assert compiler == []
    assert not result["op"]


def test_compiled_fit_loads_only_its_path():
    # The cold start: `from torchfw import SVC` and a binary fit on the compiled CPU
    # path (with its predict) load neither the compiler stack nor the modules of the paths
    # they do not take, whose imports svm.py defers to where they are used.
    result = _run("""
import json, sys
import numpy as np
import torch
before = set(sys.modules)
from torchfw import SVC
imported = set(sys.modules) - before
rng = np.random.default_rng(0)
X = rng.normal(size=(150, 6))
y = (X[:, 0] + 0.3 * rng.normal(size=150) > 0).astype(int)
model = SVC().fit(X, y)
model.predict(X)
model.decision_function(X)
print(json.dumps({"imported": sorted(imported), "fitted": sorted(set(sys.modules) - before),
                  "execution": model.result_.info.get("execution")}))
""")
    assert result["execution"] == "dense"
    other_paths = ("torchfw.svm._lazy", "torchfw.svm._batched", "torchfw.svm._probability",
                   "torchfw.svm.calibration", "torchfw.heads", "torchfw.distributed",
                   "torchfw.optimizers.batched")
    for stage in ("imported", "fitted"):
        loaded = result[stage]
        assert [m for m in loaded if m.startswith(other_paths)] == [], stage
        assert [m for m in loaded if m.startswith(("torch._dynamo", "torch._inductor"))] == []
        assert [m for m in loaded if m.split(".")[0] in ("sklearn", "sympy")] == [], stage
    # numba's target (and with it SciPy's BLAS bindings) is initialized by the first compiled
    # call, not by the import.
    assert "scipy.linalg" not in result["imported"]


def test_second_process_loads_compiled_kernels_from_cache():
    # Compiled kernels come from numba's on-disk cache in a second process, so a fresh
    # process's first fit pays a cache load, never a compilation (seconds per kernel).
    pytest.importorskip("numba")
    code = """
import json, sys
import numpy as np
from numba.core.dispatcher import Dispatcher
import torchfw
rng = np.random.default_rng(0)
X = rng.normal(size=(150, 6))
for y in ((X[:, 0] > 0).astype(int), np.arange(150) % 3):
    torchfw.SVC().fit(X, y).predict(X)
hits, misses = {}, {}
for name, module in list(sys.modules.items()):
    if name.startswith("torchfw") and module is not None:
        for attr, value in vars(module).items():
            if isinstance(value, Dispatcher):
                hits[f"{name}.{attr}"] = sum(value.stats.cache_hits.values())
                misses[f"{name}.{attr}"] = sum(value.stats.cache_misses.values())
print(json.dumps({"hits": hits, "misses": misses}))
"""
    _run(code)  # compiles what the cache lacks (after an edit of a kernel's source) and writes it
    second = _run(code)
    assert sum(second["hits"].values()) > 0
    assert {name: n for name, n in second["misses"].items() if n} == {}
