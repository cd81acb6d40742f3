"""Tests of torchfw.datasets (LIBSVM reader, SciPy conversion, generators) and benchmarks/_data.py.

The reader is checked against scikit-learn's ``load_svmlight_file`` on real files (bit-for-bit),
against a line-by-line Python reference on generated text (Hypothesis), and on every kind of
malformed line (the message must name the file and the 1-based line).
"""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import io
import lzma
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import DATA_DIR, data_path, requires_cuda
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchfw.datasets import (
    from_scipy_csr,
    load_svmlight,
    load_svmlight_files,
    make_classification_blobs,
    make_large_classification,
    make_sparse_regression,
    make_unscaled_classification,
    to_scipy_csr,
)
from torchfw.io import _decode, _grammar, _sources

sklearn_datasets = pytest.importorskip("sklearn.datasets")

ROOT = Path(__file__).resolve().parents[1]


def _bench_data():
    """Import benchmarks/_data.py by path (benchmarks/ is a folder of scripts, not a package).

    A fresh module each time, so that a test's monkeypatching cannot leak into another.
    """
    name = "torchfw_bench_data"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _write(tmp_path, name, text, compression=None):
    raw = text.encode() if isinstance(text, str) else text
    opener = {None: lambda b: b, "gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
    path = tmp_path / name
    path.write_bytes(opener[compression](raw))
    return path


def _load_text(text, **kwargs):
    return load_svmlight(io.BytesIO(text.encode() if isinstance(text, str) else text), **kwargs)


def _assert_same_as_sklearn(X, y, ref_X, ref_y):
    A = to_scipy_csr(X)
    assert A.shape == ref_X.shape
    np.testing.assert_array_equal(A.indptr, ref_X.indptr)
    np.testing.assert_array_equal(A.indices, ref_X.indices)
    # Bit-for-bit: both parsers round decimal strings correctly.
    assert A.data.dtype == np.float64 and A.data.tobytes() == ref_X.data.tobytes()
    np.testing.assert_array_equal(y.numpy(), ref_y)


# --------------------------------------------------------------------------------------------
# Real files against scikit-learn
# --------------------------------------------------------------------------------------------


@pytest.mark.data
@pytest.mark.parametrize("name", ["a9a.t", "dna.scale", "sector.t.scale"])
def test_real_files_match_sklearn(name):
    path = data_path(f"{name}.xz")
    X, y = load_svmlight(path, dtype=torch.float64)
    with lzma.open(path) as f:
        ref_X, ref_y = sklearn_datasets.load_svmlight_file(f)
    _assert_same_as_sklearn(X, y, ref_X, ref_y)
    assert X.layout == torch.sparse_csr
    assert X.crow_indices().dtype == torch.int64 and X.col_indices().dtype == torch.int64
    assert y.dtype == torch.float64
    X32, _ = load_svmlight(path)  # default float32 = the float64 values rounded once
    assert X32.dtype == torch.float32
    np.testing.assert_array_equal(X32.values().numpy(), ref_X.data.astype(np.float32))


@pytest.mark.data
def test_load_svmlight_files_common_width():
    X_train, y_train, X_test, y_test = load_svmlight_files(
        [data_path("a9a.xz"), data_path("a9a.t.xz")])
    # a9a.t never uses feature 123; the pair still agrees on 123 columns.
    assert X_train.shape == (32561, 123) and X_test.shape == (16281, 123)
    assert sorted(torch.unique(y_train).tolist()) == [-1.0, 1.0]
    assert int((y_test == 1).sum()) == 3846
    X_alone, _ = load_svmlight(data_path("a9a.t.xz"))
    assert X_alone.shape == (16281, 122)


# --------------------------------------------------------------------------------------------
# Sources: compression, file objects, missing files
# --------------------------------------------------------------------------------------------

SMALL = "+1 1:0.5 3:2.25\n-1 2:-1e-3  # a comment\n1.0 4:7\n"


@pytest.mark.parametrize("compression", [None, "gz", "bz2", "xz"])
@pytest.mark.parametrize("honest_suffix", [True, False])
def test_compressed_formats(tmp_path, compression, honest_suffix):
    suffix = f".{compression}" if compression and honest_suffix else ".txt"
    path = _write(tmp_path, "small" + suffix, SMALL, compression)
    X, y = load_svmlight(path, dtype=torch.float64)
    assert X.to_dense().tolist() == [[0.5, 0, 2.25, 0], [0, -1e-3, 0, 0], [0, 0, 0, 7]]
    assert y.tolist() == [1.0, -1.0, 1.0]


def test_file_objects():
    X1, y1 = _load_text(SMALL)
    X2, y2 = load_svmlight(io.BytesIO(lzma.compress(SMALL.encode())))
    assert torch.equal(X1.to_dense(), X2.to_dense()) and torch.equal(y1, y2)
    with pytest.raises(TypeError, match="binary mode"):
        load_svmlight(io.StringIO(SMALL))
    with pytest.raises(TypeError, match="path or a binary file"):
        load_svmlight(12.5)


def test_missing_file_and_directory(tmp_path):
    missing = tmp_path / "nope.svm"
    with pytest.raises(FileNotFoundError, match="nope.svm"):
        load_svmlight(missing)
    with pytest.raises(IsADirectoryError):
        load_svmlight(tmp_path)


def test_corrupt_compressed_file(tmp_path):
    data = lzma.compress(SMALL.encode() * 50)
    path = tmp_path / "broken.xz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"broken\.xz: cannot read the xz data"):
        load_svmlight(path)


# --------------------------------------------------------------------------------------------
# Format details
# --------------------------------------------------------------------------------------------


def test_comments_blank_lines_whitespace_and_labels():
    text = ("# header comment\n"
            "\n"
            "+1 1:1 2:2   \n"           # trailing spaces
            "   \t \n"                  # whitespace-only line
            "-1\t3:3\r\n"               # tab separator, CRLF
            "1.0  # label only, comment with 9:9 and \x00 bytes\n"
            "-2.5e0 qid:7 2:.5 1:1.  # qid ignored, unsorted indices\n"
            "3 3:0")                    # explicit zero, no final newline
    X, y = _load_text(text, dtype=torch.float64)
    assert y.tolist() == [1.0, -1.0, 1.0, -2.5, 3.0]
    assert X.shape == (5, 3)
    assert X.to_dense().tolist() == [[1, 2, 0], [0, 0, 3], [0, 0, 0], [1, 0.5, 0], [0, 0, 0]]
    assert X.crow_indices().tolist() == [0, 2, 3, 3, 5, 6]
    assert X.col_indices().tolist() == [0, 1, 2, 0, 1, 2]  # sorted within rows; the 0 kept


def test_explicit_zeros_and_unsorted_match_sklearn(tmp_path):
    text = "1 5:0 2:3 9:1e-7\n-1 1:0.1 3:-0\n2 8:+4\n"
    X, y = _load_text(text, dtype=torch.float64)
    # scikit-learn wants sorted indices; feed it the sorted equivalent.
    ref_X, ref_y = sklearn_datasets.load_svmlight_file(
        io.BytesIO(b"1 2:3 5:0 9:1e-7\n-1 1:0.1 3:-0\n2 8:+4\n"))
    _assert_same_as_sklearn(X, y, ref_X, ref_y)
    assert np.signbit(to_scipy_csr(X).data[4])  # "-0" is read as -0.0, as strtod does


def test_empty_file():
    X, y = _load_text("")
    assert X.shape == (0, 0) and y.shape == (0,)
    X, y = _load_text("# nothing\n\n", n_features=4)
    assert X.shape == (0, 4)


def test_zero_based_detection():
    X, _ = _load_text("1 1:1 3:3\n")  # no index 0: one-based (auto)
    assert X.shape == (1, 3) and X.col_indices().tolist() == [0, 2]
    X, _ = _load_text("1 0:1 3:3\n")  # an index 0: zero-based
    assert X.shape == (1, 4) and X.col_indices().tolist() == [0, 3]
    X, _ = _load_text("1 1:1 3:3\n", zero_based=True)
    assert X.shape == (1, 4) and X.col_indices().tolist() == [1, 3]
    with pytest.raises(ValueError, match=r"line 2: feature index 0 .*one-based"):
        _load_text("1 1:1\n1 0:1\n", zero_based=False)


def test_zero_based_decision_is_joint(tmp_path):
    a = _write(tmp_path, "a.svm", "1 1:1 2:2\n")
    b = _write(tmp_path, "b.svm", "1 0:5\n")
    Xa, _, Xb, _ = load_svmlight_files([a, b])
    # b holds an index 0, so both files are zero-based.
    assert Xa.shape == Xb.shape == (1, 3)
    assert Xa.col_indices().tolist() == [1, 2] and Xb.col_indices().tolist() == [0]


def test_n_features(tmp_path):
    path = _write(tmp_path, "nf.svm", "1 1:1\n-1 2:1 7:2\n")
    X, _ = load_svmlight(path, n_features=10)
    assert X.shape == (2, 10) and X.to_dense()[1, 6] == 2
    with pytest.raises(ValueError, match=r"nf\.svm: line 2: feature index 7 is out of range "
                                         r"for n_features=5 .*largest allowed index is 5"):
        load_svmlight(path, n_features=5)
    for bad, exc in [(0, ValueError), (-3, ValueError), (2.5, TypeError), ("4", TypeError)]:
        with pytest.raises(exc, match="n_features"):
            load_svmlight(path, n_features=bad)


def test_argument_validation(tmp_path):
    path = _write(tmp_path, "ok.svm", SMALL)
    with pytest.raises(TypeError, match="dtype"):
        load_svmlight(path, dtype=torch.int64)
    with pytest.raises(TypeError, match="dtype"):
        load_svmlight(path, dtype=np.float32)
    with pytest.raises(ValueError, match="zero_based"):
        load_svmlight(path, zero_based="yes")
    with pytest.raises(ValueError, match="device"):
        load_svmlight(path, device="nonsense")
    with pytest.raises(TypeError, match="list of files"):
        load_svmlight_files(str(path))
    with pytest.raises(ValueError, match="empty"):
        load_svmlight_files([])


def test_dtypes_and_overflow():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        X, y = _load_text("1 1:0.25\n", dtype=dtype)
        assert X.dtype == dtype and y.dtype == torch.float64
    with pytest.raises(ValueError, match=r"line 2: feature index 3: the value 1e\+300 "
                                         r"overflows torch.float32"):
        _load_text("1 1:1\n1 3:1e300\n")
    with pytest.raises(ValueError, match=r"line 1: feature index 2: the value is out of the "
                                         r"float64 range"):
        _load_text("1 2:1e999\n", dtype=torch.float64)
    with pytest.raises(ValueError, match=r"line 1: the label is out of the float64 range"):
        _load_text("-1e400 2:1\n")


# --------------------------------------------------------------------------------------------
# Malformed lines: the message names the file and the 1-based line
# --------------------------------------------------------------------------------------------

MALFORMED = [
    ("1 3:abc", "expected index:value, got '3:abc' (the value is not a number)"),
    ("1 3", "expected index:value, got '3'"),
    ("1 :4", "expected index:value, got ':4' (the feature index"),
    ("1 3:", "expected index:value, got '3:' (the value is not a number)"),
    ("1 -2:4", "got '-2:4' (the feature index must be a non-negative integer)"),
    ("1 1.5:4", "got '1.5:4' (the feature index"),
    ("1 1:2:3", "expected index:value, got '1:2:3'"),
    ("1 1:--2", "(the value is not a number)"),
    ("1 1:1.2.3", "(the value is not a number)"),
    ("1 1:.", "(the value is not a number)"),
    ("1 1:+", "(the value is not a number)"),
    ("1 1:1e", "(the value is not a number)"),
    ("1 1:1e5e3", "(the value is not a number)"),
    ("1 1:e5", "(the value is not a number)"),
    ("1 1:1e+-5", "(the value is not a number)"),
    ("1 1:0x1p3", "(the value is not a number)"),
    ("1 1:nan", "got '1:nan' (the value is not a number)"),
    ("1 1:inf", "(the value is not a number)"),
    ("1 1:1_000", "(the value is not a number)"),
    ("1 1:" + "1" * 30 + "x", "(the value is not a number)"),  # long field: Python check
    ("abc 1:2", "invalid label 'abc'"),
    ("1,2 1:2", "invalid label '1,2' (expected a number such as 1, -1 or 2.5; multilabel"),
    ("1:2 3:4", "missing label: the line starts with '1:2'"),
    ("+-1 1:2", "invalid label '+-1'"),
    ("1 1:2 qid:3", "'qid:3' must come directly after the label"),
    ("1 qid:x 1:2", "invalid query id 'qid:x'"),
    ("1 q:1", "expected index:value, got 'q:1' (the feature index"),
    ("1 1:0.5\x002", "invalid byte b'\\x00' (a control character) at column 8"),
    ("1 1:0.5\x0b", "invalid byte b'\\x0b'"),
    ("1 1:\xe9", "(the value is not a number)"),
]


@pytest.mark.parametrize("bad, message", MALFORMED)
def test_malformed_line_names_file_and_line(tmp_path, bad, message):
    # Comments, a blank line and valid lines come first, so the line number is not trivial.
    text = "# comment\n+1 1:1 2:2\n\n-1 3:0.5 # x:y\n" + bad + "\n1 2:1\n"
    path = _write(tmp_path, "bad.svm", text.encode("latin-1"))
    with pytest.raises(ValueError) as info:
        load_svmlight(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line 5: "), msg
    assert message in msg, msg


@pytest.mark.parametrize("compression", ["gz", "xz"])
def test_malformed_line_in_compressed_file(tmp_path, compression):
    text = "".join(f"1 {i % 5 + 1}:{i}\n" for i in range(200)) + "1 3:abc\n"
    path = _write(tmp_path, f"bad.{compression}", text, compression)
    with pytest.raises(ValueError, match=rf"bad\.{compression}: line 201: expected index:value, "
                                         r"got '3:abc'"):
        load_svmlight(path)


def test_duplicate_index():
    with pytest.raises(ValueError, match=r"line 3: duplicate feature index 4"):
        _load_text("1 1:1\n1 2:1 4:1\n1 4:1 1:2 4:3\n")
    with pytest.raises(ValueError, match=r"line 1: duplicate feature index 2"):
        _load_text("1 2:1 2:1\n")


def test_index_too_large():
    with pytest.raises(ValueError, match=r"line 2: feature index 99999999999999999999 is too "
                                         r"large"):
        _load_text("1 1:1\n1 99999999999999999999:1\n")
    # Leading zeros make a long field, not a large index.
    X, _ = _load_text("1 00000000000000000000000000003:1\n", zero_based=True)
    assert X.col_indices().tolist() == [3]


# --------------------------------------------------------------------------------------------
# The vectorized parser against a line-by-line reference
# --------------------------------------------------------------------------------------------


def _reference(text: str):
    """Python reference reader: ``(labels, rows)``, or ``("error", line)`` for the first bad."""
    labels, rows = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if _grammar._line_error(line.encode("latin-1")) is not None:
            return "error", number
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        labels.append(float(tokens[0]))
        rows.append({int(t.split(":")[0]): float(t.split(":")[1])
                     for t in tokens[1:] if not t.startswith("qid:")})
    return labels, rows


_VALID_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda v: f"{v:.9g}"),
    st.floats(-1e6, 1e6).map(lambda v: f"{v:e}"),
    st.floats(-1, 1).map(lambda v: f"{v:.25f}"),
    st.integers(-10**30, 10**30).map(str),
    st.sampled_from(["1.", ".5", "+1", "-0", "0e-400", "1e-400", "4.9e-324", "2.5E+3",
                     "9007199254740993", "1e22", "1e23", "123456789012345678e-10",
                     "0.000000000000000000000000001234", "00001"]),
)
_JUNK = st.text(alphabet="0123456789.+-eE:xq#\t ", max_size=6)


