"""What keeps nvstage invisible in front of a build step where the step's process is odd
(issue 43): a standard stream it was started without, a tool that died of a signal, a current
folder removed under it. Standard library only, and only imported where one of them happens
(``cli/main.py``, ``cli/compile.py``)."""

from __future__ import annotations

import sys

import posix  # os is not loaded on a hit without site (cli/bare.py)


def hold_closed_streams() -> None:
    """A standard stream the command was started without (``cmd >&-``): Python leaves
    ``sys.stdout`` None there, and the first file this process opens would take the number
    and receive what is printed. /dev/null holds the number instead, closed on exec, so what
    nvstage would print there goes nowhere, and a tool nvstage runs finds the stream closed,
    as it would without nvstage."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            posix.fstat(fd)
        except OSError:
            # The lowest free number: this one, the lower ones being open by now.
            held = posix.open("/dev/null", posix.O_RDWR | posix.O_CLOEXEC)
            if held != fd:
                posix.dup2(held, fd, False)
                posix.close(held)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))


def exit_as(code: int) -> None:
    """End this process with ``code``, a negative one (a tool's death by that signal, as
    ``subprocess`` says it) by the same signal, as a shell and a build tool see the tool end:
    137 for the OOM killer's SIGKILL, a make that stops on a ^C'd step."""
    if code < 0:
        import _signal

        try:
            _signal.signal(-code, _signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP: default always
            pass
        try:  # the tool's core dump is the tool's: none of this interpreter's beside it
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, OSError, ValueError):
            pass
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [-code])
        posix.kill(posix.getpid(), -code)
        code = 128 - code  # a signal whose default is not to end a process
    posix._exit(code)


# What names the current folder after it was removed (a clean of the build folder under a
# running step): the kernel still holds it for this process and for every tool it starts.
GONE = "/proc/self/cwd"
_CD = "cd to a folder that exists, and run it again"


def folder_of(req) -> str:
    """The folder ``req`` (a ``CompileRequest``) builds in: the current one; where that was
    removed since, ``GONE``, through which the tools run in it as they would without nvstage:
    absolute paths build, and what a relative one names (the source, the output: nvcc's
    a.out or NAME.o without -o; the keep folder) is one line (a ``UsageError``), as nothing
    for plain nvcc, never a path resolved through the folder's old name ("/x (deleted)")."""
    import os

    from nvstage.errors import UsageError, one_line

    try:
        return os.getcwd()
    except FileNotFoundError:
        if not os.path.isdir(GONE):
            raise UsageError("the current folder was removed since this command started",
                             hint=_CD) from None
    for what, path in (("the source", req.source), ("the output", req.options.output or ""),
                       ("the keep folder", req.keep_folder)):
        if path is not None and not path.startswith("/"):
            raise UsageError(f"the current folder was removed since this command started: "
                             f"{what} ({one_line(path) or 'none named'}) would be in it",
                             hint="name it by an absolute path, or cd to a folder that exists")
    return GONE


def refused_without_folder(what: str, json_out: bool) -> int:
    """0 in a folder that is there; where it was removed, one line said and its exit status,
    for a build that runs only in a folder (Triton's imports FILE.py, and names its files,
    from it)."""
    try:
        posix.getcwd()
        return 0
    except FileNotFoundError:
        from nvstage.cli.common import error_out
        from nvstage.errors import UsageError

        err = UsageError(f"the current folder was removed since this command started: a "
                         f"{what} build runs in a folder", hint=_CD)
        error_out(err, json_out)
        return err.exit_code


def nothing_left() -> bool:
    """Whether nothing is left for the interpreter's exit to do: no thread but daemons still
    running (a pool's workers are joined at exit) and no finalizer due at exit (a temporary
    folder not yet removed). Then the exit may skip the teardown; otherwise it runs it."""
    if sys.getprofile() is not None or sys.gettrace() is not None or "triton" in sys.modules:
        # A profiler or tracer writes its results after main() returns (cProfile -o); a
        # Triton file ran the user's module, whose native code's exit is its own.
        return False
    import threading

    if any(t is not threading.main_thread() and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        return False
    import weakref

    try:
        due = any(getattr(info, "atexit", False)
                  for info in list(weakref.finalize._registry.values()))
    except Exception:  # a Python that keeps them otherwise: exit the usual way
        return False
    if due:
        return False
    import atexit

    # Handlers registered at exit by a library we loaded: the usual way, but for logging's
    # own (registered on its import, by concurrent.futures), which only flushes handlers,
    # and the finalizers' own, with none due.
    logging = sys.modules.get("logging")
    ours = (logging is not None) + bool(getattr(weakref.finalize, "_registered_with_atexit",
                                                False))
    if logging is not None and any(ref() not in (None, logging.lastResort)
                                   for ref in getattr(logging, "_handlerList", [list])):
        return False
    return getattr(atexit, "_ncallbacks", lambda: ours + 1)() == ours
