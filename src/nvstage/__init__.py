"""nvstage: see and measure how CUDA source becomes work on a GPU.

The library is the product; the ``nvstage`` command is a thin layer over it. Each command is
one call here, in the order of the flow::

    import nvstage

    build = nvstage.compile("kernels/vadd.cu", nvstage.CompileOptions(archs=("sm_90",)),
                            keep="vadd.nvstage")                     # nvstage compile
    build = nvstage.load_build("vadd.nvstage")                       # a kept build, read back
    for k in nvstage.kernel_records(build):                          # nvstage show
        print(k.name, k.arch, k.registers, k.spills)
    occ = nvstage.kernel_occupancy("vadd.nvstage", gpu=nvstage.gpu("h200"), block=256)
    session = nvstage.open_session("examples/run/saxpy.toml")        # nvstage run --dry-run
    session = nvstage.run_workload("examples/run/saxpy.toml")        # nvstage run (a GPU)
    e = nvstage.estimate("examples/model/chain_unfused.toml", nvstage.gpu("h200"))
    c = nvstage.compare("a.toml", "b.toml", nvstage.gpu("h200"))     # nvstage compare
    result = nvstage.check_build("vadd.nvstage", config="budgets.toml")
    nvstage.write_report(build, "report.html")                       # nvstage report

Names are functions' and records'; ``nvstage.run``, ``nvstage.check``, ``nvstage.report``
and ``nvstage.inspect`` are the packages behind them.
"""

__version__ = "0.1.0"

# The public names are loaded on first use (PEP 562): `nvstage --help` and every command that
# does not compile need not import the pipeline, the cache and the thread pool. A value
# "module:attr" exports that attribute under another name.
_EXPORTS = {
    # errors
    "NvstageError": "errors", "StageFailed": "errors", "ToolkitError": "errors",
    "UsageError": "errors",
    # compile
    "CompileOptions": "compiler.nvcc.options", "compile": "compiler.pipeline.driver",
    "Build": "compiler.manifest.model", "StageRun": "compiler.manifest.model",
    "load_build": "compiler.manifest.model",
    "BuildLog": "compiler.buildlog.log", "load_build_log": "compiler.buildlog.log",
    # the name the build log's reader had before it was the build log's
    "load_build_record": "compiler.buildlog.log:load_build_log",
    "Plan": "compiler.nvcc.plan", "Stage": "compiler.nvcc.plan", "StageKind": "compiler.nvcc.plan",
    "parse_dryrun": "compiler.nvcc.plan", "Toolkit": "compiler.toolkit.locate",
    "find_toolkit": "compiler.toolkit.locate", "compile_triton": "compiler.triton.stages",
    # inspect
    "KernelRecord": "inspect.kernels", "kernel_records": "inspect.gather",
    "show": "inspect.view", "diff_builds": "inspect.build_diff",
    "compare_paths": "compiler_paths",
    # hardware
    "GpuSpec": "hw.gpus", "gpu": "hw.gpus:choose_gpu", "occupancy": "hw.occupancy",
    "kernel_occupancy": "inspect.occupancy",
    # run
    "Workload": "run.workload", "load_workload": "run.workload",
    "open_session": "run.session", "run_workload": "run.session",
    # model
    "estimate": "model.estimate", "compare": "model.compare",
    # check and report
    "check_build": "check.target", "write_report": "report.html",
}
__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        module, _, attr = _EXPORTS[name].partition(":")  # "module:attr" where names differ
        value = getattr(importlib.import_module(f".{module}", __name__), attr or name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
