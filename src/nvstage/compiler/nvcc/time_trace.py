"""nvcc's ``-fdevice-time-trace``, run stage by stage: the words each tool is given, and the one
file nvcc writes from their parts.

``nvcc --dryrun`` prints the same plan with and without the option: the tracing words are not
in it. Seen with ``strace -f -e trace=execve`` (CUDA 13.5), nvcc gives

- cicc ``--device-time-trace FILE --device-time-trace-granularity G --use-trace-pid P
  --trace-env _NVCC_TRACE_TS_P``, with ``_NVCC_TRACE_TS_P`` in its environment: the
  milliseconds since nvcc started, where cicc's own clock begins (its events' ``ts`` are
  microseconds from nvcc's start);
- ptxas ``--fdevice-time-trace FILE --use-trace-pid P --ftrace-phase-after=LibNVVM``: it reads
  FILE, places its events after the end of cicc's ``LibNVVM`` event there, and writes FILE
  again with both;

one FILE per arch (cicc appends, ptxas rewrites), then writes the user's file: ``otherData``
(inputs, target archs, ``--threads``, ``--split-compile``), and per tool in the order they
ran a span (``gcc (preprocessing 4)``, ``cudafe++``, ``gcc (preprocessing 1)``,
``fatbinary``, ``gcc (compiling)``: tools with no trace of their own; cicc and ptxas have
none), its ``process_sort_index``, ``process_name`` and ``thread_name`` (``FILE [ARCH]``),
then every tool file's events. P is nvcc's number for the tool's step, the events' ``pid``.

The words go to the tools as extra words, never into a stage's key: a stage restored from the
cache ran no tool and wrote no part; its span says ``restored, not traced``. Pure but for
``write``: no processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from dataclasses import dataclass, field

OPTION = "--fdevice-time-trace"
# NVSTAGE_TIME_TRACE=1: every staged command traced, its flags untouched: nvstage's own trace
# of each unit in the build log's folder, TRACES/, named by the unit's output (a unit built
# again replaces its trace, so the folder holds one per unit).
SETTING = "NVSTAGE_TIME_TRACE"
TRACES = "traces"
GRANULARITY = "--fdevice-time-trace-granularity"
PHASE_AFTER = "LibNVVM"
RESTORED = "restored, not traced"

# The names nvcc gives its steps in the trace (and in --time's CSV), by stage kind's value.
STEP_NAMES = {
    "host-preprocess": "gcc (preprocessing 4)", "cudafe++": "cudafe++",
    "device-preprocess": "gcc (preprocessing 1)", "cicc": "cicc", "ptxas": "ptxas",
    "fatbinary": "fatbinary", "host-compile": "gcc (compiling)",
}
# nvcc's step numbers (the events' pid): the order it numbers its steps in, seen on 13.5 for
# one to three archs, with and without PTX in the fatbin (``_pids``). Only Perfetto's process
# rows read them.
# Tools that write their own part (the others get a span of nvcc's making).
_OWN_PART = ("cicc", "ptxas")


@dataclass(frozen=True)
class TraceRequest:
    """What a command's tracing options ask for."""

    path: str  # the file nvcc would write, as nvcc names it (relative to the command's folder)
    # Microseconds; shorter events are dropped (cicc's option). None: this nvcc has no such
    # option (CUDA 13.0 gives cicc no granularity word; its cicc rejects one).
    granularity: str | None = "0"
    inputs: tuple[str, ...] = ()
    threads: int = -1
    split_compile: int = -1
    own: bool = False  # nvstage's own trace (NVSTAGE_TIME_TRACE): never one of the outputs


def trace_path(value: str, output: str | None) -> str:
    """The file nvcc writes for ``-fdevice-time-trace VALUE`` (seen, 13.5): ``-`` is the
    output's name with ``.json`` (``trace.json`` without ``-o``); another name gains ``.json``
    unless it ends so (``trace`` -> ``trace.json``, ``d`` -> ``d.json``)."""
    if value == "-":
        return f"{output}.json" if output else "trace.json"
    return value if value.endswith(".json") else value + ".json"


def request_from_args(args, output: str | None, granular: bool = True
                      ) -> TraceRequest | None:
    """The request in a parsed nvcc command line (``nvcc/grammar``'s ``Arg`` list), or None
    when it asks for no trace. The last value given wins, as for nvcc's single options.
    ``granular``: this nvcc knows -fdevice-time-trace-granularity (13.5 does, 13.0 not)."""
    from nvstage.compiler.nvcc.grammar import last_value

    value = last_value(args, OPTION)
    if value is None:
        return None
    gran = (last_value(args, GRANULARITY) or "0") if granular else None
    return TraceRequest(trace_path(value, output), gran,
                        tuple(a.words[0] for a in args if a.is_input),
                        _int(last_value(args, "--threads")),
                        _int(last_value(args, "--split-compile")))


