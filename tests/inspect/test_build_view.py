"""The whole-build view of a build record (inspect/build_view.py): the test project built
through the launcher, read as units, stages, stage kinds, cache hits and kernels; the latest
entry of each unit; fallbacks with their reason; finding a kernel; and entries that are
damaged or crafted (a source naming /etc/passwd, a huge argv, impossible numbers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog
from nvstage.errors import UsageError
from nvstage.inspect.build_view import load_build_view

KERNELS = {"squares", "scale_kernel", "block_sum", "fill<int>"}


def record_copy(build: Path, dest: Path) -> Path:
    """The build's record folder, copied (a test that adds entries works on its own)."""
    shutil.copytree(build / buildlog.FOLDER, dest)
    return dest


def entries(record: Path) -> list[tuple[Path, dict]]:
    return [(p, json.loads(p.read_text())) for p in sorted((record / "tu").glob("*.json"))]


def write_entry(record: Path, name: str, doc: dict) -> Path:
    path = record / "tu" / name
    path.write_text(json.dumps(doc))
    return path


def entry_of(record: Path, source_name: str) -> dict:
    """The first (the oldest build's) entry of the CUDA unit of ``source_name``."""
    return next(d for _, d in entries(record)
                if d["build"] and d["build"]["source"].endswith(source_name))


CUDA_UNITS = ["devlib.cu", "devuse.cu", "other.cu", "reduce.cu", "scale.cu"]


def test_the_cmake_build_as_a_whole(cuproject_record):
    src, build = cuproject_record
    view = load_build_view(build)
    # Two runs of ninja: the cold build, and the build after the header's edit.
    assert [b.tool for b in view.builds] == ["ninja", "ninja"]
    first, last = view.builds
    assert view.last_build is last and view.previous_build is first
    assert first.kinds() == {"cuda-compile": 5, "cxx-compile": 2, "device-link": 1, "link": 1,
                             "archive": 2, "other": 1}
    assert not any(e.hit for e in first.entries)  # a cold cache
    assert last.kinds() == {"cuda-compile": 2, "device-link": 1, "link": 1}
    # The headline figures are the last build's; the units the project's.
    assert view.counts() == {"units": 4, "ok": 2, "hit": 0, "fallback": 0, "failed": 0,
                             "ran": 2}
    assert view.step_kinds() == last.kinds() and view.not_seen() == []
    assert view.superseded == 4 and not view.skipped and len(view.units) == 12
    assert sorted(u.name for u in view.last_units) == ["app", "cmake_device_link.o",
                                                       "reduce.cu", "scale.cu"]
    assert set(view.earlier) == {u.key for u in view.last_units}
    assert all(view.earlier[u.key].run == 1 for u in view.last_units)
    cuda = [u for u in view.units if u.kind == "cuda-compile"]
    assert sorted(u.name for u in cuda) == CUDA_UNITS
    for u in cuda:
        assert u.source.startswith(str(src)) and u.output.endswith(".cu.o")
        kinds = [s.kind for s in u.stages]
        assert kinds.count("cicc") == 2 and kinds.count("ptxas") == 2, kinds
        assert {s.arch for s in u.stages if s.kind == "ptxas"} == {"sm_80", "sm_90"}
        for s in u.stages:  # on the build's clock, inside their command
            assert u.start - 1e-9 <= s.start and s.start + s.seconds <= u.end + 1e-6
        assert u.wall_seconds is not None and 0 < u.wall_seconds <= u.seconds
        assert 0 <= u.overhead_seconds < u.seconds
    for u in view.units:
        if u.kind != "cuda-compile":
            assert u.status == "ran" and u.entry.exit_code == 0
            assert u.stages == [] and u.kernels == []
    # -j2: in each build as many rows as units ever ran at once (at most two), and the units
    # of one row never overlap.
    for number in (1, 2):
        units = [u for u in view.units if u.run == number]
        edges = sorted([(u.start, 1) for u in units] + [(u.end, -1) for u in units],
                       key=lambda e: (e[0], e[1]))
        running = peak = 0
        for _, step in edges:
            running += step
            peak = max(peak, running)
        assert max(u.lane for u in units) + 1 == peak and peak <= 2
        for lane in range(peak):
            row = sorted((u for u in units if u.lane == lane), key=lambda u: u.start)
            assert all(a.end <= b.start + 1e-9 for a, b in zip(row, row[1:]))
    assert view.wall_seconds == pytest.approx(last.wall_seconds)
    assert view.unit_seconds == pytest.approx(last.step_seconds)
    assert view.wall_seconds <= view.unit_seconds + 1e-9
    totals = {t.kind: t for t in view.kind_totals()}
    # The last build's two compiles: reduce.cu's device code changed (its ptxas ran).
    assert totals["ptxas"].stages == 4 and totals["ptxas"].ran >= 2
    assert totals["ptxas"].ran + totals["ptxas"].cached == 4
    assert view.cache_totals()["command_hits"] == 0 and view.cache_totals()["commands"] == 2
    assert sum(t.seconds for t in totals.values()) == pytest.approx(
        sum(s.seconds for u in view.last_units for s in u.stages))
    assert view.slowest_units()[0].seconds == max(u.seconds for u in view.last_units)

    rows = {(k.record.name, k.record.arch): k for k in view.kernels}
    assert {name for name, _ in rows} == KERNELS
    assert len(rows) == 8 and len(view.kernels) == 8
    block_sum = rows["block_sum", "sm_90"]
    assert view.units[block_sum.unit].name == "reduce.cu"
    # The edit doubled its shared array: 256 floats.
    assert block_sum.record.shared_bytes == 1024 and block_sum.record.barriers == 1
    assert block_sum.occupancy.block_size == 256 and 0 < block_sum.occupancy.occupancy <= 1
    assert block_sum.best is not None
    # -rdc -c: ptxas' numbers are the file's, not final until the device link.
    assert rows["squares", "sm_80"].record.final is False
    assert rows["scale_kernel", "sm_80"].record.final is True
    assert all(not k.record.spills for k in view.kernels)

    doc = json.loads(json.dumps(view.to_json()))  # JSON-ready
    assert doc["schema"] == "nvstage.build-view/1" and len(doc["units"]) == 12
    assert doc["build"] == 2 and [b["steps"] for b in doc["builds"]] == [12, 4]
    assert doc["rebuilt"] == 4 and doc["not_seen"] == []
    assert {k["name"] for k in doc["kernels"]} == KERNELS


