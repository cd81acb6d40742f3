r"""The step of :class:`torchfw.optim.StochasticFrankWolfe` for many parameters at once.

A network constrained layer by layer (:func:`torchfw.optim.constraints_for`) has one parameter
group per tensor, so a step that loops over parameters in Python and launches a dozen small
kernels for each spends most of its time outside the arithmetic. Here the parameters of all
groups that share a device, a dtype and the momentum settings take the momentum update as one
``torch._foreach_*`` call, and the sets with a closed-form vertex (L-infinity and L2 balls,
K-sparse polytopes, one set per tensor, a scalar radius) take the Frank-Wolfe step with
multi-tensor calls as well, with the vertex folded into the update so that no dense vertex is
stored:

* L-infinity ball, :math:`v = -r\,\mathrm{sign}(d)`: with :math:`s = \mathrm{sign}(d)`,
  :math:`u = \theta - v = s\,(r + s\,\theta)` (0 where :math:`d_i = 0`, so that coordinate keeps
  its value, as the box's rule in :mod:`torchfw.optim._update` says), and
  :math:`\theta \leftarrow \theta - \gamma u`.
* L2 ball, :math:`v = -r\,d / \|d\|_2`: :math:`u = \theta + (r / \|d\|_2)\, d`, the norm taken in
  float64 for lower precisions (no overflow or underflow of the squares).
* K-sparse polytope: the vertex has K nonzeros, so :math:`\theta \leftarrow (1 - \gamma)\theta`
  and then :math:`\gamma v` is added on its K entries; the gap is
  :math:`\langle d, \theta\rangle + r \sum_{\text{top } K} |d_i|`.

The gap :math:`G = \langle d, \theta - v\rangle` of each tensor is one dot product, taken only
for groups with ``track_gap=True`` (``gaps=True`` here). The guards of
:mod:`torchfw.optim._update` hold either way: a tensor whose direction is exactly zero does not
move, and a non-finite direction turns NaN what its move reads: the whole tensor for L2 balls
and K-sparse polytopes (the vertex reads every entry), the entry alone for L-infinity balls (a
product of intervals: each coordinate's vertex reads its own :math:`d_i`). On a GPU and under
``torch.compile`` they hold without a host read, through :math:`\gamma + 0 \cdot x` and
:math:`\gamma\,\mathrm{sign}(\cdot)` with :math:`x` the gap or, without gaps, a per-tensor
norm of the direction (L-infinity balls: a select per entry). On the CPU in eager mode a host read costs no synchronization, so
per-tensor 2-norms (of :math:`d`, of :math:`\mathrm{sign}(d)`, of the top-K values) are read
once and the guards are decided in Python: the rare tensor that needs one is handled alone, and
the common step moves every tensor with one multi-tensor call.

On the CPU, L-infinity balls of float32 or float64 tensors take that step in a compiled kernel
where numba is there (:mod:`torchfw.optim._linf_kernel`): one pass per tensor that reads the
direction and moves, against six passes and a dozen dispatches of PyTorch operations. Under
``torch.compile``, L-infinity and L2 balls take the per-tensor form of
:mod:`torchfw.optim._traced`, which the compiler fuses.

The same functions run for one tensor and for many (``foreach=False`` changes nothing), and
every other set, ``per_row=True``, ``rescale="gradient"`` and tensor radii take the per-tensor
update of :mod:`torchfw.optim._update`.

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd.graph import increment_version

from ..sets.oracles import L2Ball, LinfBall
from ..sets.polytopes import KSparsePolytope

__all__ = ["directions", "fast_kind", "gamma_of", "as_vector", "linf_update", "l2_update",
           "ksparse_update", "FlatViews", "linf_momentum_host", "momentum_kernel_constants"]


def directions(params: list[Tensor], grads: list[Tensor] | tuple[Tensor, ...], states: list[dict],
               momentum: float, weight_decay: float, maximize: bool,
               defer: Sequence[int] = ()) -> tuple[list[Tensor], list[Tensor]]:
    r"""Momentum directions :math:`d_t = (1-\mu) g_t + \mu d_{t-1}` (:math:`d_0 = g_0`) of a bucket.

    All tensors share device and dtype; the buffers in ``states`` are updated in place. Returns
    the directions and the gradients :math:`g_t` as the average reads them (negated for
    ``maximize``, with the weight decay added). The tensors at the positions in ``defer``, which
    must have a buffer, are left to :func:`linf_momentum_host`: their direction is the buffer
    as it was, averaged there in the pass that moves the weight.
    """
    if maximize:
        grads = list(torch._foreach_neg(grads))
    if weight_decay != 0:
        grads = list(torch._foreach_add(grads, params, alpha=weight_decay))
    grads = list(grads)
    if momentum == 0:
        for state in states:
            # A stale buffer would otherwise resurface if a schedule turns momentum back on.
            state.pop("momentum_buffer", None)
        return grads, grads
    out: list[Tensor] = []
    old_bufs, old_grads = [], []
    for i, (g, state) in enumerate(zip(grads, states, strict=True)):
        buf = state.get("momentum_buffer")
        if buf is None:
            # d_0 = g_0 (the reference implementation's start), not a zero-started average.
            buf = state["momentum_buffer"] = g.detach().clone(memory_format=torch.preserve_format)
        elif i not in defer:
            old_bufs.append(buf)
            old_grads.append(g)
        out.append(buf)
    if old_bufs and torch.compiler.is_compiling():
        # Per tensor, so that the compiler fuses each average with the tensor's update
        # (torchfw.optim._traced) while the tensor is still in cache.
        for buf, g in zip(old_bufs, old_grads, strict=True):
            buf.lerp_(g, 1.0 - momentum)
    elif old_bufs:
        # One pass: buf + (1 - mu)(g - buf) = mu buf + (1 - mu) g.
        torch._foreach_lerp_(old_bufs, old_grads, 1.0 - momentum)
    return out, grads


def fast_kind(lmo: Any, group: dict) -> str | None:
    """Which multi-tensor update fits the group's set, or None for the per-tensor one."""
    if group["per_row"] or group["rescale"] == "gradient":
        return None
    kind = type(lmo)
    if kind is LinfBall:
        name = "linf"
    elif kind is L2Ball:
        name = "l2"
    elif kind is KSparsePolytope:
        name = "ksparse"
    else:
        return None
    if isinstance(lmo.radius, Tensor):
        return None
    return name


