"""nvstage compile --via nvrtc: the same table, --keep, --json as the nvcc path; clean errors."""

import json
import shutil


def test_table_and_keep(cli, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    r = cli("compile", "saxpy.cu", "--via", "nvrtc", "--arch", "sm_90", "--keep")
    assert r.exit_code == 0, r.output
    for word in ("nvrtc", "nvjitlink", "saxpy.ptx", "saxpy.sm_90.cubin",
                 "saxpy.nvjitlink.sm_90.cubin", "2 stages"):
        assert word in r.output
    assert "plan " not in r.output  # no nvcc plan on this path: no "plan 0.0 us"
    kept = workdir / "saxpy.nvstage"
    assert {"saxpy.ptx", "saxpy.sm_90.cubin", "saxpy.nvjitlink.sm_90.cubin",
            "stages.json"} <= {p.name for p in kept.iterdir()}


def test_json_manifest_with_name_map(cli, kernels, workdir):
    shutil.copy(kernels / "templates.cu", workdir)
    r = cli("compile", "templates.cu", "--via", "nvrtc", "--arch", "sm_80", "--json",
            "--name-expr", "scale<int>", "--name-expr", "scale<float>")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["via"] == "nvrtc" and doc["status"] == "ok"
    assert [s["kind"] for s in doc["stages"]] == ["nvrtc", "nvjitlink"]
    assert doc["runtime"]["name_map"] == {"scale<int>": "_Z5scaleIiEvPT_S0_i",
                                          "scale<float>": "_Z5scaleIfEvPT_S0_i"}
    assert "scale<int> -> _Z5scaleIiEvPT_S0_i" in doc["stages"][0]["stdout"]
    assert doc["keep_dir"] is None and list(workdir.iterdir()) == [workdir / "templates.cu"]


def test_syntax_error_is_one_message_with_the_log(cli, workdir):
    (workdir / "bad.cu").write_text("__global__ void k(int* p) { p[0] = 1 }\n")
    r = cli("compile", "bad.cu", "--via", "nvrtc", "--arch", "sm_90")
    assert r.exit_code == 5
    assert "error: stage 1 (nvrtc): nvrtc failed on bad.cu" in r.stderr
    assert 'bad.cu(1): error: expected a ";"' in r.stderr
    assert "> 1 | __global__ void k(int* p) { p[0] = 1 }" in r.stderr
    assert "Traceback" not in r.output


def test_unknown_option_is_one_message(cli, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    r = cli("compile", "saxpy.cu", "--via", "nvrtc", "--arch", "sm_90", "--", "--bogus")
    assert r.exit_code == 5
    assert "NVRTC rejected an option" in r.stderr and "unrecognized option --bogus" in r.stderr
    assert "Traceback" not in r.output


def test_missing_name_expression_is_one_message(cli, kernels, workdir):
    shutil.copy(kernels / "templates.cu", workdir)
    r = cli("compile", "templates.cu", "--via", "nvrtc", "--arch", "sm_90",
            "--name-expr", "nosuch<float>")
    assert r.exit_code == 5
    assert "name expression 'nosuch<float>' does not resolve" in r.stderr
    assert 'identifier "nosuch" is undefined' in r.stderr
    assert "Traceback" not in r.output


def test_host_code_and_several_archs_are_refused_clearly(cli, kernels, workdir):
    shutil.copy(kernels / "vadd.cu", workdir)
    r = cli("compile", "vadd.cu", "--via", "nvrtc", "--arch", "sm_90")
    assert r.exit_code == 5 and "NVRTC cannot open <cstdio>" in r.stderr
    assert "device code only" in r.stderr
    r = cli("compile", "vadd.cu", "--via", "nvrtc", "--arch", "sm_80", "--arch", "sm_90")
    assert r.exit_code == 2 and "one arch per program" in r.stderr


def test_json_error_is_json(cli, workdir):
    (workdir / "bad.cu").write_text("__global__ void k() { return 1 }\n")
    r = cli("compile", "bad.cu", "--via", "nvrtc", "--arch", "sm_90", "--json")
    assert r.exit_code == 5
    doc = json.loads(r.stdout)
    assert doc["error"] == "RuntimeCompileFailed" and "bad.cu(1)" in doc["log"]
