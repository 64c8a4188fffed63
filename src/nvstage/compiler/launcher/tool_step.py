"""A build step that is not nvcc, run through nvstage unchanged: timed and recorded.

    nvstage /usr/bin/c++ -c main.cpp -o main.o      (CMAKE_CXX_COMPILER_LAUNCHER)
    nvstage /usr/bin/ar qc libx.a a.o b.o           (the RULE_LAUNCH_LINK property: links,
    nvstage /usr/bin/c++ a.o b.o -o app              archives, device links, cmake -E rm)

The whole build is in the build log only when every step is: the C++ compiles, the links
and the archives run here. The tool runs as it would without nvstage: the same argv (its
first word as given, looked up on PATH as a shell would), the environment the command was
given (read back from /proc/self/environ: Python sets LC_CTYPE in its own under the C locale),
stdin, stdout and stderr inherited (nothing captured, so its output is its own byte for
byte), the same exit status, and death by the same signal. Nothing is cached.

This is the path a link of a big project takes, so it stays light: the standard library and
``buildlog/current``'s record writer, no more. For that reason it starts its process itself
rather than through ``nvstage.proc``, whose imports cost more than the whole of this path.

The tool stays in the process group nvstage was started in, as ccache keeps a compiler it
waits for and as nvcc keeps cicc, ptxas and gcc: a signal sent to that group (a terminal's
^C, ``timeout``, a CI runner's SIGKILL ending a job, a build tool stopping its jobs) reaches
the tool as it would without nvstage, and a tool that reads the terminal is in its foreground
group (in a group of its own, its first read stopped it: SIGTTIN). A signal sent to nvstage
alone is passed on; a kill that nvstage cannot catch ends the tool too (PR_SET_PDEATHSIG,
set in the child before it runs the tool).
"""

from __future__ import annotations

import os
import time

from nvstage.compiler.buildlog.current import build_identity, entry_text, write_entry

# Passed on to the tool when nvstage alone is sent them (``kill PID``). One sent to the group
# reaches the tool itself: passed on only if the tool is still there ``_SAME_SIGNAL_S``
# later (it caught it). One ignored where nvstage started (nohup, a background job's ^C)
# stays ignored, for the tool too, as a plain exec leaves it.
_FORWARD = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
# What Python ignores at start and a plain exec would leave at its default.
_DEFAULT = ("SIGPIPE", "SIGXFSZ")
# How long a signal that came to nvstage waits to see the tool end by it (sent to the group,
# it reached the tool too) before it is passed on: a second ^C can cut a tool's tidying short.
_SAME_SIGNAL_S = 0.1
PR_SET_PDEATHSIG = 1


def on_path(name: str) -> bool:
    """A program ``name`` on PATH, as a shell finds it (``nvstage g++ ...`` in a Makefile)."""
    if not name or name.startswith("-") or os.sep in name:
        return False
    for folder in os.get_exec_path():
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


