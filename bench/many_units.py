"""A many-unit build three ways: plain nvcc, nvstage and ccache as CMake's CUDA launcher.

    python bench/many_units.py [--rounds 3] [--units 32] [-j 2]

The project is made here: ``--units`` translation units (32) from the bundled kernels (each
kernel that compiles with ``-c`` on its own, in turn), every one including one shared header
(``common.h``) whose value reaches its code, built as a CMake object library with Ninja for
sm_90. Each round builds every way in a fresh copy with an empty cache of its own, interleaved
(drift in the machine hits each way alike):

- cold: the first build (nvstage against plain nvcc: target at most 1.03);
- warm: ``ninja -t clean`` and a rebuild (against ccache: at most 1.0);
- edit: the shared header changed, then built (every unit rebuilds);
- revert: the header changed back, then built (against ccache: at most 1.2: every unit was
  built that way before, so a cache answers all of them);
- bytes: the cache folder after the cold build, every regular file once (a hard link is one
  file), against ccache's (at most 3x);
- the machine's CPU seconds over the cold build (``/proc/stat``, once the machine is quiet after
  it: the resident nvstage's bookkeeping after its answers, which gives way to the build's
  tools, included), nvstage's against nvcc's. Each build starts on a quiet machine.

nvstage is the launcher the toolchain file of ``nvstage doctor --cmake-toolchain FILE
--launcher`` names (Python without ``site`` on ``cli/bare.py``), with its resident server as by
default (``compiler/launcher/resident/server.py``, which answers hits too, started by the first
command and stopped after each round; ``--server 0``: ``NVSTAGE_SERVER=0``, without it).
Medians over rounds, and the spread of each anchor (the noise of this machine). ccache comes
from the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Kernels that do not compile alone with -c (lto_a.cu calls a device function of lto_b.cu).
_SKIP = {"lto_a.cu"}
HEADER = "#pragma once\n#define BENCH_SCALE {value}\n" \
         "__device__ inline float bench_scale(float x) {{ return x * BENCH_SCALE; }}\n"


def make_project(folder: Path, units: int) -> None:
    kernels = sorted(p for p in (ROOT / "kernels").glob("*.cu") if p.name not in _SKIP)
    folder.mkdir(parents=True)
    (folder / "common.h").write_text(HEADER.format(value="1.0f"))
    names = []
    for n in range(units):
        k = kernels[n % len(kernels)]
        name = f"u{n:02d}_{k.stem}.cu"
        (folder / name).write_text(
            f'#include "common.h"\n{k.read_text()}\n'
            f"__global__ void bench_unit_{n}(float* p) "
            f"{{ p[threadIdx.x] = bench_scale(p[threadIdx.x]); }}\n")
        names.append(name)
    (folder / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(many LANGUAGES CUDA)\n"
        "set(CMAKE_CUDA_ARCHITECTURES 90)\n"
        f"add_library(units OBJECT {' '.join(names)})\n")


def cache_bytes(folder: Path) -> int:
    """Every regular file under ``folder`` once (apparent size; a hard link counted once)."""
    seen, total = set(), 0
    for dirpath, _, files in os.walk(folder):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen or not os.path.isfile(os.path.join(dirpath, f)):
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def _machine_cpu() -> float:
    """The machine's CPU seconds so far (user, nice, system, irq, softirq): in a build that
    keeps every core busy, what each way costs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def _quiet(limit_s: float = 120.0) -> None:
    """Wait until the machine is quiet (under a tenth of a core busy over half a second, twice
    running, a second at least): what a way does after its build (the resident nvstage's
    bookkeeping after its answers) is its cost too, and done before its next build starts."""
    time.sleep(1.0)
    end, calm = time.monotonic() + limit_s, 0
    while time.monotonic() < end and calm < 2:
        before = _machine_cpu()
        time.sleep(0.5)
        calm = calm + 1 if _machine_cpu() - before < 0.05 else 0


def _run(argv, cwd, env) -> float:
    t = time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    if cp.returncode:
        raise RuntimeError(f"{argv[:3]} failed: {(cp.stdout + cp.stderr)[-1500:]}")
    return time.perf_counter() - t


