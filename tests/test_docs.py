"""The manual runs: every command README.md and each page of docs/ show runs, in order, in a
scratch copy of the repository per page, as a reader would type them; where a page shows a
command's output, what it prints matches it. The figures the pages quote are what the code
computes, each test pointed at the page that holds its figure.

Read from each page's fenced blocks:
- a ```bash block: each line is a command (comments and blank lines skipped);
- a plain ``` block whose first line is ``$ COMMAND``: that command, and the lines after it
  are its output as the page shows it;
- a block right after ``<!-- docs-test: skip: REASON -->`` is not run (the reason says why).

"Matches" is measured on words: every word of four letters or more in the page's output
appears in the real output (times, sizes and paths differ from machine to machine; stage
names, column titles, kernel names and verdicts do not). A command ending ``# needs a GPU``
must, on a machine without one, exit 7 with its one line.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_SKIP = re.compile(r"<!--\s*(?:readme|docs)-test:\s*skip:\s*(.+?)\s*-->\s*$")
_WORD = re.compile(r"[A-Za-z]{4,}")
# Lines a reader types that this suite's own environment already is.
_ENVIRONMENT = ("source .venv/bin/activate", "export ")


def page(name: str) -> str:
    """A page's text: "README" or a docs/ page's stem."""
    return (README if name == "README" else DOCS / f"{name}.md").read_text()


def commands(text: str) -> list[dict]:
    """A page's commands in order: {"line", "cmd" (a shell line), "shown", "gpu"}."""
    out = []
    for m in _FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        line_no = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip().splitlines()[-1:] or [""]
        if _SKIP.search(before[0]):
            continue
        lines = body.splitlines()
        if lang == "bash":
            joined, cur = [], ""
            for ln in lines:
                cur += ln.rstrip("\\").rstrip() + " " if ln.endswith("\\") else ln
                if not ln.endswith("\\"):
                    joined.append(cur)
                    cur = ""
            sets = ""  # a block's `NAME=value` lines hold for its later commands
            for ln in joined:
                code = ln.strip()
                if re.match(r"[A-Za-z_]\w*=", code):
                    sets += code + "\n"
                elif code and not code.startswith("#"):
                    out.append({"line": line_no, "cmd": sets + code if sets else code,
                                "shown": None, "gpu": code.endswith("# needs a GPU")})
        elif lang == "" and lines and lines[0].startswith("$ "):
            out.append({"line": line_no, "cmd": lines[0][2:], "shown": "\n".join(lines[1:]),
                        "gpu": False})
        elif lang == "python" and "import nvstage" in body:
            out.append({"line": line_no, "cmd": None, "python": body, "shown": None,
                        "gpu": False})
    return out


def _install_line(cmd: str) -> str:
    """A page's install line makes a fresh venv and then runs one command: the install is
    what `.ci/run` and this suite's own environment already are; run the command ("" for the
    test command itself). `test_readme_on_a_fresh_clone` runs the install itself."""
    part = cmd.split("&&")[-1].strip()
    if "pytest" in part:
        return ""
    return part.replace(".venv/bin/", "", 1)


def _run(cmd: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    # As a reader types it: through bash, with `nvstage` and `python` this checkout's.
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)


def _files() -> list[str]:
    """The repository's files as a fresh clone holds them (and what is new, not ignored)."""
    cp = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                        capture_output=True, check=True)
    return [f for f in cp.stdout.decode().split("\0") if f]


def scratch_copy(dest: Path) -> Path:
    """A copy of the repository to run a page in: never the checkout itself."""
    for name in _files():
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_pages_have_commands():
    cmds = commands(README.read_text())
    assert len(cmds) >= 10
    assert cmds[0]["cmd"].startswith("python3 -m venv"), "the README starts with its install line"
    assert sum(len(commands(p.read_text())) for p in PAGES) >= 40


