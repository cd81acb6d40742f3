"""The warnings and errors every torchfw estimator raises: one class of each, shared.

:class:`ConvergenceWarning` (a solver stopped on its budget before its tolerance),
:class:`NotFittedError` (a fitted attribute was asked of an unfitted estimator) and
:class:`DataConversionWarning` (an input was reshaped, e.g. a column-vector ``y``) are the same
classes whichever estimator raises them, so that one ``warnings.filterwarnings`` or one
``except`` clause covers :class:`~torchfw.SVC`, :class:`~torchfw.Lasso`,
:class:`~torchfw.WestonWatkinsSVC` and the distributed SVC.

When scikit-learn is installed each class *subclasses scikit-learn's class of the same name*
(``sklearn.exceptions``), so that code written for scikit-learn (``GridSearchCV``, a filter on
``sklearn.exceptions.ConvergenceWarning``, ``except sklearn.exceptions.NotFittedError``)
handles torchfw's too. Without scikit-learn they derive from the same built-in bases as
scikit-learn's (``UserWarning``; ``ValueError`` and ``AttributeError``).

The classes are built on first access (a module ``__getattr__``, PEP 562): importing
scikit-learn takes seconds (it imports pandas when present), far longer than ``import
torchfw``, and most uses of torchfw never raise either.
"""

from __future__ import annotations

import importlib.util

__all__ = ["ConvergenceWarning", "NotFittedError", "DataConversionWarning"]  # noqa: F822 (built on first use)

#: name -> (built-in bases used without scikit-learn, docstring)
_SPECS = {
    "ConvergenceWarning": (
        (UserWarning,),
        "A solver stopped on its iteration or time budget before reaching its tolerance."),
    "NotFittedError": (
        (ValueError, AttributeError),
        "An estimator was used before ``fit`` (a ValueError and an AttributeError)."),
    "DataConversionWarning": (
        (UserWarning,),
        "An input was converted to the expected shape (e.g. a column-vector ``y``)."),
}

_built: dict[str, type] = {}


def _sklearn_base(name: str):
    """scikit-learn's class ``name`` when scikit-learn is installed, else ``None``."""
    if importlib.util.find_spec("sklearn") is None:
        return None
    try:
        import sklearn.exceptions as skx
    except Exception:  # noqa: BLE001 - a broken scikit-learn install must not break torchfw
        return None
    return getattr(skx, name, None)


def _build(name: str) -> type:
    bases, doc = _SPECS[name]
    base = _sklearn_base(name)
    cls = type(name, (base,) if base is not None else bases,
               {"__doc__": doc, "__module__": __name__, "__qualname__": name})
    return cls


def __getattr__(name: str) -> type:
    if name not in _SPECS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = _built.get(name)
    if cls is None:
        cls = _built[name] = _build(name)
        globals()[name] = cls  # later lookups skip this function
    return cls


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_SPECS))
