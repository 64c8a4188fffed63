"""--via triton's library: a kernel of the tests' own through Triton's stages for sm_80 and
sm_90, every stage kept, the PTX what triton.compile returns, the registers cuobjdump's."""

from __future__ import annotations

import json
import sys

import pytest

from nvstage.compiler.manifest.model import load_build
from nvstage.errors import RuntimeCompileFailed, ToolkitError, UsageError

STAGES = ["source", "ttir", "ttgir", "llir", "ptx", "ptxas"]


@pytest.fixture(scope="module")
def rms(triton_kit, toolkit, tmp_path_factory):
    """rms_rows kept for sm_80 and sm_90: arch -> (build, keep folder)."""
    from nvstage.compiler.triton.stages import compile_triton

    root = tmp_path_factory.mktemp("rms")
    out = {}
    for arch in ("sm_80", "sm_90"):
        keep = root / f"rms.{arch}"
        out[arch] = (compile_triton(triton_kit.RMS, triton_kit.rms_options(arch),
                                    toolkit=toolkit, keep=keep), keep)
    return out


@pytest.fixture(scope="module")
def reference_ptx(triton_kit, tmp_path_factory):
    """What triton.compile itself returns for the same arguments, in a cache of its own."""
    import importlib.util

    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("_rms_reference", triton_kit.RMS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = {}
    with knobs.cache.scope():
        knobs.cache.dir = str(tmp_path_factory.mktemp("triton-cache"))
        for cap in (80, 90):
            src = ASTSource(module.rms_rows, signature={
                "x": "*fp32", "y": "*fp32", "cols": "i32", "eps": "fp32", "COLS": "constexpr"},
                constexprs={"COLS": 2048})
            out[f"sm_{cap}"] = triton.compile(src, target=GPUTarget("cuda", cap, 32),
                                              options={"num_warps": 8})
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_stage_kept(rms, arch):
    build, keep = rms[arch]
    built = "sm_90a" if arch == "sm_90" else arch  # Triton targets sm_90a from sm_90 on
    assert [r.stage.kind.value for r in build.runs] == STAGES
    assert all(r.ok and r.seconds > 0 for r in build.runs)
    names = [a.name for r in build.runs for a in r.artifacts]
    assert names == ["rms_rows.source", "rms_rows.ttir", "rms_rows.ttgir", "rms_rows.llir",
                     "rms_rows.ptx", "rms_rows.cubin", "rms_rows.json"]
    assert sorted(p.name for p in keep.iterdir()) == sorted(names + ["stages.json"])
    assert build.runs[-1].stage.arch == built and build.runs[-1].stage.tool == "ptxas"
    assert "tt.func" in (keep / "rms_rows.ttir").read_text()
    assert "ttg.num-warps" in (keep / "rms_rows.ttgir").read_text()
    # Read back: the same record, with the Triton section.
    again = load_build(keep)
    assert again.via == "triton" and [r.stage.kind.value for r in again.runs] == STAGES
    assert again.triton == build.triton
    info = build.triton
    assert (info.num_warps, info.threads, info.arch, info.kernel, info.name) == \
        (8, 256, built, "rms_rows", "rms_rows")
    assert dict(info.constexprs) == {"COLS": 2048}
    assert info.params == [("x", "*fp32"), ("y", "*fp32"), ("cols", "i32"), ("eps", "fp32")]
    doc = json.loads((keep / "stages.json").read_text())
    assert doc["via"] == "triton" and doc["triton"]["extra_params"] == ["global_scratch",
                                                                        "profile_scratch"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_and_metadata_are_triton_compile_s(rms, reference_ptx, arch):
    build, keep = rms[arch]
    ref = reference_ptx[arch]
    assert (keep / "rms_rows.ptx").read_text() == ref.asm["ptx"]
    assert (keep / "rms_rows.ttgir").read_text() == ref.asm["ttgir"]
    info = build.triton
    assert info.shared == ref.metadata.shared > 0  # the cross-warp reduction's
    assert info.num_stages == ref.metadata.num_stages
    assert info.fp_fusion == ref.metadata.enable_fp_fusion
    md = json.loads((keep / "rms_rows.json").read_text())
    assert md["shared"] == info.shared and md["num_warps"] == 8


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_registers_are_cuobjdump_s(rms, reference, arch):
    from nvstage.inspect.resources import build_resources, parse_res_usage

    build, keep = rms[arch]
    listed = parse_res_usage(reference("cuobjdump", "-res-usage", keep / "rms_rows.cubin"),
                             arch=arch)
    rows = build_resources(build)
    assert [r.registers for r in rows] == [r.registers for r in listed]
    assert rows[0].kernel == "rms_rows" and rows[0].registers > 0


def test_which_ptxas_ran(rms):
    sm80, sm90 = rms["sm_80"][0].triton, rms["sm_90"][0].triton
    # Triton 3.9 ships two: ptxas (CUDA 12.9) below sm_90, ptxas-blackwell (13.x) from it on.
    assert sm80.ptxas == "triton" and sm80.ptxas_path.endswith("/ptxas")
    assert sm90.ptxas_path.endswith("/ptxas-blackwell")
    assert sm80.ptxas_version and sm90.ptxas_version
    argv = rms["sm_90"][0].runs[-1].stage.argv
    assert argv[0] == sm90.ptxas_path and "--gpu-name=sm_90a" in argv


def test_the_toolkit_s_ptxas(triton_kit, toolkit, tmp_path):
    from nvstage.compiler.triton.stages import compile_triton

    build = compile_triton(triton_kit.RMS, triton_kit.rms_options("sm_90", ptxas="toolkit"),
                           toolkit=toolkit, keep=tmp_path / "k")
    info = build.triton
    assert info.ptxas == "toolkit" and info.ptxas_path == toolkit.tool("ptxas")
    assert info.ptxas_version == toolkit.release
    # Triton writes the PTX ISA its ptxas reads: CUDA 13.5 reads 9.5.
    assert info.ptx_version == "9.5"


def test_fp_fusion_is_recorded(triton_kit, toolkit, tmp_path, monkeypatch):
    from nvstage.compiler.triton.stages import compile_triton

    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)
    monkeypatch.delenv("TRITON_FORCE_DISABLE_FP_FUSION", raising=False)
    on = compile_triton(triton_kit.CHAIN, triton_kit.chain_options("fused"), toolkit=toolkit)
    assert on.triton.fp_fusion is True and "TRITON_DEFAULT_FP_FUSION" in on.triton.fp_fusion_from
    import dataclasses

    off = compile_triton(triton_kit.CHAIN, dataclasses.replace(
        triton_kit.chain_options("fused"), fp_fusion=False), toolkit=toolkit)
    assert off.triton.fp_fusion is False and off.triton.fp_fusion_from == "--fp-fusion"
    assert "--fmad=false" in off.runs[-1].stage.argv
    assert "--fmad=false" not in on.runs[-1].stage.argv
    assert on.keep_dir is None and off.output is None  # nothing kept, nothing left


def test_triton_missing_says_what_to_install(monkeypatch, tmp_path):
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton

    src = tmp_path / "k.py"
    src.write_text("")
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton raises ImportError
    with pytest.raises(ToolkitError) as e:
        compile_triton(src, TritonOptions("k"))
    assert e.value.hint == ("pip install -e '.[triton]' in nvstage's checkout, or pip install "
                            "triton==3.9.0")


@pytest.mark.parametrize("kernel,signature,consts,said", [
    ("nope", "x:*fp32", (), "defines no @triton.jit function named 'nope'"),
    ("rms_rows", "x:*fp32,y:*fp32,cols:i32", (("COLS", 8),), "no type for rms_rows's "
                                                            "parameter eps"),
    ("rms_rows", "x:*fp32,y:*fp32,cols:i32,eps:fp32,z:i32", (("COLS", 8),),
     "has no parameter 'z'"),
    ("rms_rows", "x:*fp32,y:*fp32,cols:i32,eps:fp32", (), "constexpr COLS has no value"),
])
def test_kernel_and_signature_errors(triton_kit, toolkit, kernel, signature, consts, said):
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature

    with pytest.raises(UsageError) as e:
        compile_triton(triton_kit.RMS, TritonOptions(kernel, parse_signature(signature),
                                                     consts, arch="sm_90"), toolkit=toolkit)
    assert said in e.value.message


@pytest.mark.parametrize("text,said", [("x", "is not NAME:TYPE"), ("x:float", "does not know"),
                                       ("x:i32,x:i32", "twice")])
def test_signature_parsing(text, said):
    from nvstage.compiler.triton.stages import parse_signature

    with pytest.raises(UsageError) as e:
        parse_signature(text)
    assert said in e.value.message


def test_constexpr_values():
    from nvstage.compiler.triton.stages import parse_constexpr

    assert parse_constexpr("BLOCK=1024") == ("BLOCK", 1024)
    assert parse_constexpr("EPS=1e-5") == ("EPS", 1e-5)
    assert parse_constexpr("EVEN=true") == ("EVEN", True)
    with pytest.raises(UsageError):
        parse_constexpr("BLOCK")


def test_a_failing_stage_is_said_and_kept(triton_kit, toolkit, tmp_path):
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature

    src = tmp_path / "bad.py"
    src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                   "def bad(x, n):\n    tl.store(x + tl.arange(0, 7), undefined_name)\n")
    with pytest.raises(RuntimeCompileFailed) as e:
        compile_triton(src, TritonOptions("bad", parse_signature("x:*fp32,n:i32"),
                                          arch="sm_90"), toolkit=toolkit, keep=tmp_path / "k")
    assert e.value.stage_index == 1 and e.value.stage_kind == "source"
    assert "undefined_name" in e.value.log
    doc = json.loads((tmp_path / "k" / "stages.json").read_text())
    assert doc["status"] == "failed" and doc["stages"][0]["returncode"] == 1


