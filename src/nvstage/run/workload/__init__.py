"""What ``nvstage run`` runs: a workload, as a TOML file or the same dataclasses from Python.

A workload names its device code (a .cu source compiled through the nvstage pipeline, or a
packaged cubin / fatbin / PTX), named parameters, buffers (dtype, element count, initial
contents), which buffers go to the device before and come back after, a sequence of launches,
repetitions and warm-up, and a check of the results. Expressions (``"(n + 255) / 256"``,
``"a * x + y"``) go through small AST evaluators, never ``eval``.

Validation against the kernels' real parameter lists (from PTX, and the demangled signature
where the name is mangled) happens here, before anything touches a GPU.

Example::

    [kernel]
    source = "../kernels/saxpy.cu"
    [params]
    n = "1 << 20"
    a = 2.0
    [buffers.x]
    dtype = "float32"
    count = "n"
    init = { random = { seed = 1 } }
    [buffers.y]
    dtype = "float32"
    count = "n"
    init = { range = { start = 0 } }
    [transfer]
    to_device = ["x", "y"]
    from_device = ["y"]
    [[launch]]
    kernel = "saxpy"
    grid = "(n + 255) / 256"
    block = 256
    args = [{ i32 = "n" }, { f32 = "a" }, "x", "y"]
    [run]
    reps = 10
    warmup = 2
    [check]
    rtol = 1e-6
    [check.expect]
    y = "a * x + y"

The format, one concept a module: ``spec`` (the records and their evaluated values),
``reader`` (TOML to records), ``expr`` (the bounded expression evaluator), ``signatures``
(kernel parameter lists from PTX), ``validate`` (launches against those lists), ``data``
(initial contents and the result check) and ``dry_run`` (the plan ``--dry-run`` prints).
Compiling the code for an arch is ``nvstage.run.prepare``.
"""

import os

from nvstage.run.workload.spec import Workload

__all__ = ["Workload", "load_workload"]


def load_workload(path: str | os.PathLike) -> Workload:
    """A workload file, read and checked (errors name the file, the table and the key)."""
    return Workload.from_toml(path)
