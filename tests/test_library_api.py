"""The library API ``import nvstage`` offers: README's "As a library" example, run as written
(in a copy of kernels/ and examples/, so what it writes lands there), and the promise that
the names load lazily."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# README's "As a library", word for word: run from the repository root. A run on the GPU is
# the one line it shows commented out (the tests run without one; tests/gpu/ runs it).
EXAMPLE = '''
import nvstage

# compile, stage by stage, every artifact kept (nvstage compile)
opts = nvstage.CompileOptions(archs=("sm_90",), compile_only=True)
build = nvstage.compile("kernels/multi.cu", opts, keep="multi.nvstage")
for run in build.runs:
    print(run.stage.index, run.stage.kind.value, run.stage.arch, f"{run.seconds * 1e3:.1f} ms")

# read it back, and its kernels: one record per kernel and arch (nvstage show)
build = nvstage.load_build("multi.nvstage")
for k in nvstage.kernel_records(build):
    print(k.name, k.arch, k.registers, k.spill_bytes, k.shared_bytes, k.final)
(scale,) = nvstage.kernel_records(build, kernel="scale<float>")  # as show --kernel names it

# occupancy, offline (nvstage occupancy)
occ = nvstage.kernel_occupancy("multi.nvstage", gpu=nvstage.gpu("h200"), block=256)
for k in occ.kernels:
    print(k.record.name, f"{k.occupancy.occupancy:.0%}", ", ".join(k.occupancy.limiters))

# a workload: read, compiled and validated with no GPU (nvstage run --dry-run) ...
session = nvstage.open_session("examples/run/saxpy.toml", arch="sm_90")
print(len(session.plan()["operations"]), "operations per repetition")
# ... and run where there is one (nvstage run --profile)
# session = nvstage.run_workload("examples/run/saxpy.toml"); print(session.result.status)

# the offline model, and two workloads side by side (nvstage model, nvstage compare)
h200 = nvstage.gpu("h200")
e = nvstage.estimate("examples/model/chain_unfused.toml", h200)
print(f"T = {e.total_s * 1e6:.1f} us (estimate)", e.terms())
c = nvstage.compare("examples/model/chain_unfused.toml", "examples/model/chain_fused.toml", h200)
print(c.verdict.sentence(c.a.workload, c.b.workload))

# the CI gate, and the HTML page (nvstage check, nvstage report)
result = nvstage.check_build("multi.nvstage", config="examples/budgets.toml")
print("passed" if result.passed else [v.message for v in result.violations])
print(nvstage.write_report(build, "multi.html").path)
'''


def test_readme_example_runs(tmp_path):
    for folder in ("kernels", "examples"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    cp = subprocess.run([sys.executable, "-c", EXAMPLE], cwd=tmp_path, capture_output=True,
                        text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr[-3000:]
    out = cp.stdout
    assert "ptxas" in out and "scale<float> sm_90" in out
    assert "operations per repetition" in out and "us (estimate)" in out
    assert (tmp_path / "multi.nvstage" / "stages.json").is_file()
    assert (tmp_path / "multi.html").read_text().endswith("</html>\n")


def test_the_public_names_load_lazily_and_all_resolve():
    code = ("import sys, nvstage\n"
            "assert not any(m.startswith(('nvstage.compiler', 'nvstage.run', 'typer', 'rich'))"
            " for m in sys.modules), sorted(sys.modules)\n"
            "for name in nvstage.__all__:\n"
            "    assert getattr(nvstage, name) is not None, name\n"
            "print(len(nvstage.__all__))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert int(cp.stdout) > 25


def test_the_public_names_do_not_shadow_the_packages():
    import importlib

    import nvstage

    for package in ("compiler", "inspect", "hw", "run", "model", "check", "report", "cli"):
        assert package not in nvstage._EXPORTS
        importlib.import_module(f"nvstage.{package}")


def test_names_the_library_pages_give_resolve():
    import nvstage

    assert nvstage.load_build_record is nvstage.load_build_log  # its name before the move
    assert nvstage.BuildLog.__name__ == "BuildLog"
    assert callable(nvstage.compile_triton) and callable(nvstage.find_toolkit)
