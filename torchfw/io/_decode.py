r"""Vectorized decoding of the svmlight reader's numbers (SWAR on 64-bit words).

One concern: turning the byte ranges of unsigned indices and decimal numbers into int64 and
float64 arrays. Fields are read eight bytes at a time from unaligned little-endian words ("SIMD
within a register"); decimals use the exact fast path of Clinger (1990): with a mantissa below
:math:`2^{53}` and a power of ten of magnitude at most 22, one IEEE multiplication or division
of two exact numbers is correctly rounded, i.e. bit-for-bit ``strtod``. Other numbers go through
Python's correctly rounded ``float``.
"""

from __future__ import annotations

import re

import numpy as np

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
