"""Command line: LIBSVM-style ``train`` / ``predict``, and a ``demo``.

::

    python -m torchfw train [options] training_file [model_file]
    python -m torchfw predict test_file model_file [output_file]
    python -m torchfw demo

``train`` mirrors LIBSVM's ``svm-train`` flags where they mean the same thing (``-t`` kernel
type, ``-d`` degree, ``-g`` gamma, ``-r`` coef0, ``-c`` cost, ``-m`` cache size in MB, ``-e``
tolerance, ``-wi`` class weights, ``-v`` cross-validation folds, ``-q`` quiet) and adds
``--solver``, ``--device`` and ``--max-iter``. Models are saved as tensors and plain values
(loaded with ``torch.load(weights_only=True)``: no arbitrary unpickling).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]

_KERNEL_TYPES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid",
                 "linear": "linear", "poly": "poly", "rbf": "rbf", "sigmoid": "sigmoid"}


def _train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m torchfw train",
                                description="Train a kernel SVM (L2-SVM) by Frank-Wolfe.",
                                epilog="-wLABEL WEIGHT: multiply C by WEIGHT for class LABEL "
                                       "(repeatable), as in LIBSVM's svm-train.")
    p.add_argument("training_file")
    p.add_argument("model_file", nargs="?")
    p.add_argument("-t", dest="kernel", default="2",
                   help="kernel: 0/linear, 1/poly, 2/rbf (default), 3/sigmoid")
    p.add_argument("-d", dest="degree", type=int, default=3, help="degree (poly)")
    p.add_argument("-g", dest="gamma", default="scale",
                   help="gamma: a number, 'scale' (default) or 'auto'")
    p.add_argument("-r", dest="coef0", type=float, default=0.0, help="coef0 (poly/sigmoid)")
    p.add_argument("-c", dest="C", type=float, default=1.0, help="cost C (default 1)")
    p.add_argument("-m", dest="cache_size", type=float, default=200.0,
                   help="kernel column cache in MB (default 200)")
    p.add_argument("-e", dest="tol", type=float, default=0.3,
                   help="tolerance: relative duality gap (default 0.3, see the docs)")
    p.add_argument("-v", dest="folds", type=int, default=0, help="n-fold cross-validation")
    p.add_argument("-q", dest="quiet", action="store_true", help="quiet mode")
    p.add_argument("--solver", default="swap",
                   help="fw, away, pairwise, swap (default), swap2, partan, fc, sfw, msfw")
    p.add_argument("--device", default=None, help="cpu (default) or cuda[:k]")
    p.add_argument("--max-iter", type=int, default=None)
    p.add_argument("--last-iterate", action="store_true",
                   help="sfw/msfw: keep the last iterate, as seed 001 prints the algorithm, "
                        "instead of the mean of the second half of the run (the default)")
    p.add_argument("--seed", type=int, default=0)
    return p


def _parse_weights(argv: list[str]) -> tuple[list[str], dict]:
    """Pull LIBSVM's ``-wLABEL WEIGHT`` pairs out of ``argv``."""
    rest, weights = [], {}
    it = iter(range(len(argv)))
    for k in it:
        arg = argv[k]
        if arg.startswith("-w") and len(arg) > 2 and k + 1 < len(argv):
            weights[arg[2:]] = float(argv[k + 1])
            next(it, None)
        else:
            rest.append(arg)
    return rest, weights


def _label_key(labels: np.ndarray, text: str):
    """Match a ``-w`` label given as text against the numeric labels of the file."""
    for label in labels:
        if float(label) == float(text):
            return label
    raise SystemExit(f"error: -w{text}: no class {text!r} in the training file")


def _load(path: str, n_features=None):
    from .datasets import load_svmlight

    try:
        return load_svmlight(path, n_features=n_features)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None


def train(argv: list[str]) -> int:
    from .svm import SVC

    argv, weights = _parse_weights(argv)
    args = _train_parser().parse_args(argv)
    kernel = _KERNEL_TYPES.get(args.kernel)
    if kernel is None:
        raise SystemExit(f"error: unknown kernel type -t {args.kernel}")
    gamma = args.gamma if args.gamma in ("scale", "auto") else float(args.gamma)
    X, y = _load(args.training_file)
    labels = np.unique(y.numpy())
    class_weight = {_label_key(labels, k): v for k, v in weights.items()} or None
    params = dict(kernel=kernel, C=args.C, gamma=gamma, degree=args.degree, coef0=args.coef0,
                  solver=args.solver, tol=args.tol, max_iter=args.max_iter,
                  cache_size=args.cache_size, device=args.device, class_weight=class_weight,
                  random_state=args.seed, verbose=not args.quiet,
                  average=not args.last_iterate)
    if args.folds:
        return _cross_validate(SVC(**params), X, y.numpy(), args.folds, args.seed)
    start = time.perf_counter()
    model = SVC(**params).fit(X, y.numpy())
    elapsed = time.perf_counter() - start
    out = args.model_file or Path(args.training_file).name + ".model"
    model.save(out)
    results = model.result_ if isinstance(model.result_, list) else [model.result_]
    print(f"optimization finished: {len(model.classes_)} classes, {len(model.support_)} "
          f"support vectors, iterations {sum(r.n_iter for r in results)}, "
          f"{elapsed:.2f} s; status {', '.join(str(r.status) for r in results)}")
    print(f"model saved to {out}")
    return 0