@st.composite
def _lines(draw):
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        label = draw(st.one_of(_VALID_NUMBERS, _JUNK) if draw(st.booleans()) else
                     _VALID_NUMBERS)
        indices = draw(st.lists(st.integers(0, 40), max_size=5, unique=True))
        tokens = [label]
        if draw(st.integers(0, 9)) == 0:
            tokens.append(f"qid:{draw(st.integers(0, 99))}")
        junk = draw(st.integers(0, 4)) == 0
        for i in sorted(indices):
            value = draw(_JUNK) if junk and draw(st.booleans()) else draw(_VALID_NUMBERS)
            tokens.append(f"{i}:{value}")
        line = draw(st.sampled_from([" ", "\t", "  "])).join(tokens)
        if draw(st.integers(0, 9)) == 0:
            line += " # note 1:2"
        lines.append(line)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_lines(), block=st.sampled_from([3, 1 << 16]))
def test_vectorized_parser_agrees_with_reference(text, block):
    expected = _reference(text)
    saved = _decode._BLOCK
    _decode._BLOCK = block  # tiny blocks exercise the block seams of the decoder
    try:
        X, y = _load_text(text, dtype=torch.float64, zero_based=True, n_features=41)
    except ValueError as exc:
        msg = str(exc)
        if expected[0] == "error":
            assert f": line {expected[1]}: " in msg
        else:  # a valid line can still hold a number outside the float64 range
            assert "out of the float64 range" in msg
        return
    finally:
        _decode._BLOCK = saved
    assert expected[0] != "error", f"accepted a malformed line {expected[1]}: {text!r}"
    labels, rows = expected
    assert y.numpy().tobytes() == np.array(labels, dtype=np.float64).tobytes()
    A = to_scipy_csr(X)
    got = [(r, int(c), v) for r in range(A.shape[0])
           for c, v in zip(A.indices[A.indptr[r]:A.indptr[r + 1]],
                           A.data[A.indptr[r]:A.indptr[r + 1]], strict=True)]
    want = [(r, k, v) for r, row in enumerate(rows) for k, v in sorted(row.items())]
    assert len(got) == len(want)
    for (gr, gc, gv), (wr, wc, wv) in zip(got, want, strict=True):
        assert (gr, gc) == (wr, wc)
        assert np.float64(gv).tobytes() == np.float64(wv).tobytes(), (gv, wv)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1,
                       max_size=60),
       fmt=st.sampled_from(["{!r}", "{:.17g}", "{:.6e}", "{:.3f}", "{:.12g}", "{:.20f}"]))
