"""Tables never lose data (report/terminal/table.py): every table the commands print, drawn at
200 columns, at 80, at 60 and into a pipe (no $COLUMNS), shows each of its values whole on
one line, as a table where it fits and as stacked records where it does not, with no line
ending in blanks; what the 200-column table shows is all there at the other widths."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from nvstage.report.terminal import table as table_module
from nvstage.report.terminal.console import stdout, text_console
from nvstage.report.terminal.table import PlainTable, plain_table

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WIDTHS = ("200", "80", "60", None)  # None: a pipe, $COLUMNS unset


@pytest.fixture(scope="module")
def builds(toolkit, kernels, tmp_path_factory):
    """Kept builds to show, diff and check: spill.cu as it is and with -maxrregcount=16 (two
    builds that differ, line by line too), multi.cu for sm_80 and sm_90 with PTX (an object
    with several images), and the fusion chain by nvcc (to diff against Triton's fused
    kernel)."""
    import shutil

    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    root = tmp_path_factory.mktemp("tables")
    for k in ("spill.cu", "multi.cu", "fusion_chain.cu"):
        shutil.copy(kernels / k, root)
    cubin = dict(archs=("sm_90",), stop="cubin", resource_usage=True)
    for name, options in (
            ("spill", CompileOptions(**cubin, lineinfo=True, output="spill.cubin")),
            ("spill16", CompileOptions(**cubin, lineinfo=True, maxrregcount=16,
                                       output="spill16.cubin")),
            ("multi", CompileOptions(gencodes=("arch=compute_80,code=sm_80",
                                               "arch=compute_90,code=[sm_90,compute_90]"),
                                     compile_only=True, output="multi.o")),
            ("chain", CompileOptions(**cubin, output="chain.cubin"))):
        source = "fusion_chain.cu" if name == "chain" else name.removesuffix("16") + ".cu"
        nvstage.compile(source, options, toolkit=toolkit, keep=f"{name}.nvstage", cwd=root)
    return root


@pytest.fixture(scope="module")
def fused_triton(builds, toolkit, triton_kit):
    """The chain's fused kernel by Triton, kept (skipped where Triton is not installed)."""
    from nvstage.compiler.triton.stages import compile_triton

    keep = builds / "fused.triton"
    compile_triton(triton_kit.CHAIN, triton_kit.chain_options("fused"), toolkit=toolkit,
                   keep=keep)
    return keep


def _commands(root: Path, kernels: Path) -> dict[str, list]:
    model = EXAMPLES / "model"
    return {
        "compile": ["compile", kernels / "vadd.cu", "--arch", "sm_90", "-o", "vadd"],
        "show": ["show", root / "multi.nvstage"],
        "diff": ["diff", root / "spill.nvstage", root / "spill16.nvstage"],
        "diff-lines": ["diff", root / "spill.nvstage", root / "spill16.nvstage", "--kernel",
                       "spill", "--lineinfo"],
        "diff-compilers": ["diff", root / "chain.nvstage", root / "fused.triton", "--block",
                           "256"],
        "diff-via": ["diff", kernels / "saxpy.cu", "--via", "nvcc,nvrtc", "--arch", "sm_90"],
        "compare": ["compare", model / "chain_unfused.toml", model / "chain_fused.toml",
                    "--gpu", "h200"],
        "model": ["model", model / "chain_unfused.toml", "--gpu", "h200"],
        "occupancy": ["occupancy", root / "multi.o", "--block", "256", "--gpu", "h200"],
        "occupancy-sweep": ["occupancy", root / "spill.cubin", "--sweep", "--gpu", "a100"],
        "check": ["check", root / "multi.nvstage", "--config", EXAMPLES / "budgets.toml"],
        "cache": ["cache"],
        "doctor": ["doctor"],
    }


# A duration differs from one run to the next (and a stage may come from the cache or not).
_TIME = re.compile(r"^[+-]?[\d.]+ (s|ms|us|ns)( \(cached\))?$|^\(cached\)$")


def _made(monkeypatch) -> list[PlainTable]:
    """Every table the command makes, in order."""
    made: list[PlainTable] = []
    add_row = PlainTable.add_row

    def recording(self, *cells, **kw):
        if not any(t is self for t in made):
            made.append(self)
        add_row(self, *cells, **kw)

    monkeypatch.setattr(table_module.PlainTable, "add_row", recording)
    return made


