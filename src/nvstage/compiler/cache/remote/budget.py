"""What waiting on a remote tier may cost: a budget per command and per build.

A tier that answers correctly but slowly never faults, so ``tier.py`` never turns it off,
and every operation may take up to its timeout. The budget bounds what a build spends waiting on a tier by what the tier stands for:

- *waited*: the time of the tier's operations (reads and writes, the server's part only: not
  unpacking or checking what came back), summed over the command's threads;
- *the work at stake*: for each stage the tier was asked about, the seconds that stage took:
  its own run when it ran (what a hit would have saved, and what writing it gives the next
  build), the seconds its entry records when the tier answered it (what the hit saved);
- per command: waited <= ``PER_COMMAND_S`` + the command's work at stake;
- per build: waited <= ``PER_BUILD_S`` + the build's work at stake, over all its commands
  (the build: one run of the build tool, as the build record tells builds apart; where no
  build tool runs the commands, commands less than ``GAP_SECONDS`` apart).

Each operation is given at most what is left of both as its deadline (never more than its
``operation-timeout``): a tier with no allowance left, or an operation cut by it, turns the
tier off for the rest of the build with one line, and the next commands of the build skip it
(``tiers.py``). Stages answered by the local folder ask no tier and count for neither side.
"""

from __future__ import annotations

import threading

from nvstage.compiler.cache.remote.protocol import Fault
from nvstage.compiler.cache.remote.deadline import Cap

PER_COMMAND_S = 1.0  # covers a connection and the first asks, before any stage has run
PER_BUILD_S = 5.0
# Without a build tool's run to name a build, a pause this long between commands starts a
# new one (as the build record tells builds apart: ``buildlog.GAP_SECONDS``).
GAP_SECONDS = 10.0
# One stage's seconds as an entry from a server records them, at most: a crafted entry cannot
# buy a slow tier more than this.
MAX_STAGE_S = 3600.0


class OverBudget(Exception):
    """The tier cost more waiting than its allowance (message: the figures, in words)."""


class Budget:
    """One command's waiting on one tier, and its build's before it (``waited_before``,
    ``stake_before``: the earlier commands of the same build, from the local folder)."""

    def __init__(self, waited_before: float = 0.0, stake_before: float = 0.0):
        self.waited_before = waited_before
        self.stake_before = stake_before
        self.waited = 0.0
        self.stake = 0.0
        self._lock = threading.Lock()

    def left(self) -> float:
        """Seconds of waiting this command may still spend on the tier (<= 0: none)."""
        with self._lock:
            command = PER_COMMAND_S + self.stake - self.waited
            build = PER_BUILD_S + self.stake_before + self.stake - \
                self.waited_before - self.waited
        return min(command, build)

    def add_stake(self, seconds: float) -> None:
        """A stage the tier was asked about took ``seconds`` (ran, or its entry says)."""
        if isinstance(seconds, (int, float)) and seconds > 0:  # nan is not > 0
            with self._lock:
                self.stake += min(float(seconds), MAX_STAGE_S)

    def why(self) -> str:
        """The figures, as the line that turns a tier off says them."""
        with self._lock:
            waited, stake = self.waited + self.waited_before, self.stake + self.stake_before
        return (f"too slow: {waited:.1f} s waiting on it for {stake:.1f} s of work it could "
                f"save (allowed: that work plus {PER_COMMAND_S:g} s a command, "
                f"{PER_BUILD_S:g} s a build)")

    def ask(self, call, *args):
        """``call(*args)`` (a backend's operation) within what is left: ``OverBudget`` when
        nothing is, or when the operation was cut at it; its time counted as waited."""
        left = self.left()
        if left <= 0:
            raise OverBudget(self.why())
        cap = Cap(left)
        try:
            with cap:
                return call(*args)
        except Fault:
            if not cap.cut:
                raise
        finally:
            with self._lock:
                self.waited += cap.elapsed()
        raise OverBudget(self.why())  # cut at what was left: said with its time counted
