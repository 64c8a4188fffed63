"""Estimates against measurements for every example, per term.

    bash examples/model/measure.sh OUT      # on a GPU machine: nvstage run --profile --json
    python examples/model/errors.py OUT [--gpu h200] [--fit chain_unfused]
    python examples/model/errors.py --frozen tests/data/measured/h200-2026-11-30.json

Prints, per example, (estimate - measured) / measured for each term and T, and the kernel
term's estimate and measurement: first with the default presets, then with presets fitted on
the one workload --fit names (from its run report; from a frozen fixture, that session's own
fit plus the DRAM efficiency fitted to its kernel sum).
"""

import argparse
from pathlib import Path

from nvstage.hw.gpus import resolve_gpu
from nvstage.model.measured import load_frozen, load_profiles, validate

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, nargs="?", help="a folder of NAME.run.json reports")
    ap.add_argument("--frozen", type=Path, help="a frozen measurement fixture instead")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--fit", default="chain_unfused")
    args = ap.parse_args()
    if (args.out is None) == (args.frozen is None):
        ap.error("give a folder of run reports or --frozen FILE")
    gpu = resolve_gpu(args.gpu)
    fitted = None
    if args.frozen:
        measured, fitted = load_frozen(args.frozen)
    else:
        measured = load_profiles(args.out)
    workloads = {p.stem: p for p in HERE.glob("*.toml") if not p.stem.endswith(".cost")}
    rows = validate(measured, workloads, gpu, fit_on=args.fit, fitted=fitted)
    print(f"{'workload':<18} {'presets':<18} {'launch':>8} {'kernel':>8} {'transfer':>9} "
          f"{'T':>8}  kernel us (estimate / measured)")
    for r in rows:
        cells = [f"{v:+.1%}" if v is not None else "-" for v in r.errors.values()]
        meas = r.measured.terms_s.get("kernel")
        kern = f"{r.estimate.kernel_s * 1e6:.1f} / " + (f"{meas * 1e6:.1f}" if meas else "-")
        print(f"{r.workload:<18} {r.presets:<18} {cells[0]:>8} {cells[1]:>8} {cells[2]:>9} "
              f"{cells[3]:>8}  {kern}")


if __name__ == "__main__":
    main()
