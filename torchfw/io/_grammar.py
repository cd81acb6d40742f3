"""The svmlight line grammar, in plain Python: used only to word the errors of the reader.

One concern: saying what is wrong with a line of LIBSVM / svmlight text. The vectorized parser
(:mod:`torchfw.io.svmlight`) accepts exactly this language; when one of its checks fails, the
failing piece is re-scanned here line by line to name the first bad line and token.
"""

from __future__ import annotations

import re

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
