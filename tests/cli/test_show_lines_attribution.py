"""The line view on code in the shape real CUDA takes (issue 44, items 1 and 2):
tests/data/layernorm_cg.cu, a warp-per-row layer normalisation with cooperative groups (our
own code, in the shape of llm.c's layernorm kernel3), built with -lineinfo for sm_90.

The counts the view must give are worked out here from nvdisasm's own listings, read without
the module's parser: each instruction's chain of ``//## File ... inlined at`` markers, walked
out to the innermost frame in the kernel's file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[1] / "data" / "layernorm_cg.cu"
KERNEL = "layernorm_warp"
LINES = SOURCE.read_text().splitlines()
REDUCE = [n for n, t in enumerate(LINES, 1) if "cg::reduce(warp, sum" in t]
TILE = next(n for n, t in enumerate(LINES, 1) if "cg::tiled_partition<32>(block)" in t)
OWN = (next(n for n, t in enumerate(LINES, 1) if f"void {KERNEL}(" in t),
       next(n for n, t in enumerate(LINES, 1) if "A third kernel" in t) - 1)


@pytest.fixture(scope="module")
def built(toolkit, tmp_path_factory):
    import nvstage

    folder = tmp_path_factory.mktemp("layernorm")
    src = folder / "layernorm_cg.cu"
    src.write_text(SOURCE.read_text())
    nvstage.compile(src, nvstage.CompileOptions(archs=("sm_90",), lineinfo=True, stop="cubin",
                                                output=str(folder / "ln.cubin")),
                    keep=folder / "ln.nvstage", cwd=folder, toolkit=toolkit)
    return folder


@pytest.fixture(scope="module")
def independent(built, toolkit):
    """offset -> (the chain of (file, line), innermost first; GPR live) of each instruction of
    the kernel, from ``nvdisasm -gi`` and ``-lrm count`` read line by line here."""
    nvd, cubin = toolkit.tool("nvdisasm"), str(built / "ln.cubin")
    gi = subprocess.run([nvd, "-gi", "-c", cubin], capture_output=True, text=True,
                        check=True).stdout
    lrm = subprocess.run([nvd, "--life-range-mode", "count", "-c", cubin],
                         capture_output=True, text=True, check=True).stdout

    def section(text):
        out, inside = [], False
        for line in text.splitlines():
            if ".section" in line and ".text." in line:
                inside = KERNEL in line
            elif inside:
                out.append(line)
        return out

    chains, marks, chain = {}, [], ()
    for line in section(gi):
        m = re.match(r'\s*//## File "(.*?)", line (\d+)', line)
        if m:
            marks.append((m.group(1), int(m.group(2))))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(\S.*)", line)
        if m:
            if marks:
                chain, marks = tuple(marks), []
            chains[int(m.group(1), 16)] = (chain, m.group(2))
    live = {}
    for line in section(lrm):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/.*// \|([^|]*)\|", line)
        if m:
            live[int(m.group(1), 16)] = int(m.group(2).strip() or 0)
    return {o: (c, t, live.get(o)) for o, (c, t) in chains.items()}


def _mine(chain) -> int | None:
    """The line of layernorm_cg.cu an instruction counts to: the innermost of its frames in
    that file."""
    return next((n for f, n in chain if f.endswith("layernorm_cg.cu")), None)


def _show(cli, built, *more):
    r = cli("show", built / "ln.nvstage", "--kernel", KERNEL, "--lineinfo", "--sections",
            "lines", *more)
    assert r.exit_code == 0, r.output
    return r.stdout


def _row(out: str, line: int) -> str:
    return next(x for x in out.splitlines() if re.match(rf"\s*{line} \| ", x))


def test_the_reduce_line_gets_the_shuffles_and_adds_inlined_from_it(cli, built, independent):
    assert len(REDUCE) == 2
    doc = json.loads(_show(cli, built, "--json"))
    (k,) = doc["lines"]
    rows = {ln["line"]: ln for ln in k["lines"] if ln["file"].endswith("layernorm_cg.cu")}
    for line in REDUCE + [TILE]:
        want = {o for o, (c, _, _) in independent.items() if _mine(c) == line}
        got = {i["offset"] for i in k["instructions"]
               if i["attributed"]["line"] == line and i["attributed"]["file"].endswith(".cu")}
        assert want and got == want, line
        # none of them sits at the line itself: every one was inlined from a header
        assert all(independent[o][0][0][1] != line for o in want)
        assert rows[line]["instructions"] == len(want)
        assert rows[line]["peak_live_gpr"] == max(independent[o][2] for o in want)
    for line in REDUCE:
        ops = [independent[o][1].split()[0].split(".")[0] for o, (c, _, _) in
               independent.items() if _mine(c) == line]
        assert sorted(ops) == ["FADD"] * 5 + ["SHFL"] * 5  # a 32-lane butterfly
    assert rows[TILE]["instructions"] == 12
    # --json keeps nvdisasm's innermost location and adds the frame it counts to, and the chain
    shfl = next(i for i in k["instructions"] if i["opcode"] == "SHFL")
    assert shfl["file"].endswith("sm_30_intrinsics.hpp")
    assert shfl["attributed"]["line"] in REDUCE
    assert [(c["file"], c["line"]) for c in shfl["chain"]] == \
        [tuple(x) for x in independent[shfl["offset"]][0]]
    assert k["attribute"] == "user"


def test_the_text_view_folds_runs_without_code_and_holds_the_kernels_lines(cli, built,
                                                                           independent):
    out = _show(cli, built)
    row = _row(out, REDUCE[0])
    assert re.search(r"\| +sum = cg::reduce\(warp, sum, cg::plus<float>\{\}\);   \[10 instr, "
                     r"peak \d+, ptx \d+ \| shuffle 5, fp32 5\]", row), row
    # the frames it came through beneath it, headers named as includes, with their text
    assert "inlined: <cooperative_groups/details/reduce.h>:" in out
    assert "<sm_30_intrinsics.hpp>:448  | ret = __nvvm_shfl_bfly_sync(" in out
    # only the kernel's own file, named whole; no header rows
    assert f"source: {built / 'layernorm_cg.cu'}\n" in out
    numbered = [int(m.group(1)) for m in re.finditer(r"^ *(\d+) \| ", out, re.M)]
    assert numbered and OWN[0] <= min(numbered) and max(numbered) <= OWN[1]
    assert "layernorm_rows" not in out and "void scale(" not in out
    # every run of more than 3 lines without code is one row
    folds = re.findall(r"^ +\| \u22ee   \[lines (\d+)-(\d+): no code\]$", out, re.M)
    assert folds and all(int(b) - int(a) + 1 > 3 for a, b in folds)
    # the rows without code left are short runs between lines with code (a brace, a comment)
    code = [n for n in numbered if "[no SASS]" not in _row(out, n)]
    run = 0
    for n in range(min(numbered), max(numbered) + 1):
        run = run + 1 if n in numbered and n not in code else 0
        assert run <= 3, n
    assert min(numbered) in code and max(numbered) in code
    for a, b in folds:
        assert not set(range(int(a), int(b) + 1)) & set(numbered)
    # the peak, as nvdisasm's column gives it, at a line of the kernel's
    peak = max(v[2] for v in independent.values() if v[2] is not None)
    at = {_mine(c) for c, _, g in independent.values() if g == peak}
    assert f"peak {peak} live registers at line{'s' if len(at) > 1 else ''} " \
        f"{', '.join(map(str, sorted(at)))}\n" in out


def test_attribute_innermost_is_where_nvdisasm_puts_it(cli, built, independent):
    out = _show(cli, built, "--attribute", "innermost")
    assert re.search(r"\| +sum = cg::reduce\(warp, sum, cg::plus<float>\{\}\);   \[no SASS\]",
                     _row(out, REDUCE[0]))
    assert "\n<sm_30_intrinsics.hpp>\n" in out
    shfl = sum(1 for c, t, _ in independent.values() if t.startswith("SHFL"))
    assert re.search(rf"  448 \| ret = __nvvm_shfl_bfly_sync\(.*\[{shfl} instr", out)
    assert "inlined:" not in out and "(inlined at " in out
    r = cli("show", built / "ln.nvstage", "--kernel", KERNEL, "--lineinfo", "--attribute",
            "outermost")
    assert r.exit_code == 2 and "not one of user, innermost" in r.stderr


def test_a_folder_named_a_library_is_not_the_users(cli, built):
    """A vendored library in the user's tree is the user's unless --library names it: here
    the kernel's own folder, so nothing is the user's and each instruction stays innermost."""
    out = _show(cli, built, "--library", str(built))
    assert "[no SASS]" in _row(out, REDUCE[0])


def test_which_files_are_the_users(toolkit, tmp_path):
    from nvstage.inspect.attribution import Attribution

    a = Attribution.of(toolkit, library=[tmp_path / "third_party"])
    inc = Path(toolkit.root) / "include"
    assert not a.is_user(str(inc / "cooperative_groups.h"))
    assert not a.is_user(f"{toolkit.root}/bin/../include/cooperative_groups/reduce.h")
    assert not a.is_user("/usr/include/c++/12/cmath")
    assert not a.is_user("/home/me/.venv/lib/python3.11/site-packages/triton/language/a.py")
    assert not a.is_user(str(tmp_path / "third_party" / "cub" / "block_reduce.cuh"))
    assert a.is_user(str(tmp_path / "src" / "cub" / "block_reduce.cuh"))
    assert a.is_user("/home/me/kernels/k.cu")
    # another machine's toolkit: named and read from this toolkit's include folder
    other = "/opt/cuda-12.4/include/cooperative_groups.h"
    assert not a.is_user(other) and a.name(other) == "<cooperative_groups.h>"
    text = a.header_text(other)
    assert text and any("class thread_block " in x for x in text)
    # a path that climbs out of the include folder is read from nowhere
    assert a.header_text("/opt/cuda/include/../../etc/passwd") is None
    assert a.name("/home/me/kernels/k.cu") == "/home/me/kernels/k.cu"
    assert a.name("/v/lib/python3.11/site-packages/triton/language/standard.py") == \
        "triton/language/standard.py"


def test_a_kernel_view_folds_long_runs_and_other_kernels_signatures():
    """Pure join: a helper at line 1 inlined into a kernel at 4..6; line 2 is another kernel's
    signature (no code in this one): folded although the run is short. A run of 4 lines with
    no code folds; one of 3 (a brace, a blank, a comment) stays."""
    from nvstage.inspect import lineview

    text = ["__device__ float twice(float x) { return 2.0f * x; }",
            "__global__ void other(float* y) { y[0] = 1.0f; }", "",
            "__global__ void user(float* y, const float* x) {", "    float a = x[0];",
            "", "    // three", "", "    float b = twice(a);", "", "", "", "",
            "    y[0] = b;", "}"]
    at = [(4, ()), (5, ()), (1, (("/k.cu", 9),)), (9, ()), (14, ()), (15, ())]
    located = [lineview.Located(16 * n, "IADD3 R1, R1, R1, RZ", "/k.cu",
                                line, inl) for n, (line, inl) in enumerate(at)]
    k = lineview.join("user", located, {}, arch="sm_90", image="k.cubin",
                      source_text=lambda f: text)
    assert [ln.line for ln in k.lines] == [1, 4, 5, 6, 7, 8, 9, 14, 15]
