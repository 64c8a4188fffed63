#!/usr/bin/env bash
# The one command for a lent GPU machine (the `device` tool's `run`), prepared so a session's
# few minutes of device time go to measuring, not to setting up:
#
#   run(command="bash scripts/device_session.sh", carry=[".whl"], timeout_s=360)
#
# The inner budgets add up to about 330 s, so a session's 15 minutes (machine start
# included) leave room to run it twice. That machine has no registry access. Its image has
# numpy, typer, rich, cuda-core, cuda-bindings, nvidia-ml-py, pytest and nvcc, but not
# pyelftools; wheels for what it lacks travel in .whl/ (ignored by git; fetch them here first
# with scripts/device_wheels.sh). nvstage itself runs from src/ (no install, no build backend).
#
# Results: $OUT/summary.txt (one PASS/FAIL/SKIP line per check, then the model's error
# table, then this script's log), $OUT/results.tar.gz (every report, trace and log) and
# $OUT/measured.tar.gz: the raw `nvstage run --profile` JSON of every model workload, as
# docs/measured/GPU-DATE/NAME.run.json, for the model's offline validation
# (tests/model/test_measured.py): unpack it in the repository's root and commit it. The tool
# brings back at most 8 files, so everything else travels inside the archives. All are
# written on any exit, a timeout of a step included.
set -u
OUT="${OUT:-${1:-/tmp/nvstage-device-out}}"
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
RES=/tmp/nvstage-results
rm -rf "$RES" && mkdir -p "$RES/checks" "$RES/model"
log() { echo "== $(date +%T) $*" | tee -a "$RES/session.log" >&2; }

collect() {
  { cat "$RES/checks/summary.txt" 2>/dev/null || echo "FAIL gpu_checks wrote no summary"
    echo; cat "$RES/model/errors.txt" 2>/dev/null || echo "FAIL measure.sh wrote no errors.txt"
    echo; cat "$RES/session.log"; } > "$OUT/summary.txt"
  tar czf "$OUT/results.tar.gz" -C /tmp nvstage-results
  # The raw profiles under the name they keep in the repository: GPU (from nvidia-smi) and date.
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
        | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/[^a-z0-9]\+/-/g; s/-$//')
  dest="docs/measured/${gpu:-gpu}-$(date +%F)"
  rm -rf /tmp/nvstage-measured && mkdir -p "/tmp/nvstage-measured/$dest"
  cp "$RES"/model/*.run.json "/tmp/nvstage-measured/$dest/" 2>/dev/null
  tar czf "$OUT/measured.tar.gz" -C /tmp/nvstage-measured docs
  echo "raw profiles: $(ls "/tmp/nvstage-measured/$dest" | wc -l) in measured.tar.gz ($dest)" \
    >> "$OUT/summary.txt"
  cat "$OUT/summary.txt"
}
trap collect EXIT

PY=$(command -v python3)
if ls .whl/*.whl >/dev/null 2>&1; then
  # Only what the image lacks or has too old: one version of each package.
  want=(.whl/pyelftools-*.whl)
  # CUPTI's bindings, for the CUPTI-vs-events check (the image has nvidia-cuda-cupti only).
  "$PY" -c "import cupti" 2>/dev/null || want+=(.whl/cupti_python-*.whl)
  # cuda-core 1.2 needs cuda-pathfinder >= 1.4.2: both come along when the image's is older.
  "$PY" - <<'EOF' || want+=(.whl/cuda_core-*.whl .whl/cuda_pathfinder-*.whl)
import sys
from importlib.metadata import version
major, minor = (int(x) for x in version("cuda-core").split(".")[:2])
sys.exit(0 if (major, minor) >= (1, 2) else 1)
EOF
  log "installing ${want[*]}"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "${want[@]}" >> "$RES/session.log" 2>&1
  log "pip install rc=$?"
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# A kernel that never ends fails its run after this long instead of eating the budget.
export NVSTAGE_GPU_TIMEOUT_S=20
# `nvstage` and `python` as the examples' scripts call them.
mkdir -p /tmp/nvstage-bin
printf '#!/bin/sh\nexec %s -m nvstage "$@"\n' "$PY" > /tmp/nvstage-bin/nvstage
ln -sf "$PY" /tmp/nvstage-bin/python
chmod +x /tmp/nvstage-bin/nvstage
export PATH="/tmp/nvstage-bin:$PATH"

log "versions"
{ "$PY" -m pip list 2>/dev/null | grep -Ei '^(cuda|nvidia-ml|numpy|typer|rich|pyelftools|cupti)'
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,pcie.link.gen.max --format=csv
  nvcc --version | tail -2; } > "$RES/versions.txt" 2>&1
timeout 30 "$PY" -m nvstage doctor > "$RES/doctor.txt" 2>&1
log "doctor rc=$?"

log "gpu checks"
PYTHON="$PY" timeout 180 bash scripts/gpu_checks.sh "$RES/checks"
log "gpu_checks.sh rc=$? (124: its 180 s ran out)"
# timeout stops only its own child: a run it started must not share the GPU with what follows
pkill -f -- "-m nvstage" 2>/dev/null; pkill -f -- "-m pytest" 2>/dev/null

log "model: estimate vs measured"
timeout 120 bash examples/model/measure.sh "$RES/model" > "$RES/model/measure.log" 2>&1
log "measure.sh rc=$? (124: its 120 s ran out)"
