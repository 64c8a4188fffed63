"""nvstage compile's command line: nvcc's grammar with nvstage's options on top (pure)."""

from pathlib import Path

import pytest

from nvstage.compiler.pipeline.cmdline import nvcc_choice, parse, wants_help
from nvstage.compiler.nvcc.grammar import Grammar
from nvstage.errors import UsageError

HELP = Path(__file__).parents[2] / "data" / "captured" / "cuda13.5-nvcc-help.txt"


@pytest.fixture(scope="module")
def g():
    return Grammar.from_help(HELP.read_text())


def test_nvcc_spellings_become_fields_or_pass_through(g):
    r = parse(["k.cu", "-std=c++17", "-Xcompiler", "-O2", "-Xptxas=-v", "-rdc=true", "-c",
               "--generate-code=arch=compute_90,code=[sm_90,compute_90]", "-O3", "-I", "a,b",
               "-DX=1", "-lineinfo", "-maxrregcount=32", "--use_fast_math", "-o", "k.o"], g)
    o = r.options
    assert r.source == "k.cu" and o.output == "k.o" and o.compile_only and o.rdc
    assert o.gencodes == ("arch=compute_90,code=[sm_90,compute_90]",)
    assert o.opt_level == "3" and o.include_dirs == ("a", "b") and o.defines == ("X=1",)
    assert o.lineinfo and o.maxrregcount == 32
    assert o.extra == ("-std=c++17", "-Xcompiler", "-O2", "-Xptxas=-v", "--use_fast_math")


def test_nvstage_options_and_their_overlaps(g):
    r = parse(["k.cu", "--arch", "sm_80", "-arch", "sm_90", "-arch=sm_90a", "-keep", "-j2",
               "--json", "--show=resources", "--no-cache", "--via", "nvrtc",
               "--name-expr", "scale<float>", "--output", "x.o", "--rdc"], g)
    assert r.options.archs == ("sm_80", "sm_90", "sm_90a")
    assert r.keep and r.keep_folder == "x.nvstage" and r.jobs == 2 and r.json
    assert r.show == "resources" and r.no_cache and r.via == "nvrtc"
    assert r.name_exprs == ("scale<float>",) and r.options.rdc and r.options.output == "x.o"
    assert parse(["k.cu", "--keep-dir", "kd"], g).keep_folder == "kd"
    assert parse(["k.cu", "-keep"], g).keep_folder == "k.nvstage"


def test_dash_dash_sends_the_rest_to_nvcc(g):
    r = parse(["k.cu", "--", "--json", "-Xptxas", "-v"], g)
    assert not r.json and r.options.extra == ("--json", "-Xptxas", "-v")
    assert wants_help(["k.cu", "-h"]) and not wants_help(["k.cu", "--", "-h"])


def test_stop_points_and_errors(g):
    assert parse(["k.cu", "-ptx"], g).options.stop == "ptx"
    assert parse(["k.cu", "-dc"], g).options.compile_only
    with pytest.raises(UsageError, match="one stop point"):
        parse(["k.cu", "--ptx", "--cubin"], g)
    with pytest.raises(UsageError, match="one source file"):
        parse(["a.cu", "b.cu"], g)
    with pytest.raises(UsageError, match="needs a value"):
        parse(["k.cu", "--keep-dir"], g)
    with pytest.raises(UsageError, match="whole number"):
        parse(["k.cu", "-j", "lots"], g)


def test_nvcc_choice_is_found_first():
    assert nvcc_choice(["k.cu", "--nvcc", "/x/nvcc"], {}) == "/x/nvcc"
    assert nvcc_choice(["--nvcc=/y/nvcc"], {}) == "/y/nvcc"
    assert nvcc_choice(["k.cu"], {"NVSTAGE_NVCC": "/z/nvcc"}) == "/z/nvcc"
    assert nvcc_choice(["k.cu", "--", "--nvcc", "/x"], {}) is None


def test_time_trace_is_nvstages_spelling_of_nvccs_option(g):
    # never --time, which is nvcc's own CSV of phase times
    assert parse(["k.cu", "-c", "--time-trace"], g).options.extra == ("-fdevice-time-trace", "-")
    assert parse(["k.cu", "--time-trace=t.json"], g).options.extra == \
        ("-fdevice-time-trace", "t.json")
    assert parse(["k.cu", "--time", "t.csv"], g).options.extra == ("--time", "t.csv")
