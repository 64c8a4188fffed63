"""``nvstage --help``: the commands in the order a user meets them. Plain text, no typer and
no rich: the help is printed before anything heavy is imported."""

from __future__ import annotations

# The commands in the order a user meets them; tests/cli/test_main.py checks this against the
# typer app, so a new command cannot be left out of the help.
COMMANDS = (
    ("Build", (("compile", "Compile a .cu file as nvcc would, one stage at a time, timing "
                           "each stage."),
               ("cache", "The stage cache: its folder, size, entries and hit rate."))),
    ("Inspect", (("show", "What is inside an artifact: PTX entries, SASS, resources, fatbin "
                          "images."),
                 ("occupancy", "Theoretical occupancy per kernel, and what limits it."),
                 ("diff", "Two builds (or two builds from a build record) kernel by kernel and "
                          "stage by stage."))),
    ("Run and estimate", (("run", "Run a workload's kernels on the GPU, check the results, "
                                  "measure the time."),
                          ("model", "Estimate T = launches + kernels + transfers offline."),
                          ("compare", "Two workloads (unfused vs fused) term by term, with a "
                                      "verdict."))),
    ("CI", (("check", "Kernels against budgets: registers, spills, shared memory, sizes, "
                      "arches, times."),
            ("report", "One HTML file: stage graph, stage times, resources, SASS, PTX, the "
                       "run."))),
    ("Setup", (("doctor", "What toolkit, host compiler, driver and GPUs this machine has; a "
                          "CMake toolchain file for it."),)),
)

HELP = """\
Usage: nvstage COMMAND [ARGS]...     (nvstage COMMAND --help for each)
       nvstage NVCC [NVCC ARGS]...   (in front of nvcc, as ccache: CMake's compiler launcher)
       nvstage TOOL [ARGS]...        (in front of any other build step: run unchanged, timed
                                      and recorded)

  See and measure how CUDA source becomes work on a GPU. compile runs nvcc's own plan stage
  by stage and keeps every artifact; show, occupancy and diff look inside what it built; run
  launches it on a GPU and decomposes the time; model and compare estimate the same
  offline; check and report gate and document builds in CI.

{commands}
Options:
  --version   print the version and exit
  -h, --help  this help

Examples:
  nvstage compile kernels/vadd.cu -arch=sm_90 -o vadd --keep
  nvstage show vadd.nvstage --sections resources
  nvstage run examples/run/saxpy.toml --profile
  nvstage check kernels/multi.cu --config examples/budgets.toml
"""


def top_help() -> str:
    lines = []
    for panel, commands in COMMANDS:
        lines.append(f"{panel}:")
        lines += [f"  {name:<10} {text}" for name, text in commands]
        lines.append("")
    return HELP.format(commands="\n".join(lines))