def test_the_view_reads_only_the_record(cuproject_record, monkeypatch):
    # No artifact is looked for (they lived in temporary folders) and no tool runs but
    # c++filt, once, for every kernel name of the build.
    from nvstage import proc
    from nvstage.compiler.manifest import model as record
    from nvstage.inspect import names

    def no_files(*a, **k):
        raise AssertionError("the view looked for an artifact")

    monkeypatch.setattr(record._Files, "find", no_files)
    names._KNOWN.clear()
    ran = []
    real = proc.run

    def spy(argv, *a, **k):
        ran.append(Path(argv[0]).name)
        return real(argv, *a, **k)

    monkeypatch.setattr(proc, "run", spy)
    view = load_build_view(cuproject_record[1])
    assert len(view.kernels) == 8
    assert set(ran) <= {"c++filt"} and len(ran) <= 1, ran


def test_latest_entry_per_unit_and_whole_command_hits(cuproject_record, tmp_path):
    rec = record_copy(cuproject_record[1], tmp_path / "rec")
    doc = next(d for _, d in reversed(entries(rec))
               if d["build"] and d["build"]["source"].endswith("reduce.cu"))
    # The same command again, later, in a build of its own, answered whole from the cache
    # (as buildlog/current.add_hit writes it).
    hit = dict(doc, started=doc["started"] + 600, seconds=0.05, hit=True, pid=4242,
               build_id="ninja:4242:1")
    write_entry(rec, "99999999999999999-4242-h.json", hit)
    view = load_build_view(rec)
    assert len(view.units) == 12 and view.superseded == 5 and len(view.builds) == 3
    assert any("older entr" in n for n in view.notes)
    (unit,) = view.last_units
    assert unit.name == "reduce.cu" and unit.run == 3
    assert unit.state == "hit" and unit.seconds == 0.05 and unit.overhead_seconds is None
    assert unit.stages and not any(s.ran for s in unit.stages)
    assert view.counts()["hit"] == 1 and view.wall_seconds == pytest.approx(0.05)
    totals = {t.kind: t for t in view.kind_totals()}
    assert totals["ptxas"].whole == 2 and totals["ptxas"].ran == 0
    assert totals["ptxas"].hit_rate == pytest.approx(1.0)
    cache = view.cache_totals()
    assert cache["command_hits"] == 1 and cache["stages_in_command_hits"] == len(unit.stages)
    # Its kernels are still the project's: from the manifest the hit kept.
    assert {view.units[k.unit].name for k in view.kernels if k.record.name == "block_sum"} == \
        {"reduce.cu"}
    assert len(view.kernels) == 8
    assert len(load_build_view(rec, every_entry=True).units) == 17


def test_a_fallback_shows_its_reason(cuproject_record, tmp_path):
    rec = record_copy(cuproject_record[1], tmp_path / "rec")
    entry = buildlog.Entry(["/usr/bin/nvcc", "-dlink", "a.o", "b.o", "-o", "dlink.o"],
                           str(tmp_path), buildlog.now(), 0.25, "fallback", 0, 77,
                           reason="not staged: -dlink links device code")
    assert buildlog.add(entry, str(tmp_path), {buildlog.ENV: str(rec)}) is not None
    view = load_build_view(rec)
    unit = next(u for u in view.units if u.status == "fallback")
    assert unit.reason == "not staged: -dlink links device code"
    assert unit.output == str(tmp_path / "dlink.o") and unit.kernels == [] and not unit.notes
    assert view.counts()["fallback"] == 1


