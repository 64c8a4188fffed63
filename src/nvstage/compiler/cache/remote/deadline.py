"""One operation's whole time, bounded: the deadline every backend uses.

A socket timeout only bounds each silence: a server that sends one byte per timeout would hold
a build for as long as it likes. A ``Deadline`` bounds the whole of an operation (connecting,
sending, every byte of the answer): at its deadline the operation's socket is shut down by one
watchdog thread for the process, which ends a read or a write blocked on it, TLS handshakes
included; the backend then raises ``Deadline.fault()``.
"""

from __future__ import annotations

import heapq
import socket
import threading
import time

from nvstage.compiler.cache.remote.protocol import Fault

_caps = threading.local()


class Cap:
    """At most ``seconds`` for every operation this thread begins inside it (``with``): a
    tier's budget (``budget.py``) when less than the operation timeout is left of it.
    ``cut``: an operation was ended at it."""

    __slots__ = ("_outer", "cut", "started", "until")

    def __init__(self, seconds: float):
        self.started = time.monotonic()
        self.until = self.started + max(0.0, seconds)
        self.cut = False
        self._outer = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __enter__(self):
        self._outer = getattr(_caps, "cap", None)
        _caps.cap = self
        return self

    def __exit__(self, *exc) -> None:
        _caps.cap = self._outer


class Deadline:
    """Bounds one operation's whole time. A socket timeout only bounds each silence: a server
    that sends one byte per timeout would hold a build for as long as it likes. When the time
    is up, the slot's socket is shut down (by the watchdog's thread), which ends a read or a
    write blocked on it, TLS handshakes included; the caller then reports a timeout
    (``fired``)."""

    __slots__ = ("_cap", "_slot", "deadline", "done", "fired", "seconds")

    def __init__(self, slot, seconds: float):
        self._slot = slot
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.done = False
        self.fired = False
        self._cap = getattr(_caps, "cap", None)
        if self._cap is not None and self._cap.until < self.deadline:
            self.deadline = self._cap.until  # the tier's budget ends it first
        else:
            self._cap = None

    def __enter__(self):
        _watchdog.arm(self)
        return self

    def __exit__(self, *exc) -> None:
        with _watchdog.lock:
            self.done = True

    def fire(self) -> None:  # the watchdog's thread, holding its lock
        if self.done:
            return
        self.fired = True
        if self._cap is not None:
            self._cap.cut = True
        sock = self._slot.sock
        if sock is not None:
            try:  # the plain socket's shutdown: an SSL socket's would need its own thread
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def timed_out(self, error: BaseException | None = None) -> bool:
        """Whether the operation ran out of time: the watch fired, or ``error`` is a socket's
        own timeout (a silence longer than the operation timeout)."""
        return self.fired or isinstance(error, (TimeoutError, socket.timeout))

    def fault(self) -> Fault:
        """The one way a backend says it ran out of time."""
        return Fault(f"no answer within {self.seconds:g} s")


class _Watchdog:
    """One thread for the process that fires each ``Deadline`` at its deadline. Arming is a
    heap push under a lock (far cheaper than a thread per operation), and
    the thread is woken only when a new deadline comes before the one it waits for."""

    def __init__(self):
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._heap: list = []
        self._count = 0
        self._thread: threading.Thread | None = None

    def arm(self, watch: Deadline) -> None:
        with self._cond:
            self._count += 1
            earlier = not self._heap or watch.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (watch.deadline, self._count, watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="nvstage-remote-watch",
                                                daemon=True)
                self._thread.start()
            elif earlier:
                self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)[2].fire()


_watchdog = _Watchdog()
