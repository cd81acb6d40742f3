"""What a benchmark ran on: the CPU model, read once from ``/proc/cpuinfo``."""

from __future__ import annotations

import functools
import platform


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (Linux), else what :mod:`platform` knows, else ``"unknown CPU"``."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