def test_the_module_is_not_run_and_bad_python_is_one_line(triton_kit, toolkit, tmp_path):
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature

    src = tmp_path / "broken.py"
    src.write_text("import triton\nraise RuntimeError('no')\n\n\n@triton.jit\n"
                   "def k(x):\n    pass\n")
    build = compile_triton(src, TritonOptions("k", parse_signature("x:*fp32"), arch="sm_80"),
                           toolkit=toolkit)  # the raise is the module's, never run
    assert build.status == "ok"
    src.write_text("def k(:\n")
    with pytest.raises(UsageError) as e:
        compile_triton(src, TritonOptions("k"), toolkit=toolkit)
    assert e.value.message == "broken.py is not valid Python: line 1: invalid syntax"


@pytest.mark.parametrize("bad,said", [({"num_warps": 3}, "power of two"),
                                      ({"arch": "compute_90"}, "one real arch"),
                                      ({"ptxas": "mine"}, "choose triton")])
def test_option_errors(bad, said):
    from nvstage.compiler.triton.stages import TritonOptions

    with pytest.raises(UsageError) as e:
        TritonOptions("k", **bad)
    assert said in e.value.message


@pytest.mark.parametrize("edit,said", [
    (lambda t: t.update(num_warps="four"), "triton.num_warps must be a whole number"),
    (lambda t: t.update(arch="../../x"), "triton.arch must be an arch"),
    (lambda t: t.update(signature={"x": "float"}), "triton.signature: the entry 'x'"),
    (lambda t: t.update(signature={f"p{i}": "i32" for i in range(2000)}),
     "at most 1000 entries"),
    (lambda t: t.update(notes=[[["deep"]]]), "triton.notes must be a list of at most 100"),
    (lambda t: t.clear(), "triton.signature must be an object"),
])
def test_a_crafted_triton_section_is_one_line(cli, rms, tmp_path, edit, said):
    import shutil

    keep = tmp_path / "k"
    shutil.copytree(rms["sm_90"][1], keep)
    doc = json.loads((keep / "stages.json").read_text())
    edit(doc["triton"])
    (keep / "stages.json").write_text(json.dumps(doc))
    r = cli("show", keep)
    assert r.exit_code == 6, r.output
    assert said in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # the message, and its hint