def test_numbers_are_correctly_rounded(values, fmt):
    strings = [fmt.format(v) for v in values]
    text = "".join(f"0 1:{s}\n" for s in strings)
    X, _ = _load_text(text, dtype=torch.float64)
    expected = np.array([float(s) for s in strings])
    assert X.values().numpy().tobytes() == expected.tobytes()


@pytest.mark.parametrize("chunk", [16, 100, 1 << 25])
def test_chunk_boundaries(tmp_path, monkeypatch, chunk):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(300):
        cols = np.sort(rng.choice(50, size=rng.integers(0, 6), replace=False)) + 1
        lines.append(" ".join([str(i % 3 - 1)] + [f"{c}:{rng.normal():.6g}" for c in cols]))
        if i % 50 == 7:
            lines.append("# a comment line")
    text = "\n".join(lines) + "\n"
    expected_X, expected_y = _load_text(text, n_features=50, dtype=torch.float64)
    plain = _write(tmp_path, "c.svm", text)
    packed = _write(tmp_path, "c.svm.xz", text, "xz")
    monkeypatch.setattr(_sources, "_CHUNK_BYTES", chunk)
    monkeypatch.setattr(_sources, "_COMPRESSED_CHUNK_BYTES", chunk)
    for path in (plain, packed):
        X, y = load_svmlight(path, n_features=50, dtype=torch.float64)
        assert torch.equal(X.to_dense(), expected_X.to_dense()) and torch.equal(y, expected_y)
    bad = _write(tmp_path, "bad.svm", text + "1 2:3\n1 2:x\n")
    with pytest.raises(ValueError, match=rf"bad\.svm: line {len(lines) + 2}: "):
        load_svmlight(bad)