def _follow(path: Path, work: Path, env: dict, *, fresh: bool = False) -> None:
    """Run a page's commands in order in ``work``, checking what they print against what the
    page shows. ``fresh``: the page's install lines run as written (a fresh venv), and every
    later command runs with that venv activated, as README says to."""
    from nvstage.run.probe import probe

    gpu = probe().available  # doctor's shown output is a machine without one
    # Triton is an extra (README's test command installs `.[test]`): without it, the commands
    # that need it are not run here (.ci/run installs it, and runs them).
    triton = not fresh and importlib.util.find_spec("triton") is not None
    for c in commands(path.read_text()):
        where = f"{path.relative_to(ROOT)} line {c['line']}"
        if not triton and "triton" in (c.get("python") or c["cmd"]):
            continue
        if c.get("python"):
            cp = subprocess.run([sys.executable, "-c", c["python"]], cwd=work, env=env,
                                capture_output=True, text=True, timeout=900)
            assert cp.returncode == 0, f"{where}: the library example failed:\n{cp.stderr[-3000:]}"
            continue
        cmd = c["cmd"]
        if cmd.startswith("python3 -m venv"):
            if not fresh:
                cmd = _install_line(cmd)
            elif "pytest" in cmd:  # the suite itself: its install, and one file of it
                cmd = cmd.replace("python -m pytest -q", "python -m pytest -q tests/test_fsio.py")
        if not cmd or cmd.startswith(_ENVIRONMENT):
            continue  # the test command itself; the reader's venv; a reader's CI servers
        if cmd.startswith(("python bench/", "python3 bench/")):
            continue  # benchmarks: minutes each, run by hand (docs/benchmarks.md)
        if fresh and not cmd.startswith("python3 -m venv"):
            cmd = "source .venv/bin/activate && " + cmd
        cp = _run(cmd, work, env)
        if c["gpu"] and not gpu:
            assert cp.returncode == 7, f"{where}: {c['cmd']} without a GPU should exit 7"
            assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
            continue
        assert cp.returncode == 0, (f"{where}: `{c['cmd']}` exited {cp.returncode}:\n"
                                    f"{cp.stdout[-2000:]}\n{cp.stderr[-3000:]}")
        if c["shown"] and not (gpu and c["cmd"].startswith("nvstage doctor")):
            got = set(_WORD.findall(cp.stdout + cp.stderr))
            missing = sorted(set(_WORD.findall(c["shown"])) - got)
            assert not missing, (f"{where}: `{c['cmd']}` no longer prints what the page "
                                 f"shows: {missing}\n--- printed:\n{cp.stdout}{cp.stderr}")


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES[1:], ids=lambda p: p.name)
def test_every_command_of_a_page_runs_in_order(path, tmp_path):
    """Each docs/ page in a scratch copy of its own, with `nvstage` this checkout's (README
    runs on a fresh clone below)."""
    work = scratch_copy(tmp_path / "reader")
    shim = tmp_path / "bin"
    shim.mkdir()
    # `nvstage` (CMake's launcher too) and `python` on PATH: this checkout, this interpreter.
    for name, target in (("nvstage", f"{sys.executable} {ROOT / 'bin' / 'nvstage'}"),
                         ("python", sys.executable), ("python3", sys.executable)):
        (shim / name).write_text(f"#!/bin/sh\nexec {target} \"$@\"\n")
        (shim / name).chmod(0o755)
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1",
               PATH=os.pathsep.join([str(shim), os.path.dirname(sys.executable),
                                     os.environ.get("PATH", "")]),
               PYTHONPATH=str(ROOT / "src"))
    env.pop("NVSTAGE_REMOTE_CACHE", None)
    _follow(path, work, env)


