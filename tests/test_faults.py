"""Faults lose nothing: interrupts, full or read-only disks, concurrent writers, endless or
blocking inputs, overflowing kernels, tampered model files (docs/guarantees.md).

Each test provokes the fault against a previous result -- a model file, a fitted estimator --
and asserts that the previous result is still there: the file still loads and predicts as
before, the estimator still predicts as before. Inputs that never end or block must be
answered within seconds (a timer signal fails the test otherwise).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import torchfw.optimizers._rows as rows
import torchfw.svm._dense as dense
import torchfw.utils.atomic as atomic
from torchfw import SVC
from torchfw.cli import main as cli_main
from torchfw.datasets import load_svmlight, load_svmlight_files
from torchfw.io.libsvm_model import read_libsvm_model, write_libsvm_model
from torchfw.result import problem_results

ROOT = Path(__file__).resolve().parents[1]
HAVE_NUMBA = dense.K.HAVE_NUMBA
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled path needs numba")


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def _data(n=150, d=4, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    score = X[:, 0] + 0.5 * X[:, 1] ** 2
    if classes == 2:
        y = np.where(score > 0.3, 1, -1)
    else:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


@pytest.fixture(scope="module")
def models():
    """Two different fitted models (A is saved first, B is the one whose save fails)."""
    X, y = _data()
    a = SVC(C=1.0, random_state=0).fit(X, y)
    b = SVC(C=50.0, gamma=2.0, random_state=0).fit(X, y)
    assert not np.array_equal(a.decision_function(X), b.decision_function(X))
    return X, y, a, b


def _same_model(path, reference, X, loader=SVC.load):
    loaded = loader(path)
    np.testing.assert_allclose(loaded.decision_function(X), reference.decision_function(X),
                               rtol=1e-6, atol=1e-6)
    assert np.array_equal(loaded.predict(X), reference.predict(X))


def _no_temporaries(directory):
    left = [p.name for p in Path(directory).iterdir() if p.name.endswith(".tmp")]
    assert not left, f"temporary files left behind: {left}"


@contextlib.contextmanager
def _within(seconds):
    """Fail (TimeoutError) if the block runs longer than ``seconds`` (SIGALRM)."""
    def expired(signum, frame):
        raise TimeoutError(f"did not answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _interrupt_after(seconds):
    """Raise KeyboardInterrupt in the main thread ``seconds`` from now (a timer signal, as a
    Ctrl-C would); yields a dict that receives the time the signal landed."""
    landed = {}

    def handler(signum, frame):
        landed["at"] = time.perf_counter()
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield landed
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _fail_writes(monkeypatch, exc_factory, after_bytes=0):
    """Make the atomic writer's writes fail once ``after_bytes`` have been written."""
    real = os.write
    written = {"n": 0}

    def write(fd, data):
        if written["n"] >= after_bytes:
            raise exc_factory()
        n = real(fd, bytes(data)[:max(1, after_bytes - written["n"])])
        written["n"] += n
        return n

    monkeypatch.setattr(atomic.os, "write", write)


def _enospc():
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _write_svmlight(path, X, y):
    Path(path).write_text("".join(f"{label:.17g} " + " ".join(
        f"{j + 1}:{v:.17g}" for j, v in enumerate(row)) + "\n" for label, row in zip(y, X,
                                                                                    strict=True)))
    return path


WRITERS = ["SVC.save", "write_libsvm_model"]


def _write(name, model, path):
    if name == "SVC.save":
        model.save(path)
    else:
        write_libsvm_model(model, path)


def _load(name):
    return SVC.load if name == "SVC.save" else read_libsvm_model


