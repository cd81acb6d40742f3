"""Time of one optimizer step: torchfw's ``StochasticFrankWolfe`` against a plain reference SFW.

The reference step is written here from the update rule of Pokutta, Spiegel & Zimmer (2020,
Algorithm 1, "SFW with momentum", and Section 3.1's diameter rescaling), the way a plain
PyTorch implementation writes it, one parameter at a time:

    d      <- mu * d + (1 - mu) * grad          (d = grad at the first step)
    v      <- argmin_{v in C} <d, v>             (the set's LMO)
    gamma  <- clip(lr / diameter(C), 0, 1)
    theta  <- (1 - gamma) * theta + gamma * v

with the LMOs of the L-infinity ball (``-r sign(d)``), the L2 ball (``-r d / ||d||``) and the
K-sparse polytope (``-r sign(d_i)`` on the K largest ``|d_i|``). It is a ``torch.optim.Optimizer``
subclass, as the authors' implementation is, so both pay the same per-step bookkeeping of
``torch.optim``. Every parameter gets its own
set, sized from its layer's initialization (:func:`torchfw.optim.constraints_for`, mode
``"initialization"``), which is how such networks are constrained; torchfw holds them in one
parameter group (``one_group=True``: a list of sets, one per parameter), as the reference
optimizer holds its parameters in one group and their sets in a list. ``torch.optim.SGD`` (momentum 0.9) and ``Adam`` take the same gradients.

Models: an MLP 64-128-10 and a small CNN for scikit-learn's 8x8 digits, and an MLP
256-512-512-10. Gradients are fixed random tensors (the step's time does not depend on where
they come from). Each round times ``--inner`` steps of each optimizer in turn (interleaved, so
load changes hit them alike); the table gives the median over ``--rounds`` rounds of the time per
step, and the ratio torchfw / reference. On the CPU the time is the CPU time of the stepping
thread with one torch thread (``--threads``), so that other jobs on a shared machine do not
count; on a GPU, synchronized wall time. ``--compile`` times the steps under ``torch.compile``
too. Before timing, torchfw and the reference take ``--check`` steps with the same gradients
from equal states, and the table reports the largest relative difference of their updates.

Writes ``benchmarks/results/sfw_step_<machine>.md`` and ``.json``.

Usage::

    python benchmarks/sfw_step.py --machine epyc2 --compile
    python benchmarks/sfw_step.py --machine h100 --device cuda --compile
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model, machine_header  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
LR = 0.1
MOMENTUM = 0.9
VALUE = 10.0          # radius multiple of the expected initial norm (Pokutta et al.'s w)
K_FRAC = 0.05         # K-sparse: K = 5% of each parameter's size


def models() -> dict:
    return {
        "digits MLP 64-128-10": (lambda: nn.Sequential(
            nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)), (64,)),
        "digits CNN": (lambda: nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
            nn.Linear(64, 10)), (1, 8, 8)),
        "MLP 256-512-512-10": (lambda: nn.Sequential(
            nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, 10)), (256,)),
    }


# ------------------------------------------------------------------------------------------
# The reference step, from the paper's update rule
# ------------------------------------------------------------------------------------------

def ref_lmo(kind: str, d: torch.Tensor, radius: float, k: int) -> torch.Tensor:
    if kind == "linf":
        return -radius * torch.sign(d)
    if kind == "l2":
        norm = torch.linalg.vector_norm(d)
        return -radius * d / norm.clamp_min(torch.finfo(d.dtype).tiny)
    flat = d.reshape(-1)
    idx = torch.topk(flat.abs(), k).indices
    v = torch.zeros_like(flat)
    v[idx] = -radius * torch.sign(flat[idx])
    return v.view_as(d)


class ReferenceSFW(torch.optim.Optimizer):
    """SFW with momentum and diameter rescaling, one parameter at a time.

    A ``torch.optim.Optimizer``, as the authors' implementation is (so it pays the same
    per-step bookkeeping of ``torch.optim`` as torchfw's), with one set per parameter.
    """

    def __init__(self, params, sets, lr: float, momentum: float):
        params = list(params)
        super().__init__(params, dict(lr=lr, momentum=momentum))
        # (kind, radius, k, diameter) per parameter
        self.sets = dict(zip(params, sets, strict=True))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = p.grad.detach().clone()
                else:
                    buf.mul_(momentum).add_(p.grad, alpha=1 - momentum)
                kind, radius, k, diameter = self.sets[p]
                v = ref_lmo(kind, buf, radius, k)
                gamma = max(0.0, min(lr / diameter, 1.0))
                p.mul_(1 - gamma).add_(v, alpha=gamma)


def build(kind: str, model: nn.Module):
    from torchfw.optim import StochasticFrankWolfe, constraints_for

    extra = {"k_frac": K_FRAC} if kind == "ksparse" else {}
    # one group with a set per parameter, as the reference code uses its constraints
    groups = constraints_for(model, kind, value=VALUE, one_group=True, **extra)
    opt = StochasticFrankWolfe(groups, lr=LR, momentum=MOMENTUM, rescale="diameter")
    opt.make_feasible()
    return opt


def ref_sets(opt) -> list:
    out = []
    for group in opt.param_groups:
        lmos = group["lmo"] if isinstance(group["lmo"], list) else \
            [group["lmo"]] * len(group["params"])
        for p, lmo in zip(group["params"], lmos, strict=True):
            kind = {"LinfBall": "linf", "L2Ball": "l2", "KSparsePolytope": "ksparse"}[
                type(lmo).__name__]
            n = p.numel()
            out.append((kind, float(lmo.radius), getattr(lmo, "k", 0), lmo.diameter(n)))
    return out


def set_grads(model: nn.Module, grads: list) -> None:
    for p, g in zip(model.parameters(), grads, strict=True):
        p.grad = g.clone()


def agreement(make, kind, device, steps: int) -> float:
    """Largest difference of one step's update, torchfw against the reference, from equal states.

    Along ``steps`` steps of the reference, torchfw is put in the reference's state (weights and
    momentum buffers) and both take the step with the same gradients; the value is the largest
    ``max |update_torchfw - update_ref| / max |update_ref|`` over steps and tensors. (Comparing
    whole trajectories would mostly measure the sign of directions within rounding of zero.)
    """
    torch.manual_seed(0)
    a = make().to(device)
    fw = build(kind, a)
    b = copy.deepcopy(a)
    ref = ReferenceSFW(b.parameters(), ref_sets(fw), LR, MOMENTUM)
    gen = torch.Generator(device="cpu").manual_seed(1)
    worst = 0.0
    pas, pbs = list(a.parameters()), list(b.parameters())
    for t in range(steps):
        grads = [torch.randn(p.shape, generator=gen).to(device) for p in pas]
        with torch.no_grad():
            for pa, pb in zip(pas, pbs, strict=True):
                pa.copy_(pb)
                if t > 0:
                    fw.state[pa]["momentum_buffer"].copy_(ref.state[pb]["momentum_buffer"])
        before = [pb.detach().clone() for pb in pbs]
        set_grads(a, grads)
        set_grads(b, grads)
        fw.step()
        ref.step()
        for pa, pb, x in zip(pas, pbs, before, strict=True):
            upd_ref = (pb.detach() - x)
            scale = float(upd_ref.abs().max().clamp_min(1e-30))
            worst = max(worst, float((pa.detach() - pb.detach()).abs().max()) / scale)
    return worst


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def clock(device):
    """CPU time of this thread on the CPU (one torch thread: immune to other jobs taking the
    core), wall time with synchronization on a GPU."""
    return time.perf_counter if device.type == "cuda" else time.thread_time


def bench_case(name, make, kind, device, args) -> dict:
    torch.manual_seed(0)
    base = make().to(device)
    grads = [torch.randn_like(p) for p in base.parameters()]
    optimizers = {}
    m_fw = copy.deepcopy(base)
    fw = build(kind, m_fw)
    m_ref = copy.deepcopy(m_fw)  # feasible weights, as the torchfw model's
    ref = ReferenceSFW(m_ref.parameters(), ref_sets(fw), LR, MOMENTUM)
    m_sgd = copy.deepcopy(base)
    m_adam = copy.deepcopy(base)
    optimizers = {
        "reference": (m_ref, ref.step),
        "torchfw": (m_fw, fw.step),
        "SGD": (m_sgd, torch.optim.SGD(m_sgd.parameters(), lr=LR, momentum=MOMENTUM).step),
        "Adam": (m_adam, torch.optim.Adam(m_adam.parameters(), lr=1e-3).step),
    }
    row = {"model": name, "set": kind, "device": str(device),
           "params": sum(p.numel() for p in base.parameters()),
           "tensors": len(grads)}
    row["max_rel_diff"] = agreement(make, kind, device, args.check)
    variants = {"eager": {k: fn for k, (_, fn) in optimizers.items()}}
    if args.compile:
        # Each case compiles its own steps: without a reset, dynamo's recompile limit is
        # reached after a few cases and the later "compiled" steps silently run eager.
        torch._dynamo.reset()
        compiled = {}
        for k, (_, fn) in optimizers.items():
            compiled[k] = torch.compile(fn)
        variants["compiled"] = compiled
    for mode, fns in variants.items():
        for model, _ in optimizers.values():
            set_grads(model, grads)
        # Warm-up: first steps create buffers (and compile).
        compile_s = {}
        for key, fn in fns.items():
            start = time.perf_counter()
            for _ in range(3):
                fn()
            sync(device)
            compile_s[key] = time.perf_counter() - start
        times: dict = {key: [] for key in fns}
        now = clock(device)
        for _ in range(args.rounds):
            for key, fn in fns.items():
                sync(device)
                start = now()
                for _ in range(args.inner):
                    fn()
                sync(device)
                times[key].append((now() - start) / args.inner)
        med = {key: statistics.median(v) for key, v in times.items()}
        row[mode] = {"median_s": med, "warmup_s": compile_s,
                     "ratio_torchfw_ref": med["torchfw"] / med["reference"]}
    return row


def fmt_ms(s: float) -> str:
    return f"{1e3 * s:.3f}"


def table(rows: list, modes: list) -> list[str]:
    lines = []
    for mode in modes:
        lines += [f"## {mode}", "",
                  "| model | set | params (tensors) | reference ms | torchfw ms | ratio | "
                  "SGD ms | Adam ms | max rel. diff |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            m = r[mode]["median_s"]
            lines.append(
                f"| {r['model']} | {r['set']} | {r['params']:,} ({r['tensors']}) | "
                f"{fmt_ms(m['reference'])} | {fmt_ms(m['torchfw'])} | "
                f"{r[mode]['ratio_torchfw_ref']:.2f} | {fmt_ms(m['SGD'])} | "
                f"{fmt_ms(m['Adam'])} | {r['max_rel_diff']:.1e} |")
        ratios = [r[mode]["ratio_torchfw_ref"] for r in rows]
        geo = statistics.geometric_mean(ratios)
        lines += ["", f"Ratio torchfw / reference: geometric mean {geo:.2f}, "
                      f"max {max(ratios):.2f}.", ""]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", default="cpu", help="machine label of the results file")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd steps")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--inner", type=int, default=20)
    parser.add_argument("--check", type=int, default=10, help="steps of the agreement check")
    parser.add_argument("--sets", default="linf,l2,ksparse")
    parser.add_argument("--models", default=None, help="comma-separated substrings of names")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads (default 1: CPU times are per thread)")
    parser.add_argument("--out", default=None, help="results stem (default sfw_step_<machine>)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(),
            "load_average_start": list(os.getloadavg()), "torch": torch.__version__,
            "device": str(device), "threads": torch.get_num_threads()}
    if device.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(device)
    rows = []
    wanted = args.models.split(",") if args.models else None
    for name, (make, _) in models().items():
        if wanted and not any(w in name for w in wanted):
            continue
        for kind in args.sets.split(","):
            row = bench_case(name, make, kind, device, args)
            rows.append(row)
            msg = " ".join(f"{mode} ref {fmt_ms(row[mode]['median_s']['reference'])} ms "
                           f"torchfw {fmt_ms(row[mode]['median_s']['torchfw'])} ms "
                           f"({row[mode]['ratio_torchfw_ref']:.2f})"
                           for mode in ("eager", "compiled") if mode in row)
            print(f"{name:22s} {kind:8s} {msg}  diff {row['max_rel_diff']:.1e}", flush=True)
    meta["load_average_end"] = list(os.getloadavg())
    modes = ["eager"] + (["compiled"] if args.compile else [])
    command = "python benchmarks/sfw_step.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    lines = ["# One optimizer step: torchfw StochasticFrankWolfe vs a reference SFW, SGD, Adam",
             ""] + machine_header(meta, command)
    lines += [f"torch {meta['torch']}, device {meta['device']}"
              + (f" ({meta['gpu']})" if "gpu" in meta else "")
              + f", {meta['threads']} threads; load average at end: "
              + ", ".join(f"{x:.2f}" for x in meta["load_average_end"]) + ".", "",
              f"Sets per parameter from `constraints_for(model, set, value={VALUE}, "
              f"one_group=True)` "
              f"(K-sparse: `k_frac={K_FRAC}`), lr {LR}, momentum {MOMENTUM}, "
              f"`rescale=\"diameter\"`. Milliseconds per step, median of {args.rounds} rounds "
              f"of {args.inner} steps, interleaved"
              + (" (CPU time of the stepping thread, one torch thread: other jobs on the "
                 "shared cores do not count)" if device.type == "cpu" else
                 " (wall time, synchronized)")
              + ". Ratio = torchfw / reference (below 1: torchfw faster). Max rel. diff: "
              f"largest |update torchfw - update reference| / max |update reference| of one "
              f"step from equal states, over {args.check} steps and all tensors.", ""]
    lines += table(rows, modes)
    text = "\n".join(lines)
    print(text)
    stem = args.out or f"sfw_step_{args.machine}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
