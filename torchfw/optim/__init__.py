"""Optimizers for ordinary PyTorch training code, as :mod:`torch.optim` keeps them.

``sfw`` holds :class:`StochasticFrankWolfe` (Pokutta, Spiegel & Zimmer, 2020); beside it its
per-parameter update (``_update``, with its compiled twin), the set-up checks (``_checks``) and
the serializable state of each parameter's set (``_lmo_state``).
"""

from .sfw import StochasticFrankWolfe, lmo_from_state, lmo_to_state, make_feasible

__all__ = ["StochasticFrankWolfe", "make_feasible", "lmo_to_state", "lmo_from_state"]