@pytest.mark.slow
def test_readme_on_a_fresh_clone(tmp_path):
    """README as a newcomer follows it: a fresh copy of the repository, its command 1 as
    written (a fresh venv, `pip install .`), then every later command with that venv
    activated as README says, with no shim and nothing of this suite's environment on PATH;
    command 2's install, and one file of the suite with it."""
    work = scratch_copy(tmp_path / "clone")
    ours = {os.path.dirname(sys.executable), os.environ.get("VIRTUAL_ENV", "") + "/bin"}
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d not in ours]
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "NVSTAGE_REMOTE_CACHE")}
    env.update(PATH=os.pathsep.join(path), COLUMNS="120", NO_COLOR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    _follow(README, work, env, fresh=True)
    assert (work / "vadd").is_file() and (work / "vadd.nvstage" / "stages.json").is_file()


def test_settings_page_lists_every_variable():
    """docs/settings.md names every NVSTAGE_* variable the code reads."""
    read = set()
    for f in (ROOT / "src" / "nvstage").rglob("*.py"):
        read |= set(re.findall(r"[\"'](NVSTAGE_[A-Z0-9_]+)[\"']", f.read_text()))
    listed = set(re.findall(r"`(NVSTAGE_[A-Z0-9_]+)`", page("settings")))
    assert read and not read - listed, f"not on docs/settings.md: {sorted(read - listed)}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_fences_are_whole(path):
    """A fence line is ``` and at most a language word: text after a closing fence makes
    Markdown run the code block on to the end of the page."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            assert re.fullmatch(r"\s*```\w*", line), f"{path.name} line {n}: {line!r}"


def test_every_page_is_in_the_manual():
    """mkdocs.yml's navigation holds every page of docs/, and README links each."""
    nav = (ROOT / "mkdocs.yml").read_text()
    readme = README.read_text()
    for p in PAGES[1:]:
        assert f" {p.name}" in nav, f"{p.name} is not in mkdocs.yml's nav"
        if p.stem != "index":
            assert f"(docs/{p.name})" in readme, f"README does not link docs/{p.name}"


def _exit_table() -> dict[str, str]:
    """The exit-code table of docs/documents.md: code -> meaning."""
    text = page("documents")
    start = text.index("| exit | meaning |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        code, meaning = (c.strip() for c in line.strip("|").split("|", 1))
        rows[code] = meaning
    return rows


def _error_classes():
    import nvstage.errors as errors

    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, errors.NvstageError)]


def test_docs_exit_codes_are_the_codes():
    """The table names every exit status the code can give, and no other: the errors'
    ``exit_code``s, the literal exits of the commands, 0, and 128+N for a signal."""
    import nvstage.errors as errors

    table = _exit_table()
    codes = {c.exit_code for c in _error_classes()}
    src = ROOT / "src" / "nvstage" / "cli"
    for f in src.glob("*.py"):
        codes |= {int(n) for n in re.findall(r"typer\.Exit\((\d+)\)", f.read_text())}
    assert set(table) == {str(c) for c in codes | {0}} | {"128+N"}
    # each code's row names what gives it
    assert "usage" in table[str(errors.UsageError.exit_code)]
    assert "toolkit" in table[str(errors.ToolkitError.exit_code)]
    assert "plan" in table[str(errors.PlanError.exit_code)]
    assert "stage" in table[str(errors.StageFailed.exit_code)]
    assert "NVRTC" in table[str(errors.RuntimeCompileFailed.exit_code)]
    assert "artifact" in table[str(errors.ArtifactError.exit_code)]
    assert "driver" in table[str(errors.NoDriver.exit_code)]
    assert "GPU run" in table[str(errors.GpuRunFailed.exit_code)]
    assert "`run`" in table[str(errors.CheckFailed.exit_code)]
    assert "signal" in table["128+N"]
    assert errors.Terminated(15).exit_code == 128 + 15


def test_docs_exit_codes_of_the_checks(cli, workdir, kernels):
    """The statuses CI scripts rely on, as the commands give them: a broken budget is 1 (not
    the 9 of a run's failed result check), an unknown command 2."""
    table = _exit_table()
    assert "budget" in table["1"] and "budget" not in table["9"]
    assert "`show --gpu`" in table["1"]  # tests/cli/test_show.py: will not run exits 1
    (workdir / "budgets.toml").write_text('[compile]\narchs = ["sm_90"]\n'
                                          "[budgets]\nmax_registers = 1\n")
    r = cli("check", kernels / "vadd.cu", "--config", workdir / "budgets.toml")
    assert r.exit_code == 1, r.output
    from nvstage.cli.check import check_cmd

    assert "Exits 1 when any budget is broken" in check_cmd.__doc__
    assert cli("frobnicate").exit_code == 2 and "unknown command" in table["2"]


# -- the pages' figures from deterministic commands: registers, spills, sizes (never times) --


def _page_flat(name: str) -> str:
    return " ".join(page(name).split())


def _shown(name: str, prefix: str) -> str:
    """The output a page shows for its ``$ COMMAND`` block that starts with ``prefix``."""
    (c,) = [c for c in commands(page(name))
            if c["cmd"] and c["cmd"].startswith(prefix) and c["shown"] is not None]
    return c["shown"]


def _flat(line: str) -> str:
    return " ".join(line.split())


