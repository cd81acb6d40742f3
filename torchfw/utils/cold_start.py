"""The first fits after an install: PyTorch paths while numba's cache is cold, filled meanwhile.

torchfw's CPU kernels are compiled by numba on first use and cached on disk
(:func:`torchfw.utils.jit.njit`). Right after an install (or upgrade: the cache is keyed to the
package's sources) the cache is empty, and the first ``SVC().fit`` spent 40 s of CPU time
compiling (2-core Xeon; ``benchmarks/results/first_fit_xeon2.md``) for a fit of 0.06 s on the
PyTorch paths -- the paths a CPU without numba takes, the same solvers and stopping rule. So,
while the cache is *cold*, a small fit runs on those paths, and one background process
(:mod:`torchfw.warmup`, also ``python -m torchfw warmup``) compiles the kernels into the cache; it leaves a marker file
next to the cache when done, and from then on fits run compiled (the next process, or this one
from its next fit on).

The choice is per process and only moves towards the compiled kernels: it is made by the
first :func:`begin_fit` (an ``SVC`` fit), which defers the compiled kernels when the cache is
cold and the problem has at most :data:`COLD_MAX_EXAMPLES` examples. A larger problem, a
precomputed or callable kernel or ``dense=True`` (which need the compiled solve) compile as
before and switch the process to compiled kernels for good: on hard problems the PyTorch path
costs about 1.2 ms of CPU per example and support vector (a9a: 3.6 s at 3,000 examples, 8 s at
6,000, against 0.06 s and 0.2 s compiled), so above a few thousand examples compiling once
pays. A process that fits no ``SVC`` keeps the compiled kernels, as before.

A deferred fit is the fit of a CPU without numba: a model of the same tolerance (the same duality
gap rule), not the same bits as the compiled fit -- the two paths take different iterates.
``TORCHFW_COLD_START`` chooses:

* ``background`` (default): defer small fits while the cache is cold and fill it in a
  background process;
* ``fallback``: defer them, start no process (the cache fills as later fits compile);
* ``compile``: compile on first use in this process (numba's own behaviour; the test suite's).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import jit

__all__ = ["COLD_MAX_EXAMPLES", "LOCK_STALE_S", "begin_fit", "compiled_now", "kernels_cached",
           "marker_path", "lock_path", "policy", "start_warmup"]

#: The largest fit (examples) that runs on the PyTorch paths while the cache is cold: 4,000
#: examples of a hard problem cost about 5 s of CPU time there, a tenth of a cold compile.
COLD_MAX_EXAMPLES = 4_000

#: A warm-up lock older than this (seconds) is left from a process that died: taken over.
LOCK_STALE_S = 1800.0

POLICIES = ("background", "fallback", "compile")

# None: no SVC fit decided yet (compiled kernels, as before); False: deferred; True: compiled.
_state: bool | None = None
_lock = threading.Lock()


def policy() -> str:
    """``TORCHFW_COLD_START`` (default ``background``), checked."""
    value = os.environ.get("TORCHFW_COLD_START", "background").strip().lower() or "background"
    if value not in POLICIES:
        raise ValueError(f"TORCHFW_COLD_START={value!r}: expected one of {', '.join(POLICIES)}")
    return value


def _probe():  # pragma: no cover - never called: its dispatcher only locates the cache
    return 0


@functools.cache
def _cache_dir() -> Path | None:
    """The folder numba caches this package's kernels in (its own rule: ``NUMBA_CACHE_DIR``,
    else ``__pycache__`` beside the sources when writable, else the user's cache), or None."""
    if not jit.HAVE_NUMBA:
        return None
    dispatcher = jit.numba.njit(cache=True)(_probe)
    path = getattr(getattr(dispatcher, "_cache", None), "_cache_path", None)
    return None if path is None else Path(path)


@functools.cache
def _key() -> str:
    """What the cached kernels depend on: the package's sources, numba, Python, the machine."""
    text = ":".join([jit.package_digest(), getattr(jit.numba, "__version__", "?"),
                     sys.version, platform.machine()])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def marker_path() -> Path | None:
    """The file that says the warm-up compiled this package version's kernels into the cache."""
    folder = _cache_dir()
    return None if folder is None else folder / f"torchfw-kernels-{_key()}.warm"


def lock_path() -> Path | None:
    """The file a running warm-up holds (its process id and start time)."""
    folder = _cache_dir()
    return None if folder is None else folder / f"torchfw-kernels-{_key()}.lock"


def kernels_cached() -> bool:
    """Whether the warm-up has compiled this package version's kernels into numba's cache."""
    path = marker_path()
    return path is not None and path.exists()


def compiled_now() -> bool:
    """Whether the compiled kernels run now (numba present and no cold-start deferral)."""
    return jit.compiled_kernels()


def _decide(state: bool) -> bool:
    global _state
    _state = state
    jit.set_deferred(not state)
    return state


def begin_fit(n_examples: int, *, needs_compiled: bool = False) -> bool:
    """Decide, at the start of a fit of ``n_examples`` examples, whether it runs compiled.

    Returns :func:`compiled_now` after the decision. ``needs_compiled``: the fit has no PyTorch
    path (``dense=True``, a precomputed or callable kernel), so it compiles.
    """
    if not jit.HAVE_NUMBA:
        return False
    with _lock:
        if _state is True:
            return True
        mode = policy()
        if needs_compiled or mode == "compile" or n_examples > COLD_MAX_EXAMPLES \
                or kernels_cached():
            return _decide(True)
        if _state is None and mode == "background" and not start_warmup():
            # No warm-up can run (an unwritable cache): deferring would last for ever.
            return _decide(True)
        return _decide(False)


def start_warmup() -> bool:
    """Start the background warm-up unless one runs; False when none can (no writable cache).

    The lock file is created exclusively, so that of many processes starting at once (workers
    of a pool) one starts the warm-up; one left by a process that died is taken over after
    :data:`LOCK_STALE_S`.
    """
    lock = lock_path()
    if lock is None:
        return False
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if time.time() - lock.stat().st_mtime < LOCK_STALE_S:
                return True  # another process is warming the cache
            lock.unlink(missing_ok=True)
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False
    try:
        root = str(Path(jit.__file__).resolve().parents[2])  # the folder holding torchfw/
        env = {**os.environ, "TORCHFW_COLD_START": "compile",
               "PYTHONPATH": os.pathsep.join(filter(None, [root,
                                                           os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "torchfw", "warmup", "--lock", str(lock)]
        os.write(fd, f"{os.getpid()} {time.time():.0f}\n".encode())
        if os.name == "posix":
            # Through a shell that puts it in the background and exits at once: the warm-up is
            # nobody's child here (no zombie, no "still running" warning) and outlives us.
            subprocess.run(["/bin/sh", "-c", '"$@" </dev/null >/dev/null 2>&1 &', "sh",
                            *command], env=env, start_new_session=True, check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
        else:  # pragma: no cover - Windows
            _children.append(subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, creationflags=getattr(subprocess, "DETACHED_PROCESS", 0)))
        return True
    except (OSError, subprocess.SubprocessError):
        lock.unlink(missing_ok=True)
        return False
    finally:
        os.close(fd)


_children: list = []  # Windows: the warm-up processes, kept so that they are not reaped early


def _reset_for_tests() -> None:
    """Forget the process's decision (tests only)."""
    global _state
    _state = None
    jit.set_deferred(False)
