"""nvcc's plan as a dependency graph: which stage waits for which, and the critical path. Pure.

nvcc lists its stages in an order that works serially; to run them at once we need the real
edges. They come from the files each stage reads and writes, walked in plan order:

- read after write: a stage waits for the latest earlier stage that wrote a file it reads;
- write after write: two stages writing one file keep their plan order (with ``--simt-only``
  cudafe++ names the stub it leaves to cicc, and the last cicc writes the stub the host
  compile includes);
- write after read: a stage that overwrites a file waits for the earlier stages reading it;
- a cleanup (``rm``) counts as a write of what it removes, and waits for every stage before it.

Some reads are not on any command line: ``X.cudafe1.cpp`` ``#include``s ``X.cudafe1.stub.c``,
which ``#include``s the ``.fatbin.c`` that fatbinary writes (the name cicc is given with
``--include_file_name``). Those are added here, so the host compile waits for fatbinary.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind, _opt_value

# Rough seconds per stage kind for one small file, measured on CUDA 13.5 (multi.cu): only used
# to start the longest chains first; the real times replace them for the reported critical path.
ESTIMATE: dict[StageKind, float] = {
    StageKind.HOST_PREPROCESS: 0.17,
    StageKind.CUDAFE: 0.6,
    StageKind.DEVICE_PREPROCESS: 0.17,
    StageKind.CICC: 0.5,
    StageKind.PTXAS: 0.05,
    StageKind.FATBINARY: 0.01,
    StageKind.HOST_COMPILE: 0.5,
    StageKind.DEVICE_LINK: 0.05,
    StageKind.DLINK_FATBINARY: 0.01,
    StageKind.DLINK_COMPILE: 0.3,
    StageKind.LINK: 0.1,
    StageKind.CLEANUP: 0.0,
}


def _key(path: str) -> str:
    return os.path.normpath(path)


def hidden_inputs(plan: Plan) -> dict[int, list[str]]:
    """Files each stage reads through ``#include`` lines that its command does not name."""
    # stub path -> the file it includes, from cicc's --stub_file_name / --include_file_name.
    stub_includes: dict[str, str] = {}
    fatbin_cs = [o for s in plan.stages if s.kind is StageKind.FATBINARY
                 for o in s.outputs if o.endswith(".fatbin.c")]
    for s in plan.stages:
        if s.kind is StageKind.CICC:
            inc = (_opt_value(s.argv, "--include_file_name") or [None])[-1]
            stub = (_opt_value(s.argv, "--stub_file_name") or [None])[-1]
            if inc and stub:
                stub_includes[_key(stub)] = _key(os.path.join(os.path.dirname(stub), inc))
    hidden: dict[int, list[str]] = {}
    for s in plan.stages:
        extra: list[str] = []
        for p in s.inputs:
            if p.endswith(".cudafe1.cpp"):
                stub = p[: -len(".cpp")] + ".stub.c"
                extra.append(stub)
                inc = stub_includes.get(_key(stub))
                if inc is None:  # cudafe++ wrote the stub itself: it includes the fatbin.c
                    inc = next((f for f in fatbin_cs
                                if _key(os.path.dirname(f)) == _key(os.path.dirname(stub))),
                               None)
                if inc:
                    extra.append(inc)
        extra = [e for e in dict.fromkeys(extra) if e not in s.inputs]
        if extra:
            hidden[s.index] = extra
    return hidden



@dataclass
class Graph:
    """Stages by index, what each waits for, and the reads that no command line names."""

    stages: dict[int, Stage]
    deps: dict[int, set[int]]
    hidden: dict[int, list[str]] = field(default_factory=dict)
    # The stages that write (or, as a cleanup, remove) a file an earlier stage wrote, each
    # with those earlier writers (a cleanup: every stage before it): what those wrote must be
    # read (into the cache) before it runs.
    rewrites: dict[int, set[int]] = field(default_factory=dict)

    @property
    def order(self) -> list[int]:
        return sorted(self.stages)

    def dependents(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {i: set() for i in self.stages}
        for i, ds in self.deps.items():
            for d in ds:
                out[d].add(i)
        return out

    def reads(self, index: int) -> list[str]:
        s = self.stages[index]
        return list(s.inputs) + self.hidden.get(index, [])

    def levels(self) -> list[list[int]]:
        """Stages grouped by how many waits deep they are: each group can run at once."""
        depth: dict[int, int] = {}
        for i in self.order:  # deps always point to earlier stages
            depth[i] = 1 + max((depth[d] for d in self.deps[i]), default=-1)
        groups: dict[int, list[int]] = {}
        for i, d in depth.items():
            groups.setdefault(d, []).append(i)
        return [groups[d] for d in sorted(groups)]

    def bottom_levels(self, seconds: Mapping[int, float] | None = None) -> dict[int, float]:
        """Longest time from the start of each stage to the end of the build."""
        cost = self._cost(seconds)
        after = self.dependents()
        bl: dict[int, float] = {}
        for i in reversed(self.order):
            bl[i] = cost[i] + max((bl[j] for j in after[i]), default=0.0)
        return bl

    def critical_path(self, seconds: Mapping[int, float] | None = None
                      ) -> tuple[list[int], float]:
        """The chain of stages that bounds the wall time, and its length in seconds.

        ``seconds``: each stage's measured time (``ESTIMATE`` by kind for those missing).
        """
        if not self.stages:
            return [], 0.0
        cost = self._cost(seconds)
        finish: dict[int, float] = {}
        via: dict[int, int | None] = {}
        for i in self.order:
            prev = max(self.deps[i], key=lambda d: (finish[d], -d), default=None)
            finish[i] = cost[i] + (finish[prev] if prev is not None else 0.0)
            via[i] = prev
        end = max(self.order, key=lambda i: (finish[i], -i))
        path = []
        node: int | None = end
        while node is not None:
            path.append(node)
            node = via[node]
        return path[::-1], finish[end]

    def _cost(self, seconds: Mapping[int, float] | None) -> dict[int, float]:
        seconds = seconds or {}
        return {i: float(seconds.get(i, ESTIMATE.get(s.kind, 0.1)))
                for i, s in self.stages.items()}


def build_graph(plan: Plan) -> Graph:
    """Edges from what each stage reads and writes, in plan order (see the module text)."""
    hidden = hidden_inputs(plan)
    last_writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    deps: dict[int, set[int]] = {}
    rewrites: dict[int, set[int]] = {}
    for s in plan.stages:
        mine: set[int] = set()
        reads = [] if s.kind is StageKind.CLEANUP else list(s.inputs) + hidden.get(s.index, [])
        writes = list(s.inputs) if s.kind is StageKind.CLEANUP else list(s.outputs)
        for p in map(_key, reads):
            if p in last_writer:
                mine.add(last_writer[p])
        earlier = {last_writer[p] for p in map(_key, writes) if p in last_writer}
        for p in map(_key, writes):
            mine.update(readers.get(p, []))
        mine |= earlier
        for p in map(_key, reads):
            readers.setdefault(p, []).append(s.index)
        for p in map(_key, writes):
            last_writer[p] = s.index
            readers[p] = []
        if s.kind is StageKind.CLEANUP:
            # A removal may hit a file a tool wrote without naming it (nvcc's temporary
            # .fatbin): let it wait for everything before it, as in nvcc's serial order.
            mine.update(deps)
            earlier = set(deps)
        if earlier:
            rewrites[s.index] = earlier
        mine.discard(s.index)
        deps[s.index] = mine
    return Graph({s.index: s for s in plan.stages}, deps, hidden, rewrites)
