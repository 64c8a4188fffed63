"""nvstage: see and measure how CUDA source becomes work on a GPU.

The library is the product; the ``nvstage`` command is a thin layer over it::

    import nvstage
    build = nvstage.compile("kernels/vadd.cu", nvstage.CompileOptions(archs=("sm_90",)), keep="out")
    for run in build.runs:
        print(run.stage.kind, run.seconds)
"""

__version__ = "0.1.0"

from .errors import NvstageError, StageFailed, ToolkitError, UsageError  # noqa: E402
from .options import CompileOptions  # noqa: E402
from .pipeline import Build, StageRun, compile  # noqa: E402
from .plan import Plan, Stage, StageKind, parse_dryrun  # noqa: E402
from .toolkit import Toolkit, find_toolkit  # noqa: E402

__all__ = [
    "Build", "CompileOptions", "NvstageError", "Plan", "Stage", "StageFailed", "StageKind",
    "StageRun", "Toolkit", "ToolkitError", "UsageError", "compile", "find_toolkit",
    "parse_dryrun", "__version__",
]
