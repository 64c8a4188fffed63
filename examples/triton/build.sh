#!/usr/bin/env bash
# Build the Triton chain (kernels/triton/fusion_chain.py) into examples/triton/build/, one
# keep folder per kernel, for the workloads beside this script. Needs Triton (in nvstage's
# checkout: pip install -e '.[triton]').
#   examples/triton/build.sh [ARCH]      (default sm_90)
set -euo pipefail
cd "$(dirname "$0")"
arch="${1:-sm_90}"
src=../../kernels/triton/fusion_chain.py
build() {  # kernel signature
  nvstage compile "$src" --via triton --kernel "$1" --signature "$2" --constexpr BLOCK=1024 \
    --arch "$arch" --keep-dir "build/$1.triton" >/dev/null
}
build scale 'x:*fp32,t1:*fp32,a:fp32,n:i32'
build add_bias 't1:*fp32,b:*fp32,t2:*fp32,n:i32'
build gelu_act 't2:*fp32,y:*fp32,n:i32'
build fused 'x:*fp32,b:*fp32,y:*fp32,a:fp32,n:i32'
echo "built the Triton chain for $arch in $(pwd)/build"
