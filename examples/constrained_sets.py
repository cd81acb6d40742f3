"""Train an MLP with a nuclear-norm ball on one layer and a K-sparse polytope on the other.

Data: scikit-learn's bundled 8x8 digits (1,797 images, 10 classes; no download).

Constraints, through :class:`torchfw.optim.StochasticFrankWolfe` (one set per tensor):

* first layer ``(64, 64)``: a nuclear-norm ball (:class:`torchfw.sets.spectral.NuclearNormBall`). Its
  vertices are rank-one matrices and each step moves toward one, found by a warm-started
  Lanczos iteration (no SVD), so the layer stays a short sum of rank-one terms plus a decaying
  remainder: the singular values concentrate on a few directions;
* second layer ``(10, 64)``: a K-sparse polytope (:class:`torchfw.sets.polytopes.KSparsePolytope`)
  whose vertices have ``K`` nonzero entries: most weights of the layer end up exactly zero;
* biases: L-infinity balls.

Radii are set from the initial weights (a fraction of the layer's initial nuclear norm; boxes a
few times the initial entries), and the initial weights are projected onto the sets
(``make_feasible``: one full SVD for the nuclear ball, once). The baseline is the same network
trained without constraints by SGD with momentum, from the same initial weights and batches.
Reported: test accuracy, the rank of the first layer (singular values above 1 % of the largest)
and the fraction of exact zeros of the second.

Usage::

    python examples/constrained_sets.py                 # 30 epochs
    python examples/constrained_sets.py --epochs 3      # a quick run
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.sets.oracles import LinfBall
from torchfw.sets.polytopes import KSparsePolytope
from torchfw.sets.spectral import NuclearNormBall

HIDDEN = 64


def load_digits_split(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, stratify=y,
                                              random_state=seed)
    mean, std = X_tr.mean(0), X_tr.std(0)
    std[std == 0] = 1.0  # pixels that are always blank in the training set
    to_x = lambda a: torch.tensor((a - mean) / std, dtype=torch.float32)  # noqa: E731
    to_y = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
    return to_x(X_tr), to_y(y_tr), to_x(X_te), to_y(y_te)


def make_model(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))


def make_fw(model: nn.Sequential, lr: float, nuclear_fraction: float,
            k: int) -> StochasticFrankWolfe:
    first, last = model[0], model[2]
    with torch.no_grad():
        nuclear = float(torch.linalg.svdvals(first.weight).sum())
        box = 3.0 * float(last.weight.abs().max())
    groups = [
        {"params": [first.weight],
         "lmo": NuclearNormBall(tuple(first.weight.shape), nuclear_fraction * nuclear)},
        {"params": [last.weight], "lmo": KSparsePolytope(k, box)},
        {"params": [first.bias, last.bias], "lmo": LinfBall(1.0)},
    ]
    opt = StochasticFrankWolfe(groups, lr=lr, momentum=0.9)
    opt.make_feasible()
    return opt


def accuracy(model, X, y) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def train(model, opt, data, epochs: int, batch_size: int, seed: int) -> None:
    X_tr, y_tr, _, _ = data
    gen = torch.Generator().manual_seed(seed)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    for _ in range(epochs):
        perm = torch.randperm(len(X_tr), generator=gen)
        for start in range(0, len(X_tr), batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            nn.functional.cross_entropy(model(X_tr[idx]), y_tr[idx]).backward()
            opt.step()
        sched.step()


def rank(weight: torch.Tensor, rel: float = 1e-2) -> int:
    """Singular values above ``rel`` times the largest."""
    sv = torch.linalg.svdvals(weight.detach().double())
    return int((sv > rel * sv[0]).sum())


def zeros(weight: torch.Tensor) -> float:
    return float((weight.detach() == 0).float().mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fw-lr", type=float, default=1.0)
    parser.add_argument("--sgd-lr", type=float, default=0.05)
    parser.add_argument("--nuclear-fraction", type=float, default=0.3,
                        help="nuclear-norm radius / initial nuclear norm of layer 1 (0.3)")
    parser.add_argument("--k", type=int, default=64,
                        help="nonzeros of a vertex of layer 2's K-sparse polytope (64 of 640)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    data = load_digits_split(args.seed)
    rows = {}
    for name in ("StochasticFrankWolfe (sets)", "SGD, unconstrained"):
        model = make_model(args.seed)
        if name.startswith("Stochastic"):
            opt = make_fw(model, args.fw_lr, args.nuclear_fraction, args.k)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=args.sgd_lr, momentum=0.9)
        start = time.perf_counter()
        train(model, opt, data, args.epochs, args.batch_size, args.seed)
        feasible = None
        if isinstance(opt, StochasticFrankWolfe):
            g = opt.param_groups
            feasible = bool(g[0]["lmo"].contains(model[0].weight.detach().reshape(1, -1),
                                                 atol=1e-3).all()) and \
                bool(g[1]["lmo"].contains(model[2].weight.detach().reshape(1, -1),
                                          atol=1e-5).all())
        rows[name] = (accuracy(model, data[0], data[1]), accuracy(model, data[2], data[3]),
                      rank(model[0].weight), zeros(model[2].weight), feasible,
                      time.perf_counter() - start)

    print(f"digits: {len(data[0])} train / {len(data[2])} test, MLP 64-{HIDDEN}-10, "
          f"{args.epochs} epochs, batch {args.batch_size}")
    header = (f"{'optimizer':<28} {'train acc':>9} {'test acc':>9} {'layer-1 rank':>12} "
              f"{'layer-2 zeros':>13} {'feasible':>8} {'time (s)':>8}")
    print(header)
    print("-" * len(header))
    for name, (tr, te, rk, zr, feas, sec) in rows.items():
        feas = "-" if feas is None else ("yes" if feas else "NO")
        print(f"{name:<28} {tr:>9.4f} {te:>9.4f} {rk:>12d} {zr:>13.1%} {feas:>8} {sec:>8.2f}")
    return rows


if __name__ == "__main__":
    main()
