"""The runtime path with the real NVRTC and nvJitLink (no GPU needed, no mocks)."""

import json
import pickle

import pytest

from nvstage import proc
from nvstage.errors import RuntimeCompileFailed, UsageError
from nvstage.inspect.elf import read_cubin
from nvstage.compiler.nvrtc import RuntimeBuild, compile_nvrtc, nvrtc_options, source_excerpt
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.manifest.model import Build
from nvstage.compiler.nvcc.plan import StageKind


def _opts(**kw):
    return CompileOptions(**kw)


def _loadable(path, arch, toolkit, kernels):
    """A cubin the loader would take: CUDA ELF for ``arch``, readable by cuobjdump and nvdisasm."""
    data = open(path, "rb").read()
    cubin = read_cubin(data, str(path))
    assert cubin.arch == arch
    assert set(kernels) <= set(cubin.kernels)
    cp = proc.run([toolkit.tool("cuobjdump"), "-sass", str(path)], timeout=120)
    assert cp.returncode == 0 and all(k in cp.stdout for k in kernels)
    cp = proc.run([toolkit.tool("nvdisasm"), "-c", str(path)], timeout=120)
    assert cp.returncode == 0 and cp.stdout.strip()


CASES = [("saxpy.cu", ["saxpy"]),
         ("templates.cu", ["_Z5scaleIfEvPT_S0_i", "_Z5scaleIdEvPT_S0_i", "_Z9block_sumPKfPfi"])]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_nvrtc_and_nvjitlink_cubins_are_loadable(kernels, toolkit, workdir, arch, case):
    name, entries = case
    b = compile_nvrtc(kernels / name, _opts(archs=(arch,)), toolkit=toolkit, keep="out")
    assert isinstance(b, Build) and isinstance(b, RuntimeBuild) and b.via == "nvrtc"
    assert [r.stage.kind for r in b.runs] == [StageKind.NVRTC, StageKind.NVJITLINK]
    stem = name[:-3]
    assert [a.name for a in b.runs[0].artifacts] == [f"{stem}.ptx", f"{stem}.{arch}.cubin"]
    assert [a.name for a in b.runs[1].artifacts] == [f"{stem}.nvjitlink.{arch}.cubin"]
    assert b.runs[0].stage.argv[:2] == ["nvrtc", f"-arch={arch}"]
    assert b.runs[1].stage.argv == ["nvjitlink", f"-arch={arch}", str(workdir / f"out/{stem}.ptx")]
    assert all(r.seconds > 0 for r in b.runs)
    for a in b.artifacts:
        assert a.arch == arch and a.size > 0
    _loadable(b.artifact("cubin", arch).path, arch, toolkit, entries)
    _loadable(b.runs[1].artifacts[0].path, arch, toolkit, entries)
    assert b.output == b.runs[1].artifacts[0].path
    doc = json.loads((workdir / "out/stages.json").read_text())
    assert doc["via"] == "nvrtc" and doc["status"] == "ok"
    assert doc["runtime"]["nvrtc_version"] == doc["runtime"]["nvjitlink_version"] == "13.5"
    assert [s["kind"] for s in doc["plan"]["stages"]] == ["nvrtc", "nvjitlink"]
    assert doc["plan"]["variables"] == {}


def test_without_keep_nothing_is_left(kernels, toolkit, workdir):
    b = compile_nvrtc(kernels / "saxpy.cu", _opts(archs=("sm_90",)), toolkit=toolkit)
    assert b.keep_dir is None and b.output is None
    assert b.artifacts and not any(__import__("os").path.exists(a.path) for a in b.artifacts)
    assert list(workdir.iterdir()) == []


def test_output_option_and_stop_points(kernels, toolkit, workdir):
    b = compile_nvrtc(kernels / "saxpy.cu", _opts(archs=("sm_90",), output="s.cubin"),
                      toolkit=toolkit)
    assert b.output == str(workdir / "s.cubin")
    read_cubin((workdir / "s.cubin").read_bytes())
    b = compile_nvrtc(kernels / "saxpy.cu", _opts(archs=("sm_90",), stop="ptx", output="s.ptx"),
                      toolkit=toolkit)
    assert [r.stage.kind for r in b.runs] == [StageKind.NVRTC]
    assert (workdir / "s.ptx").read_text().startswith("//")
    assert "\0" not in (workdir / "s.ptx").read_text()


