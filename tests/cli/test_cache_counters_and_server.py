"""nvstage cache --zero-stats zeroes the counters and keeps the entries; nvstage cache shows the
resident nvstage serving the folder (pid, since when, idle timeout), and --stop-server stops
it, leaving no process, socket or folder behind."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from nvstage import proc


def test_zero_stats_keeps_the_entries(cli, kernels, workdir, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(cache))
    shutil.copy(kernels / "saxpy.cu", workdir)
    for _ in range(2):
        assert cli("compile", "saxpy.cu", "--arch", "sm_90", "-c").exit_code == 0
    with open(cache / "inv" / "hits", "a") as f:  # one line per whole-command answer
        f.write("7\n")
    (cache / "tiers.json").write_text(json.dumps({
        "stats": {"local": {"hits": 3}}, "down": {"redis://x": {"until": 1, "why": "no"}}}))
    before = json.loads(cli("cache", "--json").stdout)
    assert before["stats"]["hits"] == 14 and before["stats"]["zeroed"] is None
    r = cli("cache", "--zero-stats")
    assert r.exit_code == 0 and r.stderr.strip() == f"zeroed the counters of {cache}"
    assert "hit rate  - (0 hits, 0 misses, 0 corrupt, 0 without preprocessing, since " in \
        r.stdout
    after = json.loads(cli("cache", "--json").stdout)
    assert after["entries"] == before["entries"] == 7
    assert {k: after["stats"][k] for k in ("hits", "misses", "stored", "hit_rate")} == \
        {"hits": 0, "misses": 0, "stored": 0, "hit_rate": None}
    assert abs(after["stats"]["zeroed"] - time.time()) < 60
    assert json.loads((cache / "tiers.json").read_text()) == \
        {"down": {"redis://x": {"until": 1, "why": "no"}}}
    # The next build counts from zero (and is all hits: the entries stayed).
    assert cli("compile", "saxpy.cu", "--arch", "sm_90", "-c").exit_code == 0
    again = json.loads(cli("cache", "--json").stdout)["stats"]
    assert (again["hits"], again["misses"]) == (7, 0)
    assert again["zeroed"] == after["stats"]["zeroed"]
    # Nothing to zero where there is no cache; somebody's folder is refused.
    r = cli("cache", "--zero-stats", "--dir", str(tmp_path / "none"))
    assert r.exit_code == 0 and "nothing to zero" in r.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "stats.json").write_text("{}")
    r = cli("cache", "--zero-stats", "--dir", str(tmp_path / "mine"))
    assert r.exit_code != 0 and "refusing to zero the counters of" in r.stderr
    assert (tmp_path / "mine" / "stats.json").read_text() == "{}"


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_resident_server_is_shown_and_stopped(toolkit, kernels, tmp_path):
    # A socket's path holds 107 bytes at most: pytest's folders are longer.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    cache = tmp_path / "cache"
    env = dict(os.environ, NVSTAGE_SERVER="1", NVSTAGE_SERVER_IDLE="90",
               NVSTAGE_CACHE_DIR=str(cache), XDG_RUNTIME_DIR=str(run))
    nvstage = _launcher()
    shutil.copy(kernels / "vadd.cu", tmp_path / "vadd.cu")
    try:
        shown = proc.run([*nvstage, "cache"], cwd=tmp_path, env=env, timeout=120)
        assert shown.stdout.splitlines()[-1] == \
            "server    none running (the launcher starts one)"
        # A miss runs in the launcher and starts a server for the next commands.
        built = proc.run([*nvstage, toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"],
                         cwd=tmp_path, env=env, timeout=600)
        assert built.returncode == 0, built.stderr
        servers: list = []
        for _ in range(300):
            info = json.loads(proc.run([*nvstage, "cache", "--json"], cwd=tmp_path, env=env,
                                       timeout=120).stdout)
            servers = info["servers"]
            if servers:
                break
            time.sleep(0.1)
        (server,) = servers
        assert server["idle_s"] == 90.0 and server["current"] is True
        assert abs(server["since"] - time.time()) < 300 and _alive(server["pid"])
        text = proc.run([*nvstage, "cache"], cwd=tmp_path, env=env, timeout=120).stdout
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(server["since"]))
        assert text.splitlines()[-1] == \
            f"server    pid {server['pid']}, running since {since}, leaves after 90 s idle"
        stop = proc.run([*nvstage, "cache", "--stop-server"], cwd=tmp_path, env=env,
                        timeout=120)
        assert stop.returncode == 0 and stop.stdout.strip() == \
            f"stopped the resident nvstage for {cache} (pid {server['pid']})"
        assert not _alive(server["pid"])
        assert os.listdir(run / "nvstage") == []  # its sockets and its lock went with it
        again = proc.run([*nvstage, "cache", "--stop-server"], cwd=tmp_path, env=env,
                         timeout=120)
        assert again.returncode == 0 and again.stdout.strip() == \
            f"no resident nvstage runs for {cache}"
    finally:
        proc.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop", str(cache)],
                 cwd=tmp_path, env=env, timeout=60)
        shutil.rmtree(run, ignore_errors=True)
