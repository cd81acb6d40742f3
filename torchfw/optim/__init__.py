"""Optimizers for ordinary PyTorch training code, as :mod:`torch.optim` keeps them.

``sfw`` holds :class:`StochasticFrankWolfe` (Pokutta, Spiegel & Zimmer, 2020); beside it its
per-parameter update (``_update``) and its multi-tensor twin (``_batched``), the set-up checks
(``_checks``), the serializable state of each parameter's set (``_lmo_state``), and
``constraints``: one group per layer with radii from the initial weights (:func:`constraints_for`).
"""

from .constraints import constraints_for, expected_init_norms
from .sfw import StochasticFrankWolfe, lmo_from_state, lmo_to_state, make_feasible

__all__ = ["StochasticFrankWolfe", "make_feasible", "constraints_for", "expected_init_norms",
           "lmo_to_state", "lmo_from_state"]
