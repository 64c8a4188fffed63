"""One small hierarchy of errors that know how to explain themselves.

The CLI turns any ``NvstageError`` into its message on stderr and its exit code; anything else
is a bug and keeps its traceback. Three classes here are not ``NvstageError``s, on purpose:
``ToolMissing`` and ``ToolTimeout`` are OSErrors and ``ShellWordsError`` is a ValueError, which
the code that meets them turns into one of the others (or copes with).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

# C0, DEL and C1 (a terminal reads 0x9b as ESC [): "\n" -> "\\n", ESC -> "\\x1b". A name
# that is not UTF-8 carries each undecodable byte as a surrogate (``os.fsdecode``), printed
# back as that byte (``cli/main.py``): those of C1's bytes are written out as C1 is ("\\x9b"),
# the others kept (a Latin-1 name reads as ``ls`` writes it into a pipe); any other surrogate
# (a JSON document's lone "\\ud800") has no byte to be, and is written out ("\\ud800").
_CONTROLS = {c: repr(chr(c))[1:-1] if c < 128 else f"\\x{c:02x}"
             for c in (*range(32), *range(127, 160))}
_CONTROLS.update({c: f"\\x{c - 0xdc00:02x}" if 0xdc80 <= c < 0xdca0 else f"\\u{c:04x}"
                  for c in range(0xd800, 0xe000) if not 0xdca0 <= c < 0xdd00})
_CONTROLS_BUT_LINES = {c: v for c, v in _CONTROLS.items() if chr(c) not in "\n\t"}


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with its control characters written out (``\\x1b``, ``\\n``): the one
    function every name from a document (a file or folder name, a key, a cache entry) passes
    through before a terminal sees it, so that an escape sequence in one never changes the
    terminal (a title, colours, the clipboard) and a newline never splits a one-line error.
    ``lines``: newlines and tabs kept (a tool's output, a message of several lines)."""
    if text.isprintable():  # no control, no surrogate: nothing to write out (C's pace)
        return text
    return text.translate(_CONTROLS_BUT_LINES if lines else _CONTROLS)


def one_line(text: str) -> str:
    """``printable(text)``: names read from a document end up in error messages, and a
    newline or escape sequence in one must not break the one-line error or the terminal."""
    return text.translate(_CONTROLS)


class NvstageError(Exception):
    """Base class: ``str(err)`` is the whole message a user sees; ``hint`` says how to fix it."""

    exit_code = 1
    # Further problems found with the first (``message``), each a line of its own: printed
    # as errors, never as the hint.
    more: tuple[str, ...] = ()

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def explain(self) -> str:
        """The full text for a terminal: what failed, then how to fix it."""
        lines = [self.message, *(f"  error: {m}" for m in self.more)]
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        doc = {"error": type(self).__name__, "message": self.message, "hint": self.hint}
        if self.more:
            doc["more"] = list(self.more)
        return doc


class UsageError(NvstageError):
    """The user asked for something that cannot be done as asked (bad option, bad value)."""

    exit_code = 2


class InputNotFound(UsageError):
    pass


class WriteError(UsageError, OSError):
    """An output could not be written (a folder in the way, no permission, a full disk).

    Also an OSError, so code that treats a failed write as "carry on without it" (the caches)
    keeps doing so."""


class UnknownArch(UsageError):
    pass


class ToolkitError(NvstageError):
    """No usable CUDA toolkit, or a mixed one."""

    exit_code = 3


class ToolMissing(OSError):
    """The program named in argv[0] could not be started (``proc.run``).

    An OSError, not an NvstageError: a caller that gets no answer from a tool decides what
    that means (a missing nvcc is a ``ToolkitError``, a failed version probe is no version)."""


class ToolTimeout(ToolMissing):
    """The program ran past its ``timeout`` and was killed.

    A ToolMissing too: every caller that copes with "that tool gave no answer" (a version
    probe, nvcc's plan) copes with this one the same way, instead of a traceback."""


class PlanError(NvstageError):
    """nvcc's --dryrun plan could not be obtained or understood."""

    exit_code = 4


class ShellWordsError(ValueError):
    """A line of nvcc's plan cannot be split into words (an unterminated quote); the plan's
    parser turns it into a ``PlanError``."""


