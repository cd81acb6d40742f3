"""DistributedSVC refuses the kernels it cannot shard, by name, before any collective.

SVC trains ``kernel="precomputed"`` and callable kernels on one process from the whole Gram
matrix; the sharded operator computes kernel columns from every rank's features, which only the
built-in kernels do. The refusal must say so, not fall through to ``make_kernel``'s "unknown
kernel".
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch.distributed")


def _gram(X, Z):
    return X @ Z.T


@pytest.mark.parametrize("kernel, named", [("precomputed", "kernel='precomputed'"),
                                           (_gram, "a callable kernel")])
def test_custom_kernels_refused_by_name(kernel, named):
    from torchfw.distributed import DistributedSVC

    X = np.eye(4)  # also a valid precomputed Gram matrix
    with pytest.raises(ValueError) as info:
        DistributedSVC(kernel=kernel).fit(X, [0, 1, 0, 1])
    msg = str(info.value)
    assert "DistributedSVC needs a built-in kernel" in msg
    assert named in msg and "'rbf'" in msg and "SVC on one process" in msg
    assert "unknown kernel" not in msg


def test_unknown_kernel_name_still_refused():
    from torchfw.distributed import DistributedSVC

    with pytest.raises(ValueError, match="unknown kernel 'cosine'"):
        DistributedSVC(kernel="cosine").fit(np.eye(4), [0, 1, 0, 1])
