"""nvcc's plan for a build (``nvcc --dryrun``), asked and parsed: the first thing a build needs.

This module imports little, so a command can ask nvcc for its plan (``ask_ahead``) before it
imports the pipeline that runs the stages: nvcc plans (a process of its own, and a host
compiler it runs to learn that compiler's version) on one core while Python imports on the
other, where otherwise the imports come first and the plan after them. The text asked ahead
is nvcc's for a temporary folder of its own; the build takes it for its work folder by putting
that folder's name where the other was (as ``plan_memo`` does), and only when it asks with the
same words: whatever differs asks again.
"""

from __future__ import annotations

import contextvars
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nvstage import proc
from nvstage.compiler.nvcc.placeholders import Placeholders
from nvstage.compiler.nvcc.plan import Plan, StageKind, parse_dryrun
from nvstage.errors import PlanError, ToolkitError, ToolMissing, UsageError

if TYPE_CHECKING:
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.toolkit.locate import Toolkit


class Ahead:
    """nvcc's answer to ``--dryrun`` for ``words`` in a temporary folder of its own
    (``scratch``), asked on a thread (``ask_ahead``; nothing asked when ``scratch`` is None).
    ``take`` gives it to the build that asks with the same words; leaving the ``with`` block
    waits for it and removes the folder."""

    def __init__(self, nvcc: str, words: list[str], cwd: str, scratch: str | None):
        self.argv, self.cwd, self.scratch = [nvcc, "--dryrun", *words], cwd, scratch
        self._result: proc.Completed | BaseException | None = None
        self._thread = None
        if scratch is not None:
            self._thread = threading.Thread(target=contextvars.copy_context().run,
                                            args=(self._ask,), name="nvstage-plan", daemon=True)
            self._thread.start()

    def _ask(self) -> None:
        try:
            self._result = proc.run(self.argv, cwd=self.cwd, timeout=120,
                                    errors="surrogateescape", tmpdir=self.scratch)
        except BaseException as e:  # ToolMissing, Terminated, ...: raised where taken
            self._result = e

    def take(self, argv: list[str], cwd: str, work: str) -> proc.Completed | None:
        """nvcc's answer for ``argv`` run in ``cwd`` with $TMPDIR ``work``, if this is it
        (raised as it was raised); None when nothing was asked for these words."""
        if self._thread is None or argv != self.argv or cwd != self.cwd:
            return None
        self._thread.join()
        got, self._result = self._result, None
        if isinstance(got, BaseException):
            raise got
        if got is None:  # taken already
            return None
        real = os.path.realpath(self.scratch)
        if real != self.scratch and real in got.stderr + got.stdout:
            return None  # the folder under another name: not this text's to rewrite
        return proc.Completed(got.argv, got.returncode, work.join(got.stdout.split(self.scratch)),
                              work.join(got.stderr.split(self.scratch)), got.seconds)

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, kind, *exc) -> None:
        # A build that failed does not wait for an answer it will not take: nvcc, on a daemon
        # thread, ends with this process (``proc``'s children do) or finishes in a folder gone.
        try:
            if self._thread is not None and kind is None:
                self._thread.join()
        finally:
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)


def ask_ahead(nvcc: str, words: list[str], cwd: str, *, remember: bool,
              kept: bool = False, source: str | None = None) -> Ahead:
    """Start asking nvcc for the plan a build without a keep folder (``kept``: with one, and
    then nothing is asked) will ask for (``words``: nvcc's arguments, in order, in ``cwd``;
    ``source``: the word naming the source, as ``plan_words``'), unless the plan memo holds
    it (``remember``: the cache is on) or a name needs placeholders."""
    from nvstage.compiler.pipeline import leftovers, plan_memo

    ph = Placeholders()
    try:
        plain = ph.sub_words(words) == list(words)
    except UsageError:  # said by the build itself, in its own order
        plain = False
    if kept or not plain or any(c in cwd for c in '"`\\') or remember and \
            plan_memo.holds(nvcc, ["tmpxft", *words], source, cwd, os.environ):
        return Ahead(nvcc, words, cwd, None)
    try:
        scratch = leftovers.make("nvstage-")
    except OSError:
        return Ahead(nvcc, words, cwd, None)
    try:
        if ph.sub(scratch) == scratch:
            return Ahead(nvcc, words, cwd, scratch)
    except BaseException:  # the thread not started (a signal, no threads left)
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    shutil.rmtree(scratch, ignore_errors=True)  # a name nvcc could not be given as it is
    return Ahead(nvcc, words, cwd, None)


