"""What keeps nvstage invisible in front of a build step where the step's process is odd
(issue 43): a standard stream it was started without, a tool that died of a signal.
Standard library only, and only imported where one of them happens (``cli/main.py``)."""

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
