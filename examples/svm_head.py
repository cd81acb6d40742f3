"""Replace a network's linear classifier by an SVM head fitted on its features, then export it.

Data: scikit-learn's bundled 8x8 digits (1,797 images, 10 classes; no download), split 75/25.

Steps:

1. Train a small MLP backbone (64 -> 128 -> 32, ReLU) with its own linear layer on top
   (cross-entropy, Adam) for ``--epochs`` epochs.
2. Freeze the backbone and fit heads on its 32-d training features:

   * an RBF kernel SVM, ``torchfw.SVC`` (one-vs-rest), through :func:`torchfw.heads.fit_head`,
     which runs the backbone over a DataLoader and returns ``SVC.as_module()``;
   * a linear Weston-Watkins multiclass SVM, ``torchfw.WestonWatkinsSVC``, on features from
     :func:`torchfw.heads.extract_features`, its head from ``WestonWatkinsSVC.as_module()``.

3. Compare test accuracy of the three heads on the same backbone.
4. Compose ``nn.Sequential(backbone, head)`` for each SVM head and export it with
   ``torch.export`` (dynamic batch size; saved with ``torch.export.save``) and with TorchScript
   (``torch.jit.script``; saved with ``torch.jit.save``). Each saved file is loaded back and its
   outputs on the test set are compared with the eager model's.

Usage::

    python examples/svm_head.py                      # files in examples/output/
    python examples/svm_head.py --epochs 50 --out /tmp/heads
    python examples/svm_head.py --quick              # a few seconds of training (for the tests)
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import torchfw
from torchfw.heads import extract_features, fit_head

DEFAULT_OUT = Path(__file__).resolve().parent / "output"


def load_digits_split(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, stratify=y,
                                              random_state=seed)
    # Pixel intensities are 0..16: scale to [0, 1].
    to_x = lambda a: torch.tensor(a / 16.0, dtype=torch.float32)  # noqa: E731
    to_y = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
    return to_x(X_tr), to_y(y_tr), to_x(X_te), to_y(y_te)


def make_backbone(seed: int, width: int = 128, features: int = 32) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, features), nn.ReLU())


def train_backbone(backbone: nn.Module, linear: nn.Linear, X, y, epochs: int, seed: int):
    model = nn.Sequential(backbone, linear)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    model.eval()
    return model


@torch.no_grad()
def accuracy(model: nn.Module, X, y) -> float:
    return float((model(X).argmax(1) == y).float().mean())


def check_export(name: str, model: nn.Module, X_example, X_test, out_dir: Path):
    """Export ``model`` both ways, save, load back, and compare with eager on ``X_test``."""
    model.eval()
    with torch.no_grad():
        expected = model(X_test)
    rows = []

    def compare(loaded) -> float:
        with torch.no_grad():
            got = loaded(X_test)
        if got.shape != expected.shape:
            raise AssertionError(f"shape {tuple(got.shape)} != eager {tuple(expected.shape)}")
        if not torch.equal(got.argmax(1), expected.argmax(1)):
            raise AssertionError("predicted classes differ from eager")
        return float((got - expected).abs().max())

    # torch.export: an ahead-of-time graph with a symbolic batch dimension.
    path = out_dir / f"svm_head_{name}.pt2"
    try:
        batch = torch.export.Dim("batch")
        program = torch.export.export(model, (X_example,), dynamic_shapes=({0: batch},))
        torch.export.save(program, path)
        diff = compare(torch.export.load(path).module())
        rows.append(("torch.export", "ok", diff, path))
    except Exception as exc:  # report and go on: the other path may still work
        rows.append(("torch.export", f"FAILED: {type(exc).__name__}: {exc}"[:200], None, None))

    # TorchScript: scripted (not traced), so the head's predict_index survives too.
    path = out_dir / f"svm_head_{name}.torchscript.pt"
    try:
        scripted = torch.jit.script(model)
        torch.jit.save(scripted, path)
        diff = compare(torch.jit.load(path))
        rows.append(("TorchScript", "ok", diff, path))
    except Exception as exc:
        rows.append(("TorchScript", f"FAILED: {type(exc).__name__}: {exc}"[:200], None, None))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30, help="backbone training epochs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--C", type=float, default=10.0, help="C of the RBF SVC head")
    parser.add_argument("--ww-C", type=float, default=0.01,
                        help="C of the Weston-Watkins head (the features have squared norms of "
                             "a few hundred, so a small C)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run (3 epochs, capped Weston-Watkins epochs) for the tests")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"folder for the exported models (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    epochs = 3 if args.quick else args.epochs
    ww_max_iter = 50 if args.quick else 1000

    X_tr, y_tr, X_te, y_te = load_digits_split(args.seed)
    backbone = make_backbone(args.seed)
    linear = nn.Linear(backbone[2].out_features, 10)
    start = time.perf_counter()
    model = train_backbone(backbone, linear, X_tr, y_tr, epochs, args.seed)
    train_time = time.perf_counter() - start
    for p in backbone.parameters():
        p.requires_grad_(False)

    # The loader the heads are fitted from: the training set, in order, no augmentation.
    loader = DataLoader(TensorDataset(X_tr, y_tr), batch_size=256)
    results = [("linear (trained with backbone)", accuracy(model, X_te, y_te), train_time,
                f"{linear.weight.numel() + linear.bias.numel()} weights")]

    start = time.perf_counter()
    svc = torchfw.SVC(kernel="rbf", C=args.C, random_state=args.seed)
    svc_head = fit_head(svc, backbone, loader)
    svc_time = time.perf_counter() - start
    # classes_ are the digits 0..9, so the head's column index is the label itself.
    assert np.array_equal(svc.classes_, np.arange(10))
    svc_model = nn.Sequential(backbone, svc_head).eval()
    results.append(("RBF SVC (fit_head)", accuracy(svc_model, X_te, y_te), svc_time,
                    f"{svc_head.support_vectors.shape[0]} SVs"))

    start = time.perf_counter()
    features, labels = extract_features(backbone, loader)
    ww = torchfw.WestonWatkinsSVC(C=args.ww_C, max_iter=ww_max_iter, random_state=args.seed)
    with warnings.catch_warnings():
        if args.quick:  # the capped run may stop before the gap rule
            warnings.simplefilter("ignore", torchfw.exceptions.ConvergenceWarning)
        ww.fit(features, labels.numpy())
    ww_head = ww.as_module()  # a LinearHead with the fitted coef_ and intercept_
    ww_time = time.perf_counter() - start
    assert np.array_equal(ww.classes_, np.arange(10))
    ww_model = nn.Sequential(backbone, ww_head).eval()
    results.append(("Weston-Watkins SVM (linear)", accuracy(ww_model, X_te, y_te), ww_time,
                    f"{ww.n_iter_} epochs"))

    print(f"digits: {len(X_tr)} train / {len(X_te)} test; backbone MLP 64-128-32 (ReLU), "
          f"{epochs} epochs of Adam")
    header = f"{'head on the backbone':<32} {'test acc':>8} {'fit (s)':>8}  size"
    print(header)
    print("-" * (len(header) + 12))
    for name, acc, seconds, size in results:
        print(f"{name:<32} {acc:>8.4f} {seconds:>8.2f}  {size}")

    args.out.mkdir(parents=True, exist_ok=True)
    print()
    header = f"{'export':<28} {'path':<13} {'status':<6} {'max |out - eager|':>17}  file"
    print(header)
    print("-" * (len(header) + 20))
    exports = {}
    for name, composed in (("svc", svc_model), ("ww", ww_model)):
        rows = check_export(name, composed, X_te[:8], X_te, args.out)
        exports[name] = rows
        for path_name, status, diff, file in rows:
            label = f"Sequential(backbone, {name})"
            if diff is None:
                print(f"{label:<28} {path_name:<13} {status}")
            else:
                print(f"{label:<28} {path_name:<13} {status:<6} {diff:>17.2e}  {file}")
    return {"accuracy": {name: acc for name, acc, _, _ in results}, "exports": exports}


if __name__ == "__main__":
    main()
