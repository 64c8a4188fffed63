"""Workload parsing, safe expressions, and validation against real compiled kernels' PTX."""

from pathlib import Path

import numpy as np
import pytest

from nvstage.errors import ExprError, UsageError, ValidationError, WorkloadError
from nvstage.run.prepare import load_and_validate, prepare
from nvstage.run.workload import Workload
from nvstage.run.workload.data import initial_contents, run_check
from nvstage.run.workload.dry_run import dry_run_lines
from nvstage.run.workload.expr import eval_array_expr, eval_int_expr
from nvstage.run.workload.signatures import split_c_args
from nvstage.run.workload.validate import validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "run"


def _saxpy(**over) -> dict:
    d = {
        "kernel": {"source": str(ROOT / "kernels" / "saxpy.cu")},
        "params": {"n": "1 << 10", "a": 2.0},
        "buffers": {"x": {"dtype": "float32", "count": "n", "init": {"random": {"seed": 1}}},
                    "y": {"dtype": "float32", "count": "n"}},
        "transfer": {"to_device": ["x", "y"], "from_device": ["y"]},
        "launch": [{"kernel": "saxpy", "grid": "cdiv(n, 256)", "block": 256,
                    "args": [{"i32": "n"}, {"f32": "a"}, "x", "y"]}],
        "check": {"expect": {"y": "np.float32(a) * x + y"}},
    }
    for k, v in over.items():
        d[k] = v
    return d


@pytest.fixture(scope="module")
def sigs(toolkit):
    """Parameter lists from the real PTX of the bundled kernels (one nvcc build each)."""
    out = {}
    for name in ("saxpy", "multi", "vadd"):
        w = Workload.from_dict({"kernel": {"source": str(ROOT / "kernels" / f"{name}.cu")},
                                "launch": [{"kernel": "k", "grid": 1, "block": 1}]})
        out[name] = prepare(w, "sm_90", toolkit=toolkit).sigs
    return out


# -- expressions ---------------------------------------------------------------------------

def test_int_expressions():
    v = {"n": 1 << 20}
    assert eval_int_expr("(n + 255) // 256", v) == 4096
    assert eval_int_expr("n / 256", v) == 4096 and isinstance(eval_int_expr("n / 256", v), int)
    assert eval_int_expr("cdiv(n + 1, 256)", v) == 4097
    assert eval_int_expr("min(n, 1024) * 2", v) == 2048
    assert eval_int_expr(7, v) == 7


@pytest.mark.parametrize("bad", ["__import__('os')", "n.__class__", "open('x')", "lambda: 1",
                                 "[x for x in (1,)]", "10 ** 10 ** 10", "1 << 100000", "m"])
def test_int_expressions_refuse_everything_else(bad):
    with pytest.raises(ExprError):
        eval_int_expr(bad, {"n": 4})


def test_array_expressions_allow_numpy_only():
    x = np.arange(4, dtype=np.float32)
    assert np.array_equal(eval_array_expr("np.sqrt(x * x) + 1", {"x": x}), x + 1)
    assert eval_array_expr("x.reshape(-1, 2).sum(axis=1)[1]", {"x": x}) == 5
    assert np.array_equal(eval_array_expr("np.bincount(x.astype(np.int64), minlength=5)",
                                          {"x": x}), [1, 1, 1, 1, 0])
    for bad in ("np.load('f')", "x.tofile('f')", "np.lib", "__import__('os')",
                "x.__class__", "np.save('f', x)"):
        with pytest.raises(ExprError):
            eval_array_expr(bad, {"x": x})


# -- parsing ------------------------------------------------------------------------------

def test_examples_parse():
    for path in sorted(EXAMPLES.glob("*.toml")):
        w = Workload.from_toml(path)
        assert w.launches and w.check.expect, path


