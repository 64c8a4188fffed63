"""The floor under ``nvstage compile``'s cold path, and each target against it (issue 47).

    python bench/floor.py [--runs 5] [--one kernels/vadd.cu] [--four kernels/multi.cu]

Two cases, each in interleaved rounds with its anchor (anchor, nvstage, then the extra legs):
- one arch: ``nvstage compile K.cu --arch sm_90 -c -o K.o --no-cache`` against
  ``nvcc -arch=sm_90 -c`` (target: at most 1.05x);
- four gencodes (sm_75, 80, 86, 90), ``-c``: ``nvstage compile`` (its default -j) against
  ``nvcc --threads 2`` (target: at most 0.95x).
Per run: wall time, the tools' CPU (user+sys of the process's waited-for children, from
``/proc/PID/stat`` of the ended process before it is reaped) and nvstage's own CPU (the Python
process's user+sys); for nvcc, its whole CPU. The plan's critical path is the longest chain of
stage times through nvcc's plan as a graph (``compiler/nvcc/graph.py``), from the manifest of
an extra ``--json -j 1`` run each round (stage times without a sibling stage on the other
core). The floor is max(critical path, (tools' CPU + nvstage's own CPU) / cores, waits), where
waits is, over the stages, the longest of (the seconds of every stage it waits for) / cores +
the chain from it to the end: no schedule finishes sooner; a target below it cannot be met by
nvstage's own changes alone. For four gencodes, the waits floor is also printed with nvstage's
own start and imports before its first process (measured on the one-arch run) over the cores:
they share the cores with the tools, whatever the schedule.

Then, for the one-arch case: where nvstage's own time goes (each tool process's start and
reap timed inside the process, the rest between them), the imports (``python -X importtime``),
and whether ``NVSTAGE_TIME_TRACE`` unset or ``0`` and the exact spill figures (cubins read
after ptxas) cost the cold path anything: the launcher's miss in a cache folder in use, with
the setting unset and ``0``, interleaved; the spill reader timed on the cubins of a build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GENS = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
        "-gencode", "arch=compute_86,code=sm_86", "-gencode", "arch=compute_90,code=sm_90"]
TICK = os.sysconf("SC_CLK_TCK")

# Runs nvstage's CLI as its script does, timing each tool process from its start to its reap
# (subprocess is imported here before nvstage does: proc.py imports it anyway).
PHASES = r"""
import sys, time
T0 = time.time()
import subprocess
marks = []
_start, _reaped = subprocess.Popen._execute_child, subprocess.Popen._handle_exitstatus
def start(self, args, *a, **k):
    s = time.time()
    try:
        return _start(self, args, *a, **k)
    finally:
        self._floor = len(marks)
        marks.append([[str(x) for x in args], s, None])
def reaped(self, *a, **k):
    i = getattr(self, "_floor", None)
    if i is not None and marks[i][2] is None:
        marks[i][2] = time.time()
    return _reaped(self, *a, **k)
subprocess.Popen._execute_child, subprocess.Popen._handle_exitstatus = start, reaped
sys.argv = ["nvstage", *sys.argv[1:]]
out = sys.argv.pop(1)
code = 0
def save():
    with open(out, "w") as f:
        f.write(__import__("json").dumps({"t0": T0, "marks": marks, "end": time.time()}))
import posix
_fast = posix._exit
def fast_exit(c):  # nvstage's own fast exit (cli/main.py): the marks first
    save()
    _fast(c)
posix._exit = fast_exit
try:
    from nvstage.cli.main import main
    main()
except SystemExit as e:
    code = e.code
finally:
    save()
if __import__("os").environ.get("FLOOR_HARD_EXIT"):  # what interpreter teardown costs
    sys.stdout.flush(); sys.stderr.flush()
    __import__("os")._exit(code if isinstance(code, int) else 1)