# --------------------------------------------------------------------------------------------
# SciPy conversion
# --------------------------------------------------------------------------------------------


def test_scipy_round_trip_shares_memory():
    X, _ = _load_text(SMALL, dtype=torch.float64)
    A = to_scipy_csr(X)
    assert isinstance(A, sp.csr_array) and A.shape == (3, 4)
    assert np.shares_memory(A.data, X.values().numpy())
    assert np.shares_memory(A.indices, X.col_indices().numpy())
    assert np.shares_memory(A.indptr, X.crow_indices().numpy())
    np.testing.assert_array_equal(A.toarray(), X.to_dense().numpy())
    M = to_scipy_csr(X, matrix=True)
    assert isinstance(M, sp.csr_matrix) and np.shares_memory(M.data, A.data)
    B = from_scipy_csr(A)
    assert B.dtype == torch.float64 and B.layout == torch.sparse_csr
    assert np.shares_memory(B.values().numpy(), A.data)
    assert torch.equal(B.to_dense(), X.to_dense())


def test_from_scipy_canonicalizes_without_touching_input():
    # Unsorted columns and a duplicate (2, 1): SciPy sums duplicates.
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 4.0]), np.array([2, 0, 1, 1]),
                       np.array([0, 2, 4])), shape=(2, 3))
    before = A.indices.copy()
    X = from_scipy_csr(A, dtype=torch.float32)
    assert X.dtype == torch.float32
    assert X.col_indices().tolist() == [0, 2, 1]
    assert X.to_dense().tolist() == [[2, 0, 1], [0, 7, 0]]
    np.testing.assert_array_equal(A.indices, before)
    coo = sp.coo_matrix(np.array([[0, 5], [6, 0]], dtype=np.int32))
    Y = from_scipy_csr(coo)
    assert Y.dtype == torch.get_default_dtype() and Y.to_dense().tolist() == [[0, 5], [6, 0]]


