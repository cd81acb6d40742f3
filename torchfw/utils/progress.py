"""Progress display of iterative solvers: the duality gap's way down to its target.

A bar whose total is ``max_iter`` says nothing useful about a Frank-Wolfe run: the run stops when
the gap reaches the tolerance, typically at a small fraction of ``max_iter``, so such a bar
promises minutes for a fit of seconds. What a user can read is how far the certificate has come:
the bar here goes from the first gap ``g0`` to the target ``t`` on a log scale,

    progress = 100 * log(g0 / g) / log(g0 / t)     (clipped to [0, 100]),

with the iteration count and the current gap as postfix. As tqdm users expect, no bar is drawn
when the output stream is not a terminal (``disable=None``): a log file gets no carriage-return
updates.
"""

from __future__ import annotations

import math
import sys

__all__ = ["GapProgress", "log_progress", "bar_shown"]


def log_progress(first_gap: float, gap: float, target: float) -> float:
    """Percent of the way from ``first_gap`` down to ``target`` on a log scale, in [0, 100]."""
    if not (math.isfinite(first_gap) and math.isfinite(gap)) or target <= 0:
        return 0.0
    if gap <= target:
        return 100.0
    if first_gap <= target:
        return 100.0
    span = math.log(first_gap / target)
    done = math.log(first_gap / gap) if gap > 0 else span
    return float(min(100.0, max(0.0, 100.0 * done / span)))


def bar_shown(file=None) -> bool:
    """Whether :class:`GapProgress` would draw on ``file`` (``sys.stderr`` by default).

    tqdm's rule for ``disable=None``: no bar on a stream that says it is not a terminal. A
    caller that would give up something for the bar (the compiled SVC solve has none) asks
    this first: ``verbose=True`` with the output going to a log draws nothing anyway.
    """
    stream = file if file is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return isatty is None or bool(isatty())


class GapProgress:
    """A tqdm bar over the log-gap, created lazily (tqdm is imported only when shown).

    Parameters
    ----------
    desc : str
        Label of the bar (the solver's name).
    unit : str
        What one count is ("it", "epoch"): shown in the postfix with the count.
    file : file-like, optional
        Output stream; ``sys.stderr`` by default. No bar when it is not a terminal.
    """

    def __init__(self, desc: str, unit: str = "it", file=None):
        from tqdm.auto import tqdm

        self._file = file if file is not None else sys.stderr
        self._bar = tqdm(total=100, desc=desc, unit="%", file=self._file, disable=None,
                         bar_format="{l_bar}{bar}| {n:.0f}/100 gap [{elapsed}{postfix}]")
        self._unit = unit
        self._first: float | None = None

    @property
    def disabled(self) -> bool:
        return bool(self._bar.disable)

    def update(self, count: int, gap: float, target: float, **extra) -> None:
        """Show the state after ``count`` iterations/epochs with duality gap ``gap``."""
        if self._bar.disable:
            return
        if self._first is None and math.isfinite(gap) and gap > 0:
            self._first = gap
        first = self._first if self._first is not None else gap
        self._bar.n = log_progress(first, gap, target)
        postfix = {self._unit: count, "gap": f"{gap:.3e}", "target": f"{target:.1e}"}
        postfix.update(extra)
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()