def gamma_of(group: dict, diameter: float, like: Tensor):
    r""":math:`\gamma = \operatorname{clip}_{[0,1]}(\eta s)`, a float (0-d tensor if lr is one)."""
    lr = group["lr"]
    tensor_lr = isinstance(lr, Tensor)
    if tensor_lr:
        lr = lr.to(device=like.device, dtype=like.dtype).reshape(())
    if group["rescale"] == "diameter":
        if diameter == 0:
            return 1.0  # a single point: moving all the way is exact
        return (lr / diameter).clamp(0.0, 1.0) if tensor_lr else min(lr / diameter, 1.0)
    return lr.clamp(0.0, 1.0) if tensor_lr else min(lr, 1.0)


def _dots(ds: Sequence[Tensor], us: Sequence[Tensor]) -> Tensor:
    """``<d, u>`` of every pair, as one vector (one reduction per tensor)."""
    return torch.stack([torch.dot(d.reshape(-1), u.reshape(-1))
                        for d, u in zip(ds, us, strict=True)])


@functools.lru_cache(maxsize=256)
def _constant(values: tuple, dtype: torch.dtype, device: torch.device) -> Tensor:
    # Built once per set of values: a host-to-device copy at every step would synchronize.
    return torch.tensor(values, dtype=dtype, device=device)


def as_vector(values: list, like: Tensor) -> Tensor:
    """Floats or 0-d tensors as one vector on ``like``'s device and dtype (never modify it)."""
    if all(isinstance(v, float) for v in values):
        if torch.compiler.is_compiling():
            return torch.tensor(values, dtype=like.dtype, device=like.device)
        return _constant(tuple(values), like.dtype, like.device)
    return torch.stack([v.to(device=like.device, dtype=like.dtype) if isinstance(v, Tensor)
                        else torch.full((), v, dtype=like.dtype, device=like.device)
                        for v in values])


