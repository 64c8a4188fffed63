"""A build step that is not nvcc, run through nvstage unchanged: timed and recorded.

    nvstage /usr/bin/c++ -c main.cpp -o main.o      (CMAKE_CXX_COMPILER_LAUNCHER)
    nvstage /usr/bin/ar qc libx.a a.o b.o           (the RULE_LAUNCH_LINK property: links,
    nvstage /usr/bin/c++ a.o b.o -o app              archives, device links, cmake -E rm)

The whole build is in the build record only when every step is: the C++ compiles, the links
and the archives run here. The tool runs as it would without nvstage: the same argv (its
first word as given, looked up on PATH as a shell would), the environment the command was
given (read back from /proc/self/environ: Python sets LC_CTYPE in its own under the C locale),
stdin, stdout and stderr inherited (nothing captured, so its output is its own byte for
byte), the same exit status, and death by the same signal. Nothing is cached.

This is the path a link of a big project takes, so it stays light: the standard library and
``compiler/warm``'s record writer, no more. For that reason it starts its process itself
(``os.posix_spawnp``) rather than through ``nvstage.proc``, whose imports cost more than the
whole of this path.
"""

from __future__ import annotations

import os
import time

from nvstage.compiler.warm.build_record import build_identity, entry_text, write_entry

# Forwarded to the tool, which runs in a process group of its own: a signal sent to the
# group nvstage is in (a terminal's ^C, a build tool stopping its jobs) reaches it once.
_FORWARD = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
# What Python ignores at start and a plain exec would leave at its default.
_DEFAULT = ("SIGPIPE", "SIGXFSZ")


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
    """Run ``argv`` as a build step and record it; the exit status a shell would see (a
    tool ended by a signal ends this process by the same signal)."""
    import _signal

    started, t0 = time.time(), time.perf_counter()
    cwd = os.getcwd()
    pending: list[int] = []
    child: list[int] = []

    def forward(signum, frame):
        if child:
            try:
                os.kill(child[0], signum)
            except OSError:
                pass
        else:
            pending.append(signum)

    signals = [getattr(_signal, n) for n in _FORWARD if hasattr(_signal, n)]
    for s in signals:
        _signal.signal(s, forward)
    try:
        pid = os.posix_spawnp(argv[0], argv, _environ(), setpgroup=0,
                              setsigdef=[getattr(_signal, n) for n in _DEFAULT
                                         if hasattr(_signal, n)])
    except OSError as e:
        # As a shell says it: the step fails, and says why.
        os.write(2, f"nvstage: cannot run {argv[0]!r}: {e.strerror or e}\n".encode(
            "utf-8", "surrogateescape"))
        _record(argv, cwd, started, time.perf_counter() - t0, 127,
                f"cannot run {argv[0]}: {e.strerror or e}")
        return 127
    child.append(pid)
    for s in pending:
        forward(s, None)
    _, status = os.waitpid(pid, 0)
    seconds = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    signum = -code if code < 0 else None
    shown = 128 + signum if signum else code
    _record(argv, cwd, started, seconds, shown,
            None if code == 0 else f"killed by signal {signum}" if signum
            else f"exited with {code}")
    if signum:
        for s in signals:
            _signal.signal(s, _signal.SIG_DFL)
        _signal.signal(signum, _signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return shown


def _record(argv: list[str], cwd: str, started: float, seconds: float, code: int,
            reason: str | None) -> None:
    try:
        text = entry_text([("argv", argv), ("cwd", cwd), ("started", started),
                           ("seconds", round(seconds, 6)),
                           ("status", "ran" if code == 0 else "failed"), ("exit_code", code),
                           ("pid", os.getpid()), ("reason", reason), ("hit", False),
                           ("build_id", build_identity())])
        write_entry(cwd, os.environ, started, "s", text)
    except Exception:  # a build record that cannot be written never fails the build
        pass
