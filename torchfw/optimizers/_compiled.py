"""Compiled iterations: ``torch.compile`` of one step, CUDA-graph capture of whole blocks.

One concern, for the one run loop (``ConstrainedOptimizer._loop``, which also runs
:func:`~torchfw.optimizers.batched.minimize_batched`): with device scalars an iteration is a
fixed sequence of tensor ops with no host read, so it can be fused (``torch.compile``) and a
block of fused iterations captured once as a CUDA graph and replayed.
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["CompiledStep", "CompiledBlocks"]


class CompiledStep:
    """One iteration of ``optimizer`` on device-scalar ``engine``, fused by ``torch.compile``.

    The compiled function is *pure*: it clones the state, binds the clones to the engine, runs
    the variant's step and returns the new state; the caller copies it back into the engine's
    own buffers. (Compiling the in-place step directly hits inductor mis-ordering writes to
    graph inputs: a value read before an input is overwritten can observe the new contents.)
    Fixed buffers also let a CUDA graph capture blocks of compiled iterations.
    """

    def __init__(self, optimizer, engine):
        self.optimizer = optimizer
        self.engine = engine
        self.buffers = engine.device_state()

        def pure_step(*state):
            engine.bind_state([t.clone() for t in state])
            optimizer._step(engine)
            return tuple(engine.device_state())

        # Every problem shape, dtype and variant is one compiled version; a long-lived process
        # (a grid search, a test suite) needs more than dynamo's default of 8.
        config = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(config, name) and getattr(config, name) < 256:
                setattr(config, name, 256)
        self._pure = pure_step
        self._fn = torch.compile(pure_step, fullgraph=True, dynamic=False)
        #: False once compilation failed and the step runs eagerly.
        self.fused = True

    def __call__(self) -> None:
        try:
            new = self._fn(*self.buffers)
        except Exception as exc:  # compilation can fail on exotic setups: stay correct
            if not self.fused:
                raise
            warnings.warn(f"torch.compile failed ({type(exc).__name__}: {exc}); running the "
                          f"step uncompiled", RuntimeWarning, stacklevel=2)
            self._fn = self._pure
            self.fused = False
            new = self._fn(*self.buffers)
        torch._foreach_copy_(self.buffers, list(new))
        self.engine.bind_state(self.buffers)


class CompiledBlocks:
    """Blocks of compiled iterations of ``optimizer``'s variant on a device-scalar ``engine``.

    The first block runs its first iteration eagerly (it creates every piece of state: step
    counters appear at their first event), compiles the step, runs the rest of the block one
    compiled call at a time (compiling and warming up), and then -- with ``use_graph`` --
    captures a full block of ``block`` iterations as a CUDA graph (a capture records without
    executing). Later full blocks replay the graph; a shorter block (the last one before
    ``max_iter``) runs compiled calls. A step that failed to compile runs eagerly and is not
    captured: only the fused step is known to make no host-to-device copy, which a capture
    refuses (an eager step's Python constants became such copies, 2026-11-27).
    """

    def __init__(self, optimizer, engine, block: int, use_graph: bool):
        self.optimizer = optimizer
        self.engine = engine
        self.block = block
        self.use_graph = use_graph
        self.step: CompiledStep | None = None
        self.graph: torch.cuda.CUDAGraph | None = None

    def run(self, n: int) -> None:
        """Run exactly ``n`` iterations."""
        if self.step is None:
            self.optimizer._step(self.engine)  # eager first iteration: creates every state
            self.step = CompiledStep(self.optimizer, self.engine)
            n -= 1
        if self.graph is not None and n == self.block:
            self.graph.replay()
            return
        for _ in range(n):
            self.step()
        if self.use_graph and self.graph is None and self.block >= 2 and self.step.fused:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                for _ in range(self.block):
                    self.step()