class FlatViews:
    """1-d views of a list of tensors, kept while the same tensors hold the same memory.

    A view costs a dispatch per tensor and step; the parameters and momentum buffers of a
    plan are the same tensors from step to step (updated in place), so their views are made
    once. Checked by identity and data pointer (a ``p.data = ...`` swap makes new views); eager
    CPU steps only (:func:`_host_guards`), where a pointer test is allowed.
    """

    def __init__(self) -> None:
        self._key: list = []
        self._views: list[Tensor | None] = []

    def __call__(self, ts: Sequence[Tensor]) -> list[Tensor]:
        key = [(id(t), t.data_ptr()) for t in ts]
        if key != self._key:
            # a non-contiguous tensor's reshape is a copy: not cached, taken again each step
            self._views = [t.view(-1) if t.is_contiguous() else None for t in ts]
            self._key = key
        return [v if v is not None else t.reshape(-1)
                for v, t in zip(self._views, ts, strict=True)]


def _flat_dots(a: list[Tensor], b: list[Tensor]) -> Tensor:
    """``<a_i, b_i>`` of 1-d tensors, as one vector."""
    return torch.stack([torch.dot(x, y) for x, y in zip(a, b, strict=True)])


def _host_guards(like: Tensor) -> bool:
    """Decide the guards on the host: on the CPU, in eager mode (a read there is free)."""
    return like.device.type == "cpu" and not torch.compiler.is_compiling()


def _nan_where_not_finite(params: list[Tensor], values: list[float]) -> None:
    """Turn every tensor whose value (gap or norm) is not finite into NaN, as a NaN step would."""
    for p, value in zip(params, values, strict=True):
        if not math.isfinite(value):
            p.fill_(math.nan)


def _guarded_steps(gaps: Tensor, gammas: Tensor) -> Tensor:
    r""":math:`\gamma + 0 \cdot G` per tensor: NaN where the gap is not finite."""
    return gaps.mul(0.0).add_(gammas)


def _rows(vector: Tensor) -> tuple[Tensor, ...]:
    """One (1,)-shaped view per entry: the gap of a set viewed as one row."""
    return vector.view(-1, 1).unbind(0)


def _stacked(values: list[Tensor] | tuple[Tensor, ...]) -> list[float]:
    """Per-tensor numbers (0-d tensors) read on the host at once."""
    return torch.stack(values).tolist()


def _finite_norm(d: Tensor, norm: float) -> bool:
    r"""Whether :math:`d` is finite, given :math:`\|d\|_2` taken in ``d``'s own precision.

    A finite float32 (or lower) tensor can still have an infinite norm when the squares
    overflow; such a norm is taken again in float64 (a rare host read, eager CPU only).
    """
    if math.isfinite(norm):
        return True
    if math.isnan(norm) or d.dtype == torch.float64:
        return False
    return math.isfinite(float(torch.linalg.vector_norm(d, dtype=torch.float64)))


# Below this many entries per tensor on average, a step is bound by launching kernels, not
# by memory: the L-infinity step then takes its signs and guards on one concatenated vector.
_SMALL_TENSORS = 8192


def linf_host_constants(radii: list[float], gammas: list[float] | None,
                        params: list[Tensor]) -> tuple:
    """What :func:`_linf_host` reads on the host, computed once per plan: ``-r``, the step
    sizes (None for a tensor lr), the least ``||sign(d)||`` of a direction without a zero entry
    (``sqrt(numel - 1/2)``), whether a count needs float64 (2**21 entries or more), and, for
    small tensors, ``-r`` repeated over each tensor's entries (else None)."""
    numels = [p.numel() for p in params]
    total = sum(numels)
    small = total <= _SMALL_TENSORS * len(numels) and total < 2 ** 21
    neg_full = torch.cat([torch.full((n,), -r, dtype=params[0].dtype, device=params[0].device)
                          for n, r in zip(numels, radii, strict=True)]) if small else None
    dtype = params[0].dtype
    kernel = None
    if gammas is not None and dtype in _NUMPY:
        # the compiled kernel's constants, for float32 and float64 tensors; imported here,
        # so that numba loads with the first step that can use it, not with torchfw.optim
        from . import _linf_kernel

        if _linf_kernel.linf_step is not None:
            kernel = ([_linf_kernel.step_constants(-r, g, _NUMPY[dtype])
                       for r, g in zip(radii, gammas, strict=True)], _ArrayViews())
    return ([-r for r in radii], gammas, [math.sqrt(n - 0.5) for n in numels],
            max(numels) >= 2 ** 21, neg_full, numels, math.sqrt(total - 0.5), kernel)


