"""nvstage against plain nvcc with the same flags: the PTX and SASS inside must be identical.

Where plain nvcc itself runs a shell over a user string (``$``, backquotes, backslashes in a -D
value or a file name), nvcc's result is the shell's, not the user's: nvstage keeps the string
as written, and these tests say so instead of comparing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.pipeline.driver import compile as nvs_compile

KERNEL = """#include <cstdio>
#include "hdr.h"
#ifndef MSG
#define MSG "none"
#endif
__constant__ char msg[] = MSG;
__global__ void k(int *o) { o[threadIdx.x] = HDR_VAL + msg[threadIdx.x % sizeof(msg)]; }
int main() { printf("%s\\n", MSG); return 0; }
"""
SRC = "src dir/k.cu"
INC = "inc dir"


@pytest.fixture
def tree(workdir):
    (workdir / "src dir").mkdir()
    (workdir / SRC).write_text(KERNEL)
    (workdir / INC).mkdir()
    (workdir / INC / "hdr.h").write_text("#define HDR_VAL 7\n")
    (workdir / "out dir").mkdir()
    return workdir


def _dump(toolkit, path: str, what: str) -> str:
    cp = subprocess.run([toolkit.tool("cuobjdump"), what, path], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    text = re.sub(r"identifier = .*", "", cp.stdout)
    return re.sub(r"^member .*$", "", text, flags=re.M)  # archive member names differ


def _same_as_nvcc(toolkit, cwd: Path, opts: CompileOptions, plain: list[str]) -> None:
    build = nvs_compile(SRC, opts, toolkit=toolkit, cwd=cwd, cache=False, jobs=1)
    ref = str(cwd / "plain.out")
    cp = subprocess.run([toolkit.nvcc, *plain, SRC, "-o", ref], cwd=cwd, capture_output=True,
                        text=True)
    assert cp.returncode == 0, cp.stderr
    for what in ("-ptx", "-sass"):
        assert _dump(toolkit, build.output, what) == _dump(toolkit, ref, what), what


@pytest.mark.parametrize("opts,plain", [
    pytest.param(dict(defines=('MSG="a b \'q\' x=y"',), output="out dir/o ut"),
                 ["-DMSG=\"a b 'q' x=y\""], id="define-spaces-quotes-output-spaces"),
    pytest.param(dict(extra=("-Xcompiler", "-Wall,-O1", "--std=c++20", "-DMSG=\"p q=r\"")),
                 ["-Xcompiler", "-Wall,-O1", "--std=c++20", "-DMSG=\"p q=r\""],
                 id="passthrough-xcompiler-std"),
    pytest.param(dict(lineinfo=True, extra=("-G",)), ["-lineinfo", "-G"], id="lineinfo-G"),
    pytest.param(dict(extra=("-lib",), output="lib k.a"), ["-lib"], id="lib"),
])
def test_same_ptx_and_sass_as_plain_nvcc(toolkit, tree, opts, plain):
    opts = dict(opts, include_dirs=(INC,), archs=("sm_90",))
    _same_as_nvcc(toolkit, tree, CompileOptions(**opts), ["-I", INC, "-arch=sm_90", *plain])


@pytest.mark.skipif(not shutil.which("g++-12"), reason="no g++-12 to name with -ccbin")
def test_another_host_compiler_by_name(toolkit, tree):
    opts = CompileOptions(include_dirs=(INC,), archs=("sm_90",), extra=("-ccbin", "g++-12"))
    build = nvs_compile(SRC, opts, toolkit=toolkit, cwd=tree, cache=False, jobs=1)
    host = [r.stage.argv[0] for r in build.runs if r.stage.kind.value == "host-compile"]
    assert host and all(Path(h).name == "g++-12" for h in host)


def test_shell_characters_in_a_define_reach_the_compiler_as_written(toolkit, tree):
    # Plain nvcc hands its commands to a shell: $HOME and $(id) would be expanded there.
    value = "a $HOME $(id) `x` \\\\n"
    opts = CompileOptions(include_dirs=(INC,), archs=("sm_90",), stop="ptx",
                          defines=(f'MSG="{value}"',), output="k.ptx")
    nvs_compile(SRC, opts, toolkit=toolkit, cwd=tree, cache=False, jobs=1)
    want = ", ".join(str(b) for b in value.replace("\\\\", "\\").encode())  # C: \\ is one backslash
    assert "{" + want + "}" in (tree / "k.ptx").read_text()


def test_native_with_no_gpu_says_which_arch_nvcc_chose(cli, toolkit, tree, monkeypatch):
    from nvstage.run.probe import probe

    if probe().available:
        pytest.skip("a GPU is present: -arch=native picks it")
    r = cli("compile", SRC, "-c", "--arch", "native", "-I", INC, "--no-cache")
    assert r.exit_code == 0
    assert "Cannot find valid GPU for '-arch=native', default arch is used" in r.stderr


def test_xcompiler_value_with_a_space_stays_one_word(toolkit, tree):
    from nvstage.compiler.pipeline.planning import make_plan

    opts = CompileOptions(include_dirs=(INC,), extra=("-Xcompiler", "-Wl,-rpath,/a b"))
    plan, _, _ = make_plan(SRC, opts, toolkit, tree / "out dir", str(tree))
    host = next(s for s in plan.stages if s.kind.value == "host-compile")
    assert "/a b" in host.argv and "b" not in host.inputs


def test_an_extra_input_file_with_a_space(toolkit, tree):
    from nvstage.compiler.pipeline.planning import make_plan

    (tree / "src dir/b.cu").write_text("__global__ void b() {}\n")
    opts = CompileOptions(include_dirs=(INC,), compile_only=True, extra=("src dir/b.cu",))
    make_plan(SRC, opts, toolkit, tree / "out dir", str(tree))


def test_a_path_nvcc_opens_itself_with_a_blank_is_refused_clearly(toolkit, tree):
    from nvstage.errors import UsageError
    from nvstage.compiler.pipeline.planning import make_plan

    opts = CompileOptions(include_dirs=(INC,), extra=("-ccbin", "/my cc/g++"))
    with pytest.raises(UsageError, match="nvcc reads '/my cc/g\\+\\+' itself"):
        make_plan(SRC, opts, toolkit, tree / "out dir", str(tree))
