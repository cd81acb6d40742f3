r"""Datasets: a fast LIBSVM / svmlight reader, synthetic generators, torch <-> SciPy CSR.

Reading
-------
:func:`load_svmlight` reads one file in the LIBSVM / svmlight text format::

    <label> [qid:<n>] <index>:<value> <index>:<value> ...  [# comment]

into a ``torch.sparse_csr_tensor`` and a float64 label vector; :func:`load_svmlight_files` reads
several files (train / test) with a common number of features. Plain, gzip, bzip2 and xz files
are recognised by their magic bytes (the extension does not matter).

The parser is vectorized NumPy: the whole buffer is split into tokens with array operations, and
numbers are decoded eight bytes at a time (SWAR: "SIMD within a register") from unaligned 64-bit
words. Decimal strings are turned into float64 with the exact fast path of Clinger (1990): when
the decimal mantissa is below :math:`2^{53}` and the power of ten is at most 22 in magnitude, one
IEEE multiplication or division of two exact numbers is correctly rounded, so the result is
bit-for-bit what ``strtod`` (and therefore :func:`sklearn.datasets.load_svmlight_file`) returns.
The rare numbers outside that range go through Python's correctly rounded ``float``. A file that
fails any vectorized check is re-scanned line by line in Python only to word the error, so
malformed input costs nothing on the fast path and still gets a precise message.

Generating
----------
:func:`make_classification_blobs` (small, non-linearly separable problems for demos and tests),
:func:`make_sparse_regression` (wide Lasso problems with a sparse ground truth) and
:func:`make_large_classification` (millions of dense float32 examples for scaling benchmarks).
All are deterministic given ``random_state`` and draw from NumPy's PCG64 generator, so the data
do not depend on the torch version or on the device they are moved to.

Converting
----------
:func:`to_scipy_csr` and :func:`from_scipy_csr` share memory where the formats allow. SciPy is
imported only when they are called, so it stays an optional dependency.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import math
import numbers
import os
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from ._validation import check_int_at_least, check_nonnegative, resolve_device

__all__ = [
    "load_svmlight",
    "load_svmlight_files",
    "make_classification_blobs",
    "make_sparse_regression",
    "make_large_classification",
    "to_scipy_csr",
    "from_scipy_csr",
]

# --------------------------------------------------------------------------------------------
# Reading: sources
# --------------------------------------------------------------------------------------------

# Files are parsed in pieces of about this many bytes (cut at line ends) so that the temporary
# arrays of the vectorized parser stay bounded whatever the file size. Tests shrink it to
# exercise the chunk boundaries.
_CHUNK_BYTES = 1 << 25
# Compressed files are read in smaller pieces so that decompression (in a helper thread)
# overlaps with parsing.
_COMPRESSED_CHUNK_BYTES = 1 << 22

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)


def _display_name(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    name = getattr(source, "name", None)
    return str(name) if isinstance(name, (str, os.PathLike)) else "<file object>"


def _compression_of(head: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return None


def _decompressing(raw, kind: str | None):
    """Wrap a binary stream in the decompressor its magic bytes call for."""
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bzip2":
        return bz2.BZ2File(raw, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    return raw


def _iter_chunks(source, name: str):
    """Yield ``(chunk, first_line)`` pieces of the decompressed text, each ending at a newline.

    ``first_line`` is the number of lines before the chunk, so that errors can name 1-based line
    numbers in the whole file.
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise FileNotFoundError(f"LIBSVM file not found: {path!r}")
        if os.path.isdir(path):
            raise IsADirectoryError(f"expected a LIBSVM file, got the directory {path!r}")
        raw = open(path, "rb")  # noqa: SIM115 - closed in the finally below
        owned = True
    elif hasattr(source, "read"):
        raw = source
        owned = False
    else:
        raise TypeError(
            f"expected a path or a binary file object, got {type(source).__name__}"
        )
    try:
        head = raw.read(8)
        if isinstance(head, str):
            raise TypeError(f"{name}: open the file in binary mode ('rb'), not text mode")
        compression = _compression_of(head)
        # Put the magic bytes back in front without relying on seek(): the stream may be a pipe.
        stream = _decompressing(_Prepend(head, raw), compression)
        kind = compression or "plain text"
        size = _CHUNK_BYTES if compression is None else _COMPRESSED_CHUNK_BYTES

        def read():
            try:
                return stream.read(size)
            except (OSError, EOFError, lzma.LZMAError) as exc:
                raise ValueError(f"{name}: cannot read the {kind} data: {exc}") from None

        tail = b""
        n_lines = 0
        # The decompressors release the GIL, and so do NumPy's array operations: reading the
        # next piece in a helper thread while this one is parsed hides most of the
        # decompression time on a multi-core machine.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(read)
            while True:
                block = pending.result()
                if not block:
                    break
                pending = pool.submit(read)
                if tail:
                    block = tail + block
                cut = block.rfind(b"\n") + 1
                if cut == 0:  # one line longer than a piece: keep reading until it ends
                    tail = block
                    continue
                chunk, tail = block[:cut], block[cut:]
                yield chunk, n_lines
                n_lines += chunk.count(b"\n")
        if tail:
            yield tail, n_lines
    finally:
        if owned:
            raw.close()