def test_scipy_conversion_errors():
    with pytest.raises(TypeError, match="sparse_csr_tensor"):
        to_scipy_csr(torch.eye(2))
    with pytest.raises(TypeError, match="sparse_csr_tensor"):
        to_scipy_csr(np.eye(2))
    with pytest.raises(TypeError, match="SciPy sparse"):
        from_scipy_csr(np.eye(2))
    bad = sp.csr_matrix((np.ones(1), np.array([5]), np.array([0, 1])), shape=(1, 3))
    with pytest.raises(ValueError, match=r"column indices must be in \[0, 3\)"):
        from_scipy_csr(bad)
    with pytest.raises(TypeError, match="dtype"):
        from_scipy_csr(sp.eye(2, format="csr"), dtype=torch.int32)
    X16 = from_scipy_csr(sp.eye(2, format="csr"), dtype=torch.float16)
    assert to_scipy_csr(X16).dtype == np.float32  # SciPy has no float16 sparse kernels


@pytest.mark.cuda
@requires_cuda
def test_cuda_devices():
    X, y = _load_text(SMALL, device="cuda")
    assert X.device.type == "cuda" and y.device.type == "cuda" and X.layout == torch.sparse_csr
    A = to_scipy_csr(X)  # copied back to the host
    np.testing.assert_array_equal(A.toarray(), X.to_dense().cpu().numpy())
    B = from_scipy_csr(A, device="cuda")
    assert B.device.type == "cuda" and torch.equal(B.to_dense(), X.to_dense())
    v = torch.ones(4, device="cuda")
    assert torch.allclose(X @ v, X.to_dense() @ v)
    for make in (make_classification_blobs, make_large_classification):
        Xc, yc = make(200, random_state=0, device="cuda")
        Xh, yh = make(200, random_state=0)
        assert Xc.device.type == "cuda" and torch.equal(Xc.cpu(), Xh) and torch.equal(yc.cpu(), yh)