# ----------------------------------------------------------------------------------------------
# 1. atomic writes
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("writer", WRITERS)
def test_full_disk_keeps_the_previous_file_and_names_the_cause(models, tmp_path, monkeypatch,
                                                                writer):
    X, _, a, b = models
    path = tmp_path / "model"
    _write(writer, a, path)
    _fail_writes(monkeypatch, _enospc, after_bytes=100)
    with pytest.raises(OSError, match="No space left on device") as info:
        _write(writer, b, path)
    assert info.value.errno == errno.ENOSPC and "inline_container" not in str(info.value)
    monkeypatch.undo()
    _same_model(path, a, X, _load(writer))
    _no_temporaries(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("writer", WRITERS)
def test_dev_full_is_a_clear_error(models, writer):
    _, _, a, _ = models
    with pytest.raises(OSError, match="cannot write '/dev/full': No space left on device"):
        _write(writer, a, "/dev/full")


@pytest.mark.parametrize("writer", WRITERS)
def test_read_only_directory_keeps_the_previous_file(models, tmp_path, monkeypatch, writer):
    X, _, a, b = models
    directory = tmp_path / "ro"
    directory.mkdir()
    path = directory / "model"
    _write(writer, a, path)
    if os.geteuid() != 0:
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    else:  # root writes anywhere: the error the kernel would give, raised where it would be
        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        monkeypatch.setattr(atomic, "_open_new", refuse)
    try:
        with pytest.raises(PermissionError, match="Permission denied"):
            _write(writer, b, path)
    finally:
        directory.chmod(0o755)
        monkeypatch.undo()
    _same_model(path, a, X, _load(writer))
    _no_temporaries(directory)


@pytest.mark.parametrize("writer", WRITERS)
def test_failed_rename_removes_the_temporary_file(models, tmp_path, monkeypatch, writer):
    X, _, a, b = models
    path = tmp_path / "model"
    _write(writer, a, path)

    def refuse(*args):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OSError, match="Read-only file system"):
        _write(writer, b, path)
    monkeypatch.undo()
    _same_model(path, a, X, _load(writer))
    _no_temporaries(tmp_path)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_directory_as_the_target_is_refused(models, tmp_path, writer):
    _, _, a, _ = models
    with pytest.raises(IsADirectoryError, match="Is a directory"):
        _write(writer, a, tmp_path)


@pytest.mark.parametrize("writer", WRITERS)
def test_interrupt_during_the_write_keeps_the_previous_file(models, tmp_path, monkeypatch,
                                                            writer):
    X, _, a, b = models
    path = tmp_path / "model"
    _write(writer, a, path)
    _fail_writes(monkeypatch, KeyboardInterrupt, after_bytes=64)
    with pytest.raises(KeyboardInterrupt):
        _write(writer, b, path)
    monkeypatch.undo()
    _same_model(path, a, X, _load(writer))
    _no_temporaries(tmp_path)


