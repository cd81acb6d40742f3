"""What a reader may be given by path: a regular file, or the process's standard input.

One concern: :func:`check_readable`, run by every reader that opens a path (the svmlight
reader, ``load`` of the estimators, the LIBSVM model reader, the command line) before it opens
it. A directory, a device (``/dev/zero`` never ends, ``/dev/random`` neither), a FIFO (its
``open`` blocks until someone writes to it, possibly forever) or a socket is refused at once
with an error naming what the path is. Standard input is accepted whatever it is
(``/dev/stdin``, ``/proc/self/fd/0``: a pipe from another command is the point of it) by the
data readers, which bound the length of what they accumulate instead (the svmlight reader's
line limit); model files, read whole, must be regular files.
"""

from __future__ import annotations

import os
import stat

__all__ = ["check_readable"]

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _is_stdin(info: os.stat_result) -> bool:
    try:
        return os.path.samestat(info, os.fstat(0))
    except OSError:
        return False


def check_readable(path, what: str = "file", stdin: bool = True) -> str:
    """``path`` as a str, once checked to be a regular file or (``stdin``) standard input.

    Model files (``stdin=False``) must be regular files: they are read whole.

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path``.
    IsADirectoryError
        If ``path`` is a directory.
    ValueError
        If ``path`` is a device, a FIFO or a socket other than standard input: such a file may
        never end or block forever; pipe it to standard input, or pass an open file object.
    """
    path = os.fspath(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path!r}") from None
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"expected a {what}, got the directory {path!r}")
    if stat.S_ISREG(info.st_mode) or (stdin and _is_stdin(info)):
        return path
    kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
    hint = ("; read it through standard input (/dev/stdin) or pass an open file object if "
            "that is meant" if stdin else "; a model is read from a regular file")
    raise ValueError(f"{path}: expected a {what}, got {kind}, which may never end or block "
                     f"forever{hint}")
