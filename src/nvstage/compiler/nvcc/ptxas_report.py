"""ptxas's ``-v`` report: the one place the compiler reads it.

ptxas runs as the plan says. nvstage adds no ``-v`` of its own: ptxas writes its options into
the cubin's notes, so the object would no longer be plain nvcc's. The figures the report would
give (registers, spills, stack, shared and constant memory) are read from the cubins ptxas
wrote instead (``cubin_figures``, ``with_figures``). Where the plan itself asks for the report
(``-Xptxas -v``, ``--resource-usage``) the user sees all of it, and it is kept in the build
record too (``StageRun.resources``); NVRTC's and nvJitLink's logs hold it when
``--resource-usage`` asked. Its lines are told from everything else ptxas prints by
``_VERBOSE_LINE``; what they say is ``inspect/resources.py``'s to read.
"""

from __future__ import annotations

import re

from nvstage.files import read_regular
from nvstage.compiler.nvcc.cubin_figures import read_figures
from nvstage.compiler.nvcc.plan import Stage, StageKind
from nvstage.errors import NvstageError

# The lines ptxas prints only under -v (format strings read from ptxas 13.5; "Overriding
# maximum register limit" appears with -maxrregcount). Everything else (warnings, errors,
# performance advisories) plain nvcc prints too.
_VERBOSE_LINE = re.compile(
    r"^ptxas(?:-blackwell)? info\s*: (?:\d+ bytes gmem\b|Compiling entry function '"
    r"|Function properties for |Used \d+ registers\b|Compile time = "
    r"|Overriding maximum register limit )"
    r"|^(?:ptxas\s+\.)?\s+\d+ bytes stack frame, \d+ bytes spill stores, \d+ bytes spill loads"
    r"\s*$")
USER_VERBOSE = ("-v", "--verbose")


def user_verbose(stage: Stage) -> bool:
    """Whether the plan itself runs ptxas with -v (--resource-usage, -Xptxas -v)."""
    return any(a in USER_VERBOSE for a in stage.argv[1:])


def split_ptxas_stderr(text: str, *, user_verbose: bool) -> tuple[str, str]:
    """(what the user sees, the -v report) from the stderr of a ptxas run.

    ptxas runs with -v only where the plan asks for it (-Xptxas -v, --resource-usage): the
    user sees all of it, and the report is kept in the build record too. Without their own
    -v, every -v line is taken out (none comes from ptxas since nvstage stopped adding -v;
    NVRTC's and nvJitLink's logs are split the same way). Pure, line by line: a stage
    restored from the cache splits into the same record (``StageRun.tool_stderr``).
    """
    lines = text.splitlines(keepends=True)
    report = "".join(line for line in lines if _VERBOSE_LINE.match(line))
    if user_verbose:
        return text, report
    return "".join(line for line in lines if not _VERBOSE_LINE.match(line)), report


def split_run(stage: Stage, stdout: str, stderr: str) -> tuple[str, str]:
    """(the stderr a stage's record keeps, the -v report) for a stage that ran or was
    restored: ptxas's stderr split, NVRTC's and nvJitLink's logs (nvJitLink's in stdout)
    searched for the report and left as the library wrote them; others as they are."""
    if stage.kind is StageKind.PTXAS:
        return split_ptxas_stderr(stderr, user_verbose=user_verbose(stage))
    if stage.kind in (StageKind.NVRTC, StageKind.NVJITLINK):
        return stderr, split_ptxas_stderr(f"{stderr}\n{stdout}", user_verbose=True)[1]
    return stderr, ""


def tool_stderr(stage: Stage, stderr: str, report: str) -> str:
    """What the tool printed on stderr, -v report included: what the cache keeps, so a
    restored stage splits into the same ``stderr`` and report (``split_run``)."""
    if not report or user_verbose(stage):
        return stderr
    return report + ("" if report.endswith("\n") else "\n") + stderr


def with_figures(run):
    """``run`` (a ``StageRun``) with what ptxas wrote into its cubins (a stage run or restored
    from the cache alike), read now: the temporary cubin is gone once the plan's ``rm`` ran. A
    cubin that cannot be read leaves the figures unknown (None): the build itself is fine."""
    if run.stage.kind is StageKind.PTXAS and run.ok and run.figures is None:
        figures = []
        try:
            for a in run.artifacts:
                if a.kind == "cubin":
                    figures += read_figures(read_regular(a.path), a.name)
        except (OSError, NvstageError):
            return run
        run.figures = figures
    return run
