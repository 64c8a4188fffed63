"""nvstage: see and measure how CUDA source becomes work on a GPU.

The library is the product; the ``nvstage`` command is a thin layer over it::

    import nvstage
    build = nvstage.compile("kernels/vadd.cu", nvstage.CompileOptions(archs=("sm_90",)), keep="out")
    for run in build.runs:
        print(run.stage.kind, run.seconds)
"""

__version__ = "0.1.0"

# The public names are loaded on first use (PEP 562): `nvstage --help` and every command that
# does not compile need not import the pipeline, the cache and the thread pool.
_EXPORTS = {
    "NvstageError": "errors", "StageFailed": "errors", "ToolkitError": "errors",
    "UsageError": "errors", "CompileOptions": "compiler.options", "Build": "compiler.record",
    "StageRun": "compiler.record", "compile": "compiler.driver", "Plan": "compiler.plan",
    "Stage": "compiler.plan", "StageKind": "compiler.plan", "parse_dryrun": "compiler.plan",
    "Toolkit": "compiler.toolkit", "find_toolkit": "compiler.toolkit",
}
__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
