"""Two CI runners sharing a remote tier: runner B's build of the launcher test project
(tests/data/cuproject, CMake + Ninja, nvstage as the CUDA compiler launcher) with an empty
local cache, against the remote tier runner A filled, over a cold build.

Servers are real and on loopback: Debian's redis-server, and nginx's WebDAV in the Bazel
remote-cache layout (``apt-get install redis-server nginx``). Per round and server: plain nvcc
(no launcher), runner A (nvstage, empty local cache, empty remote: the cold build that fills
it), runner B (nvstage, its own empty local cache and key, the same checkout path), and runner
C (another checkout path). All three set ``NVSTAGE_BASE_DIR`` to their checkout, as the
GitHub Actions recipe does. Times are ninja's build alone (CMake's
configure is the same in all). Each figure is the median over the rounds, which interleave
the builds so that load from elsewhere falls on all of them alike.

    python bench/remote_cache.py [--rounds 3] [--servers redis,webdav] [--resident 0|1]

The resident nvstage (``NVSTAGE_SERVER``) is on, nvstage's default, as the other benchmarks
measure it (``--resident 0``: every command in a process of its own); each runner's server is
stopped after its build.

Target (issue 17): runner B <= 0.20 of the cold build. Bytes moved are what the remote tier
sent to B and what A wrote to it (compressed entries, as stored).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "tests" / "data" / "cuproject"
BIN = Path(sys.executable).parent
TARGET = 0.20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"no server on port {port}")


def start_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    folder.mkdir(parents=True)
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_port(port, proc)
    return proc, f"redis://127.0.0.1:{port}/0"


def start_webdav(folder: Path) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(exe):
        raise SystemExit("nginx is not installed (apt-get install nginx)")
    port = free_port()
    (folder / "root").mkdir(parents=True)
    conf = folder / "nginx.conf"
    temps = "\n".join(f"    {k}_temp_path {folder}/{k};"
                      for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf.write_text(f"""daemon off; master_process off; worker_processes 1;
