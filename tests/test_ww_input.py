"""The Weston-Watkins fit reads its CSR arrays off the validated input once
(:func:`torchfw.ww._csr.csr_of_checked`): the same arrays as the checking conversion
(:func:`torchfw.ww._csr.as_csr`) for every input kind, a repeated column summed."""

import numpy as np
import pytest
import torch

from torchfw.utils.data import as_matrix
from torchfw.ww._csr import as_csr, csr_of_checked

sp = pytest.importorskip("scipy.sparse")


def _same(a, b):
    return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr)
            and np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data))


def _inputs():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(30, 7)) * (rng.random((30, 7)) < 0.4)
    dense[3] = 0.0
    unsorted = sp.csr_matrix(dense)
    unsorted.indices = unsorted.indices.copy()
    for i in range(30):  # reverse each row's columns: valid CSR, not canonical
        lo, hi = unsorted.indptr[i], unsorted.indptr[i + 1]
        unsorted.indices[lo:hi] = unsorted.indices[lo:hi][::-1].copy()
        unsorted.data[lo:hi] = unsorted.data[lo:hi][::-1].copy()
    unsorted.has_sorted_indices = False
    return dense, [("dense", dense, False), ("scipy", sp.csr_matrix(dense), True),
                   ("scipy csc", sp.csc_matrix(dense), True),
                   ("scipy unsorted", unsorted, True),
                   ("torch dense", torch.from_numpy(dense), False)]


@pytest.mark.parametrize("case", range(5))
def test_arrays_equal_the_checking_conversion(case):
    dense, inputs = _inputs()
    name, X, canonical = inputs[case]
    ref = as_csr(sp.csr_matrix(dense))
    got = csr_of_checked(as_matrix(X, dtype=torch.float64), canonical=canonical)
    assert _same(ref, got), name


def test_a_torch_csr_tensor_naming_a_column_twice_is_summed():
    crow = torch.tensor([0, 3, 4])
    col = torch.tensor([2, 0, 2, 1])  # row 0 names column 2 twice, out of order
    val = torch.tensor([1.0, 2.0, 3.0, 5.0], dtype=torch.float64)
    X = torch.sparse_csr_tensor(crow, col, val, size=(2, 3))
    got = csr_of_checked(as_matrix(X, dtype=torch.float64))
    assert got.indptr.tolist() == [0, 2, 3]
    assert got.indices.tolist() == [0, 2, 1]
    assert got.data.tolist() == [2.0, 4.0, 5.0]
