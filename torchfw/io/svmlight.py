r"""Reading LIBSVM / svmlight files into sparse CSR tensors.

One concern: the public readers :func:`load_svmlight` and :func:`load_svmlight_files`, which
parse the text format::

    <label> [qid:<n>] <index>:<value> <index>:<value> ...  [# comment]

into a ``torch.sparse_csr_tensor`` and a float64 label vector (several files with a common
number of features for train / test). Plain, gzip, bzip2 and xz files are recognised by their
magic bytes (:mod:`torchfw.io._sources`).

The parser is vectorized NumPy: the whole buffer of a chunk is split into tokens with array
operations and the numbers are decoded by :mod:`torchfw.io._decode`, bit-for-bit what
``strtod`` (and therefore :func:`sklearn.datasets.load_svmlight_file`) returns. A chunk that
fails any vectorized check is re-scanned line by line (:mod:`torchfw.io._grammar`) only to word
the error, so malformed input costs nothing on the fast path and still gets a precise message.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ..utils.data import csr_tensor
from ..utils.validation import check_int_at_least, resolve_device
from ._decode import _MAX_INDEX, _PAD, _parse_numbers, _parse_unsigned, _words
from ._grammar import _raise_first_bad_line
from ._sources import _display_name, _iter_chunks

__all__ = ["load_svmlight", "load_svmlight_files"]


# --------------------------------------------------------------------------------------------
# Reading: one chunk
# --------------------------------------------------------------------------------------------


@dataclass
class _Parsed:
    """The content of one chunk (or, once concatenated, of one file)."""

    labels: np.ndarray  # float64, one per row
    row_nnz: np.ndarray  # int64, entries per row
    indices: np.ndarray  # int64, feature indices as written in the file
    values: np.ndarray  # float64
    row_lines: np.ndarray  # int64, 1-based line number of each row


def _empty_parsed() -> _Parsed:
    z = np.zeros(0, np.int64)
    return _Parsed(np.zeros(0), z, z.copy(), np.zeros(0), z.copy())


def _parse_chunk(data: bytes, first_line: int, name: str) -> _Parsed:
    """Parse a piece of a LIBSVM file made of whole lines."""
    # One copy into a padded, writable buffer; the newline after the data ends the last line
    # even when the file has no final newline.
    a = np.full(len(data) + 2 * _PAD + 1, 32, dtype=np.uint8)
    a[_PAD:_PAD + len(data)] = np.frombuffer(data, dtype=np.uint8)
    a[_PAD + len(data)] = 10
    newlines = np.flatnonzero(a == 10)

    if b"#" in data:
        # Blank every comment (from the first '#' of a line to its end) in place.
        hashes = np.flatnonzero(a == 35)
        line_of = np.searchsorted(newlines, hashes)
        first = np.ones(hashes.size, bool)
        first[1:] = line_of[1:] != line_of[:-1]
        marks = np.zeros(a.size + 1, np.int8)
        marks[hashes[first]] = 1
        marks[newlines[line_of[first]]] = -1
        a[np.cumsum(marks[:-1], dtype=np.int8).view(bool)] = 32

    # Spaces, tabs, CRs and newlines separate tokens; any other control byte is an error (a NUL
    # inside a number must not silently split it in two). Counting is cheaper than locating.
    n_control = np.count_nonzero(a < 32)
    if n_control != newlines.size and n_control != (
            newlines.size + np.count_nonzero(a == 9) + np.count_nonzero(a == 13)):
        _raise_first_bad_line(data, first_line, name)
    separator = a <= 32
    edges = np.flatnonzero(separator[1:] ^ separator[:-1])
    starts = edges[0::2] + 1
    ends = edges[1::2] + 1

    line_starts = np.concatenate(([0], newlines + 1))
    first_token = np.searchsorted(starts, line_starts)
    per_line = np.diff(first_token, append=starts.size)
    nonblank = per_line > 0
    row_lines = np.flatnonzero(nonblank) + (first_line + 1)
    label_token = first_token[nonblank]
    n_rows = label_token.size
    if n_rows == 0:
        return _empty_parsed()
    row_tokens = per_line[nonblank]

    is_label = np.zeros(starts.size, bool)
    is_label[label_token] = True
    feature = np.flatnonzero(~is_label)
    f_start, f_end = starts[feature], ends[feature]
    colons = np.flatnonzero(a == 58)
    # Every feature token holds exactly one ':' with text on both sides, labels hold none:
    # with as many colons as feature tokens, colon k must sit inside feature token k.
    if colons.size != feature.size or not np.all((colons > f_start) & (colons < f_end - 1)):
        _raise_first_bad_line(data, first_line, name)

    words = _words(a)
    row_nnz = row_tokens - 1
    is_qid = a[f_start] == 113  # 'q': no valid index starts with a letter
    if is_qid.any():
        q = np.flatnonzero(is_qid)
        qs = f_start[q]
        ok = ((colons[q] - qs == 3) & (a[qs + 1] == 105) & (a[qs + 2] == 100)
              & is_label[feature[q] - 1])
        _, _, q_bad, _ = _parse_unsigned(a, words, colons[q] + 1, f_end[q], allow_dot=False)
        if not np.all(ok & ~q_bad):
            _raise_first_bad_line(data, first_line, name)
        # Query ids are accepted and ignored (torchfw has no ranking models).
        row_nnz = row_nnz - np.bincount(
            np.searchsorted(label_token, feature[q], side="right") - 1, minlength=n_rows
        )
        keep = ~is_qid
        feature, f_start, f_end, colons = feature[keep], f_start[keep], f_end[keep], colons[keep]

    if b"e" in data or b"E" in data:
        e_positions = np.flatnonzero((a | 32) == 101)
    else:
        e_positions = np.zeros(0, np.int64)

    index, _, index_bad, index_big = _parse_unsigned(a, words, f_start, colons, allow_dot=False)
    values, value_bad = _parse_numbers(a, words, colons + 1, f_end, e_positions)
    labels, label_bad = _parse_numbers(
        a, words, starts[label_token], ends[label_token], e_positions
    )
    if index_bad.any() or value_bad.any() or label_bad.any():
        _raise_first_bad_line(data, first_line, name)

    indices = index.astype(np.int64)
    if index_big.any():
        rows = np.repeat(np.arange(n_rows), row_nnz)
        for i in np.flatnonzero(index_big):  # rare: exact Python integers
            exact = int(a[f_start[i]:colons[i]].tobytes())
            if exact > _MAX_INDEX:
                raise ValueError(
                    f"{name}: line {row_lines[rows[i]]}: feature index {exact} is too large "
                    f"(at most 2**53)"
                )
            indices[i] = exact
    return _Parsed(labels, row_nnz.astype(np.int64), indices, values, row_lines)


def _parse_source(source, name: str) -> _Parsed:
    # Close the reader here, also when a chunk fails to parse: left to the garbage collector,
    # an abandoned generator shuts its read-ahead thread pool down in whatever thread happens
    # to collect it, which can be a thread still starting up (a deadlock seen in CI).
    with contextlib.closing(_iter_chunks(source, name)) as chunks:
        parts = [_parse_chunk(chunk, first, name) for chunk, first in chunks]
    parts = [p for p in parts if p.labels.size]
    if not parts:
        return _empty_parsed()
    if len(parts) == 1:
        return parts[0]
    return _Parsed(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("labels", "row_nnz", "indices", "values", "row_lines")))


# --------------------------------------------------------------------------------------------
# Reading: from parsed arrays to tensors
# --------------------------------------------------------------------------------------------


def _csr_tensor(crow, col, values, shape):
    """Build a CSR tensor from arrays this module has already validated."""
    with warnings.catch_warnings():
        # torch warns once per process that sparse CSR support is in beta; torchfw relies on
        # the stable subset (construction, matmul, indexing by rows), so the warning is noise.
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        # Some torch versions warn even with check_invariants=False given explicitly.
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly")
        return csr_tensor(crow, col, values, size=tuple(shape),
                                       check_invariants=False)


def _check_reader_args(n_features, dtype, zero_based, device):
    if n_features is not None:
        n_features = check_int_at_least("n_features", n_features, 1)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point or dtype.is_complex:
        raise TypeError(f"dtype must be a real floating-point torch dtype (e.g. torch.float32), "
                        f"got {dtype!r}")
    if not (zero_based is True or zero_based is False or zero_based == "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    return n_features, resolve_device(device)


def _row_of(indptr: np.ndarray, position: int) -> int:
    return int(np.searchsorted(indptr, position, side="right") - 1)


def _sort_rows(parsed: _Parsed, indptr: np.ndarray, name: str) -> None:
    """Sort feature indices within rows (in place) and reject duplicates, naming the line."""
    idx = parsed.indices
    if idx.size < 2:
        return
    # A pair (k, k+1) crosses a row boundary exactly when k+1 starts a row.
    boundary = np.zeros(idx.size, bool)
    boundary[indptr[1:-1][indptr[1:-1] < idx.size]] = True
    same_row = ~boundary[1:]
    if not np.any((idx[1:] <= idx[:-1]) & same_row):
        return
    rows = np.repeat(np.arange(indptr.size - 1), parsed.row_nnz)
    order = np.lexsort((idx, rows))
    parsed.indices = idx = idx[order]
    parsed.values = parsed.values[order]
    duplicate = np.flatnonzero((idx[1:] == idx[:-1]) & same_row)
    if duplicate.size:
        k = int(duplicate[0]) + 1
        line = parsed.row_lines[_row_of(indptr, k)]
        raise ValueError(f"{name}: line {line}: duplicate feature index {idx[k]}")


def _to_tensors(parsed, indptr, offset, n_features, dtype, device, name):
    """Shift indices, check them against ``n_features`` and build the CSR tensor and labels."""
    idx = parsed.indices
    if offset and idx.size:
        zero = np.flatnonzero(idx == 0)
        if zero.size:
            line = parsed.row_lines[_row_of(indptr, int(zero[0]))]
            raise ValueError(
                f"{name}: line {line}: feature index 0 in a file read with one-based indices "
                f"(zero_based=False); pass zero_based=True or 'auto' for zero-based files"
            )
    cols = idx - offset if offset else idx
    too_big = np.flatnonzero(cols >= n_features)
    if too_big.size:
        k = int(too_big[0])
        line = parsed.row_lines[_row_of(indptr, k)]
        base = "one-based" if offset else "zero-based"
        raise ValueError(
            f"{name}: line {line}: feature index {idx[k]} is out of range for "
            f"n_features={n_features} (indices are {base}, so the largest allowed index is "
            f"{n_features - 1 + offset})"
        )
    bad = np.flatnonzero(~np.isfinite(parsed.labels))
    if bad.size:
        raise ValueError(f"{name}: line {parsed.row_lines[int(bad[0])]}: the label is out of "
                         f"the float64 range")
    values = torch.from_numpy(parsed.values).to(dtype)
    # NumPy's isfinite is much faster than torch's on CPU; bfloat16 has no NumPy twin.
    check = values.float() if dtype == torch.bfloat16 else values
    bad = np.flatnonzero(~np.isfinite(check.numpy()))
    if bad.size:
        k = int(bad[0])
        line = parsed.row_lines[_row_of(indptr, k)]
        if np.isfinite(parsed.values[k]):
            problem = f"the value {float(parsed.values[k])!r} overflows {dtype}"
        else:
            problem = "the value is out of the float64 range"
        raise ValueError(f"{name}: line {line}: feature index {idx[k]}: {problem}")
    X = _csr_tensor(torch.from_numpy(indptr),
                    torch.from_numpy(np.ascontiguousarray(cols, dtype=np.int64)),
                    values, (int(parsed.labels.size), int(n_features)))
    y = torch.from_numpy(parsed.labels)
    if device is not None:
        X, y = X.to(device), y.to(device)
    return X, y


def load_svmlight_files(paths, n_features=None, dtype=torch.float32, zero_based="auto",
                        device=None):
    """Load several LIBSVM / svmlight files (e.g. train and test) with a common feature count.

    Parameters
    ----------
    paths : sequence of str, os.PathLike or binary file objects
        The files, plain or compressed with gzip, bzip2 or xz (detected from the magic bytes,
        whatever the extension).
    n_features : int, optional
        Number of columns of every returned matrix. By default the largest feature index found
        in any of the files (plus one for zero-based files), so that train and test matrices
        agree. Larger values pad with empty columns; a smaller value raises naming the file,
        line and index that do not fit.
    dtype : torch.dtype, default torch.float32
        Floating-point type of the matrix values (labels are always float64).
    zero_based : bool or "auto", default "auto"
        Whether feature indices start at 0. ``False``: one-based, as LIBSVM writes them (index
        ``j`` becomes column ``j - 1``; an index 0 is an error). ``True``: indices are column
        numbers. ``"auto"``: one-based unless some file holds an index 0; the decision is taken
        jointly over all files, as in :func:`sklearn.datasets.load_svmlight_files`. A zero-based
        file that never uses feature 0 is therefore read as one-based in ``"auto"`` mode.
    device : str or torch.device, optional
        Where to put the tensors (default: CPU).

    Returns
    -------
    list of torch.Tensor
        ``[X_1, y_1, X_2, y_2, ...]``: each ``X_i`` a ``torch.sparse_csr_tensor`` of shape
        ``(n_rows_i, n_features)`` (int64 ``crow_indices`` and ``col_indices``, values of
        ``dtype``, column indices sorted within rows) and each ``y_i`` a float64 tensor of the
        labels as written in the file.

    Raises
    ------
    FileNotFoundError
        If a path does not exist.
    ValueError
        For malformed content, with the file name and the 1-based line number: a token that is
        not ``index:value``, a label that is not a number, a duplicate index within a line, an
        index that does not fit ``n_features`` or ``zero_based``, a non-finite value, a
        control byte, or a line longer than ``torchfw.io._sources.MAX_LINE_BYTES`` (64 MiB: a
        stream without newlines stops there); for a path that is a device or a FIFO (which may
        never end or block forever; standard input is read as a stream); and for invalid
        arguments.
    IsADirectoryError
        If a path is a directory.
    TypeError
        If ``dtype`` is not a floating-point dtype or a path is neither a path nor a binary file.

    See Also
    --------
    load_svmlight : one file.

    Notes
    -----
    The grammar is the svmlight one: ``<label> [qid:<n>] <index>:<value> ...``, with ``#``
    starting a comment, and blank lines ignored. Labels and values are read as ``strtod`` reads
    them (``1``, ``+1``, ``-1.0``, ``.5``, ``3e-05``), but ``nan``, ``inf`` and hexadecimal
    floats are rejected. Query ids (``qid:``) are accepted directly after the label and
    ignored. Indices may be unsorted within a line (they are sorted); explicit zeros such as
    ``7:0`` are kept as stored entries, as scikit-learn does. Multilabel files (``1,3 ...``)
    are not supported.

    Examples
    --------
    >>> X_train, y_train, X_test, y_test = load_svmlight_files(
    ...     ["a9a.xz", "a9a.t.xz"])  # doctest: +SKIP
    >>> X_train.shape[1] == X_test.shape[1]  # doctest: +SKIP
    True
    """
    if isinstance(paths, (str, bytes, os.PathLike)) or hasattr(paths, "read"):
        raise TypeError("paths must be a list of files; use load_svmlight for a single file")
    paths = list(paths)
    if not paths:
        raise ValueError("paths is empty: give at least one file")
    n_features, device = _check_reader_args(n_features, dtype, zero_based, device)
    names = [_display_name(p) for p in paths]
    parsed = [_parse_source(p, name) for p, name in zip(paths, names, strict=True)]
    indptrs = []
    for p, name in zip(parsed, names, strict=True):
        indptr = np.zeros(p.labels.size + 1, np.int64)
        np.cumsum(p.row_nnz, out=indptr[1:])
        _sort_rows(p, indptr, name)
        indptrs.append(indptr)

    for p, indptr, name in zip(parsed, indptrs, names, strict=True):
        _check_index_limit(p, indptr, name)
    if zero_based == "auto":
        # One-based unless an index 0 occurs anywhere (files without features don't vote).
        mins = [int(p.indices.min()) for p in parsed if p.indices.size]
        offset = 1 if mins and min(mins) > 0 else 0
    else:
        offset = 0 if zero_based else 1
    if n_features is None:
        maxes = [int(p.indices.max()) for p in parsed if p.indices.size]
        n_features = max(maxes) + 1 - offset if maxes else 0
    out = []
    for p, indptr, name in zip(parsed, indptrs, names, strict=True):
        out.extend(_to_tensors(p, indptr, offset, n_features, dtype, device, name))
    return out


#: The largest feature index LIBSVM reads (a C ``int``); a file beyond it describes a matrix no
#: solver could hold a row of, dense, so it is refused while the line is still known.
LIBSVM_MAX_INDEX = 2**31 - 1


def _check_index_limit(parsed, indptr, name: str) -> None:
    idx = parsed.indices
    if not idx.size or int(idx.max()) <= LIBSVM_MAX_INDEX:
        return
    k = int(np.argmax(idx))
    row = int(np.searchsorted(indptr, k, side="right")) - 1
    raise ValueError(f"{name}: line {parsed.row_lines[row]}: feature index {int(idx[k])} is "
                     f"above {LIBSVM_MAX_INDEX} (2**31 - 1), the largest LIBSVM reads")


def load_svmlight(path, n_features=None, dtype=torch.float32, zero_based="auto", device=None):
    """Load a LIBSVM / svmlight file into a sparse CSR tensor and a label vector.

    Parameters
    ----------
    path : str, os.PathLike or binary file object
        The file, plain or compressed with gzip (``.gz``), bzip2 (``.bz2``) or xz (``.xz``);
        the compression is detected from the magic bytes, whatever the extension.
    n_features : int, optional
        Number of columns. By default the largest feature index in the file (plus one for a
        zero-based file). A larger value pads with empty columns; a smaller one raises a
        ``ValueError`` naming the offending index and line. Pass it when loading a test split
        that may not use the highest feature (e.g. ``a9a.t``), or use
        :func:`load_svmlight_files`.
    dtype : torch.dtype, default torch.float32
        Floating-point type of the matrix values.
    zero_based : bool or "auto", default "auto"
        ``False``: indices are one-based as in LIBSVM files (index ``j`` is column ``j - 1``);
        ``True``: indices are column numbers; ``"auto"``: one-based unless the file contains an
        index 0 (scikit-learn's rule).
    device : str or torch.device, optional
        Where to put the tensors (default: CPU).

    Returns
    -------
    X : torch.Tensor
        ``torch.sparse_csr_tensor`` of shape ``(n_rows, n_features)`` with int64
        ``crow_indices``/``col_indices`` (sorted within rows) and values of ``dtype``. Blank and
        comment-only lines produce no row; a line with a label only produces an empty row.
    y : torch.Tensor
        float64 tensor of shape ``(n_rows,)``: the labels as written in the file.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        For malformed content, naming the file and the 1-based line number, e.g.
        ``a9a.t: line 17: expected index:value, got '3:abc' (the value is not a number)``.
        See :func:`load_svmlight_files` for the list of checks.
    TypeError
        If ``dtype`` is not a floating-point torch dtype.

    Notes
    -----
    Speed: the parser is vectorized NumPy and decodes numbers eight bytes at a time; the
    values are bit-identical to :func:`sklearn.datasets.load_svmlight_file`. Large files are
    processed in pieces of 32 MiB, so memory stays at a small multiple of the output size.

    Examples
    --------
    >>> import io
    >>> X, y = load_svmlight(io.BytesIO(b"+1 1:0.5 3:2\\n-1 2:1  # comment\\n"))
    >>> X.to_dense()
    tensor([[0.5000, 0.0000, 2.0000],
            [0.0000, 1.0000, 0.0000]])
    >>> y
    tensor([ 1., -1.], dtype=torch.float64)
    """
    X, y = load_svmlight_files([path], n_features=n_features, dtype=dtype,
                               zero_based=zero_based, device=device)
    return X, y