class ToolFailed(NvstageError):
    """A build's stage failed: which stage, what ran it (``argv``), and where what the
    earlier stages produced is kept. Picklable for worker processes (``__reduce__``)."""

    exit_code = 5

    def __init__(self, message: str, *, stage_index: int, stage_kind: str, tool: str,
                 argv: Sequence[str], keep_dir: str | None = None, hint: str | None = None):
        self.stage_index = stage_index
        self.stage_kind = stage_kind
        self.tool = tool
        self.argv = list(argv)
        self.keep_dir = keep_dir
        if hint is None and keep_dir:
            hint = f"the artifacts produced before the failure are kept in {keep_dir}"
        super().__init__(message, hint=hint)

    def to_json(self) -> dict:
        d = super().to_json()
        d.update(stage_index=self.stage_index, stage_kind=self.stage_kind, tool=self.tool,
                 argv=self.argv, **self._details())
        return d

    def _details(self) -> dict:
        """What the kind of failure adds to ``to_json``, after the stage's own fields."""
        return {}

    def __reduce__(self):
        return (_rebuild, (type(self), self.__dict__.copy()))


def reproduce_command(argv: Sequence[str], cwd: str, env: dict[str, str]) -> str:
    """A copy-pasteable command: cd, the environment the plan set, then the argv."""
    assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    cmd = shlex.join(argv)
    prefix = f"cd {shlex.quote(cwd)} && "
    return prefix + (f"env {assigned} {cmd}" if assigned else cmd)


class StageFailed(ToolFailed):
    """A stage's tool exited non-zero. Carries what is needed to reproduce it."""

    def __init__(
        self,
        *,
        stage_index: int,
        stage_kind: str,
        tool: str,
        argv: Sequence[str],
        returncode: int,
        stdout: str,
        stderr: str,
        cwd: str,
        env_overrides: dict[str, str] | None = None,
        keep_dir: str | None = None,
    ):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.cwd = cwd
        self.env_overrides = dict(env_overrides or {})
        diag = (stderr.strip() or stdout.strip() or "(no output)")
        msg = (
            f"stage {stage_index} ({stage_kind}) failed: {tool} exited with {returncode}\n"
            f"{indent(diag)}\n"
            f"reproduce with:\n  {reproduce_command(argv, cwd, self.env_overrides)}"
        )
        super().__init__(msg, stage_index=stage_index, stage_kind=stage_kind, tool=tool,
                         argv=argv, keep_dir=keep_dir,
                         hint=None if keep_dir else
                         "pass --keep to keep what the earlier stages produced")

    def reproduce(self) -> str:
        """A copy-pasteable command: cd, the environment the plan set, then the argv."""
        return reproduce_command(self.argv, self.cwd, self.env_overrides)

    def _details(self) -> dict:
        return {"returncode": self.returncode, "stderr": self.stderr,
                "reproduce": self.reproduce()}


class RuntimeCompileFailed(ToolFailed):
    """NVRTC or nvJitLink refused: carries the compiler's log and the source lines it names."""

    def __init__(self, *, stage_index: int, stage_kind: str, tool: str, argv: Sequence[str],
                 result: str, log: str, source: str, excerpt: str = "",
                 keep_dir: str | None = None, hint: str | None = None, what: str | None = None):
        self.result = result
        self.log = log
        self.source = source
        self.excerpt = excerpt
        head = what or f"{tool} failed on {os.path.basename(source)}"
        body = indent(log.strip() or "(the log is empty)")
        msg = f"stage {stage_index} ({stage_kind}): {head} ({result})\n{body}"
        if excerpt:
            msg += f"\nsource lines named in the log:\n{excerpt}"
        msg += f"\nas run: {shlex.join(argv)}"
        if hint is None and not keep_dir:
            hint = (f"fix the source or options above; the log is "
                    f"{'NVRTC' if tool == 'nvrtc' else 'nvJitLink'}'s own")
        super().__init__(msg, stage_index=stage_index, stage_kind=stage_kind, tool=tool,
                         argv=argv, keep_dir=keep_dir, hint=hint)

    def _details(self) -> dict:
        return {"result": self.result, "log": self.log, "source": self.source,
                "excerpt": self.excerpt}


def _rebuild(cls, state: dict):
    """An error of ``cls`` from its state, without running ``__init__`` again."""
    err = cls.__new__(cls)
    err.__dict__.update(state)
    Exception.__init__(err, state.get("message", ""))
    return err


class ArtifactError(NvstageError):
    """A file is not the artifact it claims to be (truncated, empty, wrong kind)."""

    exit_code = 6

    def __init__(self, message: str, *, hint: str | None = None):
        # Its message names files and folders, and what a document holds (a Triton cache's
        # entries, a record's keys): one line, whatever their names hold.
        super().__init__(one_line(message), hint=None if hint is None else one_line(hint))


class NoDriver(NvstageError):
    """No CUDA driver or GPU on this machine."""

    exit_code = 7


def indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


class Terminated(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM, SIGHUP) or an abandoned build ended the tools nvstage had
    started. A KeyboardInterrupt, not an Exception: ``except Exception`` never swallows it,
    and code that cleans up on Ctrl-C cleans up on SIGTERM the same way."""

    def __init__(self, signum: int | None = None):
        import signal

        self.signum = signum
        name = signal.Signals(signum).name if signum else "an interruption"
        super().__init__(f"ended by {name}")
        self.message = f"ended by {name}"

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process a signal ended."""
        return 128 + (self.signum or 2)


class NotRegularFile(ArtifactError, OSError):
    """A path read as a file that is a FIFO, a device, a socket or a folder: reading it could
    block forever (a FIFO with no writer) or never end (/dev/zero), so it is refused unread.
    Also an OSError, so code that treats an unreadable file as "not there" keeps doing so."""


class InputTooLarge(ArtifactError):
    """A file larger than the bound its reader takes (``artifacts.MAX_ARTIFACT_BYTES``,
    ``documents.MAX_DOCUMENT_BYTES``): refused before it is read."""


class CacheError(UsageError):
    """The stage cache's folder or settings cannot be used as given (a file, a folder nvstage
    did not make, a size that is not one). One line: the message says what to change."""


# -- running a workload -------------------------------------------------------------------


class WorkloadError(UsageError):
    """A workload that cannot be run as written: names the file, table and key."""

    def __init__(self, message: str, *, where: str = "", hint: str | None = None):
        # Names from the file (tables, keys, buffers) end up in the message: a newline or
        # escape sequence in one must not break the one-line error or the terminal.
        where, message = one_line(where), one_line(message)
        self.where = where
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class ValidationError(WorkloadError):
    """Launches that do not fit the kernels' parameter lists: the first error is the message,
    the others ``more`` (each printed as an error of its own). ``findings``: every
    ``validate.Finding``, notes included."""

    def __init__(self, findings: list):
        self.findings = findings
        errors = [f for f in findings if f.level == "error"]
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first.message + more, where=first.where)
        self.more = tuple(one_line(f"{f.where}: {f.message}" if f.where else f.message)
                          for f in errors[1:])


class ExprError(ValueError):
    """An expression the bounded evaluator refuses. Never shown as it is: the reader of the
    workload or cost file turns it into its own error, naming the file, table and key."""


class GpuRunFailed(NvstageError):
    """A kernel faulted, a copy or an allocation failed: the operation is named."""

    exit_code = 8

    def __init__(self, message: str, *, op: str, hint: str | None = None, result=None,
                 context_lost: bool = False):
        super().__init__(message, hint=hint)
        self.op = op
        self.result = result  # the RunResult so far: what ran before the failure
        # Work still running on the GPU that nothing can stop (a wait gave up): freeing
        # memory or tearing the context down would wait for it, so the process should end
        # without its finalizers once the report is written (the CLI does).
        self.context_lost = context_lost

    def to_json(self) -> dict:
        d = super().to_json()
        d["op"] = self.op
        d["context_lost"] = self.context_lost
        return d


class CheckFailed(NvstageError):
    """The workload ran but its results failed the check."""

    exit_code = 9


# -- hardware, the model, the gate ---------------------------------------------------------


class GpuSpecError(UsageError):
    """A custom GPU spec file is malformed: missing field, wrong type, impossible value."""

    def __init__(self, message: str, *, hint: str | None = None):
        # Field names from the file end up in the message.
        super().__init__(one_line(message), hint=hint)


class OccupancyError(UsageError):
    """The inputs cannot describe a launch (block too large, more than 255 registers, ...)."""


class CostSpecError(WorkloadError):
    """A cost file that cannot be read as written (names the file, entry and key)."""


class MissingCounts(CostSpecError):
    """The workload has no per-launch counts, so no kernel time can be estimated."""


class ModelError(UsageError):
    """The estimate cannot be made as asked (a GPU spec without the figures it needs, ...)."""


class CalibrationError(UsageError):
    """A profile that cannot be fitted from (wrong schema, no decomposition, ...)."""


class BudgetConfigError(UsageError):
    """The budgets file is not TOML, or has keys or values nvstage does not know."""


class BaselineError(ArtifactError):
    """A --baseline file that is not a check report or manifest, or one for another build
    (no kernel and arch in common with this one)."""


class RemoteCacheError(CacheError):
    """A remote cache tier that cannot be used as configured (a bad URL, a missing package, a
    key that cannot be read). Never fails a build: the tier is left off, with one line."""