sys.exit(code)
"""


class Run:
    """One whole process: wall seconds, its own CPU, its waited-for children's CPU."""

    def __init__(self, argv, cwd, env, stdout=None):
        t = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=stdout or subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read()
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped
        self.wall = time.perf_counter() - t
        with open(f"/proc/{p.pid}/stat") as f:
            ut, st, cut, cst = (int(x) / TICK for x in f.read().rsplit(")", 1)[1].split()[11:15])
        p.wait()
        if p.returncode:
            raise SystemExit(f"{argv[:4]} failed: {err.decode()[-800:]}")
        self.own, self.tools = ut + st, cut + cst

    @property
    def cpu(self) -> float:
        return self.own + self.tools


def _graph(doc: dict):
    """(the graph ``compiler/nvcc/graph.py`` builds from a manifest's stages and files, each
    stage's seconds)."""
    from nvstage.compiler.nvcc.graph import build_graph
    from nvstage.compiler.nvcc.plan import Plan, Stage

    keys = ("index", "kind", "tool", "argv", "arch", "inputs", "outputs")
    stages = [Stage.from_json({k: s[k] for k in keys}) for s in doc["stages"]]
    seconds = {s["index"]: float(s["seconds"]) for s in doc["stages"]}
    return build_graph(Plan({}, stages)), seconds


def critical_path(doc: dict) -> tuple[list[int], float]:
    """The plan's longest chain of stage times in a manifest (``stages.json``'s document)."""
    graph, seconds = _graph(doc)
    return graph.critical_path(seconds)


def waits_floor(doc: dict, cores: int) -> tuple[int, float]:
    """(the stage that bounds it, the bound): no stage starts before every stage it waits for,
    at any depth, has run (their seconds over the cores at best), and what follows it is a
    chain. Tighter than either alone where a long stage ends the plan: the host compile waits
    for fatbinary, which waits for every ptxas, and then runs alone."""
    graph, seconds = _graph(doc)
    if not graph.stages:
        return 0, 0.0
    chain = graph.bottom_levels(seconds)
    before: dict[int, set[int]] = {}
    for i in graph.order:  # a stage waits only for earlier ones
        before[i] = set().union(*(before[d] | {d} for d in graph.deps[i]))
    return max(((i, sum(seconds[d] for d in before[i]) / cores + chain[i])
                for i in graph.order), key=lambda x: (x[1], -x[0]))


def floor_of(critical: float, tools_cpu: float, own_cpu: float, cores: int,
             waits: float = 0.0) -> float:
    """No schedule ends before its longest chain, before the cores did all the work, nor
    before ``waits_floor``."""
    return max(critical, (tools_cpu + own_cpu) / cores, waits)


def _med(xs) -> float:
    return statistics.median(xs)


def _ms(x: float) -> str:
    return f"{x * 1000:7.0f} ms"