pid {folder}/nginx.pid; error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
{temps}
    server {{
        listen 127.0.0.1:{port}; root {folder}/root; client_max_body_size 0;
        location / {{ dav_methods PUT DELETE MKCOL; create_full_put_path on; }}
    }}
}}
""")
    proc = subprocess.Popen([exe, "-p", str(folder), "-e", str(folder / "error.log"),
                             "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}/cache|layout=bazel"


def build(checkout: Path, env: dict[str, str], launcher: bool, nvcc: str) -> float:
    """A fresh checkout at ``checkout``, configured and built: ninja's seconds."""
    shutil.rmtree(checkout, ignore_errors=True)
    shutil.copytree(PROJECT, checkout)
    args = ["cmake", "-S", str(checkout), "-B", str(checkout / "build"), "-G", "Ninja",
            f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    if launcher:
        args.append("-DCMAKE_CUDA_COMPILER_LAUNCHER=" +
                    ";".join([sys.executable, "-m", "nvstage"]))
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    t = time.perf_counter()
    cp = subprocess.run(["ninja", "-C", str(checkout / "build"), "-j2"], env=env,
                        capture_output=True, text=True)
    took = time.perf_counter() - t
    if cp.returncode != 0:
        raise SystemExit(f"the build failed:\n{cp.stdout}\n{cp.stderr}")
    return took


def tier_stats(cache: Path) -> dict:
    try:
        return json.loads((cache / "tiers.json").read_text())["stats"]
    except (OSError, ValueError, KeyError):
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default="redis,webdav")
    ap.add_argument("--resident", choices=("0", "1"), default="1")
    args = ap.parse_args()
    if not (BIN / "cmake").exists() or not (BIN / "ninja").exists():
        raise SystemExit("cmake and ninja come from the test extra: pip install -e '.[test]'")
    from nvstage.compiler.toolkit.locate import find_toolkit

    nvcc = find_toolkit().nvcc
    base = Path(tempfile.mkdtemp(prefix="nvstage-bench-remote-"))
    servers = {}
    try:
        for name in args.servers.split(","):
            start = start_redis if name == "redis" else start_webdav
            servers[name] = start(base / f"server-{name}")
        clean = {k: v for k, v in os.environ.items() if not k.startswith("NVSTAGE_")}
        clean["PATH"] = f"{BIN}:{os.environ.get('PATH', '')}"
        times: dict[str, list[float]] = {}
        moved: dict[str, list[int]] = {}
        for r in range(args.rounds):
            n = 0
            times.setdefault("plain", []).append(
                build(base / "checkout", clean, False, nvcc))
            for name, (proc, url) in servers.items():
                if name == "webdav":  # an empty remote for runner A
                    shutil.rmtree(base / f"server-{name}" / "root" / "cache",
                                  ignore_errors=True)
                else:
                    subprocess.run(["redis-cli", "-u", url, "flushall"],
                                   stdout=subprocess.DEVNULL)
                # The recipe's setting: NVSTAGE_BASE_DIR is the checkout, for every runner.
                for who, path in (("A", base / "checkout"), ("B", base / "checkout"),
                                  ("C", base / "elsewhere" / "src")):
                    n += 1
                    cache = base / f"cache-{r}-{n}"
                    env = dict(clean, NVSTAGE_CACHE_DIR=str(cache),
                               XDG_CONFIG_HOME=str(base / f"config-{r}-{n}"),
                               NVSTAGE_REMOTE_CACHE=url, NVSTAGE_BASE_DIR=str(path),
                               NVSTAGE_SERVER=args.resident)
                    try:
                        times.setdefault(f"{name}:{who}", []).append(
                            build(path, env, True, nvcc))
                    finally:
                        subprocess.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server",
                                        "--stop", str(cache)], env=env, capture_output=True)
                    stats = tier_stats(cache)
                    row = next((v for k, v in stats.items() if k != "local"), {})
                    moved.setdefault(f"{name}:{who}:read", []).append(row.get("bytes_read", 0))
                    moved.setdefault(f"{name}:{who}:written", []).append(
                        row.get("bytes_written", 0))
                    moved.setdefault(f"{name}:{who}:hits", []).append(row.get("hits", 0))
                    moved.setdefault(f"{name}:{who}:misses", []).append(row.get("misses", 0))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"cuproject (5 CUDA sources, sm_80 + sm_90, 2 host sources), ninja -j2, "
              f"{args.rounds} rounds, medians; resident nvstage "
              f"{'on' if args.resident == '1' else 'off'}")
        print(f"  plain nvcc, cold                     {med['plain']:7.2f} s")
        met = True
        for name in servers:
            a, b, c = (med[f"{name}:{w}"] for w in "ABC")
            mb = {k: statistics.median(v) for k, v in moved.items() if k.startswith(name)}
            print(f"  [{name}] runner A, nvstage cold        {a:7.2f} s   wrote "
                  f"{mb[f'{name}:A:written'] / 1e6:6.2f} MB to the remote")
            print(f"  [{name}] runner B, same path           {b:7.2f} s   read  "
                  f"{mb[f'{name}:B:read'] / 1e6:6.2f} MB, {mb[f'{name}:B:hits']:.0f} hits, "
                  f"{mb[f'{name}:B:misses']:.0f} misses")
            print(f"  [{name}] runner C, other path + base   {c:7.2f} s   read  "
                  f"{mb[f'{name}:C:read'] / 1e6:6.2f} MB, {mb[f'{name}:C:hits']:.0f} hits, "
                  f"{mb[f'{name}:C:misses']:.0f} misses")
            print(f"  [{name}] B / A (nvstage cold)          {b / a:7.3f}   (target <= "
                  f"{TARGET:.2f}: {'met' if b / a <= TARGET else 'MISSED'})")
            print(f"  [{name}] B / plain nvcc cold           {b / med['plain']:7.3f}")
            print(f"  [{name}] C / A                         {c / a:7.3f}")
            met = met and b / a <= TARGET
        print("raw times (s): " + json.dumps({k: [round(x, 3) for x in v]
                                              for k, v in times.items()}))
        if not met:
            sys.exit(1)
    finally:
        for proc, _ in servers.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
