"""The hostile-input hunt after issue 12 (/tmp/hunt/FINDINGS.md), end to end through the CLI
with the findings' own inputs: writers that renamed over devices (2), keep folders whose links
were followed (3, 4), names that are not UTF-8 (5), -o naming the source (14), names too long
(15), partial keep folders read as whole (17), a failed check pointing at a deleted folder
(18), an empty --keep-dir (22) and a FIFO as the source (23). Real toolkit, nothing mocked."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "model"
LONG = "a" * 300  # one name component past the file system's 255 bytes
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def _one_line_error(r) -> str:
    """The error of a failed command: one line (and a hint), never a traceback."""
    assert r.exit_code != 0, r.output
    assert "Traceback" not in r.output, r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _char_device(path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


@pytest.fixture
def private_null(tmp_path):
    """A device node like /dev/null, of our own: a mistake cannot harm the machine's."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")

    def make(name: str) -> Path:
        p = tmp_path / "dev" / name
        p.parent.mkdir(exist_ok=True)
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        return p

    return make


# --- 2: writers never rename over what is not a regular file -------------------------------

def test_report_into_a_device_leaves_the_device(cli, built, private_null):
    root, _ = built
    null = private_null("null1")
    r = cli("report", root / "vadd.keep", "-o", null)
    assert r.exit_code == 0, r.output
    assert _char_device(null)


def test_report_to_dev_null_and_to_a_descriptor_link(cli, built, tmp_path):
    root, _ = built
    r = cli("report", root / "vadd.keep", "-o", "/dev/null")
    assert r.exit_code == 0, r.output
    assert _char_device("/dev/null")
    # The finding's stdout1 -> /proc/self/fd/1, with a descriptor of our own for fd 1.
    out = tmp_path / "captured.html"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        link = tmp_path / "stdout1"
        link.symlink_to(f"/proc/self/fd/{fd}")
        r = cli("report", root / "vadd.keep", "-o", link)
        assert r.exit_code == 0, r.output
        assert link.is_symlink()
    finally:
        os.close(fd)
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_svg_writers_leave_a_device(cli, private_null):
    null = private_null("null3")
    r = cli("model", MODEL / "chain_fused.toml", "--gpu", "h200", "--svg", null)
    assert r.exit_code == 0, r.output
    assert _char_device(null)
    r = cli("compare", MODEL / "chain_fused.toml", MODEL / "chain_fused_wide.toml", "--gpu",
            "h200", "--svg", null)
    assert r.exit_code == 0, r.output
    assert _char_device(null)


def test_write_baseline_into_a_device_and_a_fifo(cli, built, private_null, tmp_path):
    root, _ = built
    cfg = tmp_path / "budgets.toml"
    cfg.write_text("[budgets]\nmax_registers = 1\n")  # a violation: written anyway
    null = private_null("null4")
    r = cli("check", root / "vadd.keep", "--config", cfg, "--write-baseline", null)
    assert r.exit_code == 1, r.output
    assert _char_device(null)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    r = cli("check", root / "vadd.keep", "--config", cfg, "--write-baseline", fifo)
    assert "nothing reads" in _one_line_error(r)
    r = cli("check", root / "vadd.keep", "--config", cfg, "--summary", fifo)
    assert "nothing reads" in _one_line_error(r)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_report_to_proc_says_why_not_none(cli, built):
    root, _ = built
    line = _one_line_error(cli("report", root / "vadd.keep", "-o", "/proc/self/x"))
    assert "cannot write" in line and "None" not in line


# --- 3 and 4: a keep folder's links are never followed ---------------------------------------