def _drawn(made: list[PlainTable]) -> list[PlainTable]:
    """The tables printed (not a narrower layout kept for a narrow console)."""
    spare = {id(n) for t in made for n in t.narrower}
    return [t for t in made if id(t) not in spare]


def _values(t: PlainTable) -> list[tuple[str, bool]]:
    """(each line of each cell, whether it is prose), blanks left out."""
    out = []
    for i, column in enumerate(t.columns):
        for cell in column._cells:
            out += [(line.strip(), i in t.prose) for line in cell.plain.split("\n")
                    if line.strip()]
    return out


def _whole_in(value: str, lines: list[str]) -> bool:
    """``value`` on one line, with nothing but a blank, a line's end or a comma (a list of
    files, one a line) on either side: not cut, not joined to its neighbour."""
    pattern = re.compile(r"(?:^|\s)" + re.escape(value) + r",?(?:\s|$)")
    return any(pattern.search(line) for line in lines)


def _missing(t: PlainTable, lines: list[str]) -> list[str]:
    """What of ``t`` is not whole in ``lines``: values, prose words, column headers (in
    stacked records those that label a value: a record is headed by its key's values, and a
    blank cell is left out)."""
    missing = []
    for value, prose in _values(t):
        missing += [w for w in (value.split() if prose else [value]) if not _whole_in(w, lines)]
    stacked = any(ln.startswith("  ") and ": " in ln for ln in lines)
    columns = [c for c in t.columns[t.key:] if any(x.plain.strip() for x in c._cells)] \
        if stacked else t.columns
    return missing + [w for c in columns for w in c.header.plain.split()
                      if not (_whole_in(w, lines) or _whole_in(w + ":", lines))]


def _atoms(t: PlainTable) -> set[str]:
    """The parts of each value (a list of files splits at its commas and arrows): what a
    narrower layout of the same table still shows, however it breaks its lists."""
    atoms = set()
    for value, prose in _values(t):
        if _TIME.match(value):
            continue
        for part in re.split(r",\s+|\s*->\s*|,$", value) if not prose else value.split():
            if part.strip(" ,"):
                atoms.add(part.strip(" ,"))
    return atoms


@pytest.mark.parametrize("name", ["compile", "show", "diff", "diff-lines", "diff-compilers",
                                  "diff-via", "compare", "model", "occupancy", "occupancy-sweep",
                                  "check", "cache", "doctor"])
def test_every_value_whole_at_every_width(name, cli, builds, kernels, workdir, monkeypatch,
                                          request):
    if name == "diff-compilers":
        request.getfixturevalue("fused_triton")  # skips where Triton is not installed
    argv = _commands(builds, kernels)[name]
    wide: set[str] = set()
    for width in WIDTHS:
        if width is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", width)
        made = _made(monkeypatch)
        r = cli(*argv)
        assert r.exit_code == 0, r.output
        where = f"{name} at {width or 'a pipe'}"
        lines = r.stdout.splitlines()
        assert not [ln for ln in r.output.splitlines() if ln != ln.rstrip()], where
        tables = _drawn(made)
        assert tables or name == "cache", f"{where}: no table drawn"  # cache: lines alone
        for t in tables:
            missing = min((_missing(v, lines) for v in (t, *t.narrower)), key=len)
            assert not missing, f"{where}: {missing[:10]} not whole:\n{r.stdout}"
        atoms = set().union(*(_atoms(t) for t in tables)) if tables else set()
        if width == "200":
            wide = atoms
        else:
            lost = sorted(a for a in wide if a not in r.stdout)
            assert not lost, f"{where}: the 200-column values {lost[:10]} are gone"
        if width in ("80", "60"):
            # Wider than the console only a stacked record's value, left whole for the
            # terminal to fold: never a table's row (columns apart by three blanks).
            long = [ln for ln in lines if len(ln) > int(width) and "   " in ln.strip()]
            assert not long, f"{where}: table rows wider than the console: {long[:3]}"


# --- the mechanism itself, on small tables