def _environ() -> dict:
    """The environment this process was started with, as bytes."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return os.environb if hasattr(os, "environb") else dict(os.environ)
    env = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq and key:
            env[key] = value
    return env


def run_step(argv: list[str]) -> int:
    """Run ``argv`` as a build step and record it; the exit status a shell would see, and
    for a tool ended by a signal minus that signal (``subprocess``'s way: ``cli/main.py``
    ends nvstage by the same signal)."""
    import _signal

    started, t0 = time.time(), time.perf_counter()
    try:
        cwd = os.getcwd()
    except OSError:  # run from a folder since removed: the tool runs there all the same
        cwd = None
    pending: list[int] = []
    child: list[int] = []

    def forward(signum, frame):
        if not child:
            pending.append(signum)
            return
        end = time.monotonic() + _SAME_SIGNAL_S
        while True:  # ended by it already (it came to the whole group): not sent again
            try:
                if os.waitid(os.P_PID, child[0], os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    return
            except OSError:
                return
            if time.monotonic() >= end:
                break
            time.sleep(0.005)
        try:
            os.kill(child[0], signum)
        except OSError:
            pass

    signals = [getattr(_signal, n) for n in _FORWARD if hasattr(_signal, n)]
    for s in signals:
        if _signal.getsignal(s) != _signal.SIG_IGN:  # nohup's stays: the tool inherits it
            _signal.signal(s, forward)
    failed = _spawn(argv, _environ(), [getattr(_signal, n) for n in _DEFAULT
                                       if hasattr(_signal, n)], child)
    if failed is not None:
        # As a shell says it, and with its status: 127 not found, 126 found but not run.
        code = 127 if failed.errno in (errno_ENOENT, errno_ENOTDIR) else 126
        os.write(2, f"nvstage: cannot run {argv[0]!r}: {failed.strerror or failed}\n".encode(
            "utf-8", "surrogateescape"))
        _record(argv, cwd, started, time.perf_counter() - t0, code,
                f"cannot run {argv[0]}: {failed.strerror or failed}")
        return code
    for s in pending:
        forward(s, None)
    _, status = os.waitpid(child[0], 0)
    seconds = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    signum = -code if code < 0 else None
    shown = 128 + signum if signum else code
    _record(argv, cwd, started, seconds, shown,
            None if code == 0 else f"killed by signal {signum}" if signum
            else f"exited with {code}")
    return code


errno_ENOENT, errno_ENOTDIR, errno_ENOEXEC = 2, 20, 8  # Linux's (no errno module to load)


def _spawn(argv: list[str], env: dict, defaults: list, child: list) -> OSError | None:
    """Start ``argv`` (looked up on PATH as a shell does) in this process's group, its pid
    put in ``child``; the error that kept it from running, if one did.

    fork and exec rather than posix_spawn: the child first asks to be killed when nvstage
    dies (PR_SET_PDEATHSIG: a SIGKILL to nvstage alone, which it cannot pass on). The
    request holds while the thread that forked lives: here the only one, which waits."""
    parent = os.getpid()
    r, w = os.pipe2(os.O_CLOEXEC)  # the exec's error, if any; closed by a good exec
    try:
        pid = os.fork()
    except OSError as e:
        os.close(r)
        os.close(w)
        return e
    if pid == 0:  # the child: nothing here may return into nvstage
        try:
            os.close(r)
            import _signal

            for s in defaults:
                _signal.signal(s, _signal.SIG_DFL)
            _die_with_parent(_signal.SIGKILL)
            if os.getppid() != parent:  # nvstage died before the request was made
                os._exit(128 + _signal.SIGKILL)
            try:
                os.execvpe(argv[0], argv, env)
            except OSError as e:  # execvp's way and a shell's: what the kernel cannot run
                if e.errno != errno_ENOEXEC or not e.filename:  # (no #!) is a shell script
                    raise
                os.execve("/bin/sh", ["/bin/sh", e.filename, *argv[1:]], env)
        except OSError as e:
            try:
                os.write(w, str(e.errno or 0).encode() + b"\0" + os.fsencode(
                    e.strerror or str(e)))
            finally:
                os._exit(127)
        except BaseException:
            pass
        os._exit(127)
    os.close(w)
    child.append(pid)
    try:
        said = b""
        while True:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            said += chunk
    finally:
        os.close(r)
    if not said:
        return None
    os.waitpid(pid, 0)
    child.clear()
    number, _, text = said.partition(b"\0")
    return OSError(int(number or 0), os.fsdecode(text))


def _die_with_parent(sig: int) -> None:
    """PR_SET_PDEATHSIG in this (forked) process: libc's prctl called through ``_ctypes``
    (1 ms of the child's, where importing ``ctypes`` is 5), else ``ctypes``; neither there,
    the tool runs all the same."""
    try:
        import _ctypes

        _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None), "prctl"),
                              (PR_SET_PDEATHSIG, int(sig), 0, 0, 0))
        return
    except Exception:  # a Python whose private _ctypes differs
        pass
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except Exception:  # no ctypes, no libc
        pass


def _record(argv: list[str], cwd: str | None, started: float, seconds: float, code: int,
            reason: str | None) -> None:
    if cwd is None:  # no folder to say it ran in, nor to find the build log from
        return
    try:
        text = entry_text([("argv", argv), ("cwd", cwd), ("started", started),
                           ("seconds", round(seconds, 6)),
                           ("status", "ran" if code == 0 else "failed"), ("exit_code", code),
                           ("pid", os.getpid()), ("reason", reason), ("hit", False),
                           ("build_id", build_identity())])
        write_entry(cwd, os.environ, started, "s", text)
    except Exception:  # a build log that cannot be written never fails the build
        pass
