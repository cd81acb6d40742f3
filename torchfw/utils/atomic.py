"""Atomic file writes: a file the package writes is either the old one or the whole new one.

One concern: :func:`atomic_write`, the single way every torchfw writer (estimator ``save``, the
LIBSVM model writer, the command line's model and prediction files) puts bytes on disk. The
bytes go to a temporary file in the target's directory, are flushed and ``fsync``-ed, and the
temporary file is renamed over the target with :func:`os.replace`, which POSIX makes atomic
within one file system. Whatever stops the write -- a full disk, a ``KeyboardInterrupt``, a
killed process, another thread saving to the same path -- the target holds either its previous
content or the complete new one, never a truncated mix; the temporary file is removed on any
error. Two concurrent writers leave the last one's complete file.

A target that exists and is not a regular file (``/dev/stdout``, ``/dev/null``, ``/dev/full``,
a FIFO) cannot be replaced by a rename: it is written in place, and its errors are reported
the same way. Errors are :class:`OSError` with the cause spelled out (``cannot write
'model.pt': No space left on device``), whatever library produced the bytes.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat

__all__ = ["atomic_write", "write_error"]


def write_error(path, exc: OSError) -> OSError:
    """An :class:`OSError` of the same errno saying which file could not be written and why."""
    cause = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc) or
                             type(exc).__name__)
    error = OSError(exc.errno, f"cannot write {os.fspath(path)!r}: {cause}")
    error.filename = os.fspath(path)
    return error


def _write_all(fd: int, data) -> None:
    # os.write may write less than asked (signals, pipes): loop until everything is out.
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _new_file_mode(path: str) -> int:
    """The permission bits the new file gets: the target's if it exists, else 0o666 & ~umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write(path, data: bytes | bytearray | memoryview | str) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The target file. Its directory must exist.
    data : bytes-like or str
        The whole content (a str is encoded as UTF-8).

    Raises
    ------
    OSError
        With the errno of the failure and a message naming the file and the cause
        (``IsADirectoryError`` when ``path`` is a directory, ``PermissionError`` for a
        read-only directory, ``ENOSPC`` for a full disk). The target is left as it was.
    """
    path = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise write_error(path, exc) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise write_error(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_in_place(path, data)  # a device or a FIFO: no rename can replace it
        return
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    fd = -1
    tmp = ""
    try:
        # The name is chosen before the file exists, so that an interrupt at any point after
        # its creation still knows what to remove (mkstemp returns the name only afterwards).
        for _ in range(100):
            tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
            try:
                fd = _open_new(tmp)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary file name")
        os.fchmod(fd, _new_file_mode(path))
        _write_all(fd, data)
        os.fsync(fd)  # the bytes are on disk before the name points at them
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException as exc:  # KeyboardInterrupt too: never leave the temporary file
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise
    _sync_directory(directory)


def _open_new(name: str) -> int:
    """A new file ``name`` opened for writing (``FileExistsError`` if it exists)."""
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                   0o600)


def _write_in_place(path: str, data) -> None:
    try:
        # A FIFO nobody reads would block the open forever: O_NONBLOCK makes it fail at once
        # (ENXIO, "No such device or address"); the writes themselves then block as usual.
        fd = os.open(path, os.O_WRONLY | (os.O_NONBLOCK if stat.S_ISFIFO(os.stat(path).st_mode)
                                          else 0))
        os.set_blocking(fd, True)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise write_error(path, exc) from None


def _sync_directory(directory: str) -> None:
    # The rename itself is durable once the directory entry is on disk; best effort (some file
    # systems refuse to open or fsync a directory).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