def test_links_planted_in_a_keep_folder_are_removed_not_written_through(cli, workdir, kernels):
    victim = workdir / "victim"
    victim.mkdir()
    (victim / "bashrc").write_text("precious\n")
    (victim / "b2").write_text("precious2\n")
    keep = workdir / "k1.nvstage"
    keep.mkdir()
    (keep / "vadd.ptx").symlink_to(victim / "bashrc")
    (keep / "vadd.cpp4.ii").symlink_to(victim / "b2")
    (keep / "stages.json").symlink_to(victim / "bashrc")
    os.mkfifo(keep / "vadd.cpp1.ii")  # a tool opening it for writing would block
    shutil.copy(kernels / "vadd.cu", workdir)
    r = cli("compile", "vadd.cu", "--arch", "sm_90", "-o", "k1out", "--keep-dir",
            "k1.nvstage", "--no-cache")
    assert r.exit_code == 0, r.output
    assert (victim / "bashrc").read_text() == "precious\n"
    assert (victim / "b2").read_text() == "precious2\n"
    for name in ("vadd.ptx", "vadd.cpp4.ii", "vadd.cpp1.ii", "stages.json"):
        st = os.lstat(keep / name)
        assert stat.S_ISREG(st.st_mode), name
    assert "removed" in r.stderr and "vadd.ptx" in r.stderr
    assert json.loads((keep / "stages.json").read_text())["status"] == "ok"


def test_links_planted_in_a_keep_folder_with_the_cache_on(cli, workdir, kernels):
    victim = workdir / "bashrc"
    victim.write_text("precious\n")
    (workdir / "k2").mkdir()
    (workdir / "k2" / "vadd.ptx").symlink_to(victim)
    shutil.copy(kernels / "vadd.cu", workdir)
    for _ in range(2):  # a miss, then a hit: the same result both ways
        r = cli("compile", "vadd.cu", "--arch", "sm_90", "-c", "--keep-dir", "k2")
        assert r.exit_code == 0, r.output
        assert victim.read_text() == "precious\n"
        assert not (workdir / "k2" / "vadd.ptx").is_symlink()
        (workdir / "k2" / "vadd.ptx").unlink()
        (workdir / "k2" / "vadd.ptx").symlink_to(victim)


def test_report_into_a_keep_folder_replaces_a_planted_link(cli, built, workdir):
    root, _ = built
    keep = workdir / "k"
    shutil.copytree(root / "vadd.keep", keep)
    victim = workdir / "bashrc"
    victim.write_text("precious\n")
    (keep / "report.html").symlink_to(victim)
    r = cli("report", keep)
    assert r.exit_code == 0, r.output
    assert victim.read_text() == "precious\n"
    assert not (keep / "report.html").is_symlink()
    (keep / "report.html").unlink()
    (keep / "report.html").symlink_to("/dev/null")  # not the user's -o: no device either
    r = cli("report", keep)
    assert r.exit_code == 0 and not (keep / "report.html").is_symlink(), r.output


def test_a_keep_folder_that_is_a_link_is_refused(cli, workdir, kernels):
    victim = workdir / "victimdir"
    victim.mkdir()
    (victim / "keepme").write_text("mine")
    (workdir / "vadd.nvstage").symlink_to(victim)
    shutil.copy(kernels / "vadd.cu", workdir)
    r = cli("compile", "vadd.cu", "--arch", "sm_90", "-o", "vadd", "--keep")
    line = _one_line_error(r)
    assert "vadd.nvstage is a symbolic link" in line and r.exit_code == 2
    assert sorted(p.name for p in victim.iterdir()) == ["keepme"]
    assert not (workdir / "vadd").exists()


def test_the_users_own_output_outside_the_folder_keeps_nvcc_semantics(cli, workdir, kernels):
    # -o through a link of the user's own, outside the keep folder: written as nvcc writes
    # it (the link's target gets the object), not removed.
    shutil.copy(kernels / "vadd.cu", workdir)
    (workdir / "real.o").write_bytes(b"")
    (workdir / "out.o").symlink_to(workdir / "real.o")
    r = cli("compile", "vadd.cu", "--arch", "sm_90", "-c", "-o", "out.o", "--keep-dir", "k3")
    assert r.exit_code == 0, r.output
    assert (workdir / "out.o").is_symlink()
    assert (workdir / "real.o").read_bytes()[:4] == b"\x7fELF"


# --- 22, 23, 14: what compile is given ---------------------------------------------------------

