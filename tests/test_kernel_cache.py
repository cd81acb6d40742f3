"""Cached kernels load lightly (torchfw.utils.kernel_cache) and run the same machine code.

A light load reads a kernel's defined names from its ELF symbol table instead of parsing its
bitcode, and builds the environments of numba's own helpers without importing their modules.
These tests check the names against the bitcode's, that a fresh process loads from the cache
without those imports or that parse, that a later compilation can still link a lightly loaded
kernel in, and that a fit loaded lightly is the fit loaded by numba's own path, bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from torchfw.utils import jit, kernel_cache

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="needs numba")

ELF_HOST = sys.platform.startswith("linux")


def _object_and_bitcode(kernel, *args):
    kernel(*args)
    (cres,) = kernel.overloads.values()
    name, kind, (object_code, bitcode) = cres.library.serialize_using_object_code()
    assert kind == "object"
    return cres, object_code, bitcode


@pytest.mark.skipif(not ELF_HOST, reason="ELF objects on Linux only")
def test_elf_symbols_are_the_exported_names_of_the_bitcode():
    import llvmlite.binding as ll
    import numba

    @numba.njit
    def total(x):
        out = np.zeros(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = x[i] * 2.0
        return out.sum()

    cres, object_code, bitcode = _object_and_bitcode(total, np.arange(4.0))
    symbols = kernel_cache.elf_defined_symbols(object_code)
    module = ll.parse_bitcode(bitcode)
    defined = {gv.name for group in (module.functions, module.global_variables)
               for gv in group if not gv.is_declaration}
    exported = {gv.name for group in (module.functions, module.global_variables)
                for gv in group if not gv.is_declaration
                and gv.linkage not in (ll.Linkage.internal, ll.Linkage.private)}
    assert symbols is not None and symbols <= defined
    # Every name the dispatcher asks for when it loads the kernel.
    assert {cres.fndesc.llvm_func_name, cres.fndesc.llvm_cpython_wrapper_name} <= symbols
    # Internal functions and private constants are the names left to the bitcode.
    assert exported - symbols == set()


@pytest.mark.parametrize("data", [b"", b"MZ\x90\x00" * 16, b"\x7fELF\x01\x01" + bytes(58),
                                  b"\x7fELF\x02\x01" + bytes(10)])
def test_anything_but_a_whole_elf64_object_reads_as_none(data):
    assert kernel_cache.elf_defined_symbols(data) is None


KERNELS = """
import numpy as np
from torchfw.utils.jit import njit

def _weights(n, value):
    # np.empty, np.zeros and np.dot: environments of numba.np.arrayobj and numba.np.linalg.
    a = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            a[i, j] = value * (i + 1) + j
    b = np.zeros(n)
    b[0] = 1.0
    return np.dot(a, b + 0.5)

weights = njit(_weights)
"""

LOADER = """
import json, sys
sys.path.insert(0, {folder!r})
from torchfw.utils import kernel_cache
if {numba_path}:
    kernel_cache._LIGHT = ()  # numba's own load
from kernels import weights
out = weights(4, 2.5)
from numba.core.registry import cpu_target
engine = cpu_target.target_context.codegen()._engine
deferred = len(getattr(engine, "_deferred", []))
modules = sorted(m for m in ("numba.np.arrayobj", "numba.np.linalg") if m in sys.modules)
# A compilation that calls the loaded kernel links its bitcode in.
import numba
linked = numba.njit(lambda n: weights(n, 1.0).sum())(3)
print(json.dumps({{"out": out.tolist(), "hits": sum(weights.stats.cache_hits.values()),
                  "misses": sum(weights.stats.cache_misses.values()), "modules": modules,
                  "deferred": deferred, "linked": linked,
                  "expected_linked": float(weights.py_func(3, 1.0).sum())}}))
"""


def test_a_fresh_process_loads_lightly_and_links_later(tmp_path):
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run(numba_path=False):
        (tmp_path / "load.py").write_text(LOADER.format(folder=str(tmp_path),
                                                        numba_path=numba_path))
        out = subprocess.run([sys.executable, str(tmp_path / "load.py")], capture_output=True,
                             text=True, timeout=600, cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    compiled = run()
    assert compiled["misses"] == 1
    light = run()
    assert light["hits"] == 1 and light["misses"] == 0
    assert light["out"] == compiled["out"]
    assert light["linked"] == light["expected_linked"]
    if ELF_HOST:
        # Neither numba's array module nor its linear algebra imported, the bitcode unparsed
        # until the compilation that links the kernel.
        assert light["modules"] == []
        assert light["deferred"] == 1
    numba_own = run(numba_path=True)
    assert numba_own["hits"] == 1 and numba_own["out"] == light["out"]
    assert numba_own["modules"] == ["numba.np.arrayobj", "numba.np.linalg"]
    assert numba_own["deferred"] == 0


FIT = """
import hashlib, json, sys
import numpy as np
from torchfw.utils import kernel_cache
if sys.argv[1] == "numba":
    kernel_cache._LIGHT = ()  # numba's own load
from numba.core.dispatcher import Dispatcher
import torchfw
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 5)).astype(np.float32)
y = (X[:, 0] * X[:, 1] + 0.2 * rng.normal(size=300) > 0).astype(int)
model = torchfw.SVC(gamma=1.0, C=3.0).fit(X, y)
h = hashlib.sha1()
for a in (model.dual_coef_, model.intercept_, model.decision_function(X)):
    h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
hits = misses = 0
for name, module in list(sys.modules.items()):
    if name.startswith("torchfw") and module is not None:
        for value in vars(module).values():
            if isinstance(value, Dispatcher):
                hits += sum(value.stats.cache_hits.values())
                misses += sum(value.stats.cache_misses.values())
print(json.dumps({"digest": h.hexdigest(), "hits": hits, "misses": misses,
                  "execution": model.result_.info.get("execution"),
                  "arrayobj": "numba.np.arrayobj" in sys.modules}))
"""


def test_a_first_fit_loaded_lightly_is_numbas_load_bit_for_bit():
    def run(how):
        out = subprocess.run([sys.executable, "-c", FIT, how], capture_output=True, text=True,
                             timeout=900)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    run("numba")  # compiles what the cache lacks (after an edit of the package) and writes it
    light, numba_own = run("light"), run("numba")
    assert light["execution"] == numba_own["execution"] == "dense"
    assert light["hits"] > 0 and light["misses"] == 0 == numba_own["misses"]
    assert light["digest"] == numba_own["digest"]
    if ELF_HOST:
        assert not light["arrayobj"] and numba_own["arrayobj"]