def test_docs_lto_registers_are_what_diff_finds(toolkit, kernels):
    from nvstage.compiler_paths import LTO, NVJITLINK, compare_paths

    m = re.search(r"--lto` reports `lto_apply` at (\d+) registers when NVRTC's PTX is linked "
                  r"by nvJitLink and (\d+) with LTO", _page_flat("compile"))
    assert m, "docs/compile.md's LTO sentence moved: keep this test pointed at it"
    regs = compare_paths([kernels / "lto_a.cu", kernels / "lto_b.cu"], arch="sm_90",
                         toolkit=toolkit, lto=True).registers("lto_apply")
    assert (regs[NVJITLINK], regs[LTO]) == (int(m.group(1)), int(m.group(2)))


def test_docs_fused_wide_figures_are_the_estimates():
    import nvstage

    m = re.search(r"keeps many values live: (\d+) registers and (\d+)% occupancy against the "
                  r"plain fused kernel's (\d+) and (\d+)%", _page_flat("model"))
    assert m, "docs/model.md's chain_fused_wide sentence moved: keep this test pointed at it"
    model = ROOT / "examples" / "model"
    got = []
    for name in ("chain_fused_wide", "chain_fused"):
        facts = nvstage.estimate(model / f"{name}.toml", nvstage.gpu("h200")).launches[0].facts
        got += [facts.registers, round(facts.occupancy * 100)]
    assert got == [int(g) for g in m.groups()]


def test_docs_diff_row_is_what_diff_prints(cli, workdir, kernels):
    block = page("inspect").split("nvstage diff A B` answers", 1)[1]
    builds = [ln for ln in block.split("```bash", 1)[1].split("```", 1)[0].splitlines()
              if ln.startswith("nvstage compile")]
    assert len(builds) == 2
    (workdir / "kernels").mkdir()
    shutil.copy(kernels / "spill.cu", workdir / "kernels")
    import shlex

    for ln in builds:
        r = cli(*shlex.split(ln)[1:])
        assert r.exit_code == 0, r.output
    shown = _shown("inspect", "nvstage diff a.nvstage b.nvstage").splitlines()
    r = cli("diff", "a.nvstage", "b.nvstage")
    assert r.exit_code == 0, r.output
    printed = {_flat(ln) for ln in r.stdout.splitlines()}
    for row in shown[1:]:  # the header wraps with the width; the rows are the figures
        assert _flat(row) in printed, (row, r.stdout)


def test_docs_fatbin_rows_are_what_show_prints(cli, workdir, kernels):
    (workdir / "kernels").mkdir()
    shutil.copy(kernels / "multi.cu", workdir / "kernels")
    r = cli("compile", "kernels/multi.cu", "-c", "--gencode", "arch=compute_80,code=sm_80",
            "--gencode", "arch=compute_90,code=[sm_90,compute_90]", "--keep")  # as docs/inspect.md does
    assert r.exit_code == 0, r.output
    r = cli("show", "multi.nvstage", "--sections", "fatbin", "--gpu", "h200", "--driver", "13.0")
    assert r.exit_code == 0, r.output
    printed = {_flat(ln) for ln in r.stdout.splitlines()}
    shown = _shown("inspect", "nvstage show multi.nvstage --sections fatbin").splitlines()
    for row in shown[1:]:  # image rows (sizes, PTX ISA, kernels) and the verdict
        assert _flat(row) in printed, (row, r.stdout)


def test_docs_nvrtc_sizes_are_what_compile_prints(cli, workdir, kernels):
    (workdir / "kernels").mkdir()
    shutil.copy(kernels / "templates.cu", workdir / "kernels")
    r = cli("compile", "kernels/templates.cu", "--via", "nvrtc", "--arch", "sm_90",
            "--name-expr", "scale<int>")
    assert r.exit_code == 0, r.output
    # The sizes and the names, in order (times differ, and rows wrap with the width).
    size = re.compile(r"\d+(?:\.\d+)? [KMG]iB|\b\d+ B\b")
    shown = _shown("compile", "nvstage compile kernels/templates.cu --via nvrtc")
    assert size.findall(shown) == size.findall(r.output) and size.findall(shown)
    assert "scale<int> _Z5scaleIiEvPT_S0_i" in {_flat(ln) for ln in r.output.splitlines()}