def test_timer_interrupts_during_saves_of_a_large_model(tmp_path):
    """Ctrl-C at many moments of saving a ~10 MB model over an older one: every time, the file
    holds one complete model (the old or the new), never a truncated one."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 300)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1)
    old = SVC(kernel="linear", C=1.0, random_state=0).fit(X, y)
    # A model of 8,000 support vectors of 300 features (~10 MB): the state of a fitted model
    # with its support vectors and coefficients replaced (fitting one would take minutes).
    state = old.state_dict()
    n_sv = 8000
    state.update(support_vectors=torch.from_numpy(rng.normal(size=(n_sv, 300)).astype(
                     np.float32)),
                 dual_coef=torch.from_numpy(rng.normal(size=(1, n_sv))),
                 support=torch.arange(n_sv), n_support=torch.tensor([n_sv // 2, n_sv // 2]))
    new = SVC.from_state_dict(state)
    path = tmp_path / "model.pt"
    old.save(path)
    interrupted = 0
    for delay in np.linspace(0.0005, 0.05, 12):
        try:
            with _interrupt_after(float(delay)):
                new.save(path)
                time.sleep(0.2)  # the timer fires here if the save was faster
        except KeyboardInterrupt:
            interrupted += 1
        loaded = SVC.load(path)  # a complete model, old or new
        assert len(loaded.support_) in (len(old.support_), len(new.support_))
        old.save(path)
    assert interrupted == 12
    _no_temporaries(tmp_path)


def test_concurrent_saves_leave_one_complete_file(models, tmp_path):
    X, _, a, b = models
    path = tmp_path / "model.pt"
    errors = []

    def save(model):
        try:
            for _ in range(10):
                model.save(path)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(m,)) for m in (a, b, a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    loaded = SVC.load(path)
    scores = loaded.decision_function(X)
    assert any(np.allclose(scores, m.decision_function(X), atol=1e-6) for m in (a, b))
    _no_temporaries(tmp_path)


def test_saved_file_gets_the_usual_permissions(models, tmp_path):
    _, _, a, _ = models
    path = tmp_path / "model.pt"
    a.save(path)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0o600
    path.chmod(0o640)
    a.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # an existing file keeps its mode


# ----------------------------------------------------------------------------------------------
# 2. DistributedSVC save loads in a plain SVC
# ----------------------------------------------------------------------------------------------

def test_distributed_svc_scale_gamma_saves_a_loadable_model(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("torch.distributed unavailable or already initialized")
    from torchfw.distributed import DistributedSVC

    X, y = _data()
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        model = DistributedSVC(C=1.0, random_state=0).fit(torch.from_numpy(X).float(), y)
        model.save(tmp_path / "d.pt")
    finally:
        dist.destroy_process_group()
    assert type(model.gamma_) is float
    loaded = SVC.load(tmp_path / "d.pt")  # weights-only: a NumPy float64 would be refused
    assert np.array_equal(loaded.predict(X), model.predict(X))


# ----------------------------------------------------------------------------------------------
# 3 + 4. interrupted fits leave the estimator as it was; Ctrl-C stops a compiled solve at once
# ----------------------------------------------------------------------------------------------

def _long_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 8)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=1500) > 0, 7, 3)
    return X, y


@pytest.mark.parametrize("path", [
    pytest.param(True, marks=needs_numba, id="compiled"),
    pytest.param(False, id="lazy"),
])
def test_interrupted_refit_leaves_the_fitted_estimator_as_it_was(path):
    X, y = _long_problem()
    model = SVC(dense=path, random_state=0).fit(X[:200], np.where(y[:200] == 7, 1, 0))
    before = (model.classes_.copy(), model.gamma_, model.support_.copy(),
              model.decision_function(X[:100]).copy())
    # Frank-Wolfe at tol=1e-9 runs for minutes on this problem: the interrupt lands mid-solve.
    model.set_params(solver="fw", tol=1e-9, max_iter=10**9, C=100.0, gamma=0.5)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), _interrupt_after(0.5) as landed:
        model.fit(X, y)
    latency = time.perf_counter() - landed["at"]
    assert latency < 1.5, f"the interrupt took {latency:.2f} s to stop the fit"
    assert time.perf_counter() - start < 5
    assert np.array_equal(model.classes_, before[0]) and model.gamma_ == before[1]
    assert np.array_equal(model.support_, before[2])
    assert np.array_equal(model.decision_function(X[:100]), before[3])


def test_failed_refit_leaves_the_fitted_estimator_as_it_was(monkeypatch):
    X, y = _data()
    model = SVC(random_state=0).fit(X, y)
    before = model.decision_function(X).copy()

    def broken(*args, **kwargs):
        raise RuntimeError("solver failure")

    monkeypatch.setattr(SVC, "_set_model", broken)
    with pytest.raises(RuntimeError, match="solver failure"):
        model.fit(X * 3, np.where(y > 0, "b", "a"))
    monkeypatch.undo()
    assert np.array_equal(model.classes_, [-1, 1])
    assert np.array_equal(model.decision_function(X), before)
    fresh = SVC()
    monkeypatch.setattr(SVC, "_set_model", broken)
    with pytest.raises(RuntimeError):
        fresh.fit(X, y)
    assert not hasattr(fresh, "classes_")  # unfitted stays unfitted


@needs_numba
def test_chunked_compiled_solve_is_the_one_call_solve(monkeypatch):
    X, y = _data(300, 5, classes=3)
    runs = []
    for chunk, first in ((None, 2000), (1e-9, 10)):  # one call; chunks of one check each
        monkeypatch.setattr(rows, "CHUNK_SECONDS", chunk)
        monkeypatch.setattr(rows, "FIRST_CHUNK", first)
        for solver in ("swap", "partan"):
            m = SVC(solver=solver, tol=1e-5, multi_class="ovr", dense=True,
                    random_state=0).fit(X, y)
            runs.append((np.asarray(m.problem_dual_coef_), m.n_iter_,
                         [(list(r.history.gap), bool(r.info.get("compiled block")))
                          for r in problem_results(m.result_)]))
    for one, chunked in zip(runs[:2], runs[2:], strict=True):
        assert np.array_equal(one[0], chunked[0]) and np.array_equal(one[1], chunked[1])
        for (gaps_one, block_one), (gaps_chunked, block_chunked) in zip(one[2], chunked[2],
                                                                        strict=True):
            # a problem finished in a compiled block keeps only its last check
            if block_one or block_chunked:
                assert gaps_one[-1] == gaps_chunked[-1]
            else:
                assert gaps_one == gaps_chunked
    assert max(runs[0][1]) > 100  # enough iterations for many chunks


# ----------------------------------------------------------------------------------------------
# 5. readers answer within seconds on endless or blocking inputs
# ----------------------------------------------------------------------------------------------

@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _readers():
    return {
        "load_svmlight": load_svmlight,
        "load_svmlight_files": lambda p: load_svmlight_files([p]),
        "SVC.load": SVC.load,
        "read_libsvm_model": read_libsvm_model,
    }


@pytest.mark.parametrize("reader", sorted(_readers()))
@pytest.mark.parametrize("what", ["dev_zero", "fifo", "directory"])
def test_readers_refuse_endless_blocking_and_directory_paths(reader, what, fifo, tmp_path):
    if what == "dev_zero" and not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    path = {"dev_zero": "/dev/zero", "fifo": str(fifo), "directory": str(tmp_path)}[what]
    expected = {"dev_zero": "character device", "fifo": "FIFO", "directory": "directory"}
    with _within(5), pytest.raises((ValueError, IsADirectoryError),
                                   match=expected[what]):
        _readers()[reader](path)


def test_a_stream_without_newlines_stops_at_the_line_limit(monkeypatch):
    import torchfw.io._sources as sources

    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(sources, "_CHUNK_BYTES", 1 << 16)
    with _within(10), open("/dev/zero", "rb") as stream, \
            pytest.raises(ValueError, match=r"line 1 is longer than 1,048,576 bytes"):
        load_svmlight(stream)
    # Lines of ordinary length are unaffected, across chunk boundaries.
    import io

    text = b"".join(b"1 1:0.5 2:0.25\n" for _ in range(20000))
    X, y = load_svmlight(io.BytesIO(text))
    assert X.shape == (20000, 2)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_cli_train_on_an_endless_stdin_is_one_error_line(tmp_path):
    code = ("import sys, torchfw.io._sources as s; s.MAX_LINE_BYTES = 1 << 22; "
            "from torchfw.cli import main; raise SystemExit(main(sys.argv[1:]))")
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([sys.executable, "-c", code, "train", "/dev/stdin",
                               str(tmp_path / "m.pt")], stdin=zero, capture_output=True,
                              text=True, timeout=60, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: /dev/stdin: line 1 is longer than")
    assert not (tmp_path / "m.pt").exists()


# ----------------------------------------------------------------------------------------------
# 7. kernels that overflow: a clear error, never a converged model of NaN
# ----------------------------------------------------------------------------------------------

def _scaled_data():
    X, y = _data(200, 5)
    return (X - X.mean(0)) / X.std(0), y


@pytest.mark.parametrize("path", [
    pytest.param("auto", marks=needs_numba, id="compiled"),
    pytest.param(False, id="lazy"),
])
@pytest.mark.parametrize("case", ["feature_1e30", "gamma_1e39", "poly_degree_40"])
def test_overflowing_kernels_are_refused_and_the_old_model_kept(path, case):
    X, y = _scaled_data()
    model = SVC(dense=path, random_state=0).fit(X, y)
    before = model.decision_function(X).copy()
    Xc = X.copy()
    if case == "feature_1e30":
        Xc[:, 0] *= 1e30
        model.set_params(gamma="scale")
    elif case == "gamma_1e39":
        model.set_params(gamma=1e39)
    else:
        model.set_params(kernel="poly", degree=40, gamma=1.0, coef0=1.0)
    with pytest.raises(ValueError, match="float64"):
        model.fit(Xc, y)
    assert np.array_equal(model.decision_function(X), before)
    if case == "feature_1e30":  # in float64 the same data fit, and well
        fitted = SVC(dense=path, dtype=torch.float64, random_state=0).fit(Xc, y)
        assert np.isfinite(fitted.decision_function(Xc)).all()
        assert fitted.score(Xc, y) > 0.7


def test_non_finite_decision_values_are_not_mapped_to_a_class(monkeypatch):
    X, y = _data(200, 30)
    model = SVC(kernel="linear", random_state=0).fit(X, y)
    # Rows 1e37 times larger: their inner products overflow float32 (inf, inf - inf = NaN).
    with pytest.raises(ValueError, match=r"decision values are inf or NaN for \d+ of 200 rows"):
        model.predict(X * 1e37)
    with pytest.raises(ValueError, match="inf or NaN"):
        model.decision_function(X * 1e37)
    assert model.score(X, y) > 0.7  # the model itself is fine
    # A one-vs-one model whose kernel gives NaN: no vote for the first class, an error.
    X3, y3 = _data(150, 4, classes=3)
    ovo = SVC(multi_class="ovo", random_state=0).fit(X3, y3)
    monkeypatch.setattr(ovo._kernel, "pairwise", lambda A, B: torch.full(
        (A.shape[0], B.shape[0]), float("nan")))
    with pytest.raises(ValueError, match="inf or NaN for 150 of 150 rows"):
        ovo.predict(X3)


# ----------------------------------------------------------------------------------------------
# 8. tampered LIBSVM model files
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("tamper", ["permuted_nr_sv", "feature_twice", "cut_last_line",
                                    "nan_rho", "inf_gamma"])
def test_tampered_libsvm_model_files_are_refused(tmp_path, classes, tamper):
    X, y = _data(150, 4, classes=classes)
    model = SVC(multi_class="ovo", random_state=0).fit(X, y)
    path = tmp_path / "m.model"
    write_libsvm_model(model, path)
    text = path.read_text()
    lines = text.splitlines()
    sv = lines.index("SV") + 1
    if tamper == "permuted_nr_sv":
        k = next(i for i, ln in enumerate(lines) if ln.startswith("nr_sv"))
        counts = lines[k].split()[1:]
        assert len(set(counts)) > 1
        lines[k] = "nr_sv " + " ".join(counts[1:] + counts[:1])
        bad, match = "\n".join(lines) + "\n", "coefficient signs do not fit class block"
    elif tamper == "feature_twice":
        parts = lines[sv].split()
        lines[sv] = " ".join(parts + [parts[-1]])
        bad, match = "\n".join(lines) + "\n", f"line {sv + 1}: feature 4 is given twice"
    elif tamper == "cut_last_line":
        bad, match = text[:-4], "ends inside a line"
    elif tamper == "nan_rho":
        k = next(i for i, ln in enumerate(lines) if ln.startswith("rho"))
        lines[k] = lines[k].replace(lines[k].split()[1], "nan", 1)
        bad, match = "\n".join(lines) + "\n", "non-finite"
    else:
        k = next(i for i, ln in enumerate(lines) if ln.startswith("gamma"))
        lines[k] = "gamma inf"
        bad, match = "\n".join(lines) + "\n", "gamma inf is not a finite number"
    tampered = tmp_path / "bad.model"
    tampered.write_text(bad)
    with pytest.raises(ValueError, match=match):
        read_libsvm_model(tampered)
    _same_model(path, model, X, read_libsvm_model)  # the intact file: as before


# ----------------------------------------------------------------------------------------------
# 9. the command line: one error line for every OSError; LIBSVM's label format
# ----------------------------------------------------------------------------------------------

def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.fixture
def cli_files(tmp_path):
    X, y = _data()
    data = _write_svmlight(tmp_path / "train.txt", X, np.where(y > 0, 1234567, -1))
    model = tmp_path / "m.pt"
    assert cli_main(["train", "-q", str(data), str(model)]) == 0
    return data, model, SVC.load(model), X


def test_cli_train_to_a_full_disk_keeps_the_old_model(cli_files, capsys, monkeypatch):
    data, model, reference, X = cli_files
    capsys.readouterr()
    _fail_writes(monkeypatch, _enospc, after_bytes=10)
    assert cli_main(["train", "-q", "-c", "50", str(data), str(model)]) == 1
    monkeypatch.undo()
    assert "No space left on device" in _one_error_line(capsys)
    _same_model(model, reference, X)


@pytest.mark.parametrize("target", ["/dev/full", "directory", "read_only"])
def test_cli_write_errors_are_one_line(cli_files, capsys, monkeypatch, tmp_path, target):
    data, model, reference, X = cli_files
    if target == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    if target == "read_only":
        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        monkeypatch.setattr(atomic, "_open_new", refuse)
    out = {"/dev/full": "/dev/full", "directory": str(tmp_path),
           "read_only": str(tmp_path / "out")}[target]
    cause = {"/dev/full": "No space left on device", "directory": "Is a directory",
             "read_only": "Permission denied"}[target]
    capsys.readouterr()
    assert cli_main(["train", "-q", str(data), out]) == 1
    assert cause in _one_error_line(capsys)
    assert cli_main(["predict", "-q", str(data), str(model), out]) == 1
    assert cause in _one_error_line(capsys)
    monkeypatch.undo()
    _same_model(model, reference, X)


@pytest.mark.parametrize("what", ["dev_zero", "fifo", "directory"])
def test_cli_model_path_that_is_not_a_file_is_one_line(cli_files, capsys, fifo, tmp_path,
                                                       what):
    if what == "dev_zero" and not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    data = cli_files[0]
    path = {"dev_zero": "/dev/zero", "fifo": str(fifo), "directory": str(tmp_path)}[what]
    capsys.readouterr()
    with _within(5):
        assert cli_main(["predict", str(data), path]) == 1
        assert cli_main(["train", path]) == 1
    _one_error_line_twice = capsys.readouterr().err.strip().splitlines()
    assert len(_one_error_line_twice) == 2
    assert all(ln.startswith("error: ") for ln in _one_error_line_twice)


@pytest.mark.parametrize("target", ["directory", "missing_folder"])
def test_cli_train_refuses_an_unwritable_model_path_before_fitting(cli_files, capsys, tmp_path,
                                                                   monkeypatch, target):
    data = cli_files[0]

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted although the model could not be saved")

    monkeypatch.setattr(SVC, "fit", no_fit)
    out = str(tmp_path) if target == "directory" else str(tmp_path / "no" / "m.pt")
    capsys.readouterr()
    assert cli_main(["train", "-q", str(data), out]) == 1
    line = _one_error_line(capsys)
    assert "Is a directory" in line or "No such directory" in line


def test_cli_predict_into_a_pipe_closed_early(cli_files, tmp_path):
    data, model, _, _ = cli_files
    # A prediction file the reader abandons after one line (``predict ... | head -1``).
    big = _write_svmlight(tmp_path / "big.txt", *_data(30000, 4))
    proc = subprocess.Popen([sys.executable, "-m", "torchfw", "predict", "-q", str(big),
                             str(model), "/dev/stdout"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(60)
    assert first.strip() in (b"1234567", b"-1", b"1")
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Broken pipe" in lines[0], err


def test_cli_writes_labels_as_libsvm_does(cli_files, tmp_path):
    data, model, _, _ = cli_files
    out = tmp_path / "pred.txt"
    assert cli_main(["predict", "-q", str(data), str(model), str(out)]) == 0
    labels = set(out.read_text().split())
    assert labels <= {"1234567", "-1"} and "1234567" in labels  # not 1.23457e+06
    proba_model = tmp_path / "p.pt"
    assert cli_main(["train", "-q", "-b", "1", str(data), str(proba_model)]) == 0
    assert cli_main(["predict", "-q", "-b", "1", str(data), str(proba_model), str(out)]) == 0
    header, first = out.read_text().splitlines()[:2]
    assert header == "labels -1 1234567"
    assert first.split()[0] in ("-1", "1234567")


# ----------------------------------------------------------------------------------------------
# 10. state dicts refuse what does not fit, naming the field
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["torch.nn", "float32x", "torch.int64", "torch.complex64",
                                   "load", 3])
def test_state_dict_dtype_must_be_a_float_dtype(models, dtype):
    X, _, a, _ = models
    state = a.state_dict()
    state["params"] = dict(state["params"], dtype=dtype)
    with pytest.raises(ValueError, match=r"params\['dtype'\]"):
        SVC.from_state_dict(state)
    state["params"]["dtype"] = "torch.float64"
    assert SVC.from_state_dict(state).dtype is torch.float64


def test_sfw_refuses_a_momentum_buffer_of_another_shape():
    from torchfw.optim import StochasticFrankWolfe
    from torchfw.sets.oracles import L1Ball

    small, large = torch.nn.Linear(4, 3), torch.nn.Linear(5, 3)
    opt = StochasticFrankWolfe(small.parameters(), lr=0.1, lmo=L1Ball(1.0))
    small(torch.randn(2, 4)).sum().backward()
    opt.step()
    other = StochasticFrankWolfe(large.parameters(), lr=0.1, lmo=L1Ball(1.0))
    before = {k: dict(v) for k, v in other.state.items()}
    with pytest.raises(ValueError, match=r"'momentum_buffer' has shape \(3, 4\), the parameter "
                                         r"\(3, 5\)"):
        other.load_state_dict(opt.state_dict())
    assert {k: dict(v) for k, v in other.state.items()} == before


def test_chunked_solve_keeps_the_corrective_window(monkeypatch):
    # At large C the corrective step fires; its stall window must go on across chunks, or a
    # chunked fit (chunk sizes follow the clock) would differ from run to run.
    from sklearn.datasets import make_classification

    X, y = make_classification(80, 5, random_state=0)
    runs = []
    for chunk, first in ((None, 2000), (1e-9, 10)):
        monkeypatch.setattr(rows, "CHUNK_SECONDS", chunk)
        monkeypatch.setattr(rows, "FIRST_CHUNK", first)
        m = SVC(C=2e4, solver="fw", dense=True, random_state=0).fit(X, y)
        history = m.result_.history
        runs.append((np.asarray(m.dual_coef_), m.result_.n_iter, list(history.gap),
                     history.steps[-1].get("correct", 0)))
    one, chunked = runs
    assert np.array_equal(one[0], chunked[0]) and one[1] == chunked[1] and one[2] == chunked[2]
    assert one[3] > 0 and one[1] > 50  # corrections were taken, over many chunks