def case(title, runs, anchor, nvstage_argv, w, env, cores, target) -> dict:
    """Interleaved rounds: anchor, nvstage, nvstage --json -j 1 (the manifest); the figures."""
    a, b, cps = [], [], []
    for r in range(runs):
        a.append(Run(anchor, w, env))
        b.append(Run(nvstage_argv, w, env))
        with open(w / "m.json", "wb") as out:
            Run([*nvstage_argv, "--json", "-j", "1"], w, env, stdout=out)
        doc = json.loads((w / "m.json").read_text())
        cps.append((*critical_path(doc), sum(float(x["seconds"]) for x in doc["stages"]),
                    *waits_floor(doc, cores)))
    nv, st = _med(x.wall for x in a), _med(x.wall for x in b)
    tools, own = _med(x.tools for x in b), _med(x.own for x in b)
    cp, waits = _med(c[1] for c in cps), _med(c[4] for c in cps)
    floor = floor_of(cp, tools, own, cores, waits)
    ratios = sorted(y.wall / x.wall for x, y in zip(a, b))
    # Each round's own floor against its own anchor: load from elsewhere falls on both.
    per = sorted(floor_of(c[1], y.tools, y.own, cores, c[4]) / x.wall
                 for x, y, c in zip(a, b, cps))
    goal = target * nv
    print(f"{title} (medians of {runs} interleaved rounds, {cores} cores)")
    print(f"  anchor  {' '.join(Path(x).name for x in anchor[:1])} {' '.join(anchor[1:])}")
    print(f"    wall {_ms(nv)}   CPU {_ms(_med(x.cpu for x in a))}   "
          f"(wall {min(x.wall for x in a) * 1000:.0f} to {max(x.wall for x in a) * 1000:.0f} ms)")
    print("  nvstage compile (--no-cache)")
    print(f"    wall {_ms(st)}   tools' CPU {_ms(tools)}   nvstage's own CPU {_ms(own)}   "
          f"= {st / nv:.2f}x (pairs {ratios[0]:.2f} to {ratios[-1]:.2f})")
    print(f"  critical path {_ms(cp)}   ({' > '.join(map(str, cps[0][0]))}; stage times of "
          f"-j 1, {min(c[1] for c in cps) * 1000:.0f} to {max(c[1] for c in cps) * 1000:.0f} ms;"
          f" their sum, serial: {_med(c[2] for c in cps) * 1000:.0f} ms)")
    print(f"  (tools' + own CPU) / {cores} {_ms((tools + own) / cores)};   tools alone / {cores} "
          f"{_ms(tools / cores)}")
    print(f"  waits: stage {cps[0][3]} (what it waits for / {cores} + the chain from it) "
          f"{_ms(waits)}")
    print(f"  floor = max(critical path, CPU / cores, waits) {_ms(floor)} = {floor / nv:.2f}x "
          f"the anchor"
          f" (each round's floor / its anchor: {per[0]:.2f} to {per[-1]:.2f}, median "
          f"{_med(per):.2f})")
    print(f"  target {target:.2f}x = {_ms(goal)}: "
          + (f"{(floor - goal) * 1000:.0f} ms BELOW the floor: not reachable as measured"
             if goal < floor else f"{(goal - floor) * 1000:.0f} ms above the floor; "
             f"nvstage now {(st - goal) * 1000:+.0f} ms from it"))
    return {"anchor": a, "nvstage": b, "floor": floor, "cp": cp, "waits": waits, "nv": nv}


def _tool_words(argv: list[str]) -> list[str]:
    """The tool's own words: a tool started behind ``setpriv --pdeathsig KILL --`` (proc.py)
    is named by what setpriv runs."""
    if argv and Path(argv[0]).name == "setpriv" and "--" in argv:
        return argv[argv.index("--") + 1:]
    return argv


