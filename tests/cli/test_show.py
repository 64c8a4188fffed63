"""nvstage show through the CLI: JSON figures, kernel filter, bad input, builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_show_object_json(cli, built):
    root, _ = built
    r = cli("show", root / "multi.o", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "object" and set(doc) >= {"fatbin", "resources", "sass"}
    assert [i["arch"] for i in doc["fatbin"]] == ["sm_80", "sm_90", "compute_90"]
    regs = {(k["kernel"], k["arch"]): k["registers"] for k in doc["resources"]}
    assert regs[("histogram", "sm_90")] == 12 and regs[("histogram", "sm_80")] == 8


def test_show_kernel_filter_and_listing(cli, built):
    root, _ = built
    r = cli("show", root / "multi.o", "--sections", "sass", "--kernel", "block_sum",
            "--listing")
    assert r.exit_code == 0, r.output
    assert "block_sum(float const*, float*, int)" in r.stdout
    assert "histogram" not in r.stdout and "EXIT" in r.stdout


def test_show_build_flags_spill(cli, built):
    _, builds = built
    r = cli("show", builds["spill16"].keep_dir, "--sections", "resources", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["resources"]
    assert row["spills"] and row["spill_stores"] > 0
    r = cli("show", builds["spill16"].keep_dir, "--sections", "resources")
    assert "SPILLS" in r.stdout


def test_show_ptx(cli, captured_ptx):
    r = cli("show", captured_ptx, "--json")
    assert r.exit_code == 0, r.output
    (mod,) = json.loads(r.stdout)["ptx"]
    assert mod["target"] == "sm_90" and len(mod["entries"]) == 2


@pytest.fixture
def captured_ptx() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "captured" / "params.sm_90.ptx"


@pytest.mark.parametrize("content, message", [
    (b"hello\n", "not a CUDA artifact"),
    (b"\x7fELF\x02\x01\x01", "truncated"),
    (b"", "empty"),
    (b"\x50\xed\x55\xba\x01\x00\x10\x00" + bytes(8), "empty fatbin"),
])
def test_bad_input_one_message_no_traceback(cli, tmp_path, content, message):
    bad = tmp_path / "bad.fatbin"
    bad.write_bytes(content)
    r = cli("show", bad)
    assert r.exit_code == 6
    assert message in r.stderr and "Traceback" not in r.output
    assert r.stdout == ""


def test_truncated_cubin(cli, built, tmp_path):
    root, _ = built
    bad = tmp_path / "cut.cubin"
    bad.write_bytes((root / "saxpy.sm_90.cubin").read_bytes()[:700])
    r = cli("show", bad)
    assert r.exit_code == 6 and "truncated" in r.stderr and "Traceback" not in r.output


def test_unknown_section(cli, built):
    root, _ = built
    r = cli("show", root / "multi.o", "--sections", "bogus")
    assert r.exit_code == 2 and "unknown section" in r.stderr


def test_show_will_it_run(cli, built):
    root, _ = built
    r = cli("show", root / "multi.o", "--sections", "fatbin", "--gpu", "sm_90", "--json")
    assert r.exit_code == 0, r.output
    assert "will_it_run" in json.loads(r.stdout)


def test_will_not_run_exits_1_so_a_script_can_ask(cli, built):
    # "Will not run on l4" used to exit 0: `nvstage show app --gpu l4 && deploy` deployed.
    root, _ = built
    cubin = root / "saxpy.sm_90.cubin"
    r = cli("show", cubin, "--gpu", "l4")
    assert r.exit_code == 1, r.output
    assert "Will not run on l4" in r.stdout and "Traceback" not in r.output
    r = cli("show", cubin, "--gpu", "l4", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["will_it_run"]["runs"] is False
    r = cli("show", cubin, "--gpu", "h200")
    assert r.exit_code == 0 and "Runs on h200" in r.stdout
    assert "exits 0 when the artifact runs on that GPU, 1 when it will not" in " ".join(
        cli("show", "--help").stdout.split())


@pytest.mark.parametrize("args, words", [
    (["--gpu", "h300"], ["unknown GPU 'h300'"]),
    (["--gpu", "sm_90", "--driver", "580.65.06"], ["not a CUDA driver version"]),
    (["--driver", "13.0"], ["--driver", "--gpu"]),
])
def test_bad_gpu_or_driver_fails_before_any_output(cli, built, args, words):
    # An unknown GPU used to be reported after the tables were printed, with exit 0 output.
    root, _ = built
    r = cli("show", root / "multi.o", *args)
    assert r.exit_code == 2 and r.stdout == "" and "Traceback" not in r.output
    for w in words:
        assert w in r.stderr


def test_help_example_driver_is_accepted(cli, built):
    # The --help example gives --driver as a CUDA version; it must parse.
    root, _ = built
    assert "--driver 13.0" in cli("show", "--help").stdout
    r = cli("show", root / "multi.o", "--sections", "fatbin", "--gpu", "b200", "--driver",
            "13.0", "--json")
    assert r.exit_code == 1, r.output  # will not run: a no, with the document still printed
    verdict = json.loads(r.stdout)["will_it_run"]
    assert verdict["runs"] is False and "9.5" in verdict["explain"]  # PTX 9.5 needs 13.5


def test_a_kernel_filter_that_matches_nothing_lists_the_kernels(cli, kernels, workdir):
    import shutil

    shutil.copy(kernels / "multi.cu", workdir)
    assert cli("compile", "multi.cu", "-c", "--arch", "sm_90", "--keep").exit_code == 0
    r = cli("show", "multi.nvstage", "--kernel", "nope")
    assert r.exit_code == 2 and "no kernel matches --kernel 'nope'" in r.stderr
    assert "block_sum" in r.stderr and "scale<float>" in r.stderr


def test_compile_checks_show_sections_before_building(cli, kernels, workdir):
    import shutil

    shutil.copy(kernels / "saxpy.cu", workdir)
    r = cli("compile", "saxpy.cu", "--show", "banana")
    assert r.exit_code == 2 and "unknown section 'banana'" in r.stderr
    assert not (workdir / "a.out").exists()