def _render(t, width: int) -> str:
    """``t`` as nvstage prints it into a pipe of ``width`` columns."""
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", str(width))
        mp.setenv("NO_COLOR", "1")
        text_console(buf).print(t)
    return buf.getvalue()


def _table(**kw) -> PlainTable:
    t = plain_table(pad_edge=False, **kw)
    for col in ("kernel", "arch", "regs"):
        t.add_column(col)
    t.add_row("void scale<float>(float*, float, int)", "sm_90", "8")
    t.add_row("", "sm_80", "10")  # grouped: the kernel of the row above
    return t


def test_a_table_that_fits_is_a_table():
    text = _render(_table(), 60)
    assert text.splitlines()[1].split() == ["kernel", "arch", "regs"]
    assert " void scale<float>(float*, float, int)   sm_90   8" in text.splitlines()


def test_too_wide_it_is_stacked_records_named_by_their_key():
    text = _render(_table(title="kernels"), 30)
    assert text.splitlines() == [
        "kernels", "",
        "void scale<float>(float*, float, int)", "  arch: sm_90", "  regs: 8",
        "void scale<float>(float*, float, int)", "  arch: sm_80", "  regs: 10", ""]
    text = _render(_table(key=2), 30)
    assert "void scale<float>(float*, float, int)  sm_80" in text.splitlines()


def test_headers_wrap_between_words_before_a_table_is_stacked():
    t = plain_table(pad_edge=False)
    for col in ("kernel", "spill bytes", "static shared"):
        t.add_column(col, justify="right")
    t.add_row("histogram", "0", "1024")
    lines = _render(t, 30).splitlines()
    assert lines[1].split() == ["spill", "static"] and lines[2].split() == [
        "kernel", "bytes", "shared"]
    assert lines[4].split() == ["histogram", "0", "1024"]


def test_prose_wraps_between_words_values_never():
    t = plain_table(pad_edge=False)
    t.add_column("bound")
    t.add_column("how", prose=True)
    t.add_row("DRAM bandwidth", "134.2 MB over 3.90 TB/s achievable, measured on an H200")
    lines = _render(t, 40).splitlines()
    assert lines[3].startswith(" DRAM bandwidth   134.2") and len(max(lines, key=len)) <= 40
    how = " ".join(ln[len(" DRAM bandwidth"):].strip() for ln in lines[3:] if ln.strip())
    assert how == "134.2 MB over 3.90 TB/s achievable, measured on an H200"


def test_stacked_prose_wraps_under_its_label():
    t = plain_table(pad_edge=False, caption="a caption of several words, wider than the "
                                            "console")
    t.add_column("bound")
    t.add_column("how", prose=True)
    t.add_row("memory latency " + "x" * 30, "1 load in flight per warp x 64 warps per SM x "
              "128 B = 8.0 KiB per SM against 10.8 KiB")
    assert _render(t, 30).splitlines() == [
        "memory latency xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "  how: 1 load in flight per",
        "       warp x 64 warps per SM",
        "       x 128 B = 8.0 KiB per",
        "       SM against 10.8 KiB",
        "",
        "a caption of several words,",
        "wider than the console"]


def test_a_value_longer_than_the_console_is_left_whole():
    t = plain_table(pad_edge=False)
    t.add_column("tool")
    t.add_column("path")
    path = "/opt/" + "x" * 70 + "/bin/nvcc"
    t.add_row("nvcc", path)
    assert f"  path: {path}" in _render(t, 40).splitlines()


def test_no_trailing_blanks_and_pipes_unlimited(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()
    monkeypatch.setattr("sys.stdout", buf)
    con = stdout()
    assert con.width > 1000  # a pipe: no limit, a row a line
    t = plain_table(title="a title wider than its table", pad_edge=False)
    t.add_column("k")
    t.add_column("v", justify="right")
    t.add_row("a", "1")
    t.add_row("bbbbbbbbbbbbbbbbbbbb", "22")
    con.print(t)
    con.print("a sentence ")
    lines = buf.getvalue().splitlines()
    assert lines and all(ln == ln.rstrip() for ln in lines)
    assert " bbbbbbbbbbbbbbbbbbbb   22" in lines
    monkeypatch.setenv("COLUMNS", "100")
    assert stdout().width == 100  # $COLUMNS still holds in a pipe
