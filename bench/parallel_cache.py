"""nvstage's scheduler and stage cache against nvcc, on one file with four gencodes.

Prints, from one run: nvstage's wall time over plain nvcc's (both keeping every artifact),
over nvcc's own ``--threads 0`` and ``--threads 2``, and a warm rebuild of the unchanged file
over a cold one (empty cache). Each figure is the median of several rounds, interleaved so
that load from elsewhere falls on all of them alike; the raw times are printed too.

    python bench/parallel_cache.py [--rounds 5] [--jobs N] [--source kernels/multi.cu]

Targets (from issue 8): <= 0.60 over plain nvcc on 2 cores, <= 0.95 over --threads, warm
<= 0.10 of cold.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import nvstage
from nvstage import proc
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.pipeline.scheduler import default_jobs

ROOT = Path(__file__).resolve().parent.parent
GENCODES = ("arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80",
            "arch=compute_90,code=[sm_90,compute_90]", "arch=compute_120,code=sm_120")
TARGETS = {"plain": 0.60, "threads0": 0.95, "threads2": 0.95, "warm": 0.10}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--source", default=str(ROOT / "kernels/multi.cu"))
    args = ap.parse_args()
    jobs = args.jobs or default_jobs()
    tk = nvstage.find_toolkit()
    base = Path(tempfile.mkdtemp(prefix="nvstage-bench-"))
    try:
        src = base / Path(args.source).name
        shutil.copy(args.source, src)
        flags = [x for g in GENCODES for x in ("-gencode", g)] + ["-c"]
        opts = CompileOptions(gencodes=GENCODES, compile_only=True)

        def nvcc(tag: str, n: int, extra: list[str]) -> float:
            keep = base / f"{tag}{n}"
            keep.mkdir()
            t = time.perf_counter()
            cp = proc.run([tk.nvcc, *flags, *extra, "-keep", "-keep-dir", str(keep), src.name,
                           "-o", f"{tag}{n}.o"], cwd=base)
            dt = time.perf_counter() - t
            if cp.returncode != 0:
                raise SystemExit(f"nvcc failed: {cp.stderr}")
            return dt

        def ours(tag: str, n: int, cache) -> float:
            t = time.perf_counter()
            nvstage.compile(src.name, opts, toolkit=tk, keep=base / f"{tag}{n}", cwd=base,
                            jobs=jobs, cache=cache)
            return time.perf_counter() - t

        ours("warmup", 0, False)  # toolkit probes and arch lists are cached per process
        times: dict[str, list[float]] = {k: [] for k in
                                         ("nvcc", "threads0", "threads2", "cold", "warm")}
        for n in range(args.rounds):
            cache_dir = base / f"cache{n}"  # empty: the cold build fills it, nothing else
            times["nvcc"].append(nvcc("nvcc", n, []))
            times["cold"].append(ours("cold", n, cache_dir))
            times["threads0"].append(nvcc("t0_", n, ["--threads", "0"]))
            times["warm"].append(ours("warm", n, cache_dir))
            times["threads2"].append(nvcc("t2_", n, ["--threads", "2"]))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"source {args.source}, {len(GENCODES)} gencodes, -j {jobs}, "
              f"{os.cpu_count()} cpus, {args.rounds} rounds, CUDA {tk.version}")
        print(f"load average before/after: {os.getloadavg()}")
        for k, v in times.items():
            print(f"  {k:9s} median {med[k]:.3f} s   raw " + " ".join(f"{x:.3f}" for x in v))
        rows = [("nvstage cold / plain nvcc -keep", med["cold"] / med["nvcc"], "plain"),
                ("nvstage cold / nvcc --threads 0", med["cold"] / med["threads0"], "threads0"),
                ("nvstage cold / nvcc --threads 2", med["cold"] / med["threads2"], "threads2"),
                ("nvstage warm / nvstage cold", med["warm"] / med["cold"], "warm")]
        for label, ratio, key in rows:
            ok = "meets" if ratio <= TARGETS[key] else "MISSES"
            print(f"{label:34s} {ratio:.3f}  ({ok} target <= {TARGETS[key]:.2f})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
