"""Constraint sets as plain data, so optimizer checkpoints load with ``weights_only=True``.

:func:`lmo_to_state` describes an oracle by its type name and constructor arguments (numbers,
strings, ``None``, tensors); :func:`lmo_from_state` rebuilds it, looking the type up among the
:class:`~torchfw.sets.oracles.LMO` subclasses already imported (never importing a module a file names).
Used by :meth:`torchfw.optim.StochasticFrankWolfe.state_dict`.
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

from ..sets.oracles import LMO
from ..sets.polytopes import GroupL1Ball
from ..sets.spectral import Spectraplex, _SpectralLMO

__all__ = ["lmo_to_state", "lmo_from_state"]


def _check_plain(where: str, value) -> None:
    """Raise unless ``value`` is data that ``torch.load(weights_only=True)`` accepts."""
    if value is None or isinstance(value, (bool, int, float, str, Tensor)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(where, item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be strings, got {key!r}")
            _check_plain(where, item)
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}; only numbers, strings, None, tensors and "
        f"lists/tuples/dicts of them can be saved without pickling code"
    )


def lmo_to_state(lmo: LMO | None) -> dict | None:
    """Describe an oracle as plain data: its type name and its constructor arguments.

    The result holds only strings, numbers, ``None`` and tensors, so a state dict containing it
    loads with ``torch.load(..., weights_only=True)`` (which refuses arbitrary objects).

    Parameters
    ----------
    lmo : LMO or None
        The oracle. Each argument of its ``__init__`` must be stored on the instance under the same
        name (or with a leading underscore), which is the convention of :mod:`torchfw.sets.oracles`;
        a set that stores them otherwise defines ``constructor_args()`` returning them as a dict.
        The sets of :mod:`torchfw.sets.polytopes` and :mod:`torchfw.sets.spectral` are covered (importing
        this module imports them, so that loading finds their types). A spectral set's
        warm-start vectors are saved too (key ``"cache"``), so a resumed run starts its next
        Lanczos iteration where the interrupted one would have.

    Returns
    -------
    dict or None
        ``{"type": "module.QualName", "params": {name: value}}`` (plus ``"cache"`` for a spectral
        set that has warm-start vectors); ``None`` for ``None``.
    """
    if lmo is None:
        return None
    if not isinstance(lmo, LMO):
        raise TypeError(f"expected a torchfw.sets.oracles.LMO, got {type(lmo).__name__}")
    cls = type(lmo)
    given = _declared_args(lmo)
    if given is not None:
        params = {}
        for name, value in given.items():
            _check_plain(f"{cls.__name__}.{name}", value)
            params[name] = value.detach().clone() if isinstance(value, Tensor) else value
        return _with_cache(lmo, {"type": f"{cls.__module__}.{cls.__qualname__}",
                                 "params": params})
    params = {}
    for name, spec in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
            raise TypeError(
                f"cannot serialize {cls.__name__}: its constructor takes *args or **kwargs"
            )
        for attr in (name, "_" + name):
            if hasattr(lmo, attr):
                value = getattr(lmo, attr)
                break
        else:
            raise TypeError(
                f"cannot serialize {cls.__name__}: constructor argument {name!r} is not stored as "
                f"attribute {name!r} or '_{name}'"
            )
        _check_plain(f"{cls.__name__}.{name}", value)
        # Clone tensors: the state dict must not change when the oracle is mutated later.
        params[name] = value.detach().clone() if isinstance(value, Tensor) else value
    return _with_cache(lmo, {"type": f"{cls.__module__}.{cls.__qualname__}", "params": params})


def _group_l1_args(lmo: GroupL1Ball) -> dict:
    # Equal groups keep their size; explicit ids are stored as such (one or the other is set).
    groups = lmo.group_size if lmo._ids is None else lmo.group_ids(len(lmo._ids))
    return {"groups": groups, "radius": lmo.radius}


def _spectral_args(lmo, first: str, first_value) -> dict:
    return {first: first_value, "radius": lmo.radius, "max_iter": lmo.max_iter, "tol": lmo.tol,
            "warm_start": lmo.warm_start}


# Sets whose constructor arguments are not all stored under their own names.
_ADAPTERS = {
    GroupL1Ball: _group_l1_args,
    Spectraplex: lambda lmo: _spectral_args(lmo, "n", lmo.shape[0]),
}


def _declared_args(lmo: LMO) -> dict | None:
    """Constructor arguments an oracle declares (``constructor_args()``) or an adapter knows."""
    declared = getattr(lmo, "constructor_args", None)
    if callable(declared):
        return dict(declared())
    adapter = _ADAPTERS.get(type(lmo))
    return adapter(lmo) if adapter is not None else None


def _with_cache(lmo: LMO, state: dict) -> dict:
    """Add the warm-start vectors of a spectral set, so that a resumed run is bit-identical.

    A spectral LMO starts its Lanczos iteration from the vector its previous call returned; the
    vertex depends on that start to within the LMO's tolerance. The vectors are saved per batch
    size and dtype (the device is the parameters' on loading).
    """
    if isinstance(lmo, _SpectralLMO) and lmo._warm:
        state["cache"] = [{"batch": int(key[0]), "dtype": str(key[1]).removeprefix("torch."),
                           "vector": z.detach().cpu().clone()}
                          for key, z in lmo._warm.items()]
    return state


def _restore_cache(lmo: LMO, entries, device) -> None:
    if not isinstance(lmo, _SpectralLMO):
        return
    for entry in entries:
        dtype = getattr(torch, entry["dtype"], None)
        if not isinstance(dtype, torch.dtype) or not isinstance(entry["vector"], Tensor):
            raise ValueError(f"bad warm-start entry in a saved {type(lmo).__name__}: {entry!r}")
        vector = entry["vector"].to(dtype=dtype, device=device)
        lmo._warm[(entry["batch"], dtype, vector.device)] = vector


def _lmo_classes() -> dict[str, type]:
    """Every LMO subclass defined so far, by qualified name.

    Only classes already imported are candidates, so loading never imports a module named by a
    file (what ``weights_only=True`` is there to prevent).
    """
    found: dict[str, type] = {}
    todo = [LMO]
    while todo:
        cls = todo.pop()
        found[f"{cls.__module__}.{cls.__qualname__}"] = cls
        todo.extend(cls.__subclasses__())
    return found


def _to_device(value, device):
    if isinstance(value, Tensor):
        return value.to(device) if device is not None else value
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_device(v, device) for v in value)
    return value


def lmo_from_state(state, device: torch.device | str | None = None) -> LMO | None:
    """Rebuild an oracle from :func:`lmo_to_state` output.

    Parameters
    ----------
    state : dict, LMO or None
        The plain-data description (an LMO instance is returned unchanged).
    device : torch.device, optional
        Where to put tensor parameters (radii, bounds), e.g. the device of the parameters.
    """
    if state is None or isinstance(state, LMO):
        return state
    if not isinstance(state, dict) or "type" not in state or "params" not in state:
        raise ValueError(f"not a serialized LMO (expected {{'type', 'params'}}): {state!r}")
    classes = _lmo_classes()
    cls = classes.get(state["type"])
    if cls is None:
        raise ValueError(
            f"unknown LMO type {state['type']!r}; import the module that defines it before "
            f"loading (known: {sorted(classes)})"
        )
    params = {k: _to_device(v, device) for k, v in state["params"].items()}
    lmo = cls(**params)
    _restore_cache(lmo, state.get("cache", ()), device)
    return lmo