def own_request(args, record: str, cwd: str, granular: bool = True) -> TraceRequest:
    """NVSTAGE_TIME_TRACE's request for a command (parsed words) built in ``cwd``: its trace
    in ``record``/traces/, named by the output the command writes."""
    import hashlib

    from nvstage.compiler.nvcc.grammar import last_value

    inputs = tuple(a.words[0] for a in args if a.is_input)
    output = last_value(args, "--output-file") or (inputs[0] if inputs else "unit")
    name = hashlib.sha256(os.path.abspath(os.path.join(cwd, output)).encode(
        "utf-8", "surrogateescape")).hexdigest()[:20]
    return TraceRequest(os.path.join(record, TRACES, f"{name}.json"),
                        "0" if granular else None, inputs,
                        _int(last_value(args, "--threads")),
                        _int(last_value(args, "--split-compile")), own=True)


def _int(v: str | None) -> int:
    try:
        return int(v) if v is not None else -1
    except ValueError:
        return -1


def without_options(args) -> list[str]:
    """The command's words without the tracing options (what an untraced build is asked)."""
    return [w for a in args if not a.is_(OPTION, GRANULARITY) for w in a.words]


@dataclass
class Tracer:
    """One traced build: each cicc and ptxas stage's words and environment, and, after the
    build, the merged file. ``folder``: where the tools' parts are written (the work folder)."""

    request: TraceRequest
    folder: str
    stages: list = field(default_factory=list)  # the plan's runnable stages
    _pids: dict = field(default_factory=dict)  # stage index -> nvcc's step number
    _parts: dict = field(default_factory=dict)  # stage index -> its arch's part file

    def __post_init__(self):
        self._pids = _pids(self.stages)
        by_ptx = {}
        for s in self.stages:
            if s.kind.value == "cicc":
                part = os.path.join(self.folder, f"nvstage-trace-{s.index}.part")
                self._parts[s.index] = part
                for o in s.outputs:
                    by_ptx[o] = part
            elif s.kind.value == "ptxas" and s.outputs:  # not -ptx's check (no output)
                part = next((by_ptx[i] for i in s.inputs if i in by_ptx), None)
                if part is not None:
                    self._parts[s.index] = part

    def words(self, stage, since_start: float) -> tuple[tuple[str, ...], dict[str, str]]:
        """(extra words, environment additions) for ``stage`` started ``since_start`` seconds
        after the build began; nothing for a stage that writes no part."""
        part = self._parts.get(stage.index)
        if part is None:
            return (), {}
        pid = str(self._pids[stage.index])
        if stage.kind.value == "cicc":
            var = f"_NVCC_TRACE_TS_{pid}"
            gran = () if self.request.granularity is None else \
                ("--device-time-trace-granularity", self.request.granularity)
            return (("--device-time-trace", part, *gran, "--use-trace-pid", pid,
                     "--trace-env", var), {var: str(int(since_start * 1000))})
        return (("--fdevice-time-trace", part, "--use-trace-pid", pid,
                 f"--ftrace-phase-after={PHASE_AFTER}"), {})

    def merged(self, runs) -> dict:
        """The trace nvcc writes, from the build's ``StageRun``s (``started``/``seconds``
        since the build began) and the parts the tools wrote."""
        source = self.request.inputs[0] if self.request.inputs else ""
        archs = [s.arch for s in self.stages if s.kind.value == "cicc" and s.arch][::-1]
        events: list[dict] = [{}]
        order = 0
        # In the plan's order: a plain nvcc's, which runs its steps one after another.
        for run in sorted(runs, key=lambda r: r.stage.index):
            kind = run.stage.kind.value
            if kind not in STEP_NAMES or run.stage.index not in self._pids:
                continue
            pid, name = self._pids[run.stage.index], STEP_NAMES[kind]
            if kind == "ptxas" and not run.stage.outputs:
                name = ""  # nvcc's check of the PTX it wrote (-ptx): unnamed in its trace
            arch = run.stage.arch if kind in ("device-preprocess", "cicc", "ptxas") else \
                (archs[0] if archs and kind in ("cudafe++", "host-compile") else None)
            if kind not in _OWN_PART or run.cached or not name:
                args = {"detail": name}
                if run.cached and kind in _OWN_PART:
                    args["nvstage"] = RESTORED
                events.append({"args": args, "dur": int(run.seconds * 1e6), "name": name,
                               "ph": "X", "pid": pid, "ts": int(run.started * 1e6), "tid": 0})
            order += 1
            events += [
                {"args": {"sort_index": order}, "name": "process_sort_index", "ph": "M",
                 "pid": pid},
                {"args": {"name": name}, "cat": "", "name": "process_name", "ph": "M",
                 "pid": pid},
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"name": f"{source} [{arch}]" if arch else source}},
            ]
        done = set()
        for run in sorted(runs, key=lambda r: (r.started, r.stage.index)):
            part = self._parts.get(run.stage.index)
            if part is None or part in done or run.stage.kind.value != "cicc":
                continue
            done.add(part)
            events += read_part(part)
        for part in self._parts.values():  # a ptxas whose cicc was restored
            if part not in done:
                done.add(part)
                events += read_part(part)
        other = {"inputFiles": list(self.request.inputs), "targetArchs": archs,
                 "numThreads": self.request.threads,
                 "splitCompile": self.request.split_compile, "isNVRTC": 0}
        return {"otherData": other, "traceEvents": events}

    def write(self, runs, cwd: str) -> Written:
        """Write the merged trace where nvcc writes it. An OSError when it cannot be written
        (nvcc: "Failed to open trace file")."""
        path = os.path.join(cwd, self.request.path)
        doc = self.merged(runs)
        data = json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogateescape")
        if self.request.own:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if len(data) > MAX_OWN_BYTES:  # no reader would read it: its summary stands in
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)  # the unit's trace of an earlier build is not this one
                return Written(path, doc, len(data), zlib.crc32(data))
        with open(path, "wb") as f:
            f.write(data)
        return Written(path, doc, len(data), zlib.crc32(data))

    def record(self, written: Written) -> dict:
        """What the build's manifest keeps of its trace (``"time_trace"``): the file (nvstage's
        own by its name in the build log's ``traces/``, ``"in": "build-log"``; the user's as
        nvcc names it, from the command's folder, ``"in": "cwd"``), its size and CRC-32 (a
        file replaced since is not this build's), and the unit's bounded summary
        (``trace_summary.unit_summary``)."""
        from nvstage.compiler.nvcc.trace_summary import unit_summary

        own = self.request.own
        file = f"{TRACES}/{os.path.basename(written.path)}" if own else self.request.path
        return {"file": file, "in": "build-log" if own else "cwd", "bytes": written.size,
                "crc32": written.crc32, "summary": unit_summary(written.doc, written.path)}