def test_virtual_arch_gives_ptx_only_and_nvjitlink_compiles_it(kernels, toolkit, workdir):
    b = compile_nvrtc(kernels / "saxpy.cu", _opts(archs=("compute_90",)), toolkit=toolkit,
                      keep="out")
    assert [a.name for a in b.runs[0].artifacts] == ["saxpy.ptx"]
    assert b.runs[1].stage.argv[1] == "-arch=sm_90"
    _loadable(b.runs[1].artifacts[0].path, "sm_90", toolkit, ["saxpy"])


def test_lto_writes_ltoir_then_links_it(kernels, toolkit, workdir):
    b = compile_nvrtc([kernels / "lto_a.cu", kernels / "lto_b.cu"],
                      _opts(archs=("sm_90",), lto=True), toolkit=toolkit, keep="out")
    kinds = [(r.stage.kind.value, [a.name for a in r.artifacts]) for r in b.runs]
    assert kinds == [("nvrtc", ["lto_a.ltoir"]), ("nvrtc", ["lto_b.ltoir"]),
                     ("nvjitlink", ["lto_a+lto_b.nvjitlink.sm_90.cubin"]),
                     ("nvjitlink", ["lto_a+lto_b.nvjitlink.ptx"])]
    assert "-dlto" in b.runs[0].stage.argv and "-lto" in b.runs[2].stage.argv
    assert "-ptx" in b.runs[3].stage.argv
    assert (workdir / "out/lto_a+lto_b.nvjitlink.ptx").read_text().count(".entry lto_apply") == 1
    _loadable(b.runs[2].artifacts[0].path, "sm_90", toolkit, ["lto_apply"])
    # Separately compiled sources get -rdc=true without LTO (lto_a calls into lto_b).
    b = compile_nvrtc([kernels / "lto_a.cu", kernels / "lto_b.cu"], _opts(archs=("sm_90",)),
                      toolkit=toolkit)
    assert "-rdc=true" in b.runs[0].stage.argv and b.status == "ok"


def test_options_map_to_nvrtc_flags():
    o = _opts(archs=("sm_90",), lineinfo=True, maxrregcount=32, defines=("N=4",),
              include_dirs=("inc",), extra=("-std=c++20",), resource_usage=True)
    assert nvrtc_options(o, arch="sm_90", include_dirs=["/k"]) == [
        "-arch=sm_90", "-lineinfo", "-Iinc", "-DN=4", "-Xptxas=-v", "-maxrregcount=32",
        "-std=c++20", "-I/k"]
    for bad, words in ((_opts(gencodes=("arch=compute_90,code=sm_90",)), "-gencode"),
                       (_opts(compile_only=True), "-c"), (_opts(opt_level="2"), "-O"),
                       (_opts(stop="fatbin"), "fatbin")):
        with pytest.raises(UsageError, match=words):
            nvrtc_options(bad, arch="sm_90")


@pytest.mark.parametrize("archs, words", [
    (("sm_80", "sm_90"), "one arch per program"),
    (("native",), "rejects -arch=native"),
    (("lto_90",), "cannot compile for 'lto_90'"),
])
def test_archs_nvrtc_cannot_take_are_refused(kernels, toolkit, workdir, archs, words):
    with pytest.raises(UsageError, match=words):
        compile_nvrtc(kernels / "saxpy.cu", _opts(archs=archs), toolkit=toolkit)


def test_flags_reach_the_compiler(kernels, toolkit, workdir):
    b = compile_nvrtc(kernels / "saxpy.cu",
                      _opts(archs=("sm_90",), lineinfo=True, resource_usage=True),
                      toolkit=toolkit, keep="out")
    assert "Used" in b.runs[0].stderr and "registers" in b.runs[0].stderr  # ptxas -v via NVRTC
    assert ".loc" in (workdir / "out/saxpy.ptx").read_text()  # -lineinfo


def test_name_expressions_map_to_mangled_names(kernels, toolkit, workdir):
    b = compile_nvrtc(kernels / "templates.cu", _opts(archs=("sm_90",)), toolkit=toolkit,
                      keep="out", name_expressions=("scale<float>", "scale<int>"))
    assert b.name_map == {"scale<float>": "_Z5scaleIfEvPT_S0_i",
                          "scale<int>": "_Z5scaleIiEvPT_S0_i"}
    assert "scale<int> -> _Z5scaleIiEvPT_S0_i" in b.runs[0].stdout
    _loadable(b.artifact("cubin", "sm_90").path, "sm_90", toolkit, ["_Z5scaleIiEvPT_S0_i"])
    doc = json.loads((workdir / "out/stages.json").read_text())
    assert doc["runtime"]["name_map"]["scale<int>"] == "_Z5scaleIiEvPT_S0_i"


