"""scikit-learn conventions without importing scikit-learn: the base of every torchfw estimator.

:class:`BaseEstimator` gives ``get_params``/``set_params`` (read from ``__init__``'s signature, so
``__init__`` must only store its arguments), a readable ``repr``, the tags scikit-learn asks
for (so that ``clone``, ``GridSearchCV`` and ``cross_val_score`` work on torchfw estimators), and
the one input check every estimator runs on ``X`` (:meth:`BaseEstimator._validate_X`): the
conversion of :func:`torchfw.utils.data.as_matrix`, then ``n_features_in_`` and ``feature_names_in_``
recorded by ``fit`` and enforced by every method that reads ``X`` afterwards. Warnings and
errors are the shared classes of :mod:`torchfw.exceptions`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import io
import os
import warnings

import numpy as np
import torch

from .. import exceptions
from .data import as_matrix, feature_names_of

__all__ = ["BaseEstimator", "NotFittedError", "atomic_fit", "check_is_fitted", "fit_atomically",
           "load_state", "plain"]  # noqa: F822 (built on first use)


def __getattr__(name: str):
    # The shared classes are built on first use (see torchfw.exceptions); this keeps the
    # historical import path ``torchfw.utils.estimator.NotFittedError`` working.
    if name in ("NotFittedError", "ConvergenceWarning"):
        return getattr(exceptions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BaseEstimator:
    """Parameter handling, input checks and persistence shared by all torchfw estimators."""

    #: "classifier" or "regressor": what scikit-learn's meta-estimators should expect.
    _estimator_kind: str | None = None
    #: The ``format`` entry of the estimator's state dict (``"torchfw.SVC"``, ...).
    _state_format: str = ""

    # -- persistence: one safe way for every estimator -----------------------------------------

    def state_dict(self) -> dict:
        """The fitted model as tensors and plain values (loadable with ``weights_only=True``)."""
        raise NotImplementedError(f"{type(self).__name__} does not define its saved state")

    @classmethod
    def from_state_dict(cls, state: dict, map_location=None):
        """A fitted model from :meth:`state_dict`'s output, checked field by field first."""
        raise NotImplementedError(f"{cls.__name__} does not define its saved state")

    def save(self, path) -> None:
        """Save the fitted model: :meth:`state_dict` through ``torch.save`` (no pickled code).

        The write is atomic (:func:`torchfw.utils.atomic.atomic_write`): an existing file at
        ``path`` is replaced only once the new one is complete on disk, so an interrupt, a
        full disk or a concurrent save leaves either the old model or the new one, never a
        truncated file. Errors are OSErrors naming the cause (``No space left on device``).
        """
        from .atomic import atomic_write

        buffer = io.BytesIO()  # serialized in memory: torch's own file errors are opaque
        torch.save(self.state_dict(), buffer)
        atomic_write(path, buffer.getbuffer())

    @classmethod
    def load(cls, path, map_location=None):
        """Load a model saved by :meth:`save`, with ``torch.load(weights_only=True)``.

        A file that is not a torchfw model, or is another estimator's, raises a ValueError
        saying so; a model file whose fields are inconsistent (missing keys, wrong shapes,
        non-finite coefficients) raises one naming the field.
        """
        return cls.from_state_dict(load_state(path, cls._state_format),
                                   map_location=map_location)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        init = cls.__init__
        if init is object.__init__:
            return []
        params = inspect.signature(init).parameters.values()
        return sorted(p.name for p in params
                      if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))

    def get_params(self, deep: bool = True) -> dict:
        """Constructor parameters of this estimator (scikit-learn API)."""
        out: dict[str, object] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params):
        """Set constructor parameters (scikit-learn API); returns ``self``."""
        valid = self._get_param_names()
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters: {valid}")
            if sub:
                getattr(self, name).set_params(**{sub: value})
            else:
                setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__)
                    .parameters.values() if p.name != "self"}
        changed = [f"{k}={v!r}" for k, v in self.get_params(deep=False).items()
                   if k in defaults and not _same(defaults[k], v)]
        return f"{type(self).__name__}({', '.join(changed)})"

    # -- input checks shared by every estimator -----------------------------------------------

    def _validate_X(self, X, *, reset: bool, **convert):
        """``X`` converted by :func:`~torchfw.utils.data.as_matrix` (``convert`` its options).

        ``reset=True`` (in ``fit``) records ``n_features_in_`` and, for a DataFrame with string
        column names, ``feature_names_in_``. ``reset=False`` (every method called after ``fit``)
        raises :class:`~torchfw.exceptions.NotFittedError` before ``fit`` and a ValueError when
        the number of columns or their names (a reordered or renamed DataFrame) differ from
        ``fit``'s, as scikit-learn does.
        """
        if not reset:
            check_is_fitted(self, "n_features_in_")
        names = feature_names_of(X)
        tensor = as_matrix(X, **convert)
        self._check_features(int(tensor.shape[1]), names, reset=reset)
        return tensor

    def _check_features(self, n_features: int, names, *, reset: bool) -> None:
        """Record (``reset``) or enforce the number and names of the columns of ``X``."""
        cls = type(self).__name__
        if reset:
            self.n_features_in_ = n_features
            if names is not None:
                self.feature_names_in_ = names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and names is not None:
            if len(fitted) != len(names) or (fitted != names).any():
                unseen = [c for c in names if c not in set(fitted)]
                missing = [c for c in fitted if c not in set(names)]
                detail = (f"; unseen at fit time: {unseen}" if unseen else "") + \
                    (f"; seen at fit time, yet now missing: {missing}" if missing else "")
                if not detail:
                    detail = "; the same names in another order (reorder the columns as at fit)"
                raise ValueError(f"The feature names should match those that were passed "
                                 f"during fit{detail}. {cls} was fitted with columns "
                                 f"{list(fitted)}")
        elif fitted is not None:
            warnings.warn(f"X does not have valid feature names, but {cls} was fitted with "
                          f"feature names", UserWarning, stacklevel=4)
        elif names is not None:
            warnings.warn(f"X has feature names, but {cls} was fitted without feature names",
                          UserWarning, stacklevel=4)
        if n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {cls} is expecting "
                             f"{self.n_features_in_} features as input.")

    # -- scikit-learn tags ---------------------------------------------------------------------

    @property
    def _estimator_type(self):  # scikit-learn < 1.6
        return self._estimator_kind

    def __sklearn_tags__(self):  # scikit-learn >= 1.6 (only called with scikit-learn present)
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        return Tags(
            estimator_type=self._estimator_kind,
            target_tags=TargetTags(required=True),
            transformer_tags=None,
            classifier_tags=ClassifierTags() if self._estimator_kind == "classifier" else None,
            regressor_tags=RegressorTags() if self._estimator_kind == "regressor" else None,
            input_tags=InputTags(sparse=True),
        )


