"""nvcc's grammar: read from its --help, and checked against what the real nvcc accepts."""

from pathlib import Path

import pytest

from nvstage import proc
from nvstage.errors import UsageError
from nvstage.compiler.nvcc.grammar import (
    Grammar,
    expand_options_files,
    grammar_for,
    last_value,
    split_options_file,
    values,
)

DATA = Path(__file__).parents[2] / "data" / "captured"


@pytest.fixture(scope="module")
def g135():
    return Grammar.from_help((DATA / "cuda13.5-nvcc-help.txt").read_text())


def test_help_of_both_releases_parses_with_their_own_options(g135):
    g130 = Grammar.from_help((DATA / "cuda13.0-nvcc-help.txt").read_text())
    assert len(g135.options) > 150 and len(g130.options) > 140
    assert "--stdlib" in g135.by_name and "--stdlib" not in g130.by_name
    assert "--sanitize" in g130.by_name and "--fdevice-sanitize" in g135.by_name
    o = g135.by_name["-o"]
    assert o.long == "--output-file" and o.takes_value and not o.is_list
    assert g135.by_name["-I"].is_list and g135.by_name["-Xcompiler"].is_list
    assert g135.by_name["-rdc"].choices == ("true", "false")
    assert g135.by_name["-compress-mode"].choices[:2] == ("default", "size")
    assert not g135.by_name["-c"].takes_value
    # Shown without a value in the help, but nvcc wants one.
    assert g135.by_name["-MF"].takes_value and g135.by_name["--qpp-config"].takes_value
    assert g135.by_name["--no-align-double"].short is None


def test_not_help_text_is_refused():
    with pytest.raises(ValueError):
        Grammar.from_help("Usage: something else\n--only-one (-o)\n")


@pytest.mark.parametrize("argv, expect", [
    (["-o", "a.o"], [(("-o", "a.o"), "--output-file", "a.o")]),
    (["-o=a.o"], [(("-o=a.o",), "--output-file", "a.o")]),
    (["--output-file=a.o"], [(("--output-file=a.o",), "--output-file", "a.o")]),
    (["-O3"], [(("-O3",), "--optimize", "3")]),
    (["-I.", "-DX=1", "-lm"], [(("-I.",), "--include-path", "."),
                               (("-DX=1",), "--define-macro", "X=1"),
                               (("-lm",), "--library", "m")]),
    (["-Xcompiler", "-fPIC"], [(("-Xcompiler", "-fPIC"), "--compiler-options", "-fPIC")]),
    (["-Xcompiler=-fPIC,-O2"], [(("-Xcompiler=-fPIC,-O2",), "--compiler-options",
                                 "-fPIC,-O2")]),
    (["-std=c++17"], [(("-std=c++17",), "--std", "c++17")]),
    (["-m64"], [(("-m64",), "--m64", None)]),
    (["-x", "cu", "a.cu"], [(("-x", "cu"), "--x", "cu"), (("a.cu",), None, None)]),
    (["-MF", "a.d"], [(("-MF", "a.d"), "--dependency-output", "a.d")]),
    # Unknown to nvcc: wrong dashes, glued values on options that take none that way.
    (["--arch=sm_90"], [(("--arch=sm_90",), None, None)]),
    (["-ofile.o"], [(("-ofile.o",), None, None)]),
    (["-m32"], [(("-m32",), None, None)]),
    (["-lineinfo=true"], [(("-lineinfo=true",), None, None)]),
    (["-o"], [(("-o",), None, None)]),  # no value left: nvcc says so
])
def test_parse_keeps_words_and_reads_values(g135, argv, expect):
    got = [(a.words, a.option.long if a.option else None, a.value) for a in g135.parse(argv)]
    assert got == expect
    assert [w for a in g135.parse(argv) for w in a.words] == argv


