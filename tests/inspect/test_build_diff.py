"""The diff library on two real builds: same build gives zero deltas."""

from __future__ import annotations

from nvstage.inspect.build_diff import diff_builds


def test_build_against_itself_has_no_kernel_change(toolkit, built):
    _, b = built
    d = diff_builds(b["vadd"], b["vadd"], toolkit)
    assert d.kernels and not any(r.changed for r in d.kernels)
    assert all(r.delta("seconds") == 0 for r in d.stages)


def test_spill_diff_from_manifests(toolkit, built):
    _, b = built
    d = diff_builds(b["spill"].keep_dir, b["spill16"].keep_dir, toolkit)
    (row,) = d.kernels
    assert row.a["spill_stores"] == 0 and row.b["spill_stores"] > 0
    assert row.delta("registers") == row.b["registers"] - row.a["registers"] < 0
    assert row.a["instructions"] != row.b["instructions"]
    assert d.to_json()["kernels"][0]["delta"]["spill_loads"] == row.b["spill_loads"]


def test_cached_stages_are_marked_not_compared_as_compile_times(toolkit, kernels, workdir):
    import shutil

    import nvstage
    from nvstage.inspect.build_diff import diff_builds

    shutil.copy(kernels / "saxpy.cu", workdir)
    opts = nvstage.CompileOptions(archs=("sm_90",), stop="cubin")
    cache = workdir / "cache"
    a = nvstage.compile("saxpy.cu", opts, toolkit=toolkit, keep="a", cache=cache)
    b = nvstage.compile("saxpy.cu", opts, toolkit=toolkit, keep="b", cache=cache)
    result = diff_builds(a, b, toolkit)
    assert all(r.a["cached"] is False for r in result.stages)
    assert any(r.b["cached"] for r in result.stages)  # the second build hit the cache
    assert "cached" not in result.stages[0].to_json()["delta"]