def _same(a, b) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # tensors, arrays: never "equal" to a default
        return a is b


def fit_atomically(estimator, fit, *args, **kwargs):
    """Run ``fit(work, *args, **kwargs)`` on a shallow copy ``work`` of ``estimator``; adopt it.

    A fit sets many attributes one after another (``classes_``, ``n_features_in_``, the kernel,
    then the coefficients). Done on the estimator itself, an exception or a ``KeyboardInterrupt``
    in between would leave a fitted estimator half-updated: new classes on old support
    vectors, predicting silently. The fit runs on a copy instead, and its attributes replace
    the estimator's in one assignment (``__dict__``) once it has finished: a fit that does not
    finish leaves the estimator exactly as it was (fitted or not). Warm starts read the
    previous solution from the copy, which shares it.
    """
    work = copy.copy(estimator)
    fit(work, *args, **kwargs)
    estimator.__dict__ = work.__dict__  # one step: no signal can land between two attributes
    return estimator


def atomic_fit(fit):
    """Decorator of an estimator's ``fit``: run it through :func:`fit_atomically`."""
    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        return fit_atomically(self, fit, *args, **kwargs)

    return wrapper


def check_is_fitted(estimator, attribute: str) -> None:
    """Raise :class:`~torchfw.exceptions.NotFittedError` unless ``estimator`` has ``attribute``."""
    if not hasattr(estimator, attribute):
        raise exceptions.NotFittedError(f"This {type(estimator).__name__} instance is not "
                                        f"fitted yet. Call 'fit' with appropriate arguments "
                                        f"before using this estimator.")


def plain(value):
    """``value`` as plain Python data that ``torch.load(weights_only=True)`` accepts.

    Parameters often arrive as NumPy scalars (``C=np.float64(2)``, grids from ``np.logspace``);
    dtypes and devices are stored by name.
    """
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def load_state(path, fmt: str) -> dict:
    """The state dict saved at ``path`` by a torchfw estimator of format ``fmt``.

    Read with ``torch.load(weights_only=True)`` (tensors and plain values only: no pickled code
    runs). A file that torch cannot read, or that holds something other than a torchfw model,
    or a model of another estimator, is refused with a ValueError saying which.
    """
    from .readable import check_readable

    if isinstance(path, (str, os.PathLike)):  # not a device or a FIFO: those may never end
        check_readable(path, "model file", stdin=False)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as exc:  # noqa: BLE001 - any unreadable content means "not our file"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path} is not a torchfw model file: torch.load(weights_only=True) "
                         f"could not read it ({reason[:200]})") from None
    found = state.get("format") if isinstance(state, dict) else None
    if not (isinstance(found, str) and found.startswith("torchfw.")):
        raise ValueError(f"{path} is not a torchfw model file (not a {fmt}, nor another "
                         f"torchfw model): it holds a {type(state).__name__} without a torchfw "
                         "'format' entry")
    if found != fmt:
        raise ValueError(f"{path} holds a {found} model, not a {fmt}; load it with "
                         f"{found}.load")
    return state
