"""nvstage compile answered whole from the cache, as the launcher answers a hit: no toolkit
search, no rich, no process; what it prints kept from the build that made the entry."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Runs `nvstage compile` in a fresh interpreter with pipes (not a terminal), and says which
# heavy modules it imported.
_CODE = ("import sys; from nvstage.cli.main import run; rc = run(sys.argv[1:]);"
         "sys.stdout.flush(); sys.stderr.write('\\n@@ %s %s\\n' % (rc, sorted(m for m in "
         "('typer', 'rich', 'click', 'numpy', 'cuda', 'json', 'hashlib', "
         "'nvstage.compiler.pipeline.driver') if m in sys.modules)))")


@pytest.fixture
def folder(tmp_path, kernels):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
    (tmp_path / "k.cu").write_text(
        '#include "coef.h"\n__global__ void k(float* x) { x[threadIdx.x] *= COEF; }\n')
    return tmp_path


def _compile(folder, *args, no_spawn=False):
    code = _CODE
    if no_spawn:  # any process started fails the command
        code = ("import os, subprocess\ndef no(*a, **k): raise AssertionError('spawned')\n"
                "subprocess.Popen.__init__ = no\n"
                "for n in ('fork', 'posix_spawn', 'posix_spawnp', 'execv', 'execve'): "
                "setattr(os, n, no)\n" + code)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    cp = subprocess.run([sys.executable, "-c", code, "compile", *args], cwd=folder,
                        capture_output=True, text=True, env=env)
    err, _, tail = cp.stderr.rpartition("\n@@ ")
    rc, _, mods = tail.strip().partition(" ")
    return int(rc), cp.stdout, err, mods


def test_a_repeated_compile_is_answered_whole_with_the_same_object(folder, beyond_the_warm_path):
    args = ("k.cu", "-c", "-Iinc", "-arch=sm_90", "-o", "k.o")
    rc, out, err, _ = _compile(folder, *args)
    assert rc == 0 and "cache 0 hits" in err
    cold = (folder / "k.o").read_bytes()
    # the cold build made the entry: the first repeat is answered whole
    (folder / "k.o").unlink()
    rc, out, err, mods = _compile(folder, *args, no_spawn=True)
    assert rc == 0, err
    assert mods == "[]"  # no rich, no toolkit search, no driver
    code = ("import sys; before = set(sys.modules); from nvstage.cli.main import run;"
            "rc = run(sys.argv[1:]); print(rc, sorted(set(sys.modules) - before))")
    cp = subprocess.run([sys.executable, "-c", code, "compile", *args], cwd=folder,
                        capture_output=True, text=True,
                        env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    rc, _, imported = cp.stdout.strip().rpartition("\n")[2].partition(" ")
    # The standard library, the hit path, the CLI's own light modules (the command list, the
    # watched stdout, the folder's state) and the answer's renderer: nothing else.
    beyond = beyond_the_warm_path(eval(imported), also=(
        "nvstage.cli.compile", "nvstage.cli.help", "nvstage.cli.streams",
        "nvstage.cli.transparent", "nvstage.report", "nvstage.report.terminal",
        "nvstage.report.terminal.answered", "nvstage.report.units"))
    assert rc == "0" and beyond == [], cp.stdout + cp.stderr
    assert (folder / "k.o").read_bytes() == cold
    rows = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r.split()[1] for r in rows] == ["host-preprocess", "cudafe++", "device-preprocess",
                                            "cicc", "ptxas", "fatbinary", "cleanup",
                                            "host-compile"]
    assert all(r.rstrip().endswith("(cached)") for r in rows)
    assert "cache 7 hits, 0 misses (the whole command at once); output k.o\ntoolkit: CUDA" in err


@pytest.mark.parametrize("change", ["header", "new hiding header", "flag"])
def test_what_a_whole_answer_must_not_survive(folder, change):
    args = ["k.cu", "-c", "-Ifirst", "-Iinc", "-arch=sm_90", "-o", "k.o"]
    (folder / "first").mkdir()
    for _ in range(2):
        assert _compile(folder, *args)[0] == 0
    if change == "header":
        (folder / "inc" / "coef.h").write_text("#define COEF 3.0f\n")
    elif change == "new hiding header":
        (folder / "first" / "coef.h").write_text("#define COEF 4.0f\n")
    else:
        args.append("-DEXTRA=1")
    rc, _, err, mods = _compile(folder, *args)
    assert rc == 0 and "whole command at once" not in err and "nvstage.compiler.pipeline.driver" in mods


def test_a_link_is_never_answered_whole(folder):
    (folder / "k.cu").write_text((folder / "k.cu").read_text() + "int main() { return 0; }\n")
    for _ in range(3):
        rc, _, err, mods = _compile(folder, "k.cu", "-Iinc", "-arch=sm_90", "-o", "k")
        assert rc == 0 and "nvstage.compiler.pipeline.driver" in mods
    assert (folder / "k").is_file()


@pytest.mark.parametrize("extra", [["--json"], ["--keep"], ["--show", "resources"],
                                   ["--no-cache"]])
def test_options_a_whole_answer_cannot_serve_run_the_pipeline(folder, extra):
    args = ["k.cu", "-c", "-Iinc", "-arch=sm_90", "-o", "k.o", *extra]
    for _ in range(2):
        assert _compile(folder, *args)[0] == 0
    rc, out, err, mods = _compile(folder, *args)
    assert rc == 0 and "whole command at once" not in err and "nvstage.compiler.pipeline.driver" in mods
    if extra == ["--json"]:
        assert out.lstrip().startswith("{")