def linf_update(params: list[Tensor], ds: list[Tensor], radii: Tensor,
                gammas: Tensor, flats: tuple[FlatViews, FlatViews] | None = None,
                gaps: bool = True, host: tuple | None = None) -> tuple[Tensor, ...] | None:
    r"""L-infinity balls: :math:`\theta \leftarrow \theta - \gamma\, s (r + s\theta)`.

    ``radii`` and ``gammas`` hold one value per tensor (:func:`as_vector`). Returns the gaps
    :math:`\langle d, \theta - v\rangle` (one ``(1,)`` tensor per parameter) when ``gaps`` is
    true, else ``None`` and no dot product is taken. ``flats`` is accepted for a uniform call;
    ``host`` holds :func:`linf_host_constants` (built here when not given). Per coordinate, a
    zero :math:`d_i` keeps :math:`\theta_i` and a non-finite one turns it NaN.
    """
    if _host_guards(params[0]):
        values = None
        if gaps:
            # G = <d, theta> + r ||d||_1, read before the move
            fd, fp = (flats[1](ds), flats[0](params)) if flats is not None else \
                ([d.reshape(-1) for d in ds], [p.reshape(-1) for p in params])
            values = _flat_dots(fd, fp).add_(radii * torch.stack(torch._foreach_norm(ds, 1)))
        if host is None or host[1] is None:
            host = linf_host_constants(radii.tolist(), gammas.tolist(), params)
        if (host[7] is not None and _compiled_kernels()) or host[4] is None \
                or not _linf_host_small(params, ds, host, flats):
            _linf_host(params, ds, host)
        return None if values is None else _rows(values)
    s = torch._foreach_sign(ds)
    raw = torch._foreach_addcmul(list(radii.unbind()), s, params)
    torch._foreach_mul_(raw, s)  # theta - v = s (r + s theta), 0 where d == 0
    # NaN where d_i is inf or NaN, coordinate by coordinate (no reduction, no host read)
    u = [torch.where(d.isfinite(), x, math.nan) for d, x in zip(ds, raw, strict=True)]
    values = _dots(ds, u) if gaps else None
    torch._foreach_addcmul_(params, u, gammas.unbind(), value=-1.0)
    return None if values is None else _rows(values)


def _linf_host_small(params: list[Tensor], ds: list[Tensor], host: tuple,
                     flats: tuple[FlatViews, FlatViews] | None) -> bool:
    r""":func:`_linf_host` for small tensors: signs and guards on one concatenated vector.

    One ``cat``, one ``sign``, one 2-norm of each and one multiply by the repeated ``-r``
    replace a kernel per tensor for each; only the move itself (a multi-tensor ``lerp`` of the
    parameters' 1-d views) stays per tensor. Returns False, having changed nothing, when some
    direction has a zero or non-finite entry (the per-tensor form then decides, tensor by
    tensor) or a parameter is not contiguous.
    """
    neg_full, numels, least_total, steps = host[4], host[5], host[6], host[1]
    if flats is None or not all(p.is_contiguous() for p in params):
        return False
    d = torch.cat([t.reshape(-1) for t in ds])
    s = torch.sign(d)
    norm, signs = _stacked(torch._foreach_norm([d, s], 2))
    if not (signs > least_total and norm < math.inf):
        return False
    s.mul_(neg_full)  # the vertices, v = -r sign(d), one after the other
    torch._foreach_lerp_(flats[0](params), list(s.split(numels)), steps)
    return True