def test_finding_a_kernel(cuproject_record, tmp_path):
    view = load_build_view(cuproject_record[1])
    unit, rows = view.find_kernel("block_sum")
    assert unit.name == "reduce.cu" and {r.arch for r in rows} == {"sm_80", "sm_90"}
    assert view.find_kernel("_Z9block_sumPKfPfi")[0] is unit
    assert view.find_kernel("fill")[0].name == "other.cu"  # a template by its bare name
    with pytest.raises(UsageError) as e:
        view.find_kernel("blok_sum")
    assert "did you mean block_sum" in e.value.hint
    # Two units that built one kernel (the same source into two objects): both are named,
    # and --tu picks one.
    rec = record_copy(cuproject_record[1], tmp_path / "rec")
    doc = entry_of(rec, "reduce.cu")
    other = json.loads(json.dumps(doc))
    other["build"]["output"] = doc["build"]["output"].replace("reduce.cu.o", "reduce2.cu.o")
    other["started"] += 1
    write_entry(rec, "99999999999999998-1-0.json", other)
    view = load_build_view(rec)
    with pytest.raises(UsageError) as e:
        view.find_kernel("block_sum")
    assert "2 translation units" in e.value.message and "--tu" in e.value.hint
    unit, _ = view.find_kernel("block_sum", unit="reduce2.cu.o")
    assert unit.output.endswith("reduce2.cu.o")
    with pytest.raises(UsageError):
        view.find_kernel("block_sum", unit="reduce.cu")  # the source names both


def test_hostile_entries_are_bounded_or_ignored(cuproject_record, tmp_path):
    rec = record_copy(cuproject_record[1], tmp_path / "rec")
    base = entry_of(rec, "scale.cu")

    def crafted(name: str, **changes) -> dict:
        doc = json.loads(json.dumps(base))
        build = changes.pop("build", {})
        doc["build"].update(build)
        doc.update(changes)
        write_entry(rec, name, doc)
        return doc

    # A source naming /etc/passwd: a name in the view, never opened here.
    crafted("90000000000000001-1-0.json", argv=["/usr/bin/nvcc", "-c", "/etc/passwd", "-o",
                                               str(tmp_path / "p.o")],
            build={"source": "/etc/passwd", "output": str(tmp_path / "p.o")})
    # A huge argv: read (it is within the entry's bounds), shown cut short.
    crafted("90000000000000002-1-0.json", argv=["/usr/bin/nvcc"] + ["-DX=1"] * 99_000
            + ["-o", str(tmp_path / "big.o")], build={"output": str(tmp_path / "big.o")})
    # Past the bound of words an entry may hold: skipped with its reason.
    crafted("90000000000000003-1-0.json", argv=["x"] * 100_001)
    # A damaged manifest; impossible figures; a stage far past its command's end.
    crafted("90000000000000004-1-0.json", build={"stages": "nope",
                                                 "output": str(tmp_path / "d.o")})
    weird = json.loads(json.dumps(base))
    weird["build"]["output"] = str(tmp_path / "w.o")
    for s in weird["build"]["stages"]:
        if s["kind"] == "ptxas":  # as a manifest from before cubin_figures
            s["resources"] = ("ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'\n"
                              "ptxas info    : Used 9999 registers, used 0 barriers\n")
            s.pop("cubin_figures", None)
        s["started"] = 1e6
    write_entry(rec, "90000000000000005-1-0.json", weird)
    (rec / "tu" / "90000000000000006-1-0.json").write_text("{not json")

    view = load_build_view(rec)
    by_output = {u.output: u for u in view.units}
    passwd = by_output[str(tmp_path / "p.o")]
    assert passwd.source == "/etc/passwd" and passwd.name == "passwd"
    big = by_output[str(tmp_path / "big.o")]
    assert len(big.command) < 3000 and "more words" in big.command
    assert any("argv must be a list of strings" in s for s in view.skipped)
    assert any("not JSON" in s or "Expecting" in s for s in view.skipped)
    damaged = by_output[str(tmp_path / "d.o")]
    assert damaged.stages == [] and any("damaged" in n for n in damaged.notes)
    w = by_output[str(tmp_path / "w.o")]
    assert all(w.start <= s.start and s.start + s.seconds <= w.end + 1e-6 for s in w.stages)
    k = next(k for k in view.kernels if k.record.kernel == "_Z1kv")
    assert k.occupancy is None and k.why_none
    json.dumps(view.to_json())  # still a document
