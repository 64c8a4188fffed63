"""nvstage occupancy through the CLI: numbers given, real artifacts, sweeps, JSON, errors.

(Named *_cli so it does not collide with tests/test_occupancy.py: tests/ has no packages.)
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from nvstage.hw.occupancy import occupancy


@pytest.fixture(scope="module")
def built(tmp_path_factory, kernels):
    """multi.cu built once: an sm_90 cubin (with ptxas -v captured) and an sm_80+sm_90 fatbin."""
    import subprocess
    import sys

    d = tmp_path_factory.mktemp("occ")
    shutil.copy(kernels / "multi.cu", d)

    def nvstage(*args):
        return subprocess.run([sys.executable, "-m", "nvstage", *args], cwd=d, text=True,
                              capture_output=True, timeout=600)

    r = nvstage("compile", "multi.cu", "--cubin", "--arch", "sm_90", "-o", "multi.cubin",
                "--json", "--", "-Xptxas", "-v")
    assert r.returncode == 0, r.stderr
    ptxas = next(s for s in json.loads(r.stdout)["stages"] if s["kind"] == "ptxas")
    r = nvstage("compile", "multi.cu", "--fatbin", "-o", "multi.fatbin",
                "--gencode", "arch=compute_80,code=sm_80",
                "--gencode", "arch=compute_90,code=[sm_90,compute_90]")
    assert r.returncode == 0, r.stderr
    return d, ptxas["stderr"]


def _ptxas_numbers(stderr: str, kernel: str) -> tuple[int, int]:
    """(registers, smem bytes) that ptxas -v printed for one (mangled) kernel."""
    block = stderr.split(f"Compiling entry function '{kernel}'", 1)[1]
    block = block.split("Compile time", 1)[0]
    m = re.search(r"Used (\d+) registers", block)
    smem = re.search(r"(\d+) bytes smem", block)
    return int(m.group(1)), int(smem.group(1)) if smem else 0


def test_given_numbers(cli):
    r = cli("occupancy", "--registers", "40", "--arch", "sm_90", "--block", "256")
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if "(given)" in line).split()
    # kernel arch regs smem block blocks warps occupancy limited-by
    assert row == ["(given)", "sm_90", "40", "0", "256", "6", "48/64", "75%", "registers"]


def test_given_numbers_json(cli):
    r = cli("occupancy", "--registers", "32", "--shared", "20000", "--smem", "10000",
            "--gpu", "H200", "--block", "128", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["gpu"] == "h200" and doc["dynamic_shared"] == 10000
    occ = doc["kernels"][0]["occupancy"]
    # 20000 + 10000 + 1024 reserved = 31024 -> 31104; 233472 // 31104 = 7 blocks of 4 warps.
    assert occ["active_blocks"] == 7 and occ["limiters"] == ["shared memory"]
    assert occ["shared_per_block"] == 31104


def test_sweep_table_and_bar(cli):
    r = cli("occupancy", "--registers", "64", "--shared", "8K", "--gpu", "l4", "--sweep")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "gpu: NVIDIA L4 24GB (sm_89, 58 SMs)" in out
    assert "block size sweep" in out and "<- best" in out
    lines = [ln.split() for ln in out.splitlines() if ln.strip().startswith(("32 ", "1024 "))]
    # 32 threads: 8K + 1K = 9216 B; 102400 // 9216 = 11 blocks (shared memory).
    assert lines[0][:4] == ["32", "11", "11", "23%"] and "#####" in lines[0][4]
    assert "best: block" in out


def test_sweep_json(cli):
    r = cli("occupancy", "--registers", "32", "--arch", "sm_90", "--sweep", "--json")
    doc = json.loads(r.stdout)
    sw = doc["kernels"][0]["sweep"]
    assert len(sw["results"]) == 32 and sw["best"]["block_size"] == 1024
    assert doc["kernels"][0]["occupancy"] is None  # no --block given


def test_cubin_matches_ptxas(cli, built):
    d, ptxas_err = built
    r = cli("occupancy", d / "multi.cubin", "--block", "256", "--kernel", "block_sum", "--json")
    assert r.exit_code == 0, r.output
    (k,) = json.loads(r.stdout)["kernels"]
    regs, smem = _ptxas_numbers(ptxas_err, k["kernel"])
    # The figures the occupancy is computed from are ptxas' own: registers, and the static
    # shared memory without the 1 KB reservation that cuobjdump counts in on sm_90.
    assert (k["registers"], k["shared_static"]) == (regs, smem)
    expected = occupancy("sm_90", block_size=256, registers=regs, shared_static=smem)
    assert k["occupancy"]["active_blocks"] == expected.active_blocks
    assert k["occupancy"]["shared_per_block"] == smem + 1024


def test_cubin_table_lists_every_kernel(cli, built):
    d, _ = built
    r = cli("occupancy", d / "multi.cubin", "--block", "128")
    assert r.exit_code == 0, r.output
    for name in ("histogram", "block_sum", "scale<float>", "scale<double>", "apply_poly"):
        assert name in r.stdout


def test_fatbin_rows_per_arch_and_target(cli, built):
    d, _ = built
    r = cli("occupancy", d / "multi.fatbin", "--block", "128", "--kernel", "block_sum",
            "--json")
    archs = sorted(k["arch"] for k in json.loads(r.stdout)["kernels"])
    assert archs == ["sm_80", "sm_90"]
    r = cli("occupancy", d / "multi.fatbin", "--block", "128", "--kernel", "block_sum",
            "--gpu", "a100", "--json")
    (k,) = json.loads(r.stdout)["kernels"]
    assert k["arch"] == "sm_80" and k["resources_arch"] == "sm_80"


def test_target_without_its_build_says_so(cli, built):
    d, _ = built
    r = cli("occupancy", d / "multi.cubin", "--block", "128", "--gpu", "l4", "--kernel",
            "histogram")
    assert r.exit_code == 0
    assert "has no sm_89 build" in r.stderr and "(sm_90)" in r.stderr
    assert "sm_89" in r.stdout


@pytest.mark.parametrize("args,code,words", [
    (["--registers", "40", "--gpu", "h300", "--block", "256"], 2, ["unknown GPU", "h200"]),
    (["--registers", "300", "--arch", "sm_90", "--block", "256"], 2, ["300", "255"]),
    (["--registers", "32", "--arch", "sm_90", "--block", "2048"], 2, ["2048", "1024"]),
    (["--registers", "32", "--arch", "sm_90"], 2, ["--block", "--sweep"]),
    (["--registers", "32", "--arch", "sm_90", "--gpu", "h200", "--block", "64"], 2,
     ["not both"]),
    (["--block", "256", "--arch", "sm_90"], 2, ["--registers"]),
    (["--registers", "32", "--block", "256"], 2, ["--gpu"]),
    (["--registers", "32", "--arch", "sm_90", "--block", "256", "--smem", "lots"], 2,
     ["--smem", "lots"]),
])
def test_bad_input_is_one_message(cli, args, code, words):
    r = cli("occupancy", *args)
    assert r.exit_code == code
    assert "Traceback" not in r.output
    for w in words:
        assert w in r.stderr


def test_not_an_artifact(cli, workdir):
    (workdir / "notes.txt").write_text("hello\n")
    r = cli("occupancy", "notes.txt", "--block", "128")
    assert r.exit_code != 0 and "error:" in r.stderr and "Traceback" not in r.output


def test_unknown_kernel(cli, built):
    d, _ = built
    r = cli("occupancy", d / "multi.cubin", "--block", "128", "--kernel", "nope")
    assert r.exit_code == 2 and "no kernel named 'nope'" in r.stderr


def test_json_error_is_json(cli):
    r = cli("occupancy", "--registers", "32", "--gpu", "h300", "--block", "64", "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["error"] == "UsageError"


def test_sweeps_that_come_out_the_same_are_one_table(cli, built):
    """multi.cu's five kernels (8 to 12 registers, 0 or 1 KiB of shared memory) sweep alike
    on an H200: one 32-row table naming all five, not five copies of it."""
    d, _ = built
    r = cli("occupancy", d / "multi.cubin", "--gpu", "h200", "--sweep")
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stdout.split())
    assert flat.count("block size sweep") == 1, r.stdout
    assert ("histogram, block_sum, scale<double>, scale<float>, apply_poly on sm_90: block "
            "size sweep (the same for each)") in flat
    assert flat.count("best: block") == 1
    doc = json.loads(cli("occupancy", d / "multi.cubin", "--gpu", "h200", "--sweep",
                         "--json").stdout)
    assert len(doc["kernels"]) == 5 and all(k["sweep"] for k in doc["kernels"])  # JSON: each
    # Sweeps that differ keep tables of their own: with 115200 bytes of dynamic shared memory
    # an SM holds two blocks of the kernels without static shared memory, one of the others.
    r = cli("occupancy", d / "multi.cubin", "--arch", "sm_90", "--sweep", "--smem", "115200")
    tables = " ".join(r.stdout.split()).count("block size sweep")
    assert tables == 2, r.stdout
