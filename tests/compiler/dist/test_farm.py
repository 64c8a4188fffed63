"""The loopback farm itself: a ptxas run through ``sccache`` is compiled on the build server
and gives the local cubin byte for byte; the rerun is a hit."""

from __future__ import annotations

import os
import subprocess


def test_ptxas_through_sccache_runs_remotely_and_gives_the_local_cubin(farm, farm_client,
                                                                      toolkit, tmp_path):
    ptx = tmp_path / "farm.ptx"
    cp = subprocess.run([toolkit.nvcc, "-arch=sm_90", "-ptx", "-o", str(ptx), "-x", "cu", "-"],
                        input="__global__ void farm_k(float *a, float b) "
                              "{ a[threadIdx.x] *= b + 7.25f; }\n",
                        capture_output=True, text=True, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    ptxas = toolkit.tool("ptxas")
    env = {**os.environ, **farm_client.env}
    before = farm_client.stats()
    remote = subprocess.run([farm.sccache, ptxas, "-arch=sm_90", "-m64", "farm.ptx", "-o",
                             "remote.cubin"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert remote.returncode == 0, remote.stderr
    after = farm_client.stats()
    dist = after["dist_compiles"].get(farm.server_addr, 0) - \
        before["dist_compiles"].get(farm.server_addr, 0)
    assert dist == 1, after
    local = subprocess.run([ptxas, "-arch=sm_90", "-m64", "farm.ptx", "-o", "local.cubin"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "remote.cubin").read_bytes() == (tmp_path / "local.cubin").read_bytes()
    (tmp_path / "remote.cubin").unlink()
    again = subprocess.run([farm.sccache, ptxas, "-arch=sm_90", "-m64", "farm.ptx", "-o",
                            "remote.cubin"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    hits = farm_client.stats()["cache_hits"]["counts"]
    assert hits.get("CUBIN", 0) >= 1 + before["cache_hits"]["counts"].get("CUBIN", 0)
    assert (tmp_path / "remote.cubin").read_bytes() == (tmp_path / "local.cubin").read_bytes()