def make_plan(source: str, options: CompileOptions, toolkit: Toolkit, work: Path,
              cwd: str, *, remember: bool = False, kept: bool = True,
              ahead: Ahead | None = None) -> tuple[Plan, list[str], float]:
    """Ask nvcc for its plan with the same flags (``words_for``), and parse it."""
    words = words_for(source, options)
    return plan_words(words, toolkit, work, cwd, remember=remember, kept=kept, ahead=ahead,
                      source=source_word(words, options))


def words_for(source: str, options: CompileOptions) -> list[str]:
    """nvcc's arguments for compiling ``source`` with ``options``.

    ``source`` is passed as the user wrote it (relative stays relative): nvcc derives
    ``__FILE__`` and its diagnostics from it, and what we build must be what nvcc builds.
    """
    # A name that starts with '-' is spelt ./-dash.cu, or nvcc (and its tools) read it as an
    # option; the CLI's path type drops the "./" the user wrote. nvcc still derives -dash.o
    # from it. nvcc's own check of the PTX it wrote (ptxas -arch=compute_90 -dash.ptx) fails
    # on the derived name, plain nvcc too: that name is given as ./-dash.ptx instead.
    output = options.output
    if not output and options.stop == "ptx" and os.path.basename(source).startswith("-"):
        output = os.path.splitext(os.path.basename(source))[0] + ".ptx"
    source, output = (os.path.join(os.curdir, p) if p and p.startswith("-") else p
                      for p in (source, output))
    return [*options.nvcc_args(), source, *(["-o", output] if output else [])]


def source_word(words: list[str], options: CompileOptions) -> str:
    """The word of ``words_for``'s that names the source."""
    return words[len(options.nvcc_args())]


