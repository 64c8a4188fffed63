"""One build's stages through the stage cache: which stages, the lookup, the direct mode,
restoring a hit and storing a result.

A cacheable stage is looked up under its keys (``keys.py``). A hit's outputs are copied into
place with this build's work folder pasted back (``local/relocation.py``), and the stage does
not run; a miss runs, and is stored unless a file it read changed while it ran. Host-compiler
stages use the direct mode (ccache's): the first time such a stage runs it gets ``-MD -MF`` (the
output is byte-identical with and without it), and the headers it listed are recorded with their
hashes under its direct key. A later build hashes those headers again and, when they all match
and no new file would now hide one of them (``headers.py``), finds the result without starting
the compiler. The launcher, which stores the whole command (``cache/command/entry.py``) from what these
stages learnt, records no header set of its own (``StageCache(direct=False)``) unless a remote
tier shares the stages: the whole command's entry answers for the same headers.

What a key cannot see is never stored. A host-compiler stage runs with gcc's ``-Wdate-time``
(never an error: ``-Wno-error=date-time``): ``__DATE__``, ``__TIME__`` or ``__TIMESTAMP__``
reaching the output, however the name was spelt (pasted by a macro too), makes it warn, and
a stage that warned is not stored; the user sees the stderr plain nvcc prints (the warnings
taken out, or the stage run again without the flag when they are mixed with other
diagnostics). Files the assembler reads through ``.incbin`` are in no dependency list: a
stage that assembles a file mentioning it is not stored (``headers.not_cacheable``).

Tiers (``remote/tiers.py``). Behind the local folder, remote tiers (``NVSTAGE_REMOTE_CACHE``): a
stage that misses locally is looked up there under the same keys, and a hit is written into the
local folder and restored from it like a local one; a header set missing locally is looked up
there too. A stage that ran is stored locally, then pushed to the tiers that take writes. None
named, nothing of ``remote/`` is imported (the local folder's ``TierStats`` are kept as ever).

A base folder (``NVSTAGE_BASE_DIR``, ``keys.Place``): the stages' arguments get the paths under
it relative to the current folder, whether or not the cache is on, so that a build's outputs
do not depend on the cache.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.cache.stage.headers import (Trees, builtin_dirs, include_search,
                                                  not_cacheable, search_layout,
                                                  shadow_candidates)
from nvstage.compiler.cache.stage.stage_key import HOST_COMPILER, Keys, parse_depfile
from nvstage.compiler.cache.stage.lazy import Lazy, held, written_at_once
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.entries import Binding, Printed
from nvstage.compiler.store import hash_memo
from nvstage.compiler.cache.local.eviction import Counters
from nvstage.compiler.store.folder import MAX_DOC_BYTES, Scratch, read_file
from nvstage.compiler.cache.local.notes import TierStats, headers_digest
from nvstage.compiler.cache.remote import named as remote_named
from nvstage.compiler.nvcc.depfile import marked_files
from nvstage.compiler.nvcc.graph import Graph
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.manifest.model import Artifact, StageRun, arch_of, kind_of, stage_arch
from nvstage.compiler.toolkit.locate import Toolkit
from nvstage.compiler.nvcc.host_flags import unwatched_word
from nvstage.compiler.cache.command.command_key import side_env
from nvstage.compiler.store.presence import Presence, present
from nvstage.errors import CacheError
from nvstage.paths import base_dir

# Stages whose outputs follow from their key. Not the final link (it searches for system
# libraries by name) nor anything unclassified.
_CACHEABLE = frozenset({
    StageKind.HOST_PREPROCESS, StageKind.CUDAFE, StageKind.DEVICE_PREPROCESS, StageKind.CICC,
    StageKind.PTXAS, StageKind.FATBINARY, StageKind.HOST_COMPILE, StageKind.DEVICE_LINK,
    StageKind.DLINK_FATBINARY, StageKind.DLINK_COMPILE})
# A file the stage read that changed after (or this close before) its start may have changed
# while the tool read it: the result is not stored (ccache's "file too new"). The margin covers
# file timestamps taken from the kernel's coarse clock (one tick, at most 10 ms), and stays below
# the time nvcc --dryrun takes, so files written just before nvstage started still count.
_SETTLE_NS = 10_000_000
# The tools that write cudafe++'s host stub, which names its own path in a #line marker.
_STUB_WRITERS = frozenset({StageKind.CUDAFE, StageKind.CICC})
# Given to a host-compiler stage the cache may store: a time macro in any spelling warns
# (gcc 4.9+, clang), and a user's -Werror cannot make the warning fail the stage.
DATE_TIME_ARGS = ("-Wdate-time", "-Wno-error=date-time")
_DATE_TIME = "Wdate-time"  # in the warning's [-Wdate-time], and in JSON diagnostics
# The lines of gcc's -Wdate-time warnings: the warning, the include chain before it, the
# source and caret lines under it (indented), the macro expansions noted after it.
_DT_LINE = re.compile(
    r'.+:\d+:\d+: warning: macro "__(?:DATE|TIME|TIMESTAMP)__" might prevent reproducible '
    r'builds \[-Wdate-time\]'
    r'|In file included from .+[:,]|\s+from .+[:,]'
    r'|.+:\d+:\d+: note: in (?:expansion|definition) of macro .+'
    r'|\s.*|')


def without_date_time(stderr: str) -> str | None:
    """``stderr`` without the warnings ``DATE_TIME_ARGS`` caused: "" when it holds nothing
    else, None when other diagnostics are mixed in (gcc prints an include chain once for
    several diagnostics, so which lines were the warning's cannot be told: run it again)."""
    lines = stderr.splitlines()
    if all(_DT_LINE.fullmatch(line) for line in lines):
        return ""
    return None


def open_cache(cache: bool | str | os.PathLike | Cache) -> Cache | None:
    """The cache a build uses, made and marked when new. Raises ``CacheError`` for a bad
    size or a folder that cannot be nvstage's (a file, somebody else's folder): a build
    silently uncached there would look like a working cache."""
    if cache is False or cache is None:
        return None
    store = cache if isinstance(cache, Cache) else Cache(None if cache is True else cache)
    try:
        return store.open()
    except CacheError as e:
        # A read-only home is no reason to fail a build nobody asked to cache anywhere in
        # particular; a folder the user named, a file or somebody's folder is.
        cause = e.__cause__
        if store.default and isinstance(cause, OSError) and \
                cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return None
        raise


@dataclass(frozen=True)
class Seen:
    """What one build's host-compiler stages read, as the stage cache learnt it: the files each
    host-compiler stage read (stage index -> absolute paths, from the compiler's own
    dependency list), and ``digest(path)``, a file's SHA-256 as hashed for the keys (hashed
    again only when its stat moved), and ``shadow``: each such stage's places where a new
    file would hide a header it read, and its search folders' layout (``headers.py``). The
    whole-command entry (``cache/command/entry.py``) is made from it rather than reading and hashing every
    header, and working out every hiding place, a second time."""

    reads: dict[int, list[str]]
    digest: Callable[[str], str | None]
    shadow: dict[int, tuple[list[str], list]] = field(default_factory=dict)
    # A virtual preprocessed output's names, as its entry recorded them (``lazy.Lazy.marks``).
    marks: Callable[[str], list | None] | None = None
    # An output outside the work folder -> (the entry's file holding it, its SHA-256, size):
    # the whole-command entry links that file rather than keep the bytes twice.
    blobs: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    # The outputs outside the work folder as the build left them, read before its answer
    # (``driver.outputs_now``): relative name -> (bytes, executable).
    taken: dict[str, tuple[bytes, bool]] | None = None
    # Preprocessing stages that ran and were judged storable (their files settled, no time
    # macro, no .incbin) but not stored, the stage cache told so (``StageCache(direct=False)``).
    judged: int = 0

    def read_by(self, stage: Stage, cwd: str, work: str, env,
                fixed: list[str]) -> tuple[list[str], tuple[list[str], list]] | None:
        """(the files a host-compiler stage read, outside the work folder; (the places where
        a new file would hide one of them, its search folders' layout)): as learnt while it
        ran, else, for a preprocessing stage, from its output's line markers and its search
        path (``fixed``: folders nothing is added to, the toolkit's). None when that is not
        known: the host compile's reads (the stub's ``crt/host_runtime.h``, a
        ``-Xcompiler -include`` file's host-only headers) are learnt only while it runs."""
        names = self.reads.get(stage.index)
        if names is None:  # not through the direct mode: a preprocessor's line markers say
            if stage.kind not in _PREPROCESSORS:
                return None
            out = os.path.join(cwd, stage.outputs[0])
            marked = self.marks(out) if self.marks is not None else None
            if marked is None:
                data = fsio.read_or_none(out, 1 << 31)
                if data is None:
                    return None
                marked = marked_files(data)
            names = [os.path.join(cwd, n) for n, _ in marked]
        # The outputs of earlier stages (the work folder) are nvstage's own, not inputs.
        names = [n for n in names if not n.startswith(work + os.sep)]
        known = self.shadow.get(stage.index)
        if known is None:
            builtin = builtin_dirs(stage.argv, env)
            search = include_search(stage.argv, cwd, env, builtin)
            known = (shadow_candidates(names, search, cwd, [*builtin, *fixed]),
                     search_layout(search))
        return names, known


@dataclass(frozen=True)
class Runner:
    """How a stage of one build runs for real: the driver's ``run_stage`` (given, so that the
    cache never reaches back into the driver), called with the build's environment, folder
    and start (``perf_counter``)."""

    run_stage: Callable[..., StageRun]
    env: dict[str, str]
    cwd: str
    t0: float
    traced: bool = False  # cicc and ptxas run under -fdevice-time-trace (it changes their code)


class StageCache:
    """What every stage of one build shares: environment, folders, the cache and counters.
    ``runner`` runs a stage for real; with no ``cache`` every stage just runs."""

    def __init__(self, plan: Plan, graph: Graph, runner: Runner, work: str, toolkit: Toolkit,
                 cache: Cache | None, *, keep: bool = False, direct: bool = True):
        env, cwd, t0, run_stage = runner.env, runner.cwd, runner.t0, runner.run_stage
        self.graph, self.env, self.cwd = graph, env, cwd
        # ``direct``: a preprocessing stage that ran is stored under the headers it read. A
        # launcher that stores the whole command (``cache/command/entry.py``, from what the stages
        # learnt here) does without, unless a tier shares the stages with other machines:
        # its answer covers the same headers, and storing both cost about a third of what a
        # miss adds to nvcc's own CPU time (the hiding places looked at twice, the
        # preprocessed text stored for a hit that restores it only when its next stage runs).
        self.direct = direct
        self._judged = 0  # such stages that ran and would have been stored
        self.toolkit, self.cache, self.t0 = toolkit, cache, t0
        self.keep = keep  # every intermediate written, and held by the entries
        self._run_stage = run_stage
        self.counters = Counters()
        self._lock = threading.Lock()
        self.keys = Keys(plan, cwd, work, toolkit, base_dir(), traced=runner.traced)
        if cache is not None and not keep:
            # Headers' digests by identity, from earlier processes: only with a work folder
            # this process made under a random name (a remembered header cannot spell it);
            # a keep folder has a name a header may hold.
            self.keys.hasher.kept = hash_memo.load(cache)
            self.keys.hasher.kept.trust([toolkit.root])
        if self.keys.place.base:
            for stage in plan.runnable:
                if stage.kind in _CACHEABLE:
                    stage.argv[1:] = [self.keys.place.word(a) for a in stage.argv[1:]]
        self._scratch: Scratch | None = None
        self._shadows: dict[tuple, str] = {}  # (headers, search folders) -> shadow digest
        self._places_of: dict[tuple, tuple[list[str], list]] = {}  # and its places, layout
        self._presence = Presence()
        self.local = TierStats()  # the local folder's figures for this build
        self.tiers = None  # remote/tiers.Tiers, where a remote tier is named
        if cache is not None and remote_named():  # else nothing of remote/ is imported
            from nvstage.compiler.cache.remote.tiers import open_tiers

            self.tiers = open_tiers(cache)  # None where they fail: never a build's failure
        if self.tiers is not None:
            self.tiers.local = self.local
        self._reads: dict[int, list[str]] = {}  # host-compiler stage -> the files it read
        self._shadow_of: dict[int, tuple[list[str], list]] = {}  # and its hiding places
        # What follows a miss (hashing what it read, storing what it wrote) is done on a
        # thread of its own while the next stage's tool runs, not between the two; a stage
        # that overwrites or removes an earlier stage's output waits for it (``settle``).
        self._after: dict[int, Future] = {}  # stage index -> its bookkeeping
        self._bookkeeper: ThreadPoolExecutor | None = None
        # What hits stand for and no stage has needed yet (``lazy.py``).
        self.lazy = Lazy(cache, self.keys, graph, cwd, env, t0, run_stage) \
            if cache is not None else None
        self._thin: set[int] = set()  # stages whose entry held too little for this build
        self._blobs: dict[str, tuple[str, str, int]] = {}  # ``Seen.blobs``

    def seen(self) -> Seen:
        return Seen(dict(self._reads), self._digest, dict(self._shadow_of),
                    self.lazy.marks if self.lazy is not None else None, dict(self._blobs),
                    judged=self._judged)

    def _digest(self, path: str) -> str | None:
        look = self.keys.hasher.look(path)
        return look.digest if look is not None and not look.inside else None

    def _later(self, stage: Stage, fn: Callable[..., None], *args) -> None:
        with self._lock:
            if self._bookkeeper is None:
                self._bookkeeper = ThreadPoolExecutor(1, thread_name_prefix="nvstage-store")
            # In the stage's context: a tool it starts (gcc -E -v) ends with the build's.
            self._after[stage.index] = self._bookkeeper.submit(
                contextvars.copy_context().run, _quietly, fn, stage, *args)

    def settle(self, stages: Iterable[int] | None = None) -> None:
        """Wait for the bookkeeping of the stages that ran (of ``stages``, when given); a bug
        in it is raised here."""
        with self._lock:
            which = list(self._after) if stages is None else \
                [i for i in stages if i in self._after]
            pending = [self._after.pop(i) for i in which]
        for fut in pending:
            fut.result()

    def close(self) -> None:
        if self._bookkeeper is not None:  # an interrupted build: what was begun is finished
            self._bookkeeper.shutdown(wait=True)
        if self._scratch:
            self._scratch.close()
        if self.tiers is not None:
            self.counters.tiers = self.tiers.to_json()
        if self.lazy is not None:
            self.counters.made_again = self.lazy.replayed
        if self.cache is not None:
            try:
                if self.counters.hits or self.counters.misses:
                    self.cache.record(self.counters)
                    if self.tiers is not None:  # the local folder's figures among theirs
                        self.tiers.record()
                    else:
                        self.cache.add_tier_stats([{"tier": "local", **self.local.to_json()}])
                if self.counters.stored:
                    self.cache.evict()
                if self.keys.hasher.kept is not None:
                    hash_memo.save(self.cache, self.keys.hasher.kept)
            except (OSError, CacheError):
                pass  # bookkeeping only: never fail a build over it

    def count(self, counter: str) -> None:
        """One more of ``counter`` (a ``Counters`` field: hits, misses, corrupt, ...)."""
        with self._lock:
            setattr(self.counters, counter, getattr(self.counters, counter) + 1)

    def run(self, stage: Stage) -> StageRun:
        if stage.index in self.graph.rewrites:
            self.settle(self.graph.rewrites[stage.index])
        if self.lazy is not None:
            if stage.kind is StageKind.CLEANUP:  # a virtual file it removes is just dropped
                self.lazy.forget(stage.inputs)
            elif stage.kind is StageKind.DEPFILE:  # from what the entries recorded
                return self._run_stage(stage, self.env, self.cwd, self.t0,
                                       marks=self.lazy.marks)
        if self.cache is None or stage.kind not in _CACHEABLE or not stage.outputs:
            return self._uncached(stage)
        if stage.kind in HOST_COMPILER and self._unwatched(stage):
            return self._uncached(stage)
        try:
            return self._cached(stage)
        except OSError:
            # The cache folder is unusable (full disk, permissions) before the stage ran:
            # build as if it were off. (Failures after it ran are caught where they happen.)
            return self._uncached(stage)

    def _unwatched(self, stage: Stage) -> bool:
        """gcc reads or writes a file the cache neither keys nor restores (a response file,
        --coverage's .gcno, -fstack-usage's .su, $DEPENDENCIES_OUTPUT): run it every time."""
        return unwatched_word(stage.argv[1:]) is not None or side_env(self.env) is not None

    def _uncached(self, stage: Stage, extra_args: tuple[str, ...] = ()) -> StageRun:
        """Run the stage's tool, its virtual inputs made real first (``lazy.Diverged``)."""
        if self.lazy is None:
            return self._run_stage(stage, self.env, self.cwd, self.t0, extra_args)
        self.lazy.need(stage)
        run = self._run_stage(stage, self.env, self.cwd, self.t0, extra_args)
        self.lazy.forget(stage.outputs)
        return run

    def _scratch_dir(self) -> str:
        """This build's scratch folder in the cache's tmp/, held (locked) until ``close``:
        a ``cache --clear`` meanwhile leaves it alone."""
        with self._lock:
            if self._scratch is None:
                self._scratch = self.cache.scratch()
        return self._scratch.path

    def _cached(self, stage: Stage) -> StageRun:
        started = time.perf_counter() - self.t0
        t = time.perf_counter()
        keyed = self.keys.inputs(stage, self.graph.reads(stage.index))
        if keyed is None:
            return self._uncached(stage)  # the tool says what is missing
        reads, inputs, looks = keyed
        base = self.keys.base(stage, inputs)
        pinned = self.keys.pinned(stage, looks)
        if stage.kind in HOST_COMPILER and not any(a.startswith("-M") for a in stage.argv):
            return self._direct(stage, self.keys.direct(base, pinned), reads, started, t)
        keys = self.keys.candidates(base, pinned)
        hit = self._restore(stage, keys, started, t)
        if hit is not None:
            return hit
        since = time.time_ns()
        if stage.kind in HOST_COMPILER:  # the user's own -M flags: no direct mode
            run, warned = self._run_host(stage)
            if warned or not_cacheable([self.keys.paths.abs(p) for p in reads],
                                       assembles="-c" in stage.argv):
                self._missed(run.seconds)
                return run
        else:
            run = self._uncached(stage)
        self._missed(run.seconds)
        if run.ok:
            # The stub's marker naming itself is the path's own doing only while nothing the
            # stage read spelt the path (a marker copied from an input is the input's).
            self._later(stage, self._store_settled, keys, run, reads, since,
                        stage.kind in _STUB_WRITERS and
                        not any(look is not None and look.mentions for look in looks))
        return run

    def _store_settled(self, stage: Stage, keys: tuple[str, ...], run: StageRun,
                       reads: list[str], since: int, own_markers: bool) -> None:
        if self._settled(reads, since):
            self._store(stage, keys, run, own_markers=own_markers)

    def _direct(self, stage: Stage, dkey: str, reads: list[str], started: float,
                t: float) -> StageRun:
        """A host-compiler stage: found through the headers it read last time, or run with
        ``-MD`` and stored under the headers it reads now (ccache's direct mode). A header set
        matches only while no new file would hide one of its headers (``headers.py``)."""
        local_sets = self.cache.header_sets(dkey)
        # Where gcc searches, only with a set to match: a new unit works it out after its run
        search, fixed = self._search(stage) if local_sets or self.tiers else (None, None)
        hit = self._match_sets(stage, dkey, local_sets, search, fixed, started, t)
        if hit is not None:
            return hit
        held: list = []  # the sets the tiers hold for this direct key
        if self.tiers is not None:
            held = self.tiers.fetch_sets(dkey)
            hit = self._match_sets(stage, dkey, [s for s in held if s not in local_sets],
                                   search, fixed, started, t, remember=True)
            if hit is not None:
                return hit
        depfile = os.path.join(self._scratch_dir(), f"{stage.index}.d")
        since = time.time_ns()
        run, warned = self._run_host(stage, ("-MD", "-MF", depfile))
        self._missed(run.seconds)
        if run.ok and not warned:
            self._later(stage, self._record_direct, dkey, depfile, reads, since, search,
                        fixed, run, held)
        return run

    def _record_direct(self, stage: Stage, dkey: str, depfile: str, reads: list[str],
                       since: int, search: list[str] | None, fixed: list[str] | None,
                       run: StageRun, held: list) -> None:
        """A direct-mode stage that ran: stored under the headers its dependency list names,
        with the state of the places where a file would hide one of them."""
        paths, hasher = self.keys.paths, self.keys.hasher
        if search is None:
            search, fixed = self._search(stage)
        try:
            names = parse_depfile(  # names round-trip, as the plan's do
                read_file(depfile, MAX_DOC_BYTES).decode(errors="surrogateescape"))
        except OSError:
            return
        looks = [hasher.look(paths.abs(n)) for n in names]
        headers = {paths.name(n): look and look.digest for n, look in zip(names, looks)}
        digest = headers_digest(headers.items()) if all(headers.values()) else None
        # The places a hiding file could be, as they are now (not the build's memory): one
        # that appeared while the compiler ran may or may not have been seen, so the result
        # is not stored (ccache's "file too new", for the places nobody read). Time macros
        # and .incbin are looked for in the user's files only: the compiler's and toolkit's
        # use neither.
        files = [paths.abs(n) for n in names]
        self._reads[stage.index] = files
        cands = sorted(shadow_candidates(files, search, self.cwd, fixed))
        layout = search_layout(search)
        self._shadow_of[stage.index] = (cands, layout)
        # Without a stage entry to store (the launcher's whole entry answers next time) the
        # result is only judged, as if stored: the hiding places are not looked at.
        storing = self.direct or self.tiers is not None
        shown = present(cands) if storing else []
        trees = Trees(fixed)
        if not (all(headers.values()) and self._settled([*reads, *names, *shown], since)) or \
                not_cacheable([f for f in files if f not in trees], assembles="-c" in stage.argv):
            return
        if not storing:
            with self._lock:
                self._judged += 1
            return
        self._store(stage, self.keys.candidates([dkey, "headers", digest],
                                                self.keys.pinned(stage, looks)), run)
        shadow = fsio.json_digest(self.keys.place.tree([layout, shown]))
        mine = (sorted(headers), digest, shadow)
        with contextlib.suppress(OSError):  # the stage ran: never run it again over this
            self.cache.add_header_set(dkey, *mine)
        if self.tiers is not None:
            both = [mine, *self.cache.header_sets(dkey), *held]
            self.tiers.push_sets(dkey, [s for n, s in enumerate(both) if s not in both[:n]])

    def _search(self, stage: Stage) -> tuple[list[str], list[str]]:
        """gcc's search folders for this host-compiler stage, and the fixed ones (its own,
        the toolkit's) whose files' digests the hash memo may keep."""
        builtin = builtin_dirs(stage.argv, self.env, self.cache)
        if self.keys.hasher.kept is not None:
            self.keys.hasher.kept.trust(builtin)
        return include_search(stage.argv, self.cwd, self.env, builtin), \
            [*builtin, self.toolkit.root]

    def _match_sets(self, stage: Stage, dkey: str, sets: list, search: list[str],
                    fixed: list[str], started: float, t: float,
                    remember: bool = False) -> StageRun | None:
        """The result found through the first of ``sets`` (names, their contents' digest,
        shadow) whose headers are unchanged and unhidden; ``remember``: a set from a remote
        tier, added to the local folder when it hits."""
        paths, hasher = self.keys.paths, self.keys.hasher
        for names, digest, shadow in sets:
            named = [paths.real(name) for name in names]
            if None in named:
                continue
            files = [paths.abs(f) for f in named]
            looks = [hasher.look(f) for f in files]
            if all(look is not None for look in looks) and headers_digest(
                    (n, look.digest) for n, look in zip(names, looks)) == digest and \
                    self._shadow(files, search, fixed) == shadow:
                keys = self.keys.candidates([dkey, "headers", digest],
                                            self.keys.pinned(stage, looks))
                hit = self._restore(stage, keys, started, t)
                if hit is not None:
                    self._reads[stage.index] = files
                    self._shadow_of[stage.index] = self._places(files, search, fixed)
                    self.count("direct_hits")
                    if remember:
                        with contextlib.suppress(OSError):
                            self.cache.add_header_set(dkey, names, digest, shadow)
                    return hit
        return None

    def _run_host(self, stage: Stage, extra: tuple[str, ...] = ()) -> tuple[StageRun, bool]:
        """Run a host-compiler stage with ``extra`` and ``DATE_TIME_ARGS``: the run, its stderr
        what plain nvcc prints, and whether a time macro reached its output (not to be
        stored). A user who asks for date-time warnings (or against them) gets them as asked:
        the stage runs with the user's flags alone, and any such warning still counts."""
        own = any(a.startswith("-W") and a.endswith("date-time") for a in stage.argv)
        run = self._uncached(stage, extra if own else (*extra, *DATE_TIME_ARGS))
        if _DATE_TIME not in run.stderr:
            return run, False
        if own:
            return run, True
        plain = without_date_time(run.stderr)
        if plain is None:  # mixed with other diagnostics, or the compiler took no such flag
            return self._uncached(stage, extra), True
        run.stderr = plain
        return run, True

    def _places(self, files: list[str], search: list[str],
                fixed: list[str]) -> tuple[list[str], list]:
        """The places where a new file would hide one of these headers, and the search
        folders' layout, once per build for a header set: every arch's preprocessing asks
        about the same ones."""
        key = (tuple(files), tuple(search))
        got = self._places_of.get(key)
        if got is None:
            got = self._places_of[key] = (sorted(shadow_candidates(files, search, self.cwd,
                                                                   fixed)),
                                          search_layout(search))
        return got

    def _shadow(self, files: list[str], search: list[str], fixed: list[str]) -> str:
        """The digest of those places' state, as this build first saw it."""
        key = (tuple(files), tuple(search))
        state = self._shadows.get(key)
        if state is None:
            cands, layout = self._places(files, search, fixed)
            state = self._shadows[key] = fsio.json_digest(self.keys.place.tree([
                layout, present(cands, self._presence)]))
        return state

    def _settled(self, reads: list[str], since_ns: int) -> bool:
        """No file the stage read outside the work folder changed since it started."""
        for p in reads:
            path = os.path.abspath(self.keys.paths.abs(p))
            if path.startswith(self.keys.hasher.volatile):
                continue  # written by this build's earlier stages, before this one started
            try:
                st = os.stat(path)
            except OSError:
                return False
            if max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns - _SETTLE_NS:
                return False
        return True

    def _restore(self, stage: Stage, keys: tuple[str, ...], started: float,
                 t: float) -> StageRun | None:
        """The first entry found under ``keys``, copied into place with this build's work
        folder at its sites; None when there is none (a damaged one is dropped)."""
        t_local = time.perf_counter()
        for key in keys:
            hit = self._restore_one(stage, key, started, t)
            if hit is not None:
                self._local(hits=1, seconds=time.perf_counter() - t_local,
                            bytes_read=sum(a.size for a in hit.artifacts))
                return hit
        self._local(seconds=time.perf_counter() - t_local)
        if self.tiers is not None:
            key = self.tiers.fetch_entry(keys)
            if key is not None:
                hit = self._restore_one(stage, key, started, t)
                if hit is not None:
                    self._local(misses=1)  # found behind the local folder
                return hit
        return None

    def _missed(self, seconds: float) -> None:
        """A stage that ran for ``seconds``: a miss in every tier asked (and, to a remote
        tier's budget, the work a hit there would have saved)."""
        self.count("misses")
        self._local(misses=1)
        if self.tiers is not None:
            self.tiers.missed(seconds)

    def _restore_one(self, stage: Stage, key: str, started: float,
                     t: float) -> StageRun | None:
        """The entry under ``key``: what the build needs now written into place, the rest
        left virtual (``lazy.py``); None when absent, damaged (dropped), or holding too little
        for this build (a --keep build reads every file: the stage runs and its entry is made
        whole)."""
        entry = self.cache.get(key, self.keys.where)
        if entry is None:
            return None
        restored = None
        later: dict[int, str] = {}
        if entry is not False:
            try:  # each file is stored under its place in the stage's outputs
                dests = [os.path.abspath(self.keys.paths.abs(stage.outputs[int(f["name"])]))
                         for f in entry.files]
            except (ValueError, IndexError, KeyError, TypeError):
                dests = None
            if dests is not None:
                now = [d if written_at_once(stage, d, self.keys.work, self.keep) else None
                       for d in dests]
                if any(d is not None and "z" not in f for d, f in zip(now, entry.files)):
                    self._thin.add(stage.index)
                    return None
                restored = self.cache.restore(entry, now, self.keys.where)
                later = {i: d for i, d in enumerate(dests) if now[i] is None}
        if restored is None:  # damaged: drop it; the stage runs and stores a good one
            self.cache.discard(key)
            self.count("corrupt")
            return None
        if self.lazy is not None:
            self.lazy.forget(restored.files)
            self.lazy.add(stage, entry, later)
        self._note_blobs(entry, dests)
        return self._hit(stage, entry, restored, later, started, t)

    def _note_blobs(self, entry, dests: list[str]) -> None:
        """Which of ``entry``'s files hold an output outside the work folder as it is."""
        for i, dest in enumerate(dests):
            info = entry.files[i]
            if "z" in info and not info["sites"] and \
                    not dest.startswith(os.path.join(self.keys.work, "")):
                with self._lock:
                    self._blobs[dest] = (str(entry.path / str(i)), info["sha256"], info["size"])

    def _local(self, *, hits: int = 0, misses: int = 0, stored: int = 0, seconds: float = 0.0,
               bytes_read: int = 0, bytes_written: int = 0) -> None:
        """Added to the local folder's figures for this build (``TierStats``)."""
        with self._lock:
            self.local.add({"hits": hits, "misses": misses, "stored": stored,
                            "seconds": seconds, "bytes_read": bytes_read,
                            "bytes_written": bytes_written})

    def _hit(self, stage: Stage, entry, restored, later: dict[int, str], started: float,
             t: float) -> StageRun:
        """A hit's record. A file left virtual is listed with the size it would have and, where
        the work folder's path would be pasted into it, the digest keys saw instead of its
        SHA-256 (it was never written)."""
        self.count("hits")
        run = StageRun(stage, time.perf_counter() - t, 0, entry.stdout, entry.stderr,
                       started=started, cached=True)
        files = [(d, sha, size) for d, (sha, size) in restored.files.items()]
        for i, d in later.items():
            rec = entry.recorded(i)
            files.append((d, rec.sha256 or rec.digest, rec.size))
        run.artifacts = [Artifact(os.path.abspath(d), kind_of(d),
                                  stage_arch(stage) or arch_of(d), size, sha, stage.index)
                         for d, sha, size in files]
        return run

    def _store(self, stage: Stage, keys: tuple[str, ...], run: StageRun, *,
               own_markers: bool = False) -> None:
        """Store under ``keys[0]``, or under the key bound to this folder (the last) when
        the outputs hold its path where another folder could not trust it (``Cache.put``)."""
        slots = [n for n, p in enumerate(stage.outputs) if Path(self.cwd, p).is_file()]
        outs = [os.path.abspath(self.keys.paths.abs(stage.outputs[n])) for n in slots]
        t = time.perf_counter()
        try:
            key = self.cache.put_entry(
                keys[0], outs, Printed(run.stdout, run.tool_stderr, run.seconds),
                Binding(work=self.keys.where, pinned=keys[-1], own_markers=own_markers,
                        place=self.keys.place_key(keys)),
                names=[str(n) for n in slots],
                about={"kind": stage.kind.value, "arch": stage.arch},
                stored=[held(stage, p, self.keys.work, self.keep) for p in outs],
                marks=_marks if stage.kind in _PREPROCESSORS else None,
                replace=stage.index in self._thin)
        except OSError:
            return  # an output vanished or the disk is full: the build itself is fine
        if key is None:
            return
        entry = self.cache.get(key, self.keys.where)
        if entry and len(entry.files) == len(outs):  # in the order they were stored
            self._note_blobs(entry, outs)
        self.count("stored")
        self._local(stored=1, seconds=time.perf_counter() - t,
                    bytes_written=sum(a.size for a in run.artifacts))
        if self.tiers is not None:
            self.tiers.push_entry(key)


_PREPROCESSORS = frozenset({StageKind.HOST_PREPROCESS, StageKind.DEVICE_PREPROCESS})


def _marks(data: bytes) -> list[tuple[str, bool]]:
    """What a preprocessed output's line markers name: its dependency file, without it."""
    return marked_files(data)


def _quietly(fn: Callable[..., None], *args) -> None:
    """Bookkeeping that meets a full disk or a vanished file stores nothing: the build
    itself is fine."""
    try:
        fn(*args)
    except OSError:
        pass
