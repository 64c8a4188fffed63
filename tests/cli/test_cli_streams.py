"""nvstage as plain as the tools beside it where the process is odd (issue 43, the CLI's side):
its own commands' stdout failing (a reader gone, a full disk), a removed current folder, a tool
that cannot be executed or has no ``#!`` line, a tier's "is off" line under ``make -j``, a name
holding C1's bytes. Each case runs the tool it stands for plainly (``seq``, nvcc, a shell's
exec) beside nvstage and compares what a build or a terminal sees: exit status, streams,
files."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nvstage.errors import one_line, printable

_NVSTAGE = [sys.executable, "-m", "nvstage"]
SMALL = "__global__ void k(int* p) { *p = 1; }\n"


@pytest.fixture
def env(tmp_path) -> dict:
    """nvstage's own cache, record and no server nor remote tier: what runs is this test's."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("NVSTAGE_")}
    out.update(NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), NVSTAGE_SERVER="0",
               NO_COLOR="1", COLUMNS="120",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return out


def _into(argv: list[str], stdout: str, env: dict, cwd=None) -> tuple[int, str]:
    """(exit status as ``subprocess`` says it, stderr) of ``argv`` with its stdout ``full``
    (/dev/full), a ``pipe`` whose reader is gone, or ``closed`` (``cmd >&-``)."""
    if stdout == "closed":
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
        out = None
    elif stdout == "full":
        out = os.open("/dev/full", os.O_WRONLY)
    else:
        r, out = os.pipe()
        os.close(r)
    try:
        cp = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, env=env, cwd=cwd,
                            timeout=300)
    finally:
        if out is not None:
            os.close(out)
    return cp.returncode, cp.stderr.decode(errors="replace")


# -- B6: nvstage's own stdout, failing ----------------------------------------------------------
@pytest.fixture(scope="module")
def kept(tmp_path_factory, toolkit) -> Path:
    """A keep folder of one small kernel (show's tables are long: more than a pipe holds)."""
    root = tmp_path_factory.mktemp("kept")
    (root / "k.cu").write_text(SMALL)
    cp = subprocess.run([*_NVSTAGE, "compile", str(root / "k.cu"), "-cubin", "-arch=sm_90",
                         "-o", str(root / "k.cubin"), "--keep-dir", str(root / "keep")],
                        capture_output=True, text=True, timeout=300,
                        env={**os.environ, "NVSTAGE_CACHE_DIR": str(root / "cache")})
    assert cp.returncode == 0, cp.stderr
    return root / "keep"


def _own_commands(kept: Path, tmp: Path) -> list[list[str]]:
    (tmp / "k.cu").write_text(SMALL)
    return [["--version"], ["--help"], ["compile", "--help"], ["show", "--help"],
            ["show", str(kept)], ["show", str(kept), "--json"],
            ["compile", str(tmp / "k.cu"), "-cubin", "-arch=sm_90", "--via", "nvrtc",
             "-o", str(tmp / "k.cubin")]]


def test_a_reader_gone_ends_each_own_command_as_it_ends_seq(kept, tmp_path, env):
    """``nvstage show X | head -1``: killed by SIGPIPE, quietly, as ``seq 100000 | head -1``
    is (a shell says 141; ``set -o pipefail`` sees the same as for seq). Was: a traceback and
    1 (--version, --help, compile), or 1 and nothing said (show: rich's own exit)."""
    plain = _into(["seq", "100000"], "pipe", env)
    assert plain == (-signal.SIGPIPE, "")
    for argv in _own_commands(kept, tmp_path):
        code, said = _into([*_NVSTAGE, *argv], "pipe", env)
        # (--json: the tables go to stderr, which is open)
        assert code == plain[0] and (said == "" or "--json" in argv), (argv, said)
        assert "Traceback" not in said


def test_a_full_disk_is_one_line_and_1_as_for_seq(kept, tmp_path, env):
    """``nvstage ... >/dev/full``: one line on stderr and 1, as coreutils say it. Was: a
    traceback."""
    code, said = _into(["seq", "100000"], "full", env)
    assert (code, said) == (1, "seq: write error: No space left on device\n")
    for argv in _own_commands(kept, tmp_path):
        code, said = _into([*_NVSTAGE, *argv], "full", env)
        assert code == 1 and "Traceback" not in said, (argv, said)
        line = "nvstage: write error: No space left on device\n"
        assert said == line or "--json" in argv and said.endswith("\n" + line), (argv, said)


def test_a_closed_stdout_still_is_nothing_written_and_0(kept, tmp_path, env):
    """``cmd >&-`` (issue 43, item 1; kept): nothing of nvstage's is written, and 0."""
    for argv in _own_commands(kept, tmp_path):
        code, said = _into([*_NVSTAGE, *argv], "closed", env)
        assert code == 0 and "Traceback" not in said, (argv, said)


