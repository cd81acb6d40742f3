"""Right after an install: small fits run on the PyTorch paths while numba's cache is cold.

:mod:`torchfw.utils.cold_start` defers the compiled kernels of a small ``SVC`` fit until a
background process has compiled them into the cache; these tests check that a deferred fit
compiles nothing (every run-time choice of a compiled kernel honours the deferral), that the
decision only moves towards compiling, and the warm-up's lock and marker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from torchfw import warmup
from torchfw.utils import cold_start, jit

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="needs numba")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process state with no decision yet, a cold cache and the lock in ``tmp_path``."""
    cold_start._reset_for_tests()
    monkeypatch.setattr(cold_start, "kernels_cached", lambda: False)
    monkeypatch.setattr(cold_start, "lock_path", lambda: tmp_path / "k.lock")
    monkeypatch.setattr(cold_start, "marker_path", lambda: tmp_path / "torchfw-kernels-new.warm")
    yield tmp_path
    cold_start._reset_for_tests()


def test_a_cold_small_fit_compiles_nothing(tmp_path):
    # A child with an empty cache: a binary fit on the compiled path's solver, one with the
    # face correction, three-class fits (one-vs-one, one-vs-rest), probabilities with a
    # streaming solver, sparse count features and their predictions: not one compilation.
    code = """
import json
from numba.core import event
compiled = []

class Listener(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)

event.register("numba:compile", Listener())
import numpy as np
from torchfw import SVC
from torchfw.utils import cold_start
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4))
y = (X[:, 0] * X[:, 1] + 0.2 * rng.normal(size=300) > 0).astype(int)
y3 = np.arange(300) % 3
scores = [SVC().fit(X, y).score(X, y), SVC(solver="swap", dense=False).fit(X, y).score(X, y),
          SVC().fit(X, y3).score(X, y3), SVC(multi_class="ovr").fit(X, y3).score(X, y3),
          SVC(probability=True, solver="sfw", max_iter=300).fit(X, y).score(X, y)]
import scipy.sparse as sp
Xs = sp.csr_matrix((rng.random((300, 20)) < 0.2).astype(float))
ys = (Xs[:, :3].sum(axis=1).A1 > 0.5).astype(int)
scores.append(SVC().fit(Xs, ys).score(Xs, ys))
print(json.dumps({"compiled": compiled, "scores": scores, "state": cold_start._state}))
"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "TORCHFW_COLD_START": "fallback"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, env=env, check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["compiled"] == [], result["compiled"]
    assert result["state"] is False
    assert result["scores"][0] > 0.85 and result["scores"][1] > 0.85
    assert result["scores"][-1] > 0.85


def test_small_fits_defer_large_and_compiled_only_fits_compile(fresh, monkeypatch):
    monkeypatch.setenv("TORCHFW_COLD_START", "fallback")
    assert cold_start.begin_fit(100) is False
    assert not jit.compiled_kernels()
    assert cold_start.begin_fit(100, needs_compiled=True) is True  # dense=True, precomputed
    assert jit.compiled_kernels()
    assert cold_start.begin_fit(100) is True  # once compiled, the process stays compiled
    cold_start._reset_for_tests()
    assert cold_start.begin_fit(cold_start.COLD_MAX_EXAMPLES + 1) is True
    cold_start._reset_for_tests()
    monkeypatch.setenv("TORCHFW_COLD_START", "compile")
    assert cold_start.begin_fit(100) is True


def test_the_marker_switches_a_deferring_process_to_compiled(fresh, monkeypatch):
    monkeypatch.setenv("TORCHFW_COLD_START", "fallback")
    assert cold_start.begin_fit(100) is False
    monkeypatch.setattr(cold_start, "kernels_cached", lambda: True)
    assert cold_start.begin_fit(100) is True


def test_one_warmup_starts_and_a_stale_lock_is_taken_over(fresh, monkeypatch):
    monkeypatch.setenv("TORCHFW_COLD_START", "background")
    calls = []
    monkeypatch.setattr(cold_start.subprocess, "run", lambda args, **kw: calls.append(args))
    assert cold_start.begin_fit(100) is False
    assert cold_start.begin_fit(100) is False  # deferring: no second start in this process
    assert cold_start.start_warmup() is True  # another process: the lock is held
    assert len(calls) == 1
    assert calls[0][-5:] == ["-m", "torchfw", "warmup", "--lock", str(fresh / "k.lock")]
    old = time.time() - 2 * cold_start.LOCK_STALE_S
    os.utime(fresh / "k.lock", (old, old))
    assert cold_start.start_warmup() is True
    assert len(calls) == 2


def test_no_writable_cache_means_compiling(fresh, monkeypatch):
    # Deferring with no warm-up possible would last for ever: compile as before.
    monkeypatch.setenv("TORCHFW_COLD_START", "background")
    monkeypatch.setattr(cold_start, "lock_path", lambda: fresh / "missing" / "file" / "k.lock")
    monkeypatch.setattr(cold_start.os, "open", _refuse)
    assert cold_start.begin_fit(100) is True


def _refuse(*args, **kwargs):
    raise PermissionError("read-only")


def test_unknown_policy_is_an_error(fresh, monkeypatch):
    monkeypatch.setenv("TORCHFW_COLD_START", "later")
    with pytest.raises(ValueError, match="TORCHFW_COLD_START='later'"):
        cold_start.begin_fit(100)


def test_warmup_writes_the_marker_and_releases_the_lock(fresh, monkeypatch):
    ran = []
    monkeypatch.setattr(warmup, "workloads", lambda: ran.append(True))
    (fresh / "k.lock").write_text("1 0\n")
    (fresh / "torchfw-kernels-old.warm").write_text("")
    monkeypatch.setattr(warmup.os, "nice", lambda n: 0)
    assert warmup.main(["--lock", str(fresh / "k.lock")]) == 0
    assert ran == [True]
    assert (fresh / "torchfw-kernels-new.warm").exists()
    assert not (fresh / "torchfw-kernels-old.warm").exists()
    assert not (fresh / "k.lock").exists()


def test_a_failed_warmup_keeps_its_lock(fresh, monkeypatch):
    # Else every new process would start another warm-up that fails the same way.
    def fail():
        raise RuntimeError("broken")

    monkeypatch.setattr(warmup, "workloads", fail)
    monkeypatch.setattr(warmup.os, "nice", lambda n: 0)
    (fresh / "k.lock").write_text("1 0\n")
    with pytest.raises(RuntimeError, match="broken"):
        warmup.main(["--lock", str(fresh / "k.lock")])
    assert (fresh / "k.lock").exists()
    assert not (fresh / "torchfw-kernels-new.warm").exists()


def _inner_py(x):
    return x + 1


_inner = jit.njit(_inner_py)


def _outer_py(x):
    return _inner(x) * 2


_outer = jit.njit(_outer_py)


def test_interpreted_kernels_call_no_compiled_callee():
    run = jit.interpreted(_outer)
    assert run(3) == 8
    assert _inner.signatures == [] and _outer.signatures == []  # nothing compiled
    assert jit.interpreted(_outer) is run
    assert jit.interpreted(_inner_py) is _inner_py  # not a kernel: itself


def test_interpreted_forms_of_the_face_kernels_agree_with_their_loops():
    """While the cold start defers the compiled kernels, a face's matrix-vector product and
    dot products run as NumPy products (njit's ``interpreted_form``), not as interpreted loops
    (seconds per conjugate step on a face of a few hundred atoms). They must give the loops'
    values: the symmetric product of the lower triangle only (the upper one holds garbage),
    and the first ``n`` entries of the dot products."""
    np = pytest.importorskip("numpy")
    from torchfw.optimizers import _face, _face_cg

    rng = np.random.default_rng(0)
    k, size = 37, 41
    G = rng.standard_normal((size, size))
    G[np.triu_indices(size, 1)] = 1e6  # never read: only the lower triangle holds G
    d = rng.standard_normal(size)
    got, want = np.full(size, 7.0), np.full(size, 7.0)
    matvec = jit.interpreted(_face_cg._matvec)
    assert matvec is _face_cg._matvec_arrays
    matvec(G, k, d, got)
    _face_cg._matvec_py(G, k, d, want)
    np.testing.assert_allclose(got[:k], want[:k], rtol=1e-12, atol=1e-12)
    assert np.all(got[k:] == 7.0)  # entries past k untouched
    L = rng.standard_normal((9, 30))
    assert jit.interpreted(_face._dot4)(L[1], L[2], 23) == pytest.approx(
        _face._dot4_py(L[1], L[2], 23), rel=1e-12)
    got4, want4 = np.zeros(5), np.zeros(5)
    jit.interpreted(_face._dots4)(L, 3, 8, 27, got4)
    _face._dots4_py(L, 3, 8, 27, want4)
    np.testing.assert_allclose(got4, want4, rtol=1e-12)