def _linf_host(params: list[Tensor], ds: list[Tensor], host: tuple) -> None:
    r""":func:`linf_update` without gaps on the CPU, its guards decided on the host.

    Two reductions per tensor, read at once: :math:`\|d\|_2` (finite exactly when :math:`d` is,
    :func:`_finite_norm`) and :math:`\|\mathrm{sign}(d)\|_2`, the square root of the number of
    nonzero :math:`d_i` (NaN with a NaN; a 2-norm, because the CPU's 1-norm kernel is several
    times slower). A tensor whose direction has no zero entry -- the common
    case -- moves to :math:`(1 - \gamma)\theta + \gamma v`, :math:`v = -r\,\mathrm{sign}(d)`, in
    one multi-tensor ``lerp`` (exact at :math:`\gamma = 1`), with no temporary but the signs;
    one with zero entries takes :math:`\theta - \gamma\, s (r + s\theta)`, which keeps those
    coordinates, with NaN where :math:`d_i` is inf or NaN; one without direction does not move.
    """
    neg_radius, steps, least, wide = host[:4]
    if host[7] is not None and _compiled_kernels():
        todo = _linf_compiled(params, ds, host[7])
        if not todo:
            return
        params, ds = [params[i] for i in todo], [ds[i] for i in todo]
        neg_radius, steps, least = ([x[i] for i in todo] for x in host[:3])
    s = torch._foreach_sign(ds)
    # "no zero entry" is count > numel - 1/2 with count = ||s||^2: float32 tells the two
    # apart below 2**21 entries (relative error 1.2e-7 of the square); larger, count in float64
    if not wide:
        values = _stacked(torch._foreach_norm(list(ds) + list(s), 2))  # one call for both
    else:
        values = _stacked(torch._foreach_norm(ds, 2)
                          + torch._foreach_norm(s, 2, dtype=torch.float64))
    n = len(params)
    norms, signs = values[:n], values[n:]
    if all(c > t for c, t in zip(signs, least)) and all(x < math.inf for x in norms):
        # the common step: every tensor moves by the lerp
        torch._foreach_mul_(s, neg_radius)
        torch._foreach_lerp_(params, s, steps)
        return
    counts = [c * c for c in signs]
    fast = [i for i in range(n) if signs[i] > least[i] and norms[i] < math.inf]
    if fast:
        v = [s[i] for i in fast]
        torch._foreach_mul_(v, [neg_radius[i] for i in fast])
        torch._foreach_lerp_([params[i] for i in fast], v, [steps[i] for i in fast])
    moved = set(fast)
    for i in range(n):
        if i in moved or counts[i] == 0.0:
            continue  # moved, or no direction: no move
        p = params[i]
        w = s[i].mul(p).sub_(neg_radius[i])  # r + s theta; u = s w is 0 where d_i == 0
        if not (math.isfinite(counts[i]) and _finite_norm(ds[i], norms[i])):
            # NaN where d_i is inf or NaN (sign(inf) is finite), that coordinate alone
            w = torch.where(ds[i].isfinite(), w, math.nan)
        p.addcmul_(s[i], w, value=-steps[i])


_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


class _ArrayViews:
    """NumPy views of the 1-d parameters and directions, kept while the same tensors hold the
    same memory (as :class:`FlatViews`): a view costs a few dispatches per tensor and step."""

    def __init__(self) -> None:
        self._key: list = []
        self._views: list[np.ndarray] = []

    def __call__(self, ts: Sequence[Tensor]) -> list[np.ndarray] | None:
        key = [(id(t), t.data_ptr()) for t in ts]
        if key != self._key:
            if not all(t.is_contiguous() for t in ts):
                return None
            self._views = [t.detach().view(-1).numpy() for t in ts]
            self._key = key
        return self._views


def _linf_compiled(params: list[Tensor], ds: list[Tensor], kernel: tuple) -> list[int]:
    r"""The step of :func:`_linf_host` by the compiled kernel (:mod:`torchfw.optim._linf_kernel`):
    one pass per tensor instead of six. Returns the indices of the tensors it left to the
    PyTorch form (all of them when some tensor is not contiguous)."""
    consts, views = kernel
    arrays = views(list(params) + list(ds))
    n = len(params)
    if arrays is None:
        return list(range(n))
    from . import _linf_kernel

    step = _linf_kernel.linf_step
    for i in range(n):
        step(arrays[i], arrays[n + i], consts[i])
    # Writes through NumPy views leave the tensors' version counters as they were; autograd
    # reads them to refuse a backward through a tensor changed in place, as after an in-place
    # PyTorch update.
    increment_version(params)
    return []