# --------------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["rings", "xor"])
def test_blobs_nonlinear(pattern):
    from sklearn.svm import SVC

    X, y = make_classification_blobs(400, 2, pattern=pattern, random_state=0)
    X2, y2 = make_classification_blobs(400, 2, pattern=pattern, random_state=0)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    assert not torch.equal(X, make_classification_blobs(400, 2, pattern=pattern,
                                                        random_state=1)[0])
    assert X.shape == (400, 2) and X.dtype == torch.float64 and y.dtype == torch.int64
    assert torch.bincount(y).tolist() == [200, 200]
    Xt, yt = make_classification_blobs(400, 2, pattern=pattern, random_state=1)
    rbf = SVC(kernel="rbf", C=10).fit(X.numpy(), y.numpy()).score(Xt.numpy(), yt.numpy())
    linear = SVC(kernel="linear").fit(X.numpy(), y.numpy()).score(Xt.numpy(), yt.numpy())
    assert rbf > 0.95 and linear < 0.75, (rbf, linear)


def test_blobs_shapes_and_validation():
    X, y = make_classification_blobs(101, 5, n_classes=3, random_state=3, dtype=torch.float32)
    assert X.shape == (101, 5) and X.dtype == torch.float32
    assert sorted(torch.bincount(y).tolist()) == [33, 34, 34]
    X, y = make_classification_blobs(60, 4, n_classes=3, pattern="xor", random_state=0)
    assert set(y.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="n_classes"):
        make_classification_blobs(10, n_classes=1)
    with pytest.raises(ValueError, match="pattern"):
        make_classification_blobs(10, pattern="moons")
    with pytest.raises(ValueError, match="noise"):
        make_classification_blobs(10, noise=-1)
    with pytest.raises(TypeError, match="random_state"):
        make_classification_blobs(10, random_state="seed")