def _cross_validate(model, X, y, folds: int, seed: int) -> int:
    from ._data import take_rows
    from ._estimator import BaseEstimator

    if folds < 2:
        raise SystemExit("error: -v needs at least 2 folds")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    correct = 0
    for fold in np.array_split(order, folds):
        train_idx = np.setdiff1d(order, fold)
        est = type(model)(**BaseEstimator.get_params(model, deep=False))
        est.set_params(verbose=False)
        import torch

        est.fit(take_rows(X, torch.from_numpy(train_idx)), y[train_idx])
        correct += int((est.predict(take_rows(X, torch.from_numpy(fold))) == y[fold]).sum())
    print(f"Cross Validation Accuracy = {100.0 * correct / len(y):g}%")
    return 0


def predict(argv: list[str]) -> int:
    from .svm import SVC

    p = argparse.ArgumentParser(prog="python -m torchfw predict",
                                description="Predict with a model saved by `train`.")
    p.add_argument("test_file")
    p.add_argument("model_file")
    p.add_argument("output_file", nargs="?")
    p.add_argument("--device", default=None)
    args = p.parse_args(argv)
    try:
        model = SVC.load(args.model_file, map_location=args.device)
    except (OSError, ValueError, RuntimeError) as exc:
        raise SystemExit(f"error: cannot load model {args.model_file}: {exc}") from None
    X, y = _load(args.test_file, n_features=model.n_features_in_)
    if X.shape[1] > model.n_features_in_:
        raise SystemExit(f"error: {args.test_file} has {X.shape[1]} features, the model "
                         f"{model.n_features_in_}")
    pred = model.predict(X)
    truth = y.numpy()
    correct = int((pred == truth).sum())
    print(f"Accuracy = {100.0 * correct / len(truth):g}% ({correct}/{len(truth)}) "
          f"(classification)")
    if args.output_file:
        with open(args.output_file, "w") as fh:
            fh.writelines(f"{label:g}\n" for label in pred.astype(float))
    return 0


def demo(argv: list[str]) -> int:
    import torch

    from .datasets import make_classification_blobs
    from .svm import SVC

    p = argparse.ArgumentParser(prog="python -m torchfw demo",
                                description="Train every solver on generated data.")
    p.add_argument("--n", type=int, default=4000, help="training examples")
    p.add_argument("--device", default=None)
    args = p.parse_args(argv)
    X, y = make_classification_blobs(args.n, 2, pattern="rings", noise=0.15, random_state=0)
    Xt, yt = make_classification_blobs(args.n, 2, pattern="rings", noise=0.15, random_state=1)
    print(f"torchfw demo: RBF SVM on {args.n} generated examples (two noisy rings), "
          f"device {args.device or 'cpu'}, torch {torch.__version__}")
    # The first fit compiles the CPU kernels (numba); keep that out of the timings.
    SVC(C=10.0, gamma=2.0, random_state=0, device=args.device).fit(X[:200], y[:200])
    print(f"{'solver':10s} {'fit (s)':>8s} {'test acc':>9s} {'iters':>7s} {'SVs':>6s}")
    for solver in ("fw", "away", "pairwise", "swap", "swap2", "partan", "sfw", "msfw"):
        model = SVC(solver=solver, C=10.0, gamma=2.0, random_state=0, device=args.device,
                    max_iter=args.n if solver in ("sfw", "msfw") else None)
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
        print(f"{solver:10s} {elapsed:8.2f} {100 * model.score(Xt, yt):8.2f}% "
              f"{model.n_iter_:7d} {len(model.support_):6d}")
    try:
        from sklearn.svm import SVC as SkSVC
    except ImportError:
        return 0
    start = time.perf_counter()
    sk = SkSVC(C=10.0, gamma=2.0).fit(X.numpy(), y.numpy())
    elapsed = time.perf_counter() - start
    acc = (sk.predict(Xt.numpy()) == yt.numpy()).mean()
    print(f"{'sklearn':10s} {elapsed:8.2f} {100 * acc:8.2f}%       - {sk.n_support_.sum():6d}"
          f"   (scikit-learn SVC, for reference)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"train": train, "predict": predict, "demo": demo}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return commands[argv[0]](argv[1:])
