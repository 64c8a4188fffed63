"""The launcher's flow (``compiler/launcher/``): nvstage in front of nvcc, as ccache stands in
front of a compiler.

    nvstage $CUDA_HOME/bin/nvcc -c a.cu -o a.o ...           (ccache's form; CMake's launcher)
    nvstage nvcc -c a.cu -o a.o ...                          (nvcc on PATH, else the wheels')

A launcher command is a ``Command`` (its argv, folder, environment, umask, standard streams,
and what was asked of the resident nvstage already); ``launch`` takes it through four steps,
cheapest first, and an ``Outcome`` comes back:

1. a resident hit: the whole command answered by the resident nvstage (``resident/ask.py``;
   on unless ``NVSTAGE_SERVER=0``), unless ``cli/bare.py`` asked before anything was imported;
2. a hit here: answered by this process from the command cache (``cache/command/answer.py``);
3. a hand-over: the miss run by a child of the resident nvstage (``resident/handover.py``);
4. a staged run here (``run_staged``), which starts a resident nvstage for the next commands.

The resident's child runs the same flow with its own ``Hooks`` (none of the resident's steps:
it is the resident). Steps 1 and 2 import the standard library and the hit path's modules
alone (this module's imports are done where they are needed): a hit pays for nothing else.

The staged run reads the command with the grammar of that nvcc (``nvcc/grammar.py``: options
files, ``NVCC_PREPEND_FLAGS``/``NVCC_APPEND_FLAGS`` included) and, when nvstage can follow it,
runs it through nvstage's pipeline: nvcc's own plan, its stages (cached, and in parallel when
the build lends job slots), the dependency file nvcc would write. It behaves as that nvcc: the
same output files, nvcc's own warnings and what the tools print on stderr in plan order, exit
0, and nothing of nvstage's own. Every command adds an entry to the build log (``buildlog``).

Where it cannot follow a command line (a mode it does not stage, an option nvcc does not
know, a failing stage), the unchanged command runs with plain nvcc, its output and exit
status untouched, and the entry says why: nvstage never fails a build plain nvcc passes, and
a build that fails shows nvcc's own diagnostics (a failed stage is replayed by nvcc, so the
message and exit status are nvcc's exactly).
"""

from __future__ import annotations

import os
import sys
import time

# (Plain classes, not dataclasses: importing dataclasses is 16 ms of a hit without site.)


class _NotAsked:
    def __repr__(self) -> str:
        return "NOT_ASKED"


NOT_ASKED = _NotAsked()  # a Command's ``asked`` when nobody asked the resident nvstage yet


class Command:
    """One launcher command as it came: ``argv`` (``NVCC ARGS...``), the folder it runs in
    (None: one since removed), its environment and umask (None: this process's), the standard
    streams it was started without (``closed``: 0, 1, 2; None: this process's), the parent of
    the process the build started (its build log entry's build), and what the resident
    nvstage said when ``cli/bare.py`` asked it already (``NOT_ASKED``: nobody asked)."""

    __slots__ = ("argv", "cwd", "env", "umask", "closed", "ppid", "asked")

    def __init__(self, argv: list[str], cwd: str | None, env: dict[str, str],
                 umask: int | None = None, closed: list[int] | None = None,
                 ppid: int | None = None, asked=NOT_ASKED):
        self.argv, self.cwd, self.env, self.umask = argv, cwd, env, umask
        self.closed, self.ppid, self.asked = closed, ppid, asked

    @classmethod
    def here(cls, argv: list[str], asked=NOT_ASKED) -> Command:
        """``argv`` as this process was given it: its folder and environment."""
        try:
            cwd = os.getcwd()
        except OSError:  # a folder since removed: no entry is of it (plain nvcc runs it)
            cwd = None
        return cls(list(argv), cwd, dict(os.environ), asked=asked)


class Outcome:
    """What became of a ``Command``: its exit status (nvcc's), the step that gave it
    (``HOW``), and whether nvstage's own work is done (nothing left to tidy up: the process
    may end at once)."""

    __slots__ = ("code", "how", "done")
    HOW = ("resident hit", "hit", "handed over", "staged")

    def __init__(self, code: int, how: str):
        self.code, self.how, self.done = code, how, how != "staged"

    def __repr__(self) -> str:
        return f"Outcome({self.code}, {self.how!r})"


class Hooks:
    """The steps that differ with the process the flow runs in, each a callable (None: not
    taken). A launcher's (``Hooks.launcher()``): ``ask`` the resident nvstage for a hit,
    ``hand_over`` a miss to it, ``start_resident`` for the next commands. The resident's
    child takes none of them (it is the resident); it is told ``answered(code)`` as soon as
    the outputs and the build log's entry are written, before the cache's bookkeeping."""

    __slots__ = ("ask", "hand_over", "start_resident", "answered")

    def __init__(self, ask=None, hand_over=None, start_resident=None, answered=None):
        self.ask, self.hand_over = ask, hand_over
        self.start_resident, self.answered = start_resident, answered

    @classmethod
    def launcher(cls) -> Hooks:
        return cls(ask=ask_resident, hand_over=hand_over, start_resident=start_resident)


def launch(cmd: Command, hooks: Hooks | None = None) -> Outcome:
    """Run ``cmd`` (``argv[0]`` names nvcc) as nvcc would, answered whole where it can be."""
    hooks = Hooks.launcher() if hooks is None else hooks
    from nvstage.compiler.launcher.resident.ask import MISSED

    said = cmd.asked
    if said is NOT_ASKED:
        said = hooks.ask(cmd) if hooks.ask is not None else False
    if said:  # 1. answered whole by the resident nvstage
        return Outcome(0, "resident hit")
    # 2. answered here, unless the resident looked already and found no whole entry (MISSED)
    if said is not MISSED and hit_here(cmd):
        if said is None and hooks.start_resident is not None:
            hooks.start_resident(cmd)  # on, and none was there to ask: one for the next
        return Outcome(0, "hit")
    with_site()  # what is not a hit sees the environment it always does
    # 3. handed over to a child of the resident nvstage, whose imports are done
    if hooks.hand_over is not None and cmd.cwd is not None:
        code = hooks.hand_over(cmd)
        if code is not None:
            return Outcome(code, "handed over")
    # 4. run here, stage by stage
    code = run_staged(cmd, hooks)
    if hooks.start_resident is not None and cmd.cwd is not None:
        hooks.start_resident(cmd)  # after: the run may have just made the cache folder
    return Outcome(code, "staged")


def ask_resident(cmd: Command):
    """Step 1: ``ask.ask``'s answer (never an error: a failure is not asked, False)."""
    from nvstage.compiler.launcher.resident.ask import ask

    try:
        return ask(cmd.argv)
    except Exception:  # never a reason to fail a build: the launcher goes on unasked
        return False


def hit_here(cmd: Command) -> bool:
    """Step 2: the whole command answered by this process (``answer.serve``), what the tools
    printed printed again."""
    if cmd.cwd is None:  # a folder since removed: no entry is of it
        return False
    from nvstage.compiler.cache.command.answer import serve

    served = serve(cmd.argv, cmd.cwd, cmd.env)
    if served is None:
        return False
    for text, stream in ((served["out"], sys.stdout), (served["err"], sys.stderr)):
        try:
            if text:
                stream.flush()
                stream.buffer.write(text)
                stream.flush()
        except OSError:  # a stream gone: the outputs are in place all the same
            pass
    return True


def hand_over(cmd: Command) -> int | None:
    """Step 3: the exit status the resident's child gave; None when none took the command."""
    from nvstage.compiler.launcher.resident import handover
    from nvstage.compiler.launcher.resident.ask import resident_on
    from nvstage.compiler.store.layout import cache_root

    root = cache_root(cmd.env) if resident_on(cmd.env) else None
    return None if root is None else handover.delegate(cmd.argv, cmd.cwd, cmd.env, root)


def start_resident(cmd: Command) -> None:
    """A resident nvstage for the next commands, where it is on (not ``NVSTAGE_SERVER=0``) and
    none runs: after a miss run here, and after a hit answered here because no server was
    there to ask (else a build whose every command hits would never have one)."""
    from nvstage.compiler.launcher.resident.ask import resident_on
    from nvstage.compiler.store.layout import cache_root

    root = cache_root(cmd.env) if resident_on(cmd.env) else None
    if root is not None:
        with_site()  # sys.prefix (which names its socket) as a server sees it
        from nvstage.compiler.launcher.resident.start import ensure

        ensure(root, cmd.env)


def with_site() -> None:
    """``site`` where Python started without it (``cli/bare.py``): what is not a hit sees
    the environment it always does (.pth files, the user's folder, sitecustomize)."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


# -- 4. the staged run ---------------------------------------------------------------------

# What the launcher stages: one CUDA source compiled to an object, PTX, cubin or fatbin.
_STOPS = ("--compile", "--device-c", "--device-w", "--ptx", "--cubin", "--fatbin")
# Options that make nvcc do something the staged driver does not: run as given.
_NOT_STAGED = {
    "--preprocess": "-E only preprocesses", "--generate-dependencies": "-M writes only deps",
    "--generate-nonsystem-dependencies": "-MM writes only deps",
    "--lib": "-lib makes a library", "--device-link": "-dlink links device code",
    "--link": "-link links", "--run": "-run runs the program", "--dryrun": "--dryrun",
    "--keep": "the command keeps nvcc's own intermediates",
    "--keep-dir": "the command keeps nvcc's own intermediates",
    "--save-temps": "the command keeps nvcc's own intermediates",
    "--clean-targets": "-clean deletes nvcc's files", "--version": "--version",
    "--help": "--help", "--list-gpu-code": "a listing", "--list-gpu-arch": "a listing",
    "--optix-ir": "OptiX IR output", "--ltoir": "LTO-IR output", "--cuda": "-cuda output",
    "--fdevice-syntax-only": "a syntax check", "--output-directory": "-odir",
    "--objdir-as-tempdir": "-objtemp", "--time": "--time (nvcc's own timing file)",
    "--tilebc": "Tile output", "--tilecubin": "Tile output", "--tilefatbin": "Tile output",
    "--run-args": "-run-args",
}
_FORWARD_UNKNOWN = ("--forward-unknown-to-host-compiler", "--forward-unknown-opts")
_CUDA_SUFFIXES = (".cu",)


class Staged:
    """A command the staged driver runs: what it asks for, as far as the launcher needs to
    know (``plan.Plan`` is nvcc's own plan of it)."""

    __slots__ = ("source", "depfile")

    def __init__(self, source: str, depfile: tuple[str, bool, bool] | None):
        self.source = source
        self.depfile = depfile  # (target, -MMD, -MP) with -MD/-MMD

    def __repr__(self) -> str:
        return f"Staged({self.source!r}, {self.depfile!r})"


class Fallback:
    """A command plain nvcc runs, and why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Fallback({self.reason!r})"


def understand(args: list[str], grammar, cwd: str, environ: dict[str, str]) -> Staged | Fallback:
    """Whether the staged driver can run this command line (``args`` without nvcc;
    ``grammar``: that nvcc's, ``nvcc/grammar.Grammar``)."""
    from nvstage.compiler.cache.command.command_key import env_flags, side_env
    from nvstage.compiler.nvcc.depfile import depfile_options
    from nvstage.compiler.nvcc.grammar import expand_options_files, last_value
    from nvstage.compiler.nvcc.host_flags import unwatched_word
    from nvstage.errors import UsageError

    words = [*env_flags(environ, "NVCC_PREPEND_FLAGS"), *args,
             *env_flags(environ, "NVCC_APPEND_FLAGS")]
    try:
        parsed = expand_options_files(grammar.parse(words), grammar, cwd)
    except UsageError as e:
        return Fallback(f"options file: {e.message}")
    names = {a.option.long for a in parsed if a.option is not None}
    for long, why in _NOT_STAGED.items():
        if long in names:
            return Fallback(f"not staged: {why}")
    if not names & set(_STOPS):
        return Fallback("not staged: the command links (no -c, -dc, -ptx, -cubin or -fatbin)")
    unknown = [a.words[0] for a in parsed if a.is_unknown]
    if unknown and not names & set(_FORWARD_UNKNOWN):
        return Fallback(f"nvcc does not know {unknown[0]}: nvcc says what it thinks of it")
    # What gcc is told that makes it read or write a file no cache follows (a response file,
    # profile data; coverage notes, stack usage, its own dependency file): plain nvcc's, so
    # that those files are read and written every time.
    host = [p for a in parsed if a.is_("--compiler-options") and a.value
            for p in a.value.split(",")] + [w for a in parsed if a.is_unknown for w in a.words]
    word = unwatched_word(host)
    if word is not None:
        return Fallback(f"the host compiler is given {word}: it reads or writes a file "
                        "nvstage does not follow")
    var = side_env(environ)
    if var is not None:
        return Fallback(f"${var}: gcc writes a dependency file of its own")
    inputs = [a.words[0] for a in parsed if a.is_input]
    if len(inputs) != 1:
        return Fallback(f"{len(inputs)} input files: one at a time is staged")
    lang = last_value(parsed, "--x")
    if not (inputs[0].endswith(_CUDA_SUFFIXES) or lang == "cu") or lang in ("c", "c++"):
        return Fallback(f"{inputs[0]} is not compiled as CUDA")
    # nvcc plans such a path as a placeholder, and what it writes from that plan is not what a
    # plain run writes: the source's (its module id, its -rdc symbols), $TMPDIR's (the
    # temporary names gcc writes into the object). Plain nvcc's object, not a near one.
    from nvstage.compiler.nvcc.placeholders import needs_placeholder

    if needs_placeholder(inputs[0]):
        return Fallback(f"not staged: the source's path {inputs[0]!r} holds a blank, a quote, "
                        "$ or a backslash (nvcc's plan of it writes another module id)")
    if needs_placeholder(environ.get("TMPDIR", "")):
        return Fallback("not staged: $TMPDIR holds a blank, a quote, $ or a backslash (nvcc's "
                        "plan in it names the temporary files another way)")
    return Staged(inputs[0], depfile_options(parsed, inputs[0]))


def find_nvcc(name: str, environ=None) -> tuple[str, str] | None:
    """(nvcc's path, where it came from) for a launcher command's first word ``name``: a
    path, else the nvcc on PATH, else for the bare name ``nvcc`` the toolkit nvstage uses
    (``toolkit/nvcc_lookup``, as a hit finds it, then what cuda-pathfinder finds past it)."""
    from nvstage.compiler.toolkit import nvcc_lookup

    env = os.environ if environ is None else environ
    found = nvcc_lookup.find(name, env)
    if found is None and name == "nvcc" and not env.get(nvcc_lookup.ENV_NVCC):
        try:  # what only cuda-pathfinder sees: a toolkit root found through libcudart
            from cuda import pathfinder

            path = pathfinder.find_nvidia_binary_utility("nvcc")
        except Exception:  # pathfinder missing or confused: none found
            path = None
        if path:
            found = path, (nvcc_lookup.WHEELS if "site-packages" in path else "cuda-pathfinder")
    return found


def not_found(name: str, environ=None) -> str:
    """The one line a launcher command whose nvcc cannot be found says: what was looked for,
    where, and how to fix it."""
    from nvstage.compiler.toolkit.nvcc_lookup import ENV_NVCC

    env = os.environ if environ is None else environ
    said = f"nvstage: cannot find the compiler {name!r}: "
    if os.sep in name:
        return said + ("no executable file there; name nvcc's path, or write nvstage nvcc "
                       "ARGS for the nvcc on PATH (else the pip wheels')\n")
    if name != "nvcc":
        return said + f"no {name} on PATH; put it there, or name its path: nvstage " \
                      f"/path/to/{name} ARGS\n"
    if env.get(ENV_NVCC):
        return said + f"none on PATH, and ${ENV_NVCC} names no executable file " \
                      f"({env[ENV_NVCC]!r}); point it at nvcc, or unset it\n"
    return said + ("none on PATH and none in the pip wheels; install them in nvstage's "
                   f"environment ({sys.executable} -m pip install 'cuda-toolkit[nvcc]'), put "
                   "nvcc on PATH, or name it: nvstage /path/to/nvcc ARGS\n")


def run_staged(cmd: Command, hooks: Hooks | None = None) -> int:
    """Step 4: ``cmd`` run here (a miss): the exit status nvcc would give. A signal ends the
    tools it started (``proc.handle_signals``) and gives 128 + its number, as a shell says
    an interrupted command. ``hooks.answered``, if any, is told the status once the outputs
    and the build log's entry are written; the cache's bookkeeping comes after it."""
    from nvstage.proc import handle_signals

    try:
        with handle_signals():
            return _run(cmd, Hooks() if hooks is None else hooks)
    except KeyboardInterrupt as e:
        return 128 + (getattr(e, "signum", None) or 2)


def main(argv: list[str]) -> int:
    """``nvstage NVCC ARGS...`` run here, stage by stage (``run_staged``)."""
    return run_staged(Command.here(argv))


def _run(cmd: Command, hooks: Hooks) -> int:
    from nvstage.compiler.buildlog import current, log as buildlog
    from nvstage.errors import NvstageError

    t0, started = time.perf_counter(), time.time()
    argv = cmd.argv
    if cmd.ppid is not None:  # a command run for another process (the resident's client)
        current.belongs_to(cmd.ppid)
    found = find_nvcc(argv[0])
    args = argv[1:]
    if found is None:
        if os.sep in argv[0] and os.path.exists(argv[0]):  # a shell's 126: there, not runnable
            why = "Is a directory" if os.path.isdir(argv[0]) else "Permission denied"
            sys.stderr.write(f"nvstage: cannot run {argv[0]!r}: {why}\n")
            return 126
        sys.stderr.write(not_found(argv[0]))
        return 127
    nvcc, nvcc_from = found
    cwd = cmd.cwd
    if cwd is None:
        # Run from a folder since removed: plain nvcc runs there as it would (absolute
        # paths work); there is no folder to key, stage in or keep the build log in.
        return _plain(nvcc, args, None)
    entry = buildlog.Entry([nvcc, *args], cwd, started, 0.0, "fallback", 0, os.getpid(),
                           nvcc_from=nvcc_from)
    buildlog.ready(cwd)
    after: list = []  # the cache's bookkeeping, done once the command is answered
    try:
        code = _staged(nvcc, args, cwd, entry, after)
    except NvstageError as e:
        entry.reason = f"nvstage: {e.message}"
        code = None
    except Exception as e:  # a bug must never fail a build that nvcc passes
        entry.reason = f"nvstage bug: {type(e).__name__}: {e}"
        code = None
    if code is None:
        entry.status = "fallback"
        code = _plain(nvcc, args, cwd)
    if os.environ.get("NVSTAGE_LAUNCHER_VERBOSE"):
        from nvstage.compiler.toolkit.nvcc_lookup import is_elf, said

        how = {"ok": "staged", "failed": f"failed ({entry.reason})"}.get(
            entry.status, f"ran plain nvcc ({entry.reason})")
        try:
            script = not is_elf(os.path.realpath(nvcc))
        except OSError:
            script = False
        if script and entry.status == "ok":
            how += " (nvcc is a script: its commands are never answered whole)"
        sys.stderr.write(said(nvcc, nvcc_from, how))
    from nvstage.compiler.nvcc import step_kind as steps

    if entry.status == "fallback" and steps.kind_of(entry.argv) in (
            steps.DEVICE_LINK, steps.LINK, steps.ARCHIVE) and steps.source_of(entry.argv) is None:
        # A device link, link or library of objects: nvstage never stages these; plain nvcc
        # ran it, as it runs a C++ compile, and no compile of the build's fell back. (One
        # that compiles a source too, "nvcc a.cu -o app", is a compile that fell back.)
        entry.status = "ran" if code == 0 else "failed"
    entry.exit_code = code
    entry.seconds = time.perf_counter() - t0
    buildlog.add(entry, cwd)
    if hooks.answered is not None:
        hooks.answered(code)
    for work in after:
        try:
            work()
        except Exception:  # bookkeeping only: the command is done
            pass
    return code


def said_while_planning(build) -> str:
    """What nvcc itself said while it planned ("nvcc warning : incompatible redefinition for
    option 'gpu-architecture'"): in its --dryrun output, so in the plan (remembered ones too),
    and printed by plain nvcc on stderr before any tool runs."""
    return "".join(f"{m}\n" for m in build.plan.messages)


def _replay_output(build) -> None:
    """nvcc's own warnings, then what the tools printed, in plan order, as nvcc passes it
    through (bytes as decoded)."""
    import locale

    enc = locale.getpreferredencoding(False)
    said = said_while_planning(build)
    if said:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stderr.buffer.write(said.encode(enc, "replace"))
    for run in build.runs:
        for text, stream in ((run.stdout, sys.stdout), (run.stderr, sys.stderr)):
            if text:
                stream.flush()
                stream.buffer.write(text.encode(enc, "replace"))
    sys.stdout.flush()
    sys.stderr.flush()


def _plain(nvcc: str, args: list[str], cwd: str | None) -> int:
    import signal

    from nvstage import proc

    # nvcc removes its temporary files when interrupted (SIGINT), not on SIGTERM or SIGHUP
    # (seen, 13.5: tmpxft_* stay in $TMPDIR): ended by nvstage, it is interrupted, and what
    # it still leaves (SIGKILLed after the grace time) is removed.
    return proc.call([nvcc, *args], cwd=cwd, stop=signal.SIGINT, leftovers=remove_nvcc_temps)


# The clock file times are set from runs up to a tick behind time.time_ns().
_TICK_NS = 50_000_000


def remove_nvcc_temps(pid: int, started_ns: int) -> None:
    """The temporary files the nvcc ``pid`` left in $TMPDIR (``tmpxft_<pid: 8 hex digits>_*``,
    nvcc's own naming) once nvstage has ended it: only those changed since it started, when
    that pid was this nvcc's alone (an older leftover of the same number is not ours)."""
    import stat

    folder = os.environ.get("TMPDIR") or "/tmp"  # where nvcc puts them
    prefix = f"tmpxft_{pid:08x}_"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_ctime_ns >= started_ns - _TICK_NS:
                os.unlink(path)
        except OSError:
            pass


def _staged(nvcc: str, args: list[str], cwd: str, entry, after: list) -> int | None:
    """The command through nvstage's pipeline; None when plain nvcc must run it instead."""
    from nvstage.compiler.nvcc.grammar import grammar_for
    from nvstage.compiler.pipeline.planning import ask_ahead
    from nvstage.compiler.toolkit.locate import find_toolkit

    toolkit = find_toolkit(nvcc)
    staged = understand(args, grammar_for(toolkit.nvcc), cwd, dict(os.environ))
    if isinstance(staged, Fallback):
        entry.reason = staged.reason
        return None
    cache = os.environ.get("NVSTAGE_CACHE", "1") != "0"
    # nvcc plans while the pipeline below is imported (``planning``).
    with ask_ahead(toolkit.nvcc, list(args), cwd, remember=cache,
                   source=staged.source) as ahead:
        from nvstage.compiler.pipeline.driver import compile_command
        from nvstage.compiler.pipeline.request import Callbacks
        from nvstage.compiler.pipeline.jobserver import JobServer, jobs_in_build
        from nvstage.compiler.pipeline.scheduler import default_jobs
        from nvstage.errors import StageFailed

        # Inside a build: one stage at a time on the slot the build gave this command, more
        # only on tokens from its jobserver, or as $NVSTAGE_JOBS says.
        jobs = jobs_in_build()
        slots = JobServer.from_env() if jobs is None else None
        started_ns = time.time_ns()

        def remember(build, work, seen):  # what a later identical command is answered from
            from nvstage.compiler.cache.command.entry import CommandLine, outputs_of, record

            out = "".join(r.stdout for r in build.runs)
            err = said_while_planning(build) + "".join(r.stderr for r in build.runs)
            record(CommandLine(nvcc, args, cwd, dict(os.environ)), build, work,
                   outputs_of(build, cwd, work), out, err, started_ns, seen=seen,
                   build_doc=entry.build)

        try:
            build = compile_command(args, toolkit=toolkit, cwd=cwd, source=staged.source,
                                    jobs=jobs or (default_jobs() if slots else 1), slots=slots,
                                    depfile=staged.depfile, cache=cache, ahead=ahead,
                                    callbacks=Callbacks(on_built=remember, later=after))
        except StageFailed as e:
            # nvcc's own diagnostics and exit status, exactly: it runs the command again.
            entry.status = "failed"
            entry.reason = f"stage {e.stage_index} ({e.stage_kind}) failed"
            entry.build = e.build_doc if hasattr(e, "build_doc") else None
            return _plain(nvcc, args, cwd)
        finally:
            if slots is not None:
                slots.close()
    _replay_output(build)
    entry.status = "ok"
    entry.build = build.to_json()  # what the cache stores is stored after the answer
    # What the command key is made of, taken as the entry's key is (after the build,
    # the cache folder made: nvcc's variables are noted there): kept in the manifest, and so
    # in every hit's entry replaying it, for ``nvstage cache --explain``.
    from nvstage.compiler.cache.command.explain import summary

    entry.build["command_key"] = summary(nvcc, args, cwd, dict(os.environ))
    return 0