def plan_words(words: list[str], toolkit: Toolkit, work: Path, cwd: str, *,
               remember: bool = False, kept: bool = True, ahead: Ahead | None = None,
               source: str | None = None) -> tuple[Plan, list[str], float]:
    """nvcc's plan for ``words`` (its arguments, in order), in ``work``; with ``remember``,
    from the plan memo when nvcc printed it before for these words or, ``source`` the word
    that names the source, for another unit of the same shape (``plan_memo``); else
    ``ahead``'s when it asked for the same (``ask_ahead``).

    ``kept``: the intermediates are named as ``nvcc --keep`` names them (``vadd.cudafe1.cpp``),
    for a folder people read. Otherwise as a plain nvcc run names them, with its $TMPDIR the
    work folder and its pid a fixed ``00000000`` (``tmpxft_00000000_00000000-6_vadd.cudafe1.cpp``):
    gcc writes the name into the object's file symbol, and ptxas, with ``-G``, into the cubin,
    so an object is plain nvcc's byte for byte only with plain nvcc's names (and its plan: no
    ``--keep`` means no standalone .fatbin, and a cleanup stage)."""
    from nvstage.compiler.pipeline import plan_memo

    ph = Placeholders()
    shown_work = ph.sub(str(work))
    kept = kept or shown_work != str(work)  # $TMPDIR cannot be a placeholder
    argv = [toolkit.nvcc, "--dryrun", *(["--keep", "--keep-dir", shown_work] if kept else [])]
    shown_words = ph.sub_words(words)
    argv += shown_words
    kind = ["keep" if kept else "tmpxft"]
    k = plan_memo.key(toolkit.nvcc, [*kind, *words], cwd, os.environ) if remember else None
    t0 = time.perf_counter()
    text = plan_memo.lookup(k, shown_work, os.environ)
    # The shape's key only where the plan under these words is not kept: it answers, or
    # learns the plan nvcc prints now.
    shape = plan_memo.Shape.of(toolkit.nvcc, [*kind, *words], source, cwd, os.environ) \
        if text is None and k is not None and shown_words == list(words) else None
    if shape is not None:
        text = shape.lookup(shown_work)
    if text is None:
        try:
            # The plan's names must come back as the bytes they are: "replace" made a name
            # with a byte that is not UTF-8 another file's name (U+FFFD), which was then
            # compiled.
            cp = ahead.take(argv, cwd, str(work)) if ahead is not None and not kept else None
            cp = cp or proc.run(argv, cwd=cwd, timeout=120, errors="surrogateescape",
                                tmpdir=None if kept else str(work))
        except ToolMissing as e:
            raise ToolkitError(str(e), hint="check --nvcc / $NVSTAGE_NVCC") from e
        if cp.returncode != 0:
            msg = "\n".join(line for line in (cp.stderr + cp.stdout).splitlines()
                            if not line.startswith("#$ ")).strip()
            said = ph.restore(msg) or f"exit {cp.returncode}"
            raise PlanError(f"nvcc rejected the build: {said}",
                            hint="check the flags; nvcc's own message is above")
        text = cp.stderr if kept else _fixed_pid(cp.stderr)
        if k is not None:
            plan_memo.store(k, text, shown_work, os.environ)
        if shape is not None:
            shape.learn(text, shown_work)
        seconds = cp.seconds
    else:
        seconds = time.perf_counter() - t0
    plan = ph.restore_plan(parse_dryrun(text))
    _resolve_tools(plan)
    _check_fatbinary_names(plan)
    shown = [ph.restore(a) for a in argv]
    return plan, shown if kept else ["env", f"TMPDIR={work}", *shown], seconds


# nvcc's temporary names: tmpxft_<its pid>_<a count>-<a number per kind>_<the input's name>.
_TMPXFT = re.compile(r"(?<![\w.-])tmpxft_([0-9a-f]{8})_[0-9a-f]{8}-\d+_")


def _fixed_pid(text: str) -> str:
    """The plan with nvcc's pid in its temporary names made ``00000000``: the same names each
    time (stage cache keys and the plan cache see them), as long as plain nvcc's."""
    pids = set(_TMPXFT.findall(text))
    if len(pids) != 1:
        return text
    return text.replace(f"tmpxft_{pids.pop()}_", "tmpxft_00000000_")


def _resolve_tools(plan: Plan) -> None:
    """Name each stage's program by its full path, found on the PATH nvcc's plan sets.

    The manifest then says exactly which binary ran, and a reproduction needs no PATH.
    """
    search = plan.variables.get("PATH", os.environ.get("PATH", ""))
    for s in plan.runnable:
        if os.sep not in s.argv[0]:
            found = shutil.which(s.argv[0], path=search)
            if found:
                s.argv[0] = os.path.normpath(found)


def _check_fatbinary_names(plan: Plan) -> None:
    # fatbinary splits --image3=kind=..,file=PATH on commas and drops double quotes itself, so
    # such names fail there (plain nvcc fails too); say so before any stage runs.
    for s in plan.runnable:
        if s.kind in (StageKind.FATBINARY, StageKind.DLINK_FATBINARY):
            for p in s.inputs:
                if '"' in p or "," in p:
                    raise UsageError(
                        f"fatbinary cannot take a file name containing a double quote or a "
                        f"comma: {p}",
                        hint="rename the file (or the --keep-dir folder); nvcc fails on it too")