def test_sparse_regression():
    X, y, w = make_sparse_regression(80, 500, 7, noise=0.01, random_state=0)
    assert X.shape == (80, 500) and y.shape == (80,) and w.shape == (500,)
    assert int((w != 0).sum()) == 7 and bool((w.abs()[w != 0] >= 1).all())
    assert float((y - X @ w).std()) == pytest.approx(0.01, rel=0.3)
    X2, y2, w2 = make_sparse_regression(80, 500, 7, noise=0.01, random_state=0,
                                        dtype=torch.float32)
    assert X2.dtype == torch.float32 and torch.equal(X2, X.float()) and torch.equal(w2, w.float())
    Xc, _, _ = make_sparse_regression(4000, 3, 1, random_state=0, correlation=0.6)
    assert float(np.corrcoef(Xc.numpy().T)[0, 1]) == pytest.approx(0.6, abs=0.05)
    with pytest.raises(ValueError, match="n_informative"):
        make_sparse_regression(10, 5, 6)
    with pytest.raises(ValueError, match="correlation"):
        make_sparse_regression(10, 5, 2, correlation=1.0)


def test_large_classification():
    X, y = make_large_classification(20000, 10, random_state=0)
    assert X.shape == (20000, 10) and X.dtype == torch.float32 and y.dtype == torch.int64
    assert abs(float(y.float().mean()) - 0.5) < 0.03
    X2, y2 = make_large_classification(20000, 10, random_state=0)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    # The label depends on the first n_informative features only, through their norm.
    r2 = (X[:, :5].double() ** 2).sum(1)
    assert float(r2[y == 1].min()) > float(r2[y == 0].max()) - 1e-4
    _, yf = make_large_classification(20000, 10, random_state=0, flip_y=0.2)
    assert 0.15 < float((yf != y).float().mean()) < 0.25
    with pytest.raises(ValueError, match="flip_y"):
        make_large_classification(10, flip_y=0.7)
    with pytest.raises(ValueError, match="n_informative"):
        make_large_classification(10, 3, n_informative=4)


# --------------------------------------------------------------------------------------------
# benchmarks/_data.py
# --------------------------------------------------------------------------------------------


