"""The launcher's reading of a command line: staged, or plain nvcc with the reason (pure)."""

from pathlib import Path

import pytest

from nvstage.cli.main import is_launcher_command
from nvstage.compiler.launcher.flow import Fallback, Staged, understand
from nvstage.compiler.nvcc.grammar import Grammar

HELP = Path(__file__).parents[2] / "data" / "captured" / "cuda13.5-nvcc-help.txt"
CMAKE = ["-forward-unknown-to-host-compiler", "-I/p/include",
         "--generate-code=arch=compute_80,code=[compute_80,sm_80]", "-MD", "-MT",
         "CMakeFiles/app.dir/src/k.cu.o", "-MF", "CMakeFiles/app.dir/src/k.cu.o.d", "-x", "cu",
         "-c", "/p/src/k.cu", "-o", "CMakeFiles/app.dir/src/k.cu.o"]


@pytest.fixture(scope="module")
def g():
    return Grammar.from_help(HELP.read_text())


def test_cmake_compile_line_is_staged_with_its_depfile(g, tmp_path):
    p = understand(CMAKE, g, str(tmp_path), {})
    assert isinstance(p, Staged) and p.source == "/p/src/k.cu"
    assert p.depfile == ("CMakeFiles/app.dir/src/k.cu.o", False, False)
    p = understand(["-c", "k.cu", "-MMD", "-MP", "-o", "out/k.o"], g, str(tmp_path), {})
    assert p.depfile == ("out/k.o", True, True)
    assert understand(["-c", "k.cu", "-MD"], g, str(tmp_path), {}).depfile == ("k.o", False,
                                                                                False)


@pytest.mark.parametrize("args, why", [
    (["-dlink", "a.o", "b.o", "-o", "d.o"], "-dlink"),
    (["-lib", "-c", "a.cu"], "-lib"),
    (["-E", "a.cu"], "-E"),
    (["-M", "a.cu"], "-M"),
    (["a.cu", "-o", "app"], "links"),
    (["-c", "a.cu", "b.cu"], "2 input files"),
    (["-c", "a.cpp"], "not compiled as CUDA"),
    (["-c", "a.cu", "-fPIC"], "-fPIC"),
    (["--version"], "--version"),
    (["-c", "a.cu", "--keep"], "intermediates"),
])
def test_what_plain_nvcc_runs_and_why(g, tmp_path, args, why):
    f = understand(args, g, str(tmp_path), {})
    assert isinstance(f, Fallback) and why in f.reason


def test_forwarded_unknown_options_and_x_cu(g, tmp_path):
    assert isinstance(understand(["-forward-unknown-to-host-compiler", "-fPIC", "-c", "a.cu"],
                                 g, str(tmp_path), {}), Staged)
    assert isinstance(understand(["-x", "cu", "-c", "a.cpp"], g, str(tmp_path), {}), Staged)


def test_env_flags_and_options_files_count(g, tmp_path):
    env = {"NVCC_APPEND_FLAGS": "-lib"}
    assert "-lib" in understand(["-c", "a.cu"], g, str(tmp_path), env).reason
    (tmp_path / "opts.rsp").write_text("-c -MD")
    p = understand(["--options-file", "opts.rsp", "a.cu"], g, str(tmp_path), {})
    assert isinstance(p, Staged) and p.depfile == ("a.o", False, False)


def test_launcher_commands_are_told_from_nvstage_commands():
    assert is_launcher_command("/usr/local/cuda/bin/nvcc") and is_launcher_command("nvcc")
    assert not is_launcher_command("compile") and not is_launcher_command("show")