def test_syntax_error_carries_the_log_and_numbered_source(toolkit, workdir):
    (workdir / "bad.cu").write_text("// ok\n__global__ void f(int* p) {\n  p[0] = 1\n}\n")
    with pytest.raises(RuntimeCompileFailed) as info:
        compile_nvrtc("bad.cu", _opts(archs=("sm_90",)), toolkit=toolkit, keep="out")
    e = info.value
    assert e.exit_code == 5 and e.result == "NVRTC_ERROR_COMPILATION"
    assert 'bad.cu(4): error: expected a ";"' in e.message
    assert "  3 |   p[0] = 1" in e.message and "> 4 | }" in e.message
    assert "as run: nvrtc -arch=sm_90" in e.message
    doc = json.loads((workdir / "out/stages.json").read_text())
    assert doc["status"] == "failed" and doc["error"]["error"] == "RuntimeCompileFailed"
    assert "expected a" in doc["stages"][0]["stderr"] and doc["stages"][0]["returncode"] != 0
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is RuntimeCompileFailed and again.log == e.log


def test_unknown_option_is_one_clear_error(kernels, toolkit, workdir):
    with pytest.raises(RuntimeCompileFailed) as info:
        compile_nvrtc(kernels / "saxpy.cu", _opts(archs=("sm_90",), extra=("--bogus",)),
                      toolkit=toolkit)
    e = info.value
    assert e.result == "NVRTC_ERROR_INVALID_OPTION"
    assert "NVRTC rejected an option" in e.message
    assert "unrecognized option --bogus" in e.message
    assert "-gencode" in e.hint


def test_missing_name_expression_is_one_clear_error(kernels, toolkit, workdir):
    with pytest.raises(RuntimeCompileFailed) as info:
        compile_nvrtc(kernels / "templates.cu", _opts(archs=("sm_90",)), toolkit=toolkit,
                      name_expressions=("scale<float>", "nosuch<float>"))
    e = info.value
    assert "name expression 'nosuch<float>' does not resolve in templates.cu" in e.message
    assert 'identifier "nosuch" is undefined' in e.message
    assert "--name-expr" in e.hint


@pytest.mark.parametrize("name, header", [("vadd.cu", "cstdio"), ("multi.cu", "cstdint")])
def test_host_code_is_named_as_the_problem(kernels, toolkit, workdir, name, header):
    with pytest.raises(RuntimeCompileFailed) as info:
        compile_nvrtc(kernels / name, _opts(archs=("sm_90",)), toolkit=toolkit)
    e = info.value
    assert f"NVRTC cannot open <{header}>" in e.message
    assert "> 3 | #include <" in e.message
    assert "device code only" in e.hint and "--via nvcc" in e.hint


def test_source_excerpt_marks_the_named_lines():
    text = "\n".join(f"line{i}" for i in range(1, 21))
    log = "k.cu(5): error: x\nk.cu(12): warning: y\n__nv_name_map(2): error: z\n"
    out = source_excerpt(log, {"k.cu": text})
    assert out.splitlines() == [
        "  k.cu:", "     4 | line4", "  >  5 | line5", "     6 | line6", "      ...",
        "    11 | line11", "  > 12 | line12", "    13 | line13"]
    assert "line8" not in out and "__nv_name_map" not in out


def test_missing_source(toolkit, workdir):
    from nvstage.errors import InputNotFound

    with pytest.raises(InputNotFound):
        compile_nvrtc("nope.cu", _opts(archs=("sm_90",)), toolkit=toolkit)


def test_link_failure_carries_nvjitlinks_log(kernels, toolkit, workdir):
    # lto_a.cu alone, relocatable: NVRTC is content, the link finds shade() undefined.
    with pytest.raises(RuntimeCompileFailed) as info:
        compile_nvrtc(kernels / "lto_a.cu", _opts(archs=("sm_90",), rdc=True), toolkit=toolkit)
    e = info.value
    assert e.tool == "nvjitlink" and e.stage_index == 2
    assert "nvJitLink failed to link lto_a.ptx" in e.message
    assert "Undefined reference to '_Z5shadefi'" in e.message
    assert "pass every source together" in e.hint