@dataclass(frozen=True)
class Written:
    """A trace as written: where, its document, its size and CRC-32."""

    path: str
    doc: dict
    size: int
    crc32: int


def _pids(stages) -> dict[int, int]:
    """nvcc's number for each traced step (stage index -> pid). Seen: one arch ``-c``:
    fatbinary 3, device preprocess 5, host preprocess 6, cicc 7, ptxas 9, cudafe++ 10, host
    compile 13; the last arch of the plan is numbered so, ptxas one lower when the fatbin
    holds no PTX of that arch; each earlier arch (from the last) after cudafe++, a number
    (its image's) before each; the host compile K + 2 after the last (K archs)."""
    by_kind: dict[str, list] = {}
    for s in stages:
        by_kind.setdefault(s.kind.value, []).append(s)
    fat_in = {i for s in by_kind.get("fatbinary", ()) for i in s.inputs}
    blocks = []  # (device preprocess, cicc, ptxas, PTX in the fatbin) per arch, plan order
    for c in by_kind.get("cicc", ()):
        pre = next((s for s in by_kind.get("device-preprocess", ())
                    if set(s.outputs) & set(c.inputs)), None)
        pt = next((s for s in by_kind.get("ptxas", ()) if set(s.inputs) & set(c.outputs)), None)
        blocks.append((pre, c, pt, bool(set(c.outputs) & fat_in)))
    out: dict[int, int] = {}

    def put(stage, pid):
        if stage is not None:
            out[stage.index] = pid

    for s in by_kind.get("fatbinary", ())[:1]:
        put(s, 3)
    for s in by_kind.get("host-preprocess", ())[:1]:
        put(s, 6)
    n = 4
    if blocks:
        pre, c, pt, ptx = blocks[-1]
        put(pre, 5)
        put(c, 7)
        put(pt, 8 + ptx)
        n = 8 + ptx
    for s in by_kind.get("cudafe++", ())[:1]:
        n += 1
        put(s, n)
    for pre, c, pt, ptx in reversed(blocks[:-1]):
        n += 1  # the number nvcc gives the arch's image
        put(pre, n + 1)
        put(c, n + 2)
        n += 2
        if pt is not None:
            n += 1 + ptx
            put(pt, n)
    for s in by_kind.get("host-compile", ())[:1]:
        put(s, n + len(blocks) + 2)
    extra = max([*out.values(), 100])
    for s in stages:  # anything else traced (never seen): its own number
        if s.kind.value in STEP_NAMES and s.index not in out:
            extra += 1
            out[s.index] = extra
    return out


# A part is the tool's own document: bounded as every trace is (the readers' MAX_TRACE_BYTES,
# inspect/compile_time.py). nvstage's own trace past it is not kept: the entry's summary is.
MAX_PART_BYTES = MAX_OWN_BYTES = 256 << 20


def read_part(path: str) -> list[dict]:
    """The events of a tool's part (none when it wrote none: a failed or restored tool)."""
    try:
        if os.path.getsize(path) > MAX_PART_BYTES:
            return []
        with open(path, encoding="utf-8", errors="replace") as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError):
        return []
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []
