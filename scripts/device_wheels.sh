#!/usr/bin/env bash
# Fetch, on this machine (which has the registry), the wheels that device_session.sh installs
# on the GPU machine (which has none): its image runs Python 3.12 and lacks pyelftools and
# cupti-python, and its cuda-core may be older than the 1.2 this code is written against.
# cupti-python 13.0 (not the newest) matches the image's CUDA 13.0 driver and its
# nvidia-cuda-cupti 13.0. Into .whl/, which git ignores through .git/info/exclude (the device
# tool carries it when asked).
set -eu
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  cuda-core==1.2.2 cuda-pathfinder==1.9.1 pyelftools==0.33 cupti-python==13.0.1
ls -l .whl
