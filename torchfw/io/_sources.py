"""Byte sources of the svmlight reader: files read in line-aligned chunks, decompressed.

One concern: turning a path or a binary file object into a stream of ``(bytes, first_line)``
chunks cut at line ends, recognising gzip, bzip2 and xz files by their magic bytes (never by
the extension) and decompressing in a helper thread so that it overlaps with parsing.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
from concurrent.futures import ThreadPoolExecutor

from ..utils.readable import check_readable

# Files are parsed in pieces of about this many bytes (cut at line ends) so that the temporary
# arrays of the vectorized parser stay bounded whatever the file size. Tests shrink it to
# exercise the chunk boundaries.
_CHUNK_BYTES = 1 << 25
# Compressed files are read in smaller pieces so that decompression (in a helper thread)
# overlaps with parsing.
_COMPRESSED_CHUNK_BYTES = 1 << 22

#: The longest line read, in bytes (the decompressed text). A line grows in memory until its
#: newline: without a bound, a source without newlines (``/dev/zero`` on standard input, a
#: binary file) would take all the memory there is. 64 MiB holds a dense row of about three
#: million features written with 17 significant digits; reaching it takes well under a second.
MAX_LINE_BYTES = 1 << 26

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
        # A regular file or standard input: a device or a FIFO given by path is refused at
        # once (/dev/zero never ends, a FIFO nobody writes to blocks its open forever).
        path = check_readable(source, "LIBSVM file")
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
                    if len(block) > MAX_LINE_BYTES:  # ... up to a bound (/dev/zero never ends)
                        raise ValueError(
                            f"{name}: line {n_lines + 1} is longer than {MAX_LINE_BYTES:,} "
                            f"bytes (torchfw.io._sources.MAX_LINE_BYTES, the longest line "
                            f"read): not a LIBSVM file, or a line without its end")
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
