"""nvstage compile and doctor through the CLI: tables, JSON, and one-line errors."""

import json
import os
import shutil
import subprocess
import sys

import pytest


def test_compile_prints_the_stage_table_and_keeps(cli, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    r = cli("compile", "saxpy.cu", "-c", "--arch", "sm_90", "--keep")
    assert r.exit_code == 0, r.output
    for word in ("host-preprocess", "cudafe++", "cicc", "ptxas", "fatbinary", "host-compile",
                 "saxpy.ptx", "saxpy.sm_90.cubin"):
        assert word in r.output
    assert (workdir / "saxpy.nvstage/stages.json").is_file()
    assert (workdir / "saxpy.o").is_file()


def test_compile_json_is_the_manifest_on_stdout(cli, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    r = cli("compile", "saxpy.cu", "--ptx", "--arch", "sm_80", "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["schema"] == "nvstage.compile/1" and doc["status"] == "ok"
    assert [s["kind"] for s in doc["stages"]][:2] == ["device-preprocess", "cicc"]
    assert (workdir / "saxpy.ptx").read_text().startswith("//")
    assert doc["keep_dir"] is None and not (workdir / "saxpy.nvstage").exists()


def test_nvcc_args_after_double_dash_pass_through(cli, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    r = cli("compile", "saxpy.cu", "--cubin", "--arch", "sm_90", "--json", "--", "-Xptxas",
            "-v")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    ptxas = next(s for s in doc["stages"] if s["kind"] == "ptxas")
    assert "-v" in ptxas["argv"] and "Used" in ptxas["stderr"]


def test_errors_are_one_message_and_an_exit_code(cli, workdir):
    r = cli("compile", "missing.cu")
    assert r.exit_code == 2 and "error: no such file: missing.cu" in r.stderr
    assert "Traceback" not in r.output
    (workdir / "k.cu").write_text("__global__ void k() {}\n")
    r = cli("compile", "k.cu", "--arch", "sm_50")
    assert r.exit_code == 2 and "unsupported gpu architecture 'sm_50'" in r.stderr
    assert "sm_90" in r.stderr  # says what would work
    (workdir / "bad.cu").write_text("__global__ void k() { return 1 }\n")
    r = cli("compile", "bad.cu", "--keep")
    assert r.exit_code == 5
    assert "stage 3 (cudafe++) failed" in r.stderr and "reproduce with:" in r.stderr
    assert "bad.cu(1): error" in r.stderr
    assert "Traceback" not in r.output
    r = cli("compile", "k.cu", "--ptx", "--cubin")
    assert r.exit_code == 2 and "choose one stop point" in r.stderr


def test_json_error_is_json_too(cli, workdir):
    r = cli("compile", "missing.cu", "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["error"] == "InputNotFound"


def test_doctor_says_what_works(cli):
    r = cli("doctor", "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["can_compile"] is True
    assert doc["toolkit"]["source"] == "pip wheels"
    names = set(doc["toolkit"]["tools"])
    assert {"nvcc", "cicc", "ptxas", "fatbinary", "cudafe++", "nvlink", "cuobjdump",
            "nvdisasm"} <= names
    assert isinstance(doc["can_run"], bool) and doc["driver"]["reason"]
    r = cli("doctor")
    assert "compile: yes" in r.stdout and "run: " in r.stdout


def test_help_is_fast_and_teaches():
    # A fresh interpreter: --help must not import the heavy parts (cuda, numpy).
    code = ("import sys, nvstage.cli.main as a; sys.argv=['nvstage','--help'];\n"
            "try: a.main()\nexcept SystemExit: pass\n"
            "heavy=[m for m in ('numpy','cuda.core','cuda.bindings','pynvml','typer','rich')\n"
            "       if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "HEAVY []" in out
    assert "compile" in out and "doctor" in out


def test_python_dash_m_works():
    out = subprocess.run([sys.executable, "-m", "nvstage", "--version"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.startswith("nvstage ")


def test_doctor_lists_the_runtime_compilers(cli):
    import json

    doc = json.loads(cli("doctor", "--json").stdout)
    assert doc["runtime_compilers"]["nvrtc"].startswith("13.")
    assert doc["runtime_compilers"]["nvjitlink"].startswith("13.")
    assert "cuda-core" in doc["packages"]


def test_a_narrow_terminal_stacks_cells_instead_of_breaking_names(cli, kernels, workdir,
                                                                 monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    r = cli("compile", kernels / "saxpy.cu", "-c", "-arch", "sm_90", "-o", "s.o")
    assert r.exit_code == 0, r.stderr
    table = r.stdout.splitlines()
    assert table and max(map(len, table)) <= 90
    text = r.stdout
    # Whole names, one per line, and the tool under its stage where they differ.
    for name in ("saxpy.cudafe1.stub.c", "saxpy.sm_90.cubin", "host-preprocess",
                 "device-preprocess", "-> s.o"):
        assert name in text, name
    assert "(gcc)" in text and "…" not in text
    # 80 columns (and down to about 70): the arch goes under the stage as well
    monkeypatch.setenv("COLUMNS", "72")
    r = cli("compile", kernels / "saxpy.cu", "-c", "-arch", "sm_90", "-o", "s.o")
    assert max(map(len, r.stdout.splitlines())) <= 72
    assert "saxpy.cudafe1.stub.c" in r.stdout and "…" not in r.stdout
    assert "device-preprocess" in r.stdout and "compute_90" in r.stdout


def test_a_source_named_like_an_option_builds_as_plain_nvcc_does(cli, kernels, workdir,
                                                                   toolkit):
    # The path type turns ./-dash.cu into -dash.cu, which nvcc took for an option.
    shutil.copy(kernels / "saxpy.cu", workdir / "-dash.cu")
    r = cli("compile", "./-dash.cu", "-c", "--arch", "sm_90", "--keep")
    assert r.exit_code == 0, r.stderr
    assert (workdir / "-dash.o").is_file()  # the name nvcc derives, where nvcc puts it
    (workdir / "ref").mkdir()
    subprocess.run([toolkit.nvcc, "-c", "-arch=sm_90", "--keep", "--keep-dir", "ref",
                    "./-dash.cu", "-o", "ref/-dash.o"], cwd=workdir, check=True,
                   capture_output=True)
    ptx = (workdir / "ref/-dash.ptx").read_text()
    assert (workdir / "-dash.nvstage/-dash.ptx").read_text() == ptx
    # Absolute paths: cuobjdump too would read -dash.o as an option. The first lines name
    # the file.
    sass = [subprocess.run([toolkit.tool("cuobjdump"), "-sass", str(workdir / o)],
                           capture_output=True, text=True, check=True).stdout.split("\n", 2)[2]
            for o in ("-dash.o", "ref/-dash.o")]
    assert sass[0] == sass[1] and "saxpy" in sass[0]
    # --ptx: plain nvcc writes -dash.ptx, then fails its own check of it (ptxas reads the
    # name as an option); nvstage names it ./-dash.ptx for nvcc, and the check passes.
    r = cli("compile", "./-dash.cu", "--ptx", "--arch", "sm_90")
    assert r.exit_code == 0, r.stderr
    assert (workdir / "-dash.ptx").read_text() == ptx
    (workdir / "sub").mkdir()
    shutil.move(workdir / "-dash.cu", workdir / "sub/-dash.cu")
    r = cli("compile", "sub/-dash.cu", "--ptx", "--arch", "sm_90", "-o", "-o.ptx")
    assert r.exit_code == 0, r.stderr
    assert (workdir / "-o.ptx").read_text() == ptx.replace("./-dash.cu", "sub/-dash.cu")


@pytest.mark.parametrize("columns", ["abc", "-5", "0", "99999999", "1" * 30, " ", "٣"])
def test_junk_columns_fall_back_to_a_default_width(cli, kernels, workdir, monkeypatch,
                                                  columns):
    monkeypatch.setenv("COLUMNS", columns)
    r = cli("compile", "missing.cu")
    assert r.exit_code == 2 and "error: no such file: missing.cu" in r.stderr
    r = cli("compile", kernels / "saxpy.cu", "--ptx", "--arch", "sm_90", "-o", "s.ptx")
    assert r.exit_code == 0, r.stderr
    assert "saxpy.cpp1.ii" in r.stdout and max(map(len, r.stdout.splitlines())) <= 120


def test_help_ignores_junk_columns():
    # typer renders --help through rich, which took COLUMNS=99999999 as a width (300 MB).
    for columns in ("abc", "99999999", "1" * 30):
        cp = subprocess.run([sys.executable, "-m", "nvstage", "compile", "--help"],
                            env={**os.environ, "COLUMNS": columns}, capture_output=True,
                            text=True, timeout=60)
        assert cp.returncode == 0 and "Traceback" not in cp.stderr, cp.stderr
        assert "--keep" in cp.stdout and len(cp.stdout) < 50_000


@pytest.mark.parametrize("stop, sections", [("-c", "resources"), ("--fatbin", "resources"),
                                            ("-c", "all")])
def test_show_without_keep_reads_a_folder_that_still_exists(cli, kernels, workdir, stop,
                                                            sections):
    shutil.copy(kernels / "saxpy.cu", workdir)
    out = "s.o" if stop == "-c" else "s.fatbin"
    r = cli("compile", "saxpy.cu", stop, "-arch=sm_90", "-o", out, "--show", sections,
            "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["keep_dir"] is None and doc["show"]["resources"]
    assert not list(workdir.glob("*.nvstage"))
    # The summary names no folder: the temporary one --show read from is gone.
    assert "stages in" in r.stderr and "kept in" not in r.stderr, r.stderr
    assert "nvstage-show-" not in r.stderr, r.stderr


def test_threads_are_nvccs_and_build_every_arch(cli, kernels, workdir):
    shutil.copy(kernels / "multi.cu", workdir)
    r = cli("compile", "multi.cu", "-c", "--threads", "2", "-gencode",
            "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90", "--json")
    assert r.exit_code == 0, r.output
    ptxas = [s for s in json.loads(r.stdout)["stages"] if s["kind"] == "ptxas"]
    assert len(ptxas) == 2 and all(">" not in s["argv"] for s in ptxas)