def momentum_kernel_constants(radii: list[float], gammas: list[float], momentum: float,
                              dtype: torch.dtype) -> list[np.ndarray]:
    """The constants of :func:`~torchfw.optim._linf_kernel.linf_momentum_step`, one array per
    tensor (``-r``, the step size and the average's weight ``1 - mu``, in the tensor's
    precision)."""
    from . import _linf_kernel

    return [_linf_kernel.momentum_constants(-r, g, 1.0 - momentum, _NUMPY[dtype])
            for r, g in zip(radii, gammas, strict=True)]


def linf_momentum_host(params: list[Tensor], bufs: list[Tensor], grads: list[Tensor],
                       radii: list[float], gammas: list[float], momentum: float,
                       consts: list[np.ndarray], views: _ArrayViews) -> None:
    r"""Momentum average and L-infinity move of CPU tensors in one compiled pass per tensor.

    :math:`d \leftarrow \mathrm{lerp}(d, g, 1 - \mu)`, then :math:`\theta \leftarrow
    \mathrm{lerp}(\theta, v, \gamma)` with :math:`v = -r\,\mathrm{sign}(d)`, the
    coordinate rules of :func:`linf_update` (a zero :math:`d_i` keeps :math:`\theta_i`, a
    non-finite one turns it NaN) and the rounding of the eager average and kernel
    (:func:`~torchfw.optim._linf_kernel.linf_momentum_step`). ``consts`` holds
    :func:`momentum_kernel_constants`; ``views`` keeps NumPy views from step to step. Tensors
    that are not contiguous take the average and the move of the PyTorch form.
    """
    from . import _linf_kernel

    n = len(params)
    ts = list(params) + list(bufs) + list(grads)
    arrays = views(ts)
    if arrays is None:
        torch._foreach_lerp_(bufs, grads, 1.0 - momentum)
        _linf_host(params, bufs, linf_host_constants(radii, gammas, params))
        return
    step = _linf_kernel.linf_momentum_step
    for i in range(n):
        step(arrays[i], arrays[n + i], arrays[2 * n + i], consts[i])
    # as _linf_compiled: autograd reads the version counters of tensors changed in place
    increment_version(params + bufs)


def _compiled_kernels() -> bool:
    """Whether compiled kernels run now (:func:`torchfw.utils.jit.compiled_kernels`: numba is
    there and the cold start does not defer them)."""
    from ..utils.jit import compiled_kernels

    return compiled_kernels()


def _norms(ds: list[Tensor]) -> Tensor:
    r""":math:`\|d\|_2` of every tensor, in float64, without overflow or underflow of the squares.

    On the CPU the norms are taken in the tensors' own precision (a float64 reduction of float32
    data costs four times as much there) and only those that came out 0 or infinite are taken
    again in float64, which needs a read on the host: free on the CPU, a synchronization
    elsewhere, where (and under ``torch.compile``) every norm is taken in float64 at once.
    """
    like = ds[0]
    wide = torch.float64 if torch.finfo(like.dtype).bits < 64 else None
    if wide is None or like.device.type != "cpu" or torch.compiler.is_compiling():
        return torch.stack(torch._foreach_norm(ds, 2, dtype=wide))
    norms = torch.stack(torch._foreach_norm(ds, 2)).to(torch.float64)
    redo = ((norms == 0) | ~torch.isfinite(norms)).nonzero().flatten().tolist()
    if redo:
        again = torch._foreach_norm([ds[i] for i in redo], 2, dtype=torch.float64)
        norms[redo] = torch.stack(again)
    return norms


