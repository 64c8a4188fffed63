"""Estimates against measurements for every example (run on a machine with a GPU).

    bash examples/model/measure.sh OUT      # nvstage run --profile --json for each example
    python examples/model/errors.py OUT [--gpu h200] [--fit chain_unfused]

Prints, per example, (estimate - measured) / measured for each term and T: first with the
default presets, then calibrated on the one report named by --fit (the others must land
within 25% on T for the issue's goal).
"""

import argparse
from pathlib import Path

from nvstage.hw.gpus import resolve_gpu
from nvstage.model.calibrate import calibrate, relative_errors
from nvstage.model.estimate import estimate
from nvstage.run.document import load_run_report

HERE = Path(__file__).resolve().parent
NAMES = ["chain_unfused", "chain_fused", "chain_fused_wide", "reduce", "matmul_tiled", "transfer"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--fit", default="chain_unfused")
    args = ap.parse_args()
    gpu = resolve_gpu(args.gpu)
    docs = {n: load_run_report(args.out / f"{n}.run.json") for n in NAMES
            if (args.out / f"{n}.run.json").is_file()}
    cal = calibrate(args.out / f"{args.fit}.run.json", gpu, workload=HERE / f"{args.fit}.toml")
    for c in cal.changes:
        print(f"fit {c.name}: {c.before:.4g} -> {c.after:.4g} ({c.how})")
    print(f"{'workload':<18} {'presets':<18} {'launch':>8} {'kernel':>8} {'transfer':>9} "
          f"{'T':>8} {'pipe/wall':>9}")
    for n, doc in docs.items():
        for label, c in (("default", None), (f"fit:{args.fit}", cal)):
            errs = relative_errors(estimate(HERE / f"{n}.toml", gpu, calibration=c), doc)
            cells = [f"{v:+.1%}" if v is not None else "-" for v in errs.values()]
            print(f"{n:<18} {label:<18} {cells[0]:>8} {cells[1]:>8} {cells[2]:>9} "
                  f"{cells[3]:>8} {cells[4]:>9}")


if __name__ == "__main__":
    main()