def phases(runs, argv, w, env) -> float:
    """Where nvstage's own time goes in one run: tool processes timed inside the process."""
    rows: list[dict] = []
    hard: list[float] = []
    for r in range(runs):
        marks = w / "phases.json"
        t = time.time()
        Run([sys.executable, "-c", PHASES, str(marks), *argv], w, dict(env, FLOOR_HARD_EXIT="1"))
        hard.append(time.time() - json.loads(marks.read_text())["end"])
        t = time.time()
        Run([sys.executable, "-c", PHASES, str(marks), *argv], w, env)
        done = time.time()
        d = json.loads(marks.read_text())
        ms = sorted(d["marks"], key=lambda m: m[1])
        dry = next((i for i, m in enumerate(ms) if "--dryrun" in m[0]), None)
        pre, tools = (ms[:dry + 1], ms[dry + 1:]) if dry is not None else ([], ms)
        pre_names = [" ".join([Path(a[0]).name, *(x for x in a[1:] if x.startswith("-"))][:3])
                     for a in (_tool_words(m[0]) for m in pre)]
        gaps, edge = 0.0, tools[0][1]  # idle time between the first and last tool
        for _, s, e in tools:
            gaps += max(0.0, s - edge)
            edge = max(edge, e)
        rows.append({
            "python start (interpreter, site)": d["t0"] - t,
            "imports and set-up, to the first process": ms[0][1] - d["t0"],
            "probes before the plan (their processes)": sum(e - s for _, s, e in pre[:-1]),
            "nvcc --dryrun (the process)": (pre[-1][2] - pre[-1][1]) if pre else 0.0,
            "between those": (pre[-1][2] - pre[0][1]
                                        - sum(e - s for _, s, e in pre)) if pre else 0.0,
            "the plan read, to the first stage": tools[0][1] - (pre[-1][2] if pre else ms[0][1]),
            "no tool running, first stage to last": gaps,
            "last tool's end to main()'s return": d["end"] - edge,
            "interpreter exit": done - d["end"],
            "total wall": done - t,
            "processes before the stages": len(pre),
            "stages (tool processes)": len(tools),
        })
    print(f"where nvstage's own time goes, one arch (medians of {runs}; tools timed from "
          "start to reap inside the process)")
    for k in rows[0]:
        v = _med(r[k] for r in rows)
        print(f"  {k:42} " + (f"{v:7.0f}" if k.startswith(("processes", "stages")) else _ms(v)))
    print(f"  {'interpreter exit, os._exit after a flush':42} {_ms(_med(hard))}")
    print(f"  processes before the stages: {', '.join(pre_names)}")
    return _med(r["python start (interpreter, site)"] +
                r["imports and set-up, to the first process"] for r in rows)


def imports(argv, w, env) -> None:
    """The imports of one run (python -X importtime), and whether the tracing and spill
    modules are among them."""
    marks = w / "imp.json"
    cp = subprocess.run([sys.executable, "-X", "importtime", "-c", PHASES, str(marks), *argv],
                        cwd=w, env=env, capture_output=True, text=True)
    top, mods = [], {}
    for line in cp.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cum, name = line[len("import time:"):].split("|")
        mods[name.strip()] = (int(own), int(cum))
        if not name[1:].startswith(" "):  # a top-level import (not nested in another)
            top.append((int(cum), name.strip()))
    total = sum(c for c, _ in top)
    nv = sum(o for n, (o, _) in mods.items() if n.startswith("nvstage"))
    print(f"imports of one run (python -X importtime, its overhead included): "
          f"{total / 1000:.0f} ms in {len(mods)} modules, nvstage's own modules' self time "
          f"{nv / 1000:.0f} ms; heaviest:")
    for c, n in sorted(top, reverse=True)[:6]:
        print(f"  {n:50} {c / 1000:6.1f} ms")
    for n in ("nvstage.compiler.nvcc.time_trace", "nvstage.compiler.nvcc.grammar",
              "nvstage.compiler.nvcc.cubin_figures", "nvstage.compiler.nvcc.ptxas_report"):
        o = mods.get(n)
        print(f"  {n:50} " + (f"imported, self {o[0] / 1000:.1f} ms" if o else "not imported"))


