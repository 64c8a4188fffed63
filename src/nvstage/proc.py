"""The only module that starts subprocesses: always from an argument list, never a shell.

Every tool stays in the caller's process group, as nvcc keeps cicc, ptxas and gcc and as ccache
keeps the compiler it waits for: whatever a build does to its step's group reaches the tools
and what they started, as it would without nvstage. A SIGKILL to the group (``timeout -s
KILL``, a CI runner ending a job) ends them all, however deep (a process group is kept by a
grandchild whose parent died); a terminal's ^Z stops them and ``fg`` resumes them; its ^C and
hangup reach them and nvstage alike. (Tools in a session of their own, as ``run``'s were, outlived
a group SIGKILL below the first level and ran on under a ^Z.)

- ``run``'s (nvcc's stages, captured: stdin /dev/null, stdout and stderr piped) read no
  terminal. A stage that dies of the signal that came to nvstage's group is no failed stage:
  nvstage ends the build by that signal (``_wait``).
- ``call``'s (the launcher's plain nvcc, with the user's streams) read a terminal as they would
  without nvstage, its foreground group being theirs.

Both ask the kernel to SIGKILL them when nvstage dies (PR_SET_PDEATHSIG): a kill nvstage
cannot catch, sent to it alone, ends them too (``run``'s through setpriv where it can,
``_behind_setpriv``; otherwise, and ``call``'s, in the forked child). nvstage ends a tool
with every process it started (read from /proc, since the group is the build's and shared):
on a timeout, when the code waiting for it is interrupted, when a ``tool_scope`` exits with an
exception, and, inside ``handle_signals``, on SIGINT, SIGTERM and SIGHUP.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from nvstage.errors import Terminated, ToolMissing, ToolTimeout

# Seconds a group gets between its stop signal (SIGTERM, or ``call``'s) and SIGKILL, to tidy up.
GRACE = 2.0
# How often a waiting thread looks whether its tool should be ended (a signal or a scope).
_POLL = 0.2
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # wall time of the child, measured around the wait


def run(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    input_text: str | None = None,
    errors: str = "replace",
    tmpdir: str | None = None,
) -> Completed:
    """Run ``argv`` to completion and capture its output (text, undecodable bytes replaced).

    ``errors="surrogateescape"`` for output that carries file names to be used again (nvcc's
    --dryrun plan): each undecodable byte then comes back as itself when the name is given
    to a tool or opened (``os.fsdecode``'s rule), where "replace" turns it into U+FFFD and so
    names another file. Text only shown to people keeps "replace".

    ``tmpdir``: the tool's $TMPDIR (else one of its own, removed with the run).

    Raises ToolMissing when it cannot start, ToolTimeout when it ran past ``timeout``, and
    Terminated when a signal or its ``tool_scope`` ended it; its group is ended each time.
    """
    argv = [os.fspath(a) for a in argv]
    scope = _scope.get()
    _check(scope)
    t0 = time.perf_counter()
    p = tmp = None
    files: list = []
    try:
        # A $TMPDIR of its own, removed with the run: what an ended tool leaves there (cicc's
        # *.lgenfe.bc) goes too. No plan names it (nvcc plans in the build's work folder), and
        # no cache key includes it.
        if tmpdir is None:
            tmp = _new_tool_folder()
        if tmp is not None or tmpdir is not None:
            env = {**(os.environ if env is None else env), "TMPDIR": tmpdir or tmp}
        # What the tool prints goes to unlinked files, not pipes (as ccache keeps a compiler's
        # output): a process the tool leaves behind (a host compiler's background child) holds
        # a pipe open, and reading one to its end would wait for it; the tool is waited for,
        # as nvcc waits for its tools. Its standard input is the build's, as under plain nvcc
        # (a closed one stays closed), unless nvstage gives it text.
        files = [_memory_file() for _ in range(2)]
        if input_text is not None:
            files.append(_memory_file())
            files[2].write(input_text.encode())
            files[2].seek(0)
        env = dict(env) if env is not None else None
        spawn = _behind_setpriv(argv, env, cwd)
        try:
            p = subprocess.Popen(
                spawn or argv, cwd=cwd, env=env,
                stdin=files[2] if input_text is not None else None,
                stdout=files[0], stderr=files[1], shell=False,
                preexec_fn=None if spawn else _dies_with_us())
        except OSError as e:  # not found, not executable, not a program (ENOEXEC), ...
            raise ToolMissing(f"cannot start {argv[0]!r}: {e.strerror or e}") from e
        p.args = argv  # the tool's words, not setpriv's, in what is said of it
        _track(p, scope)
        _wait(p, timeout, scope)
        out, err = (_text(f, errors) for f in files[:2])
    except BaseException:
        if p is not None:
            _end(p)
        raise
    finally:
        if p is not None:
            _untrack(p, scope)
        for f in files:
            with contextlib.suppress(OSError):
                f.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return Completed(tuple(argv), p.returncode, out, err, time.perf_counter() - t0)


def _new_tool_folder() -> str | None:
    """A new $TMPDIR for tools, its owner named (``leftovers.make``: swept if nvstage is
    killed); None where $TMPDIR cannot hold one (the tool may not need one)."""
    from nvstage.compiler.pipeline import leftovers

    try:
        return leftovers.make("nvstage-tool-")
    except OSError:
        return None


@contextlib.contextmanager
def tool_folder() -> Iterator[str | None]:
    """One $TMPDIR for several tools (a build's, as nvcc gives its tools one): a folder
    ``_new_tool_folder`` made, removed with what the tools left in it when the block ends."""
    tmp = _new_tool_folder()
    try:
        yield tmp
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _memory_file():
    """A file in memory (no file system: nothing to leave behind, whatever $TMPDIR is)."""
    return os.fdopen(os.memfd_create("nvstage-tool"), "w+b")


def _text(f, errors: str) -> str:
    """What a tool wrote into ``f``, as text the way a text pipe reads it: decoded (the file
    system's encoding for names to be used again), "\r\n" and "\r" read as "\n"."""
    f.seek(0)
    encoding = sys.getfilesystemencoding() if errors == "surrogateescape" else "utf-8"
    return f.read().decode(encoding, errors).replace("\r\n", "\n").replace("\r", "\n")


def _wait(p: subprocess.Popen, timeout: float | None, scope: _Scope | None) -> None:
    """Wait for ``p`` in short steps, so that a signal or an ended scope is seen in time."""
    end = None if timeout is None else time.monotonic() + timeout
    with _Ended(p) as ended:
        while True:
            step = _POLL if end is None else min(_POLL, max(0.0, end - time.monotonic()))
            if not ended.within(step):
                _check(scope)
                if end is not None and time.monotonic() >= end:
                    raise ToolTimeout(f"{p.args[0]!r} did not finish within {timeout:g} s")
                continue
            if p.returncode in _BY_SIGNAL and _installed:
                _await_signal()  # killed by the group's signal: nvstage's own is on its way
            _check(scope)  # ended by our SIGTERM: that is no answer from the tool
            return


class _Ended:
    """A tool's end, seen when it happens: ``Popen.wait(timeout)`` polls with sleeps that grow
    to 50 ms, so a tool's end was seen 17 to 48 ms late (each stage of a build's critical path
    paid it). The kernel's process descriptor (``pidfd_open``, Linux 5.3) wakes the wait at
    once; where there is none, ``Popen.wait`` it is."""

    def __init__(self, p: subprocess.Popen):
        self.p, self.fd = p, None

    def __enter__(self) -> _Ended:
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(self.p.pid)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def within(self, seconds: float) -> bool:
        """Whether the tool ended (and was reaped) within ``seconds``."""
        if self.fd is None:
            try:
                self.p.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return False
            return True
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        if not poller.poll(max(0, int(seconds * 1000))):
            return self.p.poll() is not None  # ended just as the poll timed out
        self.p.wait()  # ended: the wait returns at once
        return True


# A tool's deaths by a signal that a terminal or a build sends the whole group, nvstage too.
_BY_SIGNAL = tuple(-s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
_AWAIT_S = 0.5


def _await_signal() -> None:
    """Wait (``_AWAIT_S`` at most) for ``handle_signals`` to have seen a signal: sent to the
    group, it reached the tool and nvstage at once, and the tool may have died of it before
    Python ran nvstage's handler (in the main thread). A stage killed so is the build ended,
    never a failed stage that plain nvcc would be asked to replay."""
    end = time.monotonic() + _AWAIT_S
    while _stopping is None and time.monotonic() < end:
        time.sleep(0.005)


@dataclass(eq=False)
class _Scope:
    procs: set = field(default_factory=set)
    ended: bool = False


_live: dict[int, subprocess.Popen] = {}  # every running tool, by its process group id
# Re-entrant: the signal handler runs in the main thread, maybe while that thread holds it.
_lock = threading.RLock()
_stopping: int | None = None  # the signal that asked every tool to end, once one came
_installed = 0  # handle_signals blocks active (nested ones leave the first in charge)
_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("nvstage_tool_scope",
                                                                      default=None)


def _check(scope: _Scope | None) -> None:
    if _stopping is not None:
        raise Terminated(_stopping)
    if scope is not None and scope.ended:
        raise Terminated()


def _track(p: subprocess.Popen, scope: _Scope | None) -> None:
    with _lock:
        _live[p.pid] = p
        if scope is not None:
            scope.procs.add(p)
    _check(scope)  # a signal that came while it started found it not yet listed


def _untrack(p: subprocess.Popen, scope: _Scope | None) -> None:
    with _lock:
        _live.pop(p.pid, None)
        if scope is not None:
            scope.procs.discard(p)


_PR_SET_PDEATHSIG = 1
_prctl: list = []  # libc's prctl, loaded once in the parent (a child must not import)
# util-linux's setpriv, at its fixed places (never from PATH), once it is seen to know
# --pdeathsig (2.33 and later; RHEL 8's 2.32 does not).
_SETPRIV = ("/usr/bin/setpriv", "/bin/setpriv")
_setpriv: list = []


def _behind_setpriv(argv: list[str], env: Mapping[str, str] | None,
                    cwd: str | os.PathLike | None = None) -> list[str] | None:
    """``argv`` started by ``setpriv --pdeathsig KILL``, which asks for the same death
    signal ``_dies_with_us`` does and then execs the tool (same pid, same argv). Without a
    ``preexec_fn`` Python starts the child with vfork: forking this process, threads and
    heap, to run prctl in Python cost 3 to 4 ms of wall and about 1.5 ms of CPU a tool here,
    where setpriv's own start costs about 1 ms (docs/benchmarks.md).

    Only for a tool the kernel runs as it is, so that setpriv's execvp, which hands a file the
    kernel refuses (ENOEXEC) to /bin/sh, has nothing to hand: an ELF program of this Python's
    own class, byte order and machine whose loader, if it names one, is there (``_runs_here``),
    found where the child will look (a bare name on a ``PATH`` of absolute folders only: a
    relative one is searched from the child's folder). Anything else (a ``#!`` script, another
    machine's binary, a missing loader or tool, no setpriv that knows the option, off Linux)
    gets None, and the caller forks as before: Popen's own error (ToolMissing) is then said.

    setpriv does not look whether nvstage died before it made its request, as
    ``_dies_with_us`` does: a SIGKILL to nvstage alone in that millisecond of a tool's start
    leaves the tool to finish alone (a signal to the build's group still reaches it)."""
    if not _setpriv:
        _setpriv.append(_find_setpriv())
    setpriv = _setpriv[0]
    if setpriv is None or not argv or not all(isinstance(a, str) for a in argv):
        return None
    tool = argv[0]
    if "/" not in tool:
        folders = os.get_exec_path(env)
        if not all(f.startswith("/") for f in folders):
            return None
        tool = shutil.which(tool, path=os.pathsep.join(folders)) or ""
    elif cwd is not None:  # the child runs a relative name from its own folder
        tool = os.path.join(os.fspath(cwd), tool)
    if not tool or not _runs_here(tool):
        return None
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]


def _elf_head(path: str, size: int = 4096) -> bytes | None:
    """The first ``size`` bytes of the regular, executable file ``path``; None otherwise.
    O_NONBLOCK and O_NOCTTY: a FIFO or a terminal named as a tool is neither waited on nor
    taken as this process's terminal."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not (stat.S_ISREG(os.fstat(fd).st_mode) and os.access(path, os.X_OK)):
            return None
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _runs_here(path: str) -> bool:
    """Whether the kernel runs ``path`` as an ELF program here: this Python's own class, byte
    order and machine, an executable or shared object, and its loader (PT_INTERP), if it
    names one, an ELF file that is there. Read from its first 4 KiB, where linkers put the
    program headers; a table beyond them is not looked for (False)."""
    if not _elf_ident:
        head = _elf_head("/proc/self/exe", 20)
        _elf_ident.append(head[4:6] + head[18:20] if head and head[:4] == b"\x7fELF" else None)
    ours, head = _elf_ident[0], _elf_head(path)
    if ours is None or head is None or len(head) < 64 or head[:4] != b"\x7fELF" or \
            head[4:6] + head[18:20] != ours:
        return False
    order = "little" if head[5] == 1 else "big"

    def num(at: int, n: int) -> int:
        return int.from_bytes(head[at:at + n], order)

    if num(16, 2) not in (2, 3):  # ET_EXEC, ET_DYN
        return False
    wide = head[4] == 2
    phoff, entsize, count = (num(32, 8), num(54, 2), num(56, 2)) if wide else \
        (num(28, 4), num(42, 2), num(44, 2))
    if not count or entsize < (56 if wide else 32) or phoff + entsize * count > len(head):
        return False
    for k in range(count):
        at = phoff + k * entsize
        if num(at, 4) != 3:  # PT_INTERP
            continue
        off, size = (num(at + 8, 8), num(at + 32, 8)) if wide else \
            (num(at + 4, 4), num(at + 16, 4))
        if not 1 < size <= 4096 or off + size > len(head):
            return False
        loader = head[off:off + size].split(b"\0", 1)[0]
        got = _elf_head(os.fsdecode(loader), 4) if loader.startswith(b"/") else None
        return got == b"\x7fELF"
    return True


_elf_ident: list = []  # this Python's ELF class, byte order and machine, read once


def _find_setpriv() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    for path in _SETPRIV:
        head = _elf_head(path, 1 << 20)
        if head is not None and b"pdeathsig" in head:  # its option table and help name it
            return path
    return None


def _dies_with_us() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when the thread that started
    it ends: nvstage's death, by any signal (the thread waits for its child). None where
    there is no prctl."""
    if not _prctl:
        try:
            import ctypes

            _prctl.append(ctypes.CDLL(None, use_errno=True).prctl)
        except (ImportError, OSError, AttributeError):
            _prctl.append(None)
    prctl = _prctl[0]
    if prctl is None or not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # nvstage died before the request was made
            os.kill(os.getpid(), signal.SIGKILL)

    return in_child


def _started(pid: int) -> int | None:
    """``pid``'s start time (its /proc stat's 22nd field): a pid with another is another
    process, one that took a free number."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start time) of ``pid``'s children, theirs, and so on, as /proc has them now."""
    found, todo = [], [pid]
    while todo and len(found) < 10_000:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(w) for w in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                started = _started(kid)
                if started is not None:
                    found.append((kid, started))
                    todo.append(kid)
    return found


def signal_descendants(sig: int, pid: int | None = None) -> None:
    """``sig`` to every process ``pid`` (this one) started, theirs, and so on: all of them
    read first, so that none is orphaned out of sight by its parent's death (SIGKILL)."""
    for kid, started in _descendants(os.getpid() if pid is None else pid):
        if _started(kid) == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(kid, sig)


def _signal_tree(p: subprocess.Popen, sig: int) -> None:
    """``sig`` to a tool and every process it started, those seen before (since orphaned)
    included, each while its pid still names it."""
    with _lock:
        seen = dict(getattr(p, "nvstage_tree", ()))
        if p.returncode is None:
            seen.update(_descendants(p.pid))
        p.nvstage_tree = seen
    targets = [] if p.returncode is not None else [p.pid]
    targets += [pid for pid, started in seen.items() if _started(pid) == started]
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _ended_by_itself(p: subprocess.Popen, within: float) -> bool:
    """Whether ``p`` ends within ``within`` seconds (unreaped: the waiting thread reaps it)."""
    end = time.monotonic() + within
    while True:
        try:
            if p.returncode is not None or os.waitid(
                    os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                return True
        except ChildProcessError:  # reaped already
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)


# How long a tool is given to end by the signal that came to nvstage before nvstage sends it
# its own: sent to the group (a ^C), it reached the tool too, and a second one can cut the
# tool's tidying short.
_SAME_SIGNAL_S = 0.1


def _ask_to_end(p: subprocess.Popen) -> None:
    """Ask ``p`` and what it started to end, once, with the signal it tidies up on (``call``'s
    ``stop``; SIGTERM for the rest): a second one could cut its tidying short."""
    with _lock:
        if getattr(p, "nvstage_asked", False):
            return
        p.nvstage_asked = True
    if not _ended_by_itself(p, _SAME_SIGNAL_S):
        _signal_tree(p, getattr(p, "nvstage_stop", signal.SIGTERM))


def _end(p: subprocess.Popen) -> None:
    """End ``p`` and what it started: its stop signal, ``GRACE`` seconds to clean up, then
    SIGKILL.

    Only the thread that started ``p`` calls this (it alone reaps ``p``)."""
    try:
        _ask_to_end(p)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(GRACE)
    finally:
        # Also what outlived it or ignored the stop signal (each by its pid and start time).
        _signal_tree(p, signal.SIGKILL)
    p.wait()


def _end_groups(groups) -> None:
    """Each group asked to end; the threads waiting for them finish the job (``_end``)."""
    for p in groups:
        _ask_to_end(p)


@contextlib.contextmanager
def tool_scope() -> Iterator[None]:
    """Tools started inside the block are ended if it exits with an exception.

    Threads count when their work runs under a copy of the block's context
    (``contextvars.copy_context().run``): a build's pool does, so the KeyboardInterrupt
    Python raises in the main thread never leaves the workers' tools running.
    """
    scope = _Scope()
    token = _scope.set(scope)
    try:
        yield
    except BaseException:
        with _lock:
            scope.ended = True
            groups = list(scope.procs)
        _end_groups(groups)
        raise
    finally:
        _scope.reset(token)


def _on_signal(signum: int, frame) -> None:
    global _stopping
    with _lock:
        first = _stopping is None
        if first:
            _stopping = signum
        groups = list(_live.values())
    _end_groups(groups)
    # Only the first signal raises: a second one must not cut the cleanup (the scratch
    # folders' removal in ``finally`` blocks) short. It still ends any tool started since.
    if first:
        raise Terminated(signum)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Inside the block, SIGINT, SIGTERM and SIGHUP end every tool started through ``run``
    (each whole group), refuse new ones, and raise ``Terminated`` in the main thread, so that
    ``finally`` blocks remove scratch folders on the way out. The CLI wraps every command in
    it; a library caller may too. Python hands signals to the main thread only: elsewhere,
    and inside an outer block, this does nothing. An ignored signal (``nohup``) stays so.
    """
    global _installed, _stopping
    if threading.current_thread() is not threading.main_thread() or _installed:
        yield
        return
    old = {}
    for s in SIGNALS:
        prev = signal.getsignal(s)
        if prev is not signal.SIG_IGN:
            old[s] = signal.signal(s, _on_signal)
    _installed += 1
    try:
        yield
    finally:
        _installed -= 1
        for s, prev in old.items():
            signal.signal(s, prev if prev is not None else signal.SIG_DFL)
        with _lock:
            _stopping = None


def output(argv: Sequence[str], **kw) -> str:
    """stdout+stderr of a quick informational command (versions, listings); never raises on rc."""
    cp = run(argv, **kw)
    return cp.stdout + cp.stderr


def call(argv: Sequence[str], *, cwd: str | os.PathLike | None = None,
         env: Mapping[str, str] | None = None, stop: int = signal.SIGTERM,
         leftovers: Callable[[int, int], None] | None = None) -> int:
    """Run ``argv`` with this process's stdin, stdout and stderr (what it prints goes out as
    it prints it, byte for byte) and return its exit status: the launcher's plain nvcc.

    In nvstage's process group, as nvcc keeps its own tools: a signal to the build's group
    reaches it and what it started, and it reads a terminal as it would without nvstage.
    Ended with nvstage's tools on a signal (with every process it started, read from /proc:
    nvcc ignores SIGINT while it waits for one): asked with ``stop`` (nvcc removes its
    temporary files on SIGINT only), then SIGKILL. Once a tool nvstage ended is gone,
    ``leftovers(pid, started_ns)`` may remove what it left (its $TMPDIR is the user's, not
    one of nvstage's as ``run`` gives). Raises ToolMissing when it cannot start."""
    argv = [os.fspath(a) for a in argv]
    scope = _scope.get()
    _check(scope)
    started_ns = time.time_ns()
    try:
        p = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None,
                             shell=False, preexec_fn=_dies_with_us())
    except OSError as e:
        raise ToolMissing(f"cannot start {argv[0]!r}: {e.strerror or e}") from e
    p.nvstage_stop = stop  # before it is listed: a signal handler may end it from then on
    try:
        _track(p, scope)  # inside: a signal seen here ends the started nvcc too
        with _Ended(p) as ended:
            while not ended.within(_POLL):
                _check(scope)
            return p.returncode
    except BaseException:
        try:
            _end(p)
        finally:
            if leftovers is not None:
                leftovers(p.pid, started_ns)
        raise
    finally:
        _untrack(p, scope)


def start_detached(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
    """Start ``argv`` on its own, outlasting this process: a session of its own (no terminal's
    signals reach it), the root folder as its current one, its standard streams /dev/null and
    no other descriptor of ours (a build waits for its commands' streams to close). The
    resident nvstage (``compiler/launcher/resident/server.py``). Its pid; it is never waited for
    here (it outlives us; init reaps it)."""
    p = subprocess.Popen([os.fspath(a) for a in argv], cwd="/", stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(env) if env is not None else None, close_fds=True,
                         start_new_session=True)
    p.returncode = 0  # not ours to wait for: no ResourceWarning when this object goes
    return p.pid
