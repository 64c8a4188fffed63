#!/usr/bin/env bash
# Every GPU check of `nvstage run` in one go, with what is installed here (no network).
#   scripts/gpu_checks.sh OUT_DIR
# Uses $PYTHON (default: .venv/bin/python if present, else python3). Writes everything to
# OUT_DIR; summary.txt has one PASS/FAIL/SKIP line per check.
set -u
OUT="${1:?usage: scripts/gpu_checks.sh OUT_DIR}"
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
mkdir -p "$OUT"
missing=0
for mod in nvstage numpy cuda.bindings cuda.core pynvml pytest; do
  if ! "$PY" -c "import $mod" 2>/dev/null; then
    echo "MISSING: python module $mod (for $PY)" | tee -a "$OUT/missing.txt"
    missing=1
  fi
done
"$PY" -c "import cupti" 2>/dev/null || echo "optional: cupti-python not installed; CUPTI checks are skipped" | tee -a "$OUT/missing.txt"
"$PY" -c "import triton" 2>/dev/null || echo "optional: triton not installed (nvstage[triton]); the Triton chain's GPU tests are skipped" | tee -a "$OUT/missing.txt"
if [ "$missing" = 1 ]; then
  echo "install the missing packages (cuda-core may need to travel as a wheel: pip install cuda_core-*.whl --no-deps)" >&2
  exit 3
fi
"$PY" -m nvstage doctor > "$OUT/doctor.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
exec "$PY" scripts/gpu_checks.py "$OUT"