def l2_update(params: list[Tensor], ds: list[Tensor], radii: Tensor,
              gammas: Tensor, flats: tuple[FlatViews, FlatViews] | None = None,
              gaps: bool = True) -> tuple[Tensor, ...] | None:
    r"""L2 balls: :math:`\theta \leftarrow \theta - \gamma(\theta + r d / \|d\|)`.

    Returns the gaps when ``gaps`` is true (``None`` otherwise, and no dot product is taken).
    """
    like = params[0]
    if _host_guards(like) and (flats is not None or not gaps):
        return _l2_update_host(params, ds, radii, gammas, flats, gaps)
    norms = _norms(ds)
    # r / ||d|| where ||d|| > 0, and r where d == 0 (then u = theta and the gap is 0).
    nonzero = norms.sign()
    coef = (radii.to(norms.dtype) / torch.where(norms > 0, norms, 1.0)).to(like.dtype)
    u = torch._foreach_addcmul(params, ds, coef.unbind())  # theta - v
    # No direction, no move: gamma * sign(||d||); NaN through the gap (or the norm).
    values = _dots(ds, u) if gaps else None
    steps = _guarded_steps(norms if values is None else values, gammas)
    steps = steps.to(like.dtype).mul_(nonzero.to(like.dtype))
    torch._foreach_addcmul_(params, u, steps.unbind(), value=-1.0)
    return None if values is None else _rows(values)


def _l2_update_host(params: list[Tensor], ds: list[Tensor], radii: Tensor,
                    gammas: Tensor, flats: tuple[FlatViews, FlatViews] | None,
                    gaps: bool = True) -> tuple[Tensor, ...] | None:
    r""":func:`l2_update` on the CPU, its guards decided on the host.

    The norms are read once (float32 ones that came out 0 or infinite are taken again in float64,
    as :func:`_norms` does); a tensor with no direction neither moves nor enters the multi-tensor
    calls (its gap is 0), one whose norm is not finite turns NaN, and the others move to
    :math:`\theta + \gamma (v - \theta)`, :math:`v = -(r / \|d\|)\,d`, in one multi-tensor
    ``lerp`` (as the per-tensor update moves); the gap, when asked for, is
    :math:`\langle d, \theta\rangle + r \|d\|`, read before the move.
    """
    like = params[0]
    norms = _stacked(torch._foreach_norm(ds, 2))
    if like.dtype != torch.float64:
        for i, n in enumerate(norms):
            if n == 0.0 or not math.isfinite(n):  # under- or overflow of the squares?
                norms[i] = float(torch.linalg.vector_norm(ds[i], dtype=torch.float64))
    radius = radii.tolist()
    if all(n > 0.0 and math.isfinite(n) for n in norms):  # the common step: no guard at work
        values = None
        if gaps:
            # G = <d, theta> + r ||d||, read before the move, from cached 1-d views
            fd, fp = (flats[1](ds), flats[0](params)) if flats is not None else \
                ([d.reshape(-1) for d in ds], [p.reshape(-1) for p in params])
            values = _flat_dots(fd, fp).add_(torch.tensor(
                [r * n for r, n in zip(radius, norms, strict=True)], dtype=like.dtype))
        # theta <- theta + gamma (v - theta), v = -(r / ||d||) d: lerp, exact at gamma = 1
        vs = torch._foreach_mul(ds, [-r / n for r, n in zip(radius, norms, strict=True)])
        torch._foreach_lerp_(params, vs, gammas.tolist())
        return None if values is None else _rows(values)
    out = torch.zeros(len(params), dtype=like.dtype, device=like.device)
    live = [i for i, n in enumerate(norms) if n > 0.0 and math.isfinite(n)]
    _nan_where_not_finite(params, norms)
    out[[i for i, n in enumerate(norms) if not math.isfinite(n)]] = math.nan
    if live:
        ps = [params[i] for i in live]
        pds = [ds[i] for i in live]
        u = torch._foreach_add(ps, torch._foreach_mul(pds, [radius[i] / norms[i] for i in live]))
        if gaps:
            out[live] = _dots(pds, u)
        torch._foreach_addcmul_(ps, u, gammas[live].unbind(), value=-1.0)
    return _rows(out) if gaps else None


