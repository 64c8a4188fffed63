"""Where a miss's time goes: the cold path taken apart, against plain nvcc in the same run.

    python bench/cold_path.py [--runs 5]

On a unit of bench/many_units.py's project (a kernel and a shared header, compiled as CMake
compiles it: -MD, one --generate-code, the source in another folder), each figure the median of
``--runs``:
- wall and CPU time per miss, plain nvcc against the launcher with the resident nvstage and
  without it, in interleaved rounds; CPU is the whole machine's (``/proc/stat``, the resident's
  child included), so in a build that keeps every core busy it is what a miss costs. Each run
  compiles a new source under a new name, as every unit of a cold build is (its plan comes from
  its shape, once two units proved it: ``plan_memo.Shape``); ``same line`` repeats one command
  line with new contents (the plan remembered for those words);
- one miss run in a process whose imports are done, its phases timed: before the first tool
  (the plan: ``nvcc --dryrun`` on a new command line), between tools, and after the last tool
  up to the answer and after it (the whole-command entry, the build record);
- Python's imports of the miss path (``python -c 'import ...'`` against ``python -c pass``);
- the toolkit's headers hashed (``FileHasher``) with and without the digests earlier processes
  kept (``store/hash_memo.py``).
Nothing here is a target: the targets are in warm_path.py and many_units.py.
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "bench"))
from many_units import _machine_cpu as _cpu  # noqa: E402 - the machine's CPU seconds

# Run in a child process with the miss path imported first: each phase's start and length.
PHASES = r"""
import json, os, sys, time
import nvstage.compiler.launcher.flow as L, nvstage.compiler.pipeline.driver as D, nvstage.compiler.buildlog.log
import nvstage.compiler.cache.command.entry, nvstage.compiler.pipeline.scheduler, nvstage.compiler.pipeline.jobserver
marks = []
t0 = time.perf_counter()
def timed(mod, name, label):
    f = getattr(mod, name)
    def g(*a, **k):
        s = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            marks.append((label, s - t0, time.perf_counter() - s))
    setattr(mod, name, g)
