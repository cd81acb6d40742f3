"""numba's disk cache is keyed to the whole package, so an edited callee is never served stale.

A kernel compiled with ``cache=True`` embeds its callees' code, while numba checks only the
caller's own file: without :func:`torchfw.utils.jit._stamp_with_package`, editing a compiled
helper in another module leaves every cached caller running the old helper.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from torchfw.utils import jit

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="needs numba")

CALLER = """
import sys
sys.path.insert(0, {folder!r})
import numba
from pathlib import Path
from torchfw.utils.jit import _stamp_with_package, sources_digest
from callee import value

def outer():
    return value() + 0

kernel = numba.njit(cache=True)(outer)
if {stamp}:
    _stamp_with_package(kernel, sources_digest(Path({folder!r})))
print(kernel())
"""


def _write_callee(folder, value):
    path = folder / "callee.py"
    path.write_text(textwrap.dedent(f"""
        import numba

        @numba.njit(cache=True)
        def value():
            return {value}
        """))
    # A distinct modification time even on file systems with coarse clocks.
    stamp = time.time() + value
    os.utime(path, (stamp, stamp))


def _run(folder):
    out = subprocess.run([sys.executable, str(folder / "caller.py")], capture_output=True,
                         text=True, timeout=300, cwd=folder)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


@pytest.mark.parametrize("stamp", [True, False])
def test_an_edited_callee_recompiles_its_callers(tmp_path, stamp):
    _write_callee(tmp_path, 1)
    # The caller's file is written once and never changes.
    (tmp_path / "caller.py").write_text(CALLER.format(folder=str(tmp_path), stamp=stamp))
    assert _run(tmp_path) == 1
    assert _run(tmp_path) == 1  # from the cache
    _write_callee(tmp_path, 2)
    # numba alone serves the stale callee: this is what the stamp prevents.
    assert _run(tmp_path) == (2 if stamp else 1)


def test_digest_follows_every_source_file(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    first = jit.sources_digest(tmp_path)
    assert jit.sources_digest(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("y = 22\n")
    assert jit.sources_digest(tmp_path) != first


def test_package_kernels_carry_the_package_digest():
    kernel = jit.njit(lambda x: x + 1)
    stamp = kernel._cache._cache_file._source_stamp
    assert stamp[1] == jit.package_digest()


LOADER = """
import json, sys
sys.path.insert(0, {folder!r})
import numpy as np
from kernels import fill
out = fill(5, 2.5)
stats = fill.stats
print(json.dumps({{"out": out.tolist(), "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values()),
                  "registries": "numba.np.linalg" in sys.modules}}))
"""


def test_cached_kernels_load_without_refreshing_numba(tmp_path):
    # A kernel that allocates (numba's runtime, NRT) is compiled in a first process, then
    # loaded from the cache in a second: same result, no compilation, and none of the typing
    # and lowering registries a refresh of numba's target context imports (linear algebra
    # among them) -- half of a warm-cache first fit's time.
    (tmp_path / "kernels.py").write_text(textwrap.dedent("""
        import numpy as np
        from torchfw.utils.jit import njit

        def _fill(n, value):
            out = np.empty(n)
            for i in range(n):
                out[i] = value * i
            return out

        fill = njit(_fill)
        """))
    (tmp_path / "load.py").write_text(LOADER.format(folder=str(tmp_path)))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run():
        out = subprocess.run([sys.executable, str(tmp_path / "load.py")], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.split("\n")[-2])

    first = run()
    assert first["misses"] == 1 and first["registries"]  # compiling refreshes the target
    second = run()
    assert second["out"] == first["out"] == [2.5 * i for i in range(5)]
    assert second["hits"] == 1 and second["misses"] == 0
    assert not second["registries"]


def test_package_kernels_load_through_the_light_cache():
    kernel = jit.njit(lambda x: x + 1)
    assert type(kernel._cache) is jit._LoadingCache
