"""The collector pause around imports and cache loads restores exactly the state it found."""

from __future__ import annotations

import gc

import pytest

from torchfw.utils.collector import paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_disables_then_restores(collector_on):
    with paused():
        assert not gc.isenabled()
        with paused():  # nested: the inner block must not re-enable it
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_restores_on_error(collector_on):
    with pytest.raises(RuntimeError), paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_paused_keeps_a_callers_disabled_collector(collector_on):
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()
    gc.enable()


def test_lazy_family_import_runs_with_the_collector_paused(collector_on, monkeypatch):
    import importlib

    import torchfw

    seen = []
    real = importlib.import_module

    def spy(name, package=None):
        seen.append(gc.isenabled())
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", spy)
    monkeypatch.delitem(vars(torchfw), "Simplex", raising=False)
    assert torchfw.Simplex is not None
    assert seen and not any(seen)
    assert gc.isenabled()
