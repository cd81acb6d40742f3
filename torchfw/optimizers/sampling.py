r"""Randomized candidate sampling (the "sampled LMO" of Schölkopf & Smola, used by CVM and seeds
000/002): the Frank-Wolfe atom is the best of a random subset of atoms instead of all of them.

With ``sample_size`` atoms drawn uniformly, the chosen atom is among the best fraction
:math:`\eta` of all atoms with probability :math:`1 - (1-\eta)^{\text{size}}`; seed 002 uses
``194`` (:math:`\ge 98\%` chance of the top 2%), CVM uses ``59`` (95% chance of the top 5%). The
solvers keep the full gradient, so the stopping test still uses the exact gap.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["make_sampler", "sample_size_for"]


def sample_size_for(confidence: float = 0.98, top_fraction: float = 0.02) -> int:
    """Smallest sample size ``n`` with ``1 - (1 - top_fraction)^n >= confidence``."""
    return math.ceil(math.log(1.0 - confidence) / math.log(1.0 - top_fraction))


def make_sampler(size: int | None, random_state: int | None, device: torch.device):
    """Return ``build(ops) -> sampler or None``; a sampler maps scores ``s`` to an atom index."""

    def build(ops):
        if size is None:
            return None
        if ops.on_device:
            gen = torch.Generator(device=device)
            gen.manual_seed(random_state if random_state is not None else
                            int(torch.randint(2**31 - 1, ())))

            def sample_device(s: torch.Tensor) -> torch.Tensor:
                idx = torch.randint(s.shape[0], (size,), generator=gen, device=s.device)
                best = torch.argmin(s.index_select(0, idx)).reshape(1)
                return idx.index_select(0, best)

            return sample_device

        rng = np.random.default_rng(random_state)

        def sample_host(s: torch.Tensor) -> int:
            idx = rng.integers(0, s.shape[0], size)
            if s.device.type == "cpu":
                return int(idx[np.argmin(s.detach().numpy()[idx])])
            sub = s[torch.from_numpy(idx).to(s.device)]
            return int(idx[int(torch.argmin(sub))])

        return sample_host

    return build
