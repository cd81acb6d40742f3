r"""The table of declared second implementations: each compiled or specialised copy of an
iteration's decision logic, the reference it mirrors, and the test that holds them together.

One concern: which code writes an algorithm's steps a second time, and why. The engine layer
writes each piece of Frank-Wolfe arithmetic once (:mod:`torchfw.optimizers._moves`,
:mod:`torchfw.linesearch`); a few places write it again because the shared form cannot run
there at the speed they exist for: numba cannot call a :class:`~torchfw.linesearch.Line`, a
:class:`~torchfw.utils.scalars.Scalars` or a ``Move``, and a whole block of iterations in one
compiled call is the point of the small-problem paths. As ``torch.optim`` keeps
``_single_tensor_sgd`` / ``_multi_tensor_sgd`` / ``_fused_sgd`` as declared implementations of
one algorithm with one test registry, every such copy is listed here with its reference and a
*parity test*: the same iterates (to rounding) and step counts as the reference on the same
problems. ``tests/test_second_implementations.py`` walks this table and fails when a twin or
its reference no longer resolves, when a parity test is missing, or when a function that calls
itself a declared second implementation in its docstring is not in the table.

What is *not* here is shared, not copied: the dense block's curvatures are the compiled
:func:`~torchfw.optimizers._moves.toward_curvature` and
:func:`~torchfw.optimizers._moves.pair_curvature`; the block Frank-Wolfe step of
:class:`~torchfw.optimizers.BlockCoordinateDescent` calls :class:`~torchfw.ExactLineSearch`
itself, and the compiled Weston-Watkins block step calls the one host-float exact step.

This module only names code (dotted paths); importing it imports nothing else, so the core may
be named here without the layers changing (``tests/test_layering.py``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["SecondImplementation", "SECOND_IMPLEMENTATIONS", "resolve"]


@dataclass(frozen=True)
class SecondImplementation:
    """One declared twin.

    Attributes
    ----------
    twin : str
        Dotted path of the second implementation: for a compiled kernel, the Python function it
        is compiled from (which exists with or without numba).
    reference : str
        Dotted path of the code it mirrors (a class stands for its iteration).
    parity_test : str
        ``"tests/<file>.py::<test function>"``: the test that runs both on the same problems
        and asserts the same iterates (to rounding) and step counts; or ``"tests/<file>.py"``
        when the whole file is the twin's parity suite (it must then name the twin).
    why : str
        Why the reference cannot be called instead.
    """

    twin: str
    reference: str
    parity_test: str
    why: str


_NO_OBJECTS = ("numba compiles host floats and arrays only: it cannot take the Line and Scalars "
               "objects of the shared form")

#: Every declared second implementation of the package.
SECOND_IMPLEMENTATIONS: tuple[SecondImplementation, ...] = (
    SecondImplementation(
        "torchfw.optimizers._compiled_loop._run_loop",
        "torchfw.optimizers._engine.QuadraticEngine",
        "tests/test_compiled_loop.py::test_the_loop_takes_the_host_steps",
        "the one compiled quadratic loop: every variant's iterations, the checks, the stopping "
        "test and the corrective step in one call over a row source (the dense engine's "
        "matrix, SVC's kernel rows, whole or cached); on a few hundred to a few thousand atoms "
        "the host engine's interpreter work per iteration costs more than the arithmetic"),
    SecondImplementation(
        "torchfw.optimizers._kernels._select_py",
        "torchfw.optimizers._selection.select",
        "tests/test_selection.py::test_the_compiled_kernel_is_the_torch_selection",
        "the host engine's selection as one compiled pass over NumPy arrays: no temporaries, "
        "no BLAS thread pool (the definition is PyTorch ops over any batch of problems)"),
    SecondImplementation(
        "torchfw.optimizers._kernels._exact_step",
        "torchfw.linesearch.ExactLineSearch.step",
        "tests/test_second_implementations.py::test_exact_step_is_the_line_search",
        _NO_OBJECTS + " (the compiled quadratic loop and the WW block step call it)"),
    SecondImplementation(
        "torchfw.optimizers._kernels._away_step_max",
        "torchfw.optimizers._moves.away_step_max",
        "tests/test_second_implementations.py::test_away_step_max_is_the_moves_one",
        _NO_OBJECTS),
    SecondImplementation(
        "torchfw.svm._matrix._source_row_py",
        "torchfw.utils.column_cache.ColumnCache",
        "tests/test_svc_dense.py::test_row_cache_policy_is_the_column_cache",
        "the compiled whole solve over cache_size reads its rows from a cache inside compiled "
        "code, which cannot call the Python ColumnCache; the lazy path's admission policy "
        "(frequency-based, not LRU, which thrashes on FW's request cycles) is written again"),
    SecondImplementation(
        "torchfw.ww._blocks.fw_single",
        "torchfw.optimizers.bcd.BlockCoordinateDescent._fw_block",
        "tests/test_second_implementations.py::test_ww_fw_block_step_is_the_generic_block_step",
        "the Weston-Watkins block step runs inside the compiled epoch (ww_epoch), specialised to "
        "the block Hessian I + 11^T; the reference is a Python loop over tensors and callables"),
    SecondImplementation(
        "torchfw.ww._sweep.ww_epoch",
        "torchfw.optimizers.bcd.BlockCoordinateDescent._python_sweep",
        "tests/test_multiclass.py::test_compiled_sweep_equals_python_bcd",
        "one BCD epoch over n examples in one compiled call (each inner iteration reads the "
        "weights the previous one wrote: docs/design.md, 'why numba')"),
    SecondImplementation(
        "torchfw.ww._policy._ww_run_py",
        "torchfw.optimizers.bcd.BlockCoordinateDescent.minimize",
        "tests/test_ww_compiled_epochs.py::test_compiled_epochs_are_the_epochs_one_by_one_on_dna",
        "the epochs between two gap checks in one compiled call: BCD's order draws and its "
        "check rule, applied after each epoch without a round trip through the interpreter "
        "(on dna ~70 us of Python an epoch against a shrunk sweep of 125 us)"),
    SecondImplementation(
        "torchfw.ww._policy._skip_smallest_py",
        "torchfw.ww._sweep.skip_smallest",
        "tests/test_ww_compiled_epochs.py::test_compiled_skip_choice_is_the_numpy_policy",
        "the skip choice inside the compiled epochs, which cannot call NumPy's sort"),
    SecondImplementation(
        "torchfw.ww.subproblem.walrus_batched",
        "torchfw.ww._blocks.walrus_single",
        "tests/test_walrus.py::test_batched_equals_single",
        "many independent Walrus subproblems as tensor ops on any device (GPU)"),
    SecondImplementation(
        "torchfw.optim._update.frank_wolfe_update",
        "torchfw.optimizers.FrankWolfe",
        "tests/test_second_implementations.py::test_sfw_update_is_frank_wolfe_with_open_loop",
        "torchfw.optim.StochasticFrankWolfe's step: batched over rows, on the parameters' "
        "device with no host read (torch.compile), momentum directions; with momentum 0, "
        "rescale=None and the learning rate 2/(k+2) it is FrankWolfe with OpenLoop"),
)


def resolve(path: str) -> Any:
    """The object at dotted ``path`` (a module, then attributes: ``pkg.mod.Class.method``)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing = exc.name or module
            if not (module == missing or module.startswith(missing + ".")):
                raise  # a module of the path imports something missing: say so
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"nothing importable in {path!r}")
