"""nvstage in front of a step is invisible (issue 43): each case runs the tool plain and through
nvstage and compares what a build sees (exit status, streams, files, processes left), on
both paths: nvcc's staged stages (and the plain nvcc the launcher falls back to) and tool
steps. Streams closed, a tool killed by SIGKILL, a tool reading the terminal, a SIGKILL to
the build's process group or to nvstage alone, a removed current folder, a tool that cannot
be executed. Real nvcc, real signals, a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog

_NVSTAGE = [sys.executable, "-m", "nvstage"]
_BARE = [sys.executable, "-S", "-P",
         str(Path(__file__).parents[3] / "src" / "nvstage" / "cli" / "bare.py")]
HEAVY = (Path(__file__).parents[2] / "data" / "heavy.cu").read_text()  # slow in cicc, ptxas
SMALL = "__global__ void k(int* p) { *p = 1; }\n"


class Build:
    """One folder with its own $TMPDIR, cache and build record, and a mark every process
    started under it inherits (how what is left running is found in /proc)."""

    def __init__(self, root: Path, toolkit=None):
        self.root, self.tmp = root, root / "tmp"
        self.tmp.mkdir()
        self.nvcc = toolkit.nvcc if toolkit is not None else None
        self.mark = f"{os.getpid()}-{time.monotonic_ns()}"
        self.env = {**os.environ, "TMPDIR": str(self.tmp),
                    "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                    "NVSTAGE_CACHE_DIR": str(root / "cache"),
                    "NVSTAGE_BUILD_RECORD": str(root / "record"),
                    "NVSTAGE_TRANSPARENT_TEST": self.mark}

    def processes(self) -> list[tuple[int, str, list[bytes]]]:
        """(pid, name, argv) of the live processes carrying this build's mark."""
        found = []
        want = f"NVSTAGE_TRANSPARENT_TEST={self.mark}".encode()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if want not in Path(f"/proc/{d}/environ").read_bytes().split(b"\0"):
                    continue
                if Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # ended, not yet reaped
                found.append((int(d), Path(f"/proc/{d}/comm").read_text().strip(),
                              Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")))
            except (OSError, IndexError):
                pass
        return found

    def names(self) -> list[str]:
        return sorted(name for _, name, _ in self.processes())

    def wait_for(self, name: str, timeout: float = 120) -> int:
        """The pid of a process called ``name`` of this build (not asked its version)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for pid, n, argv in self.processes():
                if n == name and b"--version" not in argv:
                    return pid
            time.sleep(0.01)
        raise AssertionError(f"no {name} ran: {self.names()}")

    def left_after(self, seconds: float) -> list[str]:
        """What of this build still runs ``seconds`` from now (at once where nothing does)."""
        end = time.monotonic() + seconds
        while self.processes() and time.monotonic() < end:
            time.sleep(0.02)
        return self.names()

    def clean(self) -> None:
        for pid, _, _ in self.processes():
            with _quiet():
                os.kill(pid, signal.SIGKILL)


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)


@pytest.fixture
def build(tmp_path, request):
    toolkit = request.getfixturevalue("toolkit") if "toolkit" in request.fixturenames else None
    b = Build(tmp_path, toolkit)
    yield b
    b.clean()


def _closing(*fds: int):
    def close():
        for fd in fds:
            os.close(fd)
    return close


def _run(argv, b: Build, *, closed=(), cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """``argv`` as a build step runs it, with the standard streams ``closed`` closed; the
    open ones of stdout and stderr captured."""
    out = None if 1 in closed else subprocess.PIPE
    err = None if 2 in closed else subprocess.PIPE
    inp = None if 0 in closed else subprocess.DEVNULL
    return subprocess.run(argv, cwd=cwd or b.root, env=b.env, stdin=inp, stdout=out, stderr=err,
                          preexec_fn=_closing(*closed) if closed else None, timeout=timeout)


def _same(plain: subprocess.CompletedProcess, ours: subprocess.CompletedProcess) -> None:
    assert (ours.returncode, ours.stdout, ours.stderr) == \
        (plain.returncode, plain.stdout, plain.stderr), (plain, ours)


# --- 1. A standard stream closed (cmd >&-): the step runs as it does plain, nothing of
# nvstage's own is written anywhere, and the tool finds the stream closed.

_SAYS = "echo out; echo st=$? >&2; echo err >&2; echo out2"


@pytest.mark.parametrize("fd", [0, 1, 2])
def test_a_closed_stream_is_the_tools_closed_stream(build, fd):
    for sh in ("sh", "/bin/sh"):  # by name (a Makefile's), by path (CMake's)
        plain = _run([sh, "-c", _SAYS], build, closed=(fd,))
        for front in (_NVSTAGE, _BARE):
            _same(plain, _run([*front, sh, "-c", _SAYS], build, closed=(fd,)))
    if fd == 1:  # the tool saw it closed, as plain: its write failed
        assert b"st=0" not in plain.stderr and b"out" not in plain.stderr


@pytest.mark.parametrize("fd", [0, 1, 2])
def test_nvcc_with_a_closed_stream_misses_and_hits_as_plain_nvcc_runs(build, toolkit, fd):
    (build.root / "a.cu").write_text(SMALL)
    words = ["-c", "a.cu", "-o", "a.o", "-arch=sm_90"]
    plain = _run([build.nvcc, *words], build, closed=(fd,))
    # Plain nvcc 13 fails with stdin closed: the host compiler's first output file takes
    # descriptor 0 and its probe says "Failed to preprocess host compiler properties". The
    # stages find the build's stdin as nvcc's tools do, closed: nvstage fails the same way.
    assert plain.returncode == (1 if fd == 0 else 0)
    if fd == 0:
        assert b"Failed to preprocess host compiler properties" in plain.stderr
        ours = _run([*_NVSTAGE, build.nvcc, *words], build, closed=(fd,))
        assert ours.returncode == 1 and not (build.root / "a.o").exists()
        assert b"Failed to preprocess host compiler properties" in ours.stderr, ours.stderr
        return
    (build.root / "a.o").unlink(missing_ok=True)
    for front in (_NVSTAGE, _NVSTAGE, _BARE):  # a miss, then hits (bare.py's too)
        ours = _run([*front, build.nvcc, *words], build, closed=(fd,))
        _same(plain, ours)  # the same bytes said (none), the same status
        assert (build.root / "a.o").stat().st_size > 0
        (build.root / "a.o").unlink()
    entries = buildlog.load_build_log(build.root / "record").entries
    assert [(e.status, e.hit) for e in entries] == [("ok", False), ("ok", True), ("ok", True)]
    # nvstage compile: the same, and nothing of its own said on a closed stream.
    done = _run([*_NVSTAGE, "compile", "a.cu", "-c", "-o", "b.o", "-arch=sm_90"], build,
                closed=(fd,))
    assert done.returncode == 0 and b"Traceback" not in (done.stderr or b"")
    assert (build.root / "b.o").exists()


@pytest.mark.slow
def test_a_hit_of_the_resident_nvstage_with_stdout_closed(build, toolkit):
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))  # a socket path's 107 bytes
    build.env.update(NVSTAGE_SERVER="1", XDG_RUNTIME_DIR=str(run))
    stop = [sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop",
            str(build.root / "cache")]
    try:
        (build.root / "a.cu").write_text(SMALL)
        words = ["-c", "a.cu", "-o", "a.o", "-arch=sm_90"]
        assert _run([*_NVSTAGE, build.nvcc, *words], build).returncode == 0
        end = time.monotonic() + 60
        while not any(n.endswith(".sock") for n in os.listdir(run / "nvstage")
                      if (run / "nvstage").is_dir()):
            assert time.monotonic() < end, "no resident nvstage"
            time.sleep(0.1)
        for front in (_NVSTAGE, _BARE):
            done = _run([*front, build.nvcc, *words], build, closed=(1,))
            assert (done.returncode, done.stderr) == (0, b"")
        entries = buildlog.load_build_log(build.root / "record").entries
        assert [e.hit for e in entries] == [False, True, True]
    finally:
        subprocess.run(stop, env=build.env, capture_output=True, timeout=60)
        shutil.rmtree(run, ignore_errors=True)


# --- 2. A tool killed by SIGKILL (the OOM killer): nvstage dies the same way.

def test_a_step_killed_by_sigkill_kills_nvstage_by_it(build):
    plain = _run(["sh", "-c", "echo before; kill -KILL $$"], build)
    assert plain.returncode == -signal.SIGKILL
    for front in (_NVSTAGE, _BARE):
        _same(plain, _run([*front, "sh", "-c", "echo before; kill -KILL $$"], build))
    (entry, _) = buildlog.load_build_log(build.root / "record").entries
    assert entry.exit_code == 128 + signal.SIGKILL and entry.status == "failed"


@pytest.mark.slow
def test_plain_nvcc_killed_by_sigkill_kills_the_launcher_by_it(build, toolkit):
    # -keep: a command nvstage runs with plain nvcc; the OOM killer takes that nvcc.
    (build.root / "heavy.cu").write_text(HEAVY)
    p = subprocess.Popen([*_NVSTAGE, build.nvcc, "-c", "heavy.cu", "-keep", "-arch=sm_90"],
                         cwd=build.root, env=build.env, stderr=subprocess.PIPE)
    build.wait_for("cicc")
    (nvcc,) = [pid for pid, name, _ in build.processes() if name == "nvcc"]
    os.kill(nvcc, signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL and b"Traceback" not in err, err


# --- 3. A tool that reads the terminal reads it, and the terminal's ^C and hangup reach it.

def _in_terminal(argv, env, typed: bytes, until: bytes | None, then: bytes | None = None,
                 close: bool = False, timeout: float = 60) -> tuple[int | None, bytes]:
    """``argv`` run with a pseudo-terminal as its controlling terminal (its session's leader,
    as a login shell's job is in the terminal's foreground group): what it printed, and its
    wait status (None when it did not end in time: it is killed)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: a session of its own whose terminal is the pty
        try:
            for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
                signal.signal(s, signal.SIG_DFL)  # as a shell's job has them, whatever ours
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    said, status = b"", None
    try:
        os.write(master, typed)
        end = time.monotonic() + timeout
        while until is not None and until not in said and time.monotonic() < end:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    said += os.read(master, 4096)
                except OSError:
                    break
        if then is not None:
            os.write(master, then)
        if close:
            os.close(master)
            master = None
        while time.monotonic() < end:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
                break
            if master is not None and select.select([master], [], [], 0.05)[0]:
                with _quiet():
                    said += os.read(master, 4096)
            else:
                time.sleep(0.02)
    finally:
        if status is None:
            with _quiet():
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if master is not None:
            os.close(master)
    return status, said


_READS = ["sh", "-c", "read a; echo got:$a"]


def test_a_step_reads_the_terminal_as_it_does_plain(build):
    plain = _in_terminal(_READS, build.env, b"hello\n", b"got:hello")
    assert plain[0] == 0 and b"got:hello" in plain[1]
    for front in (_NVSTAGE, _BARE):
        ours = _in_terminal([*front, *_READS], build.env, b"hello\n", b"got:hello",
                            timeout=30)
        assert ours[0] == 0 and b"got:hello" in ours[1], ours
        assert build.left_after(5) == []


def test_the_terminals_interrupt_and_hangup_end_the_step_as_they_end_it_plain(build):
    sleeper = ["sh", "-c", "echo up; exec sleep 300"]
    for front in ([], _NVSTAGE):
        # ^C typed: the foreground group gets SIGINT; the tool dies of it, and nvstage too.
        status, said = _in_terminal([*front, *sleeper], build.env, b"", b"up", then=b"\x03")
        assert status == -signal.SIGINT, (front, status, said)
        assert build.left_after(5) == []
        # The terminal closed (a window, an ssh session): the hangup ends both.
        status, said = _in_terminal([*front, *sleeper], build.env, b"", b"up", close=True)
        assert status == -signal.SIGHUP, (front, status, said)
        assert build.left_after(5) == []


# --- 4. A SIGKILL to the build's process group (timeout -s KILL, a CI runner ending a job),
# or to nvstage alone: nothing of the step is left running.

def _started_in_own_group(argv, b: Build) -> subprocess.Popen:
    """``argv`` started as ``timeout`` and CI runners start a job: its own process group."""
    return subprocess.Popen(argv, cwd=b.root, env=b.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.parametrize("how", ["group", "nvstage alone"])
def test_a_sigkill_leaves_no_step_running(build, how):
    plain = _started_in_own_group(["sleep", "300"], build)
    build.wait_for("sleep")
    os.killpg(plain.pid, signal.SIGKILL)
    assert plain.wait(timeout=30) == -signal.SIGKILL and build.left_after(0.5) == []
    p = _started_in_own_group([*_NVSTAGE, "sleep", "300"], build)
    build.wait_for("sleep")
    if how == "group":
        os.killpg(p.pid, signal.SIGKILL)
    else:  # a kill nvstage cannot catch, nor pass on
        os.kill(p.pid, signal.SIGKILL)
    assert p.wait(timeout=30) == -signal.SIGKILL
    assert build.left_after(0.5) == []


@pytest.mark.slow
@pytest.mark.parametrize("how", ["group", "nvstage alone"])
def test_a_sigkill_leaves_no_stage_running(build, toolkit, how):
    (build.root / "heavy.cu").write_text(HEAVY)
    words = ["-c", "heavy.cu", "-o", "heavy.o", "-arch=sm_90"]
    plain = _started_in_own_group([build.nvcc, *words], build)
    build.wait_for("cicc")
    os.killpg(plain.pid, signal.SIGKILL)
    assert plain.wait(timeout=30) == -signal.SIGKILL and build.left_after(0.5) == []
    p = _started_in_own_group([*_NVSTAGE, build.nvcc, *words], build)
    build.wait_for("cicc")  # a stage of the staged build: nvcc is not running
    assert "nvcc" not in build.names()
    if how == "group":
        os.killpg(p.pid, signal.SIGKILL)
    else:
        os.kill(p.pid, signal.SIGKILL)
    assert p.wait(timeout=30) == -signal.SIGKILL
    assert build.left_after(0.5) == []


def _host_compiler_with_a_child(b: Build) -> Path:
    """A folder for -ccbin whose gcc starts a program of its own and waits for it, as a
    wrapper (ccache, distcc) does: a grandchild of the stage that runs it."""
    folder = b.root / "ccbin"
    folder.mkdir()
    gcc = folder / "gcc"
    gcc.write_text(f'#!/bin/sh\nsleep 300\nexec {shutil.which("gcc")} "$@"\n')
    gcc.chmod(0o755)
    return folder


@pytest.mark.slow
def test_a_sigkill_to_the_group_leaves_no_grandchild_of_a_stage(build, toolkit):
    # What a stage starts (its host compiler's own child) is in the build's group, as plain
    # nvcc's are, and goes with it: in a session of its own, only the stage was ended (by
    # PR_SET_PDEATHSIG, which its children do not inherit) and the child ran on.
    (build.root / "a.cu").write_text(SMALL)
    words = ["-c", "a.cu", "-o", "a.o", "-arch=sm_90", "-ccbin",
             str(_host_compiler_with_a_child(build))]
    for front in ([], _NVSTAGE):
        p = _started_in_own_group([*front, build.nvcc, *words], build)
        build.wait_for("sleep")
        os.killpg(p.pid, signal.SIGKILL)
        assert p.wait(timeout=30) == -signal.SIGKILL
        assert build.left_after(0.5) == [], front


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.slow
def test_job_control_stops_and_resumes_the_stages_as_it_does_plain_nvccs_tools(build, toolkit):
    # ^Z stops the foreground job's group, fg resumes it. A stage in a session of its own ran
    # on while nvstage was stopped.
    (build.root / "heavy.cu").write_text(HEAVY)
    for front in ([], _NVSTAGE):
        p = subprocess.Popen([*front, build.nvcc, "-c", "heavy.cu", "-o", "heavy.o",
                              "-arch=sm_90"], cwd=build.root, env=build.env,
                             stdout=subprocess.DEVNULL, process_group=0)  # a shell's job
        try:
            cicc = build.wait_for("cicc")
            os.killpg(p.pid, signal.SIGTSTP)
            end = time.monotonic() + 10
            while _state(cicc) != "T" and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(0.3)
            assert (_state(cicc), _state(p.pid)) == ("T", "T"), front
            os.killpg(p.pid, signal.SIGCONT)
            assert p.wait(timeout=600) == 0, front
        finally:
            with _quiet():
                os.killpg(p.pid, signal.SIGKILL)
        assert (build.root / "heavy.o").stat().st_size > 0
        (build.root / "heavy.o").unlink()
        assert build.left_after(0.5) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda v: signal.Signals(v).name)
def test_a_signal_to_the_group_ends_the_staged_build_and_leaves_nothing(build, toolkit, sig):
    # The stages are in the build's group: the signal reaches them and nvstage alike; a stage
    # that died of it is the build ended (never a failed stage that plain nvcc replays), and
    # nvstage removes its scratch folders and theirs.
    (build.root / "heavy.cu").write_text(HEAVY)
    p = _started_in_own_group([*_NVSTAGE, build.nvcc, "-c", "heavy.cu", "-o", "heavy.o",
                               "-arch=sm_90"], build)
    build.wait_for("cicc")
    os.killpg(p.pid, sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig and b"Traceback" not in err, err
    assert build.left_after(0.5) == []
    assert os.listdir(build.tmp) == [] and not (build.root / "heavy.o").exists()


@pytest.mark.slow
def test_a_sigkill_to_the_group_ends_the_plain_nvcc_the_launcher_runs(build, toolkit):
    (build.root / "heavy.cu").write_text(HEAVY)
    words = ["-c", "heavy.cu", "-keep", "-arch=sm_90"]  # run by plain nvcc
    p = _started_in_own_group([*_NVSTAGE, build.nvcc, *words], build)
    build.wait_for("cicc")
    assert "nvcc" in build.names()
    os.killpg(p.pid, signal.SIGKILL)
    assert p.wait(timeout=30) == -signal.SIGKILL
    assert build.left_after(0.5) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig, how", [(signal.SIGTERM, "nvstage alone"), (signal.SIGINT, "group"),
                                      (signal.SIGTERM, "group")],
                         ids=lambda v: v if isinstance(v, str) else signal.Signals(v).name)
def test_a_signal_ends_plain_nvcc_and_its_tools(build, toolkit, sig, how):
    # nvcc ignores SIGINT while it waits for a tool (system()): sent to nvstage alone, nvstage
    # ends nvcc's tools too; sent to the group, it reaches them itself.
    (build.root / "heavy.cu").write_text(HEAVY)
    p = _started_in_own_group([*_NVSTAGE, build.nvcc, "-c", "heavy.cu", "-keep",
                               "-arch=sm_90"], build)
    build.wait_for("cicc")
    if how == "group":
        os.killpg(p.pid, sig)
    else:
        os.kill(p.pid, sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig and b"Traceback" not in err, err
    assert build.left_after(0.5) == []


@pytest.mark.parametrize("how", ["nvstage alone", "group"])
def test_a_sigterm_ends_a_step_as_it_ends_the_tool_plain(build, how):
    plain = _started_in_own_group(["sh", "-c", "exec sleep 300"], build)
    build.wait_for("sleep")
    os.killpg(plain.pid, signal.SIGTERM)
    assert plain.wait(timeout=30) == -signal.SIGTERM
    p = _started_in_own_group([*_NVSTAGE, "sh", "-c", "exec sleep 300"], build)
    build.wait_for("sleep")
    if how == "group":
        os.killpg(p.pid, signal.SIGTERM)
    else:  # passed on
        os.kill(p.pid, signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert (p.returncode, err) == (-signal.SIGTERM, b"")
    assert build.left_after(0.5) == []


# --- 9. Run from a folder since removed (absolute paths): as plain.

def _from_removed_folder(argv, b: Build) -> subprocess.CompletedProcess:
    gone = b.root / "gone"
    gone.mkdir()
    return subprocess.run(["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), *argv],
                          env=b.env, capture_output=True, timeout=300)


def test_a_step_from_a_removed_folder(build):
    out = build.root / "out.txt"
    plain = _from_removed_folder(["sh", "-c", f"echo made > {out}; echo said"], build)
    assert plain.returncode == 0 and out.read_text() == "made\n"
    out.unlink()
    _same(plain, _from_removed_folder([*_NVSTAGE, "sh", "-c", f"echo made > {out}; echo said"],
                                      build))
    assert out.read_text() == "made\n"


def test_nvcc_from_a_removed_folder(build, toolkit):
    src, obj = build.root / "a.cu", build.root / "a.o"
    src.write_text(SMALL)
    words = ["-c", str(src), "-o", str(obj), "-arch=sm_90"]
    plain = _from_removed_folder([build.nvcc, *words], build)
    assert plain.returncode == 0, plain.stderr
    obj.unlink()
    for front in (_NVSTAGE, _BARE):
        # The same status and streams (the getcwd() complaints of nvcc's own shell).
        _same(plain, _from_removed_folder([*front, build.nvcc, *words], build))
        assert obj.stat().st_size > 0  # (nvcc's objects differ run to run: temp names)
        obj.unlink()


# --- 12. A tool that cannot be executed: 126 as a shell says it, 127 only where not found.

@pytest.mark.parametrize("what", ["no x bit", "a folder", "absent"])
def test_a_tool_that_cannot_run_exits_as_a_shell_says(build, what):
    tool = build.root / "tool"
    if what == "no x bit":
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o644)
    elif what == "a folder":
        tool.mkdir()
    shell = _run(["sh", "-c", 'exec "$0"', str(tool)], build)
    ours = _run([*_NVSTAGE, str(tool)], build)
    assert ours.returncode == shell.returncode == (127 if what == "absent" else 126)
    assert ours.stdout == b"" and ours.stderr.startswith(b"nvstage: cannot run ")
    (entry,) = buildlog.load_build_log(build.root / "record").entries
    assert entry.exit_code == shell.returncode


def test_a_host_compiler_that_leaves_a_child_running_is_not_waited_for(build, toolkit):
    # A -ccbin wrapper that leaves a background child holding its output: nvcc waits for the
    # process, not for the end of its output; so does nvstage (it waited for the child, 40 s).
    (build.root / "a.cu").write_text(SMALL)
    folder = build.root / "bg"
    folder.mkdir()
    gcc = folder / "gcc"
    gcc.write_text(f'#!/bin/sh\nsleep 60 &\nexec {shutil.which("gcc")} "$@"\n')
    gcc.chmod(0o755)
    words = ["-c", "a.cu", "-o", "a.o", "-arch=sm_90", "-ccbin", str(folder)]
    t0 = time.monotonic()
    ours = _run([*_NVSTAGE, build.nvcc, *words], build, timeout=50)
    assert ours.returncode == 0 and (build.root / "a.o").stat().st_size > 0, ours.stderr
    assert time.monotonic() - t0 < 45  # the children left running end with the fixture