def test_bench_cache_round_trip(tmp_path, monkeypatch):
    bench = _bench_data()
    data = tmp_path / "data"
    data.mkdir()
    _write(data, "toy.xz", "1 1:1 3:2\n-1 2:0.5\n", "xz")
    monkeypatch.setenv("TORCHFW_DATA", str(data))
    monkeypatch.setenv("TORCHFW_CACHE", str(tmp_path / "cache"))
    assert bench.data_dir() == data and bench.cache_dir() == tmp_path / "cache"
    X1, y1 = bench.load_svmlight_cached("toy", n_features=4)
    entries = list((tmp_path / "cache").glob("toy.xz-*.npz"))
    assert len(entries) == 1

    def no_parse(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(bench, "load_svmlight", no_parse)
    X2, y2 = bench.load_svmlight_cached("toy", n_features=4, dtype=torch.float64)
    assert X2.shape == (2, 4) and X2.dtype == torch.float64
    assert torch.equal(X1.to_dense().double(), X2.to_dense()) and torch.equal(y1, y2)
    # A changed source file is parsed again.
    monkeypatch.undo()
    monkeypatch.setenv("TORCHFW_DATA", str(data))
    monkeypatch.setenv("TORCHFW_CACHE", str(tmp_path / "cache"))
    _write(data, "toy.xz", "1 1:1 3:2\n-1 2:0.5\n1 4:4\n", "xz")
    X3, _ = bench.load_svmlight_cached("toy", n_features=4)
    assert X3.shape == (3, 4)
    with pytest.raises(FileNotFoundError, match="TORCHFW_DATA"):
        bench.dataset_path("absent")
    with pytest.raises(KeyError, match="unknown dataset"):
        bench.load_libsvm("not-a-dataset")


@pytest.mark.data
def test_bench_load_libsvm(tmp_path, monkeypatch):
    data_path("a9a.xz")
    bench = _bench_data()
    monkeypatch.setenv("TORCHFW_DATA", str(DATA_DIR))
    monkeypatch.setenv("TORCHFW_CACHE", str(tmp_path))
    d = bench.load_libsvm("dna")
    assert d.name == "dna.scale" and d.task == "multiclass"
    assert d.X_train.shape == (2000, 180) and d.X_test.shape == (1186, 180)
    d2 = bench.load_libsvm("dna")  # from the cache
    assert torch.equal(d.X_test.to_dense(), d2.X_test.to_dense())
    assert torch.equal(d.y_train, d2.y_train)
    X_tr, _, X_te, _ = bench.load_libsvm_pair("a9a", "a9a.t")
    assert X_tr.shape[1] == X_te.shape[1] == 123


@pytest.mark.data
def test_leukemia(monkeypatch):
    data_path("leukemia_golub_train.csv.xz")
    bench = _bench_data()
    monkeypatch.setenv("TORCHFW_DATA", str(DATA_DIR))
    X, y, (accessions, _) = bench.load_leukemia(standardize=False, return_genes=True)
    assert X.shape == (72, 7129) and X.dtype == torch.float64
    assert int((y == -1).sum()) == 47 and int((y == 1).sum()) == 25
    assert accessions[0] == "AFFX-BioB-5_at"
    # Rows are in patient-id order: patient 1 is the first column of the train file, patient
    # 39 the first column of the independent file (whose columns are not in id order).
    with lzma.open(DATA_DIR / "leukemia_golub_independent.csv.xz", "rt") as f:
        header, first_gene = f.readline().split(","), f.readline().split(",")
    assert header[2] == "39" and X[38, 0] == float(first_gene[2])
    assert X[0, 0] == -214
    assert y[:27].eq(-1).all() and y[27:38].eq(1).all()  # Golub: patients 1-27 ALL, 28-38 AML
    Xs, y01 = bench.load_leukemia(labels="01", dtype=torch.float32)
    assert set(y01.tolist()) == {0.0, 1.0} and int(y01.sum()) == 25
    assert Xs.dtype == torch.float32 and not bool(torch.isnan(Xs).any())
    assert float(Xs.mean(0).abs().max()) < 1e-4
    std = Xs.double().std(0, unbiased=False)
    assert bool(((std - 1).abs() < 1e-4).all())
    with pytest.raises(ValueError, match="labels"):
        bench.load_leukemia(labels="AML")


def test_bench_default_folders(monkeypatch):
    bench = _bench_data()
    for var in ("TORCHFW_CACHE", "XDG_CACHE_HOME", "TORCHFW_DATA"):
        monkeypatch.delenv(var, raising=False)
    assert bench.cache_dir() == Path.home() / ".cache" / "torchfw"  # never in the repository
    assert bench.data_dir() == ROOT.parent / "shared" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert bench.cache_dir() == Path("/somewhere/torchfw")


def test_parse_error_leaves_no_reader_thread_behind(tmp_path):
    # The read-ahead pool must be shut down where the error is raised, not by the garbage
    # collector in some other thread later (which deadlocked CI once).
    import threading

    bad = tmp_path / "bad.txt"
    bad.write_text("1 1:0.5\n" * 1000 + "1 1:x\n")
    before = threading.active_count()
    with pytest.raises(ValueError, match="line 1001") as info:
        load_svmlight(bad)
    assert info.value is not None  # the traceback (and its frames) are still alive here
    assert threading.active_count() == before


def test_unscaled_classification():
    X, y = make_unscaled_classification(503, 4, 10, random_state=3)
    assert X.shape == (503, 4) and X.dtype == torch.float64 and y.dtype == torch.int64
    # whole numbers, each feature spanning exactly 0..100
    assert torch.equal(X, X.round())
    assert X.min(0).values.tolist() == [0.0] * 4 and X.max(0).values.tolist() == [100.0] * 4
    # balanced classes (the remainder to the first), shuffled
    assert torch.bincount(y).tolist() == [51, 51, 51] + [50] * 7
    assert not torch.equal(y, y.sort().values)
    X2, y2 = make_unscaled_classification(503, 4, 10, random_state=3)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    # the classes are Gaussian clouds around separate centres: the nearest class mean is
    # right for most examples (affine per-feature rescaling keeps that), well above chance
    means = torch.stack([X[y == c].mean(0) for c in range(10)])
    nearest = torch.cdist(X, means).argmin(1)
    assert float((nearest == y).double().mean()) > 0.5
    X32, _ = make_unscaled_classification(50, random_state=0, dtype=torch.float32)
    assert X32.dtype == torch.float32
    with pytest.raises(ValueError, match="n_samples"):
        make_unscaled_classification(5, n_classes=10)
