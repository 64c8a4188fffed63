"""proc: every way a child can fail to answer is a ToolMissing, never a stray exception."""

import contextvars
import os
import signal
import stat
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.errors import Terminated, ToolMissing, ToolTimeout


def test_a_timeout_is_a_tool_timeout(tmp_path):
    with pytest.raises(ToolTimeout, match="did not finish within 0.2 s"):
        proc.run(["sleep", "5"], timeout=0.2)


def test_a_file_that_is_not_a_program_is_tool_missing(tmp_path):
    junk = tmp_path / "nvcc"
    junk.write_bytes(b"\x00\x01not a program")
    junk.chmod(junk.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ToolMissing, match="cannot start"):
        proc.run([str(junk)])
    with pytest.raises(ToolMissing, match="cannot start"):
        proc.run([str(tmp_path / "absent")])


# --- Ending tools: a tool's whole process group goes, on a timeout, a signal or a scope.

TREE = """#!/bin/sh
sleep 300 &
echo "$$ $!" > "$1"
wait
"""


def _tree(tmp_path):
    """A tool that starts a child of its own and writes both pids to the file it is given."""
    script = tmp_path / "tree.sh"
    script.write_text(TREE)
    script.chmod(0o755)
    return str(script), tmp_path / "pids"


def _pids(pidfile, timeout=10.0) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = pidfile.read_text() if pidfile.exists() else ""
        if text.endswith("\n"):
            return [int(w) for w in text.split()]
        time.sleep(0.02)
    raise AssertionError("the tool never started")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


def _all_gone(pids, timeout=5.0) -> bool:
    end = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def test_a_timeout_ends_the_tools_children_too(tmp_path):
    script, pidfile = _tree(tmp_path)
    t = time.monotonic()
    with pytest.raises(ToolTimeout):
        proc.run([script, str(pidfile)], timeout=1.0)
    assert time.monotonic() - t < 1.0 + proc.GRACE + 2
    pids = _pids(pidfile)
    assert len(pids) == 2 and _all_gone(pids), pids  # the sleep too, not only the script


def test_a_signal_ends_the_tools_and_raises_terminated(tmp_path):
    script, pidfile = _tree(tmp_path)
    before = signal.getsignal(signal.SIGTERM)

    def kill_when_started():
        _pids(pidfile)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=kill_when_started, daemon=True).start()
    with pytest.raises(Terminated) as err:
        with proc.handle_signals():
            proc.run([script, str(pidfile)], timeout=60)
    assert err.value.signum == signal.SIGTERM and err.value.exit_code == 143
    assert _all_gone(_pids(pidfile))
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
    assert proc.run(["true"]).returncode == 0  # and tools may start again


def test_a_scope_ends_the_tools_of_its_threads_on_an_exception(tmp_path):
    script, pidfile = _tree(tmp_path)
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(RuntimeError, match="boom"):
            with proc.tool_scope():
                fut = pool.submit(contextvars.copy_context().run, proc.run,
                                  [script, str(pidfile)])
                _pids(pidfile)
                raise RuntimeError("boom")
        with pytest.raises(Terminated):
            fut.result(timeout=proc.GRACE + 10)
    assert _all_gone(_pids(pidfile))


def test_each_tool_gets_a_private_tmpdir_removed_after_it(tmp_path, monkeypatch):
    # What an ended tool leaves in its $TMPDIR (cicc's *.lgenfe.bc) must go with it.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script = tmp_path / "tmpuser.sh"
    script.write_text('#!/bin/sh\necho "$TMPDIR"\necho scratch > "$TMPDIR/left-behind"\n')
    script.chmod(0o755)
    used = Path(proc.run([str(script)], env={"PATH": os.environ["PATH"]}).stdout.strip())
    assert used.parent == tmp_path and used.name.startswith("nvstage-tool-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmpuser.sh"]