timed(D, "run_stage", "stage")
timed(D, "plan_words", "plan")
answered = []
hooks = L.Hooks(answered=lambda code: answered.append(time.perf_counter() - t0))
t0 = time.perf_counter()
code = L.run_staged(L.Command.here(sys.argv[1:]), hooks)
end = time.perf_counter() - t0
print(json.dumps({"marks": marks, "answered": answered[0], "end": end, "code": code}))
"""


def _once(argv, cwd, env, idle: float) -> tuple[float, float]:
    """(wall, the machine's CPU less ``idle``, its own CPU a second at rest) of one run."""
    c, t = _cpu(), time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - t
    if cp.returncode:
        raise SystemExit(f"{argv[:3]} failed: {cp.stderr.decode()[-800:]}")
    time.sleep(0.5)  # a resident child's bookkeeping after the answer is counted too
    return wall, _cpu() - c - (wall + 0.5) * idle


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    import many_units

    from nvstage.compiler.toolkit.locate import find_toolkit

    nvcc = find_toolkit().nvcc
    nvstage = str(BIN / "nvstage")
    c = _cpu()
    time.sleep(1.0)
    idle = _cpu() - c
    with tempfile.TemporaryDirectory(prefix="nvstage-cold-") as tmp:
        w = Path(tmp)
        many_units.make_project(w / "src", 2)
        unit = next((w / "src").glob("u01_*.cu")).read_text()
        build = w / "build"
        build.mkdir()
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONDONTWRITEBYTECODE", "NVSTAGE_BUILD_RECORD")}
        env.update(NVSTAGE_CACHE_DIR=str(w / "cache"), XDG_CONFIG_HOME=str(w / "config"))
        n = iter(range(1_000_000))

        def words(name: str) -> list[str]:
            src = w / "src" / f"{name}.cu"
            src.write_text(f"{unit}\n__device__ int cold_path_{next(n)};\n")
            return ["-forward-unknown-to-host-compiler",
                    "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-MD", "-MT",
                    f"{name}.o", "-MF", f"{name}.o.d", "-x", "cu", "-c", str(src),
                    "-o", f"{name}.o"]

        ways = {"plain nvcc": ([nvcc], env),
                "launcher, resident": ([nvstage, nvcc], dict(env, NVSTAGE_SERVER="1")),
                "launcher, no resident": ([nvstage, nvcc], dict(env, NVSTAGE_SERVER="0"))}
        # The tools' versions and the first plan, once (a cache folder in use), then rounds.
        subprocess.run([nvstage, nvcc, *words("first")], cwd=build, capture_output=True,
                       env=ways["launcher, resident"][1])
        got: dict[str, list[tuple[float, float]]] = {}
        for r in range(a.runs):
            for i, (way, (pre, e)) in enumerate(ways.items()):
                got.setdefault(way, []).append(
                    _once([*pre, *words(f"r{r}w{i}")], build, e, idle))
            for way in ("plain nvcc", "launcher, resident"):
                pre, e = ways[way]
                got.setdefault(f"{way}, same line", []).append(
                    _once([*pre, *words(f"same{way[0]}")], build, e, idle))
        subprocess.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop",
                        str(w / "cache")], env=env, capture_output=True)
        print(f"a unit of many_units.py's project, sm_90, -MD; medians of {a.runs} "
              "interleaved rounds (CPU: the whole machine's, less its rest)")
        base = [statistics.median(x) for x in zip(*got["plain nvcc"])]
        for way, runs in got.items():
            wall, cpu = (statistics.median(x) for x in zip(*runs))
            print(f"  {way:36} wall {wall * 1000:7.0f} ms ({wall / base[0]:.2f})   "
                  f"CPU {cpu * 1000:7.0f} ms ({(cpu - base[1]) * 1000:+5.0f} ms)")

        # One miss, its phases (imports done first, as in a resident child).
        phases = []
        for r in range(a.runs):
            cp = subprocess.run([sys.executable, "-c", PHASES, nvcc, *words(f"ph{r}")],
                                cwd=build, env=dict(env, NVSTAGE_SERVER="0"),
                                capture_output=True, text=True)
            if cp.returncode:
                raise SystemExit(f"phases failed: {cp.stderr[-800:]}")
            import json

            doc = json.loads(cp.stdout.strip().splitlines()[-1])
            stages = sorted((s, d) for label, s, d in doc["marks"] if label == "stage")
            plan = sum(d for label, _, d in doc["marks"] if label == "plan")
            first = stages[0][0]
            gaps = sum(max(0.0, s - (ps + pd)) for (ps, pd), (s, _) in zip(stages, stages[1:]))
            last = max(s + d for s, d in stages)
            tools = sum(d for _, d in stages)
            phases.append((first, plan, gaps, doc["answered"] - last,
                           doc["end"] - doc["answered"], tools))
        med = [statistics.median(x) for x in zip(*phases)]
        print(f"one miss in a process whose imports are done (medians of {a.runs}):")
        for name, v in zip(("before the first tool", "  of which the plan (nvcc --dryrun)",
                            "between tools", "after the last tool, to the answer",
                            "after the answer (entry, record)", "the tools themselves"), med):
            print(f"  {name:38} {v * 1000:7.1f} ms")

        imports = "import nvstage.compiler.launcher.flow, nvstage.compiler.pipeline.driver"
        t_imp, t_pass = [], []
        for _ in range(a.runs):
            for argv, out in (([sys.executable, "-c", imports], t_imp),
                              ([sys.executable, "-c", "pass"], t_pass)):
                t = time.perf_counter()
                subprocess.run(argv, env=env, check=True)
                out.append(time.perf_counter() - t)
        took = statistics.median(t_imp) - statistics.median(t_pass)
        print(f"the miss path's imports: {took * 1000:.1f} ms over python -c pass's "
              f"{statistics.median(t_pass) * 1000:.1f} ms")

        hashing = r"""
import os, sys, time
from nvstage.compiler.cache.stage.stage_key import FileHasher
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.store import hash_memo
files = sys.argv[1:]
c = Cache().open()
t = time.perf_counter(); h = FileHasher("/nonexistent-work"); [h.look(f) for f in files]
t1 = time.perf_counter(); k = FileHasher("/nonexistent-work"); k.kept = hash_memo.load(c)
k.kept.trust(["/"])  # what the builds above kept: the toolkit's and the host compiler's own
[k.look(f) for f in files]; t2 = time.perf_counter()
print(f"{len(files)} headers ({sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB) hashed: "
      f"{(t1 - t) * 1000:.1f} ms; from the kept digests: {(t2 - t1) * 1000:.1f} ms")
"""
        deps = (build / "first.o.d").read_text().replace("\\\n", " ").split(":", 1)[1].split()
        deps = [d if os.path.isabs(d) else str(build / d) for d in deps]
        cp = subprocess.run([sys.executable, "-c", hashing, *deps], env=env,
                            capture_output=True, text=True)
        print(cp.stdout.strip() or cp.stderr[-500:])
        shutil.rmtree(w / "cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
