"""The files a hit stands for: not written until a stage that runs needs them.

A stage found in the cache is not copied out whole. Its outputs outside the work folder (what
the command asked for) are written at once; in the work folder each output becomes a virtual
file, known by what the entry recorded of it (``entries.Recorded``): the next stage's key is made
from that digest, without the file (``keys.FileHasher.virtual``). When every stage hits, no
intermediate is ever written. Only a stage that runs reads its inputs, and only then are they
made real (``need``): copied out of the entry when it holds them, else made again by the stage
that wrote them (``replay``), which is why entries need not hold what their stage makes again
byte for byte from inputs a build has:

- a preprocessed source (``gcc -E``: megabytes, made again from the source and its headers);
- cudafe++'s host source (``.cudafe1.cpp``: megabytes): cudafe++ is run again without
  ``--gen_module_id_file``, so that it reads the module id the entry holds instead of making one
  (a source that names no external symbol gets cudafe++'s process id in its module id: a new one
  would change every later stage's input);
- fatbinary's outputs (a few milliseconds to make again from the cubins and PTX).

A file made again must be the one recorded, digest for digest: anything else (a header changed
since it was looked at, a tool that is not deterministic) raises ``Diverged``, and the build is
run again without the cache (``driver``): never a mix of two runs' files.

With ``--keep`` every output is written and every entry holds everything: the folder is for
reading. A ptxas stage's cubins are written too: the manifest reads its kernels' figures
from them.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable

from nvstage.compiler.cache.stage.stage_key import Keys, Look
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.nvcc.graph import Graph
from nvstage.compiler.nvcc.plan import Stage, StageKind
from nvstage.compiler.manifest.model import StageRun

# Stages whose outputs in the work folder an entry does not hold: made again when needed.
_MADE_AGAIN = frozenset({StageKind.HOST_PREPROCESS, StageKind.DEVICE_PREPROCESS,
                         StageKind.FATBINARY, StageKind.DLINK_FATBINARY})
_GEN_MODULE_ID = "--gen_module_id_file"


class Diverged(Exception):
    """A file made again is not the one its entry recorded, or could not be made: this
    build's cached results cannot be trusted to fit together."""


def held(stage: Stage, path: str, work: str, keep: bool) -> bool:
    """Whether an entry for ``stage`` holds the bytes of its output ``path`` (absolute)."""
    if keep or not path.startswith(os.path.join(work, "")):
        return True
    if stage.kind in _MADE_AGAIN:
        return False
    if stage.kind is StageKind.CUDAFE:  # its module id is held: the host source is made again
        return not path.endswith(".cudafe1.cpp")
    return True


def written_at_once(stage: Stage, path: str, work: str, keep: bool) -> bool:
    """Whether a hit writes output ``path`` at once rather than keeping it virtual."""
    return keep or not path.startswith(os.path.join(work, "")) or \
        stage.kind is StageKind.PTXAS


@dataclasses.dataclass
class _File:
    stage: Stage
    entry: object  # entries.StageEntry
    slot: int  # its place in entry.files


class Lazy:
    """One build's virtual files: recorded at a hit, made real on demand. Thread-safe: stages
    running at once may need the same file (every arch's cicc needs the module id)."""

    def __init__(self, cache: Cache, keys: Keys, graph: Graph, cwd: str, env: dict,
                 t0: float, run_stage: Callable[..., StageRun]):
        self.cache, self.keys, self.graph = cache, keys, graph
        self.cwd, self.env, self.t0 = cwd, env, t0
        self._run_stage = run_stage
        self._files: dict[str, _File] = {}
        self._lock = threading.RLock()
        self.replayed = 0  # stages run again to make a file a later stage needed
        self.restored = 0  # files copied out of an entry when needed

    def _path(self, p: str) -> str:
        return os.path.normpath(self.keys.paths.abs(p))

    def add(self, stage: Stage, entry, slots: dict[int, str]) -> None:
        """``entry``'s files (place in it -> path) stand in for ``stage``'s outputs."""
        with self._lock:
            for slot, path in slots.items():
                path = os.path.normpath(path)
                rec = entry.recorded(slot)
                self._files[path] = _File(stage, entry, slot)
                self.keys.hasher.virtual[path] = Look(rec.digest, rec.inside, rec.mentions,
                                                      rec.binary)

    def forget(self, paths) -> None:
        """These files are real now, or removed: no longer virtual."""
        with self._lock:
            for p in paths:
                p = self._path(p)
                self._files.pop(p, None)
                self.keys.hasher.virtual.pop(p, None)

    def is_virtual(self, path: str) -> bool:
        return self._path(path) in self._files

    def need(self, stage: Stage) -> None:
        """Make real every virtual file ``stage`` reads. Raises ``Diverged``."""
        if not self._files:
            return
        for p in self.graph.reads(stage.index):
            self.materialize(p)

    def materialize(self, p: str) -> None:
        """The virtual file ``p`` made real: copied out of its entry, else made again by its
        stage. Raises ``Diverged``."""
        path = self._path(p)
        with self._lock:
            f = self._files.get(path)
            if f is None:
                return
            dests: list[str | None] = [None] * len(f.entry.files)
            dests[f.slot] = path
            if "z" in f.entry.files[f.slot] and \
                    self.cache.restore(f.entry, dests, self.keys.where) is not None:
                self.restored += 1
                self.forget([path])
                return
            self._replay(f.stage, f.entry)

    def marks(self, p: str) -> list | None:
        """The files a virtual preprocessed output ``p`` names (``depfile``), as its entry
        recorded them; None when it is no virtual file, or its entry kept no marks (then it is
        made real, to be read)."""
        path = self._path(p)
        with self._lock:
            f = self._files.get(path)
            if f is None:
                return None
            got = self.cache.marks(f.entry, self.keys.where)
            if got is not None and f.slot < len(got) and got[f.slot] is not None:
                return got[f.slot]
            self.materialize(path)
            return None

    def _replay(self, stage: Stage, entry) -> None:
        """Run ``stage`` again for the outputs its entry does not hold, after making real
        what it reads; its outputs must come out as recorded."""
        for p in self.graph.reads(stage.index):
            self.materialize(p)
        argv = stage.argv
        if stage.kind is StageKind.CUDAFE and _GEN_MODULE_ID in argv:
            # The module id the entry holds, read by cudafe++ rather than made anew.
            dests = [None] * len(entry.files)
            for i, info in enumerate(entry.files):
                if stage.outputs[int(info["name"])].endswith(".module_id"):
                    dests[i] = self._path(stage.outputs[int(info["name"])])
            if all(d is None for d in dests) or \
                    self.cache.restore(entry, dests, self.keys.where) is None:
                raise Diverged(f"stage {stage.index} (cudafe++): no module id to run it again")
            argv = [a for a in argv if a != _GEN_MODULE_ID]
        run = self._run_stage(dataclasses.replace(stage, argv=argv), self.env, self.cwd,
                              self.t0)
        if not run.ok:
            raise Diverged(f"stage {stage.index} ({stage.kind.value}) failed when run again")
        self.replayed += 1
        paths = [self._path(stage.outputs[int(info["name"])]) for info in entry.files]
        self.forget(paths)
        for i, path in enumerate(paths):
            look = self.keys.hasher.look(path)
            if look is None or look.digest != entry.recorded(i).digest:
                raise Diverged(f"stage {stage.index} ({stage.kind.value}) made {path} again "
                               "with other bytes than its entry recorded")
