"""Command line: LIBSVM-style ``train`` / ``predict``, and a ``demo``.

``train`` takes ``svm-train``'s options with LIBSVM's meaning where they apply to a C-SVM, and
``predict`` takes ``svm-predict``'s. Every error is one line starting with ``error:`` (exit
status 1; 2 for a usage error), never a traceback. Models are saved as tensors and plain values
(loaded with ``torch.load(weights_only=True)``: no arbitrary unpickling) or, with
``--format libsvm``, as LIBSVM model files; ``predict`` reads both.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from .result import problem_results
from .solvers import SOLVERS, solver_names

__all__ = ["main", "CLIError"]

USAGE = """\
usage: python -m torchfw COMMAND [options]

commands:
  train [options] training_set_file [model_file]
        train a kernel SVM by Frank-Wolfe (svm-train's options; see `train --help`)
  predict [options] test_file model_file [output_file]
        predict with a model saved by `train` or by LIBSVM's svm-train
  svm-train [options] training_set_file [model_file]
        LIBSVM's svm-train itself: its model (the L1-SVM), its C, gamma and epsilon defaults
        and its model file; the `torchfw-svm-train` script (for tools/grid.py's -svmtrain)
  svm-predict [options] test_file model_file output_file
        LIBSVM's svm-predict (`torchfw-svm-predict`)
  demo  train every solver on generated data and compare with scikit-learn
  warmup  compile the CPU kernels of the common fits into numba's cache now (right after an
        install the first fits run uncompiled while a background process does this)
  --version   print the version and exit
  --help      print this help and exit
"""

TRAIN_HELP = """\
usage: python -m torchfw train [options] training_set_file [model_file]

options (LIBSVM's svm-train meaning where they apply):
  -s svm_type : 0 -- C-SVC (the only type: torchfw trains the L2-SVM dual, see the docs)
  -t kernel_type : 0 -- linear: u'v
                   1 -- polynomial: (gamma*u'v + coef0)^degree
                   2 -- radial basis function: exp(-gamma*|u-v|^2) (default)
                   3 -- sigmoid: tanh(gamma*u'v + coef0)
                   4 -- precomputed kernel (kernel values in the training file, LIBSVM's
                        format: label 0:i 1:K(xi,x1) ... m:K(xi,xm); test files
                        label 0:? 1:K(x,x1) ... m:K(x,xm))
  -d degree : degree of the polynomial kernel (default 3)
  -g gamma : a number, 'scale' (default, as scikit-learn) or 'auto' (1/num_features,
             LIBSVM's default)
  -r coef0 : coef0 of the polynomial and sigmoid kernels (default 0)
  -c cost : C, the seed papers' (default 2: LIBLINEAR's C=1 for the squared hinge);
            with --loss hinge LIBSVM's C (default 1)
  -m cachesize : kernel cache in MB (default 200)
  -e epsilon : tolerance: duality gap relative to the margin (default 'auto': 0.3,
               0.1 below 1,000 examples; see the docs); with --loss hinge LIBSVM's
               maximal violation (default 0.001)
  -h shrinking : 0 or 1; with --loss hinge LIBSVM's shrinking (default 1), otherwise
                 accepted for compatibility (Frank-Wolfe on the simplex has no shrinking)
  -b probability_estimates : 1 to fit Platt probabilities by internal 5-fold CV (default 0)
  -wi weight : multiply C by weight for class i (repeatable)
  -v n : n-fold cross validation: print the accuracy, save no model
  -q : quiet mode (no progress output)
torchfw's own options:
  --loss NAME : squared_hinge (default: the L2-SVM by Frank-Wolfe on the simplex) or
                hinge (LIBSVM's own model, the L1-SVM, by pairwise Frank-Wolfe steps with
                LIBSVM's pair selection; --solver does not apply)
  --solver NAME : {solvers}
  --device DEV : cpu (default) or cuda[:k]
  --max-iter N : iteration budget
  --seed N : random seed (default 0)
  --last-iterate : sfw/msfw keep the last iterate instead of the tail average
  --format {torchfw,libsvm} : model file format (default torchfw)
""".replace("{solvers}", ", ".join(
    f"{name} (default)" if name == "swap" else name for name in solver_names("svc")))

SVM_TRAIN_HELP = """\
usage: torchfw-svm-train [options] training_set_file [model_file]
       (or python -m torchfw svm-train ...)

LIBSVM's svm-train, trained by torchfw: `train` with LIBSVM's own model and defaults, so that
scripts and tools written for svm-train (tools/grid.py's -svmtrain, easy.py) run unchanged:
  the model is LIBSVM's L1-SVM (--loss hinge): -c is LIBSVM's C (default 1) and -e its
  stopping tolerance (default 0.001); -g defaults to 1/num_features (LIBSVM's, not 'scale');
  the model file is a LIBSVM model file (--format libsvm), readable by LIBSVM's svm-predict;
  -v n prints "Cross Validation Accuracy = x%" as svm-train does.
Every option of `train` is accepted and a given option wins over these defaults; see
`python -m torchfw train --help` for the list.
"""

SVM_PREDICT_HELP = """\
usage: torchfw-svm-predict [options] test_file model_file output_file
       (or python -m torchfw svm-predict ...)

LIBSVM's svm-predict: `predict` with the output file required, as svm-predict has it.
Reads LIBSVM model files and torchfw's own; see `python -m torchfw predict --help`.
"""

#: The options that make `train` svm-train: LIBSVM's model, its gamma and its model file.
#: Prepended to the user's arguments, so any option the user gives wins (the last one counts).
SVM_TRAIN_DEFAULTS = ("--loss", "hinge", "-g", "auto", "--format", "libsvm")

PREDICT_HELP = """\
usage: python -m torchfw predict [options] test_file model_file [output_file]

options:
  -b probability_estimates : 1 to write class probabilities (the model must have them)
  -q : quiet mode (no accuracy line)
  --device DEV : cpu (default) or cuda[:k]
"""

_KERNEL_TYPES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid", "4": "precomputed",
                 "linear": "linear", "poly": "poly", "rbf": "rbf", "sigmoid": "sigmoid",
                 "precomputed": "precomputed"}
_NOT_C_SVC = {"1": "nu-SVC", "2": "one-class SVM", "3": "epsilon-SVR", "4": "nu-SVR"}


class CLIError(Exception):
    """A user error: printed as one ``error:`` line."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def _number(option: str, text: str, kind=float, minimum=None, exclusive=False):
    try:
        value = kind(text)
    except ValueError:
        raise CLIError(f"{option} {text}: not a{'n integer' if kind is int else ' number'}",
                       2) from None
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
        raise CLIError(f"{option} {text}: must be {bound}", 2)
    return value


def _parse_options(argv: list[str], takes_value: set[str], flags: set[str],
                   n_positional: tuple, help_text: str) -> tuple[dict, list[str], dict]:
    """LIBSVM-style option parsing: ``-x value`` pairs before the positional arguments."""
    opts: dict[str, str | bool] = {}  # a value, or True for a flag
    weights: dict[str, float] = {}
    positional: list[str] = []
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg in ("--help", "-?"):
            print(help_text, end="")
            raise SystemExit(0)
        if positional or not arg.startswith("-") or arg == "-":
            positional.append(arg)
            k += 1
            continue
        if arg in flags:
            opts[arg] = True
            k += 1
            continue
        if arg.startswith("-w") and not arg.startswith("--") and len(arg) > 2:
            name = arg
        elif arg in takes_value:
            name = arg
        else:
            raise CLIError(f"unknown option {arg} (see --help)", 2)
        if k + 1 >= len(argv):
            raise CLIError(f"option {arg} needs a value", 2)
        value = argv[k + 1]
        if name.startswith("-w") and name not in takes_value:
            weights[name[2:]] = _number(name, value, minimum=0.0, exclusive=True)
        else:
            opts[name] = value
        k += 2
    lo, hi = n_positional
    if not lo <= len(positional) <= hi:
        raise CLIError(f"expected {lo}{'-' + str(hi) if hi > lo else ''} file arguments, got "
                       f"{len(positional)} (see --help)", 2)
    return opts, positional, weights


def _label_key(labels: np.ndarray, text: str):
    """Match a ``-w`` label given as text against the numeric labels of the file."""
    for label in labels:
        if float(label) == float(text):
            return label
    raise CLIError(f"-w{text}: no class {text!r} in the training file")


def _load(path: str, n_features=None, zero_based="auto"):
    from .datasets import load_svmlight

    try:
        return load_svmlight(path, n_features=n_features, zero_based=zero_based)
    except (OSError, ValueError, OverflowError, MemoryError) as exc:
        raise CLIError(str(exc)) from None


def _kernel_values(X, path: str, m: int | None = None, extra_columns: bool = False):
    """The kernel values of a file in LIBSVM's precomputed format (``-t 4``), read zero-based.

    Column 0 holds the example's ID, columns ``1..m`` its kernel values against the ``m``
    training examples (zeros may be omitted, as in any LIBSVM file). A training file
    (``m=None``) has ``m`` rows with IDs ``1..m`` in order; a test file's IDs are not read.
    Columns past ``m`` are an error unless ``extra_columns`` (a model read from LIBSVM's file,
    which does not record ``m``: the columns past its last support vector are never read).
    """
    import torch

    dense = X.to_dense() if X.layout == torch.sparse_csr else X
    n_values = dense.shape[1] - 1
    if m is None:
        m = dense.shape[0]
        ids = dense[:, 0].double().numpy() if n_values >= 0 else np.zeros(0)
        wrong = np.flatnonzero(ids != np.arange(1, m + 1))
        if len(ids) != m or wrong.size:
            row = int(wrong[0]) + 1 if wrong.size else 1
            raise CLIError(f"{path}: -t 4 (precomputed kernel): line {row} must start with "
                           f"0:{row}, the example's ID (LIBSVM's format: label 0:i 1:K(xi,x1) "
                           f"... m:K(xi,xm))")
    if n_values > m and not extra_columns:
        raise CLIError(f"{path}: -t 4 (precomputed kernel): kernel values up to column "
                       f"{n_values} for {m} training examples")
    values = dense[:, 1:m + 1]
    if values.shape[1] < m:  # trailing zeros left out of the file
        values = torch.cat([values, values.new_zeros(values.shape[0], m - values.shape[1])], 1)
    return values.contiguous()


def _check_classification_labels(y: np.ndarray, path: str) -> None:
    """A regression file (many non-integer targets) is not a classification problem."""
    if y.size and not np.all(np.isfinite(y)):
        raise CLIError(f"{path}: labels must be finite numbers")
    if y.size and not np.all(y == np.round(y)):
        raise CLIError(f"{path}: labels are not class labels (non-integer values such as "
                       f"{y[y != np.round(y)][0]:g}: a regression file?); C-SVC needs integer "
                       "class labels")


def train(argv: list[str], help_text: str = TRAIN_HELP) -> int:
    takes_value = {"-s", "-t", "-d", "-g", "-r", "-c", "-n", "-p", "-m", "-e", "-h", "-b",
                   "-v", "--solver", "--device", "--max-iter", "--seed", "--format", "--loss"}
    opts, files, weights = _parse_options(argv, takes_value, {"-q", "--last-iterate"}, (1, 2),
                                          help_text)
    svm_type = opts.get("-s", "0")
    if svm_type in _NOT_C_SVC:
        raise CLIError(f"-s {svm_type} ({_NOT_C_SVC[svm_type]}) is not available: torchfw "
                       "trains C-SVC (-s 0) only", 2)
    if svm_type != "0":
        raise CLIError(f"-s {svm_type}: unknown svm_type (0 is C-SVC)", 2)
    for option, meaning in (("-n", "nu"), ("-p", "epsilon of epsilon-SVR")):
        if option in opts:
            raise CLIError(f"{option} ({meaning}) does not apply to C-SVC", 2)
    kernel = _KERNEL_TYPES.get(opts.get("-t", "2"))
    if kernel is None:
        raise CLIError(f"-t {opts['-t']}: unknown kernel type (0-4)", 2)
    gamma_text = opts.get("-g", "scale")
    gamma = gamma_text if gamma_text in ("scale", "auto") else \
        _number("-g", gamma_text, minimum=0.0, exclusive=True)
    shrinking = opts.get("-h", "1")
    if shrinking not in ("0", "1"):
        raise CLIError(f"-h {shrinking}: shrinking is 0 or 1", 2)
    probability = opts.get("-b", "0")
    if probability not in ("0", "1"):
        raise CLIError(f"-b {probability}: probability_estimates is 0 or 1", 2)
    loss = opts.get("--loss", "squared_hinge")
    if loss not in ("squared_hinge", "hinge"):
        raise CLIError(f"--loss {loss}: expected squared_hinge or hinge", 2)
    fmt = opts.get("--format", "torchfw")
    if fmt not in ("torchfw", "libsvm"):
        raise CLIError(f"--format {fmt}: expected torchfw or libsvm", 2)
    folds = _number("-v", opts["-v"], int, minimum=2) if "-v" in opts else 0
    max_iter = _number("--max-iter", opts["--max-iter"], int, minimum=1) \
        if "--max-iter" in opts else None
    seed = _number("--seed", opts.get("--seed", "0"), int, minimum=0)
    default_c = "1" if loss == "hinge" else "2"  # LIBSVM's default C for its own model
    params = dict(kernel=kernel,
                  C=_number("-c", opts.get("-c", default_c), minimum=0.0, exclusive=True),
                  gamma=gamma, degree=_number("-d", opts.get("-d", "3"), int, minimum=1),
                  coef0=_number("-r", opts.get("-r", "0")),
                  solver=opts.get("--solver", "swap"),
                  tol="auto" if opts.get("-e", "auto") == "auto" else
                  _number("-e", opts["-e"], minimum=0.0, exclusive=True),
                  max_iter=max_iter,
                  cache_size=_number("-m", opts.get("-m", "200"), minimum=0.0, exclusive=True),
                  device=opts.get("--device"), random_state=seed,
                  verbose=not opts.get("-q", False),
                  average=not opts.get("--last-iterate", False))
    if probability == "1":
        params["probability"] = True
    if loss == "hinge":
        params.update(loss="hinge", shrinking=shrinking == "1")
    if kernel == "precomputed":  # the compiled solve it takes has no progress bar
        params["verbose"] = False

    from .svm.estimator import SVC

    try:
        SVC(**params)._check_params()
    except (TypeError, ValueError) as exc:
        raise CLIError(str(exc), 2) from None
    if not folds:  # before the fit, not after it: the model file must be writable
        _check_output(files[1] if len(files) > 1 else Path(files[0]).name + ".model")
    if kernel == "precomputed":
        X, y = _load(files[0], zero_based=True)
        X = _kernel_values(X, files[0])
    else:
        X, y = _load(files[0])
    y = y.numpy()
    _check_classification_labels(y, files[0])
    labels = np.unique(y)
    params["class_weight"] = {_label_key(labels, k): v for k, v in weights.items()} or None
    if fmt == "libsvm" and len(labels) > 2:  # LIBSVM's multiclass model is one-vs-one
        params["multi_class"] = "ovo"
    if folds:
        return _cross_validate(SVC(**params), X, y, folds, seed)
    start = time.perf_counter()
    model = SVC(**params).fit(X, y)
    elapsed = time.perf_counter() - start
    out = files[1] if len(files) > 1 else Path(files[0]).name + ".model"
    if fmt == "libsvm":
        from .io.libsvm_model import write_libsvm_model

        write_libsvm_model(model, out)  # both atomic: an old model at ``out`` survives errors
    else:
        model.save(out)
    results = problem_results(model.result_)
    if not opts.get("-q"):
        statuses = sorted({str(r.status) for r in results})
        print(f"optimization finished: {len(model.classes_)} classes, {len(model.support_)} "
              f"support vectors, iterations {sum(r.n_iter for r in results)}, "
              f"{elapsed:.2f} s; status {', '.join(statuses)}")
        print(f"model saved to {out}")
    return 0


def _check_output(path) -> None:
    """Refuse early an output path that cannot be written (a directory, a missing or read-only
    folder): training for minutes and failing to save is worse. The write itself is atomic and
    reports its own errors (:func:`torchfw.utils.atomic.atomic_write`)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise CLIError(f"cannot write {path!r}: Is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        return  # a device or a FIFO (/dev/stdout): written in place
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"cannot write {path!r}: No such directory {folder!r}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"cannot write {path!r}: Permission denied (the directory {folder!r} is "
                       f"not writable)")


def _cross_validate(model, X, y, folds: int, seed: int) -> int:
    import torch

    from .utils.data import take_rows

    if folds > len(y):
        raise CLIError(f"-v {folds}: more folds than the {len(y)} examples")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    correct = 0
    params = model.get_params(deep=False)
    params["verbose"] = False
    for fold in np.array_split(order, folds):
        train_idx = np.setdiff1d(order, fold)
        est = type(model)(**params)
        X_train = take_rows(X, torch.from_numpy(train_idx))
        X_fold = take_rows(X, torch.from_numpy(fold))
        if est.kernel == "precomputed":  # kernel values: the columns are examples too
            columns = torch.from_numpy(train_idx)
            X_train, X_fold = X_train[:, columns], X_fold[:, columns]
        est.fit(X_train, y[train_idx])
        correct += int((est.predict(X_fold) == y[fold]).sum())
    print(f"Cross Validation Accuracy = {100.0 * correct / len(y):g}%")
    return 0


def _is_libsvm_file(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(8) == b"svm_type"


def _load_model(path: str, device):
    from .svm.estimator import SVC
    from .utils.readable import check_readable

    try:
        with open(check_readable(path, "model file", stdin=False), "rb") as fh:
            head = fh.read(16)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot read model {path}: "
                       f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        if head.startswith(b"svm_type"):
            from .io.libsvm_model import read_libsvm_model

            return read_libsvm_model(path, device=device)
        return SVC.load(path, map_location=device)
    except Exception as exc:  # noqa: BLE001 - any file at all may be handed in: one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CLIError(f"cannot load model {path}: {reason}") from None


def _label_text(label) -> str:
    """A class label as LIBSVM's svm-predict prints it: ``%.17g`` (integers in full)."""
    return f"{float(label):.17g}"


def predict(argv: list[str], help_text: str = PREDICT_HELP, n_files: tuple = (2, 3)) -> int:
    opts, files, weights = _parse_options(argv, {"-b", "--device"}, {"-q"}, n_files, help_text)
    if weights:
        raise CLIError("predict takes no -w option", 2)
    probability = opts.get("-b", "0")
    if probability not in ("0", "1"):
        raise CLIError(f"-b {probability}: probability_estimates is 0 or 1", 2)
    if len(files) > 2:
        _check_output(files[2])
    model = _load_model(files[1], opts.get("--device"))
    if probability == "1" and not getattr(model, "probability", False):
        raise CLIError(f"model {files[1]} has no probability estimates (train it with -b 1)")
    if model.kernel == "precomputed":
        X, y = _load(files[0], zero_based=True)
        X = _kernel_values(X, files[0], model.n_features_in_,
                           extra_columns=_is_libsvm_file(files[1]))
    else:
        X, y = _load(files[0], n_features=model.n_features_in_)
    if X.shape[1] > model.n_features_in_:
        raise CLIError(f"{files[0]} has {X.shape[1]} features, the model "
                       f"{model.n_features_in_}")
    try:
        if probability == "1":
            proba = model.predict_proba(X)
            pred = model.classes_[np.argmax(proba, axis=1)]
        else:
            pred = model.predict(X)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    truth = y.numpy()
    correct = int((pred == truth).sum())
    if not opts.get("-q"):
        print(f"Accuracy = {100.0 * correct / max(1, len(truth)):g}% ({correct}/{len(truth)}) "
              f"(classification)")
    if len(files) > 2:
        from .utils.atomic import atomic_write

        # Labels as LIBSVM's svm-predict writes them (%.17g: 1234567, not 1.23457e+06).
        if probability == "1":
            lines = ["labels " + " ".join(_label_text(c) for c in model.classes_)]
            lines += [_label_text(label) + " " + " ".join(f"{p:g}" for p in row)
                      for label, row in zip(pred, proba, strict=True)]
        else:
            lines = [_label_text(label) for label in pred]
        atomic_write(files[2], "".join(line + "\n" for line in lines))
    return 0


def svm_train(argv: list[str]) -> int:
    """LIBSVM's ``svm-train``: :func:`train` with LIBSVM's model and defaults.

    Tools that call ``svm-train`` by path and read its output (LIBSVM's ``tools/grid.py`` with
    ``-svmtrain``, ``easy.py``) pass ``-c`` and ``-g`` in LIBSVM's meaning and parse the
    ``Cross Validation Accuracy = x%`` line. ``train``'s defaults are the L2-SVM's (``-c`` is the
    seed papers' C, gamma ``scale``), so such a search would compare another model at other
    parameters; here the model is LIBSVM's L1-SVM (``loss="hinge"``), gamma defaults to
    ``1/num_features`` and the model file is LIBSVM's. Any option the user gives wins.
    """
    return train([*SVM_TRAIN_DEFAULTS, *argv], help_text=SVM_TRAIN_HELP)


def svm_predict(argv: list[str]) -> int:
    """LIBSVM's ``svm-predict``: :func:`predict`, with the output file required as there."""
    return predict(argv, help_text=SVM_PREDICT_HELP, n_files=(3, 3))


def svm_train_script() -> int:
    """The ``torchfw-svm-train`` console script (an executable path for ``grid.py -svmtrain``)."""
    return main(["svm-train", *sys.argv[1:]])


def svm_predict_script() -> int:
    """The ``torchfw-svm-predict`` console script."""
    return main(["svm-predict", *sys.argv[1:]])


def demo(argv: list[str]) -> int:
    import torch

    from .datasets import make_classification_blobs
    from .svm.estimator import SVC

    opts, _, _ = _parse_options(argv, {"--n", "--device"}, set(), (0, 0),
                                "usage: python -m torchfw demo [--n N] [--device DEV]\n")
    n = _number("--n", opts.get("--n", "4000"), int, minimum=10)
    device = opts.get("--device")
    X, y = make_classification_blobs(n, 2, pattern="rings", noise=0.15, random_state=0)
    Xt, yt = make_classification_blobs(n, 2, pattern="rings", noise=0.15, random_state=1)
    print(f"torchfw demo: RBF SVM on {n} generated examples (two noisy rings), "
          f"device {device or 'cpu'}, torch {torch.__version__}")
    # The first fit compiles the CPU kernels (numba); keep that out of the timings.
    SVC(C=10.0, gamma=2.0, random_state=0, device=device).fit(X[:200], y[:200])
    from .utils import cold_start

    if cold_start.jit.HAVE_NUMBA and not cold_start.compiled_now():
        print("(numba's kernel cache is empty: these fits run on the PyTorch paths"
              + (" while a background `python -m torchfw warmup` compiles the kernels)"
                 if cold_start.policy() == "background" else
                 "; `python -m torchfw warmup` compiles the kernels)"))
    print(f"{'solver':10s} {'fit (s)':>8s} {'test acc':>9s} {'iters':>7s} {'SVs':>6s}")
    # Every solver of SVC but the fully corrective one, which the demo table never listed.
    for solver in (name for name in solver_names("svc") if name != "fc"):
        model = SVC(solver=solver, C=10.0, gamma=2.0, random_state=0, device=device,
                    max_iter=n if SOLVERS[solver].streaming else None)
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
        print(f"{solver:10s} {elapsed:8.2f} {100 * model.score(Xt, yt):8.2f}% "
              f"{int(np.sum(model.n_iter_)):7d} {len(model.support_):6d}")
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


def _warmup(argv: list[str]) -> int:
    from . import warmup

    return warmup.main(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m torchfw`` and the ``torchfw`` script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"train": train, "predict": predict, "svm-train": svm_train,
                "svm-predict": svm_predict, "demo": demo, "warmup": _warmup}
    if argv and argv[0] == "--version":
        from . import __version__

        print(f"torchfw {__version__}")
        return 0
    if not argv or argv[0] not in commands:
        if argv and argv[0] in ("-h", "--help", "help"):
            print(USAGE, end="")
            return 0
        print(USAGE, end="", file=sys.stderr)
        if argv:
            print(f"error: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    try:
        return commands[argv[0]](argv[1:])
    except CLIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except (ValueError, TypeError, RuntimeError, MemoryError) as exc:
        # Parameter or data errors raised by the estimator, or a resource the problem does not
        # fit in: one line, as for a file error. TORCHFW_TRACEBACK=1 shows the traceback.
        if os.environ.get("TORCHFW_TRACEBACK"):
            raise
        message = str(exc).strip().splitlines()
        print(f"error: {message[0] if message else type(exc).__name__}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        # A file the command writes or a stream it prints to failed: a read-only or full disk,
        # a directory given as a file, a pipe whose reader left (``predict ... | head -1``).
        if isinstance(exc, BrokenPipeError):
            _silence_stdout()
        if os.environ.get("TORCHFW_TRACEBACK"):
            raise
        print(f"error: {_os_error_text(exc)}", file=sys.stderr)
        return 1


def _os_error_text(exc: OSError) -> str:
    """One line naming the file (when known) and the cause of an OSError."""
    cause = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, BrokenPipeError) and not exc.filename:
        return f"{cause}: the output was closed before everything was written"
    name = exc.filename
    if name is not None and str(name) not in cause:
        return f"{name}: {cause}"
    return cause


def _silence_stdout() -> None:
    # The reader of stdout is gone: point stdout at /dev/null so that the interpreter's final
    # flush does not raise a second BrokenPipeError (Python's documented recipe).
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
