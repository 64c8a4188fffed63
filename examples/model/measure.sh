#!/usr/bin/env bash
# On a GPU machine: profile every example (serialized) into OUT/NAME.run.json, compare the
# chain variants with measurements, then print estimate-vs-measured errors.
set -euo pipefail
out=${1:?usage: measure.sh OUT}
mkdir -p "$out"
here=$(dirname "$0")
for w in "$here"/*.toml; do
  case "$w" in *.cost.toml) continue ;; esac
  n=$(basename "$w" .toml)
  nvstage run "$w" --profile --json "$out/$n.run.json" > "$out/$n.run.txt"
done
nvstage compare "$here/chain_unfused.toml" "$here/chain_fused.toml" --measure --svg "$out/unfused_vs_fused.svg" > "$out/compare_fusion.txt"
nvstage compare "$here/chain_fused.toml" "$here/chain_fused_wide.toml" --measure --svg "$out/fused_vs_wide.svg" > "$out/compare_wide.txt"
python "$here/errors.py" "$out" | tee "$out/errors.txt"
