"""show TRITON_CACHE_DIR: a cache made by triton.compile itself is listed kernel by kernel;
crafted metadata (huge, nested, wrong types, paths outside the folder, links) is one line."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from nvstage.errors import ArtifactError
from nvstage.inspect.triton_cache import is_triton_cache, read_cache


@pytest.fixture(scope="module")
def cache(triton_kit, tmp_path_factory):
    """A Triton cache folder filled by triton.compile (as torch.compile fills one): the
    chain's fused kernel for sm_80 and sm_90, and rms_rows for sm_90."""
    import importlib.util

    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def module(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return m

    chain = module(triton_kit.CHAIN, "_chain_for_cache")
    rms = module(triton_kit.RMS, "_rms_for_cache")
    folder = tmp_path_factory.mktemp("triton-cache")
    with knobs.cache.scope():
        knobs.cache.dir = str(folder)
        for cap in (80, 90):
            triton.compile(ASTSource(chain.fused, signature={
                "x": "*fp32", "b": "*fp32", "y": "*fp32", "a": "fp32", "n": "i32",
                "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024}),
                target=GPUTarget("cuda", cap, 32))
        triton.compile(ASTSource(rms.rms_rows, signature={
            "x": "*fp32", "y": "*fp32", "cols": "i32", "eps": "fp32", "COLS": "constexpr"},
            constexprs={"COLS": 2048}), target=GPUTarget("cuda", 90, 32),
            options={"num_warps": 8})
    return folder


def test_lists_every_kernel(cache):
    from nvstage.compiler.nvcc.cubin_figures import read_figures

    assert is_triton_cache(cache)
    listed = read_cache(cache)
    assert [(k.name, k.arch) for k in listed.kernels] == sorted(
        [("fused", "sm_80"), ("fused", "sm_90a"), ("rms_rows", "sm_90a")])
    rms = next(k for k in listed.kernels if k.name == "rms_rows")
    assert (rms.num_warps, rms.threads, rms.num_stages) == (8, 256, 3)
    assert rms.shared > 0  # the reduction's, from Triton's metadata
    figures = read_figures(open(rms.path("cubin"), "rb").read())
    assert rms.record.registers == figures[0].registers > 0
    assert rms.occupancy is not None and rms.occupancy.block_size == 256


def test_show_cli_lists_then_details(cli, cache):
    r = cli("show", cache)
    assert r.exit_code == 0, r.stderr
    assert "3 kernel(s)" in r.stdout and "rms_rows" in r.stdout and "sm_90a" in r.stdout
    doc = json.loads(cli("show", cache, "--json").stdout)
    assert {k["name"] for k in doc["kernels"]} == {"fused", "rms_rows"}
    r = cli("show", cache, "--kernel", "rms_rows", "--json")
    assert r.exit_code == 0, r.stderr
    one = json.loads(r.stdout)
    assert one["triton"]["num_warps"] == 8
    assert one["resources"][0]["kernel"] == "rms_rows"
    assert [e["name"] for m in one["ptx"] for e in m["entries"]] == ["rms_rows"]
    r = cli("show", cache, "--kernel", "fused")  # two entries: name one by its folder
    assert r.exit_code == 2 and "2 entries of 'fused'" in r.stderr
    key = next(k["key"] for k in doc["kernels"] if k["arch"] == "sm_80")
    r = cli("show", cache, "--kernel", key[:12], "--sections", "sass")
    assert r.exit_code == 0 and "fused" in r.stdout


def test_not_a_cache(tmp_path, triton_chain):
    assert not is_triton_cache(triton_chain["fused"])  # a keep folder
    assert not is_triton_cache(tmp_path)
    (tmp_path / "f").write_text("x")
    assert not is_triton_cache(tmp_path / "f")


@pytest.fixture
def crafted(cache, tmp_path):
    """A copy of the cache holding only rms_rows's entry: (folder, entry, metadata path)."""
    src = next(p for p in cache.iterdir() if (p / "rms_rows.json").exists())
    folder = tmp_path / "cache"
    entry = folder / src.name
    shutil.copytree(src, entry)
    return folder, entry, entry / "rms_rows.json"


def _edit(path, **changes):
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("make,said", [
    (lambda e, m: m.write_text("{" + " " * (2 << 20) + "}"), "more than the 1048576"),
    (lambda e, m: m.write_text('{"a":' * 50 + "1" + "}" * 50), "nested more than 16"),
    (lambda e, m: m.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    (lambda e, m: m.write_text('{"shared": NaN}'), "not JSON"),
    (lambda e, m: _edit(m, num_warps="four"), "num_warps must be a whole number"),
    (lambda e, m: _edit(m, shared=-1), "shared must be a whole number"),
    (lambda e, m: _edit(m, target=[90]), "target must be an object"),
    (lambda e, m: _edit(m, name="../../etc/passwd"), "name must be a kernel name"),
    (lambda e, m: (e / "__grp__rms_rows.json").write_text(json.dumps(
        {"child_paths": {"rms_rows.cubin": "/etc/passwd"}})), "outside its folder"),
    (lambda e, m: (os.remove(e / "rms_rows.cubin"),
                   os.symlink("/etc/passwd", e / "rms_rows.cubin")), "symbolic link"),
])
def test_crafted_metadata_is_one_line(cli, crafted, make, said):
    folder, entry, meta = crafted
    make(entry, meta)
    with pytest.raises(ArtifactError) as e:
        read_cache(folder)
    assert said in e.value.message and "\n" not in e.value.message
    r = cli("show", folder)
    assert r.exit_code == 6
    assert said in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_moved_cache_still_reads(crafted):
    """Triton's group file names its files by absolute path: a cache copied elsewhere (a CI
    artifact) names the old place, which is not followed, and reads as before."""
    folder, entry, _ = crafted
    assert [k.name for k in read_cache(folder).kernels] == ["rms_rows"]


def test_too_many_entries(tmp_path, monkeypatch):
    from nvstage.inspect import triton_cache

    monkeypatch.setattr(triton_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        (tmp_path / f"K{i}").mkdir()
    with pytest.raises(ArtifactError) as e:
        read_cache(tmp_path)
    assert "more than 3 entries" in e.value.message


def test_detail_shows_what_the_listing_shows(cli, cache):
    """--kernel ENTRY: the listing's spills (not cuobjdump's '?'), the PTX version with any
    --sections, the PTX's .reqntid; a prefix under 6 characters says the minimum."""
    entry = next(k.key for k in read_cache(cache).kernels if k.name == "rms_rows")
    r = cli("show", cache, "--kernel", entry[:8], "--sections", "resources", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    res = doc["resources"][0]
    assert (res["spill_stores"], res["spill_loads"]) == (0, 0)
    assert doc["triton"]["ptx_version"] and doc["triton"]["reqntid"] == "256"
    r = cli("show", cache, "--kernel", entry[:8], "--sections", "resources")
    assert ".reqntid (PTX) 256 (threads per block, exactly)" in " ".join(r.stdout.split())
    assert "?/?" not in r.stdout
    r = cli("show", cache, "--kernel", entry[:4])
    assert r.exit_code != 0
    assert f"(an entry is named by 6 or more characters of its folder; '{entry[:4]}' has 4)" \
        in r.stderr


_HOSTILE = "c\x1b]0;TITLE\x07\x1b[31mred\x9b2J\nX"  # a title, colours, C1's CSI, a newline


def test_names_with_escape_sequences_reach_no_terminal(cli, crafted):
    # A cache folder named with escape sequences and a newline: listed, its name shown as
    # text (\x1b...) on its one line; an error naming it is one line.
    folder, entry, _ = crafted
    hostile = folder.parent / _HOSTILE
    folder.rename(hostile)
    r = cli("show", hostile)
    assert r.exit_code == 0, r.stderr
    for out in (r.stdout, r.stderr):
        assert not any(c in out for c in "\x1b\x07\x9b"), out
    # (The title wraps between words where the folder's path is long: a temporary folder's.)
    title = " ".join(r.stdout[r.stdout.index("Triton cache"):].split())
    assert title.startswith("Triton cache ") and "1 kernel(s)" in title.split(" entry")[0]
    assert "c\\x1b]0;TITLE\\x07\\x1b[31mred\\x9b2J\\nX" in title.split()[2], title
    os.symlink("/etc/passwd", hostile / entry.name / "x.cubin")
    r = cli("show", hostile)
    assert r.exit_code == 6 and "symbolic link" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "\x1b" not in r.stderr