def test_docs_limits_are_the_codes_limits():
    """The bounds docs/documents.md lists are the constants the readers use."""
    from nvstage import files as artifacts, documents
    from nvstage.compiler.buildlog import log as buildlog
    from nvstage.compiler.manifest import model as record
    from nvstage.inspect import fatbin
    from nvstage.run.workload import expr, spec

    text = _page_flat("documents") + " " + _page_flat("launcher")
    mib, gib = 1 << 20, 1 << 30
    for shown in (
            f"{documents.MAX_DOCUMENT_BYTES // mib} MiB per manifest or document "
            "(`MAX_DOCUMENT_BYTES`)",
            f"{artifacts.MAX_ARTIFACT_BYTES // gib} GiB per artifact (`MAX_ARTIFACT_BYTES`)",
            f"{record.MAX_HASHED_BYTES // gib} GiB hashed per manifest, "
            f"{record.MAX_STAGES:,} stages",
            f"at most {expr.MAX_EXPR_CHARS:,} characters, {expr.MAX_EXPR_DEPTH} levels deep "
            f"and integers of {expr.MAX_INT_BITS} bits",
            f"at most {spec.MAX_LAUNCH_ENTRIES:,} launch entries, {spec.MAX_OPERATIONS:,} "
            f"operations per repetition and {spec.MAX_TOTAL_OPERATIONS:,} in all",
            f"unpack at most {fatbin.MAX_UNPACKED:,} images and "
            f"{fatbin.MAX_UNPACKED_BYTES // gib} GiB",
            f"a build log at most {buildlog.MAX_ENTRIES:,} entries of "
            f"{buildlog.MAX_ENTRY_BYTES // mib} MiB, {buildlog.MAX_RECORD_BYTES // mib} MiB "
            f"and {buildlog.MAX_RECORD_WORDS:,} command words in all",
            f"an entry of more than {buildlog.MAX_ENTRY_VALUES:,} JSON values skipped unparsed",
            f"The record keeps the last {buildlog.KEEP_BUILDS} builds whole",
            f"told apart by pauses of {buildlog.GAP_SECONDS:g} s or more"):
        assert shown in text, shown


def test_docs_build_diff_is_what_diff_prints(cli, cuproject_record):
    """docs/launcher.md's `nvstage diff build` (the test project built, its header edited, built again):
    the builds' steps by kind and the kernels' figures are what diff prints of the same two
    builds (the times are one run's)."""
    text = page("launcher")
    block = text[text.index("$ nvstage diff build\n"):]
    block = block[:block.index("```")]
    r = cli("diff", cuproject_record[1])
    assert r.exit_code == 0, r.output
    printed = r.stdout.splitlines()
    for side in ("A", "B"):
        shown = next(x for x in block.splitlines() if x.startswith(f"{side}: "))
        real = next(x for x in printed if x.startswith(f"{side}: "))
        # (The page's build ran under `cmake --build`, the fixture's under ninja.)
        steps = re.compile(r"\(build (\d of \d), \w+\): (\d+ steps \([^)]*\))")
        assert steps.search(shown).groups() == steps.search(real).groups(), (shown, real)
    figures = re.compile(r"^\s*(block_sum)\s+(sm_\d+)\s+(\S+)\s+(changed)\s+(.*?)\s+\d+%")
    shown = [figures.match(x).groups() for x in block.splitlines() if figures.match(x)]
    real = [figures.match(x).groups() for x in printed if figures.match(x)]
    assert len(shown) == 2 and shown == real, (shown, real)
    units = [x.split()[0] for x in block.splitlines() if x.startswith(" CMakeFiles")]
    assert units and all(u in r.stdout for u in units)


def test_docs_view_figures_are_what_report_writes(cli, workdir, kernels):
    """The source and SASS view's figures for fused_wide and fused, as `nvstage report`
    writes them into the page."""
    import html

    m = re.search(r"fused_wide's view reads `(\d+) instructions · peak (\d+) live registers at "
                  r"line (\d+)` \(`(.+?)`.*?against fused's `(\d+) instructions · peak (\d+) "
                  r"live registers at line (\d+)`", _page_flat("check"))
    assert m, "docs/check.md's view sentence moved: keep this test pointed at it"
    shutil.copy(kernels / "fusion_chain.cu", workdir / "fusion_chain.cu")
    r = cli("compile", "fusion_chain.cu", "--arch", "sm_90", "-lineinfo", "--cubin", "-o",
            "fc.cubin", "--keep-dir", "fc.nvstage")
    assert r.exit_code == 0, r.output
    r = cli("report", "fc.nvstage", "-o", "fc.html")
    assert r.exit_code == 0, r.output
    page = (workdir / "fc.html").read_text()
    facts = {html.unescape(name): html.unescape(f) for name, f in re.findall(
        r'<span class="kv-name">([^<]*)</span> <span class="kv-facts">([^<]*)</span>', page)}
    wide = facts["fused_wide(float const*, float const*, float*, float, int)"]
    fused = facts["fused(float const*, float const*, float*, float, int)"]
    assert f"{m.group(1)} instructions · peak {m.group(2)} live registers at line " \
        f"{m.group(3)}" in wide
    assert f"{m.group(5)} instructions · peak {m.group(6)} live registers at line " \
        f"{m.group(7)}" in fused
    source = (kernels / "fusion_chain.cu").read_text().splitlines()
    assert source[int(m.group(3)) - 1].strip() == m.group(4)


# -- the Triton section's figures: the chain's kept Triton builds beside its nvcc build ----


@pytest.fixture(scope="module")
def chain_nvcc_sm90(toolkit, kernels, tmp_path_factory):
    """kernels/fusion_chain.cu as docs/triton.md builds it (--cubin -arch=sm_90), kept."""
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    root = tmp_path_factory.mktemp("readme-chain")
    nvstage.compile(kernels / "fusion_chain.cu", CompileOptions(
        archs=("sm_90",), stop="cubin", output=str(root / "chain.cubin")), toolkit=toolkit,
        keep=root / "chain.nvstage", cwd=root)
    return root / "chain.nvstage"


def test_docs_triton_chain_table_is_what_diff_finds(chain_nvcc_sm90, triton_chain, toolkit):
    from nvstage.compiler.manifest.model import load_build
    from nvstage.inspect.build_diff import diff_builds

    rows = re.findall(r"^\| (\w+) \| (\d+) -> (\d+) \| (\d+) -> (\d+) \| (\d+) -> ([\d.]+) \| "
                      r"(\d+)% -> (\d+)% \|$", page("triton"), re.M)
    assert [r[0] for r in rows] == ["scale", "add_bias", "gelu_act", "fused"], \
        "docs/triton.md's Triton chain table moved: keep this test pointed at it"
    for kernel, *shown in rows:
        d = diff_builds(chain_nvcc_sm90, triton_chain[kernel], toolkit, block=256)
        (row,) = [r for r in d.kernels if r.a and r.b]
        build = load_build(triton_chain[kernel])
        per_thread = dict(build.triton.constexprs)["BLOCK"] // build.triton.threads
        got = [row.a["registers"], row.b["registers"], row.a["instructions"],
               row.b["instructions"], row.a["instructions"],
               f"{row.b['instructions'] / per_thread:.1f}", round(row.a["occupancy"]),
               round(row.b["occupancy"])]
        assert [str(g) for g in got] == shown, kernel
        assert (row.a["spill_stores"], row.b["spill_stores"]) == (0, 0)


def test_docs_triton_diff_row_is_what_diff_prints(cli, chain_nvcc_sm90, triton_chain):
    shown = _shown("triton", "nvstage diff chain.nvstage examples/triton/build/fused.triton").splitlines()
    r = cli("diff", chain_nvcc_sm90, triton_chain["fused"], "--block", "256")
    assert r.exit_code == 0, r.output
    printed = {_flat(ln) for ln in r.stdout.splitlines()}
    for row in shown[1:]:
        assert _flat(row) in printed, (row, r.stdout)


def _frozen_errors() -> str:
    """What ``python examples/model/errors.py --frozen ...`` prints, as docs/model.md shows it."""
    cp = subprocess.run([sys.executable, str(ROOT / "examples" / "model" / "errors.py"),
                         "--frozen", "tests/data/measured/h200-2026-11-30.json"], cwd=ROOT,
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def test_docs_error_per_term_is_what_errors_py_prints():
    text = page("model")
    after = text.split("python examples/model/errors.py --frozen", 1)[1]
    shown = _FENCE.search(after).group(2)
    printed = _frozen_errors()
    assert [_flat(ln) for ln in shown.splitlines()] == [_flat(ln) for ln in
                                                         printed.splitlines()]
    rows = [ln.split() for ln in printed.splitlines()[1:]]
    kern = {(r[0], r[1]): float(r[3].rstrip("%")) for r in rows}
    default = max(abs(v) for (_, p), v in kern.items() if p == "default")
    fitted = max(abs(v) for (n, p), v in kern.items() if p != "default"
                 and n != "chain_unfused")
    launch = sorted(-float(r[2].rstrip("%")) for r in rows if r[1] == "default")
    m = re.search(r"The kernel term is within (\d+)% with the default presets and within "
                  r"(\d+)% of the five others fitted on chain_unfused; .* The launch term is "
                  r"(\d+) to (\d+)% low: the launch cost preset is the launch benchmark's "
                  r"([\d.]+) us, and `run --profile` measured ([\d.]+) to ([\d.]+) us per "
                  r"launch", _page_flat("model"))
    assert m, "docs/model.md's sentence on the error per term moved: keep this test pointed at it"
    import json
    import math

    from nvstage.model.presets import DEFAULT_PRESETS

    assert (int(m.group(1)), int(m.group(2))) == (math.ceil(default), math.ceil(fitted))
    assert (int(m.group(3)), int(m.group(4))) == (math.floor(launch[0]), math.floor(launch[-1]))
    assert float(m.group(5)) == round(DEFAULT_PRESETS.launch_cost_s * 1e6, 1)
    frozen = json.loads((ROOT / "tests/data/measured/h200-2026-11-30.json").read_text())
    per = [w["measured_us"]["launch"] / sum(k["repeat"] for k in w["kernels"])
           for w in frozen["workloads"].values()]
    assert (float(m.group(6)), float(m.group(7))) == (round(min(per), 1), round(max(per), 1))


def test_docs_fused_wide_comparison_is_what_compare_finds(toolkit):
    from nvstage.hw.gpus import GPUS
    from nvstage.model.compare import compare

    m = re.search(r"finds it faster \(([\d.]+) against ([\d.]+) us of kernel time, both "
                  r"limited by (DRAM bandwidth), the latency part ([\d.]+) against ([\d.]+) "
                  r"us\)", _page_flat("model"))
    assert m, "docs/model.md's chain_fused_wide comparison moved: keep this test pointed at it"
    model = ROOT / "examples" / "model"
    c = compare(model / "chain_fused.toml", model / "chain_fused_wide.toml", GPUS["h200"],
                toolkit=toolkit)
    a, b = c.a.launches[0], c.b.launches[0]
    assert c.device_verdict.word == "faster"
    # the first verdict, on T, is the one the page says calls them the same
    assert c.verdict.word == "same" and "calls the two the same on the whole time T" in \
        _page_flat("model")
    assert [float(g) for g in m.group(1, 2, 4, 5)] == [
        round(b.t_kernel_s * 1e6, 1), round(a.t_kernel_s * 1e6, 1),
        round(b.bounds.time("memory latency") * 1e6, 1),
        round(a.bounds.time("memory latency") * 1e6, 1)]
    assert a.limiter == b.limiter == m.group(3)


def test_docs_memory_rule_figures_are_the_tests():
    """The bandwidth preset and the published-stream check docs/model.md quotes."""
    import importlib.util
    import math

    from nvstage.model.presets import DEFAULT_PRESETS

    flat = _page_flat("model")
    m = re.search(r"the H200's published stream plateau, ([\d.]+) of ([\d.]+) TB/s", flat)
    assert m and float(m.group(1)) == round(4.8 * DEFAULT_PRESETS.dram_efficiency, 1)
    m = re.search(r"the published H200 streams follow the sum within (\d+)% from a quarter of "
                  r"the warps up, the larger of the two off by up to \+(\d+)%", flat)
    assert m, "docs/model.md's memory-rule sentence moved: keep this test pointed at it"
    spec = importlib.util.spec_from_file_location("bounds_tests",
                                                  ROOT / "tests/model/test_bounds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    worst_sum = worst_max = 0.0
    for block, measured in mod._published():
        for kernel, rate in measured.items():
            if block < 256 or kernel == "init":
                continue
            worst_sum = max(worst_sum, abs(mod._stream_rate(kernel, block, lambda d, t: d + t)
                                           / rate - 1))
            worst_max = max(worst_max, abs(mod._stream_rate(kernel, block, max) / rate - 1))
    assert worst_sum < int(m.group(1)) / 100
    assert int(m.group(2)) == math.floor(worst_max * 100)


def test_docs_architecture_floors_are_what_the_script_prints():
    shown = _shown("architecture", "python scripts/import_graph.py").splitlines()
    real = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_graph.py")],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert shown == real[:len(shown)] and shown[0].endswith("0 circles")
