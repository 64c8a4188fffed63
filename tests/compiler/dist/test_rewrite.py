"""The farm's rewrites of cicc's and ptxas's commands are output-neutral: each rewritten
command, run locally, writes the same bytes as nvcc's own."""

from __future__ import annotations

from pathlib import Path

import pytest

import nvstage
from nvstage import proc
from nvstage.compiler.dist.rewrite import rewrite
from nvstage.compiler.pipeline.driver import stage_env
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import Stage, StageKind

SOURCE = """
namespace { __device__ float twice(float x) { return 2.0f * x; } }
__global__ void rw(float *a, float b) { a[threadIdx.x] = twice(a[threadIdx.x]) + b; }
"""


def _cicc(argv_tail: list[str]) -> Stage:
    return Stage(4, StageKind.CICC, "cicc", ["/tk/cicc", *argv_tail],
                 inputs=["/w/k.nvstage/k.cpp1.ii", "/w/k.nvstage/k.module_id"],
                 outputs=["/w/k.nvstage/k.ptx"])


def test_cicc_simt_only_moves_before_the_input_and_paths_become_relative():
    s = _cicc(["--orig_src_path_name", "/w/k.nvstage/k.cu", "--module_id_file_name",
               "/w/k.nvstage/k.module_id", "/w/k.nvstage/k.cpp1.ii", "--simt-only", "-o",
               "/w/k.nvstage/k.ptx"])
    rw = rewrite(s, "/w")
    assert rw.cwd == "/w/k.nvstage"
    # The source's name is written into the PTX: never changed, even inside the folder.
    assert rw.argv == ["/tk/cicc", "--orig_src_path_name", "/w/k.nvstage/k.cu",
                       "--module_id_file_name", "k.module_id", "--simt-only", "k.cpp1.ii",
                       "-o", "k.ptx"]


@pytest.mark.parametrize("tail", [
    ["/w/k.nvstage/k.cpp1.ii", "--unknown-flag", "-o", "/w/k.nvstage/k.ptx"],
    ["/w/k.nvstage/k.cpp1.ii", "-o", "/w/k.nvstage/k.ptx", "--simt-only"],
    ["-o", "/w/k.nvstage/k.ptx"],
])
def test_cicc_commands_of_other_shapes_are_not_sent(tail):
    assert rewrite(_cicc(tail), "/w") is None


def test_paths_outside_the_stage_folder_stay():
    s = Stage(5, StageKind.PTXAS, "ptxas",
              ["/tk/ptxas", "-arch=sm_90", "--opt=/elsewhere/x", "/w/o/k.ptx", "-o",
               "/w/o/k.cubin"], inputs=["/w/o/k.ptx"], outputs=["/w/o/k.cubin"])
    assert rewrite(s, "/w").argv == ["/tk/ptxas", "-arch=sm_90", "--opt=/elsewhere/x",
                                     "k.ptx", "-o", "k.cubin"]
    host = Stage(6, StageKind.HOST_COMPILE, "gcc", ["gcc", "-c", "x"], inputs=["x"],
                 outputs=["y"])
    assert rewrite(host, "/w") is None


def test_rewritten_cicc_and_ptxas_write_the_bytes_nvcc_s_commands_write(toolkit, workdir):
    Path("rw.cu").write_text(SOURCE)
    build = nvstage.compile("rw.cu", CompileOptions(archs=("sm_90",), compile_only=True),
                            toolkit=toolkit, keep="kept", cache=False)
    env = stage_env(build.plan)
    checked = set()
    for run in build.runs:
        rw = rewrite(run.stage, str(workdir))
        if rw is None:
            continue
        outputs = [Path(workdir, o) for o in run.stage.outputs
                   if Path(workdir, o).is_file()]
        plain = {p: p.read_bytes() for p in outputs}
        for p in outputs:
            p.unlink()
        cp = proc.run(rw.argv, cwd=rw.cwd, env=env)
        assert cp.returncode == 0, cp.stderr
        assert {p: p.read_bytes() for p in outputs} == plain, run.stage.kind
        assert rw.argv != run.stage.argv  # something was rewritten
        checked.add(run.stage.kind)
    assert checked == {StageKind.CICC, StageKind.PTXAS}


def test_placement_from_the_client_s_statistics():
    from nvstage.compiler.dist.sccache import Counts, parse_stats, placement
    from nvstage.compiler.manifest.where import Where

    text = ('{"stats": {"compilations": 3, "cache_hits": {"counts": {"CUBIN": 2}}, '
            '"dist_compiles": {"127.0.0.1:10501": 3}, "dist_errors": 0}}')
    assert parse_stats(text) == Counts(3, 3, 2, 0)
    assert placement(Counts(1, 1, 0, 0))[0] is Where.REMOTE
    assert placement(Counts(2, 2, 0, 0))[0] is Where.REMOTE  # a neighbour's, also remote
    assert placement(Counts(0, 0, 1, 0))[0] is Where.REMOTE_HIT
    assert placement(Counts(1, 0, 0, 1)) == (Where.LOCAL, "the farm answered with an error")
    assert placement(Counts(2, 1, 0, 0))[0] is Where.UNKNOWN  # one here, one there: whose?
    assert placement(Counts(1, 1, 1, 0))[0] is Where.UNKNOWN
    with pytest.raises(ValueError):
        parse_stats("sccache: error: no server")