def test_api_and_toml_agree(tmp_path):
    w = Workload.from_dict(_saxpy())
    assert w.to_device == ("x", "y") and w.from_device == ("y",)
    assert w.param_values() == {"n": 1024, "a": 2.0}
    assert w.dims(0) == {"grid": (4,), "block": (256,), "shared": 0}
    assert [k for k, _, _ in w.operations()] == ["h2d", "h2d", "launch", "d2h"]
    assert w.nbytes(w.buffer("x")) == 4096


@pytest.mark.parametrize("change, where, text", [
    ({"kernel": {}}, "[kernel]", "source, cubin, fatbin or ptx"),
    ({"kernel": {"source": "nope.cu"}}, "[kernel] source", "no such file"),
    ({"bogus": {}}, "workload", "unknown table [bogus]"),
    ({"buffers": {"x": {"dtype": "float31", "count": 4}}}, "[buffers.x] dtype", "unknown dtype"),
    ({"buffers": {"x": {"dtype": "float32"}}}, "[buffers.x] count", "missing element count"),
    ({"buffers": {"x": {"dtype": "float32", "count": 4, "init": {"gauss": {}}}}},
     "[buffers.x] init", "unknown initial contents"),
    ({"launch": [{"kernel": "saxpy", "grid": 1}]}, "[launch[0]] block", "missing block"),
    ({"launch": [{"kernel": "saxpy", "grid": 1, "block": 1, "args": ["z"]}]},
     "[launch[0]] args[0]", "no buffer named 'z'"),
    ({"launch": [{"kernel": "saxpy", "grid": 1, "block": 1, "args": [{"i33": 1}]}]},
     "[launch[0]] args[0]", "one typed value"),
    ({"transfer": {"to_device": ["q"]}}, "[transfer] to_device", "no buffer named 'q'"),
    ({"run": {"reps": 0}}, "[run] reps", ">= 1"),
    ({"check": {"expect": {"x": "x"}}}, "[check.expect] x", "not copied back"),
    ({"check": {"expect": {"y": "y +"}}}, "[check.expect] y", "not an expression"),
])
def test_malformed_workloads_name_file_table_and_key(tmp_path, change, where, text):
    path = tmp_path / "w.toml"
    with pytest.raises(WorkloadError) as e:
        Workload.from_dict(_saxpy(**change), base=tmp_path, file=str(path))
    assert str(path) in e.value.message and where in e.value.message and text in e.value.message
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2


