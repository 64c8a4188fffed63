"""Every GPU check of `nvstage run` in one go; results into one folder (see gpu_checks.sh).

Uses only what is installed (no network). Writes, under OUT, in this order:
  run-<example>-<mode>.json / .trace.json / .txt    nvstage run --profile on every example
  run-transfer.json / .txt   256 MiB pinned copies each way (examples/model/transfer.toml)
  claims.json                serialized wall vs T, pipelined wall < T, CUPTI vs events,
                             pinned H2D/D2H bandwidth against the link's peak
  bench/                     the launch-overhead benchmark
  pytest-gpu.txt / .xml      the gpu-marked tests
  summary.txt                one line per check: PASS / FAIL / SKIP and the figures (rewritten
                             as each check ends)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "run"
TRANSFER = ROOT / "examples" / "model" / "transfer.toml"
# Pinned copies of 256 MiB should reach most of the link (NVIDIA's bandwidthTest shows about
# 85-90% of the PCIe rate on Gen4/Gen5 x16); below this the host setup is suspect.
LINK_FLOOR = 0.75


def sh(argv, out: Path, timeout=900) -> int:
    """Run argv (through nvstage.proc, the one place that starts processes); its stdout and
    stderr go to ``out``."""
    from nvstage import proc
    from nvstage.errors import ToolTimeout

    try:
        cp = proc.run(argv, cwd=ROOT, timeout=timeout)
    except ToolTimeout as e:  # proc turns subprocess's TimeoutExpired into this
        partial = getattr(e.__cause__, "stdout", None) or ""
        if isinstance(partial, bytes):
            partial = partial.decode(errors="replace")
        out.write_text(partial + f"\nTIMED OUT after {timeout} s\n")
        return 124
    out.write_text(cp.stdout + cp.stderr)
    return cp.returncode


class _Summary(list):
    """The summary lines, rewritten to summary.txt as each is added: a run stopped by an
    outer timeout still leaves every check that finished."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def append(self, line: str) -> None:
        super().append(line)
        self.path.write_text("\n".join(self) + "\n")


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    lines = _Summary(out / "summary.txt")
    py = sys.executable
    nv = [py, "-m", "nvstage"]
    from nvstage.run.probe import probe

    p = probe()
    if not p.available:
        msg = f"no GPU here ({p.reason}): nothing to check"
        (out / "summary.txt").write_text(msg + "\n")
        print(msg, file=sys.stderr)
        return 4
    # The figures first (the examples, the claims, the bench), the gpu-marked tests
    # last: when an outer time limit cuts the run short, the figures are what is kept.
    try:
        import cupti  # noqa: F401
        have_cupti = True
    except Exception:
        have_cupti = False
    docs = {}
    for ex in sorted(EXAMPLES.glob("*.toml")):
        for mode in ("serialized", "pipelined"):
            stem = f"run-{ex.stem}-{mode}"
            argv = nv + ["run", str(ex), "--profile", "--mode", mode,
                         "--json", str(out / f"{stem}.json"),
                         "--trace", str(out / f"{stem}.trace.json")]
            if have_cupti:
                argv.append("--cupti")
            rc = sh(argv, out / f"{stem}.txt")
            lines.append(f"{'PASS' if rc == 0 else 'FAIL'} {stem} (rc {rc})")
            jf = out / f"{stem}.json"
            if jf.is_file():
                docs[(ex.stem, mode)] = json.loads(jf.read_text())
    stem = "run-transfer"
    argv = nv + ["run", str(TRANSFER), "--profile", "--mode", "serialized",
                 "--json", str(out / f"{stem}.json")]
    rc = sh(argv, out / f"{stem}.txt")
    lines.append(f"{'PASS' if rc == 0 else 'FAIL'} {stem} (rc {rc})")
    if (out / f"{stem}.json").is_file():
        docs[("transfer", "serialized")] = json.loads((out / f"{stem}.json").read_text())
    claims = {}

    def med(doc, key):
        return ((doc.get("decomposition") or {}).get(key) or {}).get("median")

    for name in ("saxpy", "vadd"):
        d = docs.get((name, "serialized"))
        if d and med(d, "total_ns"):
            gap = abs(med(d, "wall_ns") - med(d, "total_ns")) / med(d, "total_ns")
            claims[f"{name}_serialized_wall_vs_T"] = {"wall_ns": med(d, "wall_ns"),
                                                     "T_ns": med(d, "total_ns"), "gap": gap,
                                                     "pass": gap < 0.05}
    d = docs.get(("many_launches", "pipelined"))
    if d and med(d, "total_ns"):
        claims["many_launches_pipelined_wall_below_T"] = {
            "wall_ns": med(d, "wall_ns"), "T_ns": med(d, "total_ns"),
            "overlap_ns": med(d, "overlap_ns"), "pass": med(d, "wall_ns") < med(d, "total_ns")}
    d = docs.get(("transfer", "serialized"))
    if d:
        claims.update(pinned_bandwidth(d))
    if have_cupti:
        agree = []
        for (name, mode), d in docs.items():
            cup = {o["index"]: o for o in ((d.get("cupti") or {}).get("operations") or [])}
            for op in (d.get("decomposition") or {}).get("operations", []):
                c = cup.get(op["index"])
                ev = (op.get("gpu_ns") or {}).get("median")
                if op["kind"] == "launch" and c and c["gpu_ns_median"] and ev and ev >= 10_000:
                    rel = abs(ev - c["gpu_ns_median"]) / c["gpu_ns_median"]
                    agree.append({"workload": name, "mode": mode, "op": op["index"],
                                  "kernel": op["name"], "events_ns": ev,
                                  "cupti_ns": c["gpu_ns_median"], "rel": rel,
                                  "pass": rel <= 0.05})
        claims["cupti_vs_events_kernels_ge_10us"] = agree
    else:
        claims["cupti_vs_events_kernels_ge_10us"] = "SKIP: cupti-python is not installed"
    (out / "claims.json").write_text(json.dumps(claims, indent=2) + "\n")
    for k, v in claims.items():
        if isinstance(v, dict):
            lines.append(f"{'PASS' if v['pass'] else 'FAIL'} {k}: "
                         + ", ".join(f"{a}={b}" for a, b in v.items() if a != "pass"))
        elif isinstance(v, list):
            bad = [x for x in v if not x["pass"]]
            lines.append(f"{'PASS' if v and not bad else 'FAIL'} {k}: {len(v)} kernels, "
                         f"{len(bad)} outside 5%")
        else:
            lines.append(f"{v} ({k})")
    rc = sh([py, str(ROOT / "bench" / "launch_overhead" / "bench.py"), str(out / "bench")],
            out / "bench.txt")
    bj = out / "bench" / "launch_overhead.json"
    if bj.is_file():
        b = json.loads(bj.read_text())
        lines.append(f"{'PASS' if b['within_target'] else 'FAIL'} launch overhead: ratio "
                     f"{b['ratio']:.2f} (C++ {b['cpp']['median_ns']} ns, nvstage "
                     f"{b['nvstage']['median_ns']:.0f} ns, target <= {b['target']})")
        if "ratio_bindings" in b:
            lines.append(f"{'PASS' if b['within_target_bindings'] else 'FAIL'} launch overhead "
                         f"vs bare cuda.bindings: ratio {b['ratio_bindings']:.2f} (bindings "
                         f"{b['bindings']['median_ns']:.0f} ns = {b['bindings_vs_cpp']:.2f}x "
                         f"C++, target <= {b['target_bindings']})")
        else:
            lines.append(f"FAIL bare cuda.bindings loop: {b['bindings'].get('error')}")
    else:
        lines.append(f"FAIL launch overhead bench (rc {rc}, see bench.txt)")
    rc = sh([py, "-m", "pytest", "-m", "gpu", "-v", "tests",
             f"--junitxml={out / 'pytest-gpu.xml'}"], out / "pytest-gpu.txt")
    lines.append(f"{'PASS' if rc == 0 else 'FAIL'} pytest -m gpu (rc {rc})")
    print("\n".join(lines))
    return 0 if all(not line.startswith("FAIL") for line in lines) else 1


