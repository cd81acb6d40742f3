"""Train a small MLP with constrained weights by stochastic Frank-Wolfe, next to SGD + weight decay.

Data: scikit-learn's bundled 8x8 digits (1,797 images, 10 classes; no download).

Constraints (one set per layer, or per neuron):

* first layer ``(128, 64)``: an L1 ball per output neuron (``per_row=True``). Its vertices are
  1-sparse, so each hidden unit ends up looking at a few pixels (most first-layer weights are
  exactly zero after training with the default ``rescale="diameter"``);
* second layer ``(10, 128)`` and both biases: L-infinity balls (boxes) per tensor.

Radii are set relative to the default initialization, as Pokutta, Spiegel & Zimmer (2020) do,
and the initial weights are *projected* onto the sets (``make_feasible``), not re-drawn.

The baseline is ``torch.optim.SGD`` with momentum and weight decay on the same model, the same
initial weights, the same batches and the same number of epochs.

Usage::

    python examples/constrained_training.py                 # plot in examples/output/
    python examples/constrained_training.py --epochs 30 --out /tmp/fw.png
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.sets.oracles import L1Ball, LinfBall

DEFAULT_OUT = Path(__file__).resolve().parent / "output" / "constrained_training.png"


def load_digits_split(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, stratify=y,
                                              random_state=seed)
    # Pixel intensities are 0..16; standardize with training statistics only.
    mean, std = X_tr.mean(0), X_tr.std(0)
    std[std == 0] = 1.0  # pixels that are always blank in the training set
    to_x = lambda a: torch.tensor((a - mean) / std, dtype=torch.float32)  # noqa: E731
    to_y = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
    return to_x(X_tr), to_y(y_tr), to_x(X_te), to_y(y_te)


def make_model(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def make_fw(model: nn.Sequential, lr: float, rescale: str) -> StochasticFrankWolfe:
    first, last = model[0], model[2]
    with torch.no_grad():
        # Radius of each neuron's L1 ball: a fraction of its initial L1 norm, so the projection
        # shrinks the weights (and sparsifies them) without re-initializing.
        l1_radius = 0.8 * first.weight.abs().sum(dim=1)
        # Boxes a few times wider than the initial weights (uniform in +-1/sqrt(fan_in)).
        linf_last = 3.0 * float(last.weight.abs().max())
    groups = [
        {"params": [first.weight], "lmo": L1Ball(l1_radius), "per_row": True},
        {"params": [last.weight], "lmo": LinfBall(linf_last)},
        {"params": [first.bias, last.bias], "lmo": LinfBall(1.0)},
    ]
    opt = StochasticFrankWolfe(groups, lr=lr, momentum=0.9, rescale=rescale, track_gap=True)
    opt.make_feasible()
    return opt


def evaluate(model, X, y):
    with torch.no_grad():
        logits = model(X)
        return (nn.functional.cross_entropy(logits, y).item(),
                (logits.argmax(1) == y).float().mean().item())


def train(model, opt, sched, data, epochs: int, batch_size: int, seed: int):
    X_tr, y_tr, X_te, y_te = data
    gen = torch.Generator().manual_seed(seed)
    history = {"loss": [], "gap": [], "test_acc": []}
    for _ in range(epochs):
        perm = torch.randperm(len(X_tr), generator=gen)
        losses, gaps = [], []
        for start in range(0, len(X_tr), batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(X_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
            gap = opt.fw_gap() if isinstance(opt, StochasticFrankWolfe) else None
            if gap is not None:
                gaps.append(float(gap))
        sched.step()
        history["loss"].append(sum(losses) / len(losses))
        history["gap"].append(sum(gaps) / len(gaps) if gaps else float("nan"))
        history["test_acc"].append(evaluate(model, X_te, y_te)[1])
    return history


def feasibility(model, opt) -> bool:
    ok = True
    for group in opt.param_groups:
        for p in group["params"]:
            view = p.detach().reshape(p.shape[0], -1) if group["per_row"] else \
                p.detach().reshape(1, -1)
            ok &= bool(group["lmo"].contains(view, atol=1e-5).all())
    return ok


def sparsity(weight: torch.Tensor, tol: float = 1e-4) -> float:
    return float((weight.detach().abs() <= tol).float().mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rescale", choices=["diameter", "gradient"], default="diameter",
                        help="learning-rate rescaling of StochasticFrankWolfe")
    parser.add_argument("--fw-lr", type=float, default=None,
                        help="learning rate of StochasticFrankWolfe (default: 3.0 with "
                             "--rescale diameter, 0.3 with --rescale gradient)")
    parser.add_argument("--sgd-lr", type=float, default=0.05)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    # The matrices are tiny: one thread beats two, whose synchronization costs more than the
    # arithmetic (and stalls badly when the cores are shared).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"where to save the plot (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    data = load_digits_split(args.seed)
    results = {}
    for name in ("StochasticFrankWolfe", "SGD + weight decay"):
        model = make_model(args.seed)  # same initial weights for both
        if name == "StochasticFrankWolfe":
            lr = args.fw_lr if args.fw_lr is not None else \
                {"diameter": 3.0, "gradient": 0.3}[args.rescale]
            opt = make_fw(model, lr, args.rescale)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=args.sgd_lr, momentum=0.9,
                                  weight_decay=args.weight_decay)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
        start = time.perf_counter()
        history = train(model, opt, sched, data, args.epochs, args.batch_size, args.seed)
        elapsed = time.perf_counter() - start
        test_loss, test_acc = evaluate(model, data[2], data[3])
        train_loss, train_acc = evaluate(model, data[0], data[1])
        results[name] = dict(history=history, time=elapsed, test_acc=test_acc,
                             test_loss=test_loss, train_acc=train_acc,
                             sparsity=sparsity(model[0].weight),
                             feasible=feasibility(model, opt)
                             if isinstance(opt, StochasticFrankWolfe) else None)

    print(f"digits: {len(data[0])} train / {len(data[2])} test, MLP 64-128-10, "
          f"{args.epochs} epochs, batch {args.batch_size}")
    header = (f"{'optimizer':<22} {'train acc':>9} {'test acc':>9} {'test loss':>9} "
              f"{'layer-1 zeros':>13} {'feasible':>8} {'time (s)':>8}")
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        feas = "-" if r["feasible"] is None else ("yes" if r["feasible"] else "NO")
        print(f"{name:<22} {r['train_acc']:>9.4f} {r['test_acc']:>9.4f} {r['test_loss']:>9.4f} "
              f"{r['sparsity']:>13.1%} {feas:>8} {r['time']:>8.2f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = range(1, args.epochs + 1)
    fig, (ax_loss, ax_gap) = plt.subplots(1, 2, figsize=(10, 4))
    for name, r in results.items():
        ax_loss.plot(epochs, r["history"]["loss"], label=name)
    ax_loss.set(xlabel="epoch", ylabel="mean training loss (cross-entropy)", yscale="log",
                title="Training loss")
    ax_loss.legend()
    ax_gap.plot(epochs, results["StochasticFrankWolfe"]["history"]["gap"], color="C0")
    ax_gap.set(xlabel="epoch", ylabel=r"mean FW gap $\sum_p \langle d, p - v\rangle$",
               yscale="log", title="Frank-Wolfe gap (StochasticFrankWolfe)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"plot saved to {args.out}")
    return results


if __name__ == "__main__":
    main()
