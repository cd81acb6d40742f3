"""The column cache shared by the lazy operators: admission policy and validity guarantee."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchfw.svm.kernels import SVMDualOperator, make_kernel
from torchfw.utils.column_cache import ColumnCache


def _request(cache: ColumnCache, key: int) -> int:
    row = cache.lookup(key)
    if row is None:
        row, _ = cache.insert(key)
        cache.buffer[row].fill_(float(key))
    return row


def test_frequent_column_survives_a_scan_of_one_off_columns():
    # LRU would evict key 0 after 4 new keys; frequency-based admission keeps it.
    cache = ColumnCache(4, 3, n_keys=100, dtype=torch.float64, device="cpu", keep_recent=2)
    for _ in range(3):
        _request(cache, 0)
    for key in range(1, 60):
        _request(cache, key)
    assert cache.lookup(0) is not None
    assert cache.hits == 3  # two repeats of 0, then the final lookup
    assert len(cache) == 4


def test_scan_after_cache_is_full_uses_scratch_rows():
    cache = ColumnCache(3, 2, n_keys=50, dtype=torch.float32, device="cpu", keep_recent=2)
    rows = [_request(cache, k) for k in range(10)]
    assert rows[:3] == [0, 1, 2]
    assert set(rows[3:]) == {3, 4}  # equal frequencies: newcomers are not admitted
    assert all(cache.lookup(k) is not None for k in range(3))


def test_aging_lets_the_new_working_set_in():
    # Key 0 was popular early, then the solver moves on to keys 1..3 for good.
    cache = ColumnCache(2, 1, n_keys=10, dtype=torch.float64, device="cpu", keep_recent=1)
    for _ in range(50):
        _request(cache, 0)
    for _ in range(200):
        for key in (1, 2, 3):
            _request(cache, key)
    assert cache.lookup(0) is None  # aged out, its slot went to the current favourites
    assert sum(cache.lookup(k) is not None for k in (1, 2, 3)) == 2


def test_everything_fits_no_scratch_and_only_first_requests_miss():
    cache = ColumnCache(1000, 5, n_keys=20, dtype=torch.float64, device="cpu")
    for _ in range(3):
        for key in range(20):
            _request(cache, key)
    assert cache.buffer.shape == (20, 5)
    assert cache.info() == {"hits": 40, "misses": 20, "slots": 20, "used": 20}


@settings(max_examples=200, deadline=None)
@given(slots=st.integers(0, 6), keep=st.integers(1, 4),
       keys=st.lists(st.integers(0, 11), min_size=1, max_size=300))
def test_rows_handed_out_stay_valid_for_keep_recent_requests(slots, keep, keys):
    cache = ColumnCache(slots, 2, n_keys=12, dtype=torch.float64, device="cpu",
                        keep_recent=keep)
    handed = []
    for key in keys:
        handed.append((_request(cache, key), key))
        for row, held in handed[-keep:]:
            assert float(cache.buffer[row, 0]) == held, (row, held)
    # A cached key always maps to a row holding it.
    for key in range(12):
        row = cache._where.get(key)
        if row is not None:
            assert float(cache.buffer[row, 0]) == key


def test_keep_recent_must_be_positive():
    with pytest.raises(ValueError, match="keep_recent"):
        ColumnCache(2, 2, n_keys=3, dtype=torch.float64, device="cpu", keep_recent=0)


def test_svm_operator_columns_are_exact_under_cache_pressure():
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.standard_normal((60, 5)))
    y = torch.from_numpy(np.where(rng.random(60) < 0.5, -1.0, 1.0))
    kernel = make_kernel("rbf", gamma=0.3)
    small = SVMDualOperator(X, y, kernel, 2.0, dtype=torch.float64,
                            cache_size=3 * 60 * 8 / 2**20)  # three columns for 60 atoms
    big = SVMDualOperator(X, y, kernel, 2.0, dtype=torch.float64)
    sequence = rng.choice(60, size=400, p=np.linspace(1, 3, 60) / np.linspace(1, 3, 60).sum())
    for i in sequence:
        torch.testing.assert_close(small.column(int(i)), big.column(int(i)), rtol=0, atol=0)
    info = small.cache_info()
    assert info["hits"] + info["misses"] == 400 and info["used"] == 3
