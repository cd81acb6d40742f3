"""What a benchmark ran on: the CPU model (read once from ``/proc/cpuinfo``), a short tag of it
for result file names, and the header line and command line its report opens with."""

from __future__ import annotations

import os as _os

# Benchmarks time the compiled kernels: the cold-start fallback (the PyTorch paths while
# numba's cache is cold, torchfw.utils.cold_start) is what first_fit.py measures, alone.
_os.environ.setdefault("TORCHFW_COLD_START", "compile")

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


def machine_tag() -> str:
    """A short name of the CPU for result file names (``svm_small_xeon.md``): ``xeon``, ``epyc``,
    else the model name's first word in lower case."""
    model = cpu_model()
    for tag in ("xeon", "epyc"):
        if tag in model.lower():
            return tag
    words = "".join(c if c.isalnum() else " " for c in model.lower()).split()
    return words[0] if words else "cpu"


def machine_header(meta: dict, command: str) -> list[str]:
    """The report lines naming the machine, its load at the start and the command that ran.

    ``meta`` holds ``cpu``, ``cores`` and ``load_average_start`` (the 1, 5, 15-minute loads).
    """
    load = ", ".join(f"{x:.2f}" for x in meta["load_average_start"])
    return [f"Machine: {meta['cpu']}, {meta['cores']} cores (shared); load average at start: "
            f"{load}.", "", f"Command: `{command}`", ""]