@functools.lru_cache(maxsize=256)
def _signed_pair(value: float, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    # ``-value`` and ``value`` as 0-d tensors of the dtype, built once per value: a select
    # between two Python numbers wraps them at every call, which costs more than the select
    # itself on the K entries of a small tensor
    return (torch.tensor(-value, dtype=dtype, device=device),
            torch.tensor(value, dtype=dtype, device=device))


def _signed(val: Tensor, value: float) -> Tensor:
    """``-value`` where ``val > 0``, ``+value`` elsewhere, in ``val``'s dtype."""
    neg, pos = _signed_pair(value, val.dtype, val.device)
    return torch.where(val > 0, neg, pos)


def ksparse_update(params: list[Tensor], ds: list[Tensor], radii: Tensor,
                   ks: list[int], gammas: Tensor,
                   flats: tuple[FlatViews, FlatViews] | None = None,
                   gaps: bool = True) -> tuple[Tensor, ...] | None:
    r"""K-sparse polytopes: :math:`\theta \leftarrow (1-\gamma)\theta + \gamma v`.

    The vertex puts :math:`-r\,\mathrm{sign}(d_i)` (``+r`` for a zero :math:`d_i`) on the K
    entries of largest :math:`|d_i|`, as :class:`~torchfw.sets.polytopes.KSparsePolytope` does
    (the K entries are found unsorted: their order does not matter, and sorting them cost
    as much as finding them). The sum :math:`S` of the K largest :math:`|d_i|` carries the
    guards: 0 exactly when :math:`d = 0` (no move), not finite when :math:`d` is not (``topk``
    ranks NaN first). Returns the gaps :math:`\langle d, \theta\rangle + r S` when ``gaps``
    is true, else ``None``. Given ``flats`` (the plan's caches of 1-d views: an eager CPU
    step), the gap's dot products read them and the guards are decided on the host.
    """
    host = _host_guards(params[0]) and (flats is not None or not gaps)
    fds = flats[1](ds) if host and flats is not None else [d.reshape(-1) for d in ds]
    tops, idxs, vals = [], [], []
    for flat, k in zip(fds, ks, strict=True):
        top = torch.topk(flat.abs(), min(k, flat.numel()), sorted=False)
        tops.append(top.values)
        idxs.append(top.indices)
        vals.append(torch.take(flat, top.indices))
    values = None
    if gaps or not host:
        sums = torch.stack([t.sum() for t in tops])
    if gaps:
        fps = flats[0](params) if host and flats is not None else [p.reshape(-1) for p in params]
        # <d, theta> - <d, v> = <d, theta> + r * (sum of the K largest |d_i|).
        values = _flat_dots(fds, fps).add_(radii * sums)
    if host:
        # No direction, no move (the K largest |d_i| are 0 exactly when d == 0); a
        # non-finite direction shows among them and turns the tensor NaN after the move.
        # Without gaps, a 2-norm of the K values tells both (one multi-tensor call).
        read = sums.tolist() if gaps else _stacked(torch._foreach_norm(tops, 2))
        host_steps = [0.0 if largest == 0.0 else g
                      for largest, g in zip(read, gammas.tolist(), strict=True)]
        torch._foreach_mul_(params, [1.0 - g for g in host_steps])
        fps = flats[0](params) if flats is not None else [p.view(-1) for p in params]
        for p, idx, val, g, r in zip(fps, idxs, vals, host_steps, radii.tolist(),
                                     strict=True):
            if g != 0.0:
                p.index_add_(0, idx, _signed(val, r * g))
        for p, largest, value in zip(params, tops, read, strict=True):
            # an infinite 2-norm of finite float32 values is an overflow of the squares
            if not math.isfinite(value) and (gaps or not _finite_norm(largest, value)):
                p.fill_(math.nan)
        return None if values is None else _rows(values)
    r = radii
    # No direction, no move: gamma * sign(S); NaN through S.
    steps = _guarded_steps(sums, gammas).mul_(sums.sign())
    torch._foreach_mul_(params, (1.0 - steps).unbind())
    scaled = (r * steps).unbind()
    for p, idx, val, step in zip(params, idxs, vals, scaled, strict=True):
        p.view(-1).index_add_(0, idx, torch.where(val > 0, -step, step))
    return None if values is None else _rows(values)
