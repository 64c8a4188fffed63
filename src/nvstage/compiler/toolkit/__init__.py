"""Which CUDA toolkit nvstage uses and where it found it (``locate``), which nvcc a launcher command runs (``nvcc_lookup``), and a CMake toolchain file for it (``cmake_toolchain``)."""
