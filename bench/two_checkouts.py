"""One change measured: nvstage from two checkouts, interleaved with plain nvcc in the same run.

    python bench/two_checkouts.py OLD NEW [--runs 15] [--what compile|launch]

OLD and NEW are checkouts of this repository (``git worktree add /tmp/old HEAD~1``); each is
run from its own ``src/`` with this environment's Python and toolkit. Each round runs plain
``nvcc -arch=sm_90 -c vadd.cu``, then OLD, then NEW:
- ``compile``: ``nvstage compile vadd.cu --arch sm_90 -c -o X.o --no-cache`` (its script);
- ``launch``: the launcher as a build runs it (``python -S -P cli/bare.py NVCC ...``) on a new
  source each time (the bundled vadd.cu with a comment of its own), in a cache folder of its
  own that is in use after the first (warm-up) round: a miss, as in a cold build.
Prints medians, each against nvcc and NEW against OLD (the median of the per-round ratios),
with the spread of the pairs: the noise of the run.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--what", choices=("compile", "launch"), default="compile")
    a = ap.parse_args()
    py = sys.executable
    nvcc = subprocess.run([py, str(ROOT / "bin" / "nvstage"), "doctor", "--print-nvcc"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="nvstage-two-") as d:
        shutil.copy(ROOT / "kernels" / "vadd.cu", d)
        legs = {"nvcc": ([nvcc, "-arch=sm_90", "-c", "vadd.cu", "-o", "nvcc.o"], dict(os.environ))}
        for name, tree in (("old", a.old.resolve()), ("new", a.new.resolve())):
            env = {**os.environ, "PYTHONPATH": str(tree / "src"),
                   "NVSTAGE_CACHE_DIR": os.path.join(d, f"cache-{name}")}
            if a.what == "compile":
                argv = [py, str(tree / "bin" / "nvstage"), "compile", "vadd.cu", "--arch",
                        "sm_90", "-c", "-o", f"{name}.o", "--no-cache"]
            else:
                argv = [py, "-S", "-P", str(tree / "src" / "nvstage" / "cli" / "bare.py"), nvcc,
                        "-arch=sm_90", "-c", "SOURCE", "-o", f"{name}.o"]
            legs[name] = (argv, env)
        times: dict[str, list[float]] = {k: [] for k in legs}
        for i in range(a.runs + 1):  # round 0 warms the caches and the page cache
            for k, (argv, env) in legs.items():
                if "SOURCE" in argv:
                    src = f"{k}_{i}.cu"
                    text = (Path(d) / "vadd.cu").read_text()
                    (Path(d) / src).write_text(f"{text}// {k} {i}\n")
                    argv = [src if w == "SOURCE" else w for w in argv]
                t0 = time.perf_counter()
                cp = subprocess.run(argv, cwd=d, env=env, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if cp.returncode != 0:
                    sys.exit(f"{k} failed (exit {cp.returncode}): {cp.stderr[-2000:]}")
                if i:
                    times[k].append(wall)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.what}, vadd.cu, sm_90: medians of {a.runs} interleaved rounds; load after "
          f"{os.getloadavg()[0]:.2f}")
    for k in legs:
        line = f"  {k:5} {med[k] * 1000:7.1f} ms"
        if k != "nvcc":
            pairs = sorted(x / y for x, y in zip(times[k], times["nvcc"]))
            line += f"   {med[k] / med['nvcc']:.3f}x nvcc (pairs {pairs[0]:.2f} to {pairs[-1]:.2f})"
        print(line)
    pairs = sorted(x / y for x, y in zip(times["new"], times["old"]))
    print(f"  new / old, median of the pairs {statistics.median(pairs):.3f} "
          f"(pairs {pairs[0]:.2f} to {pairs[-1]:.2f})")


if __name__ == "__main__":
    main()