# -- B7: a removed current folder ---------------------------------------------------------------
def _in_removed(tmp_path: Path, argv: list[str], env: dict) -> subprocess.CompletedProcess:
    """``argv`` run from a folder removed after the shell entered it (a clean under a step)."""
    gone = tmp_path / "gone"
    gone.mkdir(exist_ok=True)
    return subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh",
                           str(gone), *argv], capture_output=True, text=True, env=env,
                          timeout=300)


def test_compile_from_a_removed_folder_builds_absolute_paths_as_nvcc_does(toolkit, tmp_path,
                                                                          env):
    (tmp_path / "k.cu").write_text(SMALL)
    src = str(tmp_path / "k.cu")
    plain = _in_removed(tmp_path, [str(toolkit.nvcc), src, "-cubin", "-arch=sm_90",
                                   "-o", str(tmp_path / "plain.cubin")], env)
    ours = _in_removed(tmp_path, [*_NVSTAGE, "compile", src, "-cubin", "-arch=sm_90",
                                  "-o", str(tmp_path / "ours.cubin")], env)
    assert plain.returncode == 0, plain.stderr
    assert ours.returncode == 0, ours.stderr  # was: os.getcwd()'s traceback, 1
    assert f"; output {tmp_path / 'ours.cubin'};" in ours.stderr  # (absolute: no folder to be
    # relative to)
    assert (tmp_path / "ours.cubin").read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "plain.cubin").read_bytes()[:4] == b"\x7fELF"


def test_compile_from_a_removed_folder_names_a_relative_path_in_one_line(toolkit, tmp_path,
                                                                         env):
    """A path relative to the removed folder names nothing (plain nvcc fails too): one line,
    and no folder made under the removed one's old name ("/x (deleted)/...", which a path
    resolved through /proc/self/cwd reads as)."""
    (tmp_path / "k.cu").write_text(SMALL)
    src = str(tmp_path / "k.cu")
    plain = _in_removed(tmp_path, [str(toolkit.nvcc), src, "-cubin", "-arch=sm_90",
                                   "-o", "k.cubin"], env)
    assert plain.returncode != 0
    for extra in (["-o", "k.cubin"], [], ["-o", str(tmp_path / "k.cubin"), "--keep"],
                  ["-o", "k.cubin", "--via", "nvrtc"]):
        ours = _in_removed(tmp_path, [*_NVSTAGE, "compile", src, "-cubin", "-arch=sm_90",
                                      *extra], env)
        assert ours.returncode == 2 and "Traceback" not in ours.stderr, ours.stderr
        first = ours.stderr.splitlines()[0]
        assert first.startswith("error: the current folder was removed since this command "
                                "started: "), first
    triton = _in_removed(tmp_path, [*_NVSTAGE, "compile", str(tmp_path / "k.py"), "--via",
                                    "triton", "--kernel", "k", "--signature", "x:*fp32"], env)
    assert triton.returncode == 2 and len(triton.stderr.splitlines()) == 2, triton.stderr
    assert not [p for p in tmp_path.iterdir() if "deleted" in p.name or "cubin" in p.name]


