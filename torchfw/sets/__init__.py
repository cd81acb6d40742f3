"""Constraint sets and their linear minimization oracles.

``oracles`` holds the LMO protocol and the basic sets (simplex, L1, L2 and L-infinity balls,
boxes); ``polytopes`` the K-sparse polytope, Lp and group-L1 balls, hypercube and Birkhoff
polytope; ``spectral`` the nuclear-norm ball and spectraplex (Lanczos, never a full SVD).
"""

from .oracles import LMO, AtomicLMO, Box, L1Ball, L2Ball, LinfBall, Simplex
from .polytopes import Birkhoff, GroupL1Ball, Hypercube, KSparsePolytope, LpBall
from .spectral import NuclearNormBall, Spectraplex

__all__ = ["LMO", "AtomicLMO", "Simplex", "L1Ball", "L2Ball", "LinfBall", "Box",
           "KSparsePolytope", "LpBall", "GroupL1Ball", "Hypercube", "Birkhoff",
           "NuclearNormBall", "Spectraplex"]
