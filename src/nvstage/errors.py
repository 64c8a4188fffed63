"""One small hierarchy of errors that know how to explain themselves.

The CLI turns any ``NvstageError`` into its message on stderr and its exit code; anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence


class NvstageError(Exception):
    """Base class: ``str(err)`` is the whole message a user sees; ``hint`` says how to fix it."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def explain(self) -> str:
        """The full text for a terminal: what failed, then how to fix it."""
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def to_json(self) -> dict:
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}


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


class PlanError(NvstageError):
    """nvcc's --dryrun plan could not be obtained or understood."""

    exit_code = 4


class StageFailed(NvstageError):
    """A stage's tool exited non-zero. Carries what is needed to reproduce it."""

    exit_code = 5

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
        self.stage_index = stage_index
        self.stage_kind = stage_kind
        self.tool = tool
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.cwd = cwd
        self.env_overrides = dict(env_overrides or {})
        self.keep_dir = keep_dir
        diag = (stderr.strip() or stdout.strip() or "(no output)")
        msg = (
            f"stage {stage_index} ({stage_kind}) failed: {tool} exited with {returncode}\n"
            f"{indent(diag)}\n"
            f"reproduce with:\n  {self.reproduce()}"
        )
        hint = (
            f"the artifacts produced before the failure are kept in {keep_dir}"
            if keep_dir
            else "pass --keep to keep what the earlier stages produced"
        )
        super().__init__(msg, hint=hint)

    def reproduce(self) -> str:
        """A copy-pasteable command: cd, the environment the plan set, then the argv."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env_overrides.items()))
        cmd = shlex.join(self.argv)
        prefix = f"cd {shlex.quote(self.cwd)} && "
        return prefix + (f"env {env} {cmd}" if env else cmd)

    def to_json(self) -> dict:
        d = super().to_json()
        d.update(
            stage_index=self.stage_index,
            stage_kind=self.stage_kind,
            tool=self.tool,
            argv=self.argv,
            returncode=self.returncode,
            stderr=self.stderr,
            reproduce=self.reproduce(),
        )
        return d

    def __reduce__(self):  # picklable for worker processes
        return (_rebuild_stage_failed, (self.__dict__.copy(),))


def _rebuild_stage_failed(state: dict) -> StageFailed:
    err = StageFailed.__new__(StageFailed)
    err.__dict__.update(state)
    Exception.__init__(err, state.get("message", ""))
    return err


class ArtifactError(NvstageError):
    """A file is not the artifact it claims to be (truncated, empty, wrong kind)."""

    exit_code = 6


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
