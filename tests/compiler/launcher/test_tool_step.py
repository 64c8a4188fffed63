"""A build step that is not nvcc, run through nvstage (compiler/launcher/tool_step.py): byte for byte
what it is without (the files it writes, its exit status, stdout and stderr, the environment
it sees, death by a signal), timed and recorded, on the standard library alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog

# A tool of our own: writes a file and both streams (bytes that are no UTF-8 among them),
# shows the environment it got and its arguments, and ends as told.
TOOL = r"""#!/bin/sh
out="$1"; shift
printf 'out \377\376 %s\n' "$*"
printf 'err \200 line\n' >&2
env | LC_ALL=C sort > "$out.env"
printf '\001\002\377binary' > "$out"
case "$1" in
  fail) exit 3 ;;
  term) kill -TERM $$ ;;
esac
exit 0
"""


def _nvstage() -> list[str]:
    return [sys.executable, "-m", "nvstage"]


def _run(argv: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    # subprocess itself, not nvstage.proc: the test compares the bytes as a build tool gets
    # them, and a plain child's status as the shell reads it.
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=120)


@pytest.fixture
def tool(tmp_path) -> Path:
    path = tmp_path / "bin" / "mytool"
    path.parent.mkdir()
    path.write_text(TOOL)
    path.chmod(0o755)
    return path


# A C locale: Python sets LC_CTYPE=C.UTF-8 in its own environment, which the tool must not see.
_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "ODD": "a=b\tc"}


@pytest.mark.parametrize("how", ["ok", "fail"])
def test_a_step_is_byte_for_byte_what_it_is_without(tool, tmp_path, how):
    runs = {}
    where = tmp_path / "work"  # one folder for both: the tool sees its $PWD
    where.mkdir()
    for name, prefix in (("plain", []), ("nvstage", _nvstage())):
        env = dict(_ENV, PYTHONPATH=os.pathsep.join(sys.path)) if prefix else dict(_ENV)
        cp = _run([*prefix, str(tool), "made.bin", how, "x y", "\u00e9"], where, env)
        files = {p.name: p.read_bytes() for p in where.iterdir() if p.is_file()}
        for p in files:
            (where / p).unlink()
        runs[name] = cp, files
    (plain, pf), (ours, of) = runs["plain"], runs["nvstage"]
    assert (ours.returncode, ours.stdout, ours.stderr) == \
        (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == (3 if how == "fail" else 0)
    assert b"\xff\xfe" in plain.stdout and b"\x80" in plain.stderr
    # The environment it saw: the command's, less what only the nvstage run was given.
    env_seen = of.pop("made.bin.env").decode().splitlines()
    assert [v for v in env_seen if not v.startswith("PYTHONPATH=")] == \
        pf.pop("made.bin.env").decode().splitlines()
    assert not any(v.startswith("LC_CTYPE") for v in env_seen)
    assert of == pf and pf["made.bin"] == b"\x01\x02\xffbinary"
    # Recorded: the step's argv, its time and status, and nothing cached.
    rec = buildlog.load_build_log(where)
    (entry,) = rec.entries
    assert entry.argv[0] == str(tool) and entry.argv[1:4] == ["made.bin", how, "x y"]
    assert entry.status == ("failed" if how == "fail" else "ran")
    assert entry.exit_code == plain.returncode and entry.build is None and not entry.hit
    assert entry.kind == "other" and 0 < entry.seconds < 60


def test_a_step_ended_by_a_signal_ends_nvstage_by_it(tool, tmp_path):
    env = dict(_ENV, PYTHONPATH=os.pathsep.join(sys.path))
    plain = _run([str(tool), "f", "term"], tmp_path, _ENV)
    ours = _run([*_nvstage(), str(tool), "f", "term"], tmp_path, env)
    assert plain.returncode == ours.returncode == -signal.SIGTERM
    (entry,) = buildlog.load_build_log(tmp_path).entries
    assert entry.status == "failed" and entry.exit_code == 128 + signal.SIGTERM
    assert entry.reason == f"killed by signal {int(signal.SIGTERM)}"


@pytest.mark.skipif(not shutil.which("c++") or not shutil.which("ar"),
                    reason="needs a host C++ compiler and ar")
def test_compile_archive_and_link_through_nvstage(tmp_path):
    # Real tools, by path and by name (a Makefile's "CXX = nvstage g++"): the same files.
    (tmp_path / "a.cpp").write_text("int twice(int x) { return 2 * x; }\n")
    (tmp_path / "m.cpp").write_text("int twice(int);\nint main() { return twice(21) - 42; }\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    made = {}
    for name, prefix in (("plain", []), ("nvstage", _nvstage())):
        where = tmp_path / name
        where.mkdir()
        for src in ("a.cpp", "m.cpp"):
            shutil.copy(tmp_path / src, where / src)
        for argv in (["c++", "-c", "a.cpp", "-o", "a.o"], [shutil.which("c++"), "-c", "m.cpp",
                                                             "-o", "m.o"],
                     ["ar", "qc", "liba.a", "a.o"], ["ranlib", "liba.a"],
                     ["c++", "m.o", "liba.a", "-o", "app"]):
            cp = _run([*prefix, *argv], where, env)
            assert cp.returncode == 0, cp.stderr
        made[name] = {p: (where / p).read_bytes() for p in ("a.o", "m.o", "liba.a")}
        assert _run([str(where / "app")], where, env).returncode == 0
    assert made["plain"] == made["nvstage"]
    rec = buildlog.load_build_log(tmp_path / "nvstage")
    assert [(e.kind, e.status) for e in rec.entries] == [
        ("cxx-compile", "ran"), ("cxx-compile", "ran"), ("archive", "ran"),
        ("archive", "ran"), ("link", "ran")]
    assert [Path(e.output).name for e in rec.entries] == ["a.o", "m.o", "liba.a", "liba.a",
                                                          "app"]
    assert rec.entries[0].source == str(tmp_path / "nvstage" / "a.cpp")
    # ar and ranlib write one archive, and are two steps of it.
    assert len({e.unit for e in rec.entries}) == 5
    # One build: the same process (this test's) ran them all, without a pause.
    assert len(buildlog.builds_of(rec.entries)) == 1


def test_a_tool_that_is_not_there_fails_as_a_shell_says(tmp_path):
    env = dict(_ENV, PYTHONPATH=os.pathsep.join(sys.path))
    cp = _run([*_nvstage(), str(tmp_path / "no-such-tool"), "x"], tmp_path, env)
    assert cp.returncode == 127 and b"cannot run" in cp.stderr and cp.stdout == b""
    (entry,) = buildlog.load_build_log(tmp_path).entries
    assert entry.status == "failed" and entry.exit_code == 127


def test_the_step_path_imports_the_standard_library_and_the_base_only(tmp_path):
    code = ("import sys\nfrom nvstage.cli.main import run\n"
            "code = run(['/bin/true'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('nvstage')))\n"
            "print(sorted(m for m in ('typer', 'rich', 'json', 'subprocess', 're')"
            " if m in sys.modules))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cp = _run([sys.executable, "-c", code], tmp_path, env)
    assert cp.returncode == 0, cp.stderr
    mods, heavy = (json.loads(line.replace("'", '"')) for line in cp.stdout.decode().split("\n")
                   if line)
    assert set(mods) <= {"nvstage", "nvstage.cli", "nvstage.cli.main", "nvstage.cli.launcher",
                         "nvstage.fsio",
                         "nvstage.compiler", "nvstage.compiler.launcher",
                         "nvstage.compiler.launcher.tool_step", "nvstage.compiler.buildlog",
                         "nvstage.compiler.buildlog.current", "nvstage.compiler.store",
                         "nvstage.compiler.store.layout", "nvstage.paths"}, mods
    assert heavy == []
