"""A GNU make jobserver client: job slots from the build that started nvstage.

Under ``make -jN`` (or a ninja run by such a make), make hands its children a pool of N-1
tokens; each child owns one implicit slot and must take a token (one byte) for each further
job it runs at once, and give every token back, even when it fails or is killed, or the
build loses slots. ``MAKEFLAGS`` names the pool: ``--jobserver-auth=fifo:PATH`` (make 4.4+) or
``--jobserver-auth=R,W`` / ``--jobserver-fds=R,W`` (pipe descriptors; Debian's make 4.3 passes
them only to recipes marked ``+`` or naming ``$(MAKE)``, so they may be closed here: then there
is no jobserver). The ninja wheel here is a client only, like us.

Without a jobserver nvstage runs one stage at a time inside a build (``NVSTAGE_JOBS`` says
otherwise): a build that already runs N compilers must not get N times our thread pool.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import threading

_AUTH = re.compile(r"--jobserver-(?:auth|fds)=(\S+)")


class JobServer:
    """Tokens from a make jobserver; ``acquire``/``release`` from any thread."""

    def __init__(self, read_fd: int, write_fd: int, owned: bool):
        self.read_fd, self.write_fd, self._owned = read_fd, write_fd, owned
        self._held: list[bytes] = []
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> JobServer | None:
        """The jobserver ``MAKEFLAGS`` names, if its pipe or fifo is really open to us."""
        flags = (environ if environ is not None else os.environ).get("MAKEFLAGS", "")
        found = _AUTH.findall(flags)
        if not found:
            return None
        auth = found[-1]  # make appends; the last one is the innermost make's
        if auth.startswith("fifo:"):
            try:
                fd = os.open(auth[5:], os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return None
            return cls(fd, fd, owned=True)
        try:
            r, w = (int(x) for x in auth.split(","))
            if r < 0 or w < 0:
                return None
            for fd, want in ((r, os.O_RDONLY), (w, os.O_WRONLY)):
                mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
                if mode not in (want, os.O_RDWR):
                    return None
            # Our own open of the read end, so that making it non-blocking leaves make's and
            # the other children's descriptions alone (cargo's jobserver client does the same).
            own = os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except (ValueError, OSError):
            return None  # closed or not ours: make did not pass the pipe to this recipe
        return cls(own, w, owned=True)

    def acquire(self, timeout: float | None = 0.0) -> bool:
        """Take one token; False if none came within ``timeout`` seconds (None: wait)."""
        while True:
            try:
                ready, _, _ = select.select([self.read_fd], [], [], timeout)
            except InterruptedError:
                continue
            if not ready:
                return False
            try:
                # Non-blocking: another client may take the byte between select and here.
                token = os.read(self.read_fd, 1)
            except BlockingIOError:
                if timeout is not None and timeout <= 0:
                    return False
                continue
            except OSError:
                return False
            if not token:
                return False  # the writer went away: no more tokens
            with self._lock:
                self._held.append(token)
            return True

    def release(self) -> None:
        """Give one token back."""
        with self._lock:
            token = self._held.pop() if self._held else None
        if token is not None:
            _write_all(self.write_fd, token)

    @property
    def held(self) -> int:
        return len(self._held)

    def close(self) -> None:
        """Every token back, then our own descriptor closed (make's stay open)."""
        with self._lock:
            tokens, self._held = self._held, []
        for t in tokens:
            _write_all(self.write_fd, t)
        if self._owned:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)


def _write_all(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):  # a build that has gone away needs no token back
        os.write(fd, data)


def jobs_in_build(environ: dict[str, str] | None = None) -> int | None:
    """``NVSTAGE_JOBS`` when set (a positive integer), else None."""
    value = (environ if environ is not None else os.environ).get("NVSTAGE_JOBS")
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        from nvstage.errors import UsageError

        raise UsageError(f"NVSTAGE_JOBS={value!r} is not a positive whole number",
                         hint="set NVSTAGE_JOBS=4 (say), or unset it")
    return n