def tracing_off(runs, nvcc, w, env) -> None:
    """The launcher's miss (a new source in a cache folder in use, no resident) with
    NVSTAGE_TIME_TRACE unset and 0, interleaved; the spill reader timed on real cubins."""
    text = (w / "one.cu").read_text()
    n = iter(range(10**6))
    legs = {"unset": {k: v for k, v in env.items() if k != "NVSTAGE_TIME_TRACE"},
            "0": dict(env, NVSTAGE_TIME_TRACE="0")}
    for e in legs.values():
        e.update(NVSTAGE_SERVER="0", NVSTAGE_CACHE_DIR=str(w / "in-use"))
    got: dict[str, list[float]] = {k: [] for k in legs}

    def miss(e):
        (w / "new.cu").write_text(f"{text}\n__device__ int floor_run_{next(n)};\n")
        return Run([str(BIN / "nvstage"), nvcc, "-c", "new.cu", "-arch=sm_90", "-o",
                    "out/new.o"], w, e).wall

    miss(legs["unset"])  # the tool notes and plan memo kept: a cache folder in use
    for _ in range(runs):
        for k, e in legs.items():
            got[k].append(miss(e))
    u, z = _med(got["unset"]), _med(got["0"])
    print(f"NVSTAGE_TIME_TRACE off, the launcher's miss (medians of {runs}): unset {_ms(u)}, "
          f"0 {_ms(z)} ({z / u:.3f}x; unset {min(got['unset']) * 1000:.0f} to "
          f"{max(got['unset']) * 1000:.0f} ms)")
    from nvstage.compiler.nvcc.cubin_figures import read_figures

    keep = w / "kept"
    Run([str(BIN / "nvstage"), "compile", "four.cu", *GENS, "-c", "-o", "out/k.o", "--no-cache",
         "--keep-dir", str(keep)], w, env)
    cubins = sorted(keep.rglob("*.cubin"))
    took = []
    for _ in range(20):
        t = time.perf_counter()
        for c in cubins:
            read_figures(c.read_bytes(), c.name)
        took.append(time.perf_counter() - t)
    print(f"exact spills: the cubins' figures read (file read included) for {len(cubins)} cubins "
          f"of four gencodes: {_med(took) * 1000:.2f} ms a build (median of 20)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--one", default=str(ROOT / "kernels" / "vadd.cu"))
    ap.add_argument("--four", default=str(ROOT / "kernels" / "multi.cu"))
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from nvstage.compiler.toolkit.locate import find_toolkit

    nvcc = find_toolkit().nvcc
    nvstage = str(BIN / "nvstage")
    cores = len(os.sched_getaffinity(0))
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory(prefix="nvstage-floor-") as tmp:
        w = Path(tmp)
        shutil.copy(a.one, w / "one.cu")
        shutil.copy(a.four, w / "four.cu")
        (w / "out").mkdir()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(NVSTAGE_CACHE_DIR=str(w / "cache"), XDG_CONFIG_HOME=str(w / "config"),
                   NVSTAGE_BUILD_RECORD=str(w / "record"))
        subprocess.run([nvstage, "--version"], env=env, capture_output=True)  # .pyc written
        one = ["compile", "one.cu", "--arch", "sm_90", "-c", "-o", "out/one.o", "--no-cache"]
        Run([nvstage, *one], w, env)  # the tools' notes, once
        print(f"load average before: {' '.join(load0)}; {cores} cores; "
              f"one arch: {Path(a.one).name}, four gencodes: {Path(a.four).name}")
        case(f"one arch, {Path(a.one).name}, sm_90, -c", a.runs,
             [nvcc, "-arch=sm_90", "-c", "one.cu", "-o", "out/p.o"], [nvstage, *one],
             w, env, cores, 1.05)
        four = ["compile", "four.cu", *GENS, "-c", "-o", "out/four.o", "--no-cache"]
        got = case(f"four gencodes, {Path(a.four).name}, -c", a.runs,
                   [nvcc, *GENS, "--threads", "2", "-c", "four.cu", "-o", "out/t.o"],
                   [nvstage, *four], w, env, cores, 0.95)
        start = phases(a.runs, one, w, env)
        # The waits floor counts the tools' seconds alone; nvstage's own start and imports
        # before its first process (the same in any compile) share the cores with them.
        at_least = got["waits"] + start / cores
        print(f"four gencodes: the waits floor with nvstage's start and imports before its first "
              f"process ({start * 1000:.0f} ms, the one-arch run's) over {cores} cores: "
              f"{_ms(at_least).strip()} = {at_least / got['nv']:.2f}x the anchor (target 0.95x)")
        imports(one, w, env)
        tracing_off(a.runs, nvcc, w, env)
    print(f"load average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