def test_an_empty_keep_dir_is_an_error(cli, workdir, kernels):
    shutil.copy(kernels / "vadd.cu", workdir)
    line = _one_line_error(cli("compile", "vadd.cu", "--arch", "sm_90", "-c", "--keep-dir", ""))
    assert "keep folder's name is empty" in line
    assert sorted(p.name for p in workdir.iterdir()) == ["vadd.cu"]


def test_a_fifo_or_a_device_as_the_source_says_what_it_is(cli, workdir):
    os.mkfifo(workdir / "f.cu")
    line = _one_line_error(cli("compile", "f.cu", "--arch", "sm_90"))
    assert "f.cu is a FIFO (named pipe), not a regular file" in line
    line = _one_line_error(cli("compile", "/dev/zero", "--arch", "sm_90"))
    assert "/dev/zero is a character device" in line
    line = _one_line_error(cli("compile", "f.cu", "--arch", "sm_90", "--via", "nvrtc"))
    assert "FIFO" in line


@pytest.mark.parametrize("args", [["-c"], []])
def test_output_naming_the_source_is_refused_before_anything_runs(cli, workdir, kernels, args):
    src = workdir / "c.cu"
    shutil.copy(kernels / "vadd.cu", src)
    before = src.read_bytes()
    line = _one_line_error(cli("compile", "c.cu", "--arch", "sm_90", *args, "-o", "c.cu"))
    assert "would write c.cu over its own input" in line
    assert src.read_bytes() == before
    os.link(src, workdir / "hard.cu")  # the same file by another name
    line = _one_line_error(cli("compile", "c.cu", "--arch", "sm_90", *args, "-o", "hard.cu"))
    assert "over its own input (c.cu)" in line
    assert src.read_bytes() == before


def test_output_naming_the_source_through_nvrtc(cli, workdir, kernels):
    src = workdir / "c.cu"
    shutil.copy(kernels / "vadd.cu", src)
    before = src.read_bytes()
    line = _one_line_error(cli("compile", "c.cu", "--arch", "sm_90", "--cubin", "-o", "c.cu",
                               "--via", "nvrtc"))
    assert "is the source" in line and src.read_bytes() == before


# --- 5: names that are not UTF-8 ------------------------------------------------------------

PROGRAM = ('#include <cstdio>\n__global__ void k(){}\n'
           'int main(){printf("I am %%s\\n", "%s");}\n')


def test_a_name_that_is_not_utf8_builds_that_file_not_another(workdir):
    named, other = b"\xff\xfe.cu", "\ufffd\ufffd.cu".encode()
    (workdir / os.fsdecode(named)).write_text(PROGRAM % "the file you named")
    (workdir / os.fsdecode(other)).write_text(PROGRAM % "A DIFFERENT FILE")
    env = dict(os.environ, NO_COLOR="1", LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict")
    cp = subprocess.run([os.fsencode(sys.executable), b"-m", b"nvstage", b"compile", named,
                         b"--arch", b"sm_90", b"-o", b"prog"], cwd=workdir, env=env,
                        capture_output=True, timeout=300)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert b"Traceback" not in cp.stderr
    assert b"\xff\xfe.cu" in cp.stdout  # the table names the file as its bytes
    run = subprocess.run([str(workdir / "prog")], capture_output=True, text=True)
    assert "I am the file you named" in run.stdout + run.stderr or \
        "no CUDA device" in run.stdout + run.stderr  # main() prints before any CUDA call
    assert "A DIFFERENT FILE" not in run.stdout


def test_a_name_that_is_not_utf8_keeps_its_plan_and_manifest(cli, workdir):
    name = os.fsdecode(b"\xff\xfe.cu")
    (workdir / name).write_text(PROGRAM % "x")
    r = cli("compile", name, "--arch", "sm_90", "-c", "--keep-dir", "k", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["stages"][0]["inputs"] == [name]  # the same str: the same bytes on disk
    assert os.path.isfile(os.path.join(workdir, os.fsdecode(b"\xff\xfe.o")))
    # Every reader of that keep folder takes the names as they are.
    for args in (("show", "k", "--sections", "resources"), ("diff", "k", "k"),
                 ("report", "k", "-o", "r.html")):
        r = cli(*args)
        assert r.exit_code == 0, r.output
    assert b"\xff\xfe.cu" in (workdir / "r.html").read_bytes()


# --- 15: a name too long is one line, from the user or from a document -----------------------

@pytest.mark.parametrize("args", [
    ["show", LONG], ["diff", LONG, LONG], ["occupancy", LONG, "--block", "128"],
    ["compile", LONG + ".cu"], ["run", LONG + ".toml", "--dry-run"], ["report", LONG],
    ["check", "--config", LONG], ["model", LONG + ".toml", "--gpu", "h200"],
    ["model", str(MODEL / "chain_fused.toml"), "--gpu", "h200", "--cost", LONG],
    ["check", LONG + ".json", "--config", str(ROOT / "examples" / "budgets.toml")],
    ["model", str(MODEL / "chain_fused.toml"), "--gpu", LONG],  # names a spec file or not
    ["occupancy", "--registers", "32", "--block", "128", "--gpu", LONG],
])
def test_a_name_too_long_is_one_line(cli, workdir, args):
    line = _one_line_error(cli(*args))
    assert "File name too long" in line
    assert len(line) < 500  # the name is shortened in the message


def test_compile_output_too_long_is_one_line(cli, workdir, kernels):
    shutil.copy(kernels / "vadd.cu", workdir)
    line = _one_line_error(cli("compile", "vadd.cu", "--arch", "sm_90", "-o", LONG))
    assert "File name too long" in line


def _workload(folder: Path, kernels: Path, *, source="saxpy.cu", init="{ range = { start = 0.0, "
              "step = 1.0 } }", extra="") -> Path:
    shutil.copy(kernels / "saxpy.cu", folder)
    w = folder / "w.toml"
    w.write_text(f"""[kernel]
source = "{source}"
[params]
n = "1 << 10"
a = 2.5
[buffers.x]
dtype = "float32"
count = "n"
init = {init}
[buffers.y]
dtype = "float32"
count = "n"
[transfer]
to_device = ["x", "y"]
from_device = ["y"]
[[launch]]
kernel = "saxpy"
grid = "cdiv(n, 256)"
block = 256
args = [{{ i32 = "n" }}, {{ f32 = "a" }}, "x", "y"]
{extra}""")
    return w


def test_names_too_long_inside_documents_are_one_line(cli, workdir, kernels):
    w = _workload(workdir, kernels, source=LONG + ".cu")
    line = _one_line_error(cli("run", w, "--dry-run"))
    assert "[kernel] source" in line and "File name too long" in line
    w = _workload(workdir, kernels, init=f'{{ npy = "{LONG}.npy" }}')
    line = _one_line_error(cli("run", w, "--dry-run"))
    assert "init.npy" in line and "File name too long" in line
    (workdir / "pyproject.toml").write_text(f'[tool.nvstage]\nsource = "{LONG}.cu"\n'
                                            "[tool.nvstage.budgets]\nmax_registers = 64\n")
    line = _one_line_error(cli("check"))
    assert "File name too long" in line


def test_a_loop_of_links_is_not_no_such_file(cli, workdir):
    (workdir / "loop1").symlink_to("loop2")
    (workdir / "loop2").symlink_to("loop1")
    line = _one_line_error(cli("show", "loop1"))
    assert "symbolic links" in line and "no such file" not in line


# --- 16: a .npy of the wrong kind fails validation, not the GPU run --------------------------

@pytest.mark.parametrize("make, said", [
    ("np.array(['abc'] * 1024)", "holds text"),
    ("np.zeros(1024, dtype=[('a', 'f4'), ('b', 'i4')])", "holds records"),
    ("np.ones(1024, np.complex64) * (1 + 2j)", "imaginary parts would be dropped"),
    ("np.full(1024, 1e300)", "too large for float32"),
    ("np.array(['2020-01-01'] * 1024, dtype='datetime64[D]')", "holds dates"),
    ("np.arange(10.0)", "holds 10 elements, the buffer 1024"),
])
def test_a_wrong_npy_fails_the_dry_run(cli, workdir, kernels, make, said):
    import numpy as np

    np.save(workdir / "x.npy", eval(make))
    w = _workload(workdir, kernels, init='{ npy = "x.npy" }')
    line = _one_line_error(cli("run", w, "--dry-run"))
    assert said in line and "[buffers.x] init.npy" in line


def test_a_right_npy_passes_and_loads_exactly(cli, workdir, kernels):
    import numpy as np

    from nvstage.run.workload import Workload
    from nvstage.run.workload.data import initial_contents

    np.save(workdir / "x.npy", np.arange(1024, dtype=np.float64).reshape(32, 32))
    w = _workload(workdir, kernels, init='{ npy = "x.npy" }')
    r = cli("run", w, "--dry-run")
    assert r.exit_code == 0, r.output
    x = initial_contents(Workload.from_toml(w))["x"]
    assert x.dtype == np.float32 and x.shape == (1024,) and x[1023] == 1023.0


def test_integers_out_of_a_buffers_range_are_refused(workdir, kernels):
    import numpy as np

    from nvstage.errors import WorkloadError
    from nvstage.run.workload import Workload
    from nvstage.run.workload.data import initial_contents

    np.save(workdir / "x.npy", np.full(1024, 300, np.int64))
    w = _workload(workdir, kernels, init='{ npy = "x.npy" }').read_text()
    (workdir / "w.toml").write_text(w.replace('dtype = "float32"\ncount = "n"\ninit',
                                              'dtype = "uint8"\ncount = "n"\ninit', 1))
    with pytest.raises(WorkloadError, match="outside uint8's range"):
        initial_contents(Workload.from_toml(workdir / "w.toml"))


# --- 13: the work a workload asks for is bounded as a whole --------------------------------

def test_repeat_reps_and_warmup_are_bounded_as_a_product(cli, workdir, kernels):
    w = _workload(workdir, kernels, extra="repeat = 1000000\n[run]\nreps = 1000000\n"
                                         "warmup = 1000000\n")
    line = _one_line_error(cli("run", w, "--dry-run"))
    assert "MAX_OPERATIONS" in line
    w = _workload(workdir, kernels, extra="repeat = 100000\n")
    r = cli("run", w, "--dry-run")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.splitlines()) < 20  # the repeats are counted, not listed
    assert "x 100000 (operations 3 to 100002)" in r.stdout
    assert "100003 operations per repetition" in r.stderr
    line = _one_line_error(cli("run", w, "--dry-run", "--reps", "200"))
    assert "MAX_TOTAL_OPERATIONS" in line and "20200606 operations" in line


def test_too_many_launch_entries_are_refused(cli, workdir, kernels):
    entry = ('[[launch]]\nkernel = "saxpy"\ngrid = 4\nblock = 256\n'
             'args = [{ i32 = "n" }, { f32 = "a" }, "x", "y"]\n')
    w = _workload(workdir, kernels, extra=entry * 10_001)
    line = _one_line_error(cli("run", w, "--dry-run"))
    assert "MAX_LAUNCH_ENTRIES" in line


def test_the_dry_run_json_plan_counts_repeats(cli, workdir, kernels):
    w = _workload(workdir, kernels, extra="repeat = 7\n")
    r = cli("run", w, "--dry-run", "--json", "-")
    assert r.exit_code == 0, r.output
    ops = json.loads(r.stdout)["operations"]
    assert [o["op"] for o in ops] == ["h2d", "h2d", "launch", "d2h"]
    assert ops[2]["repeat"] == 7


# --- 17: a keep folder whose build is not whole says so -------------------------------------

@pytest.fixture
def interrupted(toolkit, kernels, tmp_path):
    """A keep folder left as a build SIGTERMed after its ptxas stages leaves it: the
    manifest says "interrupted", and there is no fatbin."""
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    shutil.copy(kernels / "multi.cu", tmp_path)
    nvstage.compile("multi.cu", CompileOptions(
        gencodes=("arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90"),
        compile_only=True), toolkit=toolkit, keep="k", cwd=tmp_path)
    keep = tmp_path / "k"
    doc = json.loads((keep / "stages.json").read_text())
    doc["status"] = "interrupted"
    doc["error"] = {"error": "Terminated", "hint": None,
                    "message": "the build stopped before every stage ran (ended by SIGTERM)"}
    doc["stages"] = [s for s in doc["stages"] if s["kind"] not in ("fatbinary", "host-compile")]
    doc["output"] = None
    (keep / "stages.json").write_text(json.dumps(doc))
    for f in keep.glob("multi.fatbin*"):
        f.unlink()
    (tmp_path / "multi.o").unlink()
    return keep


def test_show_says_a_build_is_partial(cli, interrupted):
    r = cli("show", interrupted)
    assert r.exit_code == 0, r.output
    assert "note: " in r.stderr and "this build was interrupted" in r.stderr
    assert "what follows is partial" in r.stderr
    r = cli("show", interrupted, "--json")
    assert json.loads(r.stdout)["partial"]["status"] == "interrupted"


def test_show_gpu_never_blames_a_fatbin_that_was_never_built(cli, interrupted):
    r = cli("show", interrupted, "--gpu", "h200", "--sections", "fatbin", "--json")
    assert r.exit_code == 1, r.output  # cannot tell is not a yes
    verdict = json.loads(r.stdout)["will_it_run"]
    assert verdict["runs"] is None and verdict["how"] == "unknown"
    assert "interrupted before any fatbin was made" in verdict["explain"]
    assert "holds no images" not in r.output


def test_diff_and_occupancy_say_which_side_is_partial(cli, interrupted, built):
    root, _ = built
    # two builds of other kernels: a pair names what to compare (nothing paired is an error)
    r = cli("diff", root / "vadd.keep", interrupted, "--pair", "vadd=histogram", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert list(doc["partial"]) == ["b"] and doc["partial"]["b"]["status"] == "interrupted"
    assert "this build was interrupted" in r.stderr
    r = cli("occupancy", interrupted, "--block", "128", "--gpu", "h200", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["partial"]["status"] == "interrupted"
    assert "this build was interrupted" in r.stderr


def test_a_whole_build_carries_no_partial_field(cli, built):
    root, _ = built
    for args in (("show", root / "vadd.keep", "--json"),
                 ("diff", root / "vadd.keep", root / "vadd.keep", "--json")):
        r = cli(*args)
        assert r.exit_code == 0 and "partial" not in json.loads(r.stdout)
        assert "partial" not in r.stderr


def test_a_running_or_failed_manifest_is_partial_too(cli, interrupted):
    doc = json.loads((interrupted / "stages.json").read_text())
    for status in ("running", "failed"):
        doc["status"] = status
        doc["error"] = {"stage_index": 4, "stage_kind": "cicc"} if status == "failed" else None
        (interrupted / "stages.json").write_text(json.dumps(doc))
        r = cli("show", interrupted, "--sections", "resources")
        assert r.exit_code == 0, r.output
        said = "still running" if status == "running" else "failed at stage 4 (cicc)"
        assert said in r.stderr


# --- 18: a failed check of a source points at no deleted folder ----------------------------

def test_a_failed_check_of_a_source_gives_a_command_that_keeps_the_files(cli, workdir):
    (workdir / "bad.cu").write_text("__global__ void k(int*p){ p[0] = 1 }\n")
    (workdir / "pyproject.toml").write_text('[tool.nvstage.compile]\narchs=["sm_90"]\n'
                                            "[tool.nvstage.budgets]\nmax_registers=64\n")
    r = cli("check", "bad.cu")
    assert r.exit_code == 5, r.output
    hint = [line for line in r.stderr.splitlines() if line.startswith("hint: ")]
    assert len(hint) == 1
    assert "temporary folder, now removed" in hint[0]
    assert "nvstage compile bad.cu -arch=sm_90 --fatbin --keep-dir DIR" in hint[0]
    assert "are kept in" not in r.stderr


def test_check_keep_dir_empty_is_an_error(cli, workdir, kernels):
    shutil.copy(kernels / "vadd.cu", workdir)
    (workdir / "pyproject.toml").write_text("[tool.nvstage.budgets]\nmax_registers=64\n")
    line = _one_line_error(cli("check", "vadd.cu", "--keep-dir", ""))
    assert "name is empty" in line