def test_values_accumulate_for_lists_and_single_values_keep_the_last(g135):
    args = g135.parse(["-I", "a,b", "-Ic", "-O3", "--optimize", "0", "-arch=sm_80",
                       "-arch", "sm_90"])
    assert values(args, "-I") == ["a", "b", "c"]
    assert last_value(args, "-O") == "0"
    assert last_value(args, "-arch") == "sm_90"


def test_options_file_split_as_nvcc_splits(tmp_path, g135):
    assert split_options_file('-arch=sm_90 "-DX=a b" -DY=e\\ f\n-I\t.') == [
        "-arch=sm_90", "-DX=a b", "-DY=e f", "-I", "."]
    assert split_options_file("-DX='a b'") == ["-DX='a", "b'"]  # single quotes are plain
    with pytest.raises(UsageError, match="unterminated"):
        split_options_file('"-DX')
    (tmp_path / "inner.rsp").write_text("-O2")
    (tmp_path / "outer.rsp").write_text("-arch=sm_90 --options-file inner.rsp")
    args = expand_options_files(g135.parse(["-c", "-optf", "outer.rsp", "a.cu"]), g135,
                                str(tmp_path))
    assert [a.words for a in args] == [("-c",), ("-arch=sm_90",), ("-O2",), ("a.cu",)]
    (tmp_path / "loop.rsp").write_text("-optf loop.rsp")
    with pytest.raises(UsageError, match="deep"):
        expand_options_files(g135.parse(["-optf", "loop.rsp"]), g135, str(tmp_path))


# What nvcc itself says about each spelling: known (parses) or "Unknown option".
SPELLINGS = ["-O3", "-I.", "-DX=1", "-UX", "-L.", "-lfoo", "-t2", "-m64", "-o=a.o",
             "-arch=sm_90", "-arch sm_90", "--gpu-architecture=sm_90", "-std=c++17",
             "-std c++17", "-Xcompiler=-fPIC", "-Xcompiler -fPIC", "-Xptxas=-v",
             "-rdc=true", "-rdc true", "-MF=x.d -MD", "-MT=t -MD", "-x cu", "-x=cu",
             "--x=cu", "-isystem=/usr/include", "-ccbin=gcc", "-G", "-lineinfo",
             "--use_fast_math", "-use_fast_math", "--expt-relaxed-constexpr",
             "--extended-lambda", "-res-usage", "--threads=2", "-split-compile=2",
             "-Werror=all-warnings", "-Wno-deprecated-gpu-targets", "--fmad=false",
             "-diag-suppress 177,178", "-cudart shared", "-lineinfoX",
             # unknown to nvcc
             "--arch=sm_90", "--gencode=arch=compute_90,code=sm_90", "-gpu-architecture=sm_90",
             "-ofoo.o", "-archsm_90", "-stdc++17", "-MFx.d", "-xcu", "-isystem/usr/include",
             "-maxrregcount32", "-rdctrue", "-esaxpy", "-m32", "-mfoo", "--use-fast-math",
             "--O3", "-fPIC", "--"]


def test_grammar_agrees_with_the_real_nvcc(toolkit, tmp_path):
    g = grammar_for(toolkit.nvcc)
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    wrong = []
    for spelling in SPELLINGS:
        words = spelling.split()
        cp = proc.run([toolkit.nvcc, "--dryrun", "-c", "k.cu", *words], cwd=tmp_path,
                      timeout=60)
        nvcc_unknown = "Unknown option" in cp.stderr
        ours_unknown = any(a.is_unknown for a in g.parse(words))
        if nvcc_unknown != ours_unknown:
            wrong.append((spelling, cp.stderr.strip()[-200:]))
    assert not wrong


def test_grammar_is_remembered_per_nvcc(toolkit, tmp_path, monkeypatch):
    from nvstage.compiler.nvcc.grammar import _grammar

    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path))
    _grammar.cache_clear()
    g = grammar_for(toolkit.nvcc)
    assert list((tmp_path / "tools").glob("help-*.json"))
    assert g.by_name["-arch"].long == "--gpu-architecture"
