"""scikit-learn conventions without importing scikit-learn.

:class:`BaseEstimator` gives ``get_params``/``set_params`` (read from ``__init__``'s signature, so
``__init__`` must only store its arguments), a readable ``repr``, and the tags scikit-learn
asks for, so that ``clone``, ``GridSearchCV`` and ``cross_val_score`` work on torchfw estimators.
"""

from __future__ import annotations

import inspect

__all__ = ["BaseEstimator", "NotFittedError", "check_is_fitted"]


class NotFittedError(ValueError, AttributeError):
    """Raised when an estimator is used before ``fit`` (same bases as scikit-learn's)."""


class BaseEstimator:
    """Parameter handling shared by all torchfw estimators."""

    #: "classifier" or "regressor": what scikit-learn's meta-estimators should expect.
    _estimator_kind: str | None = None

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
        out = {}
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


def check_is_fitted(estimator, attribute: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet; call fit "
                             f"first")
