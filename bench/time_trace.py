"""Tracing's cost (issue 45): nvstage traced / untraced against nvcc traced / untraced.

    python bench/time_trace.py [--runs 5] [--cub-runs 1] [--no-cub]

Each round runs four compiles, one after another, of one unit for sm_90 with ``-c``:
plain nvcc untraced, nvcc with ``-fdevice-time-trace -``, ``nvstage compile --no-cache``
untraced, and the same with ``-fdevice-time-trace -`` (every stage run; the legs' order turns
each round, so no leg always follows the same one). A round's ratio is traced over untraced for
each side; the figures are the medians of those ratios over the rounds, and the target is
nvstage's at most nvcc's + 0.03. Units: kernels/templates.cu and
tests/data/compile_time/cub_reduce.cu (cub::DeviceReduce and thrust::sort, 18 to 35 s a
compile on 2 shared cores).

Between the two units, whether tracing off costs the cold path anything: the launcher
(``nvstage NVCC -c ...`` with ``NVSTAGE_CACHE=0``: every stage run, nothing stored) with
``NVSTAGE_TIME_TRACE`` unset and ``0``, interleaved, on kernels/templates.cu. The load average
before and after is printed: times on a shared machine move with it.
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
TRACE = ["-fdevice-time-trace", "-"]
LEGS = ("nvcc", "nvcc traced", "nvstage", "nvstage traced")


def wall(argv, cwd: Path, env: dict) -> float:
    t = time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if cp.returncode:
        raise SystemExit(f"{argv[:4]} failed: {cp.stderr.decode()[-800:]}")
    return took


def ratios(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each side's traced/untraced ratio per round, its median over the rounds, and the excess
    of nvstage's over nvcc's (the target holds it to 0.03 at most)."""
    nvcc = statistics.median(r["nvcc traced"] / r["nvcc"] for r in rounds)
    mine = statistics.median(r["nvstage traced"] / r["nvstage"] for r in rounds)
    return {"nvcc": nvcc, "nvstage": mine, "excess": mine - nvcc}


def legs(nvcc: str, unit: str) -> dict[str, list[str]]:
    words = [unit, "-c", "-arch=sm_90"]
    mine = [str(BIN / "nvstage"), "compile", *words, "--no-cache"]
    return {"nvcc": [nvcc, *words, "-o", "out/p.o"],
            "nvcc traced": [nvcc, *words, "-o", "out/pt.o", *TRACE],
            "nvstage": [*mine, "-o", "out/s.o"],
            "nvstage traced": [*mine, "-o", "out/st.o", *TRACE]}


def cost(unit: Path, runs: int, nvcc: str, w: Path, env: dict) -> dict[str, float]:
    shutil.copy(unit, w / unit.name)
    argvs = legs(nvcc, unit.name)
    rounds = []
    for r in range(runs):
        order = LEGS[r % 4:] + LEGS[:r % 4]
        rounds.append({k: wall(argvs[k], w, env) for k in order})
        print(f"  round {r + 1}: " + ", ".join(f"{k} {rounds[-1][k]:.2f} s" for k in LEGS),
              flush=True)
    got = ratios(rounds)
    med = {k: statistics.median(x[k] for x in rounds) for k in LEGS}
    verdict = "met" if got["excess"] <= 0.03 else "missed"
    print(f"{unit.name}: medians " + ", ".join(f"{k} {med[k]:.2f} s" for k in LEGS))
    print(f"{unit.name}: traced/untraced, median of {runs} interleaved rounds: nvcc "
          f"{got['nvcc']:.3f}, nvstage {got['nvstage']:.3f} (nvstage - nvcc {got['excess']:+.3f};"
          f" target at most +0.03: {verdict})", flush=True)
    return got


def tracing_off(runs: int, nvcc: str, w: Path, env: dict) -> None:
    shutil.copy(ROOT / "kernels" / "templates.cu", w / "off.cu")
    base = dict(env, NVSTAGE_CACHE="0", NVSTAGE_SERVER="0")
    base.pop("NVSTAGE_TIME_TRACE", None)
    envs = {"unset": base, "0": dict(base, NVSTAGE_TIME_TRACE="0")}
    argv = [str(BIN / "nvstage"), nvcc, "-c", "off.cu", "-arch=sm_90", "-o", "out/off.o"]
    got: dict[str, list[float]] = {k: [] for k in envs}
    for r in range(runs):
        for k in (("unset", "0") if r % 2 == 0 else ("0", "unset")):
            got[k].append(wall(argv, w, envs[k]))
    u, z = statistics.median(got["unset"]), statistics.median(got["0"])
    print(f"NVSTAGE_TIME_TRACE off, the launcher's cold path (NVSTAGE_CACHE=0, templates.cu, "
          f"medians of {runs} interleaved): unset {u:.2f} s, 0 {z:.2f} s ({z / u:.3f}x; unset "
          f"{min(got['unset']):.2f} to {max(got['unset']):.2f} s, 0 {min(got['0']):.2f} to "
          f"{max(got['0']):.2f} s)")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="rounds on kernels/templates.cu")
    ap.add_argument("--cub-runs", type=int, default=1, help="rounds on cub_reduce.cu")
    ap.add_argument("--no-cub", action="store_true", help="leave cub_reduce.cu out")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from nvstage.compiler.toolkit.locate import find_toolkit

    nvcc = find_toolkit().nvcc
    print(f"load average before: {_load()}; {len(os.sched_getaffinity(0))} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="nvstage-tt-") as tmp:
        w = Path(tmp)
        (w / "out").mkdir()
        env = {k: v for k, v in os.environ.items() if k != "NVSTAGE_TIME_TRACE"}
        env.update(NVSTAGE_CACHE_DIR=str(w / "cache"), XDG_CONFIG_HOME=str(w / "config"),
                   NVSTAGE_BUILD_RECORD=str(w / "record"))
        shutil.copy(ROOT / "kernels" / "templates.cu", w)
        wall([str(BIN / "nvstage"), "compile", "templates.cu", "-c", "-arch=sm_90", "-o",
              "out/warm.o", "--no-cache"], w, env)  # .pyc and the tools' notes, once
        cost(ROOT / "kernels" / "templates.cu", a.runs, nvcc, w, env)
        tracing_off(a.runs, nvcc, w, env)
        if not a.no_cub:  # last: the long one, its rounds printed as they end
            cost(ROOT / "tests" / "data" / "compile_time" / "cub_reduce.cu", a.cub_runs, nvcc,
                 w, env)
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
