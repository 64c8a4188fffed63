"""NVRTC writes its log and outputs into buffers nvstage hands it: they must be its own."""

from nvstage.compiler.nvrtc import compile_nvrtc
from nvstage.compiler.nvcc.options import CompileOptions


def test_an_empty_nvrtc_log_leaves_pythons_shared_bytes_alone(toolkit, tmp_path):
    # A clean compile's log is one NUL. Written into b" " * 1 (CPython's shared b" "), it
    # made every later " ".encode() b"\0": os.environ then refused COLUMNS=" ".
    (tmp_path / "k.cu").write_text("__global__ void k(float *x) { x[0] = 1.f; }\n")
    build = compile_nvrtc("k.cu", CompileOptions(archs=("sm_90",), stop="cubin"),
                          toolkit=toolkit, cwd=tmp_path)
    assert build.status == "ok" and build.artifact("cubin") is not None
    assert " ".encode()[0] == 32 and (b" " * 1)[0] == 32  # not through the shared object
    assert build.artifact("ptx").path.endswith(".ptx")