def one(way: str, launcher: list[str] | None, nvcc: str, work: Path, units: int,
        jobs: int, server: str = "0") -> dict[str, float]:
    src, build, cache = work / "src", work / "build", work / "cache"
    make_project(src, units)
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", NVSTAGE_CACHE_DIR=str(cache),
               CCACHE_DIR=str(cache), XDG_CONFIG_HOME=str(work / "config"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a real install has its .pyc files
    env.pop("NVSTAGE_BUILD_RECORD", None)
    env["NVSTAGE_SERVER"] = server  # the resident nvstage: 1, the default; 0, refused
    cfg = ["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
           f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    if launcher:
        cfg.append("-DCMAKE_CUDA_COMPILER_LAUNCHER=" + ";".join(launcher))
    _run(cfg, work, env)
    ninja = ["ninja", "-C", str(build), f"-j{jobs}"]
    out: dict[str, float] = {}
    try:
        cpu = _machine_cpu()
        out["cold"] = _run(ninja, work, env)
        _quiet()  # a resident child's bookkeeping after its answer is counted too
        out["cold cpu"] = _machine_cpu() - cpu
        if way == "nvcc":
            return out
        out["bytes"] = float(cache_bytes(cache))
        _run(["ninja", "-C", str(build), "-t", "clean"], work, env)
        out["warm"] = _run(ninja, work, env)
        (src / "common.h").write_text(HEADER.format(value="2.0f"))
        _quiet()
        out["edit"] = _run(ninja, work, env)
        (src / "common.h").write_text(HEADER.format(value="1.0f"))
        _quiet()
        out["revert"] = _run(ninja, work, env)
    finally:
        if way == "nvstage":
            subprocess.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop",
                            str(cache)], env=env, capture_output=True)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--units", type=int, default=32)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--server", choices=("0", "1"), default="1",
                    help="NVSTAGE_SERVER for nvstage's builds: 1 (nvstage's default) or 0")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from nvstage.compiler.toolkit.cmake_toolchain import nvstage_command
    from nvstage.compiler.toolkit.locate import find_toolkit

    nvcc = find_toolkit().nvcc
    ways = {"nvcc": None, "nvstage": nvstage_command(), "ccache": [str(BIN / "ccache")]}
    if not Path(ways["ccache"][0]).exists():
        raise SystemExit("ccache is not installed: pip install -e '.[bench]'")
    got: dict[str, dict[str, list[float]]] = {w: {} for w in ways}
    for r in range(a.rounds):
        for way, launcher in ways.items():
            with tempfile.TemporaryDirectory(prefix=f"nvstage-many-{way}-") as tmp:
                res = one(way, launcher, nvcc, Path(tmp), a.units, a.jobs, a.server)
            for k, v in res.items():
                got[way].setdefault(k, []).append(v)
            print(f"round {r + 1}: {way:8} " + ", ".join(
                f"{k} {v:.2f} s" if k != "bytes" else f"{k} {v / 1024:.0f} KiB"
                for k, v in res.items()), file=sys.stderr, flush=True)
    med = {w: {k: statistics.median(v) for k, v in d.items()} for w, d in got.items()}

    def spread(way, k):
        v = got[way][k]
        return f"{min(v):.2f} to {max(v):.2f} s" if k != "bytes" else ""

    print(f"{a.units} units sharing one header, CMake + Ninja -j{a.jobs}, sm_90, "
          f"medians of {a.rounds} interleaved round(s), NVSTAGE_SERVER={a.server}")
    n, s, c = med["nvcc"], med["nvstage"], med["ccache"]
    rows = [
        ("cold: plain nvcc (anchor)", n["cold"], None, None, spread("nvcc", "cold")),
        ("cold: nvstage", s["cold"], s["cold"] / n["cold"], "/nvcc <= 1.03", ""),
        ("cold: ccache", c["cold"], c["cold"] / n["cold"], "/nvcc", ""),
        ("warm after ninja -t clean: ccache (anchor)", c["warm"], None, None,
         spread("ccache", "warm")),
        ("warm after ninja -t clean: nvstage", s["warm"], s["warm"] / c["warm"],
         "/ccache <= 1.0", ""),
        ("edit the shared header: ccache (anchor)", c["edit"], None, None,
         spread("ccache", "edit")),
        ("edit the shared header: nvstage", s["edit"], s["edit"] / c["edit"], "/ccache", ""),
        ("revert that edit: ccache (anchor)", c["revert"], None, None,
         spread("ccache", "revert")),
        ("revert that edit: nvstage", s["revert"], s["revert"] / c["revert"],
         "/ccache <= 1.2", ""),
    ]
    for name, t, ratio, what, note in rows:
        tail = f"{ratio:.3f} ({what})" if ratio is not None else f"spread {note}"
        print(f"  {name:44} {t:8.2f} s   {tail}")
    per = f"{(s['cold cpu'] - n['cold cpu']) / a.units * 1000:+.0f} ms a unit"
    print(f"  {'cold, the machine CPU: plain nvcc':44} {n['cold cpu']:8.2f} s")
    print(f"  {'cold, the machine CPU: nvstage':44} {s['cold cpu']:8.2f} s   {per}")
    print(f"  {'cache bytes after the cold build: ccache':44} {c['bytes'] / 1024:8.0f} KiB")
    print(f"  {'cache bytes after the cold build: nvstage':44} {s['bytes'] / 1024:8.0f} KiB"
          f"   {s['bytes'] / c['bytes']:.2f} (/ccache <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
