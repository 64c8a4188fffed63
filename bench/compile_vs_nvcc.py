"""nvstage compile vs plain nvcc: wall-time ratio on the bundled kernels (target: <= 1.05).

Both sides keep their artifacts (plain nvcc: -keep -keep-dir; nvstage: keep=DIR), same flags,
runs interleaved so machine load hits both alike; the median of N runs is reported. nvstage is
measured as a library call (in-process) and as the CLI (a fresh process, imports included),
serially (-j 1) and with its default scheduler, never from its stage cache. Also prints
nvstage's per-stage times beside nvcc's own --time report for the same build.

    python bench/compile_vs_nvcc.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nvstage
from nvstage import proc
from nvstage.compiler.nvcc.phase_times import pair_with_stages, parse_time_csv

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "vadd (exe, sm_90)": ("vadd.cu", ["-arch=sm_90"], nvstage.CompileOptions(archs=("sm_90",))),
    "saxpy (-c, sm_90)": ("saxpy.cu", ["-arch=sm_90", "-c"],
                          nvstage.CompileOptions(archs=("sm_90",), compile_only=True)),
    "multi (-c, sm_80+sm_90)": (
        "multi.cu", ["-gencode", "arch=compute_80,code=sm_80", "-gencode",
                     "arch=compute_90,code=[sm_90,compute_90]", "-c"],
        nvstage.CompileOptions(gencodes=("arch=compute_80,code=sm_80",
                                         "arch=compute_90,code=[sm_90,compute_90]"),
                               compile_only=True)),
}


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    tk = nvstage.find_toolkit()
    print(f"toolkit: {tk.describe()}; cores: {os.cpu_count()}; load: {os.getloadavg()[0]:.2f}")
    work = Path(tempfile.mkdtemp(prefix="nvstage-bench-"))
    rows = []
    try:
        for label, (src, flags, opts) in CASES.items():
            shutil.copy(ROOT / "kernels" / src, work / src)
            times = {"nvcc": [], "lib -j1": [], "lib": [], "cli": []}

            def nvcc():
                d = work / "nvcc_keep"
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                cp = proc.run([tk.nvcc, *flags, "-keep", "-keep-dir", str(d), src], cwd=work)
                assert cp.returncode == 0, cp.stderr

            def lib(jobs):
                def go():
                    shutil.rmtree(work / "ns_keep", ignore_errors=True)
                    nvstage.compile(src, opts, toolkit=tk, keep="ns_keep", cwd=work,
                                    jobs=jobs, cache=False)
                return go

            def cli():
                shutil.rmtree(work / "cli_keep", ignore_errors=True)
                cli_flags = [f for f in flags if f != "-c"]
                cmd = [sys.executable, "-m", "nvstage", "compile", src, "--keep-dir", "cli_keep",
                       "--no-cache"] + (["-c"] if "-c" in flags else []) + ["--", *cli_flags]
                cp = proc.run(cmd, cwd=work, env={**os.environ, "NO_COLOR": "1"})
                assert cp.returncode == 0, cp.stderr

            lib(1)()  # warm the page cache and nvstage's own first-call costs once
            for _ in range(args.runs):
                times["nvcc"].append(timed(nvcc))
                times["lib -j1"].append(timed(lib(1)))
                times["lib"].append(timed(lib(None)))
                times["cli"].append(timed(cli))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((label, med))
        print(f"\nmedian wall time over {args.runs} interleaved runs (s); ratio = nvstage / nvcc")
        print(f"{'case':28} {'nvcc':>7} {'lib -j1':>8} {'ratio':>6} {'lib':>7} {'ratio':>6}"
              f" {'cli':>7} {'ratio':>6}")
        for label, m in rows:
            n = m["nvcc"]
            print(f"{label:28} {n:7.3f} {m['lib -j1']:8.3f} {m['lib -j1'] / n:6.2f} "
                  f"{m['lib']:7.3f} {m['lib'] / n:6.2f} {m['cli']:7.3f} {m['cli'] / n:6.2f}")
        tot = {k: sum(m[k] for _, m in rows) for k in ("nvcc", "lib -j1", "lib", "cli")}
        print(f"{'all cases':28} {tot['nvcc']:7.3f} {tot['lib -j1']:8.3f} "
              f"{tot['lib -j1'] / tot['nvcc']:6.2f} {tot['lib']:7.3f} "
              f"{tot['lib'] / tot['nvcc']:6.2f} {tot['cli']:7.3f} {tot['cli'] / tot['nvcc']:6.2f}")

        # Stage times against nvcc --time, same build (vadd exe), serial.
        shutil.copy(ROOT / "kernels" / "vadd.cu", work / "vadd.cu")
        (work / "t.csv").unlink(missing_ok=True)
        proc.run([tk.nvcc, "--time", "t.csv", "-arch=sm_90", "vadd.cu", "-o", "ref"], cwd=work)
        build = nvstage.compile("vadd.cu", nvstage.CompileOptions(archs=("sm_90",)), toolkit=tk,
                                cwd=work, jobs=1, cache=False)
        pairs = pair_with_stages(parse_time_csv((work / "t.csv").read_text()), build.runs)
        print("\nstage times, vadd exe sm_90 (ms): nvstage's own vs nvcc --time")
        for p in pairs:
            print(f"  {p.kind.value:18} {p.arch or '':11} {p.nvstage_seconds * 1e3:8.1f} "
                  f"{p.nvcc_seconds * 1e3:8.1f}")
        a = sum(p.nvstage_seconds for p in pairs)
        b = sum(p.nvcc_seconds for p in pairs)
        print(f"  {'sum':30} {a * 1e3:8.1f} {b * 1e3:8.1f}  (ratio {a / b:.2f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
