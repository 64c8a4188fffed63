"""The build record's manifest: what ``save_build`` writes, ``load_build`` reads back, and a
manifest of the wrong shape is one ArtifactError, never another exception."""

from __future__ import annotations

import json

import pytest

from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.manifest.model import (
    MANIFEST,
    Artifact,
    Build,
    StageRun,
    load_build,
    save_build,
)
from nvstage.compiler.toolkit.locate import Toolkit
from nvstage.errors import ArtifactError


def small_build(folder) -> Build:
    out = folder / "k.ptx"
    out.write_text("// ptx\n")
    stage = Stage(1, StageKind.CICC, "cicc", ["cicc", "-o", str(out)], "sm_90", [], [str(out)])
    run = StageRun(stage, 0.5, 0, artifacts=[Artifact.of(out, stage=1)])
    toolkit = Toolkit("/cuda/bin/nvcc", "test", "13.5.37", "13.5", "/cuda", {})
    return Build(str(folder / "k.cu"), CompileOptions(archs=("sm_90",)), toolkit, str(folder),
                 Plan({}, [stage]), ["nvcc"], 0.1, [run], 1.0, str(folder), str(out))


def test_a_saved_build_reads_back_with_its_artifacts(tmp_path):
    build = small_build(tmp_path)
    save_build(build, tmp_path, status="running")
    assert json.loads((tmp_path / MANIFEST).read_text())["status"] == "running"
    save_build(build, tmp_path)
    again = load_build(tmp_path)
    assert again.status == "ok" and again.stale == []
    assert again.artifacts == build.artifacts and again.output == build.output
    assert again.toolkit.release == "13.5"


def test_an_artifact_rewritten_since_is_left_out_and_named(tmp_path):
    build = small_build(tmp_path)
    save_build(build, tmp_path)
    (tmp_path / "k.ptx").write_text("// another ptx\n")
    again = load_build(tmp_path)
    assert again.artifacts == [] and again.stale == [str(tmp_path / "k.ptx")]


@pytest.mark.parametrize("seconds", [10**400, -1, 1e300, "1"])
def test_a_time_out_of_range_is_an_artifact_error(tmp_path, seconds):
    # 10**400 once escaped as an OverflowError (math.isfinite cannot take it).
    save_build(small_build(tmp_path), tmp_path)
    doc = json.loads((tmp_path / MANIFEST).read_text())
    doc["plan_seconds"] = seconds
    (tmp_path / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="plan_seconds must be a number of seconds"):
        load_build(tmp_path)