def pinned_bandwidth(doc: dict) -> dict:
    """Each direction's largest pinned copy: bytes over its median GPU time, against the
    theoretical one-way rate of the link NVML reports (current generation and width)."""
    from nvstage.hw.gpus import pcie_bytes_per_s

    nvml = (doc.get("device") or {}).get("nvml") or {}
    gen, width = nvml.get("pcie_generation"), nvml.get("pcie_width")
    peak = pcie_bytes_per_s(gen, width) if gen and width else None
    out = {}
    for kind in ("h2d", "d2h"):
        ops = [o for o in (doc.get("decomposition") or {}).get("operations", [])
               if o.get("kind") == kind and o.get("pinned") and o.get("bytes")
               and (o.get("gpu_ns") or {}).get("median")]
        if not ops or not peak:
            out[f"pinned_{kind}_bandwidth"] = "SKIP: no pinned copy or no PCIe link from NVML"
            continue
        o = max(ops, key=lambda o: o["bytes"])
        bw = o["bytes"] / (o["gpu_ns"]["median"] * 1e-9)
        out[f"pinned_{kind}_bandwidth"] = {
            "bytes": o["bytes"], "gbs": bw / 1e9, "link": f"PCIe gen{gen} x{width}",
            "peak_gbs": peak / 1e9, "fraction": bw / peak, "pass": bw / peak >= LINK_FLOOR}
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_checks.py OUT_DIR")
    sys.exit(main(Path(sys.argv[1])))