# -- B8, B9: what a shell runs, and how it says it cannot ---------------------------------------
def test_an_nvcc_there_but_not_executable_is_126_as_a_shell_says(tmp_path, env):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho nvcc\n")
    nvcc.chmod(0o644)
    plain = subprocess.run(["sh", "-c", f"{nvcc} --version"], capture_output=True, text=True)
    ours = subprocess.run([*_NVSTAGE, str(nvcc), "--version"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert plain.returncode == ours.returncode == 126  # was 127: "not found"
    assert ours.stderr == f"nvstage: cannot run '{nvcc}': Permission denied\n"
    gone = subprocess.run([*_NVSTAGE, str(tmp_path / "none" / "nvcc")], capture_output=True,
                          text=True, env=env, timeout=120)
    assert gone.returncode == 127  # not there: a shell's 127


def test_a_script_without_a_shebang_runs_with_sh_as_execvp_runs_it(tmp_path, env):
    """The kernel cannot run a file without ``#!`` (ENOEXEC); execvp and every POSIX shell
    run it with /bin/sh. Was: nvstage's 126, "Exec format error"."""
    folder = tmp_path / "bin"
    folder.mkdir()
    tool = folder / "gen-step"
    tool.write_text('echo "ran as $0 with $# words: $*"\necho to stderr >&2\nexit 3\n')
    tool.chmod(0o755)
    env = {**env, "PATH": f"{folder}{os.pathsep}{env['PATH']}"}
    for first in (str(tool), "gen-step"):  # a path, and a name on PATH
        plain = subprocess.run(["env", first, "a", "b c"], capture_output=True, env=env)
        ours = subprocess.run([*_NVSTAGE, first, "a", "b c"], capture_output=True, env=env,
                              timeout=120)
        assert plain.returncode == 3
        assert (ours.returncode, ours.stdout, ours.stderr) == \
            (plain.returncode, plain.stdout, plain.stderr), first


# -- B10: a tier's "is off", once a build -------------------------------------------------------
class _Silent:
    """A TCP server that takes connections and never answers: every operation of a tier on it
    waits its timeout, so the commands of a ``make -j`` build all find it down at once."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._take, daemon=True).start()

    def _take(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for s in self.held:
            s.close()


def test_a_tier_down_is_said_once_a_build_not_once_a_command(toolkit, tmp_path, env):
    if shutil.which("make") is None:
        pytest.skip("no make")
    n = 4
    for i in range(n):
        (tmp_path / f"k{i}.cu").write_text(SMALL.replace("k(", f"k{i}("))
    (tmp_path / "Makefile").write_text(
        "all: " + " ".join(f"k{i}.cubin" for i in range(n)) + "\n"
        "%.cubin: %.cu\n\t$(NVSTAGE) $(NVCC) -cubin -arch=sm_90 $< -o $@\n")
    server = _Silent()
    try:
        env = {**env, "NVSTAGE_REMOTE_CACHE": f"redis://127.0.0.1:{server.port}/0"
                                              "|connect-timeout=1000|operation-timeout=1500"}
        make = ["make", "-s", f"-j{n}", f"NVSTAGE={' '.join(_NVSTAGE)}", f"NVCC={toolkit.nvcc}"]
        first = subprocess.run(make, cwd=tmp_path, capture_output=True, text=True, env=env,
                               timeout=600)
        assert first.returncode == 0, first.stderr
        lines = [line for line in first.stderr.splitlines() if "is off" in line]
        assert len(lines) == 1, first.stderr  # was: one a command that found it down (4)
        assert lines[0].startswith(f"nvstage: remote cache redis://127.0.0.1:{server.port}/0 "
                                   "is off for the rest of this build: ")
        # The next build (its sources changed: misses), while the mark holds: its commands
        # skip the tier, and it is said once (was: never; the build not told why).
        for i in range(n):
            (tmp_path / f"k{i}.cu").write_text(SMALL.replace("k(", f"k{i}(").replace("1;", "2;"))
        again = subprocess.run(make, cwd=tmp_path, capture_output=True, text=True, env=env,
                               timeout=600)
        assert again.returncode == 0, again.stderr
        lines = [line for line in again.stderr.splitlines() if "is off" in line]
        assert len(lines) == 1 and "by an earlier command" in lines[0], again.stderr
    finally:
        server.close()


# -- B11: C1's bytes in a name ------------------------------------------------------------------
def test_printable_writes_out_c1_bytes_and_surrogates_without_a_byte():
    assert printable(os.fsdecode(b"k\x9b31m.cu")) == "k\\x9b31m.cu"  # CSI as a byte
    assert printable("k\u009b31m.cu") == "k\\x9b31m.cu"  # CSI as a character
    assert printable(os.fsdecode(b"\xff\xfe.cu")) == os.fsdecode(b"\xff\xfe.cu")  # as ls has it
    assert one_line("a\ud800b") == "a\\ud800b"  # a JSON document's lone surrogate
    for text in (os.fsdecode(bytes(range(0x80, 0x100))), "\ud800\udfff\udc00"):
        shown = printable(text).encode("utf-8", "surrogateescape")  # no UnicodeEncodeError
        assert not any(0x80 <= b < 0xa0 for b in shown), shown


def test_a_name_holding_c1s_csi_byte_reaches_stdout_written_out(toolkit, tmp_path, env):
    """0x9b is ESC [ to a terminal that reads C1: a name holding it, given as bytes (the
    surrogate ``os.fsdecode`` makes of it), is shown as ``\\x9b``. Was: the raw byte."""
    name = b"k\x9b31m.cu"
    (tmp_path / os.fsdecode(name)).write_text(SMALL)
    keep = tmp_path / "keep"
    for argv in ([b"compile", name, b"-cubin", b"-arch=sm_90", b"--keep-dir", os.fsencode(keep)],
                 [b"show", os.fsencode(keep)]):
        cp = subprocess.run([os.fsencode(sys.executable), b"-m", b"nvstage", *argv],
                            cwd=tmp_path, capture_output=True, env=env, timeout=300)
        assert cp.returncode == 0, cp.stderr
        assert b"k\\x9b31m" in cp.stdout + cp.stderr
        assert b"\x9b" not in cp.stdout + cp.stderr, argv
