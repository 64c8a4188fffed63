"""Everything downstream of a kept Triton build, as of an nvcc build: show (metadata, launch
occupancy, PTX, SASS, the Python line view), occupancy, check, report."""

from __future__ import annotations

import json


def test_show_json_has_triton_s_section(cli, triton_chain):
    r = cli("show", triton_chain["fused"], "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "build"
    assert doc["triton"]["num_warps"] == 4 and doc["triton"]["kernel"] == "fused"
    (launch,) = doc["triton"]["launches"]
    assert launch["block"] == 128 and launch["arch"] == "sm_90a"
    assert 0 < launch["occupancy"]["occupancy"] <= 1
    assert [e["name"] for m in doc["ptx"] for e in m["entries"]] == ["fused"]
    assert doc["resources"][0]["registers"] > 0
    assert doc["sass"][0]["name"] == "fused"


def test_show_table_and_will_it_run(cli, triton_chain):
    r = cli("show", triton_chain["scale"], "--gpu", "h200")
    assert r.exit_code == 0, r.stderr
    assert "occupancy (sm_90a)" in r.stdout and "128 threads" in r.stdout
    assert "Runs on h200" in r.stdout
    r = cli("show", triton_chain["scale"], "--gpu", "a100")
    assert r.exit_code == 1  # an sm_90a cubin, no PTX an sm_80 driver could JIT


def test_line_view_reads_the_python_source(cli, triton_chain):
    r = cli("show", triton_chain["fused"], "--kernel", "fused", "--lineinfo", "--json")
    assert r.exit_code == 0, r.stderr
    (kernel,) = json.loads(r.stdout)["lines"]
    texts = [line["source_text"] or "" for line in kernel["lines"]]
    assert any("libdevice.tanh" in t for t in texts)  # the GELU line of fusion_chain.py
    assert all(line["file"].endswith("fusion_chain.py") for line in kernel["lines"]
               if line.get("file"))


def test_occupancy_takes_triton_s_launch(cli, triton_chain):
    r = cli("occupancy", triton_chain["fused"], "--gpu", "h200", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["block"] == 128
    assert doc["kernels"][0]["occupancy"]["block_size"] == 128


def test_check_and_report(cli, triton_chain, tmp_path):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[tool.nvstage.budgets]\nmax_registers = 64\nno_spills = true\n'
                       'required_arches = ["sm_90a"]\n')
    r = cli("check", triton_chain["fused"], "--config", budgets)
    assert r.exit_code == 0, r.output
    budgets.write_text('[tool.nvstage.budgets]\nmax_registers = 8\n')
    r = cli("check", triton_chain["fused"], "--config", budgets)
    assert r.exit_code == 1 and "fused" in r.output
    out = tmp_path / "r.html"
    r = cli("report", triton_chain["fused"], "-o", out, "--no-code")
    assert r.exit_code == 0, r.stderr
    html = out.read_text()
    assert "ttgir" in html and "fused" in html
