"""Two builds from build records (inspect/build_log_diff.py, ``nvstage diff BUILD [BUILD]``): the
test project's two builds (cold, then after its header's edit) unit by unit, stage by stage
and kernel by kernel; two build folders; added and removed kernels; the one-line errors."""

from __future__ import annotations

import json
import shutil

import pytest

from nvstage.compiler.buildlog import log as buildlog
from nvstage.errors import UsageError
from nvstage.inspect.build_log_diff import diff_records, split_spec


def _record(cuproject_record, tmp_path, name="rec"):
    rec = tmp_path / name
    shutil.copytree(cuproject_record[1] / buildlog.FOLDER, rec)
    return rec


def test_the_last_build_against_the_one_before(cuproject_record):
    _, build = cuproject_record
    d = diff_records(build)
    assert (d.a.run.number, d.b.run.number) == (1, 2)
    assert d.a.label.endswith("(build 1 of 2, ninja)")
    changed = {u.key: u for u in d.units if u.changed}
    assert set(changed) == {"CMakeFiles/app.dir/src/scale.cu.o",
                            "CMakeFiles/app.dir/src/reduce.cu.o",
                            "CMakeFiles/app.dir/cmake_device_link.o", "c++ app"}
    reduce = changed["CMakeFiles/app.dir/src/reduce.cu.o"]
    assert reduce.kind == "cuda-compile" and (reduce.a["build"], reduce.b["build"]) == (1, 2)
    assert reduce.a["state"] == reduce.b["state"] == "ok"
    stages = {s["stage"]: s for s in reduce.stages}
    assert stages["ptxas (sm_90)"]["a"]["cached"] is False  # a cold build
    assert stages["ptxas (sm_90)"]["b"]["cached"] is False  # its device code changed
    assert changed["CMakeFiles/app.dir/cmake_device_link.o"].b["state"] == "ran"
    # Units the second build did not run are the same entry on both sides.
    same = [u for u in d.units if not u.changed]
    assert {u.name for u in same} >= {"devlib.cu", "devuse.cu", "other.cu", "main.cpp",
                                      "libdevlib.a"}
    # The kernels: only block_sum moved, its shared array doubled.
    moved = [k for k in d.kernels if k.status != "same"]
    assert [(k.name, k.arch, k.status) for k in moved] == [("block_sum", "sm_80", "changed"),
                                                           ("block_sum", "sm_90", "changed")]
    for k in moved:
        assert (k.a["shared_bytes"], k.b["shared_bytes"]) == (512, 1024)
        assert k.delta("shared_bytes") == 512 and k.delta("registers") == 0
        assert k.a["sass_bytes"] > 0 and 0 < k.b["occupancy"] <= 1
    doc = json.loads(json.dumps(d.to_json()))
    assert doc["schema"] == "nvstage.record-diff/1" and doc["added"] == doc["removed"] == []
    assert doc["a"]["steps"] == 12 and doc["b"]["steps"] == 4
    assert doc["delta"]["steps"] == -8
    # The same pair named by number, or as @prev and @last.
    for a, b in ((f"{build}@1", f"{build}@2"), (f"{build}@prev", f"{build}@last"),
                 (f"{build}@-2", str(build))):
        again = diff_records(a, b)
        assert [k.to_json() for k in again.kernels] == [k.to_json() for k in d.kernels]


def test_two_build_folders_and_kernels_added_and_removed(cuproject_record, tmp_path):
    # Another folder's record: reduce.cu's unit gone, a kernel of a unit of its own added.
    other = tmp_path / "other"
    rec = _record(cuproject_record, other, buildlog.FOLDER)
    for p in sorted((rec / "tu").glob("*.json")):
        doc = json.loads(p.read_text())
        if (doc["build"] or {}).get("source", "").endswith("reduce.cu"):
            p.unlink()
    d = diff_records(cuproject_record[1], other)
    assert d.a.run.number == d.b.run.number == 2  # each folder's last build
    removed = {(k.name, k.arch) for k in d.kernels if k.status == "removed"}
    assert removed == {("block_sum", "sm_80"), ("block_sum", "sm_90")}
    assert all(k.b is None for k in d.kernels if k.status == "removed")
    reduce = next(u for u in d.units if u.name == "reduce.cu")
    assert reduce.a is not None and reduce.b is None and reduce.changed
    back = diff_records(other, cuproject_record[1])
    assert {(k.name, k.arch) for k in back.kernels if k.status == "added"} == removed
    assert json.loads(json.dumps(back.to_json()))["added"]


def test_errors_are_one_line(cuproject_record, tmp_path):
    _, build = cuproject_record
    with pytest.raises(UsageError) as e:
        diff_records(f"{build}@7")
    assert "holds 2 builds" in e.value.message and "1 to 2" in e.value.hint
    with pytest.raises(UsageError) as e:
        diff_records(f"{build}@1")
    assert "nothing before it" in e.value.message
    with pytest.raises(UsageError) as e:
        diff_records(f"{build}@soon", build)
    assert "no build 'soon'" in e.value.message
    with pytest.raises(UsageError) as e:
        diff_records(tmp_path, build)
    assert "holds no nvstage build record" in e.value.message
    assert split_spec(f"{build}@2") == (str(build), "2") and split_spec(str(build)) == \
        (str(build), None)


def test_the_cli(cli, cuproject_record, built, tmp_path):
    _, build = cuproject_record
    r = cli("diff", build)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"A: {build}@1 (build 1 of 2, ninja): 12 steps (5 CUDA "
                               "compiles, 2 C/C++ compiles, 1 device link, 1 link, 2 archive "
                               "steps, 1 other step)")
    assert lines[1].startswith(f"B: {build} (build 2 of 2, ninja): 4 steps")
    row = next(x for x in lines if x.lstrip().startswith("block_sum") and "sm_90" in x)
    assert "changed" in row and "512 -> 1024 +512" in row
    assert "scale_kernel" not in r.stdout  # unchanged: only with --all
    assert "reduce.cu" in r.stdout and "ptxas (sm_90)" in r.stdout
    r = cli("diff", build, "--all")
    assert "scale_kernel" in r.stdout and "devlib.cu" in r.stdout
    r = cli("diff", f"{build}@1", f"{build}@2", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["schema"] == "nvstage.record-diff/1"
    # One line for what cannot be compared.
    _, builds = built
    r = cli("diff", build, builds["vadd"].keep_dir)
    assert r.exit_code == 2 and "two of a kind" in r.stderr and "Traceback" not in r.output
    r = cli("diff", f"{build}@9")
    assert r.exit_code == 2 and r.stderr.startswith("error: ")
    assert len([x for x in r.stderr.splitlines() if x.startswith("error:")]) == 1