def test_a_tools_end_is_seen_when_it_happens():
    # Popen.wait(timeout) sleeps up to 50 ms between looks: a stage's end was seen 17 to 48 ms
    # late. The wait is woken by the process's descriptor instead, and reaps it.
    import subprocess

    p = subprocess.Popen(["sleep", "0.3"])
    with proc._Ended(p) as ended:
        assert ended.fd is not None  # Linux 5.3 and later: this machine's
        assert not ended.within(0) and p.returncode is None
        t = time.monotonic()
        assert ended.within(30.0)
        assert time.monotonic() - t < 10 and p.returncode == 0
        assert ended.within(0)  # ended stays ended
    q = subprocess.Popen(["sh", "-c", "exit 7"])
    q.wait()  # reaped before the wait: its end is still its end
    with proc._Ended(q) as ended:
        assert ended.within(0) and q.returncode == 7


# --- A tool dies with nvstage: setpriv asks for it where it can (Python then vforks).

DIES = """
import sys
from nvstage import proc
proc.run([sys.argv[1], sys.argv[2]], tmpdir=sys.argv[3])  # killed: nothing of its own left
"""


def test_a_tool_dies_when_nvstage_is_killed_alone(tmp_path):
    script, pidfile = _tree(tmp_path)
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", DIES, script, str(pidfile), str(tmp_path)])
    tool, _ = _pids(pidfile)
    p.kill()  # nvstage alone, by a signal it cannot catch
    p.wait()
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.kill(tool, 0)
        except ProcessLookupError:
            break
        # a zombie until its parent (init, a subreaper) reaps it: dead all the same
        if Path(f"/proc/{tool}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the tool outlived nvstage")


def test_tools_start_behind_setpriv_only_where_the_kernel_runs_them_as_they_are(tmp_path):
    # setpriv's execvp hands a file the kernel refuses (ENOEXEC) to /bin/sh: only a program
    # the kernel runs here goes behind it; anything else is forked as before.
    if proc._find_setpriv() is None:
        pytest.skip("no setpriv that knows --pdeathsig here: tools start as before")
    import shutil

    true = shutil.which("true")
    assert proc._behind_setpriv(["true"], None)[1:] == ["--pdeathsig", "KILL", "--", "true"]
    copy = tmp_path / "true"
    shutil.copy(true, copy)
    assert proc._behind_setpriv(["./true"], None, cwd=tmp_path)[-1] == "./true"  # its folder
    script, _ = _tree(tmp_path)  # a #! script: its interpreter line is the kernel's to read
    junk = tmp_path / "junk"  # neither ELF nor #!: execvp would hand it to a shell
    junk.write_bytes(b"echo hi\n")
    fake = tmp_path / "fake-elf"  # an ELF header followed by shell text
    fake.write_bytes(b"\x7fELF" + b"\n" * 60 + b"echo hijacked\n")
    data = bytearray(copy.read_bytes())
    data[18:20] = (183 if data[18:20] != (183).to_bytes(2, "little") else 62).to_bytes(2, "little")
    foreign = tmp_path / "foreign"  # another machine's program (AArch64, or x86-64 there)
    foreign.write_bytes(bytes(data))
    for f in (junk, fake, foreign):
        f.chmod(0o755)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (["no-such-tool-anywhere"], [script], [str(junk)], [str(fake)], [str(foreign)],
                 [str(fifo)], [str(tmp_path)], [b"true"]):
        assert proc._behind_setpriv(argv, None) is None, argv
    # A relative folder on PATH is searched from the child's folder: not looked at here.
    assert proc._behind_setpriv(["true"], {"PATH": f":{os.path.dirname(true)}"}) is None
    for f in (junk, fake, foreign):
        with pytest.raises(ToolMissing, match="cannot start"):
            proc.run([str(f)])


def test_a_tool_s_timeout_names_the_tool():
    with pytest.raises(ToolTimeout, match="^'sleep' did not finish"):
        proc.run(["sleep", "5"], timeout=0.2)