class _Prepend(io.RawIOBase):
    """A read-only stream that returns ``head`` and then the rest of ``raw``."""

    def __init__(self, head: bytes, raw):
        self._head = head
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(self._head), len(view))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._raw.read(len(view))
        if not data:
            return 0
        view[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            data = self._head + self._raw.read()
            self._head = b""
            return data
        if self._head:
            data, self._head = self._head[:size], self._head[size:]
            if len(data) < size:
                data += self._raw.read(size - len(data))
            return data
        return self._raw.read(size)


# --------------------------------------------------------------------------------------------
# Reading: the reference grammar, used to word errors
# --------------------------------------------------------------------------------------------

# A number as strtod reads it, minus the forms LIBSVM files never hold (hex, nan, inf).
_NUMBER = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SEPARATORS = re.compile(rb"[ \t\r]+")
_BAD_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _show(token: bytes, limit: int = 40) -> str:
    text = token.decode("ascii", errors="backslashreplace")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return repr(text)


def _line_error(line: bytes) -> str | None:
    """What is wrong with one line, or ``None`` if it is valid (this is the grammar)."""
    content = line.split(b"#", 1)[0]
    bad = _BAD_CONTROL.search(content)
    if bad:
        return (f"invalid byte {bytes([content[bad.start()]])!r} (a control character) at "
                f"column {bad.start() + 1}")
    tokens = _SEPARATORS.split(content.strip(b" \t\r"))
    if tokens == [b""]:
        return None
    label = tokens[0]
    if b":" in label:
        return (f"missing label: the line starts with {_show(label)}; expected "
                f"'<label> <index>:<value> ...'")
    if not _NUMBER.fullmatch(label):
        hint = "; multilabel files are not supported" if b"," in label else ""
        return f"invalid label {_show(label)} (expected a number such as 1, -1 or 2.5{hint})"
    for position, token in enumerate(tokens[1:], start=2):
        if token.startswith(b"qid:"):
            if position != 2:
                return f"{_show(token)} must come directly after the label"
            if not token[4:].isdigit():
                return f"invalid query id {_show(token)} (expected qid:<non-negative integer>)"
            continue
        if token.count(b":") != 1:
            return f"expected index:value, got {_show(token)}"
        index, value = token.split(b":")
        if not index.isdigit():
            return (f"expected index:value, got {_show(token)} (the feature index must be a "
                    f"non-negative integer)")
        if not _NUMBER.fullmatch(value):
            return f"expected index:value, got {_show(token)} (the value is not a number)"
    return None


def _raise_first_bad_line(data: bytes, first_line: int, name: str) -> None:
    """Re-scan a chunk that failed the vectorized checks and raise for its first bad line."""
    for offset, line in enumerate(data.split(b"\n")):
        reason = _line_error(line)
        if reason is not None:
            raise ValueError(f"{name}: line {first_line + offset + 1}: {reason}")
    # The vectorized checks and the grammar above describe the same language; reaching this
    # point would be a bug in one of them, but the file is still reported as malformed.
    last = first_line + data.count(b"\n") + 1
    raise ValueError(f"{name}: lines {first_line + 1}-{last}: malformed LIBSVM data")


# --------------------------------------------------------------------------------------------
# Reading: vectorized number decoding
# --------------------------------------------------------------------------------------------

_U64 = np.uint64
_HIGH = _U64(0x8080808080808080)
_LOW7 = _U64(0x7F7F7F7F7F7F7F7F)
_ONES = _U64(0x0101010101010101)
_ZEROS = _U64(0x3030303030303030)  # eight ASCII '0'
_ADD_46 = _U64(0x4646464646464646)  # 0x46 + byte sets the high bit exactly when byte >= ':'
_DOTS = _U64(0x2E2E2E2E2E2E2E2E)
# _BYTE_MASK[c]: the c most significant bytes of a little-endian word, i.e. the last c
# characters of the 8 that the word covers (fields are read right-aligned).
_BYTE_MASK = np.array(
    [0] + [(((1 << 64) - 1) << (8 * (8 - c))) & ((1 << 64) - 1) for c in range(1, 9)],
    dtype=np.uint64,
)
_POW10_U64 = np.array([10**i for i in range(20)], dtype=np.uint64)
_POW10_F64 = 10.0 ** np.arange(23)  # exact: every 10**k with k <= 22 is a double
_EXACT_MANTISSA = 1 << 53
_MAX_SWAR_BYTES = 24  # longer fields (rare) are decoded in Python
_BLOCK = 1 << 16  # fields per vectorized block: keeps the temporaries in cache
_MAX_INDEX = 1 << 53
_UNSIGNED = re.compile(rb"[0-9]+")
_UNSIGNED_DOT = re.compile(rb"(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_PAD = 32  # spaces around each chunk, so that 8-byte reads never leave the buffer


def _words(a: np.ndarray) -> np.ndarray:
    """An unaligned view whose element ``p`` is the little-endian uint64 at byte ``p`` of ``a``."""
    return np.ndarray(shape=(a.size - 7,), dtype="<u8", buffer=a, offset=0, strides=(1,))


def _eight_digits(v: np.ndarray) -> np.ndarray:
    """Combine eight digit values (0-9, first character in the low byte) into one integer.

    Pairs, then quads, then the full eight digits are combined with one multiply each; every
    intermediate lane stays below its lane width, so the wrap-around uint64 arithmetic of NumPy
    is exact here.
    """
    v = v * _U64(10) + (v >> _U64(8))
    lo = (v & _U64(0x000000FF000000FF)) * _U64(100 + (1000000 << 32))
    hi = ((v >> _U64(16)) & _U64(0x000000FF000000FF)) * _U64(1 + (10000 << 32))
    return (lo + hi) >> _U64(32)


def _unsigned_block(a, words, starts, ends, allow_dot):
    """Decode one block of fields ``a[starts:ends]``: digits with, if allowed, one '.'.

    Fields are read right-aligned as up to three little-endian 8-byte words. Returns the digit
    string as an integer with the dot removed (``value``), the number of digits after the dot
    (``frac``), a ``bad`` mask (another byte, several dots, no digit) and a ``big`` mask (value
    above 2**53 or field longer than 24 bytes: not decoded exactly here, the callers use
    Python's exact ``int``/``float`` for those).
    """
    n = ends.size
    lengths = ends - starts
    long = lengths > _MAX_SWAR_BYTES
    any_long = bool(long.any())
    if any_long:
        lengths = np.where(long, 0, lengths)
    n_words = max(1, (int(lengths.max()) + 7) // 8) if n else 1
    value = np.zeros(n, np.uint64)
    n_dots = np.zeros(n, np.int64)
    frac = np.zeros(n, np.int64)
    bad = np.zeros(n, bool)
    big = np.zeros(n, bool)
    for t in range(n_words):
        in_word = lengths if n_words == 1 else np.clip(lengths - 8 * (n_words - 1 - t), 0, 8)
        inside = _BYTE_MASK[in_word]
        w = words[ends - 8 * (n_words - t)]
        low = w & _LOW7
        at_least_colon = (low + _ADD_46) & _HIGH
        at_least_zero = ((low | _HIGH) - _ZEROS) & _HIGH
        digits = at_least_zero & ~at_least_colon & ~(w & _HIGH) & inside
        allowed = digits
        if allow_dot:
            y = w ^ _DOTS
            # Exact zero-byte test (no false positives from borrows): 0x80 where byte == '.'.
            dots = ~(((y & _LOW7) + _LOW7) | y | _LOW7) & inside
            allowed = digits | dots
            count = (((dots >> _U64(7)) * _ONES) >> _U64(56)).astype(np.int64)
            n_dots += count
            one = np.flatnonzero(count == 1)
            if one.size:
                # The dot's byte index comes from the exponent of its single set bit.
                _, exponent = np.frexp(dots[one].astype(np.float64))
                frac[one] = (7 - (exponent - 1) // 8) + 8 * (n_words - 1 - t)
        bad |= ((inside & _HIGH) & ~allowed) != 0
        keep = (digits >> _U64(7)) * _U64(0xFF)
        chunk = _eight_digits((w & keep) - (_ZEROS & keep))
        if t == 0:
            value = chunk
            if n_words == 3:
                big |= chunk >= 1000  # the 24-digit integer would not fit in 64 bits
        else:
            value = value * _U64(10**8) + chunk
    if allow_dot:
        one = np.flatnonzero(n_dots == 1)
        if one.size:
            # The dot was read as a '0' digit: take it out of the integer.
            f = frac[one]
            v = value[one]
            value[one] = (v // _POW10_U64[np.minimum(f + 1, 19)] * _POW10_U64[np.minimum(f, 19)]
                          + v % _POW10_U64[np.minimum(f, 19)])
    bad |= (n_dots > 1) | (lengths - n_dots < 1)
    big |= value > _U64(_EXACT_MANTISSA)
    if any_long:
        pattern = _UNSIGNED_DOT if allow_dot else _UNSIGNED
        for i in np.flatnonzero(long):
            bad[i] = pattern.fullmatch(a[starts[i]:ends[i]].tobytes()) is None
            big[i] = True
    return value, frac, bad, big


def _parse_unsigned(a, words, starts, ends, allow_dot):
    """Decode many fields block by block; see :func:`_unsigned_block`."""
    n = starts.size
    if n <= _BLOCK:
        return _unsigned_block(a, words, starts, ends, allow_dot)
    value = np.empty(n, np.uint64)
    frac = np.empty(n, np.int64)
    bad = np.empty(n, bool)
    big = np.empty(n, bool)
    for lo in range(0, n, _BLOCK):
        sl = slice(lo, lo + _BLOCK)
        value[sl], frac[sl], bad[sl], big[sl] = _unsigned_block(a, words, starts[sl], ends[sl],
                                                                allow_dot)
    return value, frac, bad, big


def _numbers_block(a, words, starts, ends, mantissa_ends):
    """Decode one block of signed decimals with optional exponents (see _parse_numbers)."""
    first = a[starts]
    negative = first == 45  # '-'
    body = starts + (negative | (first == 43))  # skip a '+' or '-'
    mantissa, frac, bad, big = _unsigned_block(a, words, body, mantissa_ends, allow_dot=True)
    values = mantissa.astype(np.float64)
    with_exp = np.flatnonzero(mantissa_ends < ends)
    if with_exp.size == 0:
        # Common case: value = mantissa / 10**frac, one correctly rounded division.
        exact = ~big & ((frac <= 22) | (mantissa == 0))
        values /= _POW10_F64[np.minimum(frac, 22)]
    else:
        exp10 = -frac
        e_start = mantissa_ends[with_exp] + 1
        e_first = a[e_start]  # a separator when the exponent is empty: then "bad" below
        e_negative = e_first == 45
        e_body = e_start + (e_negative | (e_first == 43))
        e_value, _, e_bad, e_big = _unsigned_block(a, words, e_body, ends[with_exp], False)
        bad[with_exp] |= e_bad
        # Exponents this large are far outside float64's range: cap them to keep the
        # arithmetic in int64; the exact slow path (Python float) then gives 0 or inf.
        e_value = np.minimum(e_value, _U64(10**6)).astype(np.int64)
        e_value[e_big] = 10**6
        exp10[with_exp] += np.where(e_negative, -e_value, e_value)
        exact = ~big & ((np.abs(exp10) <= 22) | (mantissa == 0))
        scale = _POW10_F64[np.minimum(np.abs(exp10), 22)]
        values = np.where(exp10 >= 0, values * scale, values / scale)
    np.negative(values, out=values, where=negative)
    for i in np.flatnonzero(~exact & ~bad):  # rare: correctly rounded, like strtod
        values[i] = float(a[starts[i]:ends[i]].tobytes())
    return values, bad


def _parse_numbers(a, words, starts, ends, e_positions):
    """Decode the fields ``a[starts:ends]`` as numbers; returns ``(values, bad)``.

    A number is ``[+-]`` then digits with at most one dot (at least one digit), then optionally
    ``e`` or ``E``, ``[+-]`` and digits. ``e_positions`` lists every 'e'/'E' byte of the buffer
    (sorted); markers are assigned to fields in O(m log n), so files without exponents pay
    nothing for them.
    """
    n = starts.size
    mantissa_ends = ends
    bad_extra = None
    if e_positions.size and n:
        owner = np.searchsorted(starts, e_positions, side="right") - 1
        ok = owner >= 0
        ok[ok] = e_positions[ok] < ends[owner[ok]]
        owner, pos = owner[ok], e_positions[ok]
        if owner.size:
            mantissa_ends = ends.copy()
            first = np.ones(owner.size, bool)
            first[1:] = owner[1:] != owner[:-1]
            mantissa_ends[owner[first]] = pos[first]
            if not first.all():  # two exponent markers in one field
                bad_extra = owner[~first]
    if n <= _BLOCK:
        values, bad = _numbers_block(a, words, starts, ends, mantissa_ends)
    else:
        values = np.empty(n)
        bad = np.empty(n, bool)
        for lo in range(0, n, _BLOCK):
            sl = slice(lo, lo + _BLOCK)
            values[sl], bad[sl] = _numbers_block(a, words, starts[sl], ends[sl],
                                                 mantissa_ends[sl])
    if bad_extra is not None:
        bad[bad_extra] = True
    return values, bad


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
        edges = np.zeros(a.size + 1, np.int8)
        edges[hashes[first]] = 1
        edges[newlines[line_of[first]]] = -1
        a[np.cumsum(edges[:-1], dtype=np.int8).view(bool)] = 32

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
        return torch.sparse_csr_tensor(crow, col, values, size=tuple(shape),
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
        index that does not fit ``n_features`` or ``zero_based``, a non-finite value, or a
        control byte; and for invalid arguments.
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


# --------------------------------------------------------------------------------------------
# SciPy interoperability
# --------------------------------------------------------------------------------------------


def _import_scipy_sparse():
    try:
        import scipy.sparse as sp
    except ImportError as exc:  # pragma: no cover - scipy is installed wherever tests run
        raise ImportError("this function needs SciPy: pip install scipy") from exc
    return sp


def to_scipy_csr(X, *, matrix=False):
    """Convert a 2-D ``torch.sparse_csr_tensor`` into a SciPy CSR array, sharing memory.

    Parameters
    ----------
    X : torch.Tensor
        A 2-D tensor with ``layout=torch.sparse_csr``. CUDA tensors are first copied to the CPU.
    matrix : bool, default False
        Return a legacy ``scipy.sparse.csr_matrix`` instead of a ``csr_array``. SciPy copies the
        index arrays of a ``csr_matrix`` to int32 when they fit, so only ``csr_array`` is
        guaranteed to share all three arrays with ``X``.

    Returns
    -------
    scipy.sparse.csr_array or scipy.sparse.csr_matrix
        The same matrix. For a CPU tensor of dtype float32 or float64, its ``data``,
        ``indices`` and ``indptr`` are views of the tensor's storage (writing to one changes
        the other). float16 and bfloat16 values are converted to float32 (SciPy's sparse
        routines do not support them).

    Raises
    ------
    TypeError
        If ``X`` is not a CSR tensor.
    ValueError
        If ``X`` is not 2-D.
    ImportError
        If SciPy is not installed.
    """
    if not isinstance(X, torch.Tensor) or X.layout != torch.sparse_csr:
        kind = f"a tensor with layout {X.layout}" if isinstance(X, torch.Tensor) else type(X)
        raise TypeError(f"X must be a torch.sparse_csr_tensor, got {kind}")
    if X.dim() != 2:
        raise ValueError(f"X must be 2-D, got shape {tuple(X.shape)} (batched CSR tensors are "
                         f"not supported)")
    sp = _import_scipy_sparse()
    X = X.detach()
    if X.device.type != "cpu":
        X = X.cpu()
    values = X.values()
    if values.dtype in (torch.float16, torch.bfloat16):
        values = values.float()
    if values.is_complex():
        raise TypeError(f"complex CSR tensors are not supported, got {values.dtype}")
    parts = (values.numpy(), X.col_indices().numpy(), X.crow_indices().numpy())
    shape = tuple(X.shape)
    if matrix:
        return sp.csr_matrix(parts, shape=shape, copy=False)
    return sp.csr_array(parts, shape=shape, copy=False)


def _check_csr_arrays(A) -> None:
    """O(nnz) consistency check of a SciPy CSR matrix, without modifying it.

    torch does not validate CSR tensors by default, and an out-of-range column index would
    corrupt later kernels silently.
    """
    n_rows, n_cols = A.shape
    indptr, indices = np.asarray(A.indptr), np.asarray(A.indices)
    if indptr.shape != (n_rows + 1,):
        raise ValueError(f"A is not a valid CSR matrix: indptr has {indptr.size} entries for "
                         f"{n_rows} rows (expected {n_rows + 1})")
    if indptr[0] != 0 or indptr[-1] > min(indices.size, np.asarray(A.data).size):
        raise ValueError("A is not a valid CSR matrix: indptr must start at 0 and end at most "
                         "at the number of stored entries")
    if np.any(np.diff(indptr) < 0):
        raise ValueError("A is not a valid CSR matrix: indptr is not non-decreasing")
    used = indices[: indptr[-1]]
    if used.size and (used.min() < 0 or used.max() >= n_cols):
        raise ValueError(f"A is not a valid CSR matrix: column indices must be in [0, {n_cols}),"
                         f" found {used.min() if used.min() < 0 else used.max()}")


def from_scipy_csr(A, *, dtype=None, device=None):
    """Convert a SciPy sparse matrix or array into a ``torch.sparse_csr_tensor``.

    Parameters
    ----------
    A : scipy.sparse matrix or array
        Any 2-D SciPy sparse format; non-CSR formats are converted with ``A.tocsr()``.
        Unsorted or duplicate column indices are put in canonical form (duplicates summed, as
        SciPy defines them) on a copy; ``A`` itself is never modified.
    dtype : torch.dtype, optional
        Values dtype. By default float32 and float64 values keep their dtype and anything else
        (integers, booleans, float16) becomes ``torch.get_default_dtype()``.
    device : str or torch.device, optional
        Where to put the tensor (default: CPU).

    Returns
    -------
    torch.Tensor
        A ``torch.sparse_csr_tensor`` with int64 indices. On the CPU, when ``A`` is already a
        canonical CSR with int64 indices and the value dtype is kept, the tensor shares its
        three arrays with ``A``; int32 indices (SciPy's usual choice) are widened on a copy.

    Raises
    ------
    TypeError
        If ``A`` is not a SciPy sparse matrix, or holds complex values, or ``dtype`` is not a
        floating-point torch dtype.
    ValueError
        If ``A`` is not 2-D or its index arrays are inconsistent (out-of-range column index,
        non-monotone ``indptr``).
    ImportError
        If SciPy is not installed.
    """
    sp = _import_scipy_sparse()
    if not sp.issparse(A):
        raise TypeError(f"A must be a SciPy sparse matrix or array, got {type(A).__name__}")
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D, got shape {A.shape}")
    if dtype is not None and (not isinstance(dtype, torch.dtype)
                              or not dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    if np.iscomplexobj(A.data):
        raise TypeError(f"complex sparse matrices are not supported, got {A.dtype}")
    device = resolve_device(device)
    if A.format != "csr":
        A = A.tocsr()
    _check_csr_arrays(A)
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()  # also sorts the indices, which torch's CSR invariants require
    if dtype is None:
        dtype = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}.get(
            A.data.dtype, torch.get_default_dtype())
    nnz = int(A.indptr[-1])  # SciPy tolerates unused trailing storage; torch does not
    data = A.data[:nnz]
    if data.dtype not in (np.float32, np.float64) or not data.flags.writeable:
        data = data.astype(np.float64)
    values = torch.from_numpy(data).to(dtype)
    crow = torch.from_numpy(np.asarray(A.indptr, dtype=np.int64))
    col = torch.from_numpy(np.asarray(A.indices[:nnz], dtype=np.int64))
    X = _csr_tensor(crow, col, values, A.shape)
    return X.to(device) if device is not None else X


# --------------------------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------------------------


def _rng(random_state) -> np.random.Generator:
    if random_state is None or isinstance(random_state, numbers.Integral):
        if isinstance(random_state, bool):
            raise TypeError("random_state must be None, an int or a numpy.random.Generator, "
                            "got a bool")
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise TypeError(f"random_state must be None, an int or a numpy.random.Generator, got "
                    f"{type(random_state).__name__}")


def _check_float_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    return dtype


def _finish(arrays, dtype, device):
    device = resolve_device(device)
    out = []
    for arr in arrays:
        t = torch.from_numpy(arr)
        if t.is_floating_point():
            t = t.to(dtype)
        out.append(t.to(device) if device is not None else t)
    return out


def make_classification_blobs(n_samples=300, n_features=2, n_classes=2, *, pattern="rings",
                              noise=0.1, shuffle=True, random_state=None,
                              dtype=torch.float64, device=None):
    r"""Small classification problems that a linear model cannot solve but an RBF SVM can.

    Parameters
    ----------
    n_samples : int, default 300
        Number of examples (at least ``n_classes``).
    n_features : int, default 2
        Dimension of the examples.
    n_classes : int, default 2
        Number of classes (at least 2).
    pattern : {"rings", "xor"}, default "rings"
        ``"rings"``: class :math:`k` lies on the sphere of radius :math:`(k + 1) / K` around the
        origin (concentric shells, :math:`K` = ``n_classes``), with Gaussian radial noise of
        standard deviation ``noise / K``; classes have equal sizes (up to one). Every class has
        the same mean, so no linear classifier does better than the majority class.
        ``"xor"``: Gaussian clusters (standard deviation ``noise``, in every dimension) at the
        corners of the cube :math:`\{-1, 1\}^m` spanned by the first
        :math:`m = \min(d, \max(2, \lceil \log_2 2K \rceil))` features; the class of a corner
        is its number of positive coordinates modulo :math:`K` (the XOR / parity pattern for
        two classes; classes are balanced for :math:`K = 2`). Needs ``n_features >= 2``.
    noise : float, default 0.1
        Noise level (see ``pattern``); around 0.3 the classes start to overlap.
    shuffle : bool, default True
        Shuffle the examples (otherwise they come grouped by class or corner).
    random_state : int, numpy.random.Generator or None
        Seed; the same seed gives the same data on every platform and device.
    dtype : torch.dtype, default torch.float64
    device : str or torch.device, optional

    Returns
    -------
    X : torch.Tensor
        Dense ``(n_samples, n_features)`` tensor of ``dtype``.
    y : torch.Tensor
        int64 class labels in ``0 .. n_classes - 1``.

    Examples
    --------
    >>> X, y = make_classification_blobs(200, random_state=0)
    >>> X.shape, torch.bincount(y).tolist()
    (torch.Size([200, 2]), [100, 100])
    """
    n_classes = check_int_at_least("n_classes", n_classes, 2)
    n_samples = check_int_at_least("n_samples", n_samples, n_classes)
    n_features = check_int_at_least("n_features", n_features, 1)
    noise = check_nonnegative("noise", noise)
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    if pattern == "rings":
        y = np.repeat(np.arange(n_classes), np.diff(
            np.linspace(0, n_samples, n_classes + 1).round().astype(np.int64)))
        direction = rng.standard_normal((n_samples, n_features))
        norms = np.linalg.norm(direction, axis=1, keepdims=True)
        direction /= np.where(norms > 0, norms, 1.0)  # a zero draw has probability 0
        radius = (y + 1.0) / n_classes + (noise / n_classes) * rng.standard_normal(n_samples)
        X = direction * radius[:, None]
    elif pattern == "xor":
        if n_features < 2:
            raise ValueError("pattern='xor' needs n_features >= 2")
        m = min(n_features, max(2, math.ceil(math.log2(2 * n_classes))))
        corners = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(np.int64)
        corner = np.arange(n_samples) % 2**m
        X = noise * rng.standard_normal((n_samples, n_features))
        X[:, :m] += 2.0 * corners[corner] - 1.0
        y = corners[corner].sum(1) % n_classes
    else:
        raise ValueError(f"pattern must be 'rings' or 'xor', got {pattern!r}")
    if shuffle:
        order = rng.permutation(n_samples)
        X, y = X[order], y[order]
    return tuple(_finish((np.ascontiguousarray(X), y.astype(np.int64)), dtype, device))


def make_sparse_regression(n_samples=100, n_features=1000, n_informative=10, noise=0.1,
                           random_state=None, dtype=torch.float64, *, correlation=0.0,
                           device=None):
    r"""A wide linear regression problem with a sparse ground truth (a Lasso benchmark).

    The design has i.i.d. standard normal rows with equicorrelated columns,

    .. math::
        X_{ij} = \sqrt{1 - \rho}\, Z_{ij} + \sqrt{\rho}\, U_i, \qquad
        y = X w^\star + \sigma \varepsilon,

    with :math:`Z, U, \varepsilon` standard normal, :math:`\rho` = ``correlation`` and
    :math:`\sigma` = ``noise``. The true coefficients :math:`w^\star` have ``n_informative``
    non-zeros at random positions, with random signs and magnitudes uniform in ``[1, 2]`` (so
    the support is recoverable at low noise).

    Parameters
    ----------
    n_samples : int, default 100
    n_features : int, default 1000
    n_informative : int, default 10
        Number of non-zero true coefficients, ``1 <= n_informative <= n_features``.
    noise : float, default 0.1
        Standard deviation of the additive Gaussian noise.
    random_state : int, numpy.random.Generator or None
    dtype : torch.dtype, default torch.float64
    correlation : float, default 0.0
        Correlation between any two columns, in ``[0, 1)``.
    device : str or torch.device, optional

    Returns
    -------
    X : torch.Tensor
        ``(n_samples, n_features)``.
    y : torch.Tensor
        ``(n_samples,)``.
    w_true : torch.Tensor
        ``(n_features,)`` with exactly ``n_informative`` non-zeros.

    Examples
    --------
    >>> X, y, w = make_sparse_regression(50, 200, 5, random_state=0)
    >>> X.shape, int((w != 0).sum())
    (torch.Size([50, 200]), 5)
    """
    n_samples = check_int_at_least("n_samples", n_samples, 1)
    n_features = check_int_at_least("n_features", n_features, 1)
    n_informative = check_int_at_least("n_informative", n_informative, 1)
    if n_informative > n_features:
        raise ValueError(f"n_informative={n_informative} exceeds n_features={n_features}")
    noise = check_nonnegative("noise", noise)
    correlation = check_nonnegative("correlation", correlation)
    if correlation >= 1:
        raise ValueError(f"correlation must be in [0, 1), got {correlation}")
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    X = rng.standard_normal((n_samples, n_features))
    if correlation > 0:
        X *= math.sqrt(1 - correlation)
        X += math.sqrt(correlation) * rng.standard_normal((n_samples, 1))
    w = np.zeros(n_features)
    support = rng.choice(n_features, size=n_informative, replace=False)
    w[support] = rng.choice([-1.0, 1.0], size=n_informative) * rng.uniform(1, 2, n_informative)
    y = X @ w + noise * rng.standard_normal(n_samples)
    return tuple(_finish((X, y, w), dtype, device))


def make_large_classification(n_samples=200_000, n_features=20, random_state=None,
                              dtype=torch.float32, *, n_informative=5, flip_y=0.0,
                              device=None):
    r"""Millions of dense examples, quickly, for scaling benchmarks.

    Features are i.i.d. standard normal; the label says whether the first ``n_informative``
    features lie outside the sphere holding half of the probability mass:

    .. math::
        y_i = \mathbb{1}\left[\textstyle\sum_{j < k} x_{ij}^2 > m_k\right],

    with :math:`m_k` the median of the :math:`\chi^2_k` distribution (Wilson–Hilferty
    approximation, so the classes are balanced to within about one percent). The boundary is a
    sphere: a linear classifier does no better than chance while an RBF SVM learns it, so the
    problem keeps many support vectors, which is what a scaling benchmark should stress. A
    fraction ``flip_y`` of labels is then flipped at random.

    Generation is vectorized in float32 (about half a second per million examples of 20
    features on one CPU core; 4 million take 2.5 s) and the data are the same for a given seed
    whatever the ``dtype`` or device.

    Parameters
    ----------
    n_samples : int, default 200000
    n_features : int, default 20
    random_state : int, numpy.random.Generator or None
    dtype : torch.dtype, default torch.float32
    n_informative : int, default 5
        Number of features the label depends on (``1 .. n_features``).
    flip_y : float, default 0.0
        Fraction of labels flipped, in ``[0, 0.5]``.
    device : str or torch.device, optional
        Where to put the tensors (the data are generated on the CPU and copied once).

    Returns
    -------
    X : torch.Tensor
        ``(n_samples, n_features)`` of ``dtype``.
    y : torch.Tensor
        int64 labels in ``{0, 1}``.

    Examples
    --------
    >>> X, y = make_large_classification(1000, random_state=0)
    >>> X.dtype, X.shape
    (torch.float32, torch.Size([1000, 20]))
    """
    n_samples = check_int_at_least("n_samples", n_samples, 1)
    n_features = check_int_at_least("n_features", n_features, 1)
    n_informative = check_int_at_least("n_informative", n_informative, 1)
    if n_informative > n_features:
        raise ValueError(f"n_informative={n_informative} exceeds n_features={n_features}")
    flip_y = check_nonnegative("flip_y", flip_y)
    if flip_y > 0.5:
        raise ValueError(f"flip_y must be in [0, 0.5], got {flip_y}")
    dtype = _check_float_dtype(dtype)
    rng = _rng(random_state)
    X = rng.standard_normal((n_samples, n_features), dtype=np.float32)
    k = n_informative
    median = k * (1 - 2 / (9 * k)) ** 3
    radius2 = np.einsum("ij,ij->i", X[:, :k], X[:, :k])
    y = (radius2 > median).astype(np.int64)
    if flip_y > 0:
        flip = rng.random(n_samples) < flip_y
        y[flip] = 1 - y[flip]
    return tuple(_finish((X, y), dtype, device))