def test_malformed_toml_and_missing_file(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("[kernel\nsource = 1")
    with pytest.raises(WorkloadError, match="not valid TOML"):
        Workload.from_toml(p)
    with pytest.raises(UsageError, match="no such workload file"):
        Workload.from_toml(tmp_path / "absent.toml")


def test_bad_grid_and_block_values():
    w = Workload.from_dict(_saxpy(launch=[{"kernel": "saxpy", "grid": "n / 3", "block": 2048,
                                           "args": []}]))
    with pytest.raises(WorkloadError, match="not a whole number"):
        w.dims(0)
    w = Workload.from_dict(_saxpy(launch=[{"kernel": "saxpy", "grid": 1, "block": [64, 32],
                                           "args": []}]))
    with pytest.raises(WorkloadError, match="at most 1024 threads"):
        w.dims(0)


def test_initial_contents_and_check(tmp_path):
    np.save(tmp_path / "v.npy", np.arange(8, dtype=np.int64))
    w = Workload.from_dict({
        "kernel": {"source": str(ROOT / "kernels" / "saxpy.cu")},
        "params": {"n": 8},
        "buffers": {"z": {"dtype": "float32", "count": "n"},
                    "r": {"dtype": "int32", "count": "n",
                          "init": {"range": {"start": 1, "step": 2}}},
                    "f": {"dtype": "float64", "count": 4, "init": {"fill": 1.5}},
                    "u": {"dtype": "uint8", "count": "n", "init": {"random": {"seed": 3}}},
                    "v": {"dtype": "int32", "count": "n", "init": {"npy": "v.npy"}}},
        "transfer": {"from_device": ["r"]},
        "launch": [{"kernel": "saxpy", "grid": 1, "block": 1}],
        "check": {"expect": {"r": "r + 1"}},
    }, base=tmp_path)
    init = initial_contents(w)
    assert init["z"].dtype == np.float32 and not init["z"].any()
    assert list(init["r"][:3]) == [1, 3, 5]
    assert list(init["f"]) == [1.5] * 4
    assert init["u"].dtype == np.uint8
    assert np.array_equal(initial_contents(w)["u"], init["u"])  # seeded
    assert list(init["v"]) == list(range(8)) and init["v"].dtype == np.int32
    ok = run_check(w, init, {"r": init["r"] + 1})
    assert ok[0].ok and ok[0].mismatches == 0
    bad = run_check(w, init, {"r": init["r"]})
    assert not bad[0].ok and bad[0].mismatches == 8 and "index 0" in bad[0].message


# -- validation against real PTX -------------------------------------------------------------

def test_signatures_from_real_ptx(sigs):
    s = sigs["saxpy"]["saxpy"]
    assert [p.size for p in s.params] == [4, 4, 8, 8]
    assert s.params[1].ptx_type == "f32" and s.params[0].c_type is None  # extern "C"
    m = sigs["multi"]
    assert m["scale<float>"].mangled == "_Z5scaleIfEvPT_S0_i"
    assert m["scale<float>"].params[0].pointee == "float"
    assert m["block_sum"].params[0].c_type == "float const*"
    assert "histogram" in m and "vadd" in sigs["vadd"]


def test_bundled_examples_validate(sigs):
    for name, kernels in (("saxpy", "saxpy"), ("vadd", "vadd"), ("multi", "multi"),
                          ("many_launches", "multi")):
        w = Workload.from_toml(EXAMPLES / f"{name}.toml")
        findings = validate(w, sigs[kernels])
        assert [f for f in findings if f.level == "error"] == [], name


def _errors(w, sigs):
    return [f.message for f in validate(w, sigs) if f.level == "error"]


def test_unknown_kernel(sigs):
    w = Workload.from_dict(_saxpy(launch=[{"kernel": "saxpi", "grid": 1, "block": 1}]))
    (msg,) = _errors(w, sigs["saxpy"])
    assert "no kernel named 'saxpi'" in msg and "saxpy" in msg


def test_wrong_argument_count(sigs):
    w = Workload.from_dict(_saxpy(launch=[{"kernel": "saxpy", "grid": 1, "block": 1,
                                           "args": [{"i32": "n"}, "x", "y"]}]))
    (msg,) = _errors(w, sigs["saxpy"])
    assert msg == "kernel saxpy takes 4 argument(s), the workload passes 3"


def test_scalar_of_the_wrong_width(sigs):
    w = Workload.from_dict(_saxpy(launch=[{"kernel": "saxpy", "grid": 1, "block": 1,
                                           "args": [{"i64": "n"}, {"f32": "a"}, "x", "y"]}]))
    (msg,) = _errors(w, sigs["saxpy"])
    assert "kernel saxpy argument 0" in msg and "4 bytes wide" in msg and "i64 (8 bytes)" in msg


def test_float_for_int_and_scalar_for_pointer(sigs):
    w = Workload.from_dict(_saxpy(launch=[{"kernel": "saxpy", "grid": 1, "block": 1,
                                           "args": [{"f32": "n"}, {"i32": 2}, "x", "y"]}]))
    msgs = _errors(w, sigs["saxpy"])
    assert any("argument 0" in m and "integer parameter" in m for m in msgs)
    assert any("argument 1" in m and "floating-point" in m for m in msgs)
    d = _saxpy(launch=[{"kernel": "block_sum", "grid": 1, "block": 1,
                        "args": ["x", {"i64": 0}, {"i32": "n"}]}])
    d["kernel"] = {"source": str(ROOT / "kernels" / "multi.cu")}
    msgs = _errors(Workload.from_dict(d), sigs["multi"])
    assert any("argument 1 (float*) is a pointer" in m for m in msgs)


def test_pointer_type_from_the_mangled_name(sigs):
    d = _saxpy(buffers={"x": {"dtype": "float64", "count": "n"},
                        "y": {"dtype": "float32", "count": "n"}},
               launch=[{"kernel": "scale<float>", "grid": 1, "block": 1,
                        "args": ["x", {"f32": 1.0}, {"i32": "n"}]}])
    (msg,) = _errors(Workload.from_dict(d), sigs["multi"])
    assert "scale<float>" in msg and "points to float" in msg and "float64" in msg


def test_buffer_visibly_too_small(sigs):
    d = _saxpy(buffers={"x": {"dtype": "float32", "count": "n / 2"},
                        "y": {"dtype": "float32", "count": "n"}})
    (msg,) = _errors(Workload.from_dict(d), sigs["saxpy"])
    assert msg == ("kernel saxpy argument 0 (i32 n = 1024) exceeds the 512 elements of "
                   "buffer x (a bare name counts the elements of every buffer the launch "
                   'passes; if it is not a count, write { i32 = "n", counts = [] }, or name '
                   'the buffers it counts: counts = ["y"])')


def test_counts_names_what_the_scalar_counts(sigs):
    base = Workload.from_toml(EXAMPLES / "multi.toml")
    assert not _errors(base, sigs["multi"])  # partial is smaller than n: counts = ["data"]
    d = _saxpy(buffers={"x": {"dtype": "float32", "count": "n"},
                        "y": {"dtype": "float32", "count": 4}},
               launch=[{"kernel": "saxpy", "grid": 1, "block": 1,
                        "args": [{"i32": "n", "counts": ["x"]}, {"f32": "a"}, "x", "y"]}],
               check={})
    assert not _errors(Workload.from_dict(d), sigs["saxpy"])


def test_validation_error_names_the_file(tmp_path, toolkit):
    path = tmp_path / "bad.toml"
    path.write_text(f"""
[kernel]
source = "{ROOT / 'kernels' / 'saxpy.cu'}"
[params]
n = 64
[buffers.x]
dtype = "float32"
count = "n"
[[launch]]
kernel = "saxpy"
grid = 1
block = 64
args = [{{ i32 = "n" }}, "x"]
""")
    with pytest.raises(ValidationError) as e:
        load_and_validate(path, "sm_90", toolkit=toolkit)
    assert str(path) in e.value.message and "[launch[0]] args" in e.value.message
    assert e.value.exit_code == 2


def test_packaged_ptx_validates_without_nvcc(tmp_path, sigs, toolkit):
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile as run_compile

    run_compile(ROOT / "kernels" / "saxpy.cu", CompileOptions(archs=("sm_90",), stop="ptx",
                output=str(tmp_path / "s.ptx")), toolkit=toolkit, cwd=tmp_path)
    w = Workload.from_dict(_saxpy(kernel={"ptx": "s.ptx"}), base=tmp_path)
    prep = prepare(w, "sm_90")
    assert prep.kind == "ptx" and prep.mangled()["saxpy"] == "saxpy"
    assert not _errors(w, prep.sigs)


def test_dry_run_lines():
    lines = dry_run_lines(Workload.from_dict(_saxpy()))
    assert "launch saxpy grid=(4,) block=(256,) shared=0 (i32(1024), f32(2.0), x, y)" in \
        "\n".join(lines)
    assert any("copy y device -> host, 4096 bytes (pinned)" in line for line in lines)


def test_split_c_args():
    assert split_c_args("void scale<float>(float*, float, int)") == ["float*", "float", "int"]
    assert split_c_args("f(std::pair<int, int>, float const*)") == ["std::pair<int, int>",
                                                                    "float const*"]
    assert split_c_args("g()") == []
    assert split_c_args("histogram") is None


def test_signatures_keyed_by_every_name(sigs):
    m = sigs["multi"]
    assert m["_Z5scaleIfEvPT_S0_i"] is m["scale<float>"]
    assert m["scale<double>"].params[1].ptx_type == "f64"
