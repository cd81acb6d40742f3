"""Shared internals below every other package: input validation and conversion, the estimator
base, numba and thread helpers, host/device scalars, the column cache, the kernel formulas and
the registry of declared second implementations. Nothing here imports the rest of torchfw.
"""
